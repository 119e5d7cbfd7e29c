import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import pg from 'pg';
import { freePort } from './redis-server.js';

/** Debian's server binaries (`apt-get install -y postgresql`), newest major first. */
function binDir(): string | null {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return null;
  const majors = readdirSync(root)
    .filter((d) => /^\d+$/.test(d) && existsSync(join(root, d, 'bin', 'postgres')))
    .sort((a, b) => Number(b) - Number(a));
  return majors[0] === undefined ? null : join(root, majors[0], 'bin');
}

/**
 * How a test that needs PostgreSQL reacts to its absence: skip on a developer machine, fail in CI
 * (`.ci/run` sets ISSUE_AGENT_REQUIRE_POSTGRES=1).
 */
export function postgresSkipReason(): string | false {
  if (binDir() !== null) return false;
  if (process.env.ISSUE_AGENT_REQUIRE_POSTGRES === '1')
    throw new Error(
      'ISSUE_AGENT_REQUIRE_POSTGRES=1 but PostgreSQL is not installed (apt-get install -y postgresql)',
    );
  return 'PostgreSQL is not installed';
}

export interface TestPostgres {
  /** postgres://… of the test database. */
  readonly url: string;
  /** Stops the server (fast shutdown: sessions are cut) and starts it again on the same port and data. */
  restart(downMs?: number): Promise<void>;
  log(): string;
  stop(): Promise<void>;
}

/**
 * A private PostgreSQL server on loopback with its own data folder (initdb, trust auth for the one
 * local user). PostgreSQL refuses to run as root: as root (CI) the server runs as the `postgres`
 * user the package made, with the folder given to it.
 */
export async function startPostgres(): Promise<TestPostgres> {
  const bin = binDir();
  if (bin === null) throw new Error('PostgreSQL is not installed');
  const dir = mkdtempSync(join(tmpdir(), 'ia-pg-'));
  const data = join(dir, 'data');
  const asUser: { uid?: number; gid?: number } = {};
  if (userInfo().uid === 0) {
    const id = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
    const gid = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
    if (id.status !== 0)
      throw new Error('running as root and there is no postgres user to run the server as');
    asUser.uid = Number(id.stdout.trim());
    asUser.gid = Number(gid.stdout.trim());
    chownSync(dir, asUser.uid, asUser.gid);
  }
  const user = 'issue_agent';
  const init = spawnSync(
    join(bin, 'initdb'),
    ['-D', data, '-U', user, '-A', 'trust', '-E', 'UTF8', '--no-locale', '--no-instructions'],
    { encoding: 'utf8', ...asUser },
  );
  if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr}`);
  const port = await freePort();
  let child: ChildProcess | null = null;
  const url = `postgres://${user}@127.0.0.1:${port}/postgres`;
  const start = async (): Promise<void> => {
    child = spawn(
      join(bin, 'postgres'),
      [
        '-D',
        data,
        '-p',
        String(port),
        '-c',
        'listen_addresses=127.0.0.1',
        '-c',
        `unix_socket_directories=${dir}`,
        '-c',
        `logging_collector=off`,
      ],
      { stdio: ['ignore', 'ignore', 'pipe'], ...asUser },
    );
    let log = '';
    child.stderr?.on('data', (d: Buffer) => {
      log += d.toString('utf8');
      serverLog = log;
    });
    const deadline = Date.now() + 20_000;
    for (;;) {
      const c = new pg.Client({ connectionString: url });
      c.on('error', () => undefined);
      try {
        await c.connect();
        await c.query('SELECT 1');
        await c.end();
        return;
      } catch {
        await c.end().catch(() => undefined);
      }
      if (child.exitCode !== null) throw new Error(`postgres exited: ${log}`);
      if (Date.now() > deadline) throw new Error(`postgres did not start on port ${port}: ${log}`);
      await delay(100);
    }
  };
  let serverLog = '';
  const stopChild = async (): Promise<void> => {
    const c = child;
    if (c === null || c.exitCode !== null) return;
    const exited = new Promise((resolve) => c.once('exit', resolve));
    c.kill('SIGINT'); // fast shutdown: open sessions are ended, the data is consistent
    await exited;
    child = null;
  };
  await start();
  return {
    url,
    restart: async (downMs = 1000) => {
      await stopChild();
      await delay(downMs);
      await start();
    },
    log: () => serverLog,
    stop: async () => {
      await stopChild();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
