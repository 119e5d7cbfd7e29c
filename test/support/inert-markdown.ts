import { mapProse } from '../../src/agent/untrusted-text.js';

/**
 * What is still active in a body GitHub would render, outside code: a known secret, raw HTML other
 * than the App's layout tags (and its markers on the first and last line), a mention, a character
 * reference, a link, image, definition or autolink to a host other than `trustedHosts`. Empty: inert.
 * Written apart from the neutraliser (plain patterns, no URL parsing), so the two check each other.
 */
export function activeMarkdown(
  body: string,
  secrets: readonly string[],
  trustedHosts: readonly string[] = ['github.com'],
): string[] {
  const found: string[] = [];
  // Also a secret that a joiner or an escaped `&` split: the page shows it whole.
  const shown = body.replace(/\u200D/g, '').replace(/&amp;/g, '&');
  for (const s of secrets) if (shown.includes(s)) found.push(`secret ${s.slice(0, 6)}…`);
  const trusted = trustedHosts.map((h) => h.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|');
  const foreign = `(?!(?:${trusted})(?:[/?#)\\s]|$))`;
  const link = new RegExp(
    `\\][(:]\\s*<?(?:[a-z][a-z0-9+.-]*:(?!//)|(?:[a-z][a-z0-9+.-]*:)?[\\\\/]{2}${foreign})`,
    'gi',
  );
  const url = new RegExp(`(?:https?|ftp)://${foreign}[^\\s)]*|(?<![\\w./:@-])www\\.[^\\s)]*`, 'gi');
  mapProse(body, (prose) => {
    const lines = prose.split('\n');
    let last = lines.length - 1;
    while (last > 0 && (lines[last] ?? '').trim() === '') last -= 1;
    lines.forEach((l, i) => {
      const marker = /^<!-- issue-agent:[a-z]+(?: [^\s<>]+)* -->$/.test(l) && (i === 0 || i === last);
      const html = marker ? [] : l.matchAll(/<(?!\/?(?:details|summary|sub)>)[A-Za-z/!?][^>]{0,20}/g);
      for (const m of html) found.push(`html ${m[0]}`);
      for (const m of l.matchAll(/@[A-Za-z0-9_-]+/g)) found.push(`mention ${m[0]}`);
      for (const m of l.matchAll(link)) found.push(`link ${m[0]}`);
      for (const m of l.matchAll(url)) found.push(`url ${m[0]}`);
      for (const m of l.matchAll(/&#x?[0-9a-f]+;|&[a-z]+;/gi))
        if (m[0] !== '&amp;') found.push(`reference ${m[0]}`);
    });
    return prose;
  });
  return found;
}
