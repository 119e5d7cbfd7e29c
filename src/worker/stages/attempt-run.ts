import { join } from 'node:path';
import { z } from 'zod';
import type { FreshVerifier, Outcome } from '../../agent/run-agent.js';
import type { EventStore } from '../../events/event-store.js';
import { reduceState } from '../../events/reduce-state.js';
import { outcomeKind } from '../../events/schema.js';
import { mirrorDir, pristineDir } from '../../github/pristine-clone.js';
import { describeEnvironment } from '../../publish/environment.js';
import type { FixJob } from '../../queue/payloads.js';
import type { FixRuntime } from '../fix-runtime.js';
import { jobFolder } from '../job-folder.js';
import {
  AttemptNotStarted,
  attemptRunId,
  crashedStanding,
  rankAttempts,
  runAttempts,
  standingOf,
  type AttemptStanding,
} from './attempts.js';
import { inSpan } from '../../telemetry/tracing.js';
import { prepareSandbox, recordJob, type IssueText, type PrepareSandboxInput } from './prepare.js';
import { runInSandbox } from './run.js';
import type { JobContext, PullInfo, RepoInfo } from './types.js';

/** How many attempts this job makes: the repository's `attempts` (or the request's `(try N)`). */
export function attemptsOf(p: FixJob): number {
  return p.kind === 'evaluate' ? 1 : Math.max(1, p.config.attempts);
}

function mirrorFor(ctx: JobContext, rt: FixRuntime): string | undefined {
  // Only where no sandbox process can reach the host's disk: a mirror outlives the job. None for a
  // fork's branch: the mirror is this repository's, made from its URL.
  return rt.mirrors === true && rt.backend.hostDiskSealed && ctx.p.pull?.human?.fork === undefined
    ? mirrorDir(rt.jobsDir, ctx.p.installationId, ctx.p.repo.id)
    : undefined;
}

export interface AttemptInput {
  readonly repo: RepoInfo;
  readonly pull: PullInfo | null;
  readonly issue: IssueText;
  /** The attempt's trajectory to resume, or null to start one. */
  readonly store: EventStore | null;
  /** The commit to start from when there is no trajectory yet (every attempt of a job starts at one). */
  readonly baseCommit?: string | null;
  readonly signal: AbortSignal;
  readonly attempt: { readonly number: number; readonly of: number; readonly jobId: string } | undefined;
}

