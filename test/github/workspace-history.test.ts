import assert from 'node:assert/strict';
import {
  chmodSync,
  existsSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { historyKey } from '../../src/github/history-cache.js';
import { HostGit } from '../../src/github/host-git.js';
import { DockerSandbox } from '../../src/sandbox/docker/docker-sandbox.js';
import { git, installationToken, makeSourceRepo, tempDir, type TempDir } from '../github-sim/helpers.js';
import { startGitHubSimulator, type GitHubSim } from '../support/github-sim/index.js';
import { dockerTest } from '../sandbox/docker/docker-test-support.js';

/**
 * The Docker sandbox's workspace without a host checkout (issue 17): the host makes a `.git` with a
 * bounded history from the pristine clone and never writes a file of the repository; the planner
 * reads the commit's tree from git; the sandbox user checks the files out inside the container.
 */
let sim: GitHubSim;
let source: TempDir;
let work: TempDir;
let pristine: string;
let head: string;
const COMMITS = 30;
const host = new HostGit(process.env.PATH ?? '/usr/bin:/bin', (t) => t);
const publicUrl = 'https://github.example/acme/hist.git';

before(async () => {
  sim = await startGitHubSimulator();
  source = await makeSourceRepo({
    'README.md': '# hist\n',
    'package.json': '{"name":"hist","scripts":{"test":"node --test"}}\n',
    'src/a.js': 'export const a = 0;\n',
    'src/deep/b.js': 'export const b = 2;\n',
    'big.txt': 'x'.repeat(4096),
    'run.sh': '#!/bin/sh\necho run\n',
  });
  const dir = source.dir;
  chmodSync(join(dir, 'run.sh'), 0o755);
  // Links a host read must never follow: to a host file, and a folder link on the way to a file.
  symlinkSync('/etc/passwd', join(dir, 'leak.json'));
  symlinkSync('src', join(dir, 'srclink'));
  await git(dir, ['add', '-A']);
  // A submodule entry (a gitlink): an empty folder in a checkout.
  await git(dir, ['update-index', '--add', '--cacheinfo', `160000,${'a'.repeat(40)},vendor/mod`]);
  await git(dir, ['commit', '-q', '-m', 'links and a submodule']);
  for (let i = 1; i < COMMITS; i++) {
    writeFileSync(join(dir, 'src/a.js'), `export const a = ${i};\n`);
    await git(dir, ['add', 'src/a.js']);
    await git(dir, ['commit', '-q', '-m', `change ${i}`]);
  }
  head = (await git(dir, ['rev-parse', 'HEAD'])).trim();
  await sim.createRepo({ owner: 'acme', name: 'hist', sourceDir: dir });
  const { token } = await installationToken(sim);
  work = tempDir('workspace-history-');
  pristine = join(work.dir, 'pristine');
  await host.clonePristine(pristine, `${sim.url}/acme/hist.git`, token, 'main');
});

after(async () => {
  await sim.close();
  source.cleanup();
  work.cleanup();
});

test('the tree probe reads the commit from git: files, folders, a size cap; links and `..` read as absent', async () => {
  const probe = host.treeProbe(pristine, head, 1024);
  assert.equal(await probe.readText('src/a.js'), `export const a = ${COMMITS - 1};\n`);
  assert.equal(await probe.readText('./src//deep/b.js'), 'export const b = 2;\n');
  assert.deepEqual([...((await probe.listDir('.')) ?? [])].sort(), [
    'README.md',
    'big.txt',
    'leak.json',
    'package.json',
    'run.sh',
    'src',
    'srclink',
    'vendor',
  ]);
  assert.deepEqual(await probe.listDir('src'), ['a.js', 'deep']);
  assert.equal(await probe.exists('src/deep'), true);
  assert.equal(await probe.readText('src'), null, 'a folder is not a file');
  assert.equal(await probe.listDir('README.md'), null, 'a file is not a folder');
  // Past the cap: absent, as hostProbe treats a manifest too large to read.
  assert.equal(await probe.readText('big.txt'), null);
  assert.equal(await host.treeProbe(pristine, head).readText('big.txt'), 'x'.repeat(4096));
  // A link reads as absent, and so does any path through one.
  assert.equal(await probe.exists('leak.json'), false);
  assert.equal(await probe.readText('leak.json'), null);
  assert.equal(await probe.readText('srclink/a.js'), null);
  assert.equal(await probe.listDir('srclink'), null);
  assert.equal(await probe.readText('../../etc/passwd'), null);
  assert.equal(await probe.exists('nope/x'), false);
  // A submodule: an empty folder, as a checkout shows it.
  assert.deepEqual(await probe.listDir('vendor/mod'), []);
  // An older commit is read as it was.
  const old = (await git(source.dir, ['rev-parse', 'HEAD~5'])).trim();
  assert.equal(
    await host.treeProbe(pristine, old).readText('src/a.js'),
    `export const a = ${COMMITS - 6};\n`,
  );
});

test('the workspace history: a `.git` only (no file of the repository on the host), depth commits, HEAD detached at the commit', async () => {
  const dir = join(work.dir, 'ws-shallow');
  await host.historyForSandbox(pristine, dir, head, publicUrl, 5);
  assert.deepEqual(readdirSync(dir), ['.git']);
  assert.equal((await git(dir, ['rev-list', '--count', 'HEAD'])).trim(), '5');
  assert.equal((await git(dir, ['rev-parse', 'HEAD'])).trim(), head);
  assert.equal((await git(dir, ['symbolic-ref', '-q', 'HEAD']).catch(() => 'detached')).trim(), 'detached');
  assert.equal((await git(dir, ['remote', 'get-url', 'origin'])).trim(), publicUrl);
  const config = readFileSync(join(dir, '.git', 'config'), 'utf8');
  assert.doesNotMatch(config, /pristine|extraHeader|x-access-token/i, 'nothing of the host or its token');

  // A resumed run starts from its recorded base, not the clone's tip.
  const old = (await git(source.dir, ['rev-parse', 'HEAD~10'])).trim();
  const resumed = join(work.dir, 'ws-resumed');
  await host.historyForSandbox(pristine, resumed, old, publicUrl, 3);
  assert.equal((await git(resumed, ['rev-parse', 'HEAD'])).trim(), old);
  assert.equal((await git(resumed, ['rev-list', '--count', 'HEAD'])).trim(), '3');

  // All of it.
  const full = join(work.dir, 'ws-full');
  await host.historyForSandbox(pristine, full, head, publicUrl, null);
  assert.deepEqual(readdirSync(full), ['.git']);
  assert.equal((await git(full, ['rev-list', '--count', 'HEAD'])).trim(), String(COMMITS + 1));
  assert.equal((await git(full, ['rev-parse', 'HEAD'])).trim(), head);
  assert.equal((await git(full, ['remote', 'get-url', 'origin'])).trim(), publicUrl);
});

dockerTest(
  'checked out in the container: the files of HEAD with their modes and links, a clean status, the bounded history',
  async (docker) => {
    const dir = join(work.dir, 'ws-docker');
    await host.historyForSandbox(pristine, dir, head, publicUrl, 5);
    const sandbox = await DockerSandbox.create({
      docker,
      workspace: dir,
      checkout: true,
      jobId: 'workspace-history',
      image: 'issue-agent/base:latest',
    });
    try {
      const r = await sandbox.exec(
        [
          'cat src/a.js',
          'test -x run.sh && echo exec',
          'readlink leak.json',
          'git status --porcelain | wc -l',
          'git log --oneline | wc -l',
          'stat -c %U src/deep/b.js',
        ].join(' && '),
        { timeoutMs: 20_000 },
      );
      assert.equal(r.exitCode, 0, r.output);
      assert.deepEqual(r.output.trim().split('\n'), [
        `export const a = ${COMMITS - 1};`,
        'exec',
        '/etc/passwd',
        '0',
        '5',
        'agent',
      ]);
    } finally {
      await sandbox.close();
    }
    await assert.rejects(
      DockerSandbox.create({ docker, workspace: dir, checkout: true, jobId: 'no-image' }),
      /needs an image/,
    );
  },
);

/** A HostGit that records the git commands it runs. */
class CountingGit extends HostGit {
  readonly commands: string[] = [];
  override run(args: readonly string[], options?: Parameters<HostGit['run']>[1]): ReturnType<HostGit['run']> {
    this.commands.push(args.join(' '));
    return super.run(args, options);
  }
}

/** Every file under `dir/.git` with its bytes, for comparing two copies; `except`: a prefix left out. */
function filesOf(dir: string, except?: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (d: string, rel: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const path = join(d, e.name);
      const name = rel === '' ? e.name : `${rel}/${e.name}`;
      if (e.isDirectory()) walk(path, name);
      else if (except === undefined || !name.startsWith(except)) {
        out.set(name, readFileSync(path).toString('base64'));
      }
    }
  };
  walk(join(dir, '.git'), '');
  return out;
}

