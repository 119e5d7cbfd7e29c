import { join } from 'node:path';
import type { Outcome } from '../agent/run-agent.js';
import { EventStoreError } from '../events/event-store.js';
import { reduceState } from '../events/reduce-state.js';
import { FileRunStorage, type RunStorage } from '../events/run-storage.js';
import { HostGit } from '../github/host-git.js';
import { pristineDir } from '../github/pristine-clone.js';
import { Redactor } from '../publish/redact.js';
import { SandboxCancelledError } from '../sandbox/sandbox.js';
import type { FixJob } from '../queue/payloads.js';
import { inSpan } from '../telemetry/tracing.js';
import { ProgressReporter } from './progress-reporter.js';
import { fetchPull, fetchRepo, readIssue, recordJob } from './stages/prepare.js';
import {
  attemptsOf,
  openAttempts,
  pickWinner,
  readDecision,
  recordDecision,
  runAttempt,
  runBestOf,
  type AttemptsResult,
} from './stages/attempt-run.js';
import { publish } from './stages/publish.js';
import { reportEnd, reportFailure, type JobEnd } from './stages/report.js';
import { continueConversation } from './stages/continue-round.js';
import type { JobContext, JobSpend, PullInfo } from './stages/types.js';
import { refusalReason, worstCallUsd } from '../agent/spend-budget.js';
import { monthlyBudget, spendScope, startRefusal, type MonthlyLimits } from '../events/spend-ledger.js';
import { findPrice } from '../model/pricing.js';

export { PermanentJobError } from './permanent-job-error.js';
import { PermanentJobError } from './permanent-job-error.js';
export { jobFolder } from './job-folder.js';
import { jobFolder } from './job-folder.js';
export { branchFor } from './stages/publish.js';
import type { FixJobResult, FixRuntime } from './fix-runtime.js';
export type { FixJobResult, FixRuntime, TokenSource } from './fix-runtime.js';

/** The job failed; `permanent` says whether retrying can help. The progress comment already says so. */
export class FixRunError extends Error {
  override readonly name = 'FixRunError';
  constructor(
    message: string,
    readonly permanent: boolean,
    options?: { cause?: unknown },
    /** This run gave the job up to another worker: nothing was (or may be) said about it. */
    readonly lost = false,
  ) {
    super(message, options);
  }
}

/**
 * Whether a run must stop without a word: its worker lost the job's lock (`rt.lost`), the log was
 * fenced for this run (EventStoreError `fenced`), or the log took another run's event first
 * (`conflict`) and the queue says this worker no longer holds the job. The worker that holds it
 * reports, publishes and ends the job; a holder that lost the race for one event fails this
 * attempt as any failure (BullMQ retries it, resuming from the log).
 */
async function lostTheJob(rt: FixRuntime, error: unknown): Promise<boolean> {
  if (rt.lost?.() === true) return true;
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 10; e = e.cause, depth += 1) {
    if (!(e instanceof EventStoreError)) continue;
    if (e.code === 'fenced') return true;
    if (e.code === 'conflict')
      return rt.holdsJob === undefined ? false : !(await rt.holdsJob().catch(() => false));
  }
  return false;
}

/**
 * One fix job, start to PR: prepare (repository, pull request, issue, sandbox) → run (the agent) →
 * publish (commit, policy, push, PR) → report (the end on the progress comment and in the thread).
 * Every stage can be re-entered after a crash: the trajectory folder is keyed by the job id, so a
 * second worker (after BullMQ's stall detection) resumes the event log instead of starting again;
 * publishing finds its commit (deterministic), its branch and its PR again instead of duplicating
 * them. Failures are reported on the progress comment and thrown as FixRunError.
 */
/** The result of a job that published nothing. */
function nothingPublished(outcome: Outcome['outcome'], storage: RunStorage, jobId: string): FixJobResult {
  return {
    outcome,
    pullRequest: null,
    pushed: false,
    trajectory: storage.locationOf(jobId),
    runId: jobId,
    branch: null,
  };
}

