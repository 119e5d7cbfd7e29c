import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  diffStats,
  diffStatsSync,
  readCommit,
  readRefs,
  readRefsSync,
  resolveCommit,
  treeEntry,
} from '../support/github-sim/git.js';
import { BoundedMemo, forgetRepos } from '../support/github-sim/object-memo.js';

const git = (cwd: string, ...args: string[]): string =>
  execFileSync('git', args, {
    cwd,
    encoding: 'utf8',
    env: {
      ...process.env,
      GIT_AUTHOR_NAME: 't',
      GIT_AUTHOR_EMAIL: 't@example.com',
      GIT_COMMITTER_NAME: 't',
      GIT_COMMITTER_EMAIL: 't@example.com',
    },
  });

const forEachRef = (bare: string): Map<string, string> =>
  new Map(
    git(bare, 'for-each-ref', '--format=%(refname) %(objectname)')
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => l.split(' ') as [string, string]),
  );

void test('the simulator reads refs from the files as git for-each-ref does: loose, packed, tags, pull heads, after pack-refs', async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'ia-sim-refs-'));
  t.after(() => {
    rmSync(root, { recursive: true, force: true });
  });
  const work = join(root, 'work');
  const bare = join(root, 'bare.git');
  git(root, 'init', '-q', '-b', 'main', work);
  writeFileSync(join(work, 'a.txt'), 'a\n');
  git(work, 'add', '.');
  git(work, 'commit', '-q', '-m', 'one');
  git(work, 'tag', 'light');
  git(work, 'tag', '-a', 'annotated', '-m', 'an annotated tag');
  git(work, 'checkout', '-q', '-b', 'issue-agent/issue-7');
  writeFileSync(join(work, 'a.txt'), 'b\n');
  git(work, 'commit', '-q', '-am', 'two');
  git(root, 'clone', '-q', '--bare', work, bare);
  git(bare, 'update-ref', 'refs/pull/7/head', 'refs/heads/issue-agent/issue-7');

  // A fresh clone packs its refs; new ones are loose; a loose ref overrides a stale packed one.
  assert.deepEqual(readRefsSync(bare), forEachRef(bare));
  git(bare, 'update-ref', 'refs/heads/main', 'refs/heads/issue-agent/issue-7');
  git(bare, 'update-ref', 'refs/heads/feature/deep/name', 'refs/tags/light');
  assert.deepEqual(readRefsSync(bare), forEachRef(bare));
  assert.deepEqual(await readRefs(bare), forEachRef(bare));
  git(bare, 'pack-refs', '--all');
  assert.deepEqual(readRefsSync(bare), forEachRef(bare));
  git(bare, 'update-ref', '-d', 'refs/heads/feature/deep/name');
  assert.deepEqual(readRefsSync(bare), forEachRef(bare));
  assert.ok(readRefsSync(bare).size >= 5);

  // A symbolic ref under refs/ is not modelled by the reader: git answers, and it still matches.
  git(bare, 'symbolic-ref', 'refs/heads/alias', 'refs/heads/main');
  assert.deepEqual(readRefsSync(bare), forEachRef(bare));
});

void test('answers about objects are kept by full sha; names that move are read afresh each time', async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'ia-sim-memo-'));
  t.after(() => {
    forgetRepos(root);
    rmSync(root, { recursive: true, force: true });
  });
  const work = join(root, 'work');
  const bare = join(root, 'bare.git');
  git(root, 'init', '-q', '-b', 'main', work);
  writeFileSync(join(work, 'a.txt'), 'a\n');
  git(work, 'add', '.');
  git(work, 'commit', '-q', '-m', 'one');
  const one = git(work, 'rev-parse', 'HEAD').trim();
  writeFileSync(join(work, 'a.txt'), 'a\nb\n');
  git(work, 'commit', '-q', '-am', 'two');
  const two = git(work, 'rev-parse', 'HEAD').trim();
  git(root, 'clone', '-q', '--bare', work, bare);

  // A branch is read from the ref files each time: a move by anyone (here git itself) is seen.
  assert.equal(await resolveCommit(bare, 'refs/heads/main'), two);
  git(bare, 'update-ref', 'refs/heads/main', one);
  assert.equal(await resolveCommit(bare, 'refs/heads/main'), one);
  assert.equal(await resolveCommit(bare, 'refs/heads/nothing'), null);
  assert.equal(await resolveCommit(bare, `${two}^`), one);
  assert.equal(await resolveCommit(bare, `${two}^`), one);
  assert.equal(await resolveCommit(bare, 'main'), one);

  // Stats and commits by full sha, the same from the sync and async reads, before and after keeping.
  const stats = { commits: 1, additions: 1, deletions: 0, changedFiles: 1 };
  assert.deepEqual(await diffStats(bare, one, two), stats);
  assert.deepEqual(diffStatsSync(bare, one, two), stats);
  assert.deepEqual(await diffStats(bare, one, two), stats);
  assert.equal((await readCommit(bare, two)).message, 'two');
  assert.equal((await readCommit(bare, two)).message, 'two');
  assert.equal((await treeEntry(bare, two, 'a.txt'))?.size, 4);
  assert.equal(await treeEntry(bare, two, 'missing.txt'), null);
  assert.equal(await treeEntry(bare, two, 'missing.txt'), null);
  // A sha that is not there reads as nothing (and that failure is not kept).
  const later = 'f'.repeat(40);
  assert.deepEqual(await diffStats(bare, one, later), {
    commits: 0,
    additions: 0,
    deletions: 0,
    changedFiles: 0,
  });
});

void test('a bounded memo forgets its least recently used entry', () => {
  const memo = new BoundedMemo<number>(2);
  memo.set('a', 1);
  memo.set('b', 2);
  assert.equal(memo.get('a'), 1);
  memo.set('c', 3);
  assert.equal(memo.has('b'), false);
  assert.equal(memo.get('a'), 1);
  assert.equal(memo.get('c'), 3);
  assert.equal(memo.size, 2);
});
