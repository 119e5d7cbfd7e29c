import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { HostCgroup, hostCgroupPaths } from '../../../src/sandbox/docker/host-cgroup.js';
import { runOneOff } from '../../../src/sandbox/docker/container-exec.js';
import { dockerTest } from './docker-test-support.js';

const ID = 'a'.repeat(64);

test('hostCgroupPaths: the systemd and cgroupfs drivers on cgroup v2 and v1; nothing for an id that is not a full engine id or a file that is not a name', () => {
  assert.deepEqual(hostCgroupPaths(ID, 'pids', 'pids.events', '/r'), [
    `/r/system.slice/docker-${ID}.scope/pids.events`,
    `/r/docker/${ID}/pids.events`,
    `/r/pids/docker/${ID}/pids.events`,
    `/r/pids/system.slice/docker-${ID}.scope/pids.events`,
  ]);
  assert.deepEqual(hostCgroupPaths('../../etc', 'pids', 'pids.events'), []);
  assert.deepEqual(hostCgroupPaths(ID.slice(0, 12), 'pids', 'pids.events'), []);
  assert.deepEqual(hostCgroupPaths(ID, 'pids', '../passwd'), []);
});

test('HostCgroup: reads a counter where the layout has it, remembers the path, and says null where the host shows no such cgroup', async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'ia-cgroup-'));
  t.after(() => {
    rmSync(root, { recursive: true, force: true });
  });
  const v1 = join(root, 'pids', 'docker', ID);
  mkdirSync(v1, { recursive: true });
  writeFileSync(join(v1, 'pids.events'), 'max 0\n');
  const cgroup = new HostCgroup(ID, root);
  assert.equal(await cgroup.counter('pids', 'pids.events', 'max'), 0);
  writeFileSync(join(v1, 'pids.events'), 'max 17\n');
  assert.equal(await cgroup.counter('pids', 'pids.events', 'max'), 17);
  assert.equal(await cgroup.counter('memory', 'memory.events', 'oom_kill'), null);
  assert.equal(await new HostCgroup('b'.repeat(64), root).counter('pids', 'pids.events', 'max'), null);
  const v2 = join(root, 'system.slice', `docker-${'c'.repeat(64)}.scope`);
  mkdirSync(v2, { recursive: true });
  writeFileSync(join(v2, 'memory.events'), 'low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\n');
  assert.equal(await new HostCgroup('c'.repeat(64), root).counter('memory', 'memory.events', 'oom_kill'), 2);
});

dockerTest(
  "the host reads a container's pids counter without entering it, and it agrees with the container's own view",
  async (docker, t) => {
    const container = await docker.createContainer({
      Image: 'issue-agent/base:latest',
      Cmd: ['sleep', '60'],
      HostConfig: { NetworkMode: 'none', PidsLimit: 64, AutoRemove: false },
    });
    t.after(() => container.remove({ force: true }));
    await container.start();
    const fromHost = await new HostCgroup(container.id).read('pids', 'pids.events');
    // CI's engine runs on this host: there the fast path must work, or the fork-bomb review would
    // depend on an exec that cannot start while the bomb runs.
    if (fromHost === null && process.env.ISSUE_AGENT_REQUIRE_DOCKER !== '1') {
      t.skip("this host does not show the engine's cgroups");
      return;
    }
    assert.ok(fromHost !== null, "the engine's cgroups are visible on this host");
    const inside = await runOneOff(docker, container, [
      'cat',
      '/sys/fs/cgroup/pids.events',
      '/sys/fs/cgroup/pids/pids.events',
    ]);
    assert.match(inside.stdout, /^max \d+$/m);
    assert.equal(fromHost.trim(), inside.stdout.trim());
  },
);
