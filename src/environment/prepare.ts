import { existsSync } from 'node:fs';
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import type Docker from 'dockerode';
import type { Logger } from 'pino';
import type { EnvironmentSettings } from '../config/agent-env.js';
import type { EnvironmentRecord } from '../events/schema.js';
import type { WorkspaceProbe } from '../testing/detect-test-command.js';
import { DockerSandbox, SetupFailedError, type DockerSetupSpec } from '../sandbox/docker/docker-sandbox.js';
import { throwIfCancelled } from '../sandbox/sandbox.js';
import { proxyEnv, type SetupCommandResult } from '../sandbox/docker/setup-phase.js';
import type { SandboxLimits } from '../sandbox/docker/container-spec.js';
import { EnvironmentCache } from './env-cache.js';
import { EnvironmentSetupError } from './errors.js';
import { setupSecretsOf, untrustedSetupNote } from './setup-trust.js';
import { sourceFallback } from './python-from-source.js';

export { EnvironmentSetupError };
import { egressRecord, mirrorsOf, startEgressSession, type EgressSession, type Mirrors } from './egress.js';
import type { EnvironmentPlan } from './plan.js';

export interface PrepareInput {
  /** The host copy of the repository, made before any sandbox process existed. */
  readonly workspace: string;
  /**
   * The copy is a `.git` only, checked out inside the container (the worker's way: no file of the
   * repository is written on the host). `probe` then reads the commit's tree from git.
   */
  readonly checkout?: boolean | undefined;
  /** The repository's files at the commit, as a probe (cache key inputs, committed outputs). */
  readonly probe: WorkspaceProbe;
  readonly jobId: string;
  /** Names the repository for the cache (`github:<repo id>`, `local:<path>`): entries never cross it. */
  readonly repoKey: string;
  readonly plan: EnvironmentPlan;
  readonly settings: EnvironmentSettings;
  readonly limits?: SandboxLimits | undefined;
  /**
   * Whether this job may write a cache entry: only when the workspace is the base branch's tree (a
   * follow-up round's tree holds the agent's own earlier changes, which must not reach other jobs).
   */
  readonly mayStoreCache: boolean;
  readonly docker?: Docker | undefined;
  /**
   * Started containers to take one from instead of a cold start (the worker's warm pool), for a job
   * that needs nothing a warm container lacks: no setup to run, no cached environment to restore,
   * no egress, no variables of its own (a warm container's environment was fixed at its start).
   */
  readonly pool?: SandboxPool | undefined;
  /**
   * Names the repository for the warm pool's prepared containers, unique per installation; unset:
   * the job neither takes one nor leaves one prepared.
   */
  readonly poolRepository?: string | undefined;
  /** Nothing but the harness runs commands in it (eval grading): see DockerSandboxOptions.lazyAgentShell. */
  readonly lazyAgentShell?: boolean | undefined;
  /**
   * Cancels the preparation (a Ctrl-C, an `@agent stop`): the step running stops, everything made
   * for it so far (container, egress proxy, its folders) is removed, and prepareEnvironment throws
   * SandboxCancelledError.
   */
  readonly signal?: AbortSignal | undefined;
  readonly logger?: Logger | undefined;
  /** Removes the job's secrets from text before it is recorded. */
  readonly scrub: (text: string) => string;
}

/** What prepareEnvironment needs of a warm pool (see sandbox/docker/warm-pool.ts). */
export interface SandboxPool {
  serves(image: string): boolean;
  acquire(options: {
    readonly workspace: string;
    readonly checkout?: boolean | undefined;
    readonly jobId: string;
    readonly image: string;
    readonly repository?: string | undefined;
    readonly env?: Readonly<Record<string, string>> | undefined;
    readonly restore?:
      | {
          readonly path: string | null;
          readonly stream: () => Readable;
          readonly afterCopy: boolean;
        }
      | undefined;
    readonly exclude?: readonly string[] | undefined;
  }): Promise<DockerSandbox>;
}

export interface PreparedEnvironment {
  readonly sandbox: DockerSandbox;
  readonly record: EnvironmentRecord;
  /** Stops the agent phase's egress, if it has one. Call after the sandbox is closed. */
  close(): Promise<void>;
}

