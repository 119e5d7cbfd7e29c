import { pino, type Logger } from 'pino';
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
import { createSandbox } from '../sandbox/create-sandbox.js';
import { DEFAULT_LIMITS } from '../sandbox/docker/container-spec.js';
import { throwIfCancelled, type Sandbox } from '../sandbox/sandbox.js';
import { copyCheckout, hostPathsToHide, WorkspaceCopyError, type CheckoutCopy } from './checkout-copy.js';

/**
 * From a local checkout to a ready sandbox: a private copy of the checkout, its committed
 * `.github/issue-agent.yml`, its instruction files, and a sandbox of the chosen kind over the copy
 * with its environment prepared. The CLI (`resolve`, `resume`) and eval (the agent's workspace and
 * grading's) provision here; they keep their flags and their terminal.
 */

/**
 * local: a shell in namespaces (no network, no host processes, the user's checkout, home and
 * trajectories hidden); docker: a hardened container; unconfined: a plain child process of the
 * user (it can read everything the user can, the network included): only for trusted work.
 */
export type SandboxChoice = 'local' | 'docker' | 'unconfined';

/** Recorded in the trajectory: what resume uses when --sandbox is not given. */
export function recordedKind(kind: string, confined: boolean): SandboxChoice {
  if (kind === 'docker') return 'docker';
  return confined ? 'local' : 'unconfined';
}

/** The checkout cannot be used as given (not copyable, its config unreadable): the caller's input. */
export class ProvisionInputError extends Error {
  override readonly name: string = 'ProvisionInputError';
}

/** The isolated local sandbox cannot start on this host (the error's message says why). */
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
  /** How the environment was made; null for an unconfined sandbox (it has no setup phase). */
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
  readonly kind: SandboxChoice;
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
  const { repo, kind, env, runId, signal } = options;
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
    const redactor = new Redactor([
      ...setupSecrets,
      ...(env.anthropicApiKey === null ? [] : [env.anthropicApiKey]),
    ]);
    const scrub = (text: string): string => redactor.redact(text);
    // Recorded in the base state and shown to the model: instruction files pass the redactor too.
    const instructions = redactor.redactDeep(
      await collectInstructions(probeInstructionSource(hostProbe(copy.dir))),
    );
    if (kind === 'unconfined') {
      const sandbox = await createSandbox({
        kind: 'local',
        workspace: copy.dir,
        path: env.sandboxPath,
        jobId: `cli-${runId}`,
        limits: env.sandboxLimits,
      });
      return {
        copy: copy.dir,
        instructions,
        sandbox,
        mcp,
        environment: null,
        setupSecrets,
        close: async () => {
          await sandbox.close();
          await closeCopy();
        },
      };
    }
    // The copy was made by this process and no sandbox process has seen it: reading it is safe.
    const plan = await planEnvironment(hostProbe(copy.dir), config, { kind: 'own-checkout' });
    if (settings.setupEnabled && plan.setup.commands.length > 0) options.onSetupPlan?.(plan.setup);
    const logger: Logger = pino({ level: env.logLevel, base: { run: runId } }, pino.destination(2));
    const prepared =
      kind === 'docker'
        ? await (
            await import('../environment/prepare.js')
          ).prepareEnvironment({
            workspace: copy.dir,
            probe: hostProbe(copy.dir),
            jobId: `cli-${runId}`,
            // The cache is keyed by the checkout's path: entries never cross repositories.
            repoKey: options.cacheKey ?? `local:${repo}`,
            plan,
            settings,
            limits: env.sandboxLimits,
            mayStoreCache: true,
            lazyAgentShell: options.lazyAgentShell,
            signal,
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
              hide: hostPathsToHide({
                repo,
                copy: copy.dir,
                trajectory: options.trajectory,
                runsDir: env.runsDir,
                home: process.env.HOME,
                path: env.sandboxPath,
                extra: options.hide ?? [],
              }),
              mask: options.mask ?? [],
              workspaceBytes: env.sandboxLimits.workspaceBytes ?? DEFAULT_LIMITS.workspaceBytes,
            },
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
      environment: prepared.record,
      setupSecrets,
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
      throw new LocalSandboxUnavailableError(error.message, { cause: error });
    throw error;
  }
}
