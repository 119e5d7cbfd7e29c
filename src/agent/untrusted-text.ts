/**
 * Hidden content in untrusted text: things a human reviewer does not see on GitHub but a model would
 * read as instructions. Removed before the text reaches a prompt.
 *
 * Code is left as it is (a code block's body and inline code are shown literally on GitHub), so the
 * constructs below are removed from the prose between code only. Telling code from prose without a
 * full CommonMark parser can go wrong in two directions, and they do not cost the same: prose taken
 * for code would let hidden text through, code taken for prose only loses some of its text. So code is
 * recognised only where GitHub cannot disagree (see `mapProse`), and everything else counts as prose.
 */

// Zero-width characters, the word joiner, soft hyphen, bidirectional controls, and tag characters.
const INVISIBLE =
  /[\u00AD\u180E\u200B-\u200F\u202A-\u202E\u2060-\u2064\u2066-\u206F\uFEFF]|\uDB40[\uDC00-\uDC7F]/g;
const HTML_COMMENT = /<!--[\s\S]*?(?:-->|$)/g;
const HIDDEN_HTML =
  /<(details|div|span|p)\b[^>]*\b(?:hidden|style\s*=\s*["'][^"']*display\s*:\s*none)[^>]*>[\s\S]*?<\/\1>/gi;
// GitHub's sanitiser drops script elements with their content.
const SCRIPT = /<script\b[^>]*>[\s\S]*?(?:<\/script\s*>|$)/gi;
// Markdown image alt text and titles are not shown in rendered issues: keep the image, drop the text.
const IMAGE_ALT = /!\[[^\]]*\]\(\s*([^)\s]+)(?:\s+"[^"]*")?\s*\)/g;
const HTML_ALT_TITLE = /\s(?:alt|title)\s*=\s*(?:"[^"]*"|'[^']*')/gi;

// Pieces of CommonMark link syntax. A backslash escapes any character here: over-matching an escape
// only makes a construct a little more likely to be recognised (and so removed).
const ESCAPED = String.raw`\\[\s\S]`;
/** A link label: at most 999 characters, not blank, not a footnote's `^label`. */
const LABEL = String.raw`(?!\^)[ \t\n]*(?:${ESCAPED}|[^\s\\\[\]])(?:${ESCAPED}|[^\\\[\]]){0,998}`;
/** Link text may hold one level of brackets (`[a [b] c]`). */
const LINK_TEXT = String.raw`(?:${ESCAPED}|[^\\\[\]]|\[(?:${ESCAPED}|[^\\\[\]])*\])*`;
const DESTINATION = String.raw`<[^<>\n]*>|(?:[^\s()<>\\]|${ESCAPED}|\((?:[^\s()<>\\]|${ESCAPED})*\))+`;
/** A link title; like a paragraph, it cannot hold a blank line. */
const TITLE_CHAR = (quote: string): string => String.raw`${ESCAPED}|[^${quote}\\\n]|\n(?![ \t]*\n)`;
const TITLE = String.raw`"(?:${TITLE_CHAR('"')})*"|'(?:${TITLE_CHAR("'")})*'|\((?:${TITLE_CHAR('()')})*\)`;
/** Blockquote markers and a list marker in front of a block (a definition can sit in either). */
const CONTAINER = String.raw`(?:[ \t]*>)*[ \t]*(?:(?:[-*+]|\d{1,9}[.)])[ \t]+)?`;

/**
 * `[label]: destination "title"` on its own line(s): a link reference definition, never shown. Also
 * recognised where CommonMark would read it as paragraph text (a definition cannot interrupt a
 * paragraph): such a line is rare, and removing it is the safe mistake.
 */
const DEFINITION = new RegExp(
  String.raw`^${CONTAINER}\[(${LABEL})\]:[ \t]*\n?${CONTAINER}(${DESTINATION})` +
    String.raw`(?:(?:[ \t]+|[ \t]*\n${CONTAINER})(?:${TITLE}))?[ \t]*(?:\n|$)`,
  'gm',
);
/**
 * `[^label]: text`, with its continuation lines (lazy ones up to a blank line, then indented blocks):
 * a footnote. GitHub shows a footnote only when the text refers to it.
 */
const FOOTNOTE =
  /^[ \t]{0,3}\[\^([^\]\s]+)\]:[^\n]*(?:\n(?![ \t]*\n)[^\n]*)*(?:\n[ \t]*\n(?: {4}|\t)[^\n]*(?:\n(?![ \t]*\n)[^\n]*)*)*/gm;