/** Output that says a setup command failed on the network rather than on the project. */
const NETWORK_FAILURE =
  /ECONNRESET|ETIMEDOUT|EAI_AGAIN|ECONNREFUSED|socket hang up|network (?:error|timeout)|502 Bad Gateway|503 Service Unavailable|504 Gateway|Connection reset|Read timed out|ReadTimeoutError|Temporary failure in name resolution|Max retries exceeded/i;

export function isNetworkFailure(r: SetupCommandResult): boolean {
  return r.exitCode !== 0 && !r.timedOut && NETWORK_FAILURE.test(r.output);
}

const SETUP_RETRIES = 2;

/**
 * Makes the job's sandbox with its environment: the image and runtime of the plan, the cached
 * environment when one matches, otherwise the setup commands through the egress proxy, then the
 * container as the agent will see it (no process of setup left, no setup secret anywhere, the
 * setup's outputs excluded from git snapshots).
 */
export async function prepareEnvironment(input: PrepareInput): Promise<PreparedEnvironment> {
  const started = Date.now();
  const { signal } = input;
  throwIfCancelled(signal);
  const decision = await decideSetup(input);
  const hosts = egressHosts(input);
  throwIfCancelled(signal);
  const egress = await startSetupEgress(input, decision, hosts);
  const attempts = new Map<string, number>();
  const cache = { status: cacheStatusBefore(input, decision) };
  const facts: RecordFacts = { input, decision, hosts, egress, attempts, started };
  const spec = await setupSpec(facts, cache);
  let sandbox: DockerSandbox;
  try {
    sandbox = await startSandbox(input, decision, hosts, spec, egress);
  } catch (error) {
    if (egress !== null) await egress.close();
    if (error instanceof SetupFailedError) {
      throw new EnvironmentSetupError(
        // On a tree that is not trusted, the message says what setup went without, and why.
        input.scrub(error.message + untrustedSetupNote(decision.granted.record)),
        environmentRecord(facts, error.results, cache.status),
        // No `cause`: it carries the same message, which pino's error serializer would repeat.
        error.transient,
      );
    }
    throw error;
  } finally {
    if (decision.hit !== null) decision.hit.stream().destroy();
  }
  if (signal?.aborted === true) {
    await sandbox.close();
    if (egress !== null) await egress.close();
    throwIfCancelled(signal);
  }
  const results = sandbox.setupReport?.results ?? [];
  if (sandbox.setupReport?.captureError != null) {
    cache.status = {
      status: 'not-stored',
      key: decision.key,
      note: `could not keep it: ${sandbox.setupReport.captureError}`,
    };
  }
  const record = withMissingSecrets(
    environmentRecord(facts, results, cache.status),
    decision.granted.missing,
  );
  const agentEgress = await handOverEgress(egress, hosts.agent, decision.toRun.length > 0, input.logger);
  return {
    sandbox,
    record,
    close: async () => {
      if (agentEgress !== null) await agentEgress.close();
    },
  };
}

type SetupCommand = EnvironmentPlan['setup']['commands'][number];
type CacheHit = NonNullable<Awaited<ReturnType<EnvironmentCache['open']>>>;
type CacheStatus = EnvironmentRecord['setup']['cache'];

/** What the setup phase will do, decided before anything is started. */
interface SetupDecision {
  /** The setup secrets, by the plan's trust (setup-trust.ts). */
  readonly granted: ReturnType<typeof setupSecretsOf>;
  readonly cache: EnvironmentCache | null;
  /** The cache key of this environment; null with no cache or no setup command. */
  readonly key: string | null;
  /** The cached environment with that key, restored instead of running setup. */
  readonly hit: CacheHit | null;
  readonly fallback: ReturnType<typeof sourceFallback>;
  /** This job may write a cache entry (base branch's tree, trusted setup). */
  readonly mayStore: boolean;
  /** The commands that run: none on a cache hit or with setup off. */
  readonly toRun: readonly SetupCommand[];
}

