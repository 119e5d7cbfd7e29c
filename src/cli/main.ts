import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs, promisify, type ParseArgsConfig } from 'node:util';
import { pino } from 'pino';
import { newBaseState } from '../agent/new-run.js';
import type { Outcome } from '../agent/run-agent.js';
import { ConfigError, readAgentEnv, runModelSetup, type AgentEnv } from '../config/agent-env.js';
import { setSandboxNice } from '../sandbox/cpu-priority.js';
import { FileEventStore } from '../events/file-event-store.js';
import { EventStoreError } from '../events/event-store.js';
import { reduceState, totalTokens } from '../events/reduce-state.js';
import type { EnvironmentRecord, Limits, Task } from '../events/schema.js';
import type { AnthropicModel } from '../model/anthropic-model.js';
import { createModel } from '../model/providers.js';
import { removeHeldPaths } from '../sandbox/held-paths.js';
import { SandboxCancelledError } from '../sandbox/sandbox.js';
import { EXIT_INTERRUPTED, listenForInterrupts, type Interrupts } from './interrupts.js';
import { executeRun } from '../execution/execute.js';
import { SetupError, type ProvisionedWorkspace, type SandboxChoice } from '../execution/provision.js';
import { taskFromText } from '../execution/task-text.js';
import { applyToCheckout } from './apply-change.js';
import { evalCommand, EVAL_USAGE } from './eval-command.js';
import { verifyCommand, VERIFY_USAGE } from './verify-command.js';
import { ProgressPrinter } from './progress.js';
import { renderTrajectory } from './render-trajectory.js';
import { chooseSandbox, openWorkspace, sandboxKind, UsageError } from './workspace.js';
import { describeLeftOut } from '../sandbox/generated-files.js';

const run = promisify(execFile);

const USAGE = `usage:
  issue-agent resolve <repo-dir> (--task TEXT | --task-file FILE) [--title TEXT] [--max-steps N]
                      [--max-usd X] [--max-minutes M] [--out DIR] [--sandbox local|docker|unconfined]
                      [--setup on|off] [--test-command CMD] [--allow-dirty] [--json]
  issue-agent resume <trajectory-dir> [--repo DIR] [--sandbox local|docker|unconfined] [--setup on|off] [--json]
  issue-agent replay <trajectory-dir> [--json]
${EVAL_USAGE}
${VERIFY_USAGE}

--setup on (default): before the agent, the checkout's setup (from .github/issue-agent.yml or detected
  from its lockfile) runs in the sandbox through the egress proxy; off: none. Not in --sandbox unconfined.

environment: ANTHROPIC_API_KEY (required to run), ANTHROPIC_BASE_URL, ISSUE_AGENT_MODEL,
  ISSUE_AGENT_RUNS_DIR (where trajectories go), ISSUE_AGENT_MAX_* (budgets), ISSUE_AGENT_EGRESS_*,
  ISSUE_AGENT_EXTRA_CA_CERTS, ISSUE_AGENT_NPM_REGISTRY, ISSUE_AGENT_PIP_INDEX_URL,
  ISSUE_AGENT_SETUP_SECRET_<NAME> (setup), see README and docs/environments.md.

Ctrl-C (or SIGTERM) cancels: setup stops within seconds (exit 130), the agent at its next step; what
the run started is removed. A second Ctrl-C removes it at once and exits 130.`;

const EXIT = { resolved: 0, other: 1, usage: 2, failed: 3, interrupted: EXIT_INTERRUPTED } as const;

function exitCodeFor(outcome: Outcome): number {
  if (outcome.outcome === 'resolved') return EXIT.resolved;
  if (outcome.outcome === 'failed') return EXIT.failed;
  return EXIT.other;
}

async function main(argv: readonly string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    console.log(USAGE);
    return command === undefined ? EXIT.usage : 0;
  }
  let env: AgentEnv;
  try {
    env = readAgentEnv();
    setSandboxNice(env.sandboxNice);
  } catch (error) {
    if (error instanceof ConfigError) throw new UsageError(error.message);
    throw error;
  }
  switch (command) {
    case 'resolve':
      return resolveCommand(rest, env);
    case 'resume':
      return resumeCommand(rest, env);
    case 'replay':
      return replayCommand(rest);
    case 'eval':
      return evalCommand(rest, env);
    case 'verify':
      return verifyCommand(rest, env);
    default:
      throw new UsageError(`unknown command "${command}" (expected resolve, resume, replay, eval or verify)`);
  }
}

type Options = NonNullable<ParseArgsConfig['options']>;

