import type Docker from 'dockerode';
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
      // Already gone (another worker reaped it first) is fine.
      if (!(
        typeof error === 'object' &&
        error !== null &&
        'statusCode' in error &&
        error.statusCode === 404
      )) {
        throw error;
      }
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
