/**
 * Removes credentials from text before it is posted on GitHub.
 *
 * Two layers, both always applied:
 * 1. Known secrets (the installation token, the model key, anything else the caller holds), in the
 *    forms they show up in logs: as is, URL-encoded, JSON-escaped, and base64 (standard and URL-safe
 *    alphabets, at each of the three byte alignments, so a secret inside a longer encoded string —
 *    `Authorization: Basic base64("x-access-token:" + token)` — is found too).
 * 2. Patterns for credentials the bot must never post even when it does not know them: GitHub tokens,
 *    Anthropic keys, Authorization header values, private key blocks, passwords in URLs.
 *
 * Trade-offs:
 * - Secrets shorter than MIN_SECRET_LENGTH are ignored: replacing every "abc" would shred the text,
 *   and no real credential is that short.
 * - Patterns err towards redacting too much (e.g. a private key without its END line is redacted up
 *   to the last line that looks like key material).
 * - Known secrets are matched with zero-width joiners allowed between their characters (what the
 *   neutralisers insert), so neutralised text can still be redacted; other insertions are not undone.
 * - Redact before truncating: a secret cut in half by a truncation no longer matches anything.
 *   Callers in this folder redact the raw text first and the assembled page again at the end.
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

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * A pattern for `secret` that also matches it with zero-width joiners between its characters: the
 * neutralisers in markdown.ts and publishable.ts put one after `@`, `<` or `#` and into links, and text
 * that was neutralised before it is redacted must not hide a secret that holds such a character.
 */
function joinerTolerant(secret: string): string {
  // Code points: a joiner is never put inside a surrogate pair.
  return Array.from(secret).map(escapeRegExp).join('\u200D?');
}

/**
 * The part of base64(padding + secret) that depends on the secret's bytes only, for each of the three
 * alignments the secret can have inside a longer encoded string.
 */
function base64Forms(secret: string): string[] {
  const bytes = Buffer.from(secret, 'utf8');
  const forms: string[] = [];
  for (let k = 0; k < 3; k++) {
    const encoded = Buffer.concat([Buffer.alloc(k), bytes]).toString('base64');
    // Character i of base64 covers bits [6i, 6i+6); the secret covers bits [8k, 8(k+n)).
    const start = Math.ceil((8 * k) / 6);
    const end = Math.floor((8 * (k + bytes.length)) / 6);
    const core = encoded.slice(start, end);
    forms.push(core, core.replace(/\+/g, '-').replace(/\//g, '_'));
  }
  return forms;
}

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
 * Compiled forms of long secrets (the App's private key), shared by every Redactor of the process:
 * a worker makes one per job and per recorded text, and these are the same each time. Short ones
 * (tokens, keys) compile in well under a millisecond and are not kept, so no past job's token stays
 * in memory here. Bounded: the least recently used go first.
 */
const NEEDLE_CACHE = new Map<string, RegExp>();
const NEEDLE_CACHE_MAX = 64;
const CACHED_NEEDLE_MIN_LENGTH = 200;

function needleRegExp(needle: string): RegExp {
  if (needle.length < CACHED_NEEDLE_MIN_LENGTH) return new RegExp(joinerTolerant(needle), 'g');
  let re = NEEDLE_CACHE.get(needle);
  if (re === undefined) {
    re = new RegExp(joinerTolerant(needle), 'g');
    if (NEEDLE_CACHE.size >= NEEDLE_CACHE_MAX) {
      const [oldest] = NEEDLE_CACHE.keys();
      if (oldest !== undefined) NEEDLE_CACHE.delete(oldest);
    }
  } else {
    NEEDLE_CACHE.delete(needle);
  }
  NEEDLE_CACHE.set(needle, re);
  return re;
}

export class Redactor {
  /**
   * One expression per known form. Each is matched against the original text, and every match's
   * span is redacted, overlapping spans merged into one: two secrets that overlap in the text
   * (one's end is the other's start), a secret containing another, and a secret's occurrences that
   * overlap each other all go whole. Not one alternation of them all: V8 takes about half a second
   * to compile an alternation of a private key's joiner-tolerant forms, every time the set changes
   * (every job's token), with the event loop blocked; each form alone compiles in milliseconds (a
   * long one once).
   */
  private readonly known: readonly RegExp[];

  constructor(secrets: readonly string[]) {
    const needles = new Set<string>();
    for (const secret of secrets) {
      if (secret.length < MIN_SECRET_LENGTH) continue;
      needles.add(secret);
      needles.add(encodeURIComponent(secret));
      needles.add(JSON.stringify(secret).slice(1, -1));
      for (const form of base64Forms(secret)) if (form.length >= MIN_SECRET_LENGTH) needles.add(form);
    }
    this.known = [...needles].sort((a, b) => b.length - a.length).map(needleRegExp);
  }

  /** Whether the text holds one of the secrets this redactor was given (in any encoded form it knows). */
  containsKnownSecret(text: string): boolean {
    return this.known.some((re) => {
      re.lastIndex = 0;
      const found = re.test(text);
      re.lastIndex = 0;
      return found;
    });
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
    const spans: [number, number][] = [];
    for (const re of this.known) {
      re.lastIndex = 0;
      for (let m = re.exec(text); m !== null; m = re.exec(text)) {
        spans.push([m.index, m.index + m[0].length]);
        // The next occurrence may start inside this one ("abab" twice in "ababab").
        re.lastIndex = m.index + 1;
      }
      re.lastIndex = 0;
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
