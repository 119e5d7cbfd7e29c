import { secretForms } from '../secrets/forms.js';

/**
 * Removes credentials from text before it is posted on GitHub.
 *
 * Two layers, both always applied:
 * 1. Known secrets (the installation token, the model key, the setup secrets, anything else the
 *    caller holds), in every form secrets/forms.ts lists: as is and reversed, URL-encoded,
 *    JSON-escaped, hex, and base64 and base32 at each byte alignment (so a secret inside a longer
 *    encoded string — `Authorization: Basic base64("x-access-token:" + token)` — is found too).
 * 2. Patterns for credentials the bot must never post even when it does not know them: GitHub tokens,
 *    Anthropic keys, Authorization header values, private key blocks, passwords in URLs.
 *
 * Trade-offs:
 * - Secrets shorter than MIN_SECRET_LENGTH are ignored: replacing every "abc" would shred the text,
 *   and no real credential is that short.
 * - Patterns err towards redacting too much (e.g. a private key without its END line is redacted up
 *   to the last line that looks like key material).
 * - Known secrets are matched with zero-width joiners allowed anywhere between their characters (what
 *   the neutralisers insert), so neutralised text can still be redacted; other insertions are not
 *   undone.
 * - Redact before truncating: a secret cut in half by a truncation no longer matches anything.
 *   Callers in this folder redact the raw text first and the assembled page again at the end.
 * - No list of forms is complete (an encoding is one line of code): this is the second line behind
 *   keeping secrets away from code that could encode them, never the first.
 */

export const REDACTED = '[REDACTED]';
export const MIN_SECRET_LENGTH = 8;

