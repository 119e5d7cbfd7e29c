import assert from 'node:assert/strict';
import { createReadStream, existsSync } from 'node:fs';
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { once } from 'node:events';
import { dirname, join } from 'node:path';
import type { TestContext } from 'node:test';
import type Docker from 'dockerode';
import { DockerSandbox, packWorkspace } from '../../../src/sandbox/docker/docker-sandbox.js';
import { WarmPool } from '../../../src/sandbox/docker/warm-pool.js';
import {
  dockerTest,
  execFileAsync,
  labelledContainers,
  tempWorkspace,
  testOwner,
  waitFor,
} from './docker-test-support.js';

/**
 * The warm pool's prepared containers: a repository's next job gets a container in which its last
 * job's commit is already checked out, switched to the job's own `.git`. What must hold: the tree
 * is exactly what a new container's checkout gives (files changed, removed, added, modes, links,
 * attributes that change how unchanged files are written), a container handed to a job never comes
 * back, and one installation's prepared container never serves another's job.
 */

const IMAGE = 'issue-agent/base:latest';
const git = (args: readonly string[]): Promise<{ stdout: string }> =>
  execFileAsync('git', [...args], {
    env: {
      ...process.env,
      GIT_AUTHOR_NAME: 't',
      GIT_AUTHOR_EMAIL: 't@example.invalid',
      GIT_COMMITTER_NAME: 't',
      GIT_COMMITTER_EMAIL: 't@example.invalid',
    },
  });

/** A repository with four commits; returns its folder and the commits, oldest first. */
async function sourceRepo(t: TestContext): Promise<{ readonly dir: string; readonly commits: string[] }> {
  const dir = await tempWorkspace(t, 'ia-prepared-src-');
  await git(['init', '-q', '-b', 'main', dir]);
  const commits: string[] = [];
  const commit = async (message: string): Promise<void> => {
    await git(['-C', dir, 'add', '-A']);
    await git(['-C', dir, 'commit', '-q', '-m', message]);
    commits.push((await git(['-C', dir, 'rev-parse', 'HEAD'])).stdout.trim());
  };
  await mkdir(join(dir, 'src/deep'), { recursive: true });
  for (let i = 0; i < 200; i++) await writeFile(join(dir, `src/f${i}.js`), `export const v${i} = ${i};\n`);
  await writeFile(join(dir, 'src/deep/keep.txt'), 'line one\nline two\n');
  await writeFile(join(dir, 'src/changes.js'), 'export const a = 1;\n');
  await writeFile(join(dir, 'src/goes.js'), 'export const gone = true;\n');
  await writeFile(join(dir, 'run.sh'), '#!/bin/sh\necho run\n');
  await commit('first');
  await writeFile(join(dir, 'src/changes.js'), 'export const a = 2;\n');
  await git(['-C', dir, 'rm', '-q', 'src/goes.js']);
  await writeFile(join(dir, 'src/new.js'), 'export const added = true;\n');
  await chmod(join(dir, 'run.sh'), 0o755);
  await execFileAsync('ln', ['-s', 'changes.js', join(dir, 'src/link.js')]);
  await commit('second');
  // Unchanged content, written differently: every .txt file gets CRLF line endings from now on.
  await writeFile(join(dir, '.gitattributes'), '*.txt text eol=crlf\n');
  await commit('third');
  await writeFile(join(dir, 'src/f7.js'), 'export const v7 = 70;\n');
  await commit('fourth');
  return { dir, commits };
}

/** A job's workspace as the worker makes it for a Docker sandbox: a `.git` only, HEAD at `commit`. */
async function jobWorkspace(t: TestContext, source: string, commit: string): Promise<string> {
  const dir = await tempWorkspace(t, 'ia-prepared-ws-');
  await git(['init', '-q', '--template=', dir]);
  await git(['-C', dir, 'fetch', '-q', '--no-tags', `file://${source}`, commit]);
  await git(['-C', dir, 'update-ref', '--no-deref', 'HEAD', commit]);
  return dir;
}

