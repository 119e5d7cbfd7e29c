import assert from 'node:assert/strict';
import { mkdir, readdir, readFile, symlink, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ownerId } from '../../../src/sandbox/docker/owner.js';
import { reapEntryFolders, reapOrphans } from '../../../src/sandbox/docker/reap.js';
import { WarmPool } from '../../../src/sandbox/docker/warm-pool.js';
import { dockerTest, labelledContainers, tempWorkspace, testOwner, waitFor } from './docker-test-support.js';

const IMAGE = 'issue-agent/base:latest';

dockerTest(
  'warm pool: acquire hands out a started hardened container with the workspace copied in, and refills',
  async (docker, t) => {
    const owner = testOwner('pool');
    const pool = new WarmPool({ docker, images: { [IMAGE]: 2 }, owner });
    t.after(() => pool.close());
    await pool.start();
    assert.equal(pool.size(IMAGE), 2);
    assert.equal((await labelledContainers(docker, owner)).length, 2);

    const workspace = await tempWorkspace(t);
    await writeFile(join(workspace, 'input.txt'), 'from the host\n');
    const started = performance.now();
    const sandbox = await pool.acquire({ workspace, jobId: 'pool-job', image: IMAGE });
    const acquireMs = performance.now() - started;
    t.after(() => sandbox.close());
    const r = await sandbox.exec(
      'cat input.txt && echo made-in-container > output.txt && ls /sys/class/net',
      {
        timeoutMs: 10_000,
      },
    );
    assert.equal(r.exitCode, 0, r.output);
    assert.equal(r.output, 'from the host\nlo\n');
    const info = await docker.getContainer(sandbox.containerId).inspect();
    assert.equal(info.HostConfig.NetworkMode, 'none');
    assert.equal(info.HostConfig.ReadonlyRootfs, true);
    assert.deepEqual(info.HostConfig.CapDrop, ['ALL']);
    // The rename to the job's name is not waited for by acquire (it only labels the container).
    await waitFor(
      async () =>
        /issue-agent-pool-job-/.test((await docker.getContainer(sandbox.containerId).inspect()).Name),
      10_000,
      'the container to be named after its job',
    );
    await waitFor(() => pool.size(IMAGE) === 2, 20_000, 'the pool to refill');
    await sandbox.close();
    // The container worked on its own copy: the host directory is as it was.
    assert.deepEqual(await readdir(workspace), ['input.txt']);
    assert.equal(await readFile(join(workspace, 'input.txt'), 'utf8'), 'from the host\n');
    t.diagnostic(`warm acquire ${acquireMs.toFixed(1)} ms`);

    await pool.close();
    assert.deepEqual(await labelledContainers(docker, owner), []);
  },
);

dockerTest('warm pool: the containers of a dead pool are reaped like orphans', async (docker) => {
  // The owner id of a process of this host and PID namespace that does not exist.
  const deadOwner = ownerId(999_999_999);
  const pool = new WarmPool({ docker, images: { [IMAGE]: 2 }, owner: deadOwner });
  await pool.start();
  const ids = await labelledContainers(docker, deadOwner);
  assert.equal(ids.length, 2);
  const result = await reapOrphans(docker, { keep: (c) => !ids.includes(c.Id) });
  assert.deepEqual(result.removed.sort(), [...ids].sort());
  assert.deepEqual(await labelledContainers(docker, deadOwner), []);
  await pool.close();
});

dockerTest(
  'warm pool: a waiting container removed under the pool (another worker reaped it) is replaced at acquire, not a failed job',
  async (docker, t) => {
    const owner = testOwner('pool-gone');
    const pool = new WarmPool({ docker, images: { [IMAGE]: 1 }, owner });
    t.after(() => pool.close());
    await pool.start();
    const [waiting] = await labelledContainers(docker, owner);
    assert.ok(waiting);
    await docker.getContainer(waiting).remove({ force: true });
    const workspace = await tempWorkspace(t);
    await writeFile(join(workspace, 'input.txt'), 'still here\n');
    const sandbox = await pool.acquire({ workspace, jobId: 'pool-gone-job', image: IMAGE });
    t.after(() => sandbox.close());
    assert.notEqual(sandbox.containerId, waiting);
    const r = await sandbox.exec('cat input.txt', { timeoutMs: 10_000 });
    assert.equal(r.output, 'still here\n');
  },
);

dockerTest(
  "a dead pool's entry folders are removed at a worker's start; a live container's, a young one and a link are not",
  async (docker, t) => {
    const dir = await tempWorkspace(t, 'ia-entry-reap-');
    const before = process.env.TMPDIR;
    process.env.TMPDIR = dir;
    t.after(() => {
      if (before === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = before;
    });
    const pool = new WarmPool({ docker, images: { [IMAGE]: 1 }, owner: testOwner('entry-reap') });
    t.after(() => pool.close());
    await pool.start();
    const live = (await readdir(dir)).filter((n) => n.startsWith('issue-agent-pool-entry-'));
    assert.equal(live.length, 1, 'the waiting container has its folder');
    const old = new Date(Date.now() - 60 * 60_000);
    const make = async (name: string, age: Date): Promise<void> => {
      await mkdir(join(dir, name, 'entry'), { recursive: true });
      await writeFile(join(dir, name, 'entry', 'entry.tar'), 'x');
      await utimes(join(dir, name), age, age);
    };
    await make('issue-agent-pool-entry-dead01', old);
    await make('issue-agent-entry-dead02', old);
    await make('issue-agent-pool-entry-young3', new Date());
    const elsewhere = await tempWorkspace(t, 'ia-entry-reap-target-');
    await symlink(elsewhere, join(dir, 'issue-agent-pool-entry-link04'));
    for (const n of live) await utimes(join(dir, n), old, old);

    const removed = await reapEntryFolders(docker, { dir });
    assert.deepEqual(removed.sort(), [
      join(dir, 'issue-agent-entry-dead02'),
      join(dir, 'issue-agent-pool-entry-dead01'),
    ]);
    const left = (await readdir(dir))
      .filter((n) => n.startsWith('issue-agent-') && n.includes('entry-'))
      .sort();
    assert.deepEqual(
      left,
      [...live, 'issue-agent-pool-entry-link04', 'issue-agent-pool-entry-young3'].sort(),
    );
    await pool.close();
    assert.deepEqual(
      (await readdir(dir)).filter((n) => live.includes(n)),
      [],
      'a closed container takes its folder with it',
    );
  },
);
