import { createHash, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { BaselineCache, StoredBaseline } from '../agent/baseline-cache.js';
import { newBaseState } from '../agent/new-run.js';
import { runModelSetup, type AgentEnv } from '../config/agent-env.js';
import { FileEventStore } from '../events/file-event-store.js';
import { reduceState, totalTokens } from '../events/reduce-state.js';
import type { AgentEvent, BaseState, Usage } from '../events/schema.js';
import { oracle, startModelSimulator } from '../model-sim/index.js';
import type { AnthropicProvider } from '../model/provider-config.js';
import type { AnthropicModel } from '../model/anthropic-model.js';
import { createModel } from '../model/providers.js';
import { executeRun } from '../execution/execute.js';
import { provision, type ProvisionedWorkspace, type SandboxChoice } from '../execution/provision.js';
import { taskFromText } from '../execution/task-text.js';
import { checkoutAt, secondCheckout, type Checkout } from './checkout.js';
import { fetchRepository } from './fetch-repo.js';
import {
  grade,
  openTestPlace,
  testCommands,
  type Grade,
  type SandboxPlace,
  type TestPlace,
} from './grade.js';
import type { EvalTask } from './tasks.js';

/**
 * `issue-agent eval`: every task through the same core as `issue-agent resolve` (a copy of the
 * checkout at the base commit, the sandbox with its prepared environment, the agent with its own
 * verification), then graded by the harness (grade.ts). Tasks run in parallel, `concurrency` at a
 * time. Everything a task produces is in `<out>/tasks/<instance_id>/`: its event log
 * (`trajectory/`) and, once graded, `result.json`. So a second run with the same `--out` skips
 * graded tasks, resumes a task whose process died mid-run from its event log (no answered model
 * call asked again), grades a finished but ungraded one, and starts over a task that was cancelled
 * (an interrupt: its log ends with the cancellation, which the agent does not continue).
 */

export interface TaskResult {
  readonly instance_id: string;
  /** Which of the task's independent attempts this is (1 to `--attempts`). */
  readonly attempt: number;
  readonly resolved: boolean;
  /** The agent's outcome (resolved, unverified, …), or `error` when the harness failed the task. */
  readonly outcome: string;
  readonly outcomeReason: string | null;
  readonly grade: Grade | null;
  readonly model: string;
  readonly usage: Usage;
  readonly tokens: number;
  readonly usd: number;
  readonly steps: number;
  /** The agent's working time from its event log (all segments, resumed ones included). */
  readonly agentMs: number;
  /** This task's wall time in the run that finished it, and the part spent running tests. */
  readonly wallMs: number;
  readonly testMs: number;
  /** The model's patch (SWE-bench's `model_patch`), or null. */
  readonly patch: string | null;
  readonly trajectory: string;
}

export interface EvalProgress {
  readonly total: number;
  readonly done: number;
  readonly resolved: number;
  readonly usd: number;
  readonly running: readonly string[];
  /** The task that just finished (null for a start notice), and whether it came from an earlier run. */
  readonly finished: { readonly result: TaskResult; readonly earlier: boolean } | null;
}

export interface EvalOptions {
  readonly tasks: readonly EvalTask[];
  readonly out: string;
  readonly concurrency: number;
  /** Independent attempts per task (each its own sandbox, trajectory and grade). */
  readonly attempts: number;
  /** Where the tasks' sandboxes are made (the entry point's choice). */
  readonly sandbox: SandboxChoice;
  readonly setup: boolean;
  readonly env: AgentEnv;
  /** `oracle`: each task's gold patch through the model simulator; otherwise the configured model. */
  readonly model: 'oracle' | 'configured';
  /** Where `repo: owner/name` tasks are found: `<reposDir>/<owner>/<name>` or `<owner>__<name>`. */
  readonly reposDir: string | null;
  /**
   * Where a `repo: owner/name` task with no local copy is fetched from (`<serverUrl>/<owner>/<name>.git`,
   * with the token if there is one), into `<out>/repos/<owner>__<name>.git`; null: not fetched.
   */
  readonly remote?: { readonly serverUrl: string; readonly token: string | null } | null;
  /** The task file (hidden from a local sandbox with the repositories and the output). */
  readonly tasksFile: string;
  /** More for a local sandbox to hide, and folders to mask (an App worker's; see Confinement.mask). */
  readonly isolation?: { readonly hide: readonly string[]; readonly mask: readonly string[] };
  readonly signal: AbortSignal;
  readonly logger: Logger;
  readonly onProgress?: ((p: EvalProgress) => void) | undefined;
}

export interface EvalRun {
  /** In task-file order, attempts in order; an attempt interrupted before it finished has none. */
  readonly results: readonly TaskResult[];
  /** The attempts not finished (`<instance_id>` for a first attempt, `<instance_id> (attempt k)` otherwise). */
  readonly interrupted: readonly string[];
  readonly wallMs: number;
}

/** Where an oracle run's model answers: the simulator, at Anthropic's door (its key is per run). */
const ORACLE_PROVIDER: AnthropicProvider = { kind: 'anthropic', apiKey: null, baseUrl: null };

const ZERO: Usage = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };

