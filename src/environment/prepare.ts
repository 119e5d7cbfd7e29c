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
import { egressRecord, mirrorsOf, startEgressSession, type EgressSession } from './egress.js';
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
  const { plan, settings, signal } = input;
  const log = input.logger;
  const docker = input.docker;
  throwIfCancelled(signal);
  // Secrets only for a tree whose setup is the maintainers' (setup-trust.ts).
  const granted = setupSecretsOf(plan, settings.setupSecrets);
  const secretNames = granted.given;
  const missingSecrets = granted.missing;
  const secrets = granted.values;

  const cache =
    plan.cache && settings.cacheDir !== null
      ? new EnvironmentCache(settings.cacheDir, settings.cacheMaxBytes)
      : null;
  // What runs (with install scripts off on a tree that is not trusted), and what keys the cache
  // (as planned, so such a round finds the entry its base branch's job stored).
  const planned = settings.setupEnabled ? plan.setup.commands : [];
  const commands = settings.setupEnabled ? (plan.trust.commands ?? plan.setup.commands) : [];
  let key: string | null = null;
  if (cache !== null && planned.length > 0) {
    key = EnvironmentCache.key(input.repoKey, {
      image: await imageId(docker, plan.image),
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
  const hit = cache !== null && key !== null ? await cache.open(input.repoKey, key) : null;
  const fallback = sourceFallback(plan.setup.fromSource, planned, commands);
  // What setup without the maintainers' inputs made must never reach another job.
  const mayStore = input.mayStoreCache && plan.trust.trusted;
  const toRun = hit === null ? commands : [];

  const withCa = settings.extraCaPem !== null;
  const mirrors = mirrorsOf(settings);
  const mirrorEnv = mirrors.env;
  const setupHosts = unique([...plan.setupAllowHosts, ...settings.allowHosts, ...mirrors.hosts]);
  const agentHosts = unique(plan.agentAllowHosts);
  const needsEgress = toRun.length > 0 || agentHosts.length > 0;
  let egress: EgressSession | null = null;
  throwIfCancelled(signal);
  if (needsEgress) {
    egress = await startEgressSession({
      allowHosts: toRun.length > 0 ? setupHosts : agentHosts,
      allowCidrs: settings.allowCidrs,
      allowedPorts: mirrors.ports,
      logger: log,
    });
  }

  const attempts = new Map<string, number>();
  const record = (
    results: readonly SetupCommandResult[],
    cacheStatus: EnvironmentRecord['setup']['cache'],
  ): EnvironmentRecord => ({
    image: plan.image,
    runtimes: plan.runtimes.map((r) => ({ ...r })),
    setup: {
      source: plan.setup.source,
      reason:
        hit !== null
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
      secrets: secretNames,
      ...(plan.setup.commands.length > 0 ? { trust: granted.record } : {}),
      ...fallback.recordField(results),
      cache: cacheStatus,
      durationMs: Date.now() - started,
    },
    egress: {
      setup: toRun.length > 0 && egress !== null ? egressRecord(egress, setupHosts) : null,
      agentAllowHosts: agentHosts,
    },
  });

  let stored: EnvironmentRecord['setup']['cache'] =
    cache === null
      ? {
          status: 'disabled',
          key: null,
          ...(plan.cache ? {} : { note: 'cache: false in the repository config' }),
        }
      : hit !== null
        ? { status: 'hit', key }
        : { status: 'miss', key };
  const spec: DockerSetupSpec = {
    ...(egress === null ? {} : { egressDir: egress.dir }),
    ...(hit === null ? {} : { restore: hit.stream }),
    ...(hit?.path == null ? {} : { restoreFile: hit.path }),
    commands: toRun.map((c) => c.command),
    env: {
      ...plan.env,
      ...plan.setup.testEnv,
      ...proxyEnv(withCa),
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
    outputsTracked: await anyExists(input.probe, plan.setup.outputs),
    agentEgress: agentHosts.length > 0,
    onCommand: (r, attempt) => {
      attempts.set(r.command, attempt);
    },
    ...(cache !== null && key !== null && hit === null && mayStore
      ? {
          capture: async (pack: Parameters<NonNullable<DockerSetupSpec['capture']>>[0]) => {
            if (fallback.taken() !== null) {
              // A stand-in for the install: the next job tries the install again.
              stored = {
                status: 'not-stored',
                key,
                note: 'the project runs from source, which is never kept',
              };
              return;
            }
            const size = await cache.store(input.repoKey, key, pack);
            stored =
              size === null
                ? { status: 'not-stored', key, note: 'setup produced none of the paths a cache keeps' }
                : { status: 'stored', key };
          },
        }
      : {}),
  };
  if (cache !== null && key !== null && hit === null && !mayStore) {
    stored = {
      status: 'not-stored',
      key,
      note: input.mayStoreCache
        ? 'setup on a tree that is not the base branch’s never writes the cache'
        : 'a follow-up round never writes the cache',
    };
  }

  const create = (setup: DockerSetupSpec): Promise<DockerSandbox> =>
    DockerSandbox.create({
      workspace: input.workspace,
      checkout: input.checkout,
      jobId: input.jobId,
      image: plan.image,
      ...(docker === undefined ? {} : { docker }),
      ...(input.limits === undefined ? {} : { limits: input.limits }),
      env: {
        ...plan.env,
        ...plan.setup.testEnv,
        ...(agentHosts.length > 0 ? { ...proxyEnv(withCa), ...mirrorEnv } : {}),
      },
      setup,
      lazyAgentShell: input.lazyAgentShell,
      signal,
      ...(log === undefined ? {} : { logger: log }),
    });
  // A started container serves a job whose environment needs no command and no network: nothing
  // to set up, or a cached environment to unpack, and the variables a new container would get at
  // creation given to its shells instead (DockerSandbox.useEnvironment).
  const warm =
    input.pool?.serves(plan.image) === true && spec.commands.length === 0 && egress === null
      ? input.pool
      : null;
  let sandbox: DockerSandbox;
  try {
    try {
      if (warm !== null) {
        sandbox = await warm.acquire({
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
        log?.info({ image: plan.image }, 'sandbox from the warm pool');
        if (signal?.aborted === true) {
          await sandbox.close();
          throwIfCancelled(signal);
        }
      } else {
        sandbox = await create(spec);
      }
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
      sandbox = await create({ ...spec, restoreFile: undefined });
    }
  } catch (error) {
    if (egress !== null) await egress.close();
    if (error instanceof SetupFailedError) {
      throw new EnvironmentSetupError(
        // On a tree that is not trusted, the message says what setup went without, and why.
        input.scrub(error.message + untrustedSetupNote(granted.record)),
        record(error.results, stored),
        // No `cause`: it carries the same message, which pino's error serializer would repeat.
        error.transient,
      );
    }
    throw error;
  } finally {
    if (hit !== null) hit.stream().destroy();
  }
  if (signal?.aborted === true) {
    await sandbox.close();
    if (egress !== null) await egress.close();
    throwIfCancelled(signal);
  }
  const results = sandbox.setupReport?.results ?? [];
  if (sandbox.setupReport?.captureError != null) {
    stored = { status: 'not-stored', key, note: `could not keep it: ${sandbox.setupReport.captureError}` };
  }
  let done = record(results, stored);
  if (missingSecrets.length > 0) {
    done = {
      ...done,
      setup: {
        ...done.setup,
        reason: `${done.setup.reason}; setup secrets not provided by this deployment: ${missingSecrets.join(', ')}`,
      },
    };
  }
  // The setup proxy ends with setup. The agent phase gets a proxy of its own allowlist on the same
  // socket, or none: then the socket is gone and nothing can leave the container.
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
