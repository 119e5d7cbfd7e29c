import type { Outcome } from '../../agent/run-agent.js';
import { verdict } from '../../testing/verdict.js';
import { reduceState } from '../../events/reduce-state.js';
import type { AgentEvent, BaseState } from '../../events/schema.js';
import type { AttemptTableRow } from '../../publish/pr-body.js';

/**
 * The run id (and conversation id) of attempt `k` of a job: the job's own id for the first, so a
 * one-attempt job's folder is the job's folder, and `<job>-a<k>` for the others,
 * each with its own folder beside the job's (workspace, pristine clone and trajectory).
 */
export function attemptRunId(jobId: string, k: number): string {
  return k === 1 ? jobId : `${jobId}-a${k}`;
}

/**
 * What one attempt came to, in the terms the harness ranks by: the PR table's row (pr-body.ts) without
 * the winner mark and the link, with the attempt's run id.
 */
export type AttemptStanding = Omit<AttemptTableRow, 'winner' | 'link'> & { readonly runId: string };

/** A finished attempt's standing from its trajectory. */
export function standingOf(
  number: number,
  runId: string,
  store: { readonly base: BaseState; readonly events: readonly AgentEvent[] },
  outcome: Outcome,
): AttemptStanding {
  const state = reduceState(store.events);
  const final = state.finalTest;
  const v = final === null ? null : verdict(state.baseline, final, state.withoutFix ?? undefined);
  const c = v?.comparison ?? null;
  const checkpoint = state.lastCheckpoint;
  const changed = checkpoint !== null && checkpoint.tree !== store.base.workspace.baseTree;
  return {
    number,
    runId,
    outcome: outcome.outcome,
    reason: outcome.reason,
    // Tests that pass without the change's code too are not counted: they show nothing.
    newlyPassing: c === null ? 0 : c.fixed.length + c.newPassing.length - (v?.passWithoutFix.length ?? 0),
    failing: final === null ? null : final.summary.failed,
    changedLines: changed && checkpoint.diff !== null ? diffLines(checkpoint.diff) : null,
    filesChanged: changed ? checkpoint.filesChanged : 0,
    usd: state.usd,
  };
}

/** The standing of an attempt that ended by throwing (it has no outcome to rank). */
export function crashedStanding(number: number, runId: string, reason: string, usd: number): AttemptStanding {
  return {
    number,
    runId,
    outcome: 'crashed',
    reason,
    newlyPassing: 0,
    failing: null,
    changedLines: null,
    filesChanged: 0,
    usd,
  };
}

/** Added and removed lines of a `git diff` (file headers not counted). */
export function diffLines(diff: string): number {
  let n = 0;
  for (const line of diff.split('\n')) {
    if (
      (line.startsWith('+') && !line.startsWith('+++ ')) ||
      (line.startsWith('-') && !line.startsWith('--- '))
    )
      n += 1;
  }
  return n;
}

function tier(s: AttemptStanding): number {
  if (s.outcome === 'resolved') return 0;
  if (s.outcome === 'unverified') return 1;
  // A question is worth more than a change that proves nothing: it is what the issue needs next.
  if (s.outcome === 'needs_info') return 2;
  return 3;
}

/**
 * The order the harness picks from, best first: resolved beats unverified beats a question
 * (needs_info) beats everything else;
 * among equals, more newly passing tests, then fewer changed lines (a change too large to keep
 * counts as largest), then lower cost, then the earlier attempt (so the choice is deterministic).
 */
export function rankAttempts(standings: readonly AttemptStanding[]): AttemptStanding[] {
  const size = (s: AttemptStanding): number => s.changedLines ?? Number.POSITIVE_INFINITY;
  return [...standings].sort(
    (a, b) =>
      tier(a) - tier(b) ||
      b.newlyPassing - a.newlyPassing ||
      size(a) - size(b) ||
      a.usd - b.usd ||
      a.number - b.number,
  );
}

/** An attempt left unstarted: an earlier one resolved the issue (`stopOnFirstResolved`), or a stop came. */
export class AttemptNotStarted extends Error {
  override readonly name = 'AttemptNotStarted';
  constructor(
    readonly attempt: number,
    why: 'resolved' | 'stopped' = 'resolved',
  ) {
    super(
      why === 'resolved'
        ? `attempt ${attempt} was not started: an earlier attempt resolved the issue (stopOnFirstResolved)`
        : `attempt ${attempt} was not started: the job was stopped`,
    );
  }
}

/**
 * Runs `count` attempts, at most `parallel` at once, and returns each one's result in attempt
 * order. An attempt that throws is recorded as such (its error) and never stops the others; with
 * `stopOnFirstResolved`, the first resolved attempt aborts the rest through their signals (they
 * end `cancelled`, and attempts not yet started do not start).
 */
export async function runAttempts<T>(options: {
  readonly count: number;
  readonly parallel: number;
  readonly stopOnFirstResolved: boolean;
  readonly signal: AbortSignal;
  readonly run: (k: number, signal: AbortSignal) => Promise<T>;
  readonly resolved: (result: T) => boolean;
}): Promise<({ readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: unknown })[]> {
  const enough = new AbortController();
  const signal = AbortSignal.any([options.signal, enough.signal]);
  const results = new Array<{ ok: true; value: T } | { ok: false; error: unknown }>(options.count);
  let next = 1;
  const lane = async (): Promise<void> => {
    for (let k = next++; k <= options.count; k = next++) {
      if (signal.aborted) {
        results[k - 1] = {
          ok: false,
          error: new AttemptNotStarted(k, enough.signal.aborted ? 'resolved' : 'stopped'),
        };
        continue;
      }
      try {
        const value = await options.run(k, signal);
        results[k - 1] = { ok: true, value };
        if (options.stopOnFirstResolved && options.resolved(value)) {
          enough.abort(new Error(`attempt ${k} resolved the issue (stopOnFirstResolved)`));
        }
      } catch (error) {
        results[k - 1] = { ok: false, error };
      }
    }
  };
  const lanes = Math.max(1, Math.min(options.parallel, options.count));
  await Promise.all(Array.from({ length: lanes }, () => lane()));
  return results;
}
