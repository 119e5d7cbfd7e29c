import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { HostGit } from '../../src/github/host-git.js';
import { alreadyChecked, checkedPath, onlyAdded } from '../../src/github/mirror-check.js';
import { withMirrorLock } from '../../src/github/mirror-lock.js';
import { mirrorDir, mirrorRoot } from '../../src/github/pristine-clone.js';
import { git, installationToken, makeSourceRepo, tempDir, type TempDir } from '../github-sim/helpers.js';
import { startGitHubSimulator, type GitHubSim } from '../support/github-sim/index.js';
import { attackTest } from '../security/support.js';

/**
 * The per-repository mirror (issue 17): the first job transfers the repository, a later one only
 * asks whether anything changed, a follow-up gets only the new commits, and a mirror that was
 * rewritten upstream, corrupted or tampered with is moved aside and made again while the job goes on.
 */
let sim: GitHubSim;
let source: TempDir;
let work: TempDir;
let url: string;
let token: string;
const host = new HostGit(process.env.PATH ?? '/usr/bin:/bin', (t) => t);

before(async () => {
  sim = await startGitHubSimulator();
  const files: Record<string, string> = { 'README.md': '# demo\n' };
  for (let i = 0; i < 40; i++) files[`src/f${i}.js`] = `export const v${i} = ${i};\n`.repeat(20);
  source = await makeSourceRepo(files);
  await sim.createRepo({ owner: 'acme', name: 'demo', sourceDir: source.dir });
  url = `${sim.url}/acme/demo.git`;
  token = (await installationToken(sim)).token;
  work = tempDir('mirror-');
});

after(async () => {
  await sim.close();
  source.cleanup();
  work.cleanup();
});

const jobsDir = (): string => join(work.dir, 'work', 'jobs');
const mirror = (): string => mirrorDir(jobsDir(), 7, 1);
let n = 0;
/** Loose objects, packs and their size: what a fetch that received anything would change. */
const objectCounts = async (dir: string): Promise<string> =>
  (await git(dir, ['count-objects', '-v']))
    .split('\n')
    .filter((l) => /^(count|packs|size-pack):/.test(l))
    .join(', ');
const looseObjects = async (dir: string): Promise<number> =>
  Number(/^count: (\d+)$/m.exec(await git(dir, ['count-objects', '-v']))?.[1] ?? NaN);

async function pristine(): Promise<{ dir: string; use: Awaited<ReturnType<HostGit['pristineFromMirror']>> }> {
  n += 1;
  const dir = join(work.dir, 'work', 'pristine', `job-${n}`);
  const use = await host.pristineFromMirror(mirror(), dir, {
    url,
    branch: 'main',
    token: () => Promise.resolve(token),
  });
  await host.verifyPristine(dir);
  return { dir, use };
}

/** A new commit on the simulator's `main` (as someone pushing to GitHub would make). */
async function pushUpstream(file: string, text: string, force = false): Promise<string> {
  const clone = join(tempDir('mirror-up-').dir, 'c');
  await git(work.dir, ['clone', '--quiet', sim.bareRepoPath('acme', 'demo'), clone]);
  writeFileSync(join(clone, file), text);
  await git(clone, ['add', '-A']);
  // A force-push rewrites the tip: the last commit replaced by another.
  await git(clone, [
    '-c',
    'user.name=u',
    '-c',
    'user.email=u@e',
    'commit',
    '--quiet',
    ...(force ? ['--amend'] : []),
    '-m',
    file,
  ]);
  await git(clone, ['push', '--quiet', ...(force ? ['--force'] : []), 'origin', 'HEAD:main']);
  return (await git(clone, ['rev-parse', 'HEAD'])).trim();
}

