import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { readRefsSync } from '../support/github-sim/git.js';

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

void test('the simulator reads refs from the files as git for-each-ref does: loose, packed, tags, pull heads, after pack-refs', (t) => {
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
  git(bare, 'pack-refs', '--all');
  assert.deepEqual(readRefsSync(bare), forEachRef(bare));
  git(bare, 'update-ref', '-d', 'refs/heads/feature/deep/name');
  assert.deepEqual(readRefsSync(bare), forEachRef(bare));
  assert.ok(readRefsSync(bare).size >= 5);

  // A symbolic ref under refs/ is not modelled by the reader: git answers, and it still matches.
  git(bare, 'symbolic-ref', 'refs/heads/alias', 'refs/heads/main');
  assert.deepEqual(readRefsSync(bare), forEachRef(bare));
});