/** One attempt, sandbox to outcome: prepares its sandbox, runs the agent in it, closes it. */
export async function runAttempt(
  ctx: JobContext,
  rt: FixRuntime,
  input: AttemptInput,
): Promise<{ readonly store: EventStore; readonly outcome: Outcome }> {
  const { repo, pull, store } = input;
  const prepareInput = {
    jobId: ctx.jobId,
    jobsDir: rt.jobsDir,
    paths: ctx.paths,
    git: ctx.git,
    tokens: ctx.tokens,
    repo,
    repository: `${ctx.p.repo.owner}/${ctx.p.repo.name}`,
    branch: pull?.headRef ?? repo.default_branch,
    baseCommit: store?.base.workspace.baseCommit ?? input.baseCommit ?? null,
    backend: rt.backend,
    hostIsolation: rt.hostIsolation,
    agent: rt.agent,
    config: ctx.p.config,
    mirror: mirrorFor(ctx, rt),
    mirrorsKept: rt.mirrors === true && rt.backend.hostDiskSealed,
    repoKey: `github:${ctx.p.repo.id}`,
    followUp: pull !== null,
    scrub: (text) => ctx.redactor().redact(text),
    pool: rt.warmPool,
    // Per installation: a prepared container never serves another installation's job.
    poolRepository: `installation-${ctx.p.installationId}/repo-${ctx.p.repo.id}`,
    logger: ctx.log,
  } satisfies PrepareSandboxInput;
  // A stop during setup ends it at once (SandboxCancelledError); the verdict's sandbox below is
  // made while the agent runs, which the same stop ends at its next step.
  const prepared = await inSpan('sandbox', { 'issue_agent.sandbox': rt.backend.kind }, () =>
    prepareSandbox({ ...prepareInput, signal: input.signal }),
  );
  // The verdict's final run is made in a second sandbox prepared as the first was: with Docker a
  // container (same image, environment, cache entry or setup, history; labelled with the job, so
  // it is reaped with it) on its own host folder for the `.git` it is given; with the isolated
  // local sandbox (the Action) a second copy and a second setup in new namespaces, which also
  // hide the agent's workspace. Never for a backend that does not isolate: nothing is isolated there.
  const hostIsolation = rt.hostIsolation;
  const verifier: FreshVerifier | undefined =
    rt.backend.isolated && rt.agent.verifyFresh !== false
      ? {
          open: async (baseCommit) => {
            const fresh = await inSpan('verification sandbox', {}, () =>
              prepareSandbox({
                ...prepareInput,
                paths: { ...prepareInput.paths, workspace: `${prepareInput.paths.workspace}-verify` },
                baseCommit,
                // The final run and the change's rebuild go through the harness shell alone.
                lazyAgentShell: true,
                hostIsolation: {
                  ...hostIsolation,
                  hide: [...(hostIsolation?.hide ?? []), prepareInput.paths.workspace],
                },
                logger: ctx.log.child({ sandboxFor: 'verdict' }),
              }),
            );
            return { sandbox: fresh.sandbox, close: () => fresh.close() };
          },
        }
      : undefined;
  try {
    const environment = prepared.environment ?? store?.base.environment ?? null;
    if (environment !== null)
      ctx.progress.setEnvironment(describeEnvironment(environment, (t) => ctx.redactor().redact(t)));
    if (input.attempt === undefined)
      ctx.progress.post({ kind: 'working', step: 0, tokens: 0, costUsd: 0, elapsedMs: 0 });
    return await runInSandbox({
      ctx,
      sandbox: prepared.sandbox,
      environment: prepared.environment,
      store,
      pull,
      issue: input.issue,
      agent: rt.agent,
      model: rt.model,
      signal: input.signal,
      baseBranch: repo.default_branch,
      baseUrl: repo.base_clone_url,
      attempt: input.attempt,
      canContinue: rt.canContinue !== false,
      hostDiskSealed: rt.backend.hostDiskSealed,
      backendKind: rt.backend.kind,
      verifier,
      images: rt.images,
    });
  } finally {
    await prepared.close();
  }
}

/** One attempt of a best-of-N job: its context (own folders and run id) and its trajectory so far. */
export interface AttemptSlot {
  readonly number: number;
  readonly ctx: JobContext;
  readonly store: EventStore | null;
  readonly outcome: Outcome | null;
}

/** The attempts' contexts and whatever each already recorded (a resumed job finds them again). */
export function openAttempts(ctx: JobContext, count: number): Promise<AttemptSlot[]> {
  const slots = Array.from({ length: count }, async (_, i): Promise<AttemptSlot> => {
    const k = i + 1;
    const runId = attemptRunId(ctx.jobId, k);
    const dir = jobFolder(ctx.jobsDir, runId);
    const actx: JobContext =
      k === 1
        ? ctx
        : {
            ...ctx,
            jobId: runId,
            paths: {
              trajectory: join(dir, 'trajectory'),
              pristine: pristineDir(ctx.jobsDir, runId),
              workspace: join(dir, 'workspace'),
            },
            log: ctx.log.child({ attempt: k }),
          };
    const store = await ctx.storage.open(runId);
    return {
      number: k,
      ctx: actx,
      store,
      outcome: store === null ? null : reduceState(store.events).outcome,
    };
  });
  return Promise.all(slots);
}

