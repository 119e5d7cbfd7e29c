import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, test } from 'node:test';
import { applyFileHunks, applyPatch, PatchDoesNotApply } from '../support/model-sim/git-apply.js';
import { parseUnifiedDiff } from '../support/model-sim/unified-diff.js';

const root = mkdtempSync(join(tmpdir(), 'ia-git-apply-'));
after(() => {
  rmSync(root, { recursive: true, force: true });
});
let dirs = 0;

function git(
  cwd: string,
  args: readonly string[],
  input?: string,
): { code: number; stdout: string; stderr: string } {
  const r = spawnSync('git', ['-c', 'core.autocrlf=false', '-c', 'apply.whitespace=nowarn', ...args], {
    cwd,
    input,
    encoding: 'utf8',
  });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

function freshDir(files: ReadonlyMap<string, string>): string {
  const dir = join(root, `r${dirs++}`);
  mkdirSync(dir);
  assert.equal(git(dir, ['init', '-q']).code, 0);
  for (const [path, text] of files) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}

/** `git diff` from `before` to `after` (one file), with `context` lines of context. */
function gitDiff(path: string, before: string | null, after: string | null, context = 3): string {
  const dir = freshDir(before === null ? new Map() : new Map([[path, before]]));
  const id = ['-c', 'user.name=t', '-c', 'user.email=t@example.invalid'];
  git(dir, ['add', '-A']);
  git(dir, [...id, 'commit', '-q', '--allow-empty', '-m', 'before']);
  if (after === null) rmSync(join(dir, path));
  else {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), after);
  }
  git(dir, ['add', '-A']);
  return git(dir, ['diff', '--cached', `-U${context}`]).stdout;
}

/** What real `git apply` makes of `patch` on `files`: the touched paths' texts, or its error. */
function realGitApply(
  files: ReadonlyMap<string, string>,
  patch: string,
  paths: readonly string[],
): Map<string, string | null> | { error: string } {
  const dir = freshDir(files);
  writeFileSync(join(dir, '.patch'), patch);
  const r = git(dir, ['apply', '.patch']);
  if (r.code !== 0) return { error: r.stderr };
  return new Map(
    paths.map((p) => [p, existsSync(join(dir, p)) ? readFileSync(join(dir, p), 'utf8') : null] as const),
  );
}

function ours(
  files: ReadonlyMap<string, string>,
  patch: string,
): Map<string, string | null> | { error: string } {
  try {
    return applyPatch(files, parseUnifiedDiff(patch));
  } catch (error) {
    if (error instanceof PatchDoesNotApply) return { error: error.message };
    throw error;
  }
}

function assertSameAsGit(files: ReadonlyMap<string, string>, patch: string, label: string): boolean {
  const paths = parseUnifiedDiff(patch).map((f) => f.newPath ?? f.oldPath ?? '');
  const expected = realGitApply(files, patch, paths);
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

/** A small deterministic PRNG (mulberry32), so a failing case can be replayed from its seed. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Few distinct lines, so context repeats often; one with non-ASCII text, one blank, one with spaces.
const VOCAB = ['{', '}', '  return x;', '', 'x = 1', '  // é ü', 'end', '\t  ', 'if (a) {'];

function randomLines(next: () => number, count: number): string[] {
  return Array.from({ length: count }, () => VOCAB[Math.floor(next() * VOCAB.length)] ?? '');
}

function join_(lines: readonly string[], finalNewline: boolean): string {
  return lines.length === 0 ? '' : lines.join('\n') + (finalNewline ? '\n' : '');
}

/** Random edits: replace, delete or insert a few runs of lines. */
function mutate(next: () => number, lines: readonly string[], edits: number): string[] {
  const out = [...lines];
  for (let e = 0; e < edits; e++) {
    const at = Math.floor(next() * (out.length + 1));
    const del = Math.floor(next() * 3);
    const add = randomLines(next, Math.floor(next() * 3));
    if (del === 0 && add.length === 0) add.push(`new ${e}`);
    out.splice(at, del, ...add.map((l) => (next() < 0.5 ? `${l} #${e}` : l)));
  }
  return out;
}

void test('matches real git apply on generated files with repeated lines, drifted targets and shifted headers', () => {
  let applied = 0;
  let refused = 0;
  for (let seed = 1; seed <= 100; seed++) {
    const next = rng(seed);
    const base = randomLines(next, 5 + Math.floor(next() * 40));
    const baseNewline = next() < 0.8;
    const changed = mutate(next, base, 1 + Math.floor(next() * 3));
    const changedNewline = next() < 0.2 ? !baseNewline : baseNewline;
    const context = next() < 0.15 ? 1 : 3;
    let patch = gitDiff('f.txt', join_(base, baseNewline), join_(changed, changedNewline), context);
    if (patch === '') continue;
    if (next() < 0.3) {
      // The stated lines drift from the truth: the search must start elsewhere and walk to the hunk.
      const drift = Math.floor(next() * 7) - 3;
      patch = patch.replace(
        /^@@ -(\d+)(,\d+)? \+(\d+)/gm,
        (_m, o: string, c: string | undefined, n: string) => {
          const shift = (v: string): number => Math.max(Number(v) === 0 ? 0 : 2, Number(v) + drift);
          return `@@ -${shift(o)}${c ?? ''} +${shift(n)}`;
        },
      );
    }
    // The file the patch meets: the original, or the original with unrelated lines added or removed.
    const target = next() < 0.6 ? mutate(next, base, 1 + Math.floor(next() * 2)) : base;
    const files = new Map([['f.txt', join_(target, baseNewline)]]);
    if (assertSameAsGit(files, patch, `seed ${seed}`)) applied++;
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
    gitDiff('a.txt', a, a.replace('four\n', 'FOUR\n').replace('seven\n', 'seven')),
    gitDiff('b.txt', b, `${b}\ngamma\n`),
    gitDiff('dir/new.txt', null, 'fresh\nfile'),
    gitDiff('gone.txt', 'bye\n', null),
    gitDiff('empty.txt', null, ''),
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
  assert.equal(assertSameAsGit(new Map([['b.txt', b]]), gitDiff('a.txt', a, 'x\n'), 'missing'), false);
});

void test('a hunk whose context occurs twice applies at the occurrence its line number names', () => {
  // The same four lines four times: every six-line window of context occurs more than once.
  const block = ['function f() {', '  step();', '  done();', '}'];
  const lines = [...block, ...block, ...block, ...block];
  const before = `${lines.join('\n')}\n`;
  const changed = [...lines];
  changed.splice(6, 0, '  STEP();'); // inside the second copy, between its step() and done()
  const after = `${changed.join('\n')}\n`;
  const patch = gitDiff('g.js', before, after);
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
