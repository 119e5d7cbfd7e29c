/**
 * The lines of a pull request a review comment may be placed on: GitHub accepts a comment with
 * `side: RIGHT` only on a line of the head that one of the diff's hunks shows (an added line or a
 * context line) and answers 422 for any other. Read from each file's `patch` (pulls.listFiles).
 */
export type CommentableLines = ReadonlyMap<string, ReadonlySet<number>>;

export function commentableLines(
  files: readonly { readonly filename: string; readonly patch?: string | undefined }[],
): CommentableLines {
  const out = new Map<string, Set<number>>();
  for (const file of files) {
    const lines = new Set<number>();
    let right = 0;
    for (const text of (file.patch ?? '').split('\n')) {
      const hunk = /^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(text);
      if (hunk !== null) {
        right = Number(hunk[1]);
        continue;
      }
      if (right === 0 || text.startsWith('\\')) continue;
      if (text.startsWith('-')) continue;
      lines.add(right);
      right += 1;
    }
    out.set(file.filename, lines);
  }
  return out;
}

/** Where a comment on `path` at `line` may go: on that line, or (outside the diff) into the body. */
export function placeComment(lines: CommentableLines, path: string, line: number): 'line' | 'body' {
  return lines.get(path)?.has(line) === true ? 'line' : 'body';
}