const FULL_REFERENCE = new RegExp(String.raw`(!?)\[(${LINK_TEXT})\]\[(${LABEL})\]`, 'g');
const COLLAPSED_REFERENCE = new RegExp(String.raw`(!?)\[(${LABEL})\]\[\]`, 'g');
const SHORTCUT_REFERENCE = new RegExp(String.raw`(!?)\[(${LABEL})\](?![[(:])`, 'g');
/** The tail of an inline link or image that has a title: `](destination "title")`. */
const LINK_TITLE = new RegExp(
  String.raw`\]\([ \t]*\n?[ \t]*(${DESTINATION})(?:[ \t]+\n?[ \t]*|[ \t]*\n[ \t]*)(?:${TITLE})[ \t]*\n?[ \t]*\)`,
  'g',
);
/** A line that looks like an opening fence in the prose (in a list item, or not taken for code). */
const FENCE_LINE = new RegExp(String.raw`^(${CONTAINER})(\`{3,}|~{3,})([^\n]*)$`, 'gm');

/**
 * The text as a reader sees it on GitHub, for a prompt: without HTML comments, hidden elements,
 * scripts, invisible characters, image alt text, link and image titles, link reference definitions
 * (references become inline links, so the hidden label of a full reference goes too), footnotes
 * nothing refers to, and fence info strings past the language. Code keeps its text; CRLF becomes LF.
 */
export function stripHiddenText(text: string): string {
  const source = text.replace(/\r\n?/g, '\n').replace(INVISIBLE, '');
  return mapProse(source, stripProse, { fenceOpener: (fence, info) => `${fence}${language(info)}` });
}

function stripProse(prose: string): string {
  let text = prose.replace(HTML_COMMENT, '').replace(HIDDEN_HTML, '').replace(SCRIPT, '');
  const referenced = new Set(
    [...text.matchAll(/\[\^([^\]\s]+)\](?!:)/g)].map((m) => normalizeLabel(m[1] ?? '')),
  );
  text = text.replace(FOOTNOTE, (m, label: string) => (referenced.has(normalizeLabel(label)) ? m : ''));
  // References are turned into inline links and every definition removed: a definition line is never
  // shown, and neither is the label of a full reference (`[text][label]` shows only `text`).
  const definitions = new Map<string, string>();
  text = text.replace(DEFINITION, (_m, label: string, destination: string) => {
    const key = normalizeLabel(label);
    if (!definitions.has(key)) definitions.set(key, destination);
    return '';
  });
  if (definitions.size > 0) {
    const inline = (m: string, bang: string, shown: string, label: string): string => {
      const destination = definitions.get(normalizeLabel(label));
      return destination === undefined ? m : `${bang}[${shown}](${destination})`;
    };
    text = text
      .replace(FULL_REFERENCE, inline)
      .replace(COLLAPSED_REFERENCE, (m, bang: string, label: string) => inline(m, bang, label, label))
      .replace(SHORTCUT_REFERENCE, (m, bang: string, label: string) => inline(m, bang, label, label));
  }
  return text
    .replace(LINK_TITLE, (_m, destination: string) => `](${destination})`)
    .replace(IMAGE_ALT, '![]($1)')
    .replace(HTML_ALT_TITLE, '')
    .replace(FENCE_LINE, (m, prefix: string, fence: string, info: string) =>
      fence.startsWith('`') && info.includes('`') ? m : `${prefix}${fence}${language(info)}`,
    );
}

/** CommonMark's label matching: case-insensitive, inner whitespace collapsed. */
function normalizeLabel(label: string): string {
  return label.trim().replace(/\s+/g, ' ').toLowerCase().toUpperCase().toLowerCase();
}

/**
 * What GitHub makes of a fence's info string: its first word picks the highlighting, nothing of it is
 * shown. The first word is kept when it looks like a language name, the rest is dropped.
 */
