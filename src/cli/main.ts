import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs, promisify, type ParseArgsConfig } from 'node:util';
import { pino } from 'pino';
import { parse as parseYaml } from 'yaml';
import { startMcpServers } from '../agent/mcp/servers.js';
import { runAgent, type Outcome } from '../agent/run-agent.js';
import { defaultTools } from '../agent/tools/index.js';
import { newBaseState } from '../agent/new-run.js';
import { collectInstructions, probeInstructionSource } from '../agent/instructions.js';
import { ConfigError, readAgentEnv, type AgentEnv } from '../config/agent-env.js';
import { mergeMcp, type McpConfig } from '../config/mcp-config.js';
import {
  parseRepoConfig,
  REPO_CONFIG_PATH,
  RepoConfigError,
  type RepoConfig,
} from '../config/repo-config.js';
import { EnvironmentSetupError } from '../environment/errors.js';
import { hostProbe } from '../environment/host-probe.js';
import { planEnvironment } from '../environment/plan.js';
import { failedSetupOutput } from '../publish/environment.js';
import { Redactor } from '../publish/redact.js';
import { FileEventStore } from '../events/file-event-store.js';
import { EventStoreError } from '../events/event-store.js';
import { reduceState, totalTokens } from '../events/reduce-state.js';
import type { EnvironmentRecord, Limits, RepoInstruction, Task } from '../events/schema.js';
import { AnthropicModel } from '../model/anthropic-model.js';
import { createSandbox } from '../sandbox/create-sandbox.js';
import { DEFAULT_LIMITS } from '../sandbox/docker/container-spec.js';
import type { Sandbox } from '../sandbox/sandbox.js';
import { applyToCheckout, cliHidePaths, copyCheckout, WorkspaceCopyError } from './workspace-copy.js';
import { ProgressPrinter } from './progress.js';
import { taskFromText } from './task-text.js';
import { renderTrajectory } from './render-trajectory.js';

const run = promisify(execFile);

const USAGE = `usage:
  issue-agent resolve <repo-dir> (--task TEXT | --task-file FILE) [--title TEXT] [--max-steps N]
                      [--max-usd X] [--max-minutes M] [--out DIR] [--sandbox local|docker|unconfined]
                      [--setup on|off] [--test-command CMD] [--allow-dirty] [--json]
  issue-agent resume <trajectory-dir> [--repo DIR] [--sandbox local|docker|unconfined] [--setup on|off] [--json]
  issue-agent replay <trajectory-dir> [--json]

--setup on (default): before the agent, the checkout's setup (from .github/issue-agent.yml or detected
  from its lockfile) runs in the sandbox through the egress proxy; off: none. Not in --sandbox unconfined.

environment: ANTHROPIC_API_KEY (required to run), ANTHROPIC_BASE_URL, ISSUE_AGENT_MODEL,
  ISSUE_AGENT_RUNS_DIR (where trajectories go), ISSUE_AGENT_MAX_* (budgets), ISSUE_AGENT_EGRESS_*,
  ISSUE_AGENT_EXTRA_CA_CERTS, ISSUE_AGENT_NPM_REGISTRY, ISSUE_AGENT_PIP_INDEX_URL,
  ISSUE_AGENT_SETUP_SECRET_<NAME> (setup), see README and docs/environments.md.`;

/** Bad usage or bad input: exit 2, one line, nothing touched. */
class UsageError extends Error {}

const EXIT = { resolved: 0, other: 1, usage: 2, failed: 3 } as const;

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
    default:
      throw new UsageError(`unknown command "${command}" (expected resolve, resume or replay)`);
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

/**
 * local: a shell in namespaces (no network, no host processes, the user's checkout, home and
 * trajectories hidden); docker: a hardened container; unconfined: a plain child process of the
 * user (it can read everything the user can, the network included): only for trusted work.
 */
type CliSandbox = 'local' | 'docker' | 'unconfined';

function sandboxKind(raw: string | undefined): CliSandbox {
  if (raw === undefined || raw === 'local') return 'local';
  if (raw === 'docker' || raw === 'unconfined') return raw;
  throw new UsageError(`--sandbox must be local, docker or unconfined, got "${raw}"`);
}

/** Recorded in the trajectory: what resume uses when --sandbox is not given. */
function recordedKind(kind: string, confined: boolean): CliSandbox {
  if (kind === 'docker') return 'docker';
  return confined ? 'local' : 'unconfined';
}