/** Every path of the workspace but `.git`, with its type, mode and content's hash. */
async function treeListing(sandbox: DockerSandbox): Promise<string> {
  const r = await sandbox.exec(
    "find . -path ./.git -prune -o -printf '%p %y %m %l\\n' | sort && find . -path ./.git -prune -o -type f -print0 | sort -z | xargs -0 sha256sum",
    { timeoutMs: 60_000 },
  );
  assert.equal(r.exitCode, 0, r.output);
  return r.output;
}

async function state(sandbox: DockerSandbox): Promise<{ readonly head: string; readonly status: string }> {
  const r = await sandbox.exec('git rev-parse HEAD && git status --porcelain --untracked-files=all', {
    timeoutMs: 60_000,
  });
  assert.equal(r.exitCode, 0, r.output);
  const [head = '', ...status] = r.output.split('\n');
  return { head, status: status.join('\n').trim() };
}

function newPool(docker: Docker, owner: string, repositories = 2): WarmPool {
  return new WarmPool({ docker, images: { [IMAGE]: 1 }, owner, repositories });
}

dockerTest(
  "warm pool: a repository's next job gets the prepared container, switched to its own commit, with exactly a new checkout's tree",
  async (docker, t) => {
    const { dir, commits } = await sourceRepo(t);
    const [c1 = '', c2 = '', c3 = '', c4 = ''] = commits;
    const owner = testOwner('prepared');
    const pool = newPool(docker, owner);
    t.after(() => pool.close());
    await pool.start();
    const repo = 'installation-1/repo-7';
    const acquire = async (commit: string, jobId: string, repository?: string): Promise<DockerSandbox> => {
      const s = await pool.acquire({
        workspace: await jobWorkspace(t, dir, commit),
        checkout: true,
        jobId,
        image: IMAGE,
        ...(repository === undefined ? {} : { repository }),
      });
      t.after(() => s.close());
      return s;
    };

    const first = await acquire(c1, 'prepared-1', repo);
    await pool.drain();
    const prepared = pool.preparedFor(repo);
    assert.notEqual(prepared, null, 'a container was prepared for the repository');
    assert.notEqual(prepared, first.containerId);
    // The first job's container is the job's: what it writes never reaches a later job.
    const wrote = await first.exec('echo agent > src/changes.js && echo agent > left-behind.txt', {
      timeoutMs: 10_000,
    });
    assert.equal(wrote.exitCode, 0, wrote.output);

    // Changed, removed and added files, a mode and a link: switched from the first commit's checkout.
    const startedAt = Number((await first.exec('date +%s', { timeoutMs: 10_000 })).output.trim());
    const second = await acquire(c2, 'prepared-2', repo);
    assert.equal(second.containerId, prepared, 'the second job got the prepared container');
    assert.deepEqual(await state(second), { head: c2, status: '' });
    const fresh2 = await acquire(c2, 'fresh-2');
    assert.notEqual(fresh2.containerId, prepared);
    assert.equal(await treeListing(second), await treeListing(fresh2));
    const listing = await treeListing(second);
    assert.doesNotMatch(listing, /goes\.js|left-behind/);
    // Group-writable, as a checkout by the agent's user is (umask 0002: the harness's user shares it).
    assert.match(listing, /\.\/run\.sh f 775 /);
    assert.match(listing, /\.\/src\/link\.js l 777 changes\.js/);
    // Only what differs was written: an unchanged file keeps the prepared checkout's time.
    const times = await second.exec('stat -c %Y src/f1.js src/changes.js', { timeoutMs: 10_000 });
    const [unchanged = 0, changed = 0] = times.output.trim().split('\n').map(Number);
    assert.ok(unchanged < startedAt, `unchanged file written at ${unchanged}, switch at ${startedAt}`);
    assert.ok(changed >= startedAt, `changed file written at ${changed}, switch at ${startedAt}`);

    // A `.gitattributes` that changes how unchanged files are written: every file is written anew.
    await pool.drain();
    const prepared3 = pool.preparedFor(repo);
    assert.notEqual(prepared3, null);
    const third = await acquire(c3, 'prepared-3', repo);
    assert.equal(third.containerId, prepared3);
    assert.deepEqual(await state(third), { head: c3, status: '' });
    const crlf = await third.exec("grep -c $'\\r' src/deep/keep.txt", { timeoutMs: 10_000 });
    assert.equal(crlf.output.trim(), '2', 'the unchanged .txt file has the new line endings');
    const fresh3 = await acquire(c3, 'fresh-3');
    assert.equal(await treeListing(third), await treeListing(fresh3));

    // Another installation's job on the same repository id never gets it.
    await pool.drain();
    const kept = pool.preparedFor(repo);
    assert.notEqual(kept, null);
    const other = await acquire(c4, 'other-installation', 'installation-2/repo-7');
    assert.notEqual(other.containerId, kept);
    assert.equal(pool.preparedFor(repo), kept);
    const fourth = await acquire(c4, 'prepared-4', repo);
    assert.equal(fourth.containerId, kept);
    assert.deepEqual(await state(fourth), { head: c4, status: '' });
    assert.equal(await treeListing(fourth), await treeListing(other));

    // The same commit again (the next job on an unchanged base): nothing to write, and the same tree.
    await pool.drain();
    const kept5 = pool.preparedFor(repo);
    const fifth = await acquire(c4, 'prepared-5', repo);
    assert.equal(fifth.containerId, kept5);
    assert.deepEqual(await state(fifth), { head: c4, status: '' });
    assert.equal(await treeListing(fifth), await treeListing(other));
  },
);