export class EvalConfigError extends Error {
  override readonly name = 'EvalConfigError';
}

export async function runEval(options: EvalOptions): Promise<EvalRun> {
  const started = performance.now();
  await mkdir(join(options.out, 'tasks'), { recursive: true });
  // Results of one configuration only: a folder of oracle results is not continued with a model.
  const config = {
    model: options.model === 'oracle' ? 'oracle' : options.env.model,
    sandbox: options.sandbox.backend.kind,
  };
  const configFile = join(options.out, 'eval.json');
  if (existsSync(configFile)) {
    const earlier = JSON.parse(await readFile(configFile, 'utf8')) as typeof config;
    if (earlier.model !== config.model || earlier.sandbox !== config.sandbox) {
      throw new EvalConfigError(
        `${options.out} holds an eval with model ${earlier.model} in the ${earlier.sandbox} sandbox; use another --out for ${config.model} in ${config.sandbox}`,
      );
    }
  } else {
    await writeJson(configFile, config);
  }
  const results = new Map<string, TaskResult>();
  const interrupted: string[] = [];
  const running = new Set<string>();
  let resolved = 0;
  let usd = 0;
  const report = (finished: EvalProgress['finished']): void => {
    options.onProgress?.({
      total: options.tasks.length * Math.max(1, options.attempts),
      done: results.size,
      resolved,
      usd,
      running: [...running],
      finished,
    });
  };
  // Attempt by attempt: every task's first attempt before any second one.
  const attempts = Math.max(1, options.attempts);
  const baselines: EvalBaselines = new Map();
  const queue = Array.from({ length: attempts }, (_, i) =>
    options.tasks.map((task) => ({ task, attempt: i + 1 })),
  ).flat();
  const worker = async (): Promise<void> => {
    for (;;) {
      if (options.signal.aborted) return;
      const next = queue.shift();
      if (next === undefined) return;
      const { task, attempt } = next;
      const name = attemptName(task, attempt);
      running.add(name);
      report(null);
      // A task's failure is its result, never the eval's; one cut short by the interrupt (a git or
      // tar child killed by the same Ctrl-C) is interrupted, not failed. A harness failure (a git
      // child or a sandbox start that failed on a loaded host) is tried once more at once: the task
      // continues from its event log, so no answered model call is paid twice.
      const r = await runTaskRetried(task, attempt, options, baselines);
      running.delete(name);
      if (r.kind === 'interrupted') {
        interrupted.push(name);
        continue;
      }
      // Only a graded task is final: a harness error (or a task the harness cannot run) is tried
      // again by the next run with the same --out.
      if (!r.earlier && r.result.grade !== null && r.result.grade.status !== 'error') {
        await writeJson(join(taskFolder(options.out, task, attempt), 'result.json'), r.result).catch(
          (error: unknown) => {
            options.logger.error({ err: error, task: name }, 'could not write the result');
          },
        );
      }
      results.set(name, r.result);
      if (r.result.resolved) resolved += 1;
      usd += r.result.usd;
      report({ result: r.result, earlier: r.earlier });
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, options.concurrency) }, worker));
  for (const q of queue) interrupted.push(attemptName(q.task, q.attempt));
  return {
    results: options.tasks.flatMap((t) =>
      Array.from({ length: attempts }, (_, i) => results.get(attemptName(t, i + 1)) ?? []).flat(),
    ),
    interrupted,
    wallMs: performance.now() - started,
  };
}

