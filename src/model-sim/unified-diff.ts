/**
 * A parser for unified diffs as `git diff` writes them (also plain `diff -u`). Line text keeps every
 * byte but the line's `\n` (a `\r` stays in the text); `noNewline` marks a line followed by
 * `\ No newline at end of file`. Renames, copies and binary patches are rejected.
 */
export interface DiffLine {
  readonly kind: 'context' | 'add' | 'remove';
  readonly text: string;
  readonly noNewline: boolean;
}

export interface Hunk {
  readonly oldStart: number;
  readonly oldLines: number;
  readonly newStart: number;
  readonly newLines: number;
  readonly lines: readonly DiffLine[];
}

export interface FilePatch {
  /** null when the file is created (`--- /dev/null`). */
  readonly oldPath: string | null;
  /** null when the file is deleted (`+++ /dev/null`). */
  readonly newPath: string | null;
  readonly hunks: readonly Hunk[];
}

export function parseUnifiedDiff(diff: string): FilePatch[] {
  const lines = diff.split('\n');
  if (lines.at(-1) === '') lines.pop();
  const files: FilePatch[] = [];
  // A `diff --git` header whose `---`/`+++` lines have not come (yet): an empty new or deleted file has none.
  let git: { path: string | null; created: boolean; deleted: boolean } | null = null;
  const flushGit = (): void => {
    if (git?.path != null && (git.created || git.deleted)) {
      files.push({
        oldPath: git.created ? null : git.path,
        newPath: git.deleted ? null : git.path,
        hunks: [],
      });
    }
    git = null;
  };

  let i = 0;
  while (i < lines.length) {
    const line = lines[i] ?? '';
    const next = lines[i + 1] ?? '';
    if (line.startsWith('diff --git ')) {
      flushGit();
      const paths = /^diff --git a\/(.+) b\/(.+)$/.exec(line);
      git = { path: paths?.[1] === paths?.[2] ? (paths?.[1] ?? null) : null, created: false, deleted: false };
    } else if (git !== null && line.startsWith('new file mode')) {
      git.created = true;
    } else if (git !== null && line.startsWith('deleted file mode')) {
      git.deleted = true;
    } else if (/^(rename|copy) from |^Binary files |^GIT binary patch/.test(line)) {
      throw new Error(`unified diff line ${i + 1}: unsupported (${line})`);
    } else if (line.startsWith('--- ') && next.startsWith('+++ ')) {
      git = null;
      const oldPath = parsePath(line.slice(4), 'a/');
      const newPath = parsePath(next.slice(4), 'b/');
      if (oldPath !== null && newPath !== null && oldPath !== newPath) {
        throw new Error(`unified diff line ${i + 1}: renames are not supported (${oldPath} -> ${newPath})`);
      }
      i += 2;
      const hunks: Hunk[] = [];
      while (lines[i]?.startsWith('@@ ')) {
        const parsed = parseHunk(lines, i);
        hunks.push(parsed.hunk);
        i = parsed.next;
      }
      if (hunks.length === 0) throw new Error(`unified diff line ${i + 1}: expected a hunk header`);
      files.push({ oldPath, newPath, hunks });
      continue;
    } else if (line.startsWith('@@ ')) {
      throw new Error(`unified diff line ${i + 1}: hunk outside of a file`);
    }
    i++;
  }
  flushGit();
  return files;
}

/** The text a hunk replaces: its context and removed lines, with their line ends. */
export function hunkOldText(hunk: Hunk): string {
  return joinLines(hunk.lines.filter((line) => line.kind !== 'add'));
}

/** The text a hunk puts in place: its context and added lines, with their line ends. */
export function hunkNewText(hunk: Hunk): string {
  return joinLines(hunk.lines.filter((line) => line.kind !== 'remove'));
}

function joinLines(lines: readonly DiffLine[]): string {
  return lines.map((line) => (line.noNewline ? line.text : `${line.text}\n`)).join('');
}

function parsePath(field: string, prefix: 'a/' | 'b/'): string | null {
  // `diff -u` appends a tab and a timestamp.
  const path = field.split('\t')[0] ?? '';
  if (path === '/dev/null') return null;
  return path.startsWith(prefix) ? path.slice(prefix.length) : path;
}

const KINDS: Record<string, DiffLine['kind']> = { ' ': 'context', '-': 'remove', '+': 'add' };

function parseHunk(lines: readonly string[], start: number): { hunk: Hunk; next: number } {
  const header = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/.exec(lines[start] ?? '');
  if (header === null) throw new Error(`unified diff line ${start + 1}: malformed hunk header`);
  const [, oldStart = '', oldLines = '1', newStart = '', newLines = '1'] = header;
  const hunk = {
    oldStart: Number(oldStart),
    oldLines: Number(oldLines),
    newStart: Number(newStart),
    newLines: Number(newLines),
    lines: [] as DiffLine[],
  };
  let oldSeen = 0;
  let newSeen = 0;
  let i = start + 1;
  const markNoNewline = (): void => {
    const last = hunk.lines.pop();
    if (last === undefined) throw new Error(`unified diff line ${i + 1}: "\\ No newline" before any line`);
    hunk.lines.push({ ...last, noNewline: true });
  };
  while (oldSeen < hunk.oldLines || newSeen < hunk.newLines) {
    const line = lines[i];
    if (line === undefined) throw new Error(`unified diff: hunk at line ${start + 1} is truncated`);
    if (line.startsWith('\\')) {
      markNoNewline();
    } else {
      // Some tools strip the single space of an empty context line.
      const kind = line === '' ? 'context' : KINDS[line[0] ?? ''];
      if (kind === undefined) throw new Error(`unified diff line ${i + 1}: unexpected line in hunk: ${line}`);
      hunk.lines.push({ kind, text: line.slice(1), noNewline: false });
      if (kind !== 'add') oldSeen++;
      if (kind !== 'remove') newSeen++;
    }
    i++;
  }
  if (lines[i]?.startsWith('\\')) {
    markNoNewline();
    i++;
  }
  if (oldSeen !== hunk.oldLines || newSeen !== hunk.newLines) {
    throw new Error(`unified diff: hunk at line ${start + 1} does not match its line counts`);
  }
  return { hunk, next: i };
}