/** The secrets, the cache lookup and the commands to run: nothing started yet. */
async function decideSetup(input: PrepareInput): Promise<SetupDecision> {
  const { plan, settings } = input;
  // Secrets only for a tree whose setup is the maintainers' (setup-trust.ts).
  const granted = setupSecretsOf(plan, settings.setupSecrets);
  const cache =
    plan.cache && settings.cacheDir !== null
      ? new EnvironmentCache(settings.cacheDir, settings.cacheMaxBytes)
      : null;
  // What runs (with install scripts off on a tree that is not trusted), and what keys the cache
  // (as planned, so such a round finds the entry its base branch's job stored).
  const planned = settings.setupEnabled ? plan.setup.commands : [];
  const commands = settings.setupEnabled ? (plan.trust.commands ?? plan.setup.commands) : [];
  const key = cache !== null && planned.length > 0 ? await cacheKey(input, granted, planned) : null;
  const hit = cache !== null && key !== null ? await cache.open(input.repoKey, key) : null;
  return {
    granted,
    cache,
    key,
    hit,
    fallback: sourceFallback(plan.setup.fromSource, planned, commands),
    // What setup without the maintainers' inputs made must never reach another job.
    mayStore: input.mayStoreCache && plan.trust.secrets,
    toRun: hit === null ? commands : [],
  };
}

async function cacheKey(
  input: PrepareInput,
  granted: SetupDecision['granted'],
  planned: readonly SetupCommand[],
): Promise<string> {
  const { plan, settings } = input;
  return EnvironmentCache.key(input.repoKey, {
    image: await imageId(input.docker, plan.image),
    runtimes: plan.runtimes.map((r) => `${r.language}@${r.version}`),
    commands: planned.map((c) => c.command),
    env: plan.env,
    testEnv: plan.setup.testEnv,
    // The names setup would get on a trusted tree: an untrusted round reads the entry its base
    // branch's job stored (it never stores one of its own).
    secrets: [...granted.given, ...granted.withheld],
    mirrors: [settings.npmRegistry, settings.pipIndexUrl],
    inputs: await hashInputs(input.probe, plan.setup.inputs),
    // Versions nothing pins: one entry per window, so what a job reuses is at most that old.
    ...(plan.setup.unpinned === true
      ? { unpinnedWindow: Math.floor(Date.now() / settings.cacheUnpinnedMs) }
      : {}),
  });
}

/** Where each phase may reach through the egress proxy, and what sends package managers there. */
interface EgressHosts {
  readonly setup: readonly string[];
  readonly agent: readonly string[];
  readonly mirrors: Mirrors;
  /** The deployment adds a CA (ISSUE_AGENT_EXTRA_CA): the proxy variables point at it. */
  readonly withCa: boolean;
}

function egressHosts({ plan, settings }: PrepareInput): EgressHosts {
  const mirrors = mirrorsOf(settings);
  return {
    setup: unique([...plan.setupAllowHosts, ...settings.allowHosts, ...mirrors.hosts]),
    agent: unique(plan.agentAllowHosts),
    mirrors,
    withCa: settings.extraCaPem !== null,
  };
}

/** The proxy for setup's allowlist (or straight away the agent's, when setup runs nothing), if any. */
async function startSetupEgress(
  input: PrepareInput,
  decision: SetupDecision,
  hosts: EgressHosts,
): Promise<EgressSession | null> {
  const setupRuns = decision.toRun.length > 0;
  if (!setupRuns && hosts.agent.length === 0) return null;
  return startEgressSession({
    allowHosts: setupRuns ? hosts.setup : hosts.agent,
    allowCidrs: input.settings.allowCidrs,
    allowedPorts: hosts.mirrors.ports,
    logger: input.logger,
  });
}

/** What the environment record is made of, besides the results and the cache's outcome. */
interface RecordFacts {
  readonly input: PrepareInput;
  readonly decision: SetupDecision;
  readonly hosts: EgressHosts;
  readonly egress: EgressSession | null;
  /** How often each setup command was tried, as the setup phase reports it. */
  readonly attempts: Map<string, number>;
  readonly started: number;
}

