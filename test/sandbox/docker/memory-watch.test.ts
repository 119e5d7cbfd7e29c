import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import type Docker from 'dockerode';
import { AGENT_GID, AGENT_UID } from '../../../src/sandbox/docker/agent-user.js';
import { CONTAINER_WORKDIR } from '../../../src/sandbox/docker/container-spec.js';
import { DockerSandbox } from '../../../src/sandbox/docker/docker-sandbox.js';
import { DockerShellHost } from '../../../src/sandbox/docker/docker-shell.js';
import { ShellSession } from '../../../src/sandbox/shell-session.js';
import { dockerTest, tempWorkspace, testOwner, waitFor } from './docker-test-support.js';

/**
 * The Docker memory watchdog measures through one standing exec per command, not an exec per
 * reading: each exec costs the engine, the shim and runc about 0.1–0.2 s of CPU, and the watchdog
 * runs beside every test command of every job.
 */

const MiB = 1024 ** 2;
const ALLOCATE = (mib: number): string =>
  `python3 -c 'import time; b = bytearray(${mib} * 1024 * 1024); b[::4096] = b"x" * len(b[::4096]); time.sleep(30)'`;

interface Watched {
  readonly session: ShellSession;
  readonly container: string;
  /** Watcher execs the host created so far (each exec's command line names it). */
  readonly watchers: () => number;
}

async function watchedShell(docker: Docker, t: TestContext): Promise<Watched> {
  const workspace = await tempWorkspace(t);
  const sandbox = await DockerSandbox.create({
    docker,
    workspace,
    jobId: `memory-watch-${t.name.slice(0, 16)}`,
    image: 'issue-agent/python:latest',
    owner: testOwner('memory-watch'),
    limits: { memoryBytes: 1024 * MiB },
  });
  t.after(() => sandbox.close());
  const real = docker.getContainer(sandbox.containerId);
  let watchers = 0;
  // The same container, with its exec calls counted by what they run.
  const counted = new Proxy(real, {
    get(target, prop, receiver) {
      if (prop === 'exec') {
        return (options: Docker.ExecCreateOptions) => {
          if (options.Cmd?.includes('ia-rss-watch') === true) watchers += 1;
          return target.exec(options);
        };
      }
      return Reflect.get(target, prop, receiver) as unknown;
    },
  });
  const host = new DockerShellHost(docker, counted, {
    user: `${String(AGENT_UID)}:${String(AGENT_GID)}`,
    workdir: CONTAINER_WORKDIR,
  });
  const session = new ShellSession(host, {
    workdir: CONTAINER_WORKDIR,
    stateFile: '/tmp/.memory-watch-state.sh',
    capture: { headBytes: 65536, tailBytes: 65536, spillDir: workspace },
  });
  await session.start();
  t.after(() => {
    session.close();
    host.dispose();
  });
  return { session, container: sandbox.containerId, watchers: () => watchers };
}

async function watcherRuns(docker: Docker, id: string): Promise<boolean> {
  const top = (await docker.getContainer(id).top({ ps_args: '-eo pid,args' })) as { Processes?: string[][] };
  return (top.Processes ?? []).some((row) => row.join(' ').includes('ia-rss-watch'));
}

const noWatcherLeft = (docker: Docker, id: string): Promise<void> =>
  waitFor(async () => !(await watcherRuns(docker, id)), 10_000, 'the watcher to end');

dockerTest(
  'memory watchdog (Docker): one exec for a whole command; a command over its limit is killed as memory, one under it is not; no watcher outlives its command',
  async (docker, t) => {
    const { session, container, watchers } = await watchedShell(docker, t);

    // Over before its watcher said it was ready: the watcher is ended once it is.
    const quick = await session.exec('true', { timeoutMs: 10_000, memoryLimitBytes: 64 * MiB });
    assert.equal(quick.exitCode, 0);
    await noWatcherLeft(docker, container);
    assert.equal(watchers(), 1);

    // About six readings' worth of time, under the limit: measured all along, by one exec.
    const calm = await session.exec('sleep 3; echo done', { timeoutMs: 20_000, memoryLimitBytes: 256 * MiB });
    assert.equal(calm.killed, null);
    assert.equal(calm.output, 'done\n');
    assert.equal(watchers(), 2, 'one watcher exec for the whole command');
    await noWatcherLeft(docker, container);

    // 200 MiB resident against a 64 MiB limit (the container's own limit is 1 GiB): the watchdog's kill.
    const hog = await session.exec(ALLOCATE(200), { timeoutMs: 25_000, memoryLimitBytes: 64 * MiB });
    assert.equal(hog.killed, 'memory');
    assert.equal(hog.exitCode, null);
    assert.ok(hog.durationMs < 20_000, `killed after ${String(hog.durationMs)} ms`);
    assert.equal(watchers(), 3);
    await noWatcherLeft(docker, container);

    // No limit, no watcher; the shell goes on.
    const after = await session.exec('echo alive', { timeoutMs: 10_000 });
    assert.equal(after.output, 'alive\n');
    assert.equal(watchers(), 3);
  },
  { timeout: 120_000 },
);

dockerTest(
  'memory watchdog (Docker): a command that kills its watcher is still measured (the watcher starts again)',
  async (docker, t) => {
    const { session, container, watchers } = await watchedShell(docker, t);
    // The watcher runs as the command's user, so the command can kill it: it comes back within an
    // interval and still catches the allocation that follows.
    const r = await session.exec(
      `until pkill -KILL -f ia-rss-watch; do sleep 0.1; done; sleep 1; ${ALLOCATE(200)}`,
      { timeoutMs: 25_000, memoryLimitBytes: 64 * MiB },
    );
    assert.equal(r.killed, 'memory');
    assert.ok(watchers() >= 2, `watcher execs: ${String(watchers())}`);
    await noWatcherLeft(docker, container);

    // Killed over and over for 3 s: started again at most once a second, as polling cost at worst.
    const before = watchers();
    const storm = await session.exec(
      'end=$((SECONDS + 3)); while [ $SECONDS -lt $end ]; do pkill -KILL -f ia-rss-watch; sleep 0.05; done; echo over',
      { timeoutMs: 20_000, memoryLimitBytes: 64 * MiB },
    );
    assert.equal(storm.output, 'over\n');
    assert.ok(watchers() - before <= 5, `watcher execs in 3 s: ${String(watchers() - before)}`);
    await noWatcherLeft(docker, container);
  },
  { timeout: 120_000 },
);

dockerTest(
  "attack: a command floods its watcher's output (the worker reads it) with 64 MB and no newline: the worker keeps none of it, and the command is still stopped",
  async (docker, t) => {
    const { session } = await watchedShell(docker, t);
    let peak = 0;
    const base = process.memoryUsage().heapUsed;
    const sampler = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage().heapUsed - base);
    }, 20);
    t.after(() => {
      clearInterval(sampler);
    });
    // The watcher runs as the command's user: its stdout is writable through /proc.
    const r = await session.exec(
      'until p=$(pgrep -f ia-rss-watch); do sleep 0.1; done; ' +
        "head -c 64000000 /dev/zero | tr '\\0' x > /proc/${p%%[!0-9]*}/fd/1 && echo flooded; " +
        ALLOCATE(200),
      { timeoutMs: 60_000, memoryLimitBytes: 64 * MiB },
    );
    clearInterval(sampler);
    assert.match(r.output, /flooded/, 'the flood reached the watcher');
    assert.equal(r.killed, 'memory');
    assert.ok(peak < 48 * MiB, `the worker's heap grew by ${String(Math.round(peak / MiB))} MiB`);
  },
  { timeout: 120_000, attack: true },
);