function parse<const T extends Options>(args: readonly string[], options: T) {
  try {
    return parseArgs({ args: [...args], options, allowPositionals: true, strict: true });
  } catch (error) {
    throw new UsageError(
      error instanceof Error ? (error.message.split('\n')[0] ?? 'bad arguments') : 'bad arguments',
    );
  }
}

function positiveNumber(name: string, raw: string | undefined, integer: boolean): number | undefined {
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n))) {
    throw new UsageError(`--${name} must be a positive ${integer ? 'integer' : 'number'}, got "${raw}"`);
  }
  return n;
}

function setupFlag(raw: string | undefined): boolean {
  if (raw === undefined || raw === 'on') return true;
  if (raw === 'off') return false;
  throw new UsageError(`--setup must be on or off, got "${raw}"`);
}

async function git(dir: string, args: readonly string[]): Promise<string> {
  const { stdout } = await run('git', ['-c', 'core.fsmonitor=false', '-C', dir, ...args], {
    encoding: 'utf8',
  });
  return stdout;
}

async function checkRepo(dir: string, allowDirty: boolean): Promise<string> {
  if (!existsSync(dir)) throw new UsageError(`${dir} does not exist`);
  if (!statSync(dir).isDirectory()) throw new UsageError(`${dir} is not a directory`);
  let top: string;
  try {
    top = (await git(dir, ['rev-parse', '--show-toplevel'])).trim();
  } catch {
    throw new UsageError(`${dir} is not a git repository (run git init and commit first)`);
  }
  try {
    await git(dir, ['rev-parse', '--verify', 'HEAD']);
  } catch {
    throw new UsageError(`${dir} has no commit yet; commit the code the agent should start from`);
  }
  if (!allowDirty && (await git(dir, ['status', '--porcelain'])).trim() !== '') {
    throw new UsageError(`${dir} has uncommitted changes; commit or stash them, or pass --allow-dirty`);
  }
  return top;
}

function readTask(values: {
  task?: string | undefined;
  'task-file'?: string | undefined;
  title?: string | undefined;
}): Task {
  if (values.task !== undefined && values['task-file'] !== undefined) {
    throw new UsageError('give either --task or --task-file, not both');
  }
  let text: string;
  if (values['task-file'] !== undefined) {
    try {
      text = readFileSync(values['task-file'], 'utf8');
    } catch {
      throw new UsageError(`cannot read --task-file ${values['task-file']}`);
    }
  } else if (values.task !== undefined) {
    text = values.task;
  } else {
    throw new UsageError('a task is required: --task TEXT or --task-file FILE');
  }
  if (text.trim() === '') throw new UsageError('the task is empty');
  return taskFromText(text, values.title);
}

function model(env: AgentEnv, name: string): AnthropicModel {
  if (env.provider.kind === 'anthropic' && env.provider.apiKey === null) {
    throw new UsageError(
      'ANTHROPIC_API_KEY is not set (point ANTHROPIC_BASE_URL at a compatible server to use another endpoint, or set ISSUE_AGENT_MODEL_PROVIDER=bedrock or vertex)',
    );
  }
  return createModel(env.provider, {
    model: name,
    maxAttempts: env.modelMaxAttempts,
    baseBackoffMs: env.modelRetryBaseMs,
  });
}

async function resolveCommand(args: readonly string[], env: AgentEnv): Promise<number> {
  const { values, positionals } = parse(args, {
    task: { type: 'string' },
    'task-file': { type: 'string' },
    title: { type: 'string' },
    'max-steps': { type: 'string' },
    'max-usd': { type: 'string' },
    'max-minutes': { type: 'string' },
    out: { type: 'string' },
    sandbox: { type: 'string' },
    setup: { type: 'string' },
    'test-command': { type: 'string' },
    'allow-dirty': { type: 'boolean' },
    json: { type: 'boolean' },
  });
  if (positionals.length !== 1 || positionals[0] === undefined)
    throw new UsageError('resolve takes exactly one <repo-dir>');
  const task = readTask(values);
  const limits: Limits = {
    ...env.limits,
    ...optional('maxSteps', positiveNumber('max-steps', values['max-steps'], true)),
    ...optional('maxUsd', positiveNumber('max-usd', values['max-usd'], false)),
    ...optional('maxWallMs', minutesToMs(positiveNumber('max-minutes', values['max-minutes'], false))),
  };
  const kind = sandboxKind(values.sandbox);
  const setup = setupFlag(values.setup);
  const testCommand = values['test-command'];
  if (testCommand?.trim() === '') throw new UsageError('--test-command is empty');
  const m = model(env, env.model);
  const repo = await checkRepo(resolve(positionals[0]), values['allow-dirty'] === true);
  const out = values.out === undefined ? null : resolve(values.out);
  if (out !== null && existsSync(resolve(out, 'base_state.json'))) {
    throw new UsageError(`${out} already holds a trajectory; use issue-agent resume ${out}`);
  }

  const conversationId = randomUUID();
  const dir = out ?? resolve(env.runsDir, conversationId);
  const sandbox = await chooseSandbox(kind, env);
  const stop = interrupts(sandbox, values.json === true);
  try {
    const ws = await openCancellable(
      () => openWorkspace(repo, sandbox, env, dir, conversationId, setup, { signal: stop.signal }),
      stop.signal,
    );
    try {
      const base = await newBaseState({
        task,
        sandbox: ws.sandbox,
        model: m.name,
        modelSetup: runModelSetup(m.name, env.modelChoice, limits),
        limits,
        testCommand,
        conversationId,
        workspacePath: repo,
        sandboxLabel: sandbox.backend.kind,
        environment: ws.environment,
        instructions: { ref: 'the checkout', commit: 'HEAD', files: [...ws.instructions] },
      });
      const store = FileEventStore.create(dir, base);
      if (ws.environment !== null) process.stderr.write(`${environmentLine(ws.environment)}\n`);
      return await execute(store, ws, m, env, values.json === true, repo, stop.signal);
    } finally {
      await ws.close();
    }
  } finally {
    stop.dispose();
  }
}

