/**
 * The App's commit through GitHub's git database API, from a change: which tree entries a change
 * becomes (modes, deletions, renames, binary files), when it goes by git push instead and why, and,
 * against the GitHub simulator, that the tree GitHub makes from those entries is the tree git makes
 * of the same index (so what the policy judged is what is committed), signed by GitHub.
 */
import assert from 'node:assert/strict';
import { chmodSync, cpSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  API_LIMITS,
  createApiCommit,
  isOwnCommit,
  parseRawEntries,
  planApiCommit,
  type RawEntry,
} from '../../src/github/api-commit.js';
import type { GitHubClient } from '../../src/github/app-client.js';
import { HostGit } from '../../src/github/host-git.js';
import {
  git,
  installationOctokit,
  installationToken,
  makeSourceRepo,
  tempDir,
  type TempDir,
} from '../github-sim/helpers.js';
import { startGitHubSimulator, type GitHubSim } from '../support/github-sim/index.js';

const Z = '0'.repeat(40);
const A = 'a'.repeat(40);
const B = 'b'.repeat(40);
const C = 'c'.repeat(40);

function entry(path: string, oldMode: string, newMode: string, oldSha: string, newSha: string): RawEntry {
  return { path, oldMode, newMode, oldSha, newSha };
}

describe('planApiCommit: a change as tree entries', () => {
  test('modified, added, deleted, mode-changed and renamed paths; deletions first; known blobs not uploaded', () => {
    const plan = planApiCommit(
      [
        entry('src/a.js', '100644', '100644', A, B),
        entry('bin/run', '100644', '100755', C, C),
        entry('gone.txt', '100644', '000000', A, Z),
        // A rename (git diff --no-renames): the old path deleted, the new one holding the same blob.
        entry('old/name.md', '100644', '000000', C, Z),
        entry('new/name.md', '000000', '100644', Z, C),
        entry('copy.js', '000000', '100644', Z, B),
      ],
      new Map([
        [B, 10],
        [C, 20],
      ]),
    );
    assert.ok(plan.kind === 'api');
    assert.deepEqual(plan.entries, [
      { path: 'gone.txt', mode: '100644', type: 'blob', sha: null },
      { path: 'old/name.md', mode: '100644', type: 'blob', sha: null },
      { path: 'src/a.js', mode: '100644', type: 'blob', sha: B },
      { path: 'bin/run', mode: '100755', type: 'blob', sha: C },
      { path: 'new/name.md', mode: '100644', type: 'blob', sha: C },
      { path: 'copy.js', mode: '100644', type: 'blob', sha: B },
    ]);
    // C is on the base side (GitHub has it); B is new, sent once.
    assert.deepEqual(plan.upload, [B]);
  });

  test('removing a symlink or a submodule is carried; making one goes by git push, with the reason', () => {
    const removed = planApiCommit(
      [entry('link', '120000', '000000', A, Z), entry('vendor/lib', '160000', '000000', B, Z)],
      new Map(),
    );
    assert.ok(removed.kind === 'api');
    assert.deepEqual(removed.entries, [
      { path: 'link', mode: '100644', type: 'blob', sha: null },
      { path: 'vendor/lib', mode: '160000', type: 'commit', sha: null },
    ]);
    assert.deepEqual(planApiCommit([entry('link', '000000', '120000', Z, A)], new Map([[A, 5]])), {
      kind: 'push',
      why: '`link` becomes a symlink, which this App commits with git',
    });
    assert.deepEqual(planApiCommit([entry('vendor/lib', '160000', '160000', A, B)], new Map()), {
      kind: 'push',
      why: '`vendor/lib` becomes a submodule, which this App commits with git',
    });
    // A symlink that becomes a regular file is an ordinary write.
    assert.equal(planApiCommit([entry('x', '120000', '100644', A, B)], new Map([[B, 1]])).kind, 'api');
  });

  test('a file over the size limit, or too many paths, goes by git push', () => {
    const big = planApiCommit(
      [entry('assets/big.bin', '000000', '100644', Z, A)],
      new Map([[A, API_LIMITS.maxBlobBytes + 1]]),
    );
    assert.deepEqual(big, {
      kind: 'push',
      why: '`assets/big.bin` is 10.0 MiB, over the 10.0 MiB sent through the API',
    });
    const many = planApiCommit(
      [entry('a', '100644', '000000', A, Z), entry('b', '100644', '000000', B, Z)],
      new Map(),
      { maxBlobBytes: 1, maxPaths: 1 },
    );
    assert.deepEqual(many, {
      kind: 'push',
      why: 'the change touches 2 paths, more than the 1 sent through the API',
    });
  });

  test('parseRawEntries reads `git diff --raw -z` records, paths as data', () => {
    const raw = `:100644 100755 ${A} ${A} M\0we\tird\nname\0:000000 100644 ${Z} ${B} A\0new.txt\0`;
    assert.deepEqual(parseRawEntries(raw), [
      entry('we\tird\nname', '100644', '100755', A, A),
      entry('new.txt', '000000', '100644', Z, B),
    ]);
  });
});