dockerTest(
  'warm pool: prepared containers are kept for a bounded number of repositories, and a lost one only costs a warm start',
  async (docker, t) => {
    const { dir, commits } = await sourceRepo(t);
    const [c1 = '', c2 = ''] = commits;
    const owner = testOwner('prepared-bound');
    const pool = newPool(docker, owner, 1);
    t.after(() => pool.close());
    await pool.start();
    const acquire = async (commit: string, jobId: string, repository: string): Promise<DockerSandbox> => {
      const s = await pool.acquire({
        workspace: await jobWorkspace(t, dir, commit),
        checkout: true,
        jobId,
        image: IMAGE,
        repository,
      });
      await s.close();
      return s;
    };
    await acquire(c1, 'bound-a', 'installation-1/repo-a');
    await pool.drain();
    const a = pool.preparedFor('installation-1/repo-a');
    assert.notEqual(a, null);
    await acquire(c1, 'bound-b', 'installation-1/repo-b');
    await pool.drain();
    assert.equal(pool.preparedFor('installation-1/repo-a'), null, 'one repository at most');
    const b = pool.preparedFor('installation-1/repo-b');
    assert.notEqual(b, null);
    assert.equal((await labelledContainers(docker, owner)).includes(a ?? ''), false);

    // A switch that fails before it reads the job's `.git` off the shell's input (here: the index
    // gone) drains it first, fails at once, and the job gets a warm container.
    await execFileAsync('docker', ['exec', '-u', 'agent', b ?? '', 'rm', '/workspace/.git/index']);
    const broken = await pool.acquire({
      workspace: await jobWorkspace(t, dir, c2),
      checkout: true,
      jobId: 'bound-broken',
      image: IMAGE,
      repository: 'installation-1/repo-b',
    });
    t.after(() => broken.close());
    assert.notEqual(broken.containerId, b);
    assert.deepEqual(await state(broken), { head: c2, status: '' });
    await broken.close();
    await pool.drain();
    const b2 = pool.preparedFor('installation-1/repo-b');
    assert.notEqual(b2, null);

    // Removed behind the pool's back (an operator, another host's reaper): the job still starts.
    await docker.getContainer(b2 ?? '').remove({ force: true });
    const s = await pool.acquire({
      workspace: await jobWorkspace(t, dir, c2),
      checkout: true,
      jobId: 'bound-lost',
      image: IMAGE,
      repository: 'installation-1/repo-b',
    });
    t.after(() => s.close());
    assert.notEqual(s.containerId, b2);
    assert.deepEqual(await state(s), { head: c2, status: '' });
    await waitFor(() => pool.preparedFor('installation-1/repo-b') !== null, 30_000, 'a new prepared one');
    await pool.close();
    await s.close();
    assert.deepEqual(await labelledContainers(docker, owner), []);
  },
);

