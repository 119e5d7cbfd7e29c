import { existsSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { WarmPool } from '../src/sandbox/docker/warm-pool.js';
import { Queue, Worker, type Job } from 'bullmq';
import { pino, type Logger } from 'pino';
import { ConfigError, readAgentEnv } from '../src/config/agent-env.js';
import { readAppEnv } from '../src/config/app-env.js';
import { openRunStorage, PgRunStorage } from '../src/events/run-storage.js';
import { PgSpendLedger } from '../src/events/pg-spend-ledger.js';
import { RedisSpendLedger } from '../src/events/redis-spend-ledger.js';
import { startTracing } from '../src/telemetry/sdk.js';
import { inSpan, pastSpan, remoteParent } from '../src/telemetry/tracing.js';
import { botIdentity, type BotIdentity } from '../src/github/app-client.js';
import { createModel } from '../src/model/providers.js';
import type { FixJob } from '../src/queue/payloads.js';
import { handOff } from '../src/queue/control.js';
import { FIX_QUEUE, connectionOptions, jobTarget, redisClient } from '../src/queue/queues.js';
import { runFixJob, type FixJobResult } from '../src/worker/fix-job.js';
import { FixRunError } from '../src/worker/fix-run.js';
import { LockKeeper } from '../src/worker/lock-keeper.js';
import { setSandboxNice } from '../src/sandbox/cpu-priority.js';
import { WorkerMetrics } from '../src/worker/worker-metrics.js';

/**
 * A worker process: takes fix jobs from the queue, one sandbox per job. Stateless apart from its
 * work folder; any number of them can serve one Redis. A worker that dies mid-job stops renewing
 * the job's lock, and BullMQ hands the job to another worker, which resumes it from the event log.
 */
async function main(): Promise<void> {
  if (existsSync('.env')) process.loadEnvFile('.env');
  // A TMPDIR on a volume (compose.yaml) may not exist yet; sandboxes get bind mounts of what is made there.
  mkdirSync(tmpdir(), { recursive: true, mode: 0o700 });
  const app = readAppEnv();
  // One worker serves every repository the App is installed on: setup secrets and extra egress
  // hosts reach only the repositories the deployment granted them to (config/grants.ts).
  const agent = readAgentEnv(process.env, { scoped: true });
  if (agent.provider.kind === 'anthropic' && agent.provider.apiKey === null)
    throw new ConfigError(
      'ANTHROPIC_API_KEY is required to run a worker (or ISSUE_AGENT_MODEL_PROVIDER=bedrock or vertex)',
    );
  const logger = pino({ level: agent.logLevel, base: { service: 'issue-agent-worker', pid: process.pid } });
  // The sandboxes' processes yield the CPU to the worker's when both want it (cpu-priority.ts).
  setSandboxNice(agent.sandboxNice);
  const tracing = await startTracing('issue-agent-worker');
  if (tracing !== null) logger.info('OpenTelemetry traces go to the OTLP endpoint');

  const metrics = app.workerMetrics === null ? null : new WorkerMetrics();
  watchEventLoop(logger, app.lockDurationMs, (ms) => metrics?.eventLoopBlocked(ms));

  if (app.sandbox !== 'docker') {
    // What a job loads on first use, loaded now (see the Docker case below): the local sandbox's
    // environment step and its module graph.
    await import('../src/environment/prepare-local.js');
  }
  if (app.sandbox === 'local') {
    // Never run jobs with less isolation than asked for: a host that cannot make the namespaces
    // stops the worker here, with what is missing, instead of failing every job.
    const { isolationSupport } = await import('../src/sandbox/local/launch.js');
    const support = await isolationSupport();
    if (!support.ok) throw new ConfigError(`ISSUE_AGENT_SANDBOX=local: ${support.reason}`);
    logger.info({ mechanism: support.mechanism }, 'isolated local sandbox available');
  }
  if (app.sandbox === 'unconfined') {
    logger.warn(
      'ISSUE_AGENT_SANDBOX=unconfined: the agent runs commands as plain processes of this worker, which can read its environment and files (the App private key included); use it only where every issue author and repository is trusted',
    );
  }
  let warmPool: WarmPool | undefined;
  if (app.sandbox === 'docker') {
    // What a job loads on first use, loaded now, before any job holds a lock: loading a cold module
    // graph inside the first job (slower still where TypeScript is compiled on load) can keep the
    // event loop busy long enough, on a loaded machine, to miss a lock renewal.
    await import('../src/environment/prepare.js');
    await import('../src/sandbox/docker/docker-sandbox.js');
    const { default: Docker } = await import('dockerode');
    const { reapEntryFolders, reapOrphans, startReap } = await import('../src/sandbox/docker/reap.js');
    const reaped = await reapOrphans(new Docker(), startReap(agent.limits.maxWallMs));
    if (reaped.removed.length > 0)
      logger.info({ removed: reaped.removed }, 'reaped sandboxes of dead workers');
    const folders = await reapEntryFolders(new Docker());
    if (folders.length > 0) logger.info({ removed: folders }, "reaped dead warm pools' entry folders");
    if (Object.keys(app.warmPool).length > 0) {
      // Started containers for jobs that need no setup (see PrepareInput.pool); filled in the
      // background: a job that comes first gets a cold start, as without a pool.
      const { WarmPool } = await import('../src/sandbox/docker/warm-pool.js');
      const pool = new WarmPool({
        images: app.warmPool,
        repositories: app.warmRepositories,
        limits: agent.sandboxLimits,
        logger,
      });
      warmPool = pool;
      pool.start().then(
        () => {
          logger.info({ images: app.warmPool }, 'warm pool ready');
        },
        (error: unknown) => {
          logger.warn({ err: error instanceof Error ? error.message : String(error) }, 'warm pool');
        },
      );
    }
  }

  let bot: BotIdentity | null = null;
  const settings = {
    redisUrl: app.redisUrl,
    prefix: app.queuePrefix,
    jobAttempts: app.jobAttempts,
    retryBackoffMs: app.retryBackoffMs,
  };
  const redis = redisClient(app.redisUrl, 'issue-agent-worker-control');
  redis.on('error', (error) => {
    logger.warn({ err: error.message }, 'redis');
  });
  // Bound before the worker takes any job: a port that is taken stops the process here, not a
  // worker that already runs jobs.
  if (metrics !== null && app.workerMetrics !== null) {
    const { port, lastPort, host } = app.workerMetrics;
    const served = await metrics.serveInRange(port, lastPort, host).catch((error: unknown) => {
      throw new ConfigError(
        `ISSUE_AGENT_WORKER_METRICS_PORT: cannot listen on ${host}:${port === lastPort ? port : `${port}-${lastPort}`}: ${error instanceof Error ? error.message : String(error)}`,
      );
    });
    logger.info({ port: served.port, host: app.workerMetrics.host }, 'worker metrics at /metrics');
  }
  // Where runs are kept: a worker that cannot reach its run store takes no job.
  const storage = await openRunStorage(app.storeUrl ?? undefined, join(app.workDir, 'jobs')).catch(
    (error: unknown) => {
      throw new ConfigError(
        `ISSUE_AGENT_STORE_URL: cannot open the run store: ${error instanceof Error ? error.message : String(error)}`,
      );
    },
  );
  logger.info({ store: storage.kind }, 'run store');
  // The month's spend beside the runs when they are in the database, else beside the queue: every
  // worker of the deployment reads and writes the same one.
  const spendLedger =
    storage instanceof PgRunStorage
      ? new PgSpendLedger(storage.store.pool)
      : new RedisSpendLedger(redis, app.queuePrefix);
  if (app.monthlyUsd !== null)
    logger.info({ monthlyUsd: app.monthlyUsd, ledger: spendLedger.kind }, 'monthly spending limit per owner');
  const fixQueue = new Queue<FixJob>(FIX_QUEUE, {
    connection: connectionOptions(app.redisUrl, 'issue-agent-worker-queue'),
    prefix: app.queuePrefix,
  });
  // Job locks are renewed from a thread of their own, which the jobs' work cannot starve (see
  // lock-keeper.ts); BullMQ's renewals on this loop go on beside them.
  const lockKeeper = await LockKeeper.start(
    { queue: FIX_QUEUE, prefix: app.queuePrefix, redisUrl: app.redisUrl, lockDurationMs: app.lockDurationMs },
    (message) => {
      logger.warn(message);
    },
  );
  /** How the renewals kept up since the last job ended: the renewing thread's delay and this loop's. */
  const renewalReport = (job: string | undefined): void => {
    lockKeeper.measure(true).then(
      (stats) => {
        logger.info({ job, ...stats, lockDurationMs: app.lockDurationMs }, 'lock renewals');
      },
      () => undefined,
    );
  };
  const worker = new Worker<FixJob, FixJobResult>(
    FIX_QUEUE,
    async (job, token, signal) => {
      const parent = remoteParent(job.data.trace);
      const attributes = {
        'issue_agent.job': job.id ?? '',
        'github.repository': `${job.data.repo.owner}/${job.data.repo.name}`,
        'github.issue': job.data.issue.number,
      };
      // Once per job, not per resumed run: the wait between queueing and the first start.
      if (job.attemptsMade === 0 && job.stalledCounter === 0 && job.processedOn !== undefined)
        pastSpan('queue wait', attributes, job.timestamp, job.processedOn, parent);
      return inSpan(
        'job',
        { ...attributes, 'issue_agent.job_attempt': job.attemptsMade + 1 },
        async () => {
          const timing = {
            id: job.id ?? '',
            queuedAt: job.timestamp,
            startedAt: job.processedOn ?? null,
            resumed: job.attemptsMade > 0 || job.stalledCounter > 0,
          };
          metrics?.jobStarted(timing);
          let result: FixJobResult;
          try {
            result = await runFixJob(
              job,
              {
                app,
                agent,
                logger,
                model: (name) =>
                  createModel(agent.provider, {
                    model: name,
                    maxAttempts: agent.modelMaxAttempts,
                    baseBackoffMs: agent.modelRetryBaseMs,
                  }),
                bot: async (gh, credentials) => (bot ??= await botIdentity(credentials, gh)),
                progressIntervalMs: app.progressIntervalMs,
                storage,
                ...(warmPool === undefined ? {} : { warmPool }),
                redis,
                fixQueue,
                settings,
                lockKeeper,
                spendLedger,
                ...(metrics === null
                  ? {}
                  : {
                      onLockLost: () => {
                        metrics.lockLost();
                      },
                    }),
              },
              signal,
              token,
            );
          } catch (error) {
            metrics?.jobEnded(timing, error instanceof FixRunError && error.lost ? 'lost' : 'failed', null);
            throw error;
          }
          metrics?.jobEnded(timing, 'completed', {
            storage,
            runId: result.runId,
            location: result.trajectory,
          });
          return result;
        },
        parent,
      );
    },
    {
      connection: connectionOptions(app.redisUrl, 'issue-agent-worker'),
      prefix: app.queuePrefix,
      concurrency: app.workerConcurrency,
      lockDuration: app.lockDurationMs,
      stalledInterval: app.stalledIntervalMs,
      // The App's own limit (maxInterruptions) is checked by the run, which says so on the issue;
      // BullMQ's, which fails a job without a word, is only the backstop for a run that cannot.
      maxStalledCount: app.maxInterruptions + 2,
    },
  );
  worker.on('active', (job) => {
    logger.info(
      { job: job.id, repo: `${job.data.repo.owner}/${job.data.repo.name}`, issue: job.data.issue.number },
      'job started',
    );
  });
  // Once a job is marked finished (its deduplication key released), the next request waiting for
  // the same issue or PR starts. Also runs when BullMQ fails a job for stalling too often, where the
  // processor never ran its own cleanup.
  const next = (job: Job<FixJob>): void => {
    const target = jobTarget(job.data);
    handOff(redis, fixQueue, settings, target).then(
      (id) => {
        if (id !== null) logger.info({ job: job.id, next: id }, 'next waiting request queued');
      },
      (error: unknown) => {
        logger.error({ err: error, target }, 'could not start the next waiting request');
      },
    );
  };
  worker.on('completed', (job, result) => {
    logger.info({ job: job.id, outcome: result.outcome, pr: result.pullRequest?.url }, 'job completed');
    renewalReport(job.id);
    next(job);
  });
  worker.on('failed', (job, error) => {
    logger.warn({ job: job?.id, err: error.message, attempts: job?.attemptsMade }, 'job failed');
    renewalReport(job?.id);
    if (job === undefined) return;
    void job.getState().then(
      (state) => {
        if (state === 'failed') next(job);
      },
      () => undefined,
    );
  });
  worker.on('stalled', (jobId) => {
    logger.warn({ job: jobId }, 'job stalled; it will be resumed');
  });
  worker.on('error', (error) => {
    logger.error({ err: error.message }, 'worker error');
  });
  await worker.waitUntilReady();
  logger.info({ concurrency: app.workerConcurrency, sandbox: app.sandbox }, 'worker ready');

  // A first signal stops taking jobs and lets running ones finish; a second one exits at once (the
  // running jobs stall and another worker resumes them from their event logs).
  let closing = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (closing) process.exit(130);
    closing = true;
    logger.info({ signal }, 'finishing running jobs; send the signal again to exit now');
    worker
      .close()
      .then(async () => {
        await lockKeeper.close();
        await warmPool?.close();
        await storage.close();
        await tracing?.shutdown();
      })
      .then(
        () => process.exit(0),
        () => process.exit(1),
      );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}

/**
 * Says when this process's event loop was blocked long enough to matter. Job locks no longer wait
 * for it (the lock keeper's thread renews them), but every job's steps, sandbox output and the
 * progress comment do; a block of minutes (LockKeeper's MAX_LOOP_SILENCE_MS) lets the locks lapse.
 */
function watchEventLoop(logger: Logger, lockDurationMs: number, onBlock: (ms: number) => void): void {
  const everyMs = 500;
  const reportFromMs = Math.min(1000, Math.floor(lockDurationMs / 4));
  let last = performance.now();
  setInterval(() => {
    const now = performance.now();
    const blockedMs = Math.round(now - last - everyMs);
    last = now;
    if (blockedMs < reportFromMs) return;
    onBlock(blockedMs);
    logger.warn({ blockedMs, lockDurationMs }, 'the event loop was blocked');
  }, everyMs).unref();
}

main().catch((error: unknown) => {
  console.error(`issue-agent worker: ${error instanceof Error ? error.message : String(error)}`);
  // Whatever it had opened (Redis, the warm pool), a worker that cannot start does not linger.
  process.exit(1);
});