test('the history cache: a second job on the same commit copies the kept `.git` (no git runs), checked against its manifest; a damaged entry is made again', async () => {
  const cache = join(work.dir, 'cache', 'repo-1.git.histories');
  const counting = new CountingGit(process.env.PATH ?? '/usr/bin:/bin', (t) => t);
  const first = join(work.dir, 'cached-1');
  assert.deepEqual(await counting.historyForSandbox(pristine, first, head, publicUrl, 5, cache), {
    cached: false,
    onto: null,
    notStored: null,
  });
  assert.ok(
    counting.commands.some((c) => / fetch /.test(c)),
    'the first job packs the history',
  );

  counting.commands.length = 0;
  const second = join(work.dir, 'cached-2');
  assert.deepEqual(await counting.historyForSandbox(pristine, second, head, publicUrl, 5, cache), {
    cached: true,
    onto: null,
    notStored: null,
  });
  assert.deepEqual(counting.commands, [], 'a cached history runs no git on the host');
  assert.deepEqual(filesOf(second), filesOf(first));
  assert.equal((await git(second, ['rev-list', '--count', 'HEAD'])).trim(), '5');
  assert.equal((await git(second, ['rev-parse', 'HEAD'])).trim(), head);

  // It names no host path (the pristine clone's FETCH_HEAD would).
  assert.equal(existsSync(join(second, '.git', 'FETCH_HEAD')), false);
  // Another depth, another public URL: not the same entry; a whole history is not kept.
  const other = join(work.dir, 'cached-3');
  assert.equal((await counting.historyForSandbox(pristine, other, head, publicUrl, 3, cache)).cached, false);
  assert.equal(
    (await counting.historyForSandbox(pristine, other, head, 'https://github.example/fork.git', 5, cache))
      .cached,
    false,
  );
  assert.equal((await git(other, ['remote', 'get-url', 'origin'])).trim(), 'https://github.example/fork.git');
  const before = readdirSync(cache).length;
  for (let i = 0; i < 2; i++) {
    assert.equal(
      (await counting.historyForSandbox(pristine, other, head, publicUrl, null, cache)).cached,
      false,
    );
  }
  assert.equal(readdirSync(cache).length, before, 'no entry for a whole history');

  // Damage of each kind is found when copying, the entry is dropped, and the job gets a good `.git`.
  const entry = join(cache, historyKey(head, 5, publicUrl));
  const damages: [string, () => void][] = [
    [
      'a changed byte in the pack',
      () => {
        const packs = join(entry, '.git', 'objects', 'pack');
        const file = join(packs, readdirSync(packs).find((f) => f.endsWith('.pack')) ?? '');
        const bytes = readFileSync(file);
        bytes[bytes.length - 3] = (bytes[bytes.length - 3] ?? 0) ^ 0xff;
        writeFileSync(file, bytes);
      },
    ],
    [
      'a file added (a hook)',
      () => {
        writeFileSync(join(entry, '.git', 'post-checkout'), '#!/bin/sh\n');
      },
    ],
    [
      'a file replaced by a link',
      () => {
        rmSync(join(entry, '.git', 'HEAD'));
        symlinkSync('/etc/passwd', join(entry, '.git', 'HEAD'));
      },
    ],
    [
      'the manifest garbled',
      () => {
        writeFileSync(join(entry, 'manifest.json'), '{"schemaVersion":1');
      },
    ],
  ];
  for (const [what, damage] of damages) {
    // The previous round made it again: it is whole before each damage.
    assert.equal(
      (await counting.historyForSandbox(pristine, other, head, publicUrl, 5, cache)).cached,
      true,
      what,
    );
    damage();
    const dir = join(work.dir, 'cached-damaged');
    assert.equal(
      (await counting.historyForSandbox(pristine, dir, head, publicUrl, 5, cache)).cached,
      false,
      what,
    );
    // The same `.git`, but for the reflog's times.
    assert.deepEqual(filesOf(dir, 'logs/'), filesOf(first, 'logs/'), what);
  }
});

