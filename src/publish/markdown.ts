/**
 * Building blocks for GitHub-flavoured Markdown that carries untrusted text (model output, command
 * output, test names, issue titles) without letting it change the page around it.
 *
 * Invariants every helper keeps:
 * - Output of `fenced` and `codeSpan` is literal on GitHub: the delimiter is longer than any backtick
 *   run inside, so nothing inside can close it, and code is never rendered as HTML, mentions or
 *   issue references.
 * - Output of `neutralizeProse` contains no HTML tag, comment or declaration opener (`<` followed by
 *   a letter, `/`, `!` or `?`), no `@mention`, no `#123` / `GH-123` reference, no closing keyword
 *   followed by an issue URL, no character reference (shown as typed) and no link, image or autolink
 *   to another site (`neutralizeLinks`). A zero-width joiner (U+200D) is inserted so the text reads
 *   the same.
 * - `balanceFences` closes a fenced block left open, so text placed in a container cannot swallow
 *   the Markdown that follows it.
 * Lengths that matter for GitHub's limits are measured in UTF-8 bytes (`byteLength`): GitHub counts
 * characters, and a byte count is never smaller than either a code point or a UTF-16 count, so a
 * budget in bytes is safe whatever the counting.
 */

export const ZWJ = '\u200D';

export function byteLength(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

// Bidirectional overrides and isolates make text display in an order different from its bytes.
const BIDI_CONTROLS = /[\u202A-\u202E\u2066-\u2069]/g;
// C0 controls other than tab, newline and carriage return, and DEL. NUL in particular is refused by
// some GitHub endpoints; CommonMark would show U+FFFD for it anyway.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F]/g;

/** Removes characters that have no business in a posted page (control and bidi characters). */
export function stripControls(text: string): string {
  return text.replace(CONTROL, '\uFFFD').replace(BIDI_CONTROLS, '');
}

/**
 * Untrusted text meant to be read as Markdown prose. Keeps emphasis, lists and code, but cannot open
 * HTML (`<details>`, `</details>`, `<!-- -->`, `<img>`), ping anyone, reference or close an issue.
 */
export function neutralizeProse(text: string): string {
  return neutralizeLinks(
    stripControls(text)
      // HTML tags, closing tags, comments, declarations and processing instructions.
      .replace(/<(?=[A-Za-z/!?])/g, `<${ZWJ}`)
      // @user and @org/team mentions (GitHub never pings across a joiner).
      .replace(/@(?=[A-Za-z0-9_-])/g, `@${ZWJ}`)
      // #123, owner/repo#123 and GH-123 issue references, which would also link (and with a closing
      // keyword, close) another issue.
      .replace(/#(?=\d)/g, `#${ZWJ}`)
      .replace(/\bGH-(?=\d)/gi, (m) => `${m}${ZWJ}`)
      // "fixes https://github.com/o/r/issues/1" closes an issue too: break the keyword instead.
      .replace(
        /\b(clos|fix|resolv)(es|ed|e)?(?=:?\s+https?:\/\/)/gi,
        (_m, stem: string, end: string | undefined) =>
          `${stem.slice(0, 1)}${ZWJ}${stem.slice(1)}${end ?? ''}`,
      )
      .replace(CHARACTER_REFERENCE, '&amp;'),
  );
}

/**
 * `&#64;`, `&commat;`, `&#58;`: GitHub shows the character, and pings or links what it spells. Shown
 * as typed instead (`&amp;` is left as it is, so that neutralising twice changes nothing).
 */
export const CHARACTER_REFERENCE = /&(?!amp;)(?=#?[A-Za-z0-9]+;)/g;

const NO_HOSTS: ReadonlySet<string> = new Set();
/** Where a relative destination resolves in the check: a relative link stays on the page's site. */
const RELATIVE_BASE = 'https://relative.invalid/';
/** `](destination` of an inline link or image, `]: destination` of a reference definition. */
const LINK_DESTINATION =
  /\]([(:])([ \t]*\n?[ \t]*)(<[^<>\n]*>|(?:[^\s()<>\\]|\\[\s\S]|\((?:[^\s()<>\\]|\\[\s\S])*\))*)/g;
/** The scheme and authority of a URL GitHub turns into a link on its own (GFM's extended autolinks). */
const BARE_URL = /(?<![A-Za-z0-9+.-])(https?|ftp)(:\/\/)([^\s/?#<>"'`\\()[\]]*)/gi;
const BARE_WWW = /(?<![A-Za-z0-9.\-/:@])(www)(\.[^\s/?#<>"'`\\()[\]]*)/gi;

/**
 * Links, images and autolinks that lead to a host not in `trusted` (`host` or `host:port`, lower
 * case) become plain text: a joiner after the `]` of an inline link, image or reference definition,
 * and inside a bare URL's scheme (`http‍://`) or after its `www`. What they say stays readable, nothing
 * loads or opens. A relative destination resolves on GitHub and is left alone. Destinations are judged
 * as a browser reads them: character references and backslash escapes decoded, tabs ignored; one that
 * cannot be read as a URL counts as foreign.
 */
export function neutralizeLinks(text: string, trusted: ReadonlySet<string> = NO_HOSTS): string {
  return text
    .replace(LINK_DESTINATION, (m, open: string, space: string, destination: string) =>
      trustedDestination(destination, trusted) ? m : `]${ZWJ}${open}${space}${destination}`,
    )
    .replace(BARE_URL, (m, scheme: string, sep: string, authority: string) =>
      trustedDestination(`${scheme}${sep}${trimAuthority(authority)}/`, trusted)
        ? m
        : `${scheme}${ZWJ}${sep}${authority}`,
    )
    .replace(BARE_WWW, (m, www: string, rest: string) =>
      trustedDestination(`https://${www}${trimAuthority(rest)}/`, trusted) ? m : `${www}${ZWJ}${rest}`,
    );
}

/** GFM leaves trailing punctuation out of an autolink. */
function trimAuthority(authority: string): string {
  return authority.replace(/[.,;:!?*_~'"]+$/, '');
}

/** No host name is longer (253 characters, plus a port and user info); parsing more is wasted work. */
const MAX_AUTHORITY = 320;

function trustedDestination(raw: string, trusted: ReadonlySet<string>): boolean {
  const bare = raw.startsWith('<') && raw.endsWith('>') ? raw.slice(1, -1) : raw;
  const authority = /^[a-z][a-z0-9+.-]*:[\\/]*([^\\/?#]*)/i.exec(bare.trim())?.[1];
  if (authority !== undefined && authority.length > MAX_AUTHORITY) return false;
  const destination = bare
    .replace(/&#(\d{1,7});/g, (_m, n: string) => codePoint(Number(n)))
    .replace(/&#[xX]([0-9a-fA-F]{1,6});/g, (_m, n: string) => codePoint(parseInt(n, 16)))
    .replace(/\\([!-/:-@[-`{-~])/g, '$1');
  if (destination.trim() === '') return true;
  // A named reference could spell a scheme or a slash; the table is not worth carrying for that.
  if (/&[A-Za-z][A-Za-z0-9]*;/.test(destination)) return false;
  let url: URL;
  try {
    url = new URL(destination, RELATIVE_BASE);
  } catch {
    return false;
  }
  if (url.host === new URL(RELATIVE_BASE).host) return true;
  return (url.protocol === 'https:' || url.protocol === 'http:') && trusted.has(url.host.toLowerCase());
}

function codePoint(n: number): string {
  return n > 0 && n <= 0x10ffff ? String.fromCodePoint(n) : '\uFFFD';
}

/** Untrusted text for one line (a list item, a heading, a table cell): prose without line breaks. */
export function neutralizeInline(text: string): string {
  return neutralizeProse(text.replace(/\s*[\r\n]+\s*/g, ' ').trim());
}

/** A table cell: inline prose with `|` escaped (GFM splits cells on `|` even inside code spans). */
export function tableCell(markdown: string): string {
  return markdown.replace(/\|/g, '\\|');
}

function longestRun(text: string, ch: string): number {
  let longest = 0;
  let run = 0;
  for (const c of text) {
    run = c === ch ? run + 1 : 0;
    if (run > longest) longest = run;
  }
  return longest;
}

/** Inline code that shows `text` literally on one line. */
export function codeSpan(text: string): string {
  const flat = stripControls(text).replace(/[\r\n]+/g, ' ');
  if (flat.trim() === '') return '` `';
  const ticks = '`'.repeat(longestRun(flat, '`') + 1);
  // A span starting or ending with a backtick needs a space so the delimiter stays separate; a span
  // with a space at both ends loses one on each side, so pad those too.
  const pad = flat.startsWith('`') || flat.endsWith('`') || (flat.startsWith(' ') && flat.endsWith(' '));
  const space = pad ? ' ' : '';
  return `${ticks}${space}${flat}${space}${ticks}`;
}

/** A fenced code block showing `text` literally; the fence is longer than any backtick run inside. */
export function fenced(text: string, info = 'text'): string {
  const clean = stripControls(text).replace(/\r\n?/g, '\n').replace(/\n+$/, '');
  const fence = '`'.repeat(Math.max(3, longestRun(clean, '`') + 1));
  return `${fence}${info}\n${clean}\n${fence}`;
}

/**
 * Closes a fenced code block that `markdown` opens and leaves open (CommonMark: a fence of 3+ backticks
 * or tildes indented at most 3 spaces; a closing fence uses the same character, at least as long).
 * Indented fences (inside list items) are closed by their container ending, so they are left alone.
 */
export function balanceFences(markdown: string): string {
  let open: { ch: string; len: number } | null = null;
  for (const line of markdown.split('\n')) {
    const m = /^ {0,3}(`{3,}|~{3,})(.*)$/.exec(line.replace(/\r$/, ''));
    if (m === null) continue;
    const run = m[1] ?? '';
    const rest = m[2] ?? '';
    const ch = run.charAt(0);
    if (open === null) {
      // A backtick fence's info string may not contain a backtick (then it is inline code).
      if (ch === '`' && rest.includes('`')) continue;
      open = { ch, len: run.length };
    } else if (ch === open.ch && run.length >= open.len && rest.trim() === '') {
      open = null;
    }
  }
  return open === null ? markdown : `${markdown.replace(/\n*$/, '')}\n${open.ch.repeat(open.len)}`;
}

/** Prefixes every line with `> `: a container that also ends anything left open inside it. */
export function blockquote(markdown: string): string {
  return markdown
    .split('\n')
    .map((l) => (l.trim() === '' ? '>' : `> ${l}`))
    .join('\n');
}

/** The index at or before `i` that does not split a UTF-16 surrogate pair. */
function safeCut(text: string, i: number): number {
  if (i <= 0 || i >= text.length) return Math.max(0, Math.min(i, text.length));
  const code = text.charCodeAt(i);
  return code >= 0xdc00 && code <= 0xdfff ? i - 1 : i;
}

/**
 * Shortens text to about `max` characters keeping its head and tail (where errors and summaries are),
 * cut at line ends when a line end is near, with a line saying how much was left out.
 */
export function truncateMiddle(text: string, max: number): string {
  if (text.length <= max) return text;
  if (max <= 0) return `[… ${text.length.toLocaleString('en-US')} characters omitted …]`;
  let headEnd = safeCut(text, Math.floor(max * 0.6));
  let tailStart = safeCut(text, text.length - Math.floor(max * 0.4));
  // Prefer whole lines when that costs at most a fifth of each side.
  const nl = text.lastIndexOf('\n', headEnd);
  if (nl > headEnd - max * 0.12 && nl > 0) headEnd = nl;
  const nl2 = text.indexOf('\n', tailStart);
  if (nl2 !== -1 && nl2 < tailStart + max * 0.08) tailStart = nl2 + 1;
  const omitted = tailStart - headEnd;
  return `${text.slice(0, headEnd)}\n[… ${omitted.toLocaleString('en-US')} characters omitted …]\n${text.slice(tailStart)}`;
}

/** Cuts to at most `max` characters, ending with `…` when cut (never inside a surrogate pair). */
export function truncateEnd(text: string, max: number): string {
  if (text.length <= max) return text;
  return `${text.slice(0, safeCut(text, max - 1))}…`;
}

/** Cuts to at most `max` characters keeping both ends, joined by `…` (for names whose end matters). */
export function truncateInline(text: string, max: number): string {
  if (text.length <= max) return text;
  if (max < 3) return truncateEnd(text, max);
  const head = safeCut(text, Math.ceil((max - 1) / 2));
  const tail = safeCut(text, text.length - Math.floor((max - 1) / 2));
  return `${text.slice(0, head)}…${text.slice(tail)}`;
}

export function formatInt(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

export function formatUsd(usd: number): string {
  return `$${usd.toFixed(usd !== 0 && usd < 1 ? 4 : 2)}`;
}

export function formatDuration(ms: number): string {
  const s = Math.max(0, ms) / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const total = Math.round(s);
  const h = Math.floor(total / 3600);
  const min = Math.floor((total % 3600) / 60);
  const sec = total % 60;
  return h > 0 ? `${h} h ${String(min).padStart(2, '0')} min` : `${min} min ${sec} s`;
}