export interface AttemptsResult {
  /** The attempt whose change is published, or null when every attempt threw (then `error`). */
  readonly winner: {
    readonly ctx: JobContext;
    readonly store: EventStore;
    readonly outcome: Outcome;
  } | null;
  readonly error: unknown;
  /** Every attempt, in attempt order, with the winner marked: the PR body's table. */
  readonly table: readonly AttemptRow[];
}

export interface AttemptRow extends AttemptStanding {
  readonly winner: boolean;
  /** Where its trajectory is read. */
  readonly link: string;
}

/**
 * Runs the attempts that have no outcome yet (at most the runtime's `attemptParallelism` at once),
 * each in its own sandbox, workspace and pristine clone, all from the same base commit, then picks
 * the winner. An attempt whose sandbox dies is ranked last and never fails the job, unless every
 * attempt threw.
 */
export async function runBestOf(
  ctx: JobContext,
  rt: FixRuntime,
  slots: readonly AttemptSlot[],
  input: {
    readonly repo: RepoInfo;
    readonly pull: PullInfo | null;
    readonly issue: IssueText;
    readonly signal: AbortSignal;
  },
): Promise<AttemptsResult> {
  const count = slots.length;
  const baseCommit =
    slots.find((s) => s.store !== null)?.store?.base.workspace.baseCommit ??
    (await baseCommitOf(ctx, rt, input));
  for (const s of slots) if (s.number > 1) await recordJob(ctx.storage, s.ctx.jobId, ctx.p, ctx.jobId);
  const results = await runAttempts({
    count,
    parallel: rt.attemptParallelism ?? count,
    stopOnFirstResolved: ctx.p.config.stopOnFirstResolved,
    signal: input.signal,
    resolved: (r: { readonly outcome: Outcome }) => r.outcome.outcome === 'resolved',
    run: async (k, signal) => {
      const slot = slots[k - 1];
      if (slot === undefined) throw new Error(`no attempt ${k}`);
      if (slot.store !== null && slot.outcome !== null) return { store: slot.store, outcome: slot.outcome };
      slot.ctx.log.info({ attempt: k, of: count }, 'attempt starts');
      return runAttempt(slot.ctx, rt, {
        ...input,
        store: slot.store,
        baseCommit,
        signal,
        attempt: { number: k, of: count, jobId: ctx.jobId },
      });
    },
  });
  const errors = results.flatMap((r, i) => {
    if (r.ok) return [];
    if (!(r.error instanceof AttemptNotStarted))
      slots[i]?.ctx.log.warn({ err: r.error, attempt: i + 1 }, 'attempt failed; the others go on');
    return [r.error];
  });
  return pickWinner(
    ctx,
    await Promise.all(
      slots.map(async (s, i) => {
        const r = results[i];
        return r !== undefined && r.ok
          ? { ...s, store: r.value.store, outcome: r.value.outcome }
          : // It threw, maybe only after it ended (closing its sandbox): its log says how far it got.
            reopened(s);
      }),
    ),
    errors,
    results.map((r) => (r.ok ? null : r.error)),
  );
}

async function reopened(slot: AttemptSlot): Promise<AttemptSlot> {
  const store = await slot.ctx.storage.open(slot.ctx.jobId).catch(() => null);
  return { ...slot, store, outcome: store === null ? null : reduceState(store.events).outcome };
}

/** The branch tip every new attempt starts from, read once from the first attempt's pristine clone. */
async function baseCommitOf(
  ctx: JobContext,
  rt: FixRuntime,
  input: { readonly repo: RepoInfo; readonly pull: PullInfo | null },
): Promise<string> {
  await ctx.git.ensurePristine(ctx.paths.pristine, {
    url: input.repo.clone_url,
    branch: input.pull?.headRef ?? input.repo.default_branch,
    token: async () => (await ctx.tokens.get()).token,
    mirror: mirrorFor(ctx, rt),
  });
  return ctx.git.revParse(ctx.paths.pristine, 'HEAD');
}

