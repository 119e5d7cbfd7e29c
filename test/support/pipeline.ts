import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { FileEventStore } from '../../src/events/file-event-store.js';
import type { AgentEvent, BaseState } from '../../src/events/schema.js';
import { entryArgs } from './entry.js';
import { commitFiles, makeFixtureRepo, type FixtureName, type FixtureRepo } from './fixture-repo.js';
import { startGitHubSimulator, type GitHubSim, type RepoPermission } from './github-sim/index.js';
import { startModelSimulator, type ModelSimulator, type Policy } from '../../src/model-sim/index.js';
import type { TestContext } from 'node:test';
import { Queue } from 'bullmq';
import { INTAKE_QUEUE, intakeJobId, redisOptions } from '../../src/queue/queues.js';
import type { DeliveryResult } from './github-sim/types.js';
import { freePort, redisSkipReason, startRedis, type TestRedis } from './redis-server.js';

export const ROOT = join(import.meta.dirname, '..', '..');

/** For tests that kill or freeze a worker: its job is handed over within about 5 s. */
export const SHORT_LOCK = {
  ISSUE_AGENT_LOCK_DURATION_MS: '4000',
  ISSUE_AGENT_STALLED_INTERVAL_MS: '1500',
} as const;

/**
 * For tests that kill a worker but need no freeze shorter than a slow moment: handed over within
 * about 13 s, and a worker on a loaded machine (seconds without its event loop) keeps its lock.
 */
export const KILL_LOCK = {
  ISSUE_AGENT_LOCK_DURATION_MS: '10000',
  ISSUE_AGENT_STALLED_INTERVAL_MS: '3000',
} as const;

export interface PipelineOptions {
  readonly sim: GitHubSim;
  readonly modelUrl: string;
  readonly modelKey: string;
  readonly redisUrl: string;
  readonly workers?: number;
  /**
   * Default `unconfined` (a plain child process, fast): the App's isolated `local` sandbox and
   * `docker` are asked for by the tests about them (a test's own backend by its name in the table).
   */
  readonly sandbox?: string;
  /** Modules every process preloads after tsx (a test's hook, e.g. register-recording-backend.ts). */
  readonly imports?: readonly string[];
  readonly env?: Record<string, string>;
  /** Settings of the n-th worker started (from 0) over `env`: each its own host, say. */
  readonly workerEnv?: (n: number) => Record<string, string>;
  /** More logs for failure messages (the stack's Redis). */
  readonly extraLogs?: () => string;
}

export interface Proc {
  readonly child: ChildProcess;
  readonly log: string;
  exited(): Promise<void>;
}

export interface Pipeline {
  readonly webhookUrl: string;
  /** The App's base URL (also its public URL: trajectory links in PRs point here). */
  readonly appUrl: string;
  readonly adminToken: string;
  readonly workDir: string;
  /** BullMQ key prefix of this pipeline's queues. */
  readonly prefix: string;
  readonly workers: Proc[];
  readonly app: Proc;
  startWorker(): Promise<Proc>;
  /**
   * Resolves once the App has done all it will do about a delivery it acknowledged: its intake job
   * completed (every comment, reaction and queued job of intake is then in place), or there is
   * none (the webhook handler dropped it before the intake queue). The positive signal a test
   * waits for before it asserts that a delivery started nothing. Throws if intake failed for good.
   */
  intakeDone(delivery: DeliveryResult, timeoutMs?: number): Promise<void>;
  /**
   * Resolves once every fix job about the issue or PR (of any repository) has ended, completed or
   * failed for good, with how many there were: nothing of them is left to happen.
   */
  jobsEnded(issue: number, timeoutMs?: number): Promise<number>;
  /** Logs of every process so far, for failure messages. */
  logs(): string;
  stop(): Promise<void>;
}

/**
 * The real pipeline as separate processes: the App (Probot server + intake) and N workers, wired to
 * the GitHub simulator, the model simulator and a real Redis. Each process logs to a file in the
 * pipeline's work folder.
 */