async function resumeCommand(args: readonly string[], env: AgentEnv): Promise<number> {
  const { values, positionals } = parse(args, {
    repo: { type: 'string' },
    sandbox: { type: 'string' },
    setup: { type: 'string' },
    json: { type: 'boolean' },
  });
  if (positionals.length !== 1 || positionals[0] === undefined)
    throw new UsageError('resume takes exactly one <trajectory-dir>');
  const setup = setupFlag(values.setup);
  const store = openStore(positionals[0]);
  const m = model(env, store.base.model);
  const repo = await checkRepo(resolve(values.repo ?? store.base.workspace.path), true);
  const sandbox = await chooseSandbox(sandboxKind(values.sandbox ?? store.base.sandbox), env);
  const stop = interrupts(sandbox, values.json === true);
  try {
    const ws = await openCancellable(
      () =>
        openWorkspace(repo, sandbox, env, store.location, store.base.conversationId, setup, {
          signal: stop.signal,
        }),
      stop.signal,
    );
    if (ws.environment !== null) process.stderr.write(`${environmentLine(ws.environment)}\n`);
    try {
      return await execute(store, ws, m, env, values.json === true, repo, stop.signal);
    } finally {
      await ws.close();
    }
  } finally {
    stop.dispose();
  }
}

/** Ctrl-C over a run (see listenForInterrupts); the first one says what it does on stderr. */
function interrupts(sandbox: SandboxChoice, json: boolean): Interrupts {
  const say = (line: string): void => {
    process.stderr.write(`${json ? '' : '\n'}issue-agent: ${line}\n`);
  };
  return listenForInterrupts({
    removeOwned: async () => {
      await sandbox.backend.removeOwned?.();
    },
    onFirst: (signal) => {
      say(`${signal}: cancelling the run and removing what it started (Ctrl-C again: at once)`);
    },
    write: say,
  });
}

/**
 * Opens the run's workspace; one that opened just as the signal aborted is closed again, so a
 * cancelled setup ends the same way whenever the signal came.
 */
async function openCancellable(
  open: () => Promise<ProvisionedWorkspace>,
  signal: AbortSignal,
): Promise<ProvisionedWorkspace> {
  const ws = await open();
  if (signal.aborted) {
    await ws.close();
    throw new SandboxCancelledError(signal.reason);
  }
  return ws;
}

function replayCommand(args: readonly string[]): number {
  const { values, positionals } = parse(args, { json: { type: 'boolean' } });
  if (positionals.length !== 1 || positionals[0] === undefined)
    throw new UsageError('replay takes exactly one <trajectory-dir>');
  const store = openStore(positionals[0]);
  if (values.json === true) {
    console.log(JSON.stringify({ base: store.base, events: store.events, state: reduceState(store.events) }));
  } else {
    process.stdout.write(renderTrajectory(store.base, store.events));
  }
  return 0;
}

function openStore(dir: string): FileEventStore {
  try {
    return FileEventStore.open(resolve(dir));
  } catch (error) {
    if (error instanceof EventStoreError) throw new UsageError(error.message);
    throw error;
  }
}