/** The trajectory's record of how the environment was made (or how far it got). */
function environmentRecord(
  facts: RecordFacts,
  results: readonly SetupCommandResult[],
  cacheStatus: CacheStatus,
): EnvironmentRecord {
  const { input, decision, egress, attempts } = facts;
  const { plan, settings } = input;
  const { fallback, granted } = decision;
  return {
    image: plan.image,
    runtimes: plan.runtimes.map((r) => ({ ...r })),
    setup: {
      source: plan.setup.source,
      reason:
        decision.hit !== null
          ? `${plan.setup.reason}; a cached environment with the same inputs was reused, so setup did not run`
          : !settings.setupEnabled && plan.setup.commands.length > 0
            ? `${plan.setup.reason}; setup is turned off for this deployment (ISSUE_AGENT_SETUP=off)`
            : [plan.setup.reason, ...fallback.notes(results)].join('; '),
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
      testEnv: { ...plan.setup.testEnv },
      secrets: granted.given,
      ...(plan.setup.commands.length > 0 ? { trust: granted.record } : {}),
      ...fallback.recordField(results),
      cache: cacheStatus,
      durationMs: Date.now() - facts.started,
    },
    egress: {
      setup: decision.toRun.length > 0 && egress !== null ? egressRecord(egress, facts.hosts.setup) : null,
      agentAllowHosts: [...facts.hosts.agent],
    },
  };
}

/** The cache's part of the record as far as it is known before setup runs. */
function cacheStatusBefore(input: PrepareInput, decision: SetupDecision): CacheStatus {
  const { cache, key, hit } = decision;
  if (cache === null) {
    return {
      status: 'disabled',
      key: null,
      ...(input.plan.cache ? {} : { note: 'cache: false in the repository config' }),
    };
  }
  if (hit !== null) return { status: 'hit', key };
  if (key !== null && !decision.mayStore) {
    return {
      status: 'not-stored',
      key,
      note: input.mayStoreCache
        ? 'setup on a tree that is not the base branch’s never writes the cache'
        : 'a follow-up round never writes the cache',
    };
  }
  return { status: 'miss', key };
}