export async function startPipeline(options: PipelineOptions): Promise<Pipeline> {
  const workDir = mkdtempSync(join(tmpdir(), 'ia-pipeline-'));
  const port = await freePort();
  const prefix = `t${Math.random().toString(36).slice(2, 8)}`;
  const adminToken = randomBytes(24).toString('hex');
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    NODE_ENV: 'test',
    APP_ID: String(options.sim.app.id),
    PRIVATE_KEY: options.sim.app.privateKeyPem,
    WEBHOOK_SECRET: options.sim.app.webhookSecret,
    ISSUE_AGENT_GITHUB_API_URL: options.sim.url,
    // The simulator is github.com's web side too (sign-in, user attachments).
    ISSUE_AGENT_GITHUB_WEB_URL: options.sim.url,
    REDIS_URL: options.redisUrl,
    ISSUE_AGENT_QUEUE_PREFIX: prefix,
    PORT: String(port),
    HOST: '127.0.0.1',
    ISSUE_AGENT_WORK_DIR: join(workDir, 'work'),
    // Prepared environments stay with the pipeline's temp folder, never in the user's state folder.
    ISSUE_AGENT_ENV_CACHE_DIR: join(workDir, 'env-cache'),
    ISSUE_AGENT_SANDBOX: options.sandbox ?? 'unconfined',
    ANTHROPIC_API_KEY: options.modelKey,
    ANTHROPIC_BASE_URL: options.modelUrl,
    ISSUE_AGENT_MODEL_RETRY_BASE_MS: '20',
    // The production default: a worker on a loaded 2-core CI machine has logged event-loop blocks of
    // 5–19 s, and a lost 15 s lock had a job run twice (the tests then saw two rounds). The tests about
    // dead and frozen workers ask for SHORT_LOCK or KILL_LOCK.
    ISSUE_AGENT_LOCK_DURATION_MS: '60000',
    ISSUE_AGENT_STALLED_INTERVAL_MS: '5000',
    ISSUE_AGENT_RETRY_BACKOFF_MS: '300',
    ISSUE_AGENT_PROGRESS_INTERVAL_MS: '0',
    ISSUE_AGENT_GITHUB_RETRY_BASE_MS: '50',
    LOG_LEVEL: 'info',
    ISSUE_AGENT_PUBLIC_URL: `http://127.0.0.1:${port}`,
    ISSUE_AGENT_ADMIN_TOKEN: adminToken,
    ISSUE_AGENT_LOG_LEVEL: 'info',
    // For profiling the pipeline's processes (e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`).
    ...(process.env.ISSUE_AGENT_TEST_CHILD_NODE_OPTIONS === undefined
      ? {}
      : { NODE_OPTIONS: process.env.ISSUE_AGENT_TEST_CHILD_NODE_OPTIONS }),
    ...options.env,
  };
  const procs: Proc[] = [];
  let n = 0;
  const spawnProc = (name: string, script: string, own: Record<string, string> = {}): Proc => {
    const log = join(workDir, `${name}-${n++}.log`);
    const fd = openSync(log, 'a');
    const child = spawn(process.execPath, entryArgs(script, options.imports), {
      cwd: workDir,
      env: { ...env, ...own },
      stdio: ['ignore', fd, fd],
    });
    closeSync(fd);
    const exit = new Promise<void>((resolve) =>
      child.once('exit', () => {
        resolve();
      }),
    );
    const proc = { child, log, exited: () => exit };
    // If the test process dies without stopping the pipeline, its children go with it.
    const reap = (): void => {
      child.kill('SIGKILL');
    };
    process.once('exit', reap);
    void exit.then(() => process.off('exit', reap));
    procs.push(proc);
    return proc;
  };
  const waitForLog = async (proc: Proc, text: string, timeoutMs = 30_000): Promise<void> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const content = readFileSync(proc.log, 'utf8');
      if (content.includes(text)) return;
      if (proc.child.exitCode !== null) throw new Error(`${proc.log} exited early:\n${content}`);
      if (Date.now() > deadline)
        throw new Error(`timed out waiting for "${text}" in ${proc.log}:\n${content}`);
      await delay(50);
    }
  };
  const app = spawnProc('app', 'src/app/main.ts');
  const workers: Proc[] = [];
  const startWorker = async (): Promise<Proc> => {
    const w = spawnProc('worker', 'workers/main.ts', options.workerEnv?.(workers.length));
    workers.push(w);
    await waitForLog(w, 'worker ready');
    return w;
  };
  try {
    await waitForLog(app, 'issue-agent App listening');
    for (let i = 0; i < (options.workers ?? 1); i++) await startWorker();
  } catch (error) {
    // Nothing may outlive a pipeline that failed to start.
    for (const p of procs) p.child.kill('SIGKILL');
    throw error;
  }
  const webhookUrl = `http://127.0.0.1:${port}/api/github/webhooks`;
  options.sim.setWebhookTarget(webhookUrl);
  const logs = (): string =>
    [
      ...procs.map((p) => `==== ${p.log}\n${readFileSync(p.log, 'utf8')}`),
      ...(options.extraLogs === undefined ? [] : [options.extraLogs()]),
    ].join('\n');
  let intake: Queue | null = null;
  let fix: Queue | null = null;
  const jobsEnded = async (issue: number, timeoutMs = 120_000): Promise<number> => {
    fix ??= new Queue('fix', { connection: redisOptions(options.redisUrl, 'jobs-ended'), prefix });
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const jobs = (
        await fix.getJobs(['completed', 'failed', 'active', 'waiting', 'delayed', 'prioritized'])
      ).filter((j) => (j.data as { issue?: { number?: number } }).issue?.number === issue);
      const states = await Promise.all(jobs.map((j) => j.getState()));
      if (states.every((state) => state === 'completed' || state === 'failed')) return jobs.length;
      if (Date.now() > deadline)
        throw new Error(
          `timed out waiting for the jobs of #${issue} to end (${states.join(', ')})\n${logs()}`,
        );
      await delay(100);
    }
  };
  const intakeDone = async (delivery: DeliveryResult, timeoutMs = 60_000): Promise<void> => {
    if (delivery.status < 200 || delivery.status >= 300)
      throw new Error(`delivery ${delivery.id} was not acknowledged (${delivery.status}): ${delivery.body}`);
    intake ??= new Queue(INTAKE_QUEUE, { connection: redisOptions(options.redisUrl, 'intake-done'), prefix });
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      // Added before the acknowledgement, and kept a day once completed: none is none.
      const job = await intake.getJob(intakeJobId(delivery.id));
      const state = job === undefined ? 'none' : await job.getState();
      if (state === 'none' || state === 'completed') return;
      if (state === 'failed')
        throw new Error(`intake failed on delivery ${delivery.id}: ${job?.failedReason ?? ''}\n${logs()}`);
      if (Date.now() > deadline)
        throw new Error(`timed out waiting for intake of delivery ${delivery.id} (${state})\n${logs()}`);
      await delay(50);
    }
  };
  return {
    webhookUrl,
    appUrl: `http://127.0.0.1:${port}`,
    adminToken,
    workDir,
    prefix,
    workers,
    app,
    startWorker,
    intakeDone,
    jobsEnded,
    logs,
    stop: async () => {
      await intake?.close();
      await fix?.close();
      // A profiled process writes its profile only when it exits by itself: ask, then insist.
      const ask = env.NODE_OPTIONS?.includes('--cpu-prof') === true ? 'SIGTERM' : 'SIGKILL';
      for (const p of procs) {
        if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill(ask);
      }
      const insist = setTimeout(() => {
        for (const p of procs) if (p.child.exitCode === null) p.child.kill('SIGKILL');
      }, 15_000);
      await Promise.all(procs.map((p) => p.exited()));
      clearTimeout(insist);
      if (process.env.ISSUE_AGENT_KEEP_TEST_DIRS !== '1') rmSync(workDir, { recursive: true, force: true });
    },
  };
}

