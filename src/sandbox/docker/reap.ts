import { lstat, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type Docker from 'dockerode';
import { ENTRY_STAGING_FOLDER, POOL_ENTRY_FOLDER, RESTORE_DIR } from './container-spec.js';
import { LABEL_OWNER, LABEL_SANDBOX, ownerId, ownerState } from './owner.js';

export interface ReapOptions {
  /**
   * Also remove containers older than this (ms) whose owner is not seen alive: the only way to
   * collect the containers of a worker on another host, or in another PID namespace, that died.
   * Default: no age limit.
   */
  readonly olderThanMs?: number | undefined;
  /** Containers this returns true for are kept (e.g. ids of live jobs this worker still runs). */
  readonly keep?: ((container: Docker.ContainerInfo) => boolean) | undefined;
  /** The calling worker's owner id; its own containers are never reaped. Default: this process. */
  readonly self?: string | undefined;
}

export interface ReapResult {
  readonly removed: string[];
  readonly kept: number;
}

/**
 * Removes labelled sandbox containers (warm-pool ones included) whose owner worker is gone: owned
 * by a process on this host that no longer runs (PID reuse is detected through the process start
 * time), or older than olderThanMs. Run at worker start. Anonymous volumes go with them.
 */
export async function reapOrphans(docker: Docker, options: ReapOptions = {}): Promise<ReapResult> {
  const self = options.self ?? ownerId();
  const containers = await docker.listContainers({ all: true, filters: { label: [`${LABEL_SANDBOX}=1`] } });
  const now = Date.now();
  const removed: string[] = [];
  let kept = 0;
  for (const c of containers) {
    const owner = c.Labels[LABEL_OWNER] ?? '';
    const state = owner === '' ? 'gone' : ownerState(owner);
    // Age collects what cannot be judged (another host, another PID namespace), never a container
    // of a worker seen running: a live job may last longer than any age limit allows.
    const tooOld =
      state !== 'alive' && options.olderThanMs !== undefined && now - c.Created * 1000 > options.olderThanMs;
    const orphan = owner !== self && (state === 'gone' || tooOld);
    if (!orphan || options.keep?.(c) === true) {
      kept += 1;
      continue;
    }
    try {
      await docker.getContainer(c.Id).remove({ force: true, v: true });
      removed.push(c.Id);
    } catch (error) {
      // Already gone (another worker reaped it first), or being removed by someone else (its owner
      // on its way out, another worker's reaper: the engine answers 409 "removal … already in
      // progress"), is what was wanted: a worker must not die of it at start.
      const code =
        typeof error === 'object' && error !== null && 'statusCode' in error ? error.statusCode : undefined;
      if (code !== 404 && code !== 409) throw error;
    }
  }
  return { removed, kept };
}

/**
 * What a worker reaps when it starts: containers of gone workers, and those of workers whose
 * liveness cannot be seen from here (another host, another PID namespace: a worker container that
 * crashed and was restarted gets a new one) once they are older than a day or twice the longest a
 * job's agent may run, whichever is longer, so no container anyone can still be using is removed.
 * That includes idle warm-pool containers: a pool that finds its waiting container gone makes
 * another (warm-pool.ts).
 */
export function startReap(maxWallMs: number): ReapOptions {
  return { olderThanMs: Math.max(24 * 60 * 60_000, 2 * maxWallMs) };
}

/**
 * Removes the host folders a warm pool leaves when its worker dies (warm-pool.ts): a container's
 * entry folder once no sandbox container mounts it, and an acquire's staging folder. Both may hold
 * hard links to environment cache entries, which the cache no longer counts once it evicted them.
 * Only folders of those names directly in `dir` (the worker's TMPDIR), older than `minAgeMs` (a
 * worker sharing the folder may be making one's container right now), never a link; what is in
 * them the host wrote, and sandboxes see them read-only.
 */
export async function reapEntryFolders(
  docker: Docker,
  options: { readonly dir?: string; readonly minAgeMs?: number } = {},
): Promise<string[]> {
  const dir = options.dir ?? tmpdir();
  const minAgeMs = options.minAgeMs ?? 15 * 60_000;
  const containers = await docker.listContainers({ all: true, filters: { label: [`${LABEL_SANDBOX}=1`] } });
  const mounted = new Set<string>();
  for (const c of containers) {
    for (const m of c.Mounts) if (m.Destination === RESTORE_DIR) mounted.add(dirname(m.Source));
  }
  const removed: string[] = [];
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return removed;
  }
  const now = Date.now();
  for (const name of names) {
    if (!name.startsWith(POOL_ENTRY_FOLDER) && !name.startsWith(ENTRY_STAGING_FOLDER)) continue;
    const path = join(dir, name);
    const st = await lstat(path).catch(() => null);
    if (st === null || !st.isDirectory() || now - st.mtimeMs < minAgeMs || mounted.has(path)) continue;
    await rm(path, { recursive: true, force: true });
    removed.push(path);
  }
  return removed;
}
