import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { Redis } from 'ioredis';

/** True when a redis-server binary is on PATH. */
export function haveRedis(): boolean {
  return spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
}

/**
 * How a test that needs Redis reacts to its absence: skip on a developer machine, fail in CI
 * (`.ci/run` sets ISSUE_AGENT_REQUIRE_REDIS=1) so such tests can never silently not run there.
 */
export function redisSkipReason(): string | false {
  if (haveRedis()) return false;
  if (process.env.ISSUE_AGENT_REQUIRE_REDIS === '1') {
    throw new Error(
      'ISSUE_AGENT_REQUIRE_REDIS=1 but redis-server is not installed (apt-get install -y redis-server)',
    );
  }
  return 'redis-server is not installed';
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const address = s.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      s.close(() => {
        resolve(port);
      });
    });
  });
}

export interface TestRedis {
  readonly url: string;
  /** Stops the server (it saves its append-only file) and starts it again on the same port and data. */
  restart(downMs?: number): Promise<void>;
  /** The server's own log (slow fsyncs, restarts), for failure messages. */
  log(): string;
  stop(): Promise<void>;
}

/** A private redis-server on loopback with its own data folder; AOF on so a restart keeps the queue. */
export async function startRedis(): Promise<TestRedis> {
  const dir = mkdtempSync(join(tmpdir(), 'ia-redis-'));
  const port = await freePort();
  let child: ChildProcess | null = null;
  const start = async (): Promise<void> => {
    child = spawn(
      'redis-server',
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--dir',
        dir,
        '--appendonly',
        'yes',
        // The AOF is still written on every change and flushed when the server stops (restart()
        // keeps the queue), but never fsynced by the clock: on a disk that Docker and npm keep
        // busy, an `everysec` fsync can block Redis's main thread for seconds, and with it the
        // tests' short BullMQ locks (their renewals wait).
        '--appendfsync',
        'no',
        '--logfile',
        join(dir, 'redis.log'),
        '--save',
        '',
        '--protected-mode',
        'yes',
      ],
      { stdio: 'ignore' },
    );
    const deadline = Date.now() + 10_000;
    for (;;) {
      const c = new Redis({
        port,
        host: '127.0.0.1',
        lazyConnect: true,
        maxRetriesPerRequest: 0,
        retryStrategy: () => null,
      });
      c.on('error', () => undefined);
      try {
        await c.connect();
        await c.ping();
        c.disconnect();
        return;
      } catch {
        c.disconnect();
      }
      if (Date.now() > deadline) throw new Error(`redis-server did not start on port ${port}`);
      await delay(50);
    }
  };
  const stopChild = async (): Promise<void> => {
    const c = child;
    if (c === null || c.exitCode !== null) return;
    const exited = new Promise((resolve) => c.once('exit', resolve));
    c.kill('SIGTERM');
    await exited;
    child = null;
  };
  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    restart: async (downMs = 1000) => {
      await stopChild();
      await delay(downMs);
      await start();
    },
    log: () => {
      try {
        return readFileSync(join(dir, 'redis.log'), 'utf8');
      } catch {
        return '';
      }
    },
    stop: async () => {
      await stopChild();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