export interface Stack {
  readonly fixture: FixtureRepo;
  readonly redis: TestRedis;
  readonly sim: GitHubSim;
  readonly model: ModelSimulator;
  readonly pipeline: Pipeline;
  /** The repository and its maintainer, as given to startStack. */
  readonly where: Pick<StackOptions, 'owner' | 'repo' | 'maintainer'>;
  /** Stops everything, newest first. */
  stop(): Promise<void>;
}

export interface StackOptions {
  /** The model simulator's policy; given the fixture so it can use its fix patch. */
  readonly policy: (fixture: FixtureRepo) => Policy;
  readonly modelKey: string;
  readonly owner: string;
  readonly repo: string;
  /** A user with this role on the repository. */
  readonly maintainer: { readonly login: string; readonly permission: RepoPermission };
  readonly workers?: number;
  readonly sandbox?: string;
  /** Modules every process of the pipeline preloads after tsx (a test's hook). */
  readonly imports?: readonly string[];
  /** Configure the App's "Sign in with GitHub" (its OAuth client) against the simulator. */
  readonly githubSignIn?: boolean;
  /** The repository (default node-calc). */
  readonly fixture?: FixtureName;
  /** Files committed to the fixture before it becomes the simulator's repository (a config). */
  readonly files?: Readonly<Record<string, string>>;
  /** Extra environment for the App and workers (deployment settings). */
  readonly env?: Record<string, string>;
  /** Settings of the n-th worker (from 0) over `env`. */
  readonly workerEnv?: (n: number) => Record<string, string>;
  /** The repository is private (its user attachments are served only with a token that can read it). */
  readonly private?: boolean;
  /** The App's permissions over the simulator's default (app.yml's, with `checks: read`). */
  readonly appPermissions?: Readonly<Record<string, 'read' | 'write' | 'admin' | 'none'>>;
}

