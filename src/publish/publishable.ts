/**
 * The one gate for text the App and the Action post on GitHub: issue and PR comments, review-thread
 * replies, PR bodies, progress and failure comments. Renderers make their untrusted parts inert where
 * they place them (markdown.ts); this pass is applied to the whole text right before it is sent, so
 * a render site that forgot a part, or a new one, still cannot post a secret or active Markdown.
 *
 * Invariants of `publishable(text)`, outside code (fenced blocks and code spans, which GitHub shows
 * literally; recognised as in `mapProse`, so text that might not be code is treated as prose):
 * - no known secret of the job and nothing that looks like a credential (the Redactor);
 * - no control or bidirectional character;
 * - no raw HTML except the App's layout tags `<details>`, `<summary>`, `<sub>` without attributes, and
 *   its own hidden marker as the first line and as the last line (markers.ts);
 * - no `@mention` (nobody is pinged) and no character reference (`&#64;` would spell one);
 * - no link, image, reference definition or autolink to a host outside `trustedHosts` (GitHub's own
 *   host and the App's run pages): the text stays, nothing loads or opens.
 * Issue references (`#12`) are left alone here: the App's own text uses them (`Fixes #12`), and the
 * renderers neutralise them in untrusted parts. Applying the pass twice gives the same text.
 */
import { mapProse } from '../agent/untrusted-text.js';
import { CHARACTER_REFERENCE, neutralizeLinks, stripControls, ZWJ } from './markdown.js';
import type { Redactor } from './redact.js';

declare const PUBLISHABLE: unique symbol;
/** Text that went through `publishable`: redacted and inert, ready to post. */
export type Publishable = string & { readonly [PUBLISHABLE]: true };

export interface Audience {
  /** Holds the job's secrets; its patterns apply in any case. */
  readonly redactor: Redactor;
  /** Hosts (`host` or `host:port`) that links may lead to: GitHub's and the App's own pages. */
  readonly trustedHosts: Iterable<string>;
}

/** The App's hidden markers (markers.ts): values are percent-encoded, so they hold no space or `>`. */
const MARKER_LINE = /^<!-- issue-agent:[a-z]+(?: [^\s<>]+)* -->$/;
/** The App's layout tags; without attributes they can neither load nor hide anything. */
const LAYOUT_TAG = /^<\/?(?:details|summary|sub)>/;

export function publishable(text: string, audience: Audience): Publishable {
  const trusted = new Set([...audience.trustedHosts].map((h) => h.toLowerCase()));
  // Redacted first, so nothing below can split a secret (the Redactor also sees through joiners).
  const lines = stripControls(audience.redactor.redact(text)).split('\n');
  const head = MARKER_LINE.test(lines[0] ?? '') ? lines.splice(0, 1) : [];
  let last = lines.length - 1;
  while (last >= 0 && (lines[last] ?? '').trim() === '') last -= 1;
  const tail = last >= 0 && MARKER_LINE.test(lines[last] ?? '') ? lines.splice(last) : [];
  const body = mapProse(lines.join('\n'), (prose) => neutralize(prose, trusted));
  return [...head, body, ...tail].join('\n') as Publishable;
}

function neutralize(prose: string, trusted: ReadonlySet<string>): string {
  // Links first: a joiner inserted after `@` or `<` would change how a destination parses.
  return neutralizeLinks(prose.replace(CHARACTER_REFERENCE, '&amp;'), trusted)
    .replace(/<(?=[A-Za-z/!?])/g, (lt: string, at: number, all: string) =>
      LAYOUT_TAG.test(all.slice(at, at + 12)) ? lt : `<${ZWJ}`,
    )
    .replace(/@(?=[A-Za-z0-9_-])/g, `@${ZWJ}`);
}

/**
 * The hosts people reach GitHub's pages on, from its REST API's base URL: `api.github.com` serves
 * `github.com`, `api.<sub>.ghe.com` serves `<sub>.ghe.com`, a server's `/api/v3` its own host.
 */
export function githubHosts(apiBaseUrl: string): string[] {
  const host = hostOf(apiBaseUrl);
  if (host === null) return [];
  return host.startsWith('api.') ? [host.slice(4), host] : [host];
}

/** The hosts of the http(s) URLs in a text the App wrote itself (a run link, a sentence holding one). */
export function hostsIn(text: string | null | undefined): string[] {
  if (text === null || text === undefined) return [];
  return [...text.matchAll(/https?:\/\/[^\s/?#<>()"'`]+/gi)].flatMap((m) => {
    const host = hostOf(m[0]);
    return host === null ? [] : [host];
  });
}

function hostOf(url: string): string | null {
  try {
    const parsed = new URL(url);
    return parsed.protocol === 'https:' || parsed.protocol === 'http:' ? parsed.host.toLowerCase() : null;
  } catch {
    return null;
  }
}