/** Ranks what the attempts came to (see rankAttempts) and names the winner. */
export function pickWinner(
  ctx: JobContext,
  slots: readonly AttemptSlot[],
  errors: readonly unknown[],
  thrown: readonly unknown[] = [],
): AttemptsResult {
  const standings = slots.map((s, i) => {
    const runId = s.ctx.jobId;
    if (s.store !== null && s.outcome !== null) return standingOf(s.number, runId, s.store, s.outcome);
    const error = thrown[i];
    const reason =
      error instanceof AttemptNotStarted
        ? error.message
        : ctx
            .redactor()
            .redact(
              error instanceof Error
                ? error.message
                : typeof error === 'string'
                  ? error
                  : 'it ended without an outcome',
            );
    const standing = crashedStanding(
      s.number,
      runId,
      reason,
      s.store === null ? 0 : reduceState(s.store.events).usd,
    );
    return error instanceof AttemptNotStarted ? { ...standing, outcome: 'cancelled' as const } : standing;
  });
  const ranked = rankAttempts(standings).filter((s) => s.outcome !== 'crashed');
  const best = ranked[0];
  const slot = best === undefined ? undefined : slots[best.number - 1];
  const winner =
    slot !== undefined && slot.store !== null && slot.outcome !== null
      ? { ctx: slot.ctx, store: slot.store, outcome: slot.outcome }
      : null;
  return {
    winner,
    error: winner === null ? (errors[0] ?? new Error('no attempt finished')) : null,
    table: standings.map((s) => ({
      ...s,
      winner: winner !== null && s.number === best?.number,
      link: ctx.trajectoryLink(ctx.storage.locationOf(s.runId), s.runId),
    })),
  };
}

/**
 * The job's choice among its attempts, kept in the run storage once every attempt has ended and
 * before anything is published. A retry of the job (publishing failed, the worker died) takes this
 * choice as it is: an attempt that threw the first time is not run again, so the winner, the
 * branch's commit and the PR's table cannot change between tries.
 */
const DECISION = 'attempts';

const decisionRecord = z.object({
  schemaVersion: z.literal(1),
  winner: z.string(),
  table: z.array(
    z.object({
      number: z.number().int().positive(),
      runId: z.string(),
      outcome: z.union([outcomeKind, z.literal('crashed')]),
      reason: z.string(),
      newlyPassing: z.number(),
      failing: z.number().nullable(),
      changedLines: z.number().nullable(),
      filesChanged: z.number(),
      usd: z.number(),
      winner: z.boolean(),
      link: z.string(),
    }),
  ),
});

/** Records the winner and the table (written whole: a reader sees all of it or nothing). */
export async function recordDecision(
  ctx: Pick<JobContext, 'storage' | 'jobId'>,
  result: AttemptsResult,
): Promise<void> {
  const winner = result.winner;
  if (winner === null) return; // every attempt threw: a retry may run them again
  await ctx.storage.putDocument(ctx.jobId, DECISION, {
    schemaVersion: 1,
    winner: winner.ctx.jobId,
    table: result.table,
  });
}

/**
 * The choice an earlier try of this job recorded, with the winner's trajectory as it is now (its
 * outcome was in its log when the choice was made), or null when no choice was recorded.
 */
export async function readDecision(
  ctx: Pick<JobContext, 'storage' | 'jobId'>,
  slots: readonly AttemptSlot[],
): Promise<AttemptsResult | null> {
  const raw = await ctx.storage.getDocument(ctx.jobId, DECISION);
  if (raw === null) return null;
  const record = decisionRecord.parse(raw);
  const slot = slots.find((s) => s.ctx.jobId === record.winner);
  if (slot === undefined || slot.store === null || slot.outcome === null)
    throw new Error(
      `the recorded winner ${record.winner} of job ${ctx.jobId} has no outcome in its trajectory`,
    );
  return {
    winner: { ctx: slot.ctx, store: slot.store, outcome: slot.outcome },
    error: null,
    table: record.table,
  };
}
