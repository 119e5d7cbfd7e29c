import { mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';

/**
 * One user of a repository's mirror at a time: jobs of the same repository on one host (in this
 * process, or in other worker processes sharing the work folder) would otherwise fetch into it at
 * once (git refuses the second ref update) or clone from it while another job moves it aside.
 *
 * In this process: a queue per mirror. Across processes: a lock folder beside the mirror, made with
 * `mkdir` (atomic), holding the owner's pid. A lock whose owner is gone (the pid no longer runs) or
 * that is older than `staleMs` (a hung owner) is taken over. A wait longer than `waitMs` fails.
 */
const queues = new Map<string, Promise<void>>();

export async function withMirrorLock<T>(
  mirror: string,
  fn: () => Promise<T>,
  options: { readonly waitMs?: number; readonly staleMs?: number } = {},
): Promise<T> {
  const previous = queues.get(mirror) ?? Promise.resolve();
  let release: () => void = () => undefined;
  const mine = new Promise<void>((resolve) => {
    release = resolve;
  });
  const chained = previous.then(() => mine);
  queues.set(mirror, chained);
  try {
    await previous;
    const lock = `${mirror}.lock`;
    await acquire(lock, options.waitMs ?? 10 * 60_000, options.staleMs ?? 15 * 60_000);
    try {
      return await fn();
    } finally {
      await rm(lock, { recursive: true, force: true });
    }
  } finally {
    release();
    if (queues.get(mirror) === chained) queues.delete(mirror);
  }
}

async function acquire(lock: string, waitMs: number, staleMs: number): Promise<void> {
  await mkdir(dirname(lock), { recursive: true, mode: 0o700 });
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      await mkdir(lock, { mode: 0o700 });
      await writeFile(join(lock, 'owner'), `${process.pid}\n`);
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    if (await stale(lock, staleMs)) {
      await rm(lock, { recursive: true, force: true });
      continue;
    }
    if (Date.now() > deadline) throw new Error(`the mirror is locked by another job (${lock})`);
    await delay(100);
  }
}

async function stale(lock: string, staleMs: number): Promise<boolean> {
  try {
    const st = await stat(lock);
    if (Date.now() - st.mtimeMs > staleMs) return true;
    const pid = Number((await readFile(join(lock, 'owner'), 'utf8')).trim());
    if (!Number.isSafeInteger(pid) || pid <= 0) {
      // Being written right now, or broken: broken only once it is old enough to have been written.
      return Date.now() - st.mtimeMs > 5000;
    }
    try {
      process.kill(pid, 0);
      return false;
    } catch (error) {
      return (error as NodeJS.ErrnoException).code === 'ESRCH';
    }
  } catch {
    // Released meanwhile.
    return false;
  }
}
