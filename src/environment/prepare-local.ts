import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { Logger } from 'pino';
import type { EnvironmentSettings } from '../config/agent-env.js';
import type { EnvironmentRecord } from '../events/schema.js';
import type { SetupCommandResult } from '../sandbox/docker/setup-phase.js';
import { LocalSandbox, LocalSetupFailedError, type LocalSetupSpec } from '../sandbox/local/local-sandbox.js';
import { localProxyEnv } from '../sandbox/local/setup-phase.js';
import { throwIfCancelled } from '../sandbox/sandbox.js';
import { egressRecord, mirrorsOf, startEgressSession, type EgressSession } from './egress.js';
import { EnvironmentSetupError } from './errors.js';
import { setupSecretsOf, untrustedSetupNote } from './setup-trust.js';
import { sourceFallback } from './python-from-source.js';
import type { EnvironmentPlan } from './plan.js';
import { DEFAULT_PATH, SANDBOX_WORKSPACE } from './detect-setup.js';

export { EnvironmentSetupError };

export interface PrepareLocalInput {
  /** The host copy of the repository, made before any sandbox process existed. */
  readonly workspace: string;
  readonly plan: EnvironmentPlan;
  readonly settings: EnvironmentSettings;
  /** PATH of the sandbox (the runner's tools: its Node, npm, Python). */
  readonly path: string;
  /** The isolated sandbox's confinement (see LocalSandboxOptions.isolate); setup needs it. */
  readonly isolate: {
    readonly hide: readonly string[];
    readonly mask?: readonly string[];
    readonly workspaceBytes?: number;
  };
  /** Nothing but the harness runs commands in it (eval grading): see DockerSandboxOptions.lazyAgentShell. */
  readonly lazyAgentShell?: boolean | undefined;
  /** Cancels the preparation: see PrepareInput.signal. */
  readonly signal?: AbortSignal | undefined;
  readonly logger?: Logger | undefined;
  /** Removes the job's secrets from text before it is recorded. */
  readonly scrub: (text: string) => string;
}

export interface PreparedLocalEnvironment {
  readonly sandbox: LocalSandbox;
  readonly record: EnvironmentRecord;
  /** Stops the agent phase's egress, if it has one. Call after the sandbox is closed. */
  close(): Promise<void>;
}

/** Output that says a setup command failed on the network rather than on the project. */
const NETWORK_FAILURE =
  /ECONNRESET|ETIMEDOUT|EAI_AGAIN|ECONNREFUSED|socket hang up|network (?:error|timeout)|502 Bad Gateway|503 Service Unavailable|504 Gateway|Connection reset|Read timed out|ReadTimeoutError|Temporary failure in name resolution|Max retries exceeded/i;

function isNetworkFailure(r: SetupCommandResult): boolean {
  return r.exitCode !== 0 && !r.timedOut && NETWORK_FAILURE.test(r.output);
}

const SETUP_RETRIES = 2;

/** What the record calls the environment of a local sandbox (it has no image). */
export const LOCAL_IMAGE = 'local (the runner’s own tools)';

/**
 * prepareEnvironment for the isolated local sandbox (the Action's default): the plan's setup
 * commands through the egress proxy, inside the sandbox, before its shells exist (see
 * sandbox/local/setup-phase.ts), and the environment record. Differences from Docker: no image (the
 * runner's tools, whose versions the record states: `runtime:` cannot change them here, a workflow
 * step before the action can), and no cache (a runner is used once; actions/cache in the workflow is
 * the place for that).
 */
