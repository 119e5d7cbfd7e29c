/**
 * How long a test run may take, so that a hung test costs minutes and not the run's budget.
 *
 * - Per test: where the runner can stop one test or file (node:test's `--test-timeout`, which in
 *   node 20 and 22 also stops a whole file; the harness's pytest plugin), the harness asks it to
 *   after `perTestMs`. Before any run is known that is a fifth of the test timeout, kept between one
 *   minute (a third of the timeout when that is shorter) and five minutes: three minutes with the
 *   default fifteen-minute timeout. jest, vitest, mocha, node-tap
 *   and ava bound their tests themselves (5 s, 5 s, 2 s, 30 s a file, 10 s of inactivity by
 *   default), and the harness does not override what a repository configured for them.
 * - After the baseline, its durations bound the runs that follow: a test or file may take three
 *   times the baseline's slowest file and half a minute more (at least a minute, at most the first
 *   bound), and the whole run three times the baseline's duration plus one per-test bound (at
 *   least two minutes, at most the test timeout). A baseline that was stopped bounds nothing.
 */
import type { Limits } from '../events/schema.js';

export interface TestBounds {
  /** The whole run is stopped after this long. */
  readonly runMs: number;
  /** A test (or, for node:test, a file) still running after this long is stopped. */
  readonly perTestMs: number;
}

const MINUTE = 60_000;

function clamp(n: number, lo: number, hi: number): number {
  return Math.min(hi, Math.max(lo, n));
}

export function firstBounds(limits: Pick<Limits, 'testTimeoutMs'>): TestBounds {
  const t = limits.testTimeoutMs;
  // A short test timeout (a test's, a small project's) lowers the one-minute floor to a third of it.
  return {
    runMs: t,
    perTestMs: Math.min(t, clamp(Math.round(t / 5), Math.min(MINUTE, Math.round(t / 3)), 5 * MINUTE)),
  };
}

/** The bounds of the runs after `baseline` (null: none ran, or it is not known). */
export function boundsAfter(
  baseline: {
    readonly durationMs: number;
    readonly killed: string | null;
    readonly exitCode: number | null;
    readonly summary: { readonly fileMs?: Readonly<Record<string, number>> | undefined };
  } | null,
  limits: Pick<Limits, 'testTimeoutMs'>,
): TestBounds {
  const first = firstBounds(limits);
  if (baseline === null || baseline.killed !== null || baseline.exitCode === null) return first;
  const slowest = Math.max(0, ...Object.values(baseline.summary.fileMs ?? {}));
  const perTestMs =
    slowest > 0
      ? clamp(3 * slowest + 30_000, Math.min(MINUTE, first.perTestMs), first.perTestMs)
      : first.perTestMs;
  const runMs = clamp(
    3 * baseline.durationMs + perTestMs,
    Math.min(2 * MINUTE, limits.testTimeoutMs),
    limits.testTimeoutMs,
  );
  return { runMs, perTestMs };
}