/** The job's context: its folders, clients, progress comment and redactor, from its payload and runtime. */
function jobContext(
  p: FixJob,
  rt: FixRuntime,
): { ctx: JobContext; storage: RunStorage; progress: ProgressReporter } {
  const jobId = rt.jobId;
  const dir = jobFolder(rt.jobsDir, jobId);
  const storage = rt.storage ?? new FileRunStorage(rt.jobsDir);
  const paths = {
    trajectory: join(dir, 'trajectory'),
    // Outside the job folder (which holds the workspace): see pristine-clone.ts.
    pristine: pristineDir(rt.jobsDir, jobId),
    workspace: join(dir, 'workspace'),
  };
  const log = rt.logger.child({
    job: jobId,
    repo: `${p.repo.owner}/${p.repo.name}`,
    issue: p.issue.number,
  });
  const { gh, tokens, bot } = rt;
  // Setup secrets never reach the agent, but setup output and errors are recorded: redact them too.
  const setupSecrets = Object.values(rt.agent.environment.setupSecrets);
  const redactor = (): Redactor =>
    new Redactor([...tokens.issued, ...rt.secrets, ...setupSecrets, ...(rt.agent.mcp?.secrets ?? [])]);
  const where = { owner: p.repo.owner, repo: p.repo.name };
  const progress = new ProgressReporter(
    rt.progressGh ?? gh,
    where,
    p.issue.number,
    p.progressCommentId,
    jobId,
    redactor,
    log,
    rt.runLink,
    bot.login,
    rt.progressIntervalMs,
    p.trigger.approvedBy == null
      ? undefined
      : {
          requestedBy: p.trigger.sender.login,
          approvedBy: p.trigger.approvedBy.login,
          covers: p.trigger.approvedBy.covers,
        },
    p.ci == null
      ? undefined
      : {
          round: p.ci.round,
          of: p.ci.of,
          ...(p.ci.preExisting === undefined ? {} : { preExisting: p.ci.preExisting }),
          ...(p.ci.baseRef === undefined ? {} : { baseRef: p.ci.baseRef }),
        },
    () => rt.lost?.() === true,
    p.pull?.human === undefined
      ? undefined
      : {
          author: p.pull.human.author,
          branch: p.pull.human.headRef,
          requester: p.trigger.sender.login,
          ...(p.pull.human.fork === undefined ? {} : { fork: p.pull.human.headRepo }),
        },
  );
  const ctx: JobContext = {
    p,
    jobId,
    jobsDir: rt.jobsDir,
    storage,
    where,
    paths,
    gh,
    git: new HostGit(rt.agent.sandboxPath, (t) => redactor().redact(t)),
    tokens,
    bot,
    progress,
    redactor,
    trajectoryLink: rt.trajectoryLink,
    log,
    ...(rt.commitVia === undefined ? {} : { commitVia: rt.commitVia }),
    spend: jobSpend(p, rt.spending),
  };
  return { ctx, storage, progress };
}

/**
 * The job's side of the month's spending limits: the owner's (the deployment's) and the
 * repository's. Fix jobs and reviews hold their model calls against it.
 */
export function jobSpend(p: FixJob, spending: FixRuntime['spending']): JobSpend | undefined {
  if (spending === undefined) return undefined;
  const { ledger, ownerUsd } = spending;
  const scope = spendScope(p.repo.owner, p.repo.name);
  const repoUsd = p.config.budgets.monthlyUsd ?? null;
  const limits: MonthlyLimits = {
    ownerUsd,
    repoUsd,
    ownerSource: 'ISSUE_AGENT_MONTHLY_USD',
    repoSource: '`budgets.monthlyUsd` in `.github/issue-agent.yml`',
  };
  return {
    budget: monthlyBudget(ledger, scope, limits),
    startRefusal: (callUsd) => startRefusal(ledger, scope, limits, callUsd),
  };
}

/**
 * Before a run starts (and before its sandbox is made): the reason it may not, when the month's
 * spend leaves no room for one model call at its most under the owner's or repository's limit.
 */
