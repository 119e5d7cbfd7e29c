import { createHash } from 'node:crypto';
import type { BaseState, EventOf } from '../events/schema.js';

/** What a baseline test run recorded, without the fields its store gives it. */
export type BaselineRun = Omit<EventOf<'test_run'>, 'id' | 'ts' | 'kind' | 'phase' | 'reusedFrom'>;

export interface StoredBaseline {
  readonly run: BaselineRun;
  /** The run that ran it, and when. */
  readonly conversationId: string;
  readonly ts: string;
}

/**
 * Baseline test runs kept for later runs of the same repository (follow-up rounds, retries,
 * attempts): the baseline depends only on the base tree, the environment and the test command, so
 * a run whose key matches an earlier run's does not run it again. Implementations scope entries to
 * one repository; the key below covers the rest.
 */
export interface BaselineCache {
  get(key: string): Promise<StoredBaseline | null>;
  put(key: string, baseline: StoredBaseline): Promise<void>;
}

/**
 * The key of a run's baseline: everything its result depends on. The base tree covers every file of
 * the repository (lockfiles, manifests, the test script's definition); the environment record
 * covers the image, the runtimes, the setup commands and the variables the tests run with; the
 * limits cover the test timeout. Null when there is no test command.
 */
export function baselineKey(base: BaseState): string | null {
  if (base.testCommand === null) return null;
  const env = base.environment;
  return createHash('sha256')
    .update(
      JSON.stringify({
        // 2: test ids carry their files (testing/test-run.ts); a v1 baseline would not compare.
        v: 2,
        tree: base.workspace.baseTree,
        command: base.testCommand,
        sandbox: base.sandbox,
        limits: base.limits,
        environment:
          env === undefined
            ? null
            : {
                image: env.image,
                runtimes: env.runtimes.map((r) => [r.language, r.version]),
                setup: env.setup.commands.map((c) => c.command),
                testEnv: env.setup.testEnv,
              },
      }),
    )
    .digest('hex');
}

/** Whether a baseline is worth keeping: it ran to its end (not killed by a timeout or a limit). */
export function keepable(run: BaselineRun): boolean {
  return run.killed === null && run.exitCode !== null;
}
