import type Docker from 'dockerode';
import { LABEL_OWNER, LABEL_SANDBOX, ownerId, ownerState } from './owner.js';

export interface ReapOptions {
  /**
   * Also remove containers older than this (ms), whoever owns them: the only way to collect the
   * containers of a worker on another host that died. Default: no age limit.
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
    const tooOld = options.olderThanMs !== undefined && now - c.Created * 1000 > options.olderThanMs;
    const orphan = owner !== self && (owner === '' || ownerState(owner) === 'gone' || tooOld);
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