dockerTest(
  "a switch that fails before it reads the job's `.git` never runs the archive's bytes as shell input",
  async (docker, t) => {
    const { dir, commits } = await sourceRepo(t);
    const [c1 = '', c2 = ''] = commits;
    const sandbox = await DockerSandbox.create({
      docker,
      workspace: await jobWorkspace(t, dir, c1),
      checkout: true,
      jobId: 'switch-drain',
      image: IMAGE,
      owner: testOwner('switch-drain'),
    });
    t.after(() => sandbox.close());
    // Plain text in the archive (tar stores file contents as they are), which a shell reading it
    // would run; and a switch whose first step fails (the index is gone).
    const workspace = await jobWorkspace(t, dir, c2);
    await writeFile(join(workspace, '.git', 'description'), '\ntouch /tmp/archive-ran-as-shell\n');
    const packed = await packWorkspace(workspace);
    assert.ok(packed !== null);
    const rm = await sandbox.exec('rm .git/index', { timeoutMs: 10_000 });
    assert.equal(rm.exitCode, 0, rm.output);
    await assert.rejects(sandbox.copyIn(packed, { checkout: true, switchCheckout: true }));
    const r = await sandbox.exec('ls /tmp/archive-ran-as-shell 2>&1; echo done', { timeoutMs: 10_000 });
    assert.match(r.output, /No such file/);
  },
);

dockerTest(
  "warm pool: a prepared container takes a job's cached environment and variables, and the next prepared one has neither",
  async (docker, t) => {
    const { dir, commits } = await sourceRepo(t);
    const [c1 = '', c2 = '', , c4 = ''] = commits;
    const pool = newPool(docker, testOwner('prepared-env'));
    t.after(() => pool.close());
    await pool.start();
    const repo = 'installation-1/repo-env';
    // A cached environment: what a setup left in the workspace, as the cache stores it (a tar).
    const entryDir = await tempWorkspace(t, 'ia-prepared-entry-');
    await mkdir(join(entryDir, 'node_modules/dep'), { recursive: true });
    await writeFile(join(entryDir, 'node_modules/dep/index.js'), 'module.exports = 1;\n');
    await mkdir(join(entryDir, 'tools/bin'), { recursive: true });
    await writeFile(join(entryDir, 'tools/bin/hello'), '#!/bin/sh\necho hello from the entry\n');
    await chmod(join(entryDir, 'tools/bin/hello'), 0o755);
    const entry = join(entryDir, 'entry.tar');
    await execFileAsync('tar', ['-c', '-f', entry, '-C', entryDir, 'node_modules', 'tools']);
    const acquire = async (
      commit: string,
      jobId: string,
      extra: Partial<Parameters<WarmPool['acquire']>[0]> = {},
    ): Promise<DockerSandbox> => {
      const s = await pool.acquire({
        workspace: await jobWorkspace(t, dir, commit),
        checkout: true,
        jobId,
        image: IMAGE,
        repository: repo,
        ...extra,
      });
      t.after(() => s.close());
      return s;
    };
    await acquire(c1, 'env-1');
    await pool.drain();
    const prepared = pool.preparedFor(repo);
    assert.notEqual(prepared, null);
    const env = { PATH: '/workspace/tools/bin:/usr/local/bin:/usr/bin:/bin', JOB_VAR: 'x y $z' };
    // The path names another file than the one opened at the lookup (an eviction and a new store
    // of the key in between): the opened one is what the job gets, copied from its stream.
    const decoyDir = await tempWorkspace(t, 'ia-prepared-decoy-');
    await mkdir(join(decoyDir, 'node_modules/dep'), { recursive: true });
    await writeFile(join(decoyDir, 'node_modules/dep/index.js'), 'module.exports = "decoy";\n');
    const decoy = join(decoyDir, 'decoy.tar');
    await execFileAsync('tar', ['-c', '-f', decoy, '-C', decoyDir, 'node_modules']);
    const opened = createReadStream(entry);
    await once(opened, 'open');
    const second = await acquire(c2, 'env-2', {
      env,
      restore: { path: decoy, stream: () => opened, afterCopy: true },
      exclude: ['node_modules', 'tools'],
    });
    assert.equal(second.containerId, prepared, 'the job with an environment got the prepared container');
    assert.deepEqual(await state(second), { head: c2, status: '' });
    const r = await second.exec('hello && printf "%s\\n" "$JOB_VAR" && cat node_modules/dep/index.js', {
      timeoutMs: 10_000,
    });
    assert.equal(r.output, 'hello from the entry\nx y $z\nmodule.exports = 1;\n');
    const h = await second.harnessExec('printf "%s" "$JOB_VAR"', { timeoutMs: 10_000 });
    assert.equal(h.output, env.JOB_VAR);
    // The entry's host folder is the container's alone and goes with it.
    const mounts = (await docker.getContainer(second.containerId).inspect()).Mounts;
    const entryFolder = mounts.find((m) => m.Destination === '/run/issue-agent-env')?.Source ?? '';
    assert.ok(existsSync(join(entryFolder, 'entry.tar')), 'the entry was placed in the container folder');
    await second.close();
    assert.equal(existsSync(dirname(entryFolder)), false, 'the folder went with the container');

    // The next prepared container is made from the job's `.git` alone.
    await pool.drain();
    const next = pool.preparedFor(repo);
    assert.notEqual(next, null);
    const third = await acquire(c4, 'env-3');
    assert.equal(third.containerId, next);
    const bare = await third.exec('ls node_modules tools 2>&1; printf "[%s]\\n" "$JOB_VAR"', {
      timeoutMs: 10_000,
    });
    assert.match(bare.output, /No such file[\s\S]*No such file[\s\S]*\[\]\n$/);
    assert.deepEqual(await state(third), { head: c4, status: '' });
  },
);