function language(info: string): string {
  const word = info.trim().split(/\s+/)[0] ?? '';
  return /^[A-Za-z0-9_+#.-]{1,32}$/.test(word) ? word : '';
}

/**
 * Wraps untrusted text in a tag the system prompt tells the model to treat as data. The closing tag
 * is neutralised inside the text so the text cannot end the fence early.
 */
export function fenceUntrusted(label: string, text: string): string {
  const tag = `untrusted-${label}`;
  const clean = stripHiddenText(text).replace(new RegExp(`</?${tag}`, 'gi'), (m) => m.replace('<', '&lt;'));
  return `<${tag}>\n${clean}\n</${tag}>`;
}

export interface ProseOptions {
  /** Rewrites the opening line of a recognised fenced code block (its body is never touched). */
  readonly fenceOpener?: (fence: string, info: string) => string;
}

const HOLD_OPEN = '\uE000';
const HOLD_CLOSE = '\uE001';
const HELD = /\uE000(\d+)\uE001/g;

/**
 * Applies `transform` to the prose of a Markdown text and returns the text with its code unchanged.
 * The prose is handed over with each piece of code replaced by a placeholder (private-use characters
 * around a number, on the code's own line for a code block); a transform that removes a region
 * around a placeholder removes the code with it, one that keeps the placeholder keeps the code.
 *
 * Code is recognised conservatively:
 * - a fenced code block only when its opening fence starts at column 0, or right after block quote
 *   markers that start at column 0, outside any HTML block (there no list item or HTML block can hold
 *   it, so GitHub reads it as a fence too); it runs to its closing fence, the end of the block quote
 *   (a line with fewer markers) or the end of the text, as CommonMark says;
 * - inline code only within one line, outside HTML blocks, and not after an HTML construct on that
 *   line that could continue onto the next one (code spans and raw HTML bind in order of appearance).
 * Fences in list items, indented code and code spans across lines count as prose.
 */
export function mapProse(
  text: string,
  transform: (prose: string) => string,
  options: ProseOptions = {},
): string {
  const held: string[] = [];
  const hold = (code: string): string => `${HOLD_OPEN}${held.push(code) - 1}${HOLD_CLOSE}`;
  const prose = holdCode(text.replace(/[\uE000\uE001]/g, '\uFFFD'), hold, options);
  return transform(prose)
    .replace(HELD, (_m, i: string) => held[Number(i)] ?? '')
    .replace(/[\uE000\uE001]/g, '');
}

const FENCE_OPEN = /^(`{3,}|~{3,})(.*?)\r?$/;
const FENCE_CLOSE = /^ {0,3}(`{3,}|~{3,})[ \t]*\r?$/;
const QUOTE_MARKER = /^ {0,3}> ?/;

/** How many block quote markers open `line`, and what follows them. */
function quoted(line: string, max = Infinity): { readonly depth: number; readonly content: string } {
  let depth = 0;
  let content = line;
  for (let m = QUOTE_MARKER.exec(content); m !== null && depth < max; m = QUOTE_MARKER.exec(content)) {
    content = content.slice(m[0].length);
    depth += 1;
  }
  return { depth, content };
}

function holdCode(text: string, hold: (code: string) => string, options: ProseOptions): string {
  const out: string[] = [];
  let fence: {
    readonly ch: string;
    readonly len: number;
    readonly depth: number;
    readonly lines: string[];
  } | null = null;
  // The end of the HTML block being read: a pattern on a line, or a blank line.
  let html: RegExp | 'blank' | null = null;
  for (const line of text.split('\n')) {
    if (fence !== null) {
      const inner = quoted(line, fence.depth);
      if (inner.depth === fence.depth) {
        fence.lines.push(line);
        const run = FENCE_CLOSE.exec(inner.content)?.[1];
        if (run !== undefined && run.startsWith(fence.ch) && run.length >= fence.len) {
          out.push(hold(fence.lines.join('\n')));
          fence = null;
        }
        continue;
      }
      // A line outside the block quote that holds the fence ends the quote, and the fence with it.
      out.push(hold(fence.lines.join('\n')));
      fence = null;
    }
    const { depth, content } = quoted(line);
    if (html !== null) {
      out.push(line);
      if (html === 'blank' ? content.trim() === '' : html.test(line)) html = null;
      continue;
    }
    const open = FENCE_OPEN.exec(content);
    const run = open?.[1];
    const info = open?.[2] ?? '';
    // A backtick fence's info string cannot hold a backtick (the line is inline code then).
    if (run !== undefined && !(run.startsWith('`') && info.includes('`'))) {
      const prefix = line.slice(0, line.length - content.length);
      const opener = options.fenceOpener === undefined ? line : `${prefix}${options.fenceOpener(run, info)}`;
      fence = { ch: run.charAt(0), len: run.length, depth, lines: [opener] };
      continue;
    }
    const end = htmlBlockEnd(content);
    if (end !== null) {
      out.push(line);
      html = end === 'blank' || !end.test(content.slice(content.indexOf('<') + 2)) ? end : null;
      continue;
    }
    out.push(holdSpans(line, hold));
  }
  if (fence !== null) out.push(hold(fence.lines.join('\n')));
  return out.join('\n');
}

/**
 * Where an HTML block that `line` starts ends (CommonMark's seven kinds), or null when it starts
 * none. Every `<` that may start one counts, also where CommonMark would not start a block there
 * (kind 7 cannot interrupt a paragraph): inside it nothing is code, which is the safe mistake.
 */
function htmlBlockEnd(line: string): RegExp | 'blank' | null {
  if (!/^ {0,3}<[A-Za-z/!?]/.test(line)) return null;
  if (/^ {0,3}<(?:script|pre|style|textarea)(?:[\s>]|$)/i.test(line))
    return /<\/(?:script|pre|style|textarea)>/i;
  if (/^ {0,3}<!--/.test(line)) return /-->/;
  if (/^ {0,3}<\?/.test(line)) return /\?>/;
  if (/^ {0,3}<!\[CDATA\[/.test(line)) return /\]\]>/;
  if (/^ {0,3}<![A-Za-z]/.test(line)) return />/;
  return 'blank';
}

/** Raw HTML and autolinks as CommonMark recognises them inline (each binds before a later backtick). */
const RAW_INLINE = new RegExp(
  [
    String.raw`<[A-Za-z][A-Za-z0-9-]*(?:\s+[A-Za-z_:][\w.:-]*(?:\s*=\s*(?:[^\s"'=<>\x60]+|'[^']*'|"[^"]*"))?)*\s*\/?>`,
    String.raw`<\/[A-Za-z][A-Za-z0-9-]*\s*>`,
    String.raw`<!--[\s\S]*?-->`,
    String.raw`<\?[\s\S]*?\?>`,
    String.raw`<!\[CDATA\[[\s\S]*?\]\]>`,
    String.raw`<![A-Za-z][^>]*>`,
    String.raw`<[A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]*>`,
    String.raw`<[\w.!#$%&'*+/=?^\x60{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*>`,
  ].join('|'),
  'y',
);

/** Holds the code spans of one line of prose. */
function holdSpans(line: string, hold: (code: string) => string): string {
  let out = '';
  let i = 0;
  while (i < line.length) {
    const ch = line.charAt(i);
    if (ch === '\\') {
      out += line.slice(i, i + 2);
      i += 2;
      continue;
    }
    if (ch === '<') {
      RAW_INLINE.lastIndex = i;
      const raw = RAW_INLINE.exec(line)?.[0];
      if (raw !== undefined) {
        out += raw;
        i += raw.length;
        continue;
      }
      // An HTML construct left open here may end on a later line, with any backtick inside it.
      if (/[A-Za-z/!?]/.test(line.charAt(i + 1))) return out + line.slice(i);
      out += ch;
      i += 1;
      continue;
    }
    if (ch === '`') {
      const n = runAt(line, i);
      const close = closingRun(line, i + n, n);
      if (close === -1) {
        out += line.slice(i, i + n);
        i += n;
      } else {
        out += hold(line.slice(i, close + n));
        i = close + n;
      }
      continue;
    }
    out += ch;
    i += 1;
  }
  return out;
}

function runAt(line: string, i: number): number {
  let n = 0;
  while (line.charAt(i + n) === '`') n += 1;
  return n;
}

/** The start of the next run of exactly `n` backticks from `from`, or -1. */
function closingRun(line: string, from: number, n: number): number {
  for (let i = from; i < line.length;) {
    if (line.charAt(i) !== '`') {
      i += 1;
      continue;
    }
    const m = runAt(line, i);
    if (m === n) return i;
    i += m;
  }
  return -1;
}