test('first job: the mirror is made; second: nothing is transferred again; a follow-up gets only the new commit', async () => {
  const first = await pristine();
  assert.deepEqual(first.use, { fetched: 'cloned', rebuilt: null });
  assert.ok(mirror().startsWith(mirrorRoot(jobsDir())));
  // The token is in no file of the mirror or the clone.
  for (const f of ['config', 'packed-refs', 'FETCH_HEAD']) {
    try {
      assert.ok(!readFileSync(join(mirror(), f), 'utf8').includes(token), f);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
  assert.ok(!readFileSync(join(first.dir, '.git', 'config'), 'utf8').includes(token));

  const before = await objectCounts(mirror());
  const second = await pristine();
  assert.deepEqual(second.use, { fetched: 'updated', rebuilt: null });
  assert.deepEqual(await objectCounts(mirror()), before, 'an up-to-date mirror receives no object');
  // The clone shares the mirror's objects (hardlinks): no second copy of the history.
  assert.equal(
    (await git(second.dir, ['rev-parse', 'HEAD'])).trim(),
    (await git(first.dir, ['rev-parse', 'HEAD'])).trim(),
  );

  const loose = await looseObjects(mirror());
  const tip = await pushUpstream('src/new.js', 'export const n = 1;\n');
  const third = await pristine();
  assert.deepEqual(third.use, { fetched: 'updated', rebuilt: null });
  assert.equal((await git(third.dir, ['rev-parse', 'HEAD'])).trim(), tip);
  const received = (await looseObjects(mirror())) - loose;
  assert.ok(received > 0 && received <= 4, `only the new commit's objects arrived (${received})`);
});

test('a force-push upstream, corrupt objects, a tampered config: the mirror is made again and the job goes on', async () => {
  await pristine();
  const tip = await pushUpstream('src/rewritten.js', 'export const r = 1;\n', true);
  const forced = await pristine();
  assert.equal(forced.use.fetched, 'cloned');
  assert.match(forced.use.rebuilt ?? '', /rewritten upstream \(force-push\)/);
  assert.equal((await git(forced.dir, ['rev-parse', 'HEAD'])).trim(), tip);

  // Every pack file of the mirror overwritten in its middle.
  const packs = join(mirror(), 'objects', 'pack');
  for (const f of readdirSync(packs).filter((p) => p.endsWith('.pack'))) {
    const bytes = readFileSync(join(packs, f));
    bytes.fill(0x41, 32, Math.max(33, bytes.length - 64));
    writeFileSync(join(packs, f), bytes);
  }
  const corrupt = await pristine();
  assert.match(corrupt.use.rebuilt ?? '', /failed while used/);
  assert.equal((await git(corrupt.dir, ['rev-parse', 'HEAD'])).trim(), tip);
  assert.match(await git(corrupt.dir, ['show', 'HEAD:src/f3.js']), /v3 = 3/);

  writeFileSync(
    join(mirror(), 'config'),
    `${readFileSync(join(mirror(), 'config'), 'utf8')}[core]\n\tfsmonitor = /tmp/x\n`,
  );
  const tampered = await pristine();
  assert.match(tampered.use.rebuilt ?? '', /seal failed/);
  assert.doesNotMatch(readFileSync(join(mirror(), 'config'), 'utf8'), /fsmonitor/);
});

test('mirrors are per installation', () => {
  assert.notEqual(mirrorDir('/w/jobs', 1, 5), mirrorDir('/w/jobs', 2, 5));
  assert.throws(() => mirrorDir('/w/jobs', Number.NaN, 5));
});

test('jobs of one repository at once: they take turns on the mirror, none rebuilds it', async () => {
  const fresh = join(work.dir, 'work', 'concurrent');
  const m = join(fresh, 'm.git');
  const runs = await Promise.all(
    [1, 2, 3].map((i) =>
      host.pristineFromMirror(m, join(fresh, 'pristine', `p${i}`), {
        url,
        branch: 'main',
        token: () => Promise.resolve(token),
      }),
    ),
  );
  assert.deepEqual(
    runs.map((r) => r.rebuilt),
    [null, null, null],
  );
  assert.deepEqual(runs.map((r) => r.fetched).sort(), ['cloned', 'updated', 'updated']);
  assert.equal(existsSync(`${m}.lock`), false, 'the lock is released');
});

test('the mirror lock: a dead owner’s lock is taken over; a live owner’s is waited for, then refused', async () => {
  const m = join(work.dir, 'work', 'locks', 'm.git');
  mkdirSync(`${m}.lock`, { recursive: true });
  const dead = spawnSync(process.execPath, ['-e', 'process.exit(0)']).pid;
  writeFileSync(join(`${m}.lock`, 'owner'), `${dead}\n`);
  assert.equal(await withMirrorLock(m, () => Promise.resolve('ran'), { waitMs: 2000 }), 'ran');
  assert.equal(existsSync(`${m}.lock`), false);

  mkdirSync(`${m}.lock`);
  writeFileSync(join(`${m}.lock`, 'owner'), `${process.pid}\n`);
  await assert.rejects(
    withMirrorLock(m, () => Promise.resolve('ran'), { waitMs: 300 }),
    /locked by another job/,
  );
  rmSync(`${m}.lock`, { recursive: true, force: true });
});

attackTest(
  'a mirror whose config names programs (fsmonitor, a pager, a credential helper, an upload-pack hook) and an alternates file never runs them on the host; it is rebuilt',
  async () => {
    await pristine();
    const marker = join(work.dir, 'mirror-pwned');
    const payload = join(work.dir, 'mirror-payload.sh');
    writeFileSync(payload, `#!/bin/sh\ntouch '${marker}'\nexit 1\n`, { mode: 0o755 });
    const config = readFileSync(join(mirror(), 'config'), 'utf8');
    writeFileSync(
      join(mirror(), 'config'),
      `${config}[core]\n\tfsmonitor = ${payload}\n\tpager = ${payload}\n[credential]\n\thelper = !${payload}\n[uploadpack]\n\tpackObjectsHook = ${payload}\n`,
    );
    mkdirSync(join(mirror(), 'objects', 'info'), { recursive: true });
    writeFileSync(join(mirror(), 'objects', 'info', 'alternates'), `${work.dir}\n`);
    const used = await pristine();
    assert.match(used.use.rebuilt ?? '', /seal failed/);
    assert.equal(existsSync(marker), false, 'no program named by the mirror ran');
    assert.doesNotMatch(readFileSync(join(mirror(), 'config'), 'utf8'), /payload/);
    assert.equal(existsSync(join(mirror(), 'objects', 'info', 'alternates')), false);
  },
);

test('the full read of the mirror (fsck, every file of the tip) runs once per tip and set of object files; damage written in place is found', async () => {
  const runs: string[] = [];
  class Counting extends HostGit {
    override run(
      args: readonly string[],
      options?: Parameters<HostGit['run']>[1],
    ): ReturnType<HostGit['run']> {
      runs.push(args.join(' '));
      return super.run(args, options);
    }
  }
  const counting = new Counting(process.env.PATH ?? '/usr/bin:/bin', (t) => t);
  const m = join(work.dir, 'work', 'checked', 'm.git');
  const clone = async (name: string): Promise<Awaited<ReturnType<HostGit['pristineFromMirror']>>> => {
    runs.length = 0;
    return counting.pristineFromMirror(m, join(work.dir, 'work', 'checked', name), {
      url,
      branch: 'main',
      token: () => Promise.resolve(token),
    });
  };
  const fullReads = (): number => runs.filter((r) => / fsck /.test(r) || / archive /.test(r)).length;

  await clone('p1');
  // Received over the network: git hashed every object as it stored it and checked the history.
  assert.equal(fullReads(), 0, 'a new mirror is not read in full again');
  assert.equal(await alreadyChecked(m, (await git(m, ['rev-parse', 'refs/heads/main'])).trim()), true);
  assert.deepEqual(await clone('p2'), { fetched: 'updated', rebuilt: null });
  assert.equal(fullReads(), 0, 'the same tip from the same object files: no second full read');

  // New objects fetched into a mirror read in full before: git verified them as it received them
  // (hashed, connected to the history it had), so the new tip is recorded without a full read.
  const first = await pushUpstream('src/checked.js', 'export const c = 0;\n');
  await clone('p3a');
  assert.ok(
    runs.some((r) => /^fetch /.test(r)),
    'the mirror fetched',
  );
  assert.equal(fullReads(), 0, 'a fetch into a checked mirror: no full read');
  assert.equal(await alreadyChecked(m, first), true);
  // Not read in full before the fetch (no record): the new tip is read in full.
  rmSync(checkedPath(m));
  const tip = await pushUpstream('src/checked.js', 'export const c = 1;\n');
  await clone('p3');
  assert.equal(fullReads(), 2, 'new objects into a mirror not checked before: read in full');
  assert.equal(await alreadyChecked(m, tip), true);

  // The same tip, an object file added (as a writer or a repack would): the record no longer holds.
  const extra = join(m, 'objects', 'ab');
  mkdirSync(extra, { recursive: true });
  writeFileSync(join(extra, 'c'.repeat(38)), 'x');
  assert.equal(await alreadyChecked(m, tip), false);
  await clone('p3b');
  assert.equal(fullReads(), 2, 'read in full again');
  rmSync(join(extra, 'c'.repeat(38)));
  await clone('p3c');
  assert.equal(fullReads(), 2, 'a removed file too');

  assert.deepEqual(await clone('p4'), { fetched: 'updated', rebuilt: null });
  assert.equal(fullReads(), 0);
  // Every pack overwritten in place (same inode, same size): its modification time moves.
  const packs = join(m, 'objects', 'pack');
  for (const f of readdirSync(packs).filter((p) => p.endsWith('.pack'))) {
    const bytes = readFileSync(join(packs, f));
    bytes.fill(0x41, 32, Math.max(33, bytes.length - 64));
    writeFileSync(join(packs, f), bytes);
  }
  assert.equal(await alreadyChecked(m, tip), false, 'a pack written in place changes the record');
  const damaged = await clone('p5');
  assert.match(damaged.rebuilt ?? '', /failed while used/);
  assert.match(await git(join(work.dir, 'work', 'checked', 'p5'), ['show', 'HEAD:src/checked.js']), /c = 1/);
});

test('a fetch records the new tip only if every object file from before it is still there, unchanged', () => {
  const before = new Map([
    ['pack/a.pack', 'ino 1, size 100, mtime 5'],
    ['pack/a.idx', 'ino 2, size 10, mtime 5'],
  ]);
  const added = new Map([...before, ['pack/b.pack', 'ino 3, size 50, mtime 6']]);
  assert.equal(onlyAdded(before, added), true);
  assert.equal(
    onlyAdded(before, new Map([['pack/a.pack', 'ino 1, size 100, mtime 5']])),
    false,
    'one removed',
  );
  const touched = new Map([...before, ['pack/a.pack', 'ino 1, size 100, mtime 7']]);
  assert.equal(onlyAdded(before, touched), false, 'one touched');
});
