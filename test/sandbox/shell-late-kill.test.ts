import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { localShellHost } from '../../src/sandbox/local/local-sandbox.js';
import Docker from 'dockerode';
import { DockerShellHost } from '../../src/sandbox/docker/docker-shell.js';
import { ShellSession, type ShellHost } from '../../src/sandbox/shell-session.js';

/**
 * A memory reading that comes back after its command ended (a slow host under load) must not kill
 * the command that runs next: the kill belongs to the command it was measured for.
 */
test('a late memory-watchdog reading does not kill the next command', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ia-late-kill-'));
  t.after(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const inner = localShellHost(dir, { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir });
  const host: ShellHost = {
    spawn: () => inner.spawn(),
    killDescendants: (pid) => inner.killDescendants(pid),
    // Every reading is huge and arrives 400 ms late.
    descendantsRssBytes: async () => {
      await delay(400);
      return 1e12;
    },
  };
  const session = new ShellSession(host, {
    workdir: dir,
    stateFile: join(dir, '.state'),
    capture: { headBytes: 65536, tailBytes: 65536, spillDir: dir },
    memoryPollMs: 20,
  });
  await session.start();
  t.after(() => {
    session.close();
  });
  // Ends before its first reading comes back; that reading then says "over the limit".
  const first = await session.exec('sleep 0.1', { timeoutMs: 5000, memoryLimitBytes: 1 });
  assert.equal(first.killed, null);
  const next = await session.exec('sleep 1; echo survived', { timeoutMs: 5000 });
  assert.equal(next.killed, null);
  assert.equal(next.exitCode, 0);
  assert.equal(next.output, 'survived\n');
});

/**
 * A host whose measurement is costly sets how often the watchdog measures; a command shorter than
 * that interval is never measured. Docker's standing watcher reads every half second
 * (test/sandbox/docker/memory-watch.test.ts).
 */
test('the memory watchdog measures as often as the host asks, and the Docker host asks twice a second', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ia-poll-'));
  t.after(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const inner = localShellHost(dir, { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir });
  const readings = async (memoryPollMs: number | undefined): Promise<number> => {
    let n = 0;
    const host: ShellHost = {
      spawn: () => inner.spawn(),
      killDescendants: (pid) => inner.killDescendants(pid),
      descendantsRssBytes: () => {
        n += 1;
        return Promise.resolve(0);
      },
      ...(memoryPollMs === undefined ? {} : { memoryPollMs }),
    };
    const session = new ShellSession(host, {
      workdir: dir,
      stateFile: join(dir, '.state'),
      capture: { headBytes: 65536, tailBytes: 65536, spillDir: dir },
    });
    await session.start();
    try {
      const r = await session.exec('sleep 0.7', { timeoutMs: 5000, memoryLimitBytes: 1 << 30 });
      assert.equal(r.exitCode, 0);
    } finally {
      session.close();
    }
    return n;
  };
  assert.ok((await readings(undefined)) >= 2, 'every 200 ms by default');
  assert.equal(await readings(1000), 0, 'none within the first second');
  assert.equal(
    new DockerShellHost(new Docker(), new Docker().getContainer('none'), { user: '1:1', workdir: '/' })
      .memoryPollMs,
    500,
  );
});
