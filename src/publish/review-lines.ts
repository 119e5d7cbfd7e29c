/**
 * The lines of a pull request a review comment may be placed on: GitHub accepts a comment with
 * `side: RIGHT` only on a line of the head that one of the diff's hunks shows (an added line or a
 * context line) and answers 422 for any other. Read from each file's `patch` (as pulls.listFiles
 * gives it), or from the whole diff of the merge base and the head with git's default three lines
 * of context, which is the diff GitHub shows.
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
      // A context line is ' ' and the text; an empty line only ends the patch.
      if (right === 0 || text === '' || text.startsWith('\\')) continue;
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

/** The same, from a whole `git diff <merge-base> <head>` (a deleted file has no line to comment on). */
export function commentableLinesOfDiff(diff: string): CommentableLines {
  const files: { filename: string; patch: string }[] = [];
  for (const part of diff.split(/^diff --git /m).slice(1)) {
    const lines = part.split('\n');
    const to = lines.find((l) => l.startsWith('+++ '));
    if (to === undefined || !to.startsWith('+++ b/')) continue;
    const start = lines.findIndex((l) => l.startsWith('@@ '));
    files.push({
      filename: to.slice('+++ b/'.length),
      patch: start < 0 ? '' : lines.slice(start).join('\n'),
    });
  }
  return commentableLines(files);
}