test('the history cache keeps the four most recently used entries of a repository', async () => {
  const cache = join(work.dir, 'cache-evict', 'repo-2.git.histories');
  const commits = (await git(source.dir, ['rev-list', '--max-count=6', 'HEAD'])).trim().split('\n');
  const dir = join(work.dir, 'evict');
  for (const [i, commit] of commits.entries()) {
    await host.historyForSandbox(pristine, dir, commit, publicUrl, 2, cache);
    // The first entry is used again after each new one: it stays the most recent.
    if (i > 0)
      assert.equal(
        (await host.historyForSandbox(pristine, dir, commits[0] ?? '', publicUrl, 2, cache)).cached,
        true,
      );
    // Distinct modification times on coarse file systems.
    await new Promise((r) => setTimeout(r, 20));
  }
  const kept = readdirSync(cache).sort();
  assert.equal(kept.length, 4);
  assert.ok(
    kept.includes(historyKey(commits[0] ?? '', 2, publicUrl)),
    'the entry used most recently is kept',
  );
  assert.ok(!kept.includes(historyKey(commits[1] ?? '', 2, publicUrl)), 'the least recently used is gone');
});

test("the history cache: a job whose base moved on fetches onto the kept `.git` of an ancestor, packing only what is newer; the result is a new one's", async () => {
  const cache = join(work.dir, 'cache-onto', 'repo-3.git.histories');
  const commits = (await git(source.dir, ['rev-list', '--max-count=7', 'HEAD'])).trim().split('\n').reverse();
  const [c0 = '', c1 = ''] = commits;
  const objectsIn = async (dir: string): Promise<number> =>
    Number(/in-pack: (\d+)/.exec(await git(dir, ['count-objects', '-v']))?.[1] ?? NaN);
  const packsOf = (dir: string): string[] =>
    readdirSync(join(dir, '.git', 'objects', 'pack')).filter((f) => f.endsWith('.pack'));

  const first = join(work.dir, 'onto-0');
  assert.equal((await host.historyForSandbox(pristine, first, c0, publicUrl, 5, cache)).onto, null);
  const second = join(work.dir, 'onto-1');
  const use = await host.historyForSandbox(pristine, second, c1, publicUrl, 5, cache);
  assert.deepEqual(use, { cached: false, onto: c0, notStored: null });
  // What was fetched is the new commit's objects only, in a pack of its own beside the old one.
  const newPack = packsOf(second).find((p) => !packsOf(first).includes(p)) ?? '';
  const sent = (await git(second, ['verify-pack', '-v', join('.git', 'objects', 'pack', newPack)]))
    .split('\n')
    .filter((l) => /^[0-9a-f]{40} /.test(l)).length;
  assert.ok(sent > 0 && sent <= 6, `${sent} objects fetched for one commit changing one file`);
  // The same `.git` to whoever reads it as one made anew: HEAD, the commits, the tree, no host path.
  const fresh = join(work.dir, 'onto-fresh');
  await host.historyForSandbox(pristine, fresh, c1, publicUrl, 5);
  assert.equal((await git(second, ['rev-parse', 'HEAD'])).trim(), c1);
  assert.equal(await git(second, ['rev-list', 'HEAD']), await git(fresh, ['rev-list', 'HEAD']));
  assert.equal(await git(second, ['ls-tree', '-r', 'HEAD']), await git(fresh, ['ls-tree', '-r', 'HEAD']));
  await git(second, ['fsck', '--connectivity-only', '--no-dangling']);
  assert.equal(existsSync(join(second, '.git', 'FETCH_HEAD')), false);
  assert.equal((await git(second, ['remote', 'get-url', 'origin'])).trim(), publicUrl);
  assert.equal((await git(second, ['for-each-ref'])).trim(), '', 'no ref but HEAD, as a new one');
  assert.ok((await objectsIn(second)) < (await objectsIn(first)) + 10);

  // A kept `.git` of a later commit is no base for an earlier one.
  const back = join(work.dir, 'onto-back');
  const older = (await git(source.dir, ['rev-parse', `${c0}~1`])).trim();
  assert.deepEqual(await host.historyForSandbox(pristine, back, older, publicUrl, 5, cache), {
    cached: false,
    onto: null,
    notStored: null,
  });

  // Each fetch adds a pack (c1's `.git` has two): a kept `.git` with five is passed over for the
  // nearest ancestor whose is not full, so no `.git` ever holds more than five. The base is the
  // nearest ancestor kept (c1), not the most recently used one (`older`).
  const chain: (string | null)[] = [];
  for (const [i, commit] of commits.slice(2).entries()) {
    const dir = join(work.dir, `onto-chain-${i}`);
    chain.push((await host.historyForSandbox(pristine, dir, commit, publicUrl, 5, cache)).onto);
    assert.ok(packsOf(dir).length <= 5, `${packsOf(dir).length} packs`);
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.deepEqual(chain, [c1, commits[2], commits[3], commits[3], commits[3]]);
});
