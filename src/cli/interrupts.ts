import { removeHeldPaths } from '../sandbox/held-paths.js';
import { killDescendants } from '../sandbox/local/proc-tree.js';

/** The exit status of a command stopped by Ctrl-C or SIGTERM (128 + SIGINT). */
export const EXIT_INTERRUPTED = 130;

/** A forced stop gives up waiting on the engine or the file system after this long, and exits. */
const STOP_NOW_BOUND_MS = 10_000;

export interface Interrupts {
  /** Aborted by the first Ctrl-C (SIGINT) or SIGTERM; its reason says which (`cancelled by SIGINT`). */
  readonly signal: AbortSignal;
  /** Stops listening: from then on a signal has its default effect again. */
  dispose(): void;
}

/**
 * Ctrl-C and SIGTERM over a whole command, setup included. The first aborts `signal` (setup stops
 * within seconds and cleans up as usual, the agent stops at its next step) and calls `onFirst`; a
 * second one, while that cleanup runs, removes at once everything this process started
 * (stopNow) and exits EXIT_INTERRUPTED.
 */
export function listenForInterrupts(options: {
  /**
   * What the command's backend made beyond this process's children and held paths (Docker's
   * containers): a forced stop removes it (SandboxBackend.removeOwned).
   */
  readonly removeOwned?: (() => Promise<void>) | undefined;
  readonly onFirst: (signal: NodeJS.Signals) => void;
  /** Where the forced stop says what it does. */
  readonly write: (line: string) => void;
}): Interrupts {
  const controller = new AbortController();
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (!controller.signal.aborted) {
      controller.abort(`cancelled by ${signal}`);
      options.onFirst(signal);
      return;
    }
    if (stopping) return;
    stopping = true;
    options.write(`${signal} again: removing everything this run started, then exiting`);
    const bound = setTimeout(() => {
      options.write('gave up waiting for the removal; exiting');
      process.exit(EXIT_INTERRUPTED);
    }, STOP_NOW_BOUND_MS);
    const exit = (): void => {
      clearTimeout(bound);
      process.exit(EXIT_INTERRUPTED);
    };
    void stopNow(options.removeOwned).then(exit, exit);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return {
    signal: controller.signal,
    dispose: () => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    },
  };
}

/**
 * Removes everything this process started for its runs, whatever is still closing it: every process
 * below this one (an isolated local sandbox with all that runs in it, a host `tar`, `git`), what
 * the backend made (every container, by its owner label, see docker/owner.ts), then every host path
 * it made for them (held-paths.ts). The egress proxies are this process's own servers: they end with it.
 */
export async function stopNow(removeOwned?: () => Promise<void>): Promise<void> {
  await Promise.allSettled([killDescendants(process.pid), removeOwned?.()]);
  await removeHeldPaths();
}
