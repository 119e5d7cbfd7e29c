import { providerSecrets } from '../model/provider-config.js';
import { pino } from 'pino';
import { parse as parseYaml } from 'yaml';
import { collectInstructions, probeInstructionSource } from '../agent/instructions.js';
import type { AgentEnv } from '../config/agent-env.js';
import { ungranted } from '../config/grants.js';
import { mergeMcp, type McpConfig } from '../config/mcp-config.js';
import {
  parseRepoConfig,
  REPO_CONFIG_PATH,
  RepoConfigError,
  type RepoConfig,
} from '../config/repo-config.js';
import { EnvironmentSetupError } from '../environment/errors.js';
import { hostProbe } from '../environment/host-probe.js';
import { planEnvironment, type EnvironmentPlan } from '../environment/plan.js';
import type { EnvironmentRecord, RepoInstruction } from '../events/schema.js';
import { failedSetupOutput } from '../publish/environment.js';
import { Redactor } from '../publish/redact.js';
import type { SandboxBackend } from '../sandbox/backend.js';
import { throwIfCancelled, type Sandbox } from '../sandbox/sandbox.js';
import { copyCheckout, hostPathsToHide, WorkspaceCopyError, type CheckoutCopy } from './checkout-copy.js';

/**
 * From a local checkout to a ready sandbox: a private copy of the checkout, its committed
 * `.github/issue-agent.yml`, its instruction files, and a sandbox of the chosen kind over the copy
 * with its environment prepared by the chosen backend. The CLI (`resolve`, `resume`) and eval (the agent's workspace and
 * grading's) provision here; they keep their flags and their terminal.
 */

/**
 * Where a run's sandboxes are made, as its entry point chose once: the backend (see
 * sandbox/backends.ts) and what of the host the entry point read for it.
 */
export interface SandboxChoice {
  readonly backend: SandboxBackend;
  /** The user's home folder (hidden from an isolated sandbox, but what PATH needs); null: none. */
  readonly home: string | null;
  /**
   * How the user turns setup off, as a setup failure's message names it (the CLI's `--setup off`);
   * null: the message names only the config.
   */
  readonly setupOff: string | null;
}

/** The checkout cannot be used as given (not copyable, its config unreadable): the caller's input. */
export class ProvisionInputError extends Error {
  override readonly name: string = 'ProvisionInputError';
}

/**
 * The chosen backend cannot start on this host (SandboxBackend.needsHostSupport; the error's
 * message says why).
 */
export class LocalSandboxUnavailableError extends ProvisionInputError {
  override readonly name = 'LocalSandboxUnavailableError';
}

/** Setup failed: what ran, and the output of the command that failed (secrets removed). */
export class SetupError extends Error {}

export interface ProvisionedWorkspace {
  readonly copy: string;
  /** The checkout's instruction files, read from the copy before any sandbox process saw it. */
  readonly instructions: readonly RepoInstruction[];
  readonly sandbox: Sandbox;
  /** The deployment's (ISSUE_AGENT_MCP_CONFIG) and the checkout's MCP servers. */
  readonly mcp: McpConfig;
  /** How the environment was made; null for a backend that is not isolated (it has no setup phase). */
  readonly environment: EnvironmentRecord | null;
  /**
   * The deployment's setup secrets (ISSUE_AGENT_SETUP_SECRET_*): redacted from everything the run
   * records, like the setup's own output (executeRun). Setup code could have left one behind in a form
   * the setup phase's scan does not know; the model may still print a copy the repository holds.
   */
  readonly setupSecrets: readonly string[];
  close(): Promise<void>;
}

export interface ProvisionOptions {
  /** The local checkout (a git repository with a commit). */
  readonly repo: string;
  readonly sandbox: SandboxChoice;
  readonly env: AgentEnv;
  /** The run's trajectory folder (hidden from a local sandbox). */
  readonly trajectory: string;
  /** The run's id (its conversation, an eval task's key): the containers' `job` label is `cli-<runId>`. */
  readonly runId: string;
  /** Whether the checkout's setup runs (and the deployment allows setup at all). */
  readonly setup: boolean;
  /** Host paths the local sandbox must also hide (an eval's task file, source repositories, output). */
  readonly hide?: readonly string[];
  /** Host folders the local sandbox shows nothing of but the workspace (an App worker's work folder). */
  readonly mask?: readonly string[];
  /** What the environment cache is keyed on (default: the checkout's path). */
  readonly cacheKey?: string;
  /**
   * `repo` is already a private copy this process just made for `runId` (an eval's checkout at the
   * place copyPlace gives): used as the workspace's copy instead of copying it again.
   */
  readonly ownCopy?: CheckoutCopy;
  /** Only the harness runs commands in this sandbox (eval grading): its agent shell starts lazily. */
  readonly lazyAgentShell?: boolean;
  /**
   * Cancels the provisioning (Ctrl-C): the setup step running stops, what was made is removed, and
   * provision throws SandboxCancelledError (see PrepareInput.signal).
   */
  readonly signal?: AbortSignal | undefined;
  /** Told the setup commands before they run (the CLI prints them). */
  readonly onSetupPlan?: (setup: EnvironmentPlan['setup']) => void;
}