async function runTaskRetried(
  task: EvalTask,
  attempt: number,
  options: EvalOptions,
  baselines: EvalBaselines,
): Promise<TaskRun> {
  const name = attemptName(task, attempt);
  let reason = '';
  for (let tried = 1; tried <= HARNESS_TRIES; tried++) {
    try {
      return await runTask(task, attempt, options, baselines);
    } catch (error) {
      if (options.signal.aborted) return { kind: 'interrupted' };
      reason = error instanceof Error ? error.message : String(error);
      options.logger.warn(
        { err: error, task: name, tried, of: HARNESS_TRIES },
        tried < HARNESS_TRIES ? 'the harness failed; trying the task again' : 'the harness failed',
      );
    }
  }
  return {
    kind: 'done',
    earlier: false,
    result: failedResult(task, attempt, options, `the harness failed: ${reason}`),
  };
}

/** How often a task whose harness threw is run in one eval (a later eval with the same --out runs it again). */
const HARNESS_TRIES = 2;

type TaskRun =
  | { readonly kind: 'done'; readonly result: TaskResult; readonly earlier: boolean }
  | { readonly kind: 'interrupted' };

/** A task's folder; an attempt after the first has its own beside it. */
export function taskFolder(out: string, task: Pick<EvalTask, 'instance_id'>, attempt = 1): string {
  return join(out, 'tasks', attempt === 1 ? task.instance_id : `${task.instance_id}.attempt-${attempt}`);
}

function attemptName(task: Pick<EvalTask, 'instance_id'>, attempt: number): string {
  return attempt === 1 ? task.instance_id : `${task.instance_id} (attempt ${attempt})`;
}

/** One attempt of a task: its earlier result, or a run of the agent (or the rest of one) and grading. */
async function runTask(
  task: EvalTask,
  attempt: number,
  options: EvalOptions,
  baselines: EvalBaselines,
): Promise<TaskRun> {
  const folder = taskFolder(options.out, task, attempt);
  const earlier = await earlierResult(folder, attempt);
  if (earlier !== null) return earlier;
  await mkdir(folder, { recursive: true });
  const started = performance.now();
  // What can be known before any money is spent.
  const unrunnable = cannotRun(task, options);
  if (unrunnable !== null) return failedRun(task, attempt, options, unrunnable);
  const repo = await repoOf(task, options);
  const run = attemptOf(task, attempt, options, folder, repo, evalBaselines(baselines, repo));
  let store = await openTrajectory(run.trajectory);
  // Grading's sandbox, opened while the agent works (see openTestPlace); owned here until grading
  // takes it, closed here on every other way out.
  const grading: GradingSlot = { place: null };
  try {
    // A run that finished but was not graded (the process died in between) goes straight to grading.
    if (store === null || reduceState(store.events).outcome === null)
      store = await runAgentOn(run, store, grading);
    return await gradeAttempt(run, store, grading, started);
  } finally {
    await closeUnused(grading, run.logger);
  }
}

/** What one attempt of a task runs with: its repository, folders, names and what its sandboxes hide. */
interface Attempt {
  readonly task: EvalTask;
  readonly attempt: number;
  readonly options: EvalOptions;
  readonly repo: string;
  readonly folder: string;
  readonly trajectory: string;
  /** Stable per task and output folder: a resumed run finds its workspace at the same path. */
  readonly key: string;
  readonly logger: Logger;
  /** Where grading's sandbox is made; the agent's has the same hide, mask and cache key. */
  readonly place: SandboxPlace;
  /** This eval's baselines of the task's repository (see evalBaselines). */
  readonly baselines: BaselineCache;
}

/** A sandbox opened for grading while the agent works, until grading takes it. */
interface GradingSlot {
  place: Promise<TestPlace> | null;
}

