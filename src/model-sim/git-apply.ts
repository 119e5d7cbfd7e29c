import type { FilePatch, Hunk } from './unified-diff.js';

/**
 * Applies parsed unified diffs the way `git apply` does with its defaults (no `--unidiff-zero`, no
 * `-C`, whitespace errors only warned about), ported from git's apply.c (`apply_one_fragment`,
 * `find_pos`, `match_fragment`, `update_image`):
 *
 * - A hunk's preimage is its context and removed lines; its search starts at its new-side line
 *   (`newStart - 1`, the position once earlier hunks have applied) and goes outward, one line later
 *   first, then one line earlier, and so on: a preimage that occurs more than once applies at the
 *   occurrence nearest that line (the later one on a tie).
 * - The whole preimage must match, byte for byte; context is never reduced.
 * - A hunk that starts at old line 0 or 1 must match at the top of the file; one without trailing
 *   context must match at its end.
 * - Lines written by an earlier hunk of the same file are never matched again.
 * - A created file starts empty (and must not exist); a deleted file must be emptied by its hunks.
 *
 * Texts are JS strings; matching is done on their UTF-8 bytes, as git does.
 */
export class PatchDoesNotApply extends Error {
  constructor(
    readonly path: string,
    /** 1-based, as git counts them; null when the file as a whole is refused. */
    readonly hunk: number | null,
    readonly reason: string,
  ) {
    super(`${path}: ${hunk === null ? '' : `hunk #${hunk} `}${reason}`);
    this.name = 'PatchDoesNotApply';
  }
}

/** One hunk as it applied: lines [line, line + removedLines) of `before` became `inserted`. */
export interface AppliedHunk {
  /** 1-based. */
  readonly hunk: number;
  readonly header: string;
  readonly before: string;
  readonly after: string;
  /** 0-based line of `before` where the hunk applied. */
  readonly line: number;
  readonly removedLines: number;
  readonly inserted: string;
  /** The applied line minus the line git started looking at (git's "offset N lines"). */
  readonly offset: number;
}

export interface AppliedFile {
  readonly text: string;
  readonly hunks: readonly AppliedHunk[];
}

export function hunkHeader(hunk: Hunk): string {
  return `@@ -${hunk.oldStart},${hunk.oldLines} +${hunk.newStart},${hunk.newLines} @@`;
}

/** The hunks of one file patch applied to `original` (pass '' for a file the patch creates). */
export function applyFileHunks(path: string, original: string, hunks: readonly Hunk[]): AppliedFile {
  const image = new Image(toBytes(original));
  const applied: AppliedHunk[] = [];
  hunks.forEach((hunk, index) => {
    const before = image.text();
    const { line, removedLines, inserted, offset } = applyHunk(path, image, hunk, index + 1);
    applied.push({
      hunk: index + 1,
      header: hunkHeader(hunk),
      before: fromBytes(before),
      after: fromBytes(image.text()),
      line,
      removedLines,
      inserted: fromBytes(inserted),
      offset,
    });
  });
  return { text: fromBytes(image.text()), hunks: applied };
}

/**
 * A whole patch applied to a set of files (path → text), file patch after file patch, as
 * `git apply` applies it to a work tree: all or nothing. The result maps every path the patch
 * touches to its new text, or to null when the patch deletes it.
 */
export function applyPatch(
  files: ReadonlyMap<string, string>,
  patch: readonly FilePatch[],
): Map<string, string | null> {
  const state = new Map<string, string | null>(files);
  const touched = new Map<string, string | null>();
  for (const file of patch) {
    const path = file.newPath ?? file.oldPath ?? '';
    const current = state.get(path) ?? null;
    if (file.oldPath === null && current !== null) {
      throw new PatchDoesNotApply(path, null, 'already exists, but the patch creates it');
    }
    if (file.oldPath !== null && current === null) {
      throw new PatchDoesNotApply(path, null, 'does not exist, but the patch changes it');
    }
    const { text } = applyFileHunks(path, current ?? '', file.hunks);
    if (file.newPath === null && text !== '') {
      throw new PatchDoesNotApply(path, null, 'the removal patch leaves file contents');
    }
    const result = file.newPath === null ? null : text;
    state.set(path, result);
    touched.set(path, result);
  }
  return touched;
}

const LINE_PATCHED = 1;

interface ImageLine {
  len: number;
  hash: number;
  flag: number;
}

/** git's `struct image`: a buffer (one char per byte) and its line table. */
class Image {
  lines: ImageLine[];

  constructor(public buf: string) {
    this.lines = splitLines(buf).map((text) => ({ len: text.length, hash: hashLine(text), flag: 0 }));
  }