/**
 * The whole test stack for App end-to-end tests: the node-calc fixture as a repository in the GitHub
 * simulator, a private Redis, the model simulator and the pipeline processes. Whatever started is
 * stopped again if a later part fails to start.
 */
export async function startStack(options: StackOptions): Promise<Stack> {
  const cleanups: (() => Promise<void> | void)[] = [];
  const stop = async (): Promise<void> => {
    for (const c of cleanups.reverse()) await c();
  };
  try {
    const fixture = makeFixtureRepo(options.fixture ?? 'node-calc');
    cleanups.push(() => {
      fixture.cleanup();
    });
    if (options.files !== undefined) commitFiles(fixture.dir, options.files);
    const redis = await startRedis();
    cleanups.push(() => redis.stop());
    const sim = await startGitHubSimulator(
      options.appPermissions === undefined ? {} : { appPermissions: options.appPermissions },
    );
    cleanups.push(() => sim.close());
    await sim.createRepo({
      owner: options.owner,
      name: options.repo,
      sourceDir: fixture.dir,
      ...(options.private === true ? { private: true } : {}),
    });
    sim.addUser({ login: options.maintainer.login });
    sim.setPermission(options.owner, options.repo, options.maintainer.login, options.maintainer.permission);
    const model = await startModelSimulator({ apiKey: options.modelKey, policy: options.policy(fixture) });
    cleanups.push(() => model.close());
    const pipeline = await startPipeline({
      sim,
      modelUrl: model.url,
      modelKey: options.modelKey,
      redisUrl: redis.url,
      extraLogs: () => `==== redis-server\n${redis.log()}`,
      ...(options.workers === undefined ? {} : { workers: options.workers }),
      ...(options.sandbox === undefined ? {} : { sandbox: options.sandbox }),
      ...(options.imports === undefined ? {} : { imports: options.imports }),
      ...(options.workerEnv === undefined ? {} : { workerEnv: options.workerEnv }),
      env: {
        ...(options.githubSignIn === true
          ? {
              ISSUE_AGENT_GITHUB_CLIENT_ID: sim.app.clientId,
              ISSUE_AGENT_GITHUB_CLIENT_SECRET: sim.app.clientSecret,
              ISSUE_AGENT_GITHUB_WEB_URL: sim.url,
            }
          : {}),
        ...options.env,
      },
    });
    cleanups.push(() => pipeline.stop());
    const where = { owner: options.owner, repo: options.repo, maintainer: options.maintainer };
    return { fixture, redis, sim, model, pipeline, where, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/**
 * startStack for a test that is not inside a Redis-gated suite: null, with the test skipped, when
 * redis-server is missing (in CI, where ISSUE_AGENT_REQUIRE_REDIS=1, redisSkipReason throws instead).
 */
export async function stackOrSkip(t: TestContext, options: StackOptions): Promise<Stack | null> {
  const skip = redisSkipReason();
  if (skip !== false) {
    t.skip(skip);
    return null;
  }
  return startStack(options);
}

/** An issue opened by the stack's maintainer and labelled `agent` (a job starts); its number. */
export async function labelledIssue(
  stack: Stack,
  issue: { readonly title: string; readonly body: string },
): Promise<number> {
  const { owner, repo, maintainer } = stack.where;
  const n = stack.sim.createIssue(owner, repo, { ...issue, author: maintainer.login }).number;
  await stack.sim.label(owner, repo, n, 'agent', maintainer.login);
  return n;
}

/** A finished or running job's recorded run: its base state and events, from the worker's job folder. */
export function readJobRun(stack: Stack, job: string): { base: BaseState; events: AgentEvent[] } {
  const store = FileEventStore.open(join(stack.pipeline.workDir, 'work', 'jobs', job, 'trajectory'));
  return { base: store.base, events: [...store.events] };
}

/**
 * node-calc as one more repository of the simulator, whose `.github/issue-agent.yml` says `yaml`
 * (the repository's own settings); `writer`, if given, may start jobs there.
 */
export async function createConfiguredRepo(
  sim: GitHubSim,
  where: { readonly owner: string; readonly name: string; readonly writer?: string },
  yaml: string,
): Promise<void> {
  const configured = makeFixtureRepo('node-calc');
  try {
    commitFiles(configured.dir, { '.github/issue-agent.yml': yaml });
    await sim.createRepo({ owner: where.owner, name: where.name, sourceDir: configured.dir });
  } finally {
    configured.cleanup();
  }
  if (where.writer !== undefined) sim.setPermission(where.owner, where.name, where.writer, 'write');
}