/** The setup phase as the Docker sandbox runs it; `capture` writes the cache's outcome into `cache`. */
async function setupSpec(facts: RecordFacts, cache: { status: CacheStatus }): Promise<DockerSetupSpec> {
  const { input, decision, hosts, egress } = facts;
  const { plan, settings } = input;
  const { hit, fallback } = decision;
  const secrets = decision.granted.values;
  return {
    ...(egress === null ? {} : { egressDir: egress.dir }),
    ...(hit === null ? {} : { restore: hit.stream }),
    ...(hit?.path == null ? {} : { restoreFile: hit.path }),
    commands: decision.toRun.map((c) => c.command),
    env: {
      ...plan.env,
      ...plan.setup.testEnv,
      ...proxyEnv(hosts.withCa),
      ...hosts.mirrors.env,
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
    outputsTracked: await anyExists(input.probe, plan.setup.outputs),
    agentEgress: hosts.agent.length > 0,
    onCommand: (r, attempt) => {
      facts.attempts.set(r.command, attempt);
    },
    ...captureInto(input, decision, cache),
  };
}

type Capture = NonNullable<DockerSetupSpec['capture']>;

/** Stores what setup made in the cache, when this job may: a new key, and nothing restored. */
function captureInto(
  input: PrepareInput,
  { cache, key, hit, mayStore, fallback }: SetupDecision,
  into: { status: CacheStatus },
): { capture?: Capture } {
  if (cache === null || key === null || hit !== null || !mayStore) return {};
  return {
    capture: async (pack: Parameters<Capture>[0]) => {
      if (fallback.taken() !== null) {
        // A stand-in for the install: the next job tries the install again.
        into.status = {
          status: 'not-stored',
          key,
          note: 'the project runs from source, which is never kept',
        };
        return;
      }
      const size = await cache.store(input.repoKey, key, pack);
      into.status =
        size === null
          ? { status: 'not-stored', key, note: 'setup produced none of the paths a cache keeps' }
          : { status: 'stored', key };
    },
  };
}

/**
 * A started container from the warm pool when the job needs nothing one lacks, else a new one with
 * its setup phase. Throws SetupFailedError when setup failed.
 */
async function startSandbox(
  input: PrepareInput,
  decision: SetupDecision,
  hosts: EgressHosts,
  spec: DockerSetupSpec,
  egress: EgressSession | null,
): Promise<DockerSandbox> {
  const { plan, signal } = input;
  const { hit } = decision;
  // A started container serves a job whose environment needs no command and no network: nothing
  // to set up, or a cached environment to unpack, and the variables a new container would get at
  // creation given to its shells instead (DockerSandbox.useEnvironment).
  const warm =
    input.pool?.serves(plan.image) === true && spec.commands.length === 0 && egress === null
      ? input.pool
      : null;
  try {
    if (warm === null) return await createSandbox(input, hosts, spec);
    const sandbox = await warm.acquire({
      workspace: input.workspace,
      checkout: input.checkout,
      jobId: input.jobId,
      image: plan.image,
      ...(input.poolRepository === undefined ? {} : { repository: input.poolRepository }),
      env: { ...plan.env, ...plan.setup.testEnv },
      ...(hit === null
        ? {}
        : { restore: { path: hit.path, stream: hit.stream, afterCopy: spec.outputsTracked ?? true } }),
      exclude: plan.setup.outputs,
    });
    input.logger?.info({ image: plan.image }, 'sandbox from the warm pool');
    if (signal?.aborted === true) {
      await sandbox.close();
      throwIfCancelled(signal);
    }
    return sandbox;
  } catch (error) {
    // The entry was evicted between the lookup and the mount: restore from the stream opened then.
    // (The pool reads the stream, never the file.)
    if (
      warm !== null ||
      spec.restoreFile === undefined ||
      error instanceof SetupFailedError ||
      existsSync(spec.restoreFile)
    )
      throw error;
    return createSandbox(input, hosts, { ...spec, restoreFile: undefined });
  }
}

function createSandbox(
  input: PrepareInput,
  hosts: EgressHosts,
  setup: DockerSetupSpec,
): Promise<DockerSandbox> {
  const { plan } = input;
  return DockerSandbox.create({
    workspace: input.workspace,
    checkout: input.checkout,
    jobId: input.jobId,
    image: plan.image,
    ...(input.docker === undefined ? {} : { docker: input.docker }),
    ...(input.limits === undefined ? {} : { limits: input.limits }),
    env: {
      ...plan.env,
      ...plan.setup.testEnv,
      ...(hosts.agent.length > 0 ? { ...proxyEnv(hosts.withCa), ...hosts.mirrors.env } : {}),
    },
    setup,
    lazyAgentShell: input.lazyAgentShell,
    signal: input.signal,
    ...(input.logger === undefined ? {} : { logger: input.logger }),
  });
}

function withMissingSecrets(record: EnvironmentRecord, missing: readonly string[]): EnvironmentRecord {
  if (missing.length === 0) return record;
  return {
    ...record,
    setup: {
      ...record.setup,
      reason: `${record.setup.reason}; setup secrets not provided by this deployment: ${missing.join(', ')}`,
    },
  };
}

/**
 * The setup proxy ends with setup. The agent phase gets a proxy of its own allowlist on the same
 * socket, or none: then the socket is gone and nothing can leave the container.
 */
async function handOverEgress(
  egress: EgressSession | null,
  agentHosts: readonly string[],
  setupRan: boolean,
  log: Logger | undefined,
): Promise<EgressSession | null> {
  if (egress === null) return null;
  if (agentHosts.length === 0) {
    await egress.close();
    return null;
  }
  if (setupRan) await egress.reopen([...agentHosts]);
  log?.warn({ hosts: agentHosts }, 'the agent phase may reach an allowlist through the proxy');
  return egress;
}

async function imageId(docker: Docker | undefined, image: string): Promise<string> {
  const { default: DockerClient } = await import('dockerode');
  const d = docker ?? new DockerClient();
  try {
    return (await d.getImage(image).inspect()).Id;
  } catch {
    return image;
  }
}

async function anyExists(probe: WorkspaceProbe, paths: readonly string[]): Promise<boolean> {
  for (const p of paths) if (await probe.exists(p)) return true;
  return false;
}

async function hashInputs(
  probe: WorkspaceProbe,
  paths: readonly string[],
): Promise<[string, string | null][]> {
  const out: [string, string | null][] = [];
  for (const p of [...paths].sort()) {
    const text = await probe.readText(p);
    out.push([p, text === null ? null : createHash('sha256').update(text).digest('hex')]);
  }
  return out;
}

function unique(xs: readonly string[]): string[] {
  return [...new Set(xs)];
}
