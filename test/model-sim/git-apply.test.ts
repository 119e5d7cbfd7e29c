import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { applyFileHunks, applyPatch, PatchDoesNotApply } from '../../src/model-sim/git-apply.js';
import { parseUnifiedDiff } from '../../src/model-sim/unified-diff.js';
import { GitScratch, type ApplyOutcome } from './git-fixtures.js';

const scratch = new GitScratch();
after(() => {
  scratch.cleanup();
});

function ours(files: ReadonlyMap<string, string>, patch: string): ApplyOutcome {
  try {
    return applyPatch(files, parseUnifiedDiff(patch));
  } catch (error) {
    if (error instanceof PatchDoesNotApply) return { error: error.message };
    throw error;
  }
}

function assertSameAsGit(files: ReadonlyMap<string, string>, patch: string, label: string): boolean {
  const paths = parseUnifiedDiff(patch).map((f) => f.newPath ?? f.oldPath ?? '');
  const expected = scratch.apply(files, patch, paths);
  const actual = ours(files, patch);
  const context = `${label}\n--- files:\n${JSON.stringify([...files])}\n--- patch:\n${patch}`;
  if ('error' in expected) {
    assert.ok(
      'error' in actual,
      `git apply failed (${expected.error.trim()}) but ours applied it: ${context}`,
    );
    return false;
  }
  assert.ok(
    !('error' in actual),
    `git apply applied it but ours failed (${'error' in actual ? actual.error : ''}): ${context}`,
  );
  assert.deepEqual(actual, expected, context);
  return true;
}

void test('matches real git apply on generated files with repeated lines, drifted targets and shifted headers', () => {
  let applied = 0;
  let refused = 0;
  for (let seed = 1; seed <= 100; seed++) {
    const generated = scratch.generated(seed);
    if (generated === null) continue;
    if (assertSameAsGit(generated.files, generated.patch, `seed ${seed}`)) applied++;
    else refused++;
  }
  // The generator must exercise both outcomes, or the comparison proves little.
  assert.ok(applied > 40, `applied ${applied}`);
  assert.ok(refused > 5, `refused ${refused}`);
});

void test('creation, deletion, no newline at end of file, and several files at once match git', () => {
  const a = 'one\ntwo\nthree\nfour\nfive\nsix\nseven\n';
  const b = 'alpha\nbeta';
  const patch = [
    scratch.diff('a.txt', a, a.replace('four\n', 'FOUR\n').replace('seven\n', 'seven')),
    scratch.diff('b.txt', b, `${b}\ngamma\n`),
    scratch.diff('dir/new.txt', null, 'fresh\nfile'),
    scratch.diff('gone.txt', 'bye\n', null),
    scratch.diff('empty.txt', null, ''),
  ].join('');
  const files = new Map([
    ['a.txt', a],
    ['b.txt', b],
    ['gone.txt', 'bye\n'],
  ]);
  assert.ok(assertSameAsGit(files, patch, 'mixed'));
  const result = ours(files, patch);
  assert.ok(!('error' in result));
  assert.equal(result.get('a.txt'), 'one\ntwo\nthree\nFOUR\nfive\nsix\nseven');
  assert.equal(result.get('b.txt'), 'alpha\nbeta\ngamma\n');
  assert.equal(result.get('dir/new.txt'), 'fresh\nfile');
  assert.equal(result.get('gone.txt'), null);
  assert.equal(result.get('empty.txt'), '');

  // What git refuses, we refuse: creating a file that exists, deleting one that changed, a missing file.
  assert.equal(assertSameAsGit(new Map([['dir/new.txt', 'x\n'], ...files]), patch, 'exists'), false);
  assert.equal(assertSameAsGit(new Map([...files, ['gone.txt', 'bye\nmore\n']]), patch, 'changed'), false);
  assert.equal(assertSameAsGit(new Map([['b.txt', b]]), scratch.diff('a.txt', a, 'x\n'), 'missing'), false);
});

void test('a hunk whose context occurs twice applies at the occurrence its line number names', () => {
  // The same four lines four times: every six-line window of context occurs more than once.
  const block = ['function f() {', '  step();', '  done();', '}'];
  const lines = [...block, ...block, ...block, ...block];
  const before = `${lines.join('\n')}\n`;
  const changed = [...lines];
  changed.splice(6, 0, '  STEP();'); // inside the second copy, between its step() and done()
  const after = `${changed.join('\n')}\n`;
  const patch = scratch.diff('g.js', before, after);
  const [file] = parseUnifiedDiff(patch);
  assert.ok(file);
  const [hunk] = file.hunks;
  assert.ok(hunk);
  const preimage = hunk.lines
    .filter((l) => l.kind !== 'add')
    .map((l) => `${l.text}\n`)
    .join('');
  assert.ok(before.indexOf(preimage) !== before.lastIndexOf(preimage), 'the context is ambiguous');
  const result = applyFileHunks('g.js', before, file.hunks);
  assert.equal(result.text, after);
  assert.equal(result.hunks[0]?.line, hunk.newStart - 1);
  assert.ok(assertSameAsGit(new Map([['g.js', before]]), patch, 'twice'));

  // Both the stated line and the search order decide between equal candidates, as in git.
  const both = 'x\na\nb\nc\nx\na\nb\nc\nx\n';
  const at: Record<number, number | null> = {};
  for (const stated of [1, 2, 3, 4, 5, 6, 7, 8]) {
    const p = `--- a/h.txt\n+++ b/h.txt\n@@ -${stated},3 +${stated},4 @@\n a\n b\n+NEW\n c\n`;
    assertSameAsGit(new Map([['h.txt', both]]), p, `stated ${stated}`);
    try {
      at[stated] = applyFileHunks('h.txt', both, parseUnifiedDiff(p)[0]?.hunks ?? []).hunks[0]?.line ?? null;
    } catch {
      at[stated] = null;
    }
  }
  // Line 1 must match at the top; 4 is as far from the copy at 1 as from the one at 5: git looks later first.
  assert.deepEqual(at, { 1: null, 2: 1, 3: 1, 4: 5, 5: 5, 6: 5, 7: 5, 8: 5 });
});

void test('a preimage that is nowhere names the file and the hunk', () => {
  const patch =
    '--- a/m.txt\n+++ b/m.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n@@ -5,3 +5,3 @@\n x\n-y\n+Y\n z\n';
  assert.throws(
    () => applyPatch(new Map([['m.txt', 'a\nb\nc\nd\nx\nq\nz\n']]), parseUnifiedDiff(patch)),
    (error: unknown) =>
      error instanceof PatchDoesNotApply &&
      error.path === 'm.txt' &&
      error.hunk === 2 &&
      /m\.txt: hunk #2 \(@@ -5,3 \+5,3 @@\) does not apply/.test(error.message),
  );
});