interface CliWorkspace {
  readonly copy: string;
  /** The checkout's instruction files, read from the copy before any sandbox process saw it. */
  readonly instructions: readonly RepoInstruction[];
  readonly sandbox: Sandbox;
  /** The deployment's (ISSUE_AGENT_MCP_CONFIG) and the checkout's MCP servers. */
  readonly mcp: McpConfig;
  /** How the environment was made; null for an unconfined sandbox (it has no setup phase). */
  readonly environment: EnvironmentRecord | null;
  close(): Promise<void>;
}

function setupFlag(raw: string | undefined): boolean {
  if (raw === undefined || raw === 'on') return true;
  if (raw === 'off') return false;
  throw new UsageError(`--setup must be on or off, got "${raw}"`);
}

/**
 * The checkout's `.github/issue-agent.yml` (its committed version: read from the copy, which no
 * sandbox process has touched yet, through the probe that refuses links). Only its environment keys
 * matter here; the rest (labels, who may trigger) is the App's.
 */
async function checkoutConfig(copy: string): Promise<RepoConfig> {
  const text = await hostProbe(copy).readText(REPO_CONFIG_PATH);
  let raw: unknown = null;
  if (text !== null) {
    try {
      raw = parseYaml(text) as unknown;
    } catch (error) {
      throw new UsageError(
        `${REPO_CONFIG_PATH} is not valid YAML: ${error instanceof Error ? (error.message.split('\n')[0] ?? '') : String(error)}`,
      );
    }
  }
  try {
    return parseRepoConfig(raw, { label: 'issue-agent', handle: '@issue-agent' });
  } catch (error) {
    if (error instanceof RepoConfigError)
      throw new UsageError(
        `${REPO_CONFIG_PATH} is invalid:\n${error.problems.map((p) => `  - ${p}`).join('\n')}`,
      );
    throw error;
  }
}

/** Setup failed: what ran, and the output of the command that failed (secrets removed). */
class SetupError extends Error {}