/** The result a run before this one wrote (a result written before attempts were counted is a first attempt's). */
async function earlierResult(folder: string, attempt: number): Promise<TaskRun | null> {
  const resultFile = join(folder, 'result.json');
  if (!existsSync(resultFile)) return null;
  return {
    kind: 'done',
    earlier: true,
    result: { attempt, ...(JSON.parse(await readFile(resultFile, 'utf8')) as Omit<TaskResult, 'attempt'>) },
  };
}

/** Why the task cannot be run as asked, or null. */
function cannotRun(task: EvalTask, options: EvalOptions): string | null {
  if (options.model === 'oracle' && task.patch === undefined) {
    return "the oracle needs the task's gold patch (`patch`)";
  }
  try {
    testCommands(task);
    return null;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

function failedRun(task: EvalTask, attempt: number, options: EvalOptions, reason: string): TaskRun {
  return { kind: 'done', earlier: false, result: failedResult(task, attempt, options, reason) };
}

function attemptOf(
  task: EvalTask,
  attempt: number,
  options: EvalOptions,
  folder: string,
  repo: string,
  baselines: BaselineCache,
): Attempt {
  const key = `eval-${createHash('sha256')
    .update(`${options.out}\0${task.instance_id}${attempt === 1 ? '' : `\0${attempt}`}`)
    .digest('hex')
    .slice(0, 20)}`;
  return {
    task,
    attempt,
    options,
    repo,
    folder,
    trajectory: join(folder, 'trajectory'),
    key,
    logger: options.logger.child({ task: attemptName(task, attempt) }),
    baselines,
    place: {
      sandbox: options.sandbox,
      env: options.env,
      setup: options.setup,
      folder,
      key: `${key}-grade`,
      // The local sandbox must not read the answers: the task file (gold and test patches), the
      // source repositories (their later history) and the other tasks' results.
      hide: [
        options.tasksFile,
        repo,
        ...(options.reposDir === null ? [] : [options.reposDir]),
        options.out,
        ...(options.isolation?.hide ?? []),
      ],
      mask: options.isolation?.mask ?? [],
      cacheKey: `eval:${repo}`,
      signal: options.signal,
    },
  };
}

/** The task's event log to continue, or null: none yet, or a cancelled one (removed, to start over). */
async function openTrajectory(trajectory: string): Promise<FileEventStore | null> {
  if (!existsSync(join(trajectory, 'base_state.json'))) return null;
  const store = FileEventStore.open(trajectory);
  if (reduceState(store.events).outcome?.outcome !== 'cancelled') return store;
  await rm(trajectory, { recursive: true, force: true });
  return null;
}

/** The agent's run (new, or `resumed` from its log) with the oracle or the configured model. */
async function runAgentOn(
  run: Attempt,
  resumed: FileEventStore | null,
  grading: GradingSlot,
): Promise<FileEventStore> {
  const { task, options } = run;
  // The configured provider's credentials are checked where its client is made (createModel).
  const apiKey = `oracle-${randomUUID()}`;
  const sim =
    options.model === 'oracle'
      ? // No test run of its own after the fix: the harness's final run, next, is that run.
        await startModelSimulator({ policy: oracle(task.patch ?? '', { recheck: false }), apiKey })
      : null;
  try {
    // The oracle answers at Anthropic's door whatever provider is configured.
    const model = createModel(sim === null ? options.env.provider : ORACLE_PROVIDER, {
      model: resumed?.base.model ?? options.env.model,
      ...(sim === null ? {} : { apiKey, baseURL: sim.url }),
      maxAttempts: options.env.modelMaxAttempts,
      baseBackoffMs: options.env.modelRetryBaseMs,
    });
    return await runInWorkspace(run, resumed, model, grading);
  } finally {
    await sim?.close();
  }
}

/**
 * The agent's workspace at the base commit, and grading's sandbox opened beside it (into
 * `grading`); the agent runs in the first, which is closed when it ends.
 */
async function runInWorkspace(
  run: Attempt,
  resumed: FileEventStore | null,
  model: AnthropicModel,
  grading: GradingSlot,
): Promise<FileEventStore> {
  const { task, options, place } = run;
  // Made where the workspace's copy goes (stable per task, so a resumed run sees the same path),
  // and grading's copied from it before any sandbox has seen it.
  const checkout = await checkoutAt(run.repo, task.base_commit, run.key);
  let gradingCopy: Checkout | null = null;
  try {
    gradingCopy = await secondCheckout(checkout, place.key);
    const ws = await provision({
      repo: checkout.dir,
      sandbox: options.sandbox,
      env: options.env,
      trajectory: run.folder,
      runId: run.key,
      setup: options.setup,
      // Each of the two sandboxes hides the other's copy (both are in a private temp folder
      // that a local sandbox's own /tmp covers anyway).
      hide: [...place.hide, dirname(gradingCopy.dir)],
      mask: place.mask ?? [],
      cacheKey: place.cacheKey,
      ownCopy: checkout,
      signal: options.signal,
    });
    try {
      // After the agent's workspace is open: its environment is in the cache by now.
      const opening = openTestPlace({
        ...place,
        hide: [...place.hide, dirname(checkout.dir)],
        repo: run.repo,
        base: task.base_commit,
        checkout: gradingCopy,
      });
      grading.place = opening;
      gradingCopy = null;
      // Awaited by grading, or by runTask's finally; never an unhandled rejection meanwhile.
      opening.catch(() => undefined);
      const store = resumed ?? FileEventStore.create(run.trajectory, await baseStateOf(run, ws, model));
      await executeRun(store, ws, model, options.env, {
        signal: options.signal,
        logger: run.logger,
        baselines: run.baselines,
      });
      return store;
    } finally {
      await ws.close();
    }
  } finally {
    await gradingCopy?.cleanup();
    await checkout.cleanup();
  }
}

function baseStateOf(run: Attempt, ws: ProvisionedWorkspace, model: AnthropicModel): Promise<BaseState> {
  const { task, options } = run;
  return newBaseState({
    task: { ...taskFromText(task.problem_statement), source: task.instance_id },
    sandbox: ws.sandbox,
    model: model.name,
    modelSetup: runModelSetup(model.name, options.env.modelChoice, options.env.limits),
    limits: options.env.limits,
    conversationId: run.key,
    workspacePath: run.repo,
    sandboxLabel: options.sandbox.backend.kind,
    environment: ws.environment,
    instructions: {
      ref: 'the base commit',
      commit: task.base_commit,
      files: [...ws.instructions],
    },
  });
}

/** Grades a finished run's change (its last checkpoint) in grading's sandbox, into the task's result. */
async function gradeAttempt(
  run: Attempt,
  store: FileEventStore,
  grading: GradingSlot,
  started: number,
): Promise<TaskRun> {
  const { task, attempt, options } = run;
  const state = reduceState(store.events);
  const outcome = state.outcome;
  if (outcome === null || outcome.outcome === 'cancelled' || options.signal.aborted)
    return { kind: 'interrupted' };
  const last = state.lastCheckpoint;
  const changed = last !== null && last.tree !== store.base.workspace.baseTree;
  if (changed && last.diff === null) {
    return failedRun(
      task,
      attempt,
      options,
      'the change was too large to record as a diff, so it cannot be graded',
    );
  }
  const patch = changed ? last.diff : null;
  const ahead = grading.place;
  grading.place = null;
  const graded = await grade({
    ...run.place,
    task,
    repo: run.repo,
    patch,
    logger: run.logger,
    place: ahead ?? undefined,
  });
  // Read again: grading may have been interrupted (TypeScript keeps the narrowing from above).
  if (isAborted(options.signal)) return { kind: 'interrupted' };
  return {
    kind: 'done',
    earlier: false,
    result: {
      instance_id: task.instance_id,
      attempt,
      resolved: graded.status === 'resolved',
      outcome: outcome.outcome,
      outcomeReason: outcome.reason,
      grade: graded,
      model: options.model === 'oracle' ? 'oracle' : store.base.model,
      usage: state.usage,
      tokens: totalTokens(state.usage),
      usd: state.usd,
      steps: state.steps,
      agentMs: state.elapsedMs,
      wallMs: performance.now() - started,
      testMs: testTime(store.events) + graded.testMs,
      patch,
      trajectory: run.trajectory,
    },
  };
}

/** Not graded (interrupted, or the change could not be): the sandbox opened for it goes. */
async function closeUnused(grading: GradingSlot, logger: Logger): Promise<void> {
  if (grading.place === null) return;
  await grading.place
    .then(
      (p) => p.close(),
      () => undefined,
    )
    .catch((error: unknown) => {
      logger.warn({ err: error }, "could not close grading's sandbox");
    });
}

/**
 * The time a task's run spent in test runs: the harness's (baseline, final) and the agent's own
 * `run_tests` calls, which run the same suite (one answered with the baseline's result took none).
 * Everything else in a task's wall time is the harness's own cost (the report's "harness" column).
 */
export function testTime(events: readonly AgentEvent[]): number {
  return events.reduce(
    (ms, e) =>
      ms +
      ((e.kind === 'test_run' && e.reusedFrom === undefined) ||
      (e.kind === 'observation' && e.tool === 'run_tests')
        ? e.durationMs
        : 0),
    0,
  );
}

/** One eval's baselines, by repository and key (baseline-cache.ts); only this process writes them. */
type EvalBaselines = Map<string, StoredBaseline>;

/**
 * The baselines of `repo` kept for the rest of this eval: tasks of one repository at the same base
 * commit, environment and test command (SWE-bench's tasks of one commit, a careless gold patch beside
 * the real one, every attempt after the first) run that baseline once. In memory: no sandbox reaches
 * them, and a later eval with the same --out runs a resumed task's missing baseline again.
 */
function evalBaselines(all: EvalBaselines, repo: string): BaselineCache {
  return {
    get: (key) => Promise.resolve(all.get(`${repo}\0${key}`) ?? null),
    put: (key, baseline) => {
      all.set(`${repo}\0${key}`, baseline);
      return Promise.resolve();
    },
  };
}

/** Clones being fetched or fetched in this process, by repository: each is fetched once. */
const fetched = new Map<string, Promise<string>>();

async function repoOf(task: EvalTask, options: EvalOptions): Promise<string> {
  if (task.repo_path !== undefined) return task.repo_path;
  const [owner = '', name = ''] = (task.repo ?? '').split('/');
  if (options.reposDir !== null) {
    for (const candidate of [
      join(options.reposDir, owner, name),
      join(options.reposDir, `${owner}__${name}`),
    ]) {
      if (existsSync(candidate)) return candidate;
    }
  }
  const remote = options.remote ?? null;
  if (remote === null) {
    throw new Error(
      `no local copy of ${task.repo ?? '(no repo)'}: give the task a repo_path, or --repos-dir with ${owner}/${name} in it`,
    );
  }
  const clone = join(options.out, 'repos', `${owner}__${name}.git`);
  let pending = fetched.get(clone);
  if (pending === undefined) {
    // Every branch, and then any base commit of the set's tasks of this repository not on one.
    const commits = options.tasks
      .filter((t) => t.repo === task.repo && t.repo_path === undefined)
      .map((t) => t.base_commit);
    pending = fetchRepository({
      url: `${remote.serverUrl}/${owner}/${name}.git`,
      token: remote.token,
      clone,
      refspecs: ['+refs/heads/*:refs/heads/*'],
      commits,
    }).then(() => clone);
    // A failed fetch is tried again by the next task that needs it.
    pending.catch(() => fetched.delete(clone));
    fetched.set(clone, pending);
  }
  return pending;
}

function failedResult(task: EvalTask, attempt: number, options: EvalOptions, reason: string): TaskResult {
  return {
    instance_id: task.instance_id,
    attempt,
    resolved: false,
    outcome: 'error',
    outcomeReason: reason,
    grade: null,
    model: options.model === 'oracle' ? 'oracle' : options.env.model,
    usage: ZERO,
    tokens: 0,
    usd: 0,
    steps: 0,
    agentMs: 0,
    wallMs: 0,
    testMs: 0,
    patch: null,
    trajectory: join(taskFolder(options.out, task, attempt), 'trajectory'),
  };
}

async function writeJson(path: string, value: unknown): Promise<void> {
  const tmp = `${path}.tmp`;
  await writeFile(tmp, `${JSON.stringify(value, null, 2)}\n`);
  await rename(tmp, path);
}

function isAborted(signal: AbortSignal): boolean {
  return signal.aborted;
}
