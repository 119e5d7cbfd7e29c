import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { DockerSandbox } from '../../../src/sandbox/docker/docker-sandbox.js';
import { containerSpec, DEFAULT_LIMITS } from '../../../src/sandbox/docker/container-spec.js';
import { hostsMountFile } from '../../../src/sandbox/docker/ca-file.js';
import { LABEL_OWNER, LABEL_SANDBOX, ownerId } from '../../../src/sandbox/docker/owner.js';
import { reapOrphans } from '../../../src/sandbox/docker/reap.js';
import { SandboxError } from '../../../src/sandbox/sandbox.js';
import { dockerTest, labelledContainers, tempWorkspace, testOwner } from './docker-test-support.js';

dockerTest(
  'lifecycle: 20 jobs (some threw, some had their container killed) leave no container, volume or temp dir',
  async (docker, t) => {
    const owner = testOwner('lifecycle');
    // The sandboxes' host scratch dirs go here (other test files run beside this one in tmpdir).
    const scratchParent = await tempWorkspace(t, 'ia-lifecycle-scratch-');
    const volumesBefore = new Set((await docker.listVolumes()).Volumes.map((v) => v.Name));
    const outcomes: string[] = [];
    const runJob = async (i: number): Promise<void> => {
      const workspace = await tempWorkspace(t);
      const sandbox = await DockerSandbox.create({
        docker,
        workspace,
        jobId: `lifecycle-${i}`,
        image: 'issue-agent/base:latest',
        owner,
        scratchParent,
      });
      try {
        const r = await sandbox.exec(
          `echo job ${i} > out.txt && mkdir -p /tmp/x && yes | head -c 100000 > /tmp/x/big`,
          {
            timeoutMs: 10_000,
          },
        );
        assert.equal(r.exitCode, 0);
        if (i % 4 === 1) throw new Error(`job ${i} threw`);
        if (i % 4 === 2) {
          await docker.getContainer(sandbox.containerId).kill({ signal: 'SIGKILL' });
          await sandbox.exec('true', { timeoutMs: 10_000 });
        }
        outcomes.push('ok');
      } catch (error) {
        outcomes.push(error instanceof SandboxError ? error.code : 'threw');
      } finally {
        await sandbox.close();
        if (i % 5 === 0) await sandbox.close(); // safe twice
      }
    };
    // Four at a time: like a worker with concurrency.
    for (let batch = 0; batch < 20; batch += 4) {
      await Promise.all([0, 1, 2, 3].map((k) => runJob(batch + k)));
    }
    assert.equal(outcomes.length, 20);
    assert.equal(outcomes.filter((o) => o === 'threw').length, 5);
    assert.equal(outcomes.filter((o) => o === 'container_died').length, 5);
    assert.deepEqual(await labelledContainers(docker, owner), []);
    const volumesAfter = (await docker.listVolumes()).Volumes.map((v) => v.Name);
    assert.deepEqual(
      volumesAfter.filter((v) => !volumesBefore.has(v)),
      [],
    );
    assert.deepEqual(await readdir(scratchParent), []);
  },
  { timeout: 120_000 },
);

dockerTest(
  'lifecycle: a worker start reaps the containers of a dead worker and keeps the live ones',
  async (docker, t) => {
    // A worker that is gone: a process that ran and exited, so its pid and start time are real.
    const child = spawn('true');
    const deadPid = await new Promise<number>((resolve) =>
      child.once('exit', () => {
        resolve(child.pid ?? 0);
      }),
    );
    const deadOwner = ownerId(deadPid).replace(/:\d+$/, ':12345');
    const liveOwner = ownerId();
    const make = async (owner: string, job: string): Promise<string> => {
      const c = await docker.createContainer(
        containerSpec({
          name: `issue-agent-reap-${job}-${Math.random().toString(36).slice(2, 8)}`,
          image: 'issue-agent/base:latest',
          uid: 1000,
          gid: 1000,
          limits: DEFAULT_LIMITS,
          labels: { job, owner },
          hostsFile: await hostsMountFile(),
        }),
      );
      await c.start();
      return c.id;
    };
    const orphanRunning = await make(deadOwner, 'orphan-running');
    const orphanStopped = await make(deadOwner, 'orphan-stopped');
    await docker.getContainer(orphanStopped).stop({ t: 0 });
    const live = await make(liveOwner, 'live');
    const otherHost = await make('some-other-host:42:42', 'other-host');
    // A live worker in another PID namespace of this host (a worker container): its PID, here, is
    // the dead process's, and it must not be taken for gone.
    const otherNamespace = await make(
      deadOwner.replace(/^([^:]*)\/\d+:/, '$1/4026599999:'),
      'other-namespace',
    );
    t.after(async () => {
      for (const id of [orphanRunning, orphanStopped, live, otherHost, otherNamespace]) {
        await docker
          .getContainer(id)
          .remove({ force: true })
          .catch(() => undefined);
      }
    });

    const result = await DockerSandbox.reapOrphans(docker);
    assert.ok(result.removed.includes(orphanRunning));
    assert.ok(result.removed.includes(orphanStopped));
    assert.ok(!result.removed.includes(live), 'a live worker keeps its containers');
    assert.ok(!result.removed.includes(otherHost), 'another host is unknown: kept without an age limit');
    assert.ok(
      !result.removed.includes(otherNamespace),
      'another PID namespace is unknown: kept without an age limit',
    );
    const left = await docker.listContainers({
      all: true,
      filters: { label: [`${LABEL_SANDBOX}=1`, `${LABEL_OWNER}=${deadOwner}`] },
    });
    assert.deepEqual(left, []);

    // With an age limit, another host's and another namespace's old containers go too, but never
    // those of a worker seen alive. (keep limits it to this test's containers: other test files
    // run beside this one.)
    const mine = new Set([otherHost, otherNamespace, live]);
    const aged = await reapOrphans(docker, {
      olderThanMs: 0,
      keep: (c) => !mine.has(c.Id),
      self: 'nobody',
    });
    assert.deepEqual([...aged.removed].sort(), [otherHost, otherNamespace].sort());
  },
);
