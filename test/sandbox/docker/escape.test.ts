import assert from 'node:assert/strict';
import { existsSync, readlinkSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { DockerSandbox } from '../../../src/sandbox/docker/docker-sandbox.js';
import { SandboxError } from '../../../src/sandbox/sandbox.js';
import { dockerTest, execFileAsync, tempWorkspace, testOwner } from './docker-test-support.js';

/** Every test here is an escape attempt from the earlier escape matrix: tallied with the attack suite. */
const escapeAttempt = (
  name: string,
  fn: Parameters<typeof dockerTest>[1],
  options: Parameters<typeof dockerTest>[2] = {},
): void => {
  dockerTest(name, fn, { ...options, attack: true });
};

/** Sets $f to the container's pids.events (cgroup v2, else v1): `max N`, the forks the limit refused. */
const PIDS_EVENTS = 'f=/sys/fs/cgroup/pids.events; [ -r "$f" ] || f=/sys/fs/cgroup/pids/pids.events';

async function sandboxFor(
  docker: Parameters<Parameters<typeof dockerTest>[1]>[0],
  t: Parameters<Parameters<typeof dockerTest>[1]>[1],
  extra: Partial<Parameters<typeof DockerSandbox.create>[0]> = {},
): Promise<DockerSandbox> {
  const workspace = await tempWorkspace(t);
  const sandbox = await DockerSandbox.create({
    docker,
    workspace,
    jobId: `escape-${t.name.slice(0, 20)}`,
    image: 'issue-agent/python:latest',
    owner: testOwner('escape'),
    ...extra,
  });
  t.after(() => sandbox.close());
  return sandbox;
}

escapeAttempt('escape: no network interface but lo', async (docker, t) => {
  const sandbox = await sandboxFor(docker, t);
  const r = await sandbox.exec(
    'ls /sys/class/net; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " "; cat /proc/net/route | tail -n +2 | wc -l; cat /sys/class/net/lo/flags; getent hosts localhost',
    { timeoutMs: 10_000 },
  );
  // Loopback alone, up (flags: IFF_UP | IFF_LOOPBACK), no route; localhost resolves (the image's
  // hosts file: with networking disabled the engine writes none).
  const [net, dev, routes, flags, localhost] = r.output.trim().split('\n');
  assert.deepEqual([net, dev, routes, flags], ['lo', 'lo', '0', '0x9']);
  assert.match(localhost ?? '', /^(::1|127\.0\.0\.1)\s+localhost\b/);
  const info = await docker.getContainer(sandbox.containerId).inspect();
  assert.equal(info.HostConfig.NetworkMode, 'none');
  assert.equal((info.Config as { NetworkDisabled?: boolean }).NetworkDisabled, true);
  // A network namespace of its own, not the host's (networking disabled must not mean "shared").
  // Checked where the engine runs on this host (CI's does), through the container's init process.
  const pid = info.State.Pid;
  if (existsSync(`/proc/${pid}/ns/net`)) {
    assert.notEqual(readlinkSync(`/proc/${pid}/ns/net`), readlinkSync('/proc/self/ns/net'));
  } else {
    assert.notEqual(process.env.ISSUE_AGENT_REQUIRE_DOCKER, '1', "CI's engine runs on this host");
  }
});

escapeAttempt("escape: the host's 127.0.0.1 listener is unreachable", async (docker, t) => {
  const connections: Socket[] = [];
  const server = createServer((s) => {
    connections.push(s);
    s.end('secret-from-host\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(
    () =>
      new Promise<void>((resolve) =>
        server.close(() => {
          resolve();
        }),
      ),
  );
  const address = server.address();
  assert.ok(address !== null && typeof address === 'object');
  const port = address.port;
  // The listener answers on the host: the test would prove nothing otherwise.
  const probe = await execFileAsync('bash', ['-c', `exec 3<>/dev/tcp/127.0.0.1/${port} && head -1 <&3`]);
  assert.equal(probe.stdout, 'secret-from-host\n');
  connections.length = 0;

  const sandbox = await sandboxFor(docker, t);
  const r = await sandbox.exec(
    `timeout 5 bash -c 'exec 3<>/dev/tcp/127.0.0.1/${port} && head -1 <&3'; echo "rc=$?"; ` +
      `timeout 5 bash -c 'exec 3<>/dev/tcp/127.0.0.1/6379'; echo "redis=$?"; ` +
      `python3 -c "import socket; s=socket.socket(); s.settimeout(3); s.connect(('172.17.0.1', ${port}))" 2>&1 | tail -1`,
    { timeoutMs: 30_000 },
  );
  assert.doesNotMatch(r.output, /secret-from-host/);
  assert.match(r.output, /rc=1/);
  assert.match(r.output, /redis=1/);
  assert.match(r.output, /Network is unreachable|unreachable/i);
  assert.equal(connections.length, 0, 'the host listener saw no connection');
});

escapeAttempt(
  'escape: no Docker socket, no writes outside /workspace and /tmp, not root, no capabilities',
  async (docker, t) => {
    const sandbox = await sandboxFor(docker, t);
    const r = await sandbox.exec(
      [
        'for s in /var/run/docker.sock /run/docker.sock /run/containerd/containerd.sock; do test -e $s && echo "has $s"; done',
        'for d in / /etc /usr /usr/local/bin /var /opt /root /home; do touch $d/escape-probe 2>/dev/null && echo "wrote $d"; done',
        'touch /workspace/ok /tmp/ok ~/ok && echo writable-ok',
        'id -u',
        'grep -E "^Cap(Eff|Prm|Bnd)" /proc/self/status',
        'grep NoNewPrivs /proc/self/status',
        'mount | grep -E " on /workspace | on / " | sort',
        'sudo true 2>/dev/null && echo sudo-works; su -c true 2>/dev/null && echo su-works; true',
      ].join('\n'),
      { timeoutMs: 20_000 },
    );
    assert.doesNotMatch(r.output, /^has /m);
    assert.doesNotMatch(r.output, /^wrote /m);
    assert.doesNotMatch(r.output, /sudo-works|su-works/);
    assert.match(r.output, /^writable-ok$/m);
    assert.match(r.output, /^1000$|^[1-9]\d*$/m);
    assert.match(r.output, /CapEff:\s+0000000000000000/);
    assert.match(r.output, /CapBnd:\s+0000000000000000/);
    assert.match(r.output, /NoNewPrivs:\s+1/);
    assert.match(r.output, / on \/ type overlay \(ro,/);
    const info = await docker.getContainer(sandbox.containerId).inspect();
    assert.deepEqual(
      info.Mounts.filter((m) => m.Type === 'bind' || m.Type === 'volume').map((m) => [m.Destination, m.RW]),
      [['/etc/hosts', false]],
      'no host path but the read-only hosts table, and no volume: the workspace is a tmpfs',
    );
    assert.match(r.output, /^tmpfs on \/workspace type tmpfs \(rw,nosuid,nodev,/m);
    assert.equal(info.HostConfig.ReadonlyRootfs, true);
    assert.equal(info.HostConfig.Memory, info.HostConfig.MemorySwap, 'no swap');
    assert.ok((info.HostConfig.PidsLimit ?? 0) > 0);
    // A lower CPU weight than the engine's default (1024): the worker goes first when both want the CPU.
    assert.equal(info.HostConfig.CpuShares, 110);
  },
);

escapeAttempt(
  'escape: a fork bomb is contained by the pids limit and ends the job with pids_exhausted',
  async (docker, t) => {
    const sandbox = await sandboxFor(docker, t, { limits: { pids: 128 } });
    const hostBefore = await execFileAsync('bash', ['-c', 'ps -e --no-headers | wc -l']);
    const bomb = [
      PIDS_EVENTS,
      ':(){ :|:& };:',
      // No fixed sleep: however slow the machine, the command goes on until the bomb has hit the
      // limit (the kernel counted a refused fork), then forks once more itself.
      'until read -r _ n <"$f" && [ "$n" -gt 0 ]; do true; done',
      'sleep 1; echo done',
    ].join('\n');
    const error = await sandbox.exec(bomb, { timeoutMs: 30_000 }).then(
      () => null,
      (e: unknown) => e,
    );
    assert.ok(error instanceof SandboxError, `expected a SandboxError, got ${String(error)}`);
    assert.equal(error.code, 'pids_exhausted');
    // Where the worker sees the engine's cgroups (CI), the kernel's counter is read from the host:
    // nothing has to start inside a container whose process table is full.
    if (process.env.ISSUE_AGENT_REQUIRE_DOCKER === '1') assert.match(error.message, /read from the host/);
    // The job ends with that reason: the sandbox stays failed.
    await assert.rejects(sandbox.exec('true', { timeoutMs: 5000 }), { code: 'pids_exhausted' });
    // The host is unaffected: it still forks, and its process count grew by no more than the limit.
    const hostAfter = await execFileAsync('bash', ['-c', 'ps -e --no-headers | wc -l']);
    assert.ok(Number(hostAfter.stdout) - Number(hostBefore.stdout) < 128 + 20);
    await sandbox.close();
    await assert.rejects(docker.getContainer(sandbox.containerId).inspect(), { statusCode: 404 });
  },
  { timeout: 60_000 },
);

escapeAttempt(
  'escape: many processes just below the pids limit, with fork errors in the output, are not pids_exhausted',
  async (docker, t) => {
    const sandbox = await sandboxFor(docker, t, { limits: { pids: 128 } });
    const base = await sandbox.exec(
      `${PIDS_EVENTS}; read -r _ n <"$f"; echo "$n"; cat /sys/fs/cgroup/pids.current /sys/fs/cgroup/pids/pids.current 2>/dev/null`,
      {
        timeoutMs: 10_000,
      },
    );
    const [refused, current] = base.output.trim().split('\n').map(Number);
    assert.equal(refused, 0);
    assert.ok(current !== undefined && current > 0 && current < 10, base.output);
    // Many processes, plus the text of a fork failure: the limit never refused a fork, so the command
    // is an ordinary result. Headroom of 12 below the limit: the session's own helpers (the exec that
    // reads the counter, `$(seq)`) need forks too, and a real refusal would rightly count.
    const sleepers = 128 - 12 - (current - 1);
    const r = await sandbox.exec(
      `for i in $(seq ${sleepers}); do sleep 120 & done; echo 'bash: fork: retry: Resource temporarily unavailable'`,
      { timeoutMs: 20_000 },
    );
    assert.equal(r.exitCode, 0);
    assert.equal(r.killed, null);
    const stats = await docker.getContainer(sandbox.containerId).stats({ stream: false });
    assert.ok((stats.pids_stats?.current ?? 0) >= 110, `pids ${String(stats.pids_stats?.current)}`);
    const next = await sandbox.exec('echo alive', { timeoutMs: 10_000 });
    assert.equal(next.output, 'alive\n');
  },
);

escapeAttempt(
  'escape: a memory hog is OOM-killed inside the container and reported as killed: memory',
  async (docker, t) => {
    const sandbox = await sandboxFor(docker, t, { limits: { memoryBytes: 256 * 1024 ** 2 } });
    const r = await sandbox.exec("python3 -c 'b = []\nwhile True: b.append(bytearray(32 * 1024 * 1024))'", {
      timeoutMs: 30_000,
    });
    assert.equal(r.killed, 'memory');
    assert.equal(r.exitCode, null);
    const next = await sandbox.exec('echo alive', { timeoutMs: 10_000 });
    assert.equal(next.output, 'alive\n');
  },
);

escapeAttempt('escape: a container killed from outside becomes a typed SandboxError', async (docker, t) => {
  const sandbox = await sandboxFor(docker, t, { limits: { memoryBytes: 128 * 1024 ** 2 } });
  // Killed from outside here; a container whose init the kernel OOM-killed takes the same path and
  // is told apart by State.OOMKilled (code oom_killed).
  const pending = sandbox.exec('sleep 60', { timeoutMs: 30_000 }).then(
    () => null,
    (e: unknown) => e,
  );
  await docker.getContainer(sandbox.containerId).kill({ signal: 'SIGKILL' });
  const error = await pending;
  assert.ok(error instanceof SandboxError, `expected a SandboxError, got ${String(error)}`);
  assert.equal(error.code, 'container_died');
  await assert.rejects(sandbox.exec('true', { timeoutMs: 5000 }), { code: 'container_died' });
});

escapeAttempt(
  "escape: a host secret in the worker's environment is not in the container's environment nor in /proc",
  async (docker, t) => {
    const canary = `canary-${Math.random().toString(36).slice(2)}-secret`;
    process.env.ISSUE_AGENT_TEST_CANARY = canary;
    process.env.GITHUB_TOKEN_CANARY_TEST = canary;
    t.after(() => {
      delete process.env.ISSUE_AGENT_TEST_CANARY;
      delete process.env.GITHUB_TOKEN_CANARY_TEST;
    });
    const sandbox = await sandboxFor(docker, t);
    const r = await sandbox.exec(
      'env; for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr "\\0" "\\n" < $f 2>/dev/null; done; ' +
        `grep -rIl -- ${canary} /proc/1/ /etc /tmp /home 2>/dev/null | head; echo scanned`,
      { timeoutMs: 20_000 },
    );
    assert.match(r.output, /scanned/);
    assert.ok(!r.output.includes(canary), 'the canary reached the container');
    assert.match(r.output, /^HOME=\/home\/agent$/m);
    const info = await docker.getContainer(sandbox.containerId).inspect();
    assert.ok(!JSON.stringify(info.Config.Env).includes(canary));
  },
);