const GITHUB_TOKEN = /(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{16,}/g;
const GITHUB_PAT = /github_pat_[A-Za-z0-9_]{16,}/g;
/** Installation tokens in the older format. */
const GITHUB_V1_TOKEN = /\bv1\.[0-9a-f]{40}\b/g;
const ANTHROPIC_KEY = /sk-ant-[A-Za-z0-9_-]{8,}/g;
/** `Authorization: Bearer x`, `authorization: token x`, `"Authorization": "Basic x"`, `-H 'Authorization:Bearer x'`. */
const AUTH_WITH_SCHEME = /(\bauthorization["']?\s*[:=]\s*["']?\s*)(bearer|token|basic)(\s+)[^\s"',;]+/gi;
/** `Authorization: <opaque value>` without a scheme: only values that look like a credential. */
const AUTH_BARE = /(\bauthorization["']?\s*[:=]\s*["']?)[A-Za-z0-9._~+/=-]{16,}/gi;
/** `scheme://user:password@host`: the password part (a scheme is short; bounded, so linear). */
const URL_PASSWORD = /(\b[a-z][a-z0-9+.-]{0,31}:\/\/[^\s/@:]*:)[^\s/@]+@/gi;
/** `x-access-token:<token>@` also outside a full URL (e.g. a git remote printed without its scheme). */
const ACCESS_TOKEN_USERINFO = /(x-access-token:)[^\s@]+@/gi;

const BEGIN_KEY = /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----/g;
const END_KEY = /-----END [A-Z0-9 ]*PRIVATE KEY-----/g;
/** A line that can be part of a PEM body: base64, or a header such as `Proc-Type: 4,ENCRYPTED`. */
const PEM_LINE = /^[\t ]*(?:[A-Za-z0-9+/=]+|[A-Za-z][A-Za-z-]*:[^\n]*)?[\t ]*$/;
const BASE64_LINE = /^[\t ]*[A-Za-z0-9+/=]+[\t ]*$/;

/** What the neutralisers in markdown.ts and publishable.ts insert after `@`, `<` or `#` and into links. */
const JOINER = '\u200D';

function lineStart(text: string, i: number): number {
  return text.lastIndexOf('\n', i - 1) + 1;
}

function lineEnd(text: string, i: number): number {
  const nl = text.indexOf('\n', i);
  return nl === -1 ? text.length : nl;
}

/**
 * Private key blocks: BEGIN…END; a BEGIN without END up to the last line that looks like key
 * material; an END without BEGIN (the head was cut away) back to the first such line. Linear: each
 * marker is found once with a global regex and lines are walked with indexOf.
 */
function redactPrivateKeys(text: string): string {
  if (!text.includes('PRIVATE KEY-----')) return text;
  const ranges: [number, number][] = [];
  const ends: [number, number][] = [];
  END_KEY.lastIndex = 0;
  for (let m = END_KEY.exec(text); m !== null; m = END_KEY.exec(text))
    ends.push([m.index, m.index + m[0].length]);
  BEGIN_KEY.lastIndex = 0;
  let covered = 0;
  for (let m = BEGIN_KEY.exec(text); m !== null; m = BEGIN_KEY.exec(text)) {
    if (m.index < covered) continue;
    const begin = m.index;
    const end = ends.find(([s]) => s > begin);
    let stop: number;
    if (end !== undefined) {
      stop = end[1];
    } else {
      stop = begin + m[0].length;
      while (stop < text.length) {
        const next = lineEnd(text, stop + 1);
        const line = text.slice(stop + 1, next).replace(/\r$/, '');
        if (!PEM_LINE.test(line)) break;
        stop = next;
      }
    }
    ranges.push([begin, stop]);
    covered = stop;
    BEGIN_KEY.lastIndex = Math.max(BEGIN_KEY.lastIndex, stop);
  }
  for (const [s, e] of ends) {
    if (ranges.some(([a, b]) => s >= a && s < b)) continue;
    let start = lineStart(text, s);
    while (start > 0) {
      const prev = lineStart(text, start - 1);
      const line = text.slice(prev, start - 1).replace(/\r$/, '');
      if (!BASE64_LINE.test(line)) break;
      start = prev;
    }
    ranges.push([start, e]);
  }
  ranges.sort((a, b) => a[0] - b[0]);
  let out = '';
  let at = 0;
  for (const [s, e] of ranges) {
    if (s < at) continue;
    out += text.slice(at, s) + REDACTED;
    at = e;
  }
  return out + text.slice(at);
}

function isPlainObject(v: object): v is Record<string, unknown> {
  const proto: unknown = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/**
 * The text without its joiners, and where a character of that in the text is. A text without joiners
 * (the usual case) is used as it is.
 */
function withoutJoiners(text: string): { readonly hay: string; readonly toText: (i: number) => number } {
  let j = text.indexOf(JOINER);
  if (j === -1) return { hay: text, toText: (i) => i };
  // For the n-th joiner, the index without joiners of the first character after it: non-decreasing.
  const after: number[] = [];
  while (j !== -1) {
    after.push(j - after.length);
    j = text.indexOf(JOINER, j + 1);
  }
  return {
    hay: text.replaceAll(JOINER, ''),
    // The index plus the number of joiners before that character (found by binary search).
    toText: (i) => {
      let lo = 0;
      let hi = after.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if ((after[mid] ?? Infinity) <= i) lo = mid + 1;
        else hi = mid;
      }
      return i + lo;
    },
  };
}

/**
 * The needles of long secrets (the App's private key), shared by every Redactor of the process: a
 * worker makes one per job and per recorded text, and these are the same each time. Short ones
 * (tokens, keys) take microseconds and are not kept, so no past job's token stays in memory here.
 * Bounded: the least recently used go first.
 */
const FORMS_CACHE = new Map<string, readonly string[]>();
const FORMS_CACHE_MAX = 64;
const CACHED_SECRET_MIN_LENGTH = 200;

/** The forms of a secret as needles: without joiners (see withoutJoiners), none too short. */
function needlesOf(secret: string): readonly string[] {
  const cached = FORMS_CACHE.get(secret);
  if (cached !== undefined) {
    FORMS_CACHE.delete(secret);
    FORMS_CACHE.set(secret, cached);
    return cached;
  }
  const needles = secretForms(secret, MIN_SECRET_LENGTH)
    .map((form) => form.split(JOINER).join(''))
    .filter((needle) => needle.length >= MIN_SECRET_LENGTH);
  if (secret.length >= CACHED_SECRET_MIN_LENGTH) {
    if (FORMS_CACHE.size >= FORMS_CACHE_MAX) {
      const [oldest] = FORMS_CACHE.keys();
      if (oldest !== undefined) FORMS_CACHE.delete(oldest);
    }
    FORMS_CACHE.set(secret, needles);
  }
  return needles;
}

export class Redactor {
  /**
   * Every form of every known secret (secrets/forms.ts), without joiners. Each is looked for with
   * indexOf in the text with its joiners taken out, and every occurrence's span in the original
   * text is redacted, overlapping spans merged into one: two secrets that overlap in the text (one's
   * end is the other's start), a secret containing another, and a secret's occurrences that overlap
   * each other all go whole; the joiners inside a span go with it. Plain string search, not one
   * regular expression per form: a secret has about 40 forms, and indexOf (Boyer-Moore-Horspool in
   * V8) scans clean text several times faster than an expression that allows a joiner between every
   * two characters, with nothing to compile (a private key's forms are kilobytes long).
   */
  private readonly needles: readonly string[];

  constructor(secrets: readonly string[]) {
    const needles = new Set<string>();
    for (const secret of secrets) {
      if (secret.length < MIN_SECRET_LENGTH) continue;
      for (const needle of needlesOf(secret)) needles.add(needle);
    }
    this.needles = [...needles];
  }

  /** Whether the text holds one of the secrets this redactor was given (in any encoded form it knows). */
  containsKnownSecret(text: string): boolean {
    if (this.needles.length === 0) return false;
    const { hay } = withoutJoiners(text);
    return this.needles.some((needle) => hay.includes(needle));
  }

  redact(text: string): string {
    let out = this.redactKnown(text);
    out = redactPrivateKeys(out);
    return out
      .replace(GITHUB_PAT, REDACTED)
      .replace(GITHUB_TOKEN, REDACTED)
      .replace(GITHUB_V1_TOKEN, REDACTED)
      .replace(ANTHROPIC_KEY, REDACTED)
      .replace(AUTH_WITH_SCHEME, `$1$2$3${REDACTED}`)
      .replace(AUTH_BARE, `$1${REDACTED}`)
      .replace(URL_PASSWORD, `$1${REDACTED}@`)
      .replace(ACCESS_TOKEN_USERINFO, `$1${REDACTED}@`);
  }

  private redactKnown(text: string): string {
    if (this.needles.length === 0) return text;
    const { hay, toText } = withoutJoiners(text);
    const spans: [number, number][] = [];
    for (const needle of this.needles) {
      // The next occurrence may start inside this one ("abab" twice in "ababab").
      for (let i = hay.indexOf(needle); i !== -1; i = hay.indexOf(needle, i + 1)) {
        // The joiners inside an occurrence go with it.
        spans.push([toText(i), toText(i + needle.length - 1) + 1]);
      }
    }
    if (spans.length === 0) return text;
    spans.sort((a, b) => a[0] - b[0]);
    let out = '';
    let at = 0;
    let [start, end] = spans[0] ?? [0, 0];
    for (const [s, e] of spans) {
      if (s <= end) {
        end = Math.max(end, e);
        continue;
      }
      out += text.slice(at, start) + REDACTED;
      at = end;
      start = s;
      end = e;
    }
    return out + text.slice(at, start) + REDACTED + text.slice(end);
  }

  /**
   * A copy of a JSON-like value (strings, arrays, plain objects; keys included) with every string
   * redacted. Other objects (Dates, Maps, class instances) are returned as they are: serialise them
   * first if they can hold text. Shared and cyclic references are preserved.
   */
  redactDeep<T>(value: T): T {
    return this.walk(value, new Map()) as T;
  }

  private walk(value: unknown, seen: Map<object, unknown>): unknown {
    if (typeof value === 'string') return this.redact(value);
    if (typeof value !== 'object' || value === null) return value;
    const done = seen.get(value);
    if (done !== undefined) return done;
    if (Array.isArray(value)) {
      const out: unknown[] = [];
      seen.set(value, out);
      for (const item of value as unknown[]) out.push(this.walk(item, seen));
      return out;
    }
    if (!isPlainObject(value)) return value;
    const out: Record<string, unknown> = {};
    seen.set(value, out);
    for (const [k, v] of Object.entries(value)) {
      // defineProperty, not assignment: a "__proto__" key from JSON must stay a plain key.
      Object.defineProperty(out, this.redact(k), {
        value: this.walk(v, seen),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return out;
  }
}