export async function prepareLocalEnvironment(input: PrepareLocalInput): Promise<PreparedLocalEnvironment> {
  const started = Date.now();
  const { plan, settings, signal } = input;
  const log = input.logger;
  throwIfCancelled(signal);
  // Secrets only for a tree whose setup is the maintainers' (setup-trust.ts).
  const granted = setupSecretsOf(plan, settings.setupSecrets);
  const secretNames = granted.given;
  const missingSecrets = granted.missing;
  const secrets = granted.values;
  const toRun = settings.setupEnabled ? (plan.trust.commands ?? plan.setup.commands) : [];
  const fallback = sourceFallback(plan.setup.fromSource, plan.setup.commands, toRun);
  const testEnv = localTestEnv(plan.setup.testEnv, input.workspace, input.path);

  const mirrors = mirrorsOf(settings);
  const mirrorEnv = mirrors.env;
  const setupHosts = unique([...plan.setupAllowHosts, ...settings.allowHosts, ...mirrors.hosts]);
  const agentHosts = unique(plan.agentAllowHosts);
  let egress: EgressSession | null = null;
  if (toRun.length > 0 || agentHosts.length > 0) {
    egress = await startEgressSession({
      allowHosts: toRun.length > 0 ? setupHosts : agentHosts,
      allowCidrs: settings.allowCidrs,
      allowedPorts: mirrors.ports,
      logger: log,
    });
  }

  const attempts = new Map<string, number>();
  const runtimes = await runnerRuntimes(plan, input.path);
  const record = (results: readonly SetupCommandResult[]): EnvironmentRecord => ({
    image: LOCAL_IMAGE,
    runtimes,
    setup: {
      source: plan.setup.source,
      reason: [
        !settings.setupEnabled && plan.setup.commands.length > 0
          ? `${plan.setup.reason}; setup is turned off for this run (ISSUE_AGENT_SETUP=off)`
          : plan.setup.reason,
        ...fallback.notes(results),
        ...(missingSecrets.length > 0 ? [`setup secrets not provided: ${missingSecrets.join(', ')}`] : []),
      ].join('; '),
      commands: fallback.withFallback(plan.trust.commands ?? plan.setup.commands).map((c) => {
        const r = results.find((x) => x.command === c.command);
        return {
          command: input.scrub(c.command),
          reason: c.reason,
          exitCode: r?.exitCode ?? null,
          timedOut: r?.timedOut ?? false,
          durationMs: r?.durationMs ?? 0,
          attempts: attempts.get(c.command) ?? 0,
          output: input.scrub(r?.output ?? ''),
        };
      }),
      testEnv: { ...testEnv },
      secrets: secretNames,
      ...(plan.setup.commands.length > 0 ? { trust: granted.record } : {}),
      ...fallback.recordField(results),
      cache: { status: 'disabled', key: null, note: 'the local sandbox keeps no environment cache' },
      durationMs: Date.now() - started,
    },
    egress: {
      setup: toRun.length > 0 && egress !== null ? egressRecord(egress, setupHosts) : null,
      agentAllowHosts: agentHosts,
    },
  });

  // The CA bundle's variables are added by the sandbox, which knows its HOME (see LocalSetupSpec).
  const spec: LocalSetupSpec = {
    ...(egress === null ? {} : { egressDir: egress.dir }),
    commands: toRun.map((c) => c.command),
    env: {
      ...plan.env,
      ...testEnv,
      ...localProxyEnv(),
      ...mirrorEnv,
      ...plan.trust.setupEnv,
      ...secrets,
    },
    secretValues: Object.values(secrets),
    ...(settings.extraCaPem === null ? {} : { caPem: Buffer.from(settings.extraCaPem) }),
    timeoutMs: settings.setupTimeoutMs,
    retries: SETUP_RETRIES,
    retryable: isNetworkFailure,
    fallback: fallback.decide,
    outputs: plan.setup.outputs,
    agentEgress: agentHosts.length > 0,
    onCommand: (r, attempt) => {
      attempts.set(r.command, attempt);
      log?.info({ command: input.scrub(r.command), exitCode: r.exitCode, attempt }, 'setup command');
    },
  };

  let sandbox: LocalSandbox;
  try {
    sandbox = await LocalSandbox.create({
      workspace: input.workspace,
      path: input.path,
      isolate: input.isolate,
      env: {
        ...plan.env,
        ...testEnv,
        ...(agentHosts.length > 0 ? { ...localProxyEnv(), ...mirrorEnv } : {}),
      },
      setup: spec,
      lazyAgentShell: input.lazyAgentShell,
      signal,
    });
  } catch (error) {
    if (egress !== null) await egress.close();
    if (error instanceof LocalSetupFailedError) {
      throw new EnvironmentSetupError(
        input.scrub(error.message + untrustedSetupNote(granted.record)),
        record(error.results),
        error.transient,
        {
          cause: error,
        },
      );
    }
    throw error;
  }
  if (signal?.aborted === true) {
    await sandbox.close();
    if (egress !== null) await egress.close();
    throwIfCancelled(signal);
  }
  const done = record(sandbox.setupReport?.results ?? []);
  // The setup proxy ends with setup; the agent phase gets its own allowlist on the same socket, or
  // none: then the socket is gone and nothing can leave the sandbox.
  let agentEgress: EgressSession | null = null;
  if (egress !== null) {
    if (agentHosts.length === 0) {
      await egress.close();
    } else {
      if (toRun.length > 0) await egress.reopen(agentHosts);
      agentEgress = egress;
      log?.warn({ hosts: agentHosts }, 'the agent phase may reach an allowlist through the proxy');
    }
  }
  return {
    sandbox,
    record: done,
    close: async () => {
      if (agentEgress !== null) await agentEgress.close();
    },
  };
}

