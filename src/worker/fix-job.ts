import { providerSecrets } from '../model/provider-config.js';
import { join } from 'node:path';
import type { SandboxPool } from '../environment/prepare.js';
import { UnrecoverableError, type Job, type Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { AgentEnv } from '../config/agent-env.js';
import type { AppEnv } from '../config/app-env.js';
import {
  InstallationTokens,
  installationClient,
  type AppCredentials,
  type BotIdentity,
  type GitHubClient,
} from '../github/app-client.js';
import type { Model } from '../model/model.js';
import { cancelRequest } from '../queue/control.js';
import { fixJobSchema, type FixJob } from '../queue/payloads.js';
import type { QueueSettings } from '../queue/queues.js';
import { trajectoryUrl } from '../app/run-routes.js';
import { markQuestion } from '../app/question.js';
import { issueKey } from '../queue/ids.js';
import { runEvaluateJob } from './evaluate-job.js';
import { runReviewJob } from './review-job.js';
import { runVerifyJob } from './verify-job.js';
import { loadBackend } from '../sandbox/backends.js';
import { appLocalIsolation } from './local-isolation.js';
import type { RunStorage } from '../events/run-storage.js';
import { FixRunError, jobSpend, runFix, type FixJobResult } from './fix-run.js';
import { asFencedWriter } from '../events/file-event-store.js';
import type { LockKeeper } from './lock-keeper.js';
import type { SpendLedger } from '../events/spend-ledger.js';

export { branchFor, type FixJobResult } from './fix-run.js';

export interface WorkerDeps {
  readonly app: AppEnv;
  readonly agent: AgentEnv;
  readonly model: (name: string) => Model;
  readonly bot: (gh: GitHubClient, credentials: AppCredentials) => Promise<BotIdentity>;
  readonly redis: Redis;
  readonly fixQueue: Queue<FixJob>;
  readonly settings: QueueSettings;
  readonly logger: Logger;
  /** Where runs are kept (ISSUE_AGENT_STORE_URL); default the job folders under the work directory. */
  readonly storage?: RunStorage;
  /** Step updates of the progress comment are at most this often. */
  readonly progressIntervalMs?: number;
  /** The worker's warm Docker containers (ISSUE_AGENT_WARM_POOL), if it keeps any. */
  readonly warmPool?: SandboxPool | undefined;
  /** Told when a job's lock turns out to be another run's (metrics). */
  readonly onLockLost?: () => void;
  /** Whether this worker lost the lock of a job (by id): BullMQ may run it elsewhere now. */
  readonly lost?: (jobId: string) => boolean;
  /**
   * The worker's lock renewal thread (lock-keeper.ts): a job's lock is renewed there, where the
   * job's own work cannot delay it. Without one, renewals run on this event loop.
   */
  readonly lockKeeper?: LockKeeper;
  /**
   * Where every worker keeps the month's model spend (the run store's database, or Redis): each
   * model call is held against ISSUE_AGENT_MONTHLY_USD and the repository's `budgets.monthlyUsd`.
   */
  readonly spendLedger?: SpendLedger;
}

/**
 * The App's side of a fix job: a BullMQ job run with an installation token scoped to the one
 * repository, stop requests read from Redis, and BullMQ's retries (a permanent failure, or the last
 * attempt, becomes an UnrecoverableError so BullMQ does not try again).
 */
export async function runFixJob(
  job: Job<FixJob>,
  deps: WorkerDeps,
  signal?: AbortSignal,
  /** The worker's lock token for the job (BullMQ's second processor argument). */
  token?: string,
): Promise<FixJobResult> {
  const parsed = fixJobSchema.safeParse(job.data);
  if (!parsed.success) throw new UnrecoverableError(`invalid fix job payload: ${parsed.error.message}`);
  const p = parsed.data;
  const jobId = job.id ?? '';
  const log = deps.logger.child({ job: jobId });
  const credentials: AppCredentials = {
    appId: deps.app.appId,
    privateKey: deps.app.privateKey,
    baseUrl: deps.app.githubApiUrl,
  };
  const tokens = new InstallationTokens(credentials, p.installationId, [p.repo.id]);
  const gh = installationClient(credentials, tokens, log, { retryBaseMs: deps.app.githubRetryBaseMs });
  // The progress comment's edits pace in a lane of their own: they never delay the job's writes.
  const progressGh = installationClient(credentials, tokens, log, {
    retryBaseMs: deps.app.githubRetryBaseMs,
    lane: `installation-${p.installationId}-progress`,
  });
  // The run view needs someone who can sign in: the admin token, or GitHub sign-in.
  const runLink =
    deps.app.publicUrl === null || (deps.app.adminToken === null && deps.app.githubClientId === null)
      ? null
      : trajectoryUrl(deps.app.publicUrl, jobId);
  const final = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
  const secrets = [deps.app.privateKey, deps.app.webhookSecret, ...providerSecrets(deps.agent.provider)];
  // The worker's one choice of backend (ISSUE_AGENT_SANDBOX), passed down to every stage.
  const backend = await loadBackend(deps.app.sandbox);
  // An isolated sandbox on this host (not Docker's, which sees none of it) hides the work folder,
  // the worker's home and key (see local-isolation.ts); a plain child process hides nothing.
  const hostIsolation =
    backend.isolated && !backend.hostDiskSealed
      ? appLocalIsolation(deps.app, deps.agent, { home: deps.agent.hostHome, cwd: process.cwd() })
      : undefined;
  if (p.kind === 'evaluate' || p.kind === 'verify') {
    // An evaluation or a verification publishes no commit and writes no shared log: its lock is
    // only kept, and a refusal (another worker has the job) said.
    const release =
      token === undefined || deps.lockKeeper === undefined
        ? () => undefined
        : deps.lockKeeper.hold(jobId, token, {
            refused: () => {
              deps.onLockLost?.();
              log.warn({ job: jobId }, 'lost the job lock: another run has the job now');
            },
          });
    const common = {
      jobId,
      workDir: deps.app.workDir,
      apiUrl: deps.app.githubApiUrl,
      sandbox: { backend, home: deps.agent.hostHome, setupOff: null },
      ...(hostIsolation === undefined ? {} : { isolation: hostIsolation }),
      gh,
      tokens,
      agent: deps.agent,
      secrets,
      final,
      logger: deps.logger,
      cancelled: () => cancelRequest(deps.redis, deps.settings.prefix, jobId),
    };
    const ran =
      p.kind === 'verify'
        ? runVerifyJob(p, { ...common, appId: deps.app.appId }, signal)
        : runEvaluateJob(p, common, signal);
    return ran
      .catch((error: unknown) => {
        if (final) throw new UnrecoverableError(error instanceof Error ? error.message : String(error));
        throw error;
      })
      .finally(release);
  }
  if (p.kind === 'review') {
    const link = (runId: string): string =>
      trajectoryText(deps, runLink, join(deps.app.workDir, 'jobs', runId, 'trajectory'), runId);
    await reviewJob(
      p,
      { jobId, gh, tokens, backend, hostIsolation, secrets, final, link },
      deps,
      signal,
      token,
    );
    return {
      outcome: 'no_change',
      pullRequest: null,
      pushed: false,
      trajectory: '',
      runId: jobId,
      branch: null,
    };
  }
  const bot = await deps.bot(gh, credentials);
  const lock = watchLock(job, token, deps.app.lockDurationMs, log, signal, deps.onLockLost, deps.lockKeeper);
  try {
    return await asFencedWriter(lock.lost, () =>
      runFix(
        p,
        {
          jobId,
          jobsDir: join(deps.app.workDir, 'jobs'),
          ...(deps.storage === undefined ? {} : { storage: deps.storage }),
          gh,
          progressGh,
          mirrors: true,
          // Commits through the git database API: GitHub signs them (branch rules requiring signatures).
          commitVia: 'api',
          images: { webOrigin: deps.app.githubWebUrl },
          tokens,
          secrets,
          bot,
          agent: deps.agent,
          model: deps.model,
          backend,
          ...(hostIsolation === undefined ? {} : { hostIsolation }),
          ...(deps.warmPool === undefined ? {} : { warmPool: deps.warmPool }),
          runLink,
          trajectoryLink: (dir, runId) => trajectoryText(deps, runLink, dir, runId),
          attemptParallelism: deps.app.workerConcurrency,
          // The issue waits for an answer: the first from its author or a writer continues that run.
          onQuestion: (runId) =>
            markQuestion(deps.redis, deps.settings.prefix, issueKey(p.repo.id, p.issue.number), runId),
          cancelled: () => cancelRequest(deps.redis, deps.settings.prefix, jobId),
          lost: lock.lost,
          holdsJob: lock.holds,
          ...(job.stalledCounter > deps.app.maxInterruptions
            ? { interruptedTooOften: job.stalledCounter }
            : {}),
          attempt: { number: job.attemptsMade + 1, final },
          ...(deps.spendLedger === undefined
            ? {}
            : { spending: { ledger: deps.spendLedger, ownerUsd: deps.app.monthlyUsd } }),
          logger: deps.logger,
          ...(deps.progressIntervalMs === undefined ? {} : { progressIntervalMs: deps.progressIntervalMs }),
        },
        lock.signal,
      ),
    );
  } catch (error) {
    // A worker that lost the job never fails it: the one that holds it now ends it.
    if (error instanceof FixRunError && error.lost) throw error;
    if (error instanceof FixRunError && (error.permanent || final)) {
      throw new UnrecoverableError(error.message);
    }
    throw error;
  } finally {
    lock.stop();
  }
}

/**
 * Where people read a run's full trajectory, as a PR or a review says it: the run view (when
 * someone can sign in to it), else where the run store keeps the log.
 */
function trajectoryText(deps: WorkerDeps, runLink: string | null, dir: string, runId: string): string {
  if (runLink !== null && deps.app.publicUrl !== null)
    return `${trajectoryUrl(deps.app.publicUrl, runId)} (sign in with GitHub, or use the admin token)`;
  return deps.storage?.kind === 'postgres'
    ? `the run store (PostgreSQL) keeps it as run ${runId}; the run server shows it`
    : `the App host keeps it in ${dir} (job ${runId}); \`issue-agent replay <folder> --json\` prints it`;
}

/**
 * `@agent review` (review-job.ts): it pushes nothing; its trajectory is a run of its own (the job's
 * id), written by this run only (a retry continues it). Its lock is only kept; a failure on the
 * last attempt is final.
 */
async function reviewJob(
  p: FixJob,
  job: {
    readonly jobId: string;
    readonly gh: GitHubClient;
    readonly tokens: InstallationTokens;
    readonly backend: Awaited<ReturnType<typeof loadBackend>>;
    readonly hostIsolation: ReturnType<typeof appLocalIsolation> | undefined;
    readonly secrets: readonly string[];
    readonly final: boolean;
    /** The review body's text for where its trajectory is read. */
    readonly link: (runId: string) => string;
  },
  deps: WorkerDeps,
  signal: AbortSignal | undefined,
  token: string | undefined,
): Promise<void> {
  const release =
    token === undefined || deps.lockKeeper === undefined
      ? () => undefined
      : deps.lockKeeper.hold(job.jobId, token, { refused: () => deps.onLockLost?.() });
  try {
    await runReviewJob(
      p,
      {
        jobId: job.jobId,
        workDir: deps.app.workDir,
        gh: job.gh,
        tokens: job.tokens,
        sandbox: { backend: job.backend, home: deps.agent.hostHome, setupOff: null },
        isolation: job.hostIsolation,
        agent: deps.agent,
        model: deps.model(deps.agent.model),
        secrets: job.secrets,
        logger: deps.logger,
        ...(deps.storage === undefined ? {} : { storage: deps.storage }),
        trajectoryLink: job.link,
        spend: jobSpend(
          p,
          deps.spendLedger === undefined
            ? undefined
            : { ledger: deps.spendLedger, ownerUsd: deps.app.monthlyUsd },
        ),
      },
      signal,
    );
  } catch (error) {
    if (job.final) throw new UnrecoverableError(error instanceof Error ? error.message : String(error));
    throw error;
  } finally {
    release();
  }
}

/**
 * This run's hold on its job: the lock is renewed with this run's token every third of its
 * duration (besides BullMQ's own renewals, which follow the job id, and so the newest run of it in
 * this process), by the worker's lock renewal thread when it has one (lock-keeper.ts), else on this
 * event loop. When a renewal is refused, the lock is another run's: this worker was frozen, or
 * out of Redis's reach, longer than the lock lasts, and BullMQ handed the job over, maybe to this
 * same process. The run is then `lost`: its signal aborts (it stops at the next step), its event
 * appends are fenced, and it says nothing more (see lostTheJob in fix-run.ts). A Redis error is
 * not a refusal: the lock may well still be ours.
 */
function watchLock(
  job: Job<FixJob>,
  token: string | undefined,
  durationMs: number,
  log: Logger,
  signal: AbortSignal | undefined,
  onLost?: () => void,
  keeper?: LockKeeper,
): { lost: () => boolean; holds: () => Promise<boolean>; signal: AbortSignal | undefined; stop: () => void } {
  if (token === undefined) {
    return { lost: () => false, holds: () => Promise.resolve(true), signal, stop: () => undefined };
  }
  let lost = false;
  let heldAt = Date.now();
  const controller = new AbortController();
  const markLost = (): void => {
    if (lost) return;
    lost = true;
    onLost?.();
    log.warn(
      { job: job.id, sinceRenewedMs: Date.now() - heldAt, lockDurationMs: durationMs },
      'lost the job lock: another run has the job now; this one stops without a word',
    );
    controller.abort(new Error('this worker lost the job lock'));
  };
  const holds = async (): Promise<boolean> => {
    if (lost) return false;
    const held = (await job.extendLock(token, durationMs)) === 1;
    if (held) heldAt = Date.now();
    else markLost();
    return held;
  };
  let stop: () => void;
  if (keeper !== undefined) {
    stop = keeper.hold(job.id ?? '', token, {
      renewed: (at) => {
        heldAt = Math.max(heldAt, at);
      },
      refused: markLost,
    });
  } else {
    const timer = setInterval(
      () => {
        holds().catch(() => undefined);
      },
      Math.max(200, Math.floor(durationMs / 3)),
    );
    timer.unref();
    stop = () => {
      clearInterval(timer);
    };
  }
  return {
    lost: () => lost,
    holds,
    signal: signal === undefined ? controller.signal : AbortSignal.any([signal, controller.signal]),
    stop,
  };
}
