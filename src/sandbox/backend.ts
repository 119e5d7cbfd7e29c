import type { Logger } from 'pino';
import type { EnvironmentSettings } from '../config/agent-env.js';
import type { SandboxPool } from '../environment/prepare.js';
import type { EnvironmentPlan } from '../environment/plan.js';
import type { EnvironmentRecord } from '../events/schema.js';
import type { WorkspaceProbe } from '../testing/detect-test-command.js';
import type { SandboxLimits } from './docker/container-spec.js';
import type { Sandbox } from './sandbox.js';

/**
 * Where the agent's commands run, as the entry points see it: a host folder and an environment
 * plan in, a sandbox with the plan's setup phase behind it out. Each backend is a folder of
 * src/sandbox (docker/, local/) and one entry of the table in backends.ts; the CLI, the worker,
 * the Action and eval choose one there, once, and pass it down. Nothing outside src/sandbox and
 * those composition roots asks which backend it has: it asks the capabilities below.
 */
export interface SandboxBackend {
  /** Its name in the table (`--sandbox`, ISSUE_AGENT_SANDBOX), recorded in the trajectory. */
  readonly kind: string;
  /**
   * The agent runs with no network and no host process in reach, the harness out of the agent's
   * reach, and the plan's setup phase runs (through the egress proxy) before the agent's shell
   * exists. False: a plain child process of the caller, which can read everything it can (trusted
   * work only): no setup phase, no plan is read, no second sandbox for a fresh verdict.
   */
  readonly isolated: boolean;
  /**
   * No sandbox process can reach this host's disk, even the folders the harness keeps between jobs
   * (Docker): what a job leaves there (a repository mirror, a test baseline) can be trusted later.
   */
  readonly hostDiskSealed: boolean;
  /**
   * The workspace may be handed over as a `.git` alone and checked out inside the sandbox by its
   * own user, so the host never writes a file of the repository (BackendRequest.checkout).
   */
  readonly checksOutInside: boolean;
  /**
   * It starts only where this host's kernel allows it (user namespaces): a SandboxError while it is
   * made says this host cannot run it, and the caller may say which backend to use instead.
   */
  readonly needsHostSupport: boolean;
  /** A ready sandbox over `request.workspace`; the caller closes it (see ProvisionedSandbox). */
  provision(request: BackendRequest): Promise<ProvisionedSandbox>;
  /**
   * Removes at once everything of this backend this process made and has not removed yet (a forced
   * stop: a second Ctrl-C), when it leaves anything beyond this process's children and held paths.
   */
  removeOwned?(): Promise<void>;
}

export interface BackendRequest {
  /** The host folder of the workspace: a private copy no sandbox process has seen yet. */
  readonly workspace: string;
  /** The folder is a `.git` only, checked out inside (only where `checksOutInside`). */
  readonly checkout?: boolean | undefined;
  /** The repository's files at the workspace's commit (cache key inputs, committed outputs). */
  readonly probe: WorkspaceProbe;
  /**
   * The environment plan, read only by an isolated backend (an unconfined one has no setup phase,
   * and planning may fetch: see the worker's tree origin).
   */
  readonly plan: () => Promise<EnvironmentPlan>;
  readonly settings: EnvironmentSettings;
  /** Labels the sandbox with its job (containers' `job` label: `cli-<runId>` for the CLI and eval). */
  readonly jobId: string;
  /** Names the repository for the environment cache (entries never cross repositories). */
  readonly repoKey: string;
  /**
   * The caller allows this job to store a cache entry (its tree holds nothing the agent wrote);
   * a backend with a cache stores one only for a plan it trusts as well.
   */
  readonly mayStoreCache: boolean;
  readonly limits: SandboxLimits;
  /** PATH of a sandbox that runs with the host's tools. */
  readonly path: string;
  /** Host paths an isolated sandbox on this host hides (checkouts, trajectories, secrets). */
  readonly hide: readonly string[];
  /** Host folders an isolated sandbox on this host shows nothing of but the workspace. */
  readonly mask: readonly string[];
  /** Started sandboxes to take one from (the worker's warm pool), for a job that can use one. */
  readonly pool?: SandboxPool | undefined;
  /** Names the repository, per installation, for the warm pool. */
  readonly poolRepository?: string | undefined;
  /** Only the harness runs commands in it (a verdict's or grading's sandbox): its agent shell starts lazily. */
  readonly lazyAgentShell?: boolean | undefined;
  /**
   * Cancels the provisioning: the setup step running stops, what was made is removed, and provision
   * throws SandboxCancelledError.
   */
  readonly signal?: AbortSignal | undefined;
  /** Removes the job's secrets from recorded text. */
  readonly scrub: (text: string) => string;
  readonly logger?: Logger | undefined;
}

/** A sandbox ready for the agent, and how its environment was made. */
export interface ProvisionedSandbox {
  readonly sandbox: Sandbox;
  /** Null for a backend that is not isolated (it has no setup phase). */
  readonly environment: EnvironmentRecord | null;
  /** Closes the sandbox and what served it (the agent phase's egress). Safe to call twice. */
  close(): Promise<void>;
}

/**
 * A prepared environment (a sandbox whose setup phase ran, and the agent phase's egress that serves
 * it) as what provision returns: closing it closes the sandbox first, then what served it.
 */
export function provisioned(prepared: {
  readonly sandbox: Sandbox;
  readonly record: EnvironmentRecord;
  close(): Promise<void>;
}): ProvisionedSandbox {
  return {
    sandbox: prepared.sandbox,
    environment: prepared.record,
    close: async () => {
      await prepared.sandbox.close();
      await prepared.close();
    },
  };
}