/**
 * The checkout's `.github/issue-agent.yml` (its committed version: read from the copy, which no
 * sandbox process has touched yet, through the probe that refuses links). Only its environment keys
 * matter here; the rest (labels, who may trigger) is the App's.
 */
export async function checkoutConfig(copy: string): Promise<RepoConfig> {
  const text = await hostProbe(copy).readText(REPO_CONFIG_PATH);
  let raw: unknown = null;
  if (text !== null) {
    try {
      raw = parseYaml(text) as unknown;
    } catch (error) {
      throw new ProvisionInputError(
        `${REPO_CONFIG_PATH} is not valid YAML: ${error instanceof Error ? (error.message.split('\n')[0] ?? '') : String(error)}`,
      );
    }
  }
  try {
    return parseRepoConfig(raw, { label: 'issue-agent', handle: '@issue-agent' });
  } catch (error) {
    if (error instanceof RepoConfigError)
      throw new ProvisionInputError(
        `${REPO_CONFIG_PATH} is invalid:\n${error.problems.map((p) => `  - ${p}`).join('\n')}`,
      );
    throw error;
  }
}

/** A copy of the checkout and a sandbox over it, its environment prepared (see checkout-copy.ts). */
export async function provision(options: ProvisionOptions): Promise<ProvisionedWorkspace> {
  const { repo, env, runId, signal } = options;
  const { backend, home, setupOff } = options.sandbox;
  throwIfCancelled(signal);
  let copy: CheckoutCopy;
  if (options.ownCopy !== undefined) {
    copy = options.ownCopy;
  } else {
    try {
      copy = await copyCheckout(repo, runId);
    } catch (error) {
      if (error instanceof WorkspaceCopyError) throw new ProvisionInputError(`${repo}: ${error.message}`);
      throw error;
    }
  }
  const closeCopy = (): Promise<void> => copy.cleanup();
  try {
    throwIfCancelled(signal);
    const config = await checkoutConfig(copy.dir);
    // A worker's settings narrowed to one repository (an App's evaluation): the checkout's config
    // may ask only for what that repository was granted (config/grants.ts).
    const grants = env.environment.grants;
    if (grants !== null) {
      const problems = ungranted(config, grants, 'this repository');
      if (problems.length > 0) throw new SetupError(`${REPO_CONFIG_PATH}: ${problems.join('; ')}`);
    }
    const mcp = mergeMcp(env.mcp?.config ?? null, config.mcp);
    const settings = { ...env.environment, setupEnabled: env.environment.setupEnabled && options.setup };
    const setupSecrets = Object.values(settings.setupSecrets);
    const redactor = new Redactor([...setupSecrets, ...providerSecrets(env.provider)]);
    const scrub = (text: string): string => redactor.redact(text);
    // Recorded in the base state and shown to the model: instruction files pass the redactor too.
    const instructions = redactor.redactDeep(
      await collectInstructions(probeInstructionSource(hostProbe(copy.dir))),
    );
    const logger = pino({ level: env.logLevel, base: { run: runId } }, pino.destination(2));
    const prepared = await backend.provision({
      workspace: copy.dir,
      // The copy was made by this process and no sandbox process has seen it: reading it is safe.
      probe: hostProbe(copy.dir),
      plan: async () => {
        const plan = await planEnvironment(hostProbe(copy.dir), config, { kind: 'own-checkout' });
        if (settings.setupEnabled && plan.setup.commands.length > 0) options.onSetupPlan?.(plan.setup);
        return plan;
      },
      settings,
      jobId: `cli-${runId}`,
      // The cache is keyed by the checkout's path: entries never cross repositories.
      repoKey: options.cacheKey ?? `local:${repo}`,
      mayStoreCache: true,
      limits: env.sandboxLimits,
      path: env.sandboxPath,
      hide: hostPathsToHide({
        repo,
        copy: copy.dir,
        trajectory: options.trajectory,
        runsDir: env.runsDir,
        home: home ?? undefined,
        path: env.sandboxPath,
        extra: options.hide ?? [],
      }),
      mask: options.mask ?? [],
      lazyAgentShell: options.lazyAgentShell,
      signal,
      scrub,
      logger,
    });
    return {
      copy: copy.dir,
      instructions,
      mcp,
      sandbox: prepared.sandbox,
      environment: prepared.environment,
      setupSecrets,
      close: async () => {
        await prepared.close();
        await closeCopy();
      },
    };
  } catch (error) {
    await closeCopy();
    if (error instanceof EnvironmentSetupError) {
      const output = failedSetupOutput(error.record);
      throw new SetupError(
        `setup failed: ${error.message}${output === '' ? '' : `\n${output.trimEnd()}`}\n(fix the command${setupOff === null ? ', or' : ','} change setup: in ${REPO_CONFIG_PATH}${setupOff === null ? '' : `, or pass ${setupOff}`})`,
      );
    }
    if (error instanceof Error && error.name === 'SandboxError' && backend.needsHostSupport)
      throw new LocalSandboxUnavailableError(error.message, { cause: error });
    throw error;
  }
}
