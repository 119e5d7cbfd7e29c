/**
 * Terminal output → styled spans, without ever treating the text as markup.
 *
 * Invariants:
 * - The output is a list of plain-text spans plus class names from a fixed set (`a-fg-N`, `a-bg-N`,
 *   `a-b`, `a-d`, `a-i`, `a-u`): nothing from the input becomes a class, an attribute or markup.
 * - Every escape sequence is consumed: SGR (colours, bold…) becomes classes, any other CSI, OSC
 *   (titles, hyperlinks) or two-byte escape is dropped, and other C0 controls except tab and newline
 *   are removed. A carriage return that is not part of CRLF overwrites the line as a terminal would.
 * Pure: also unit-tested under Node.
 */

export interface AnsiSpan {
  readonly text: string;
  /** Space-separated class names from the fixed set above; '' for unstyled text. */
  readonly classes: string;
}

const ESC = '\u001b';
const BEL = '\u0007';
/** SGR, other CSI, OSC (ended by BEL or ESC \), and two-byte escapes. Group 1 holds SGR parameters. */
const ESCAPE_RE = new RegExp(
  `${ESC}\\[([0-9;:]*)m|${ESC}\\[[0-?]*[ -/]*[@-~]|${ESC}\\][^${BEL}${ESC}]*(?:${BEL}|${ESC}\\\\)?|${ESC}[@-Z\\\\-_]?`,
  'g',
);
// C0 controls other than tab and newline (carriage returns are handled before), and DEL.
// eslint-disable-next-line no-control-regex
const CONTROL_RE = /[\u0000-\u0008\u000B-\u001A\u001C-\u001F\u007F]/g;

interface Style {
  fg: number | null;
  bg: number | null;
  bold: boolean;
  dim: boolean;
  italic: boolean;
  underline: boolean;
}

const plain = (): Style => ({ fg: null, bg: null, bold: false, dim: false, italic: false, underline: false });

function classesOf(s: Style): string {
  const c: string[] = [];
  if (s.fg !== null) c.push(`a-fg-${s.fg}`);
  if (s.bg !== null) c.push(`a-bg-${s.bg}`);
  if (s.bold) c.push('a-b');
  if (s.dim) c.push('a-d');
  if (s.italic) c.push('a-i');
  if (s.underline) c.push('a-u');
  return c.join(' ');
}

/** A 256-colour index maps to a class only in its first 16 entries; truecolour is dropped. */
function extended(params: readonly number[], i: number): { colour: number | null; used: number } {
  const mode = params[i + 1];
  if (mode === 5) {
    const n = params[i + 2];
    return { colour: n !== undefined && n >= 0 && n < 16 ? n : null, used: 2 };
  }
  if (mode === 2) return { colour: null, used: 4 };
  return { colour: null, used: 0 };
}

function applySgr(style: Style, raw: string): void {
  const params = raw === '' ? [0] : raw.split(/[;:]/).map((p) => (p === '' ? 0 : Number(p)));
  for (let i = 0; i < params.length; i++) {
    const p = params[i] ?? 0;
    if (p === 0) Object.assign(style, plain());
    else if (p === 1) style.bold = true;
    else if (p === 2) style.dim = true;
    else if (p === 3) style.italic = true;
    else if (p === 4) style.underline = true;
    else if (p === 22) {
      style.bold = false;
      style.dim = false;
    } else if (p === 23) style.italic = false;
    else if (p === 24) style.underline = false;
    else if (p >= 30 && p <= 37) style.fg = p - 30;
    else if (p >= 90 && p <= 97) style.fg = p - 90 + 8;
    else if (p === 39) style.fg = null;
    else if (p >= 40 && p <= 47) style.bg = p - 40;
    else if (p >= 100 && p <= 107) style.bg = p - 100 + 8;
    else if (p === 49) style.bg = null;
    else if (p === 38 || p === 48) {
      const { colour, used } = extended(params, i);
      if (p === 38) style.fg = colour;
      else style.bg = colour;
      i += used;
    }
  }
}

/** A bare carriage return rewinds to the start of the line: keep what was written last. */
function applyCarriageReturns(text: string): string {
  if (!text.includes('\r')) return text;
  return text
    .replace(/\r+\n/g, '\n')
    .split('\n')
    .map((line) => {
      const parts = line.split('\r').filter((p) => p !== '');
      return parts[parts.length - 1] ?? '';
    })
    .join('\n');
}

export function parseAnsi(input: string): AnsiSpan[] {
  const text = applyCarriageReturns(input);
  if (!text.includes(ESC)) {
    const clean = text.replace(CONTROL_RE, '');
    return clean === '' ? [] : [{ text: clean, classes: '' }];
  }
  const spans: AnsiSpan[] = [];
  const style = plain();
  let classes = '';
  const push = (chunk: string): void => {
    const clean = chunk.replace(CONTROL_RE, '');
    if (clean === '') return;
    const last = spans[spans.length - 1];
    if (last !== undefined && last.classes === classes)
      spans[spans.length - 1] = { text: last.text + clean, classes };
    else spans.push({ text: clean, classes });
  };
  let at = 0;
  for (const m of text.matchAll(ESCAPE_RE)) {
    push(text.slice(at, m.index));
    at = m.index + m[0].length;
    const sgr = m[1];
    if (sgr !== undefined) {
      applySgr(style, sgr);
      classes = classesOf(style);
    }
  }
  push(text.slice(at));
  return spans;
}

/** The text without escapes or controls, as `parseAnsi` would show it. */
export function stripAnsi(input: string): string {
  return parseAnsi(input)
    .map((s) => s.text)
    .join('');
}