async function execute(
  store: FileEventStore,
  ws: ProvisionedWorkspace,
  m: AnthropicModel,
  env: AgentEnv,
  json: boolean,
  repo: string,
  signal: AbortSignal,
): Promise<number> {
  const progressOut = json ? process.stderr : process.stdout;
  const printer = new ProgressPrinter((line) => progressOut.write(`${line}\n`));
  const logger = pino(
    { level: env.logLevel, base: { conversation: store.base.conversationId } },
    pino.destination(2),
  );
  progressOut.write(`trajectory: ${store.location}\n`);
  const outcome: Outcome = await executeRun(store, ws, m, env, {
    signal,
    logger,
    onEvent: (e) => {
      printer.onEvent(e);
    },
  });
  const state = reduceState(store.events);
  const tokens = totalTokens(state.usage);
  // The change comes back as data: the last checkpoint's diff, applied to the user's working tree.
  let applied = 'no change';
  const checkpoint = state.lastCheckpoint;
  if (
    outcome.outcome !== 'cancelled' &&
    checkpoint !== null &&
    checkpoint.tree !== store.base.workspace.baseTree
  ) {
    if (checkpoint.diff === null) {
      applied = `not applied: the change was too large to record; see ${store.location}`;
    } else {
      const r = await applyToCheckout(repo, checkpoint.diff);
      if (r.applied) applied = `applied to ${repo}`;
      else {
        const patch = resolve(store.location, 'change.patch');
        writeFileSync(patch, checkpoint.diff);
        applied = `not applied (${r.reason}); the change is in ${patch}`;
      }
    }
  }
  if (json) {
    console.log(
      JSON.stringify({
        outcome: outcome.outcome,
        reason: outcome.reason,
        ...(outcome.limit === undefined ? {} : { limit: outcome.limit }),
        ...(outcome.cause === undefined ? {} : { cause: outcome.cause }),
        trajectory: store.location,
        steps: state.steps,
        tokens,
        usage: state.usage,
        usd: Number(state.usd.toFixed(6)),
        diffStat: outcome.diffStat,
        summary: outcome.summary,
        change: applied,
        ...(checkpoint?.leftOut === undefined ? {} : { leftOut: checkpoint.leftOut }),
      }),
    );
  } else {
    console.log('');
    console.log(`outcome: ${outcome.outcome} — ${outcome.reason}`);
    if (outcome.diffStat !== '') console.log(outcome.diffStat);
    console.log(`change: ${applied}`);
    const leftOut = describeLeftOut(checkpoint?.leftOut ?? []);
    if (leftOut !== '') console.log(`left out as generated by test runs: ${leftOut}`);
    console.log(`steps: ${state.steps}  tokens: ${tokens}  cost: $${state.usd.toFixed(4)}`);
    console.log(`trajectory: ${store.location}`);
  }
  return exitCodeFor(outcome);
}

/** One line on how the environment was made, for the terminal. */
function environmentLine(rec: EnvironmentRecord): string {
  const runtimes = rec.runtimes.map((r) => `${r.language} ${r.version} from ${r.source}`).join(', ');
  const ran = rec.setup.commands.filter((c) => c.attempts > 0);
  const setup =
    rec.setup.cache.status === 'hit'
      ? 'reused a cached environment'
      : ran.length === 0
        ? `none (${rec.setup.reason})`
        : ran
            .map((c) => `${c.command} (exit ${String(c.exitCode)}, ${(c.durationMs / 1000).toFixed(1)} s)`)
            .join(', ');
  const reached = rec.egress.setup?.totals;
  return `environment: ${rec.image}${runtimes === '' ? '' : ` (${runtimes})`}; setup: ${setup}${reached === undefined ? '' : `; ${reached.allowed} request(s) through the egress proxy, ${reached.denied} refused`}`;
}

function optional(key: keyof Limits, value: number | undefined): Partial<Limits> {
  return value === undefined ? {} : { [key]: value };
}

function minutesToMs(m: number | undefined): number | undefined {
  return m === undefined ? undefined : Math.round(m * 60_000);
}

// What a command left on the host once its sandboxes are closed (the Docker mount files' folder,
// which lives as long as the process) goes with it.
main(process.argv.slice(2))
  .finally(removeHeldPaths)
  .then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      if (error instanceof SandboxCancelledError) {
        console.error(`issue-agent: ${error.message}; everything the run had started is removed`);
        process.exitCode = EXIT.interrupted;
        return;
      }
      if (error instanceof UsageError) {
        console.error(`issue-agent: ${error.message}`);
        process.exitCode = EXIT.usage;
        return;
      }
      if (error instanceof SetupError) {
        console.error(`issue-agent: ${error.message}`);
        process.exitCode = EXIT.failed;
        return;
      }
      console.error(
        `issue-agent: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
      );
      process.exitCode = EXIT.failed;
    },
  );