async function overBudget(
  ctx: JobContext,
  rt: FixRuntime,
  pull: PullInfo | null,
  end: (ctx: JobContext, end: JobEnd, pull: PullInfo | null) => Promise<void>,
): Promise<boolean> {
  if (ctx.spend === undefined) return false;
  const callUsd = worstCallUsd(findPrice(rt.agent.prices, rt.agent.model), rt.agent.limits);
  const refusal = await ctx.spend.startRefusal(callUsd);
  if (refusal === null) return false;
  ctx.log.warn({ refusal }, 'monthly spending limit reached; the job does not start');
  await end(ctx, { kind: 'budget_exhausted', reason: refusalReason(refusal, callUsd) }, pull);
  return true;
}

export async function runFix(p: FixJob, rt: FixRuntime, signal?: AbortSignal): Promise<FixJobResult> {
  const jobId = rt.jobId;
  const { ctx, storage, progress } = jobContext(p, rt);
  const none = (outcome: Outcome['outcome']): FixJobResult => nothingPublished(outcome, storage, jobId);

  const stop = await watchForStop(rt, signal);
  const giveUpIfInterrupted = (): void => {
    const times = rt.interruptedTooOften;
    if (times === undefined) return;
    throw new PermanentJobError(
      `this job was interrupted ${times} ${times === 1 ? 'time' : 'times'} (the worker running it was killed, crashed or froze for longer than its lock), so it is not run again; the worker logs say what stopped it`,
    );
  };
  // Every end is said on GitHub only by the worker that holds the job (see lostTheJob).
  const end = async (...args: Parameters<typeof reportEnd>): Promise<void> => {
    if (rt.lost?.() === true) throw new Error('this worker lost the job');
    await reportEnd(...args);
  };
  // The pull request the job is about, once read: a stop during setup says so on it too.
  let pull: PullInfo | null = null;
  try {
    await recordJob(storage, jobId, p);
    const repo = await fetchRepo(ctx, rt.baseBranch);
    // An answer to the agent's question: the same conversation, as a new round.
    await continueConversation(ctx);
    let store = await storage.open(jobId);
    let outcome = store === null ? null : reduceState(store.events).outcome;
    const stoppedBy = stop.by();
    if (outcome === null && stoppedBy !== null) {
      await end(ctx, { kind: 'cancelled', by: stoppedBy }, null);
      return none('cancelled');
    }
    if (p.kind === 'follow-up' && p.pull !== null) {
      const fetched = await fetchPull(ctx, p.pull.number, rt.backend);
      pull = fetched.pull;
      if (outcome === null && fetched.closed !== null) {
        await end(ctx, fetched.closed, pull);
        return none('cancelled');
      }
      // A CI round is about one head: after anyone pushed since, its failures may be gone.
      if (outcome === null && store === null && p.ci != null && pull.headSha !== p.ci.headSha) {
        await end(ctx, { kind: 'ci_head_moved', headSha: p.ci.headSha }, pull);
        return none('cancelled');
      }
    }
    const count = attemptsOf(p);
    let attempts: AttemptsResult | null = null;
    if (count > 1) {
      // Best-of-N: the job's outcome is the winner's, once every attempt has one.
      const existing = await openAttempts(ctx, count);
      const decided = await readDecision(ctx, existing);
      if (decided !== null) {
        attempts = decided;
      } else if (existing.some((a) => a.outcome === null)) {
        giveUpIfInterrupted();
        const issue = await readIssue(ctx, {
          resumed: existing.some((a) => a.store !== null),
          followUp: pull !== null,
        });
        if (!issue.ok) {
          await end(ctx, issue.end, pull);
          return none('cancelled');
        }
        // A run already under way stops at its next model call instead, with its log ended.
        if (existing.every((a) => a.store === null) && (await overBudget(ctx, rt, pull, end)))
          return none('budget_exhausted');
        progress.post({ kind: 'preparing' });
        attempts = await runBestOf(ctx, rt, existing, { repo, pull, issue: issue.text, signal: stop.signal });
      } else {
        attempts = pickWinner(ctx, existing, []);
      }
      if (attempts.winner === null) throw attempts.error;
      if (decided === null) {
        // A worker that lost the job saw its attempts stopped, not ended: its choice is not the job's.
        if (rt.lost?.() === true)
          throw new Error('this worker lost the job before choosing among its attempts');
        await recordDecision(ctx, attempts);
      }
      store = attempts.winner.store;
      outcome = attempts.winner.outcome;
    } else if (outcome === null) {
      giveUpIfInterrupted();
      const issue = await readIssue(ctx, { resumed: store !== null, followUp: pull !== null });
      if (!issue.ok) {
        await end(ctx, issue.end, pull);
        return none('cancelled');
      }
      if (store === null && (await overBudget(ctx, rt, pull, end))) return none('budget_exhausted');
      progress.post({ kind: 'preparing' });
      const ran = await runAttempt(ctx, rt, {
        repo,
        pull,
        issue: issue.text,
        store,
        signal: stop.signal,
        attempt: undefined,
      });
      store = ran.store;
      outcome = ran.outcome;
    }
    if (store === null) throw new Error('no trajectory after the run');
    // A stop ends every attempt; the one ranked first may then be one that failed before the stop.
    if (outcome.outcome === 'cancelled' || (attempts !== null && stop.by() !== null)) {
      await end(ctx, { kind: 'cancelled', by: stop.by() }, pull);
      return none('cancelled');
    }
    const winnerCtx = attempts?.winner === null || attempts === null ? ctx : attempts.winner.ctx;
    const asked = reduceState(store.events);
    if (outcome.outcome === 'needs_info' && asked.question !== null) {
      // Marked first: an answer that comes right after the question is posted finds it waiting.
      await rt.onQuestion?.(winnerCtx.jobId);
      await end(
        winnerCtx,
        { kind: 'needs_info', outcome, question: asked.question, round: asked.rounds },
        pull,
      );
      return {
        ...none('needs_info'),
        trajectory: storage.locationOf(winnerCtx.jobId),
        runId: winnerCtx.jobId,
      };
    }
    // Checked last before anything is published: a worker that lost the job publishes nothing.
    if (rt.lost?.() === true) throw new Error('this worker lost the job before publishing');
    const published = await inSpan('publish', { 'issue_agent.outcome': outcome.outcome }, () =>
      publish({
        ctx: winnerCtx,
        store,
        outcome,
        repo,
        pull,
        cancelled: rt.cancelled,
        attempts: attempts?.table,
      }),
    );
    await end(ctx, published.end, pull);
    return published.result;
  } catch (thrown) {
    let error = thrown;
    if (await lostTheJob(rt, error)) {
      rt.logger.warn(
        { job: jobId, err: error instanceof Error ? error.message : String(error) },
        'another worker runs this job now: this run stops without a word',
      );
      throw new FixRunError('another worker took this job over', false, { cause: error }, true);
    }
    // Stopped while its sandbox was being set up: the setup was cut short and removed, nothing ran.
    if (error instanceof SandboxCancelledError && stop.signal.aborted) {
      try {
        await end(ctx, { kind: 'cancelled', by: stop.by() }, pull);
        return none('cancelled');
      } catch (reporting) {
        error = reporting;
      }
    }
    const { reason, permanent } = await reportFailure(ctx, error, rt.attempt);
    throw new FixRunError(reason, permanent, { cause: error });
  } finally {
    stop.dispose();
  }
}

/**
 * A stop request reaches the job through `rt.cancelled`: a setup running stops at once (its sandbox
 * removed), the agent at its next step boundary (the running command and a pending model call are
 * aborted through the same signal). `by` is who
 * asked (checked once now, then polled every 500 ms); `dispose` ends the polling.
 */
async function watchForStop(
  rt: FixRuntime,
  signal: AbortSignal | undefined,
): Promise<{ readonly signal: AbortSignal; by(): string | null; dispose(): void }> {
  const cancel = new AbortController();
  let cancelledBy: string | null = await rt.cancelled();
  const poll = setInterval(() => {
    void rt.cancelled().then(
      (by) => {
        if (by !== null && !cancel.signal.aborted) {
          cancelledBy = by;
          cancel.abort(new Error(`cancelled by ${by}`));
        }
      },
      () => undefined,
    );
  }, 500);
  return {
    signal: signal === undefined ? cancel.signal : AbortSignal.any([signal, cancel.signal]),
    by: () => cancelledBy,
    dispose: () => {
      clearInterval(poll);
    },
  };
}