  text(): string {
    return this.buf;
  }
}

interface Side {
  readonly buf: string;
  readonly lines: readonly { readonly len: number; readonly hash: number }[];
}

function applyHunk(
  path: string,
  img: Image,
  hunk: Hunk,
  nth: number,
): { line: number; removedLines: number; inserted: string; offset: number } {
  const pre: string[] = [];
  const post: string[] = [];
  let trailing = 0;
  for (const line of hunk.lines) {
    const text = toBytes(line.noNewline ? line.text : `${line.text}\n`);
    if (line.kind !== 'add') pre.push(text);
    if (line.kind !== 'remove') post.push(text);
    trailing = line.kind === 'context' ? trailing + 1 : 0;
  }
  const preimage = side(pre);
  const matchBeginning = hunk.oldStart === 0 || hunk.oldStart === 1;
  const matchEnd = trailing === 0;
  const pos = hunk.newStart === 0 ? 0 : hunk.newStart - 1;
  const at = findPos(img, preimage, pos, matchBeginning, matchEnd);
  if (at < 0) {
    const where =
      matchBeginning && matchEnd
        ? ' (the whole file)'
        : matchBeginning
          ? ' (at the top)'
          : matchEnd
            ? ' (at the end)'
            : '';
    throw new PatchDoesNotApply(
      path,
      nth,
      `(${hunkHeader(hunk)}) does not apply: its ${pre.length} old line(s) are not in the file${where}:\n${fromBytes(preimage.buf)}`,
    );
  }
  const inserted = post.join('');
  updateImage(img, at, preimage.lines.length, side(post));
  return { line: at, removedLines: pre.length, inserted, offset: at - pos };
}

function side(lines: readonly string[]): Side {
  return { buf: lines.join(''), lines: lines.map((text) => ({ len: text.length, hash: hashLine(text) })) };
}

/** git's find_pos: try `line`, then line+1, line-1, line+2, line-2, … until the file's ends. */
function findPos(img: Image, pre: Side, start: number, matchBeginning: boolean, matchEnd: boolean): number {
  let line = start;
  if (matchBeginning) line = 0;
  else if (matchEnd) line = img.lines.length - pre.lines.length;
  // git compares unsigned: a negative line is past the end too.
  if (line < 0 || line > img.lines.length) line = img.lines.length;

  let current = 0;
  for (let i = 0; i < line; i++) current += img.lines[i]?.len ?? 0;
  let backwards = current;
  let backwardsLno = line;
  let forwards = current;
  let forwardsLno = line;
  let currentLno = line;
  const nr = img.lines.length;
  for (let i = 0; ; i++) {
    if (matchFragment(img, pre, current, currentLno, matchBeginning, matchEnd)) return currentLno;
    for (;;) {
      if (backwardsLno === 0 && forwardsLno === nr) return -1;
      if (i & 1) {
        if (backwardsLno === 0) {
          i++;
          continue;
        }
        backwardsLno--;
        backwards -= img.lines[backwardsLno]?.len ?? 0;
        current = backwards;
        currentLno = backwardsLno;
      } else {
        if (forwardsLno === nr) {
          i++;
          continue;
        }
        forwards += img.lines[forwardsLno]?.len ?? 0;
        forwardsLno++;
        current = forwards;
        currentLno = forwardsLno;
      }
      break;
    }
  }
}

function matchFragment(
  img: Image,
  pre: Side,
  current: number,
  currentLno: number,
  matchBeginning: boolean,
  matchEnd: boolean,
): boolean {
  const nr = img.lines.length;
  // Without whitespace correction, a preimage reaching past the end never matches.
  if (pre.lines.length + currentLno > nr) return false;
  if (matchEnd && pre.lines.length + currentLno !== nr) return false;
  if (matchBeginning && currentLno !== 0) return false;
  for (let i = 0; i < pre.lines.length; i++) {
    const at = img.lines[currentLno + i];
    if (at === undefined || at.flag & LINE_PATCHED || at.hash !== pre.lines[i]?.hash) return false;
  }
  const fits = matchEnd
    ? current + pre.buf.length === img.buf.length
    : current + pre.buf.length <= img.buf.length;
  return fits && img.buf.startsWith(pre.buf, current);
}

/** git's update_image: the preimage's whole lines at `at` give way to the postimage, marked patched. */
function updateImage(img: Image, at: number, preLines: number, post: Side): void {
  let start = 0;
  for (let i = 0; i < at; i++) start += img.lines[i]?.len ?? 0;
  let removed = 0;
  for (let i = 0; i < preLines; i++) removed += img.lines[at + i]?.len ?? 0;
  img.buf = img.buf.slice(0, start) + post.buf + img.buf.slice(start + removed);
  img.lines.splice(
    at,
    preLines,
    ...post.lines.map((line) => ({ len: line.len, hash: line.hash, flag: LINE_PATCHED })),
  );
}

/** Lines with their `\n`; a last line without one is a line too. */
export function splitLines(text: string): string[] {
  return text.match(/[^\n]*\n|[^\n]+$/g) ?? [];
}

/** git's hash_line: only non-space bytes count (git's isspace: space, \t, \n, \r). */
function hashLine(text: string): number {
  let h = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) h = (Math.imul(h, 3) + (c & 0xff)) >>> 0;
  }
  return h;
}

/** One char per UTF-8 byte, so lengths and comparisons are git's. */
function toBytes(text: string): string {
  return Buffer.from(text, 'utf8').toString('latin1');
}

function fromBytes(bytes: string): string {
  return Buffer.from(bytes, 'latin1').toString('utf8');
}