dockerTest(
  "a job's variables given to a started sandbox never run as shell text, and names the shells depend on are refused",
  async (docker, t) => {
    const { dir, commits } = await sourceRepo(t);
    const sandbox = await DockerSandbox.create({
      docker,
      workspace: await jobWorkspace(t, dir, commits[0] ?? ''),
      checkout: true,
      jobId: 'env-attack',
      image: IMAGE,
      owner: testOwner('env-attack'),
    });
    t.after(() => sandbox.close());
    // A name that ends the framework's own loop early, read's timeout cut mid-record, the cwd it
    // reports: each would leave bytes of a later value for the shell to run. Refused, nothing set.
    const payload = `\ntouch /tmp/ran-as-shell\n${'x'.repeat(8192)}\ntouch /tmp/ran-as-shell\n`;
    for (const name of ['__ia_n', '__IA_KV', 'TMOUT', 'PWD', 'POSIXLY_CORRECT']) {
      await assert.rejects(sandbox.useEnvironment({ [name]: '0', LATER: payload }), /not a variable a job/);
    }
    // Allowed names: values with newlines, quotes, `$(…)` and a record of a name bash keeps
    // read-only (skipped, as a new shell skips it) arrive as they are, in both shells.
    const tricky = `a'b"c $(touch /tmp/expanded) \`touch /tmp/expanded\` ;\n${payload}`;
    await sandbox.useEnvironment({ UID: '0', EUID: '0', JOB_A: tricky, JOB_B: 'plain' });
    const agent = await sandbox.exec('printf "%s|%s|%s" "$JOB_A" "$JOB_B" "$UID"', { timeoutMs: 10_000 });
    assert.equal(agent.exitCode, 0, agent.output);
    const uid = (await sandbox.exec('id -u', { timeoutMs: 10_000 })).output.trim();
    assert.equal(agent.output, `${tricky}|plain|${uid}`);
    const harness = await sandbox.harnessExec('printf "%s" "$JOB_A"', { timeoutMs: 10_000 });
    assert.equal(harness.output, tricky);
    const marks = await sandbox.exec('ls /tmp/ran-as-shell /tmp/expanded 2>&1; echo end', {
      timeoutMs: 10_000,
    });
    assert.doesNotMatch(marks.output, /^\/tmp\/(ran-as-shell|expanded)$/m);
    assert.match(marks.output, /end\n$/);
  },
  { attack: true },
);