describe('through the GitHub simulator: the tree GitHub makes is the index git would commit', () => {
  let sim: GitHubSim;
  let source: TempDir;
  let work: TempDir;
  let gh: GitHubClient;
  let base: string;
  let token: string;
  const host = new HostGit(process.env.PATH ?? '/usr/bin:/bin', (t) => t);
  const where = { owner: 'acme', repo: 'trees' };
  // Bytes that are not UTF-8: sent as a base64 blob.
  const BINARY = Buffer.from([0, 1, 2, 0xff, 0xfe, 0x80, 10, 0]);

  before(async () => {
    sim = await startGitHubSimulator();
    source = await makeSourceRepo({
      'README.md': '# trees\n',
      'src/a.js': 'export const a = 1;\n',
      'bin/run': '#!/bin/sh\necho run\n',
      'old/name.md': 'moved\n',
      'gone.txt': 'bye\n',
    });
    symlinkSync('README.md', join(source.dir, 'readme-link'));
    await git(source.dir, ['add', '-A']);
    await git(source.dir, ['commit', '-q', '-m', 'symlink']);
    await sim.createRepo({ owner: where.owner, name: where.repo, sourceDir: source.dir });
    base = (await git(source.dir, ['rev-parse', 'HEAD'])).trim();
    gh = installationOctokit(sim) as unknown as GitHubClient;
    token = (await installationToken(sim)).token;
    work = tempDir('api-commit-');
  });

  after(async () => {
    await sim.close();
    source.cleanup();
    work.cleanup();
  });

  /** The agent's change as the event log holds it: a binary diff of `edit`'s work against the base. */
  async function diffOf(edit: (dir: string) => void): Promise<string> {
    const dir = join(work.dir, `edit-${Math.random().toString(36).slice(2)}`);
    cpSync(source.dir, dir, { recursive: true, verbatimSymlinks: true });
    edit(dir);
    await git(dir, ['add', '-A']);
    return git(dir, ['diff', '--cached', '--binary', base]);
  }

  let n = 0;
  async function staged(diff: string): Promise<string> {
    const dir = join(work.dir, 'pristine', `p-${++n}`);
    await host.ensurePristine(dir, {
      url: `${sim.url}/${where.owner}/${where.repo}.git`,
      branch: 'main',
      token: () => Promise.resolve(token),
    });
    await host.resetTo(dir, `topic-${n}`, base);
    await host.applyDiff(dir, diff);
    return dir;
  }

  test('edits, a mode change, a deletion, a rename, a binary file and a removed symlink: one signed commit with git’s tree', async () => {
    const diff = await diffOf((dir) => {
      writeFileSync(join(dir, 'src/a.js'), 'export const a = 2;\n');
      chmodSync(join(dir, 'bin/run'), 0o755);
      rmSync(join(dir, 'gone.txt'));
      mkdirSync(join(dir, 'new'));
      cpSync(join(dir, 'old/name.md'), join(dir, 'new/name.md'));
      rmSync(join(dir, 'old'), { recursive: true });
      writeFileSync(join(dir, 'assets.bin'), BINARY);
      rmSync(join(dir, 'readme-link'));
      writeFileSync(join(dir, 'notes — ünïcode.md'), 'text with ünïcode\r\n');
    });
    const dir = await staged(diff);
    const entries = parseRawEntries(await host.stagedEntries(dir, base));
    const written = entries.filter((e) => !/^0+$/.test(e.newMode)).map((e) => e.newSha);
    const plan = planApiCommit(entries, await host.blobSizes(dir, written));
    assert.ok(plan.kind === 'api');
    assert.deepEqual(plan.entries.map((e) => `${e.sha === null ? 'delete' : e.mode} ${e.path}`).sort(), [
      '100644 assets.bin',
      '100644 new/name.md',
      '100644 notes — ünïcode.md',
      '100644 src/a.js',
      '100755 bin/run',
      'delete gone.txt',
      'delete old/name.md',
      'delete readme-link',
    ]);
    const tree = await host.writeTree(dir);
    const blobsBefore = sim.requests.filter(
      (r) => r.method === 'POST' && r.path.endsWith('/git/blobs'),
    ).length;
    const commit = await createApiCommit(gh, where, {
      plan,
      readBlob: (sha) => host.readBlob(dir, sha),
      parent: base,
      tree,
      message:
        'Fix #1: trees\n\nIssue-Agent-Job: job-1\nCo-authored-by: maria <5+maria@users.noreply.github.com>',
    });
    // Only the binary file went as a blob of its own; the text rode inline in the tree request.
    assert.equal(
      sim.requests.filter((r) => r.method === 'POST' && r.path.endsWith('/git/blobs')).length - blobsBefore,
      1,
    );
    const made = await gh.rest.git.getCommit({ ...where, commit_sha: commit });
    assert.equal(made.data.tree.sha, tree);
    assert.deepEqual(
      made.data.parents.map((p) => p.sha),
      [base],
    );
    assert.equal(made.data.verification.verified, true);
    assert.equal(made.data.author.name, sim.app.botLogin);
    assert.equal(
      await isOwnCommit(gh, where, commit, { parent: base, tree, jobTrailer: 'Issue-Agent-Job: job-1' }),
      true,
    );
    assert.equal(
      await isOwnCommit(gh, where, commit, { parent: base, tree, jobTrailer: 'Issue-Agent-Job: job-2' }),
      false,
    );
    const blob = await gh.rest.git.getTree({ ...where, tree_sha: tree });
    const bin = blob.data.tree.find((e) => e.path === 'assets.bin');
    assert.ok(bin?.sha);
    const content = await gh.rest.git.getBlob({ ...where, file_sha: bin.sha });
    assert.deepEqual(Buffer.from(content.data.content, 'base64'), BINARY);
    assert.deepEqual(sim.violations, []);
    assert.deepEqual(sim.responseViolations, []);
  });

  test('a change that makes a symlink is planned for git push; the staged entries say so', async () => {
    const diff = await diffOf((dir) => {
      symlinkSync('src/a.js', join(dir, 'a-link'));
    });
    const dir = await staged(diff);
    const entries = parseRawEntries(await host.stagedEntries(dir, base));
    const plan = planApiCommit(
      entries,
      await host.blobSizes(
        dir,
        entries.map((e) => e.newSha),
      ),
    );
    assert.deepEqual(plan, {
      kind: 'push',
      why: '`a-link` becomes a symlink, which this App commits with git',
    });
  });
});
