import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import {
  hunkNewText,
  hunkOldText,
  parseUnifiedDiff,
  type FilePatch,
} from '../../src/model-sim/unified-diff.js';

const fixture = (name: string): Promise<string> =>
  readFile(new URL(`fixtures/${name}`, import.meta.url), 'utf8');

/** Applies hunks by position, independently of the oracle's str_replace strategy. */
function applyByLineNumbers(original: string, file: FilePatch): string {
  let result = original;
  for (const hunk of [...file.hunks].reverse()) {
    const lines = result.match(/[^\n]*\n|[^\n]+$/g) ?? [];
    // A hunk without old lines inserts after line oldStart; otherwise it starts at line oldStart.
    const start = hunk.oldLines === 0 ? hunk.oldStart : hunk.oldStart - 1;
    const removed = lines.slice(start, start + hunk.oldLines).join('');
    assert.equal(removed, hunkOldText(hunk));
    result = [...lines.slice(0, start), hunkNewText(hunk), ...lines.slice(start + hunk.oldLines)].join('');
  }
  return result;
}

void test('parses a git diff that creates one file and changes another in two hunks', async () => {
  const files = parseUnifiedDiff(await fixture('two-files.patch'));
  assert.equal(files.length, 2);
  const [created, changed] = files;
  assert.equal(created?.oldPath, null);
  assert.equal(created.newPath, 'src/clamp.ts');
  assert.equal(created.hunks.map(hunkNewText).join(''), await fixture('clamp-after.txt'));

  assert.equal(changed?.oldPath, 'src/math.ts');
  assert.equal(changed.newPath, 'src/math.ts');
  assert.deepEqual(
    changed.hunks.map((h) => [h.oldStart, h.oldLines, h.newStart, h.newLines]),
    [
      [1, 5, 1, 5],
      [11, 6, 11, 7],
    ],
  );
  const last = changed.hunks[1]?.lines.slice(-2);
  assert.deepEqual(last, [
    { kind: 'remove', text: 'export const VERSION = "1.0";', noNewline: true },
    { kind: 'add', text: 'export const VERSION = "1.1";', noNewline: true },
  ]);
  assert.equal(
    applyByLineNumbers(await fixture('math-before.txt'), changed),
    await fixture('math-after.txt'),
  );
});

void test('handles plain diff -u headers, omitted counts, deletions, empty new files and stripped blank context', () => {
  const diff = [
    '--- a.txt\t2024-01-01 00:00:00',
    '+++ a.txt\t2024-01-02 00:00:00',
    '@@ -1 +1 @@',
    '-old',
    '+new',
    '@@ -3,3 +3,2 @@',
    ' x',
    '',
    '-gone',
    'diff --git a/empty.txt b/empty.txt',
    'new file mode 100644',
    'index 0000000..e69de29',
    'diff --git a/dead.txt b/dead.txt',
    'deleted file mode 100644',
    '--- a/dead.txt',
    '+++ /dev/null',
    '@@ -1,2 +0,0 @@',
    '-one',
    '-two',
    '',
  ].join('\n');
  const [plain, empty, dead] = parseUnifiedDiff(diff);
  assert.equal(plain?.oldPath, 'a.txt');
  assert.equal(hunkOldText(plain.hunks[0] ?? assert.fail()), 'old\n');
  assert.equal(hunkOldText(plain.hunks[1] ?? assert.fail()), 'x\n\ngone\n');
  assert.equal(hunkNewText(plain.hunks[1] ?? assert.fail()), 'x\n\n');
  assert.deepEqual(empty, { oldPath: null, newPath: 'empty.txt', hunks: [] });
  assert.equal(dead?.oldPath, 'dead.txt');
  assert.equal(dead.newPath, null);
  assert.equal(hunkNewText(dead.hunks[0] ?? assert.fail()), '');
});

void test('keeps carriage returns and rejects what it cannot represent', () => {
  const [crlf] = parseUnifiedDiff('--- a/w.txt\n+++ b/w.txt\n@@ -1 +1 @@\n-a\r\n+b\r\n');
  assert.equal(hunkNewText(crlf?.hunks[0] ?? assert.fail()), 'b\r\n');

  assert.throws(
    () => parseUnifiedDiff('diff --git a/x b/y\nsimilarity index 90%\nrename from x\nrename to y\n'),
    /unsupported/,
  );
  assert.throws(
    () => parseUnifiedDiff('--- a/x\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n'),
    /renames are not supported/,
  );
  assert.throws(
    () => parseUnifiedDiff('diff --git a/x b/x\nBinary files a/x and b/x differ\n'),
    /unsupported/,
  );
  assert.throws(() => parseUnifiedDiff('--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n+b\n'), /truncated/);
  assert.throws(() => parseUnifiedDiff('--- a/x\n+++ b/x\n@@ -1 +1 @@\n*a\n'), /unexpected line/);
  assert.throws(() => parseUnifiedDiff('@@ -1 +1 @@\n-a\n+b\n'), /hunk outside of a file/);
  assert.deepEqual(parseUnifiedDiff(''), []);
});