/**
 * The plan's runtimes as the local sandbox has them: the versions on its PATH, whatever the
 * repository asked for (the Action cannot change the runner's Node; a setup-node step can).
 */
async function runnerRuntimes(plan: EnvironmentPlan, path: string): Promise<EnvironmentRecord['runtimes']> {
  const all = plan.runtimes.map(async (r) => {
    if (r.language === 'node') {
      const v = (await toolVersion('node', ['--version'], path)) ?? process.version;
      return {
        language: r.language,
        version: v.replace(/^v/, ''),
        requested: r.requested,
        source: 'runner',
        note: `the Action's local sandbox runs the runner's Node ${v}; use actions/setup-node before this action to pick a version`,
      };
    }
    if (r.language === 'python') {
      const v = (await toolVersion('python3', ['--version'], path))?.replace(/^Python\s+/i, '') ?? 'unknown';
      return {
        language: r.language,
        version: v,
        requested: r.requested,
        source: 'runner',
        note: `the Action's local sandbox runs the runner's Python ${v}; use actions/setup-python before this action to pick a version`,
      };
    }
    return { ...r, source: 'runner', note: "the Action's local sandbox uses the runner's own tools" };
  });
  return Promise.all(all);
}

const execFileAsync = promisify(execFile);

/**
 * Versions asked at most once a minute: an eval asks for two sandboxes per task, and each ask is a
 * Python or Node start; a long-lived worker still notices a tool upgraded under it.
 */
const versions = new Map<string, { readonly at: number; readonly version: Promise<string | null> }>();
const VERSION_TTL_MS = 60_000;

/** The first line a tool prints for its version, or null. A child of its own, never a wait on the event loop. */
function toolVersion(tool: string, args: readonly string[], path: string): Promise<string | null> {
  const key = JSON.stringify([tool, args, path]);
  const known = versions.get(key);
  if (known !== undefined && Date.now() - known.at < VERSION_TTL_MS) return known.version;
  const version = askVersion(tool, args, path);
  versions.set(key, { at: Date.now(), version });
  return version;
}

async function askVersion(tool: string, args: readonly string[], path: string): Promise<string | null> {
  try {
    const { stdout } = await execFileAsync(tool, [...args], {
      env: { PATH: path },
      encoding: 'utf8',
      timeout: 10_000,
    });
    const line = stdout.trim().split('\n')[0] ?? '';
    return line === '' ? null : line;
  } catch {
    return null;
  }
}

function unique(xs: readonly string[]): string[] {
  return [...new Set(xs)];
}

/**
 * The plan's test variables are written for the images (the workspace at /workspace, their PATH):
 * in the local sandbox the workspace is the host folder and the PATH is the runner's.
 */
export function localTestEnv(
  testEnv: Readonly<Record<string, string>>,
  workspace: string,
  path: string,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(testEnv)) {
    let v = value.split(`${SANDBOX_WORKSPACE}/`).join(`${workspace}/`);
    if (name === 'PATH' && v.endsWith(`:${DEFAULT_PATH}`)) v = `${v.slice(0, -DEFAULT_PATH.length)}${path}`;
    out[name] = v;
  }
  return out;
}