/** A copy of the checkout and a sandbox over it (see workspace-copy.ts). */
async function openWorkspace(
  repo: string,
  kind: CliSandbox,
  env: AgentEnv,
  trajectory: string,
  runId: string,
  setup: boolean,
): Promise<CliWorkspace> {
  let copy: Awaited<ReturnType<typeof copyCheckout>>;
  try {
    copy = await copyCheckout(repo, runId);
  } catch (error) {
    if (error instanceof WorkspaceCopyError) throw new UsageError(`${repo}: ${error.message}`);
    throw error;
  }
  const closeCopy = (): Promise<void> => copy.cleanup();
  try {
    const config = await checkoutConfig(copy.dir);
    const mcp = mergeMcp(env.mcp?.config ?? null, config.mcp);
    const instructions = await collectInstructions(probeInstructionSource(hostProbe(copy.dir)));
    const settings = { ...env.environment, setupEnabled: env.environment.setupEnabled && setup };
    const redactor = new Redactor([
      ...Object.values(settings.setupSecrets),
      ...(env.anthropicApiKey === null ? [] : [env.anthropicApiKey]),
    ]);
    const scrub = (text: string): string => redactor.redact(text);
    if (kind === 'unconfined') {
      const sandbox = await createSandbox({
        kind: 'local',
        workspace: copy.dir,
        path: env.sandboxPath,
        jobId: 'cli',
        limits: env.sandboxLimits,
      });
      return {
        copy: copy.dir,
        instructions,
        sandbox,
        mcp,
        environment: null,
        close: async () => {
          await sandbox.close();
          await closeCopy();
        },
      };
    }
    // The copy was made by this process and no sandbox process has seen it: reading it is safe.
    const plan = await planEnvironment(hostProbe(copy.dir), config);
    if (settings.setupEnabled && plan.setup.commands.length > 0) {
      process.stderr.write(
        `setup: ${plan.setup.commands.map((c) => c.command).join(' && ')} (${plan.setup.reason})\n`,
      );
    }
    const logger = pino({ level: env.logLevel, base: { run: runId } }, pino.destination(2));
    const prepared =
      kind === 'docker'
        ? await (
            await import('../environment/prepare.js')
          ).prepareEnvironment({
            workspace: copy.dir,
            probe: hostProbe(copy.dir),
            jobId: 'cli',
            // The cache is keyed by the checkout's path: entries never cross repositories.
            repoKey: `local:${repo}`,
            plan,
            settings,
            limits: env.sandboxLimits,
            mayStoreCache: true,
            scrub,
            logger,
          })
        : await (
            await import('../environment/prepare-local.js')
          ).prepareLocalEnvironment({
            workspace: copy.dir,
            plan,
            settings,
            path: env.sandboxPath,
            isolate: {
              hide: cliHidePaths({
                repo,
                copy: copy.dir,
                trajectory,
                runsDir: env.runsDir,
                home: process.env.HOME,
                path: env.sandboxPath,
              }),
              workspaceBytes: env.sandboxLimits.workspaceBytes ?? DEFAULT_LIMITS.workspaceBytes,
            },
            scrub,
            logger,
          });
    return {
      copy: copy.dir,
      instructions,
      mcp,
      sandbox: prepared.sandbox,
      environment: prepared.record,
      close: async () => {
        await prepared.sandbox.close();
        await prepared.close();
        await closeCopy();
      },
    };
  } catch (error) {
    await closeCopy();
    if (error instanceof EnvironmentSetupError) {
      const output = failedSetupOutput(error.record);
      throw new SetupError(
        `setup failed: ${error.message}${output === '' ? '' : `\n${output.trimEnd()}`}\n(fix the command, change setup: in ${REPO_CONFIG_PATH}, or pass --setup off)`,
      );
    }
    if (error instanceof Error && error.name === 'SandboxError' && kind === 'local')
      throw new UsageError(
        `${error.message}. Use --sandbox docker, or --sandbox unconfined to run without isolation (trusted work only).`,
      );
    throw error;
  }
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
  if (env.anthropicApiKey === null) {
    throw new UsageError(
      'ANTHROPIC_API_KEY is not set (point ANTHROPIC_BASE_URL at a compatible server to use another endpoint)',
    );
  }
  return new AnthropicModel({
    apiKey: env.anthropicApiKey,
    model: name,
    baseURL: env.anthropicBaseUrl ?? undefined,
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
  const ws = await openWorkspace(repo, kind, env, dir, conversationId, setup);
  try {
    const base = await newBaseState({
      task,
      sandbox: ws.sandbox,
      model: m.name,
      limits,
      testCommand,
      conversationId,
      workspacePath: repo,
      sandboxLabel: recordedKind(ws.sandbox.kind, kind === 'local'),
      environment: ws.environment,
      instructions: { ref: 'the checkout', commit: 'HEAD', files: [...ws.instructions] },
    });
    const store = FileEventStore.create(dir, base);
    if (ws.environment !== null) process.stderr.write(`${environmentLine(ws.environment)}\n`);
    return await execute(store, ws, m, env, values.json === true, repo);
  } finally {
    await ws.close();
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
  const kind = sandboxKind(values.sandbox ?? store.base.sandbox);
  const ws = await openWorkspace(repo, kind, env, store.location, store.base.conversationId, setup);
  if (ws.environment !== null) process.stderr.write(`${environmentLine(ws.environment)}\n`);
  try {
    return await execute(store, ws, m, env, values.json === true, repo);
  } finally {
    await ws.close();
  }
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
  ws: CliWorkspace,
  m: AnthropicModel,
  env: AgentEnv,
  json: boolean,
  repo: string,
): Promise<number> {
  const progressOut = json ? process.stderr : process.stdout;
  const printer = new ProgressPrinter((line) => progressOut.write(`${line}\n`));
  const controller = new AbortController();
  const onSignal = (signal: NodeJS.Signals): void => {
    controller.abort(`cancelled by ${signal}`);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const logger = pino(
    { level: env.logLevel, base: { conversation: store.base.conversationId } },
    pino.destination(2),
  );
  progressOut.write(`trajectory: ${store.location}\n`);
  const { sandbox } = ws;
  // Known secrets (the model key, MCP header values) never reach the trajectory.
  const redactor = new Redactor([
    ...(env.anthropicApiKey === null ? [] : [env.anthropicApiKey]),
    ...(env.mcp?.secrets ?? []),
  ]);
  let outcome: Outcome;
  try {
    const mcp = await startMcpServers(sandbox, ws.mcp, {
      allowCidrs: env.environment.allowCidrs,
      extraCaPem: env.environment.extraCaPem,
      logger,
    });
    outcome = await runAgent({
      store,
      sandbox,
      model: m,
      prices: env.prices,
      signal: controller.signal,
      logger,
      tools: new Map([...defaultTools(), ...mcp.tools.map((t) => [t.name, t] as const)]),
      notices: mcp.warnings.map((message) => ({ code: 'mcp_unavailable', message })),
      scrub: (text) => redactor.redact(text),
      onEvent: (e) => {
        printer.onEvent(e);
      },
    }).finally(() => mcp.close());
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
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
      }),
    );
  } else {
    console.log('');
    console.log(`outcome: ${outcome.outcome} — ${outcome.reason}`);
    if (outcome.diffStat !== '') console.log(outcome.diffStat);
    console.log(`change: ${applied}`);
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

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
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
    console.error(`issue-agent: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exitCode = EXIT.failed;
  },
);
