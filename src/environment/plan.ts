import type { WorkspaceProbe } from '../testing/detect-test-command.js';
import { REPO_CONFIG_PATH } from '../config/repo-config.js';
import type { EnvironmentRecord } from '../events/schema.js';
import { detectSetup, withoutInstallScripts } from './detect-setup.js';
import type { FromSourcePlan } from './python-from-source.js';
import { detectRuntime } from './runtime.js';
import { decideSetupTrust, type SetupTrust, type TreeOrigin } from './setup-trust.js';

/** The environment keys of `.github/issue-agent.yml` (see repo-config.ts). */
export interface RepoEnvironmentConfig {
  readonly setup?: readonly string[] | undefined;
  readonly env?: Readonly<Record<string, string>> | undefined;
  readonly setupSecrets?: readonly string[] | undefined;
  readonly runtime?:
    { readonly node?: string | number | undefined; readonly python?: string | undefined } | undefined;
  readonly image?: string | undefined;
  readonly network?:
    | { readonly setup?: readonly string[] | undefined; readonly agent?: readonly string[] | undefined }
    | undefined;
  readonly cache?: boolean | undefined;
}

/** Everything decided about a job's environment before its sandbox exists. */
export interface EnvironmentPlan {
  readonly image: string;
  readonly runtimes: readonly EnvironmentRecord['runtimes'][number][];
  readonly setup: {
    readonly source: 'configured' | 'detected' | 'none';
    readonly reason: string;
    readonly commands: readonly { readonly command: string; readonly reason: string }[];
    /** Workspace paths setup produces (kept by the cache, hidden from git snapshots). */
    readonly outputs: readonly string[];
    /** Workspace files whose content decides what setup produces (the cache key). */
    readonly inputs: readonly string[];
    /** Variables the tests need afterwards (a virtualenv's PATH). */
    readonly testEnv: Readonly<Record<string, string>>;
    /** Nothing pins the versions (no lockfile): a cached environment is kept only for a while. */
    readonly unpinned?: boolean;
    /** Runs in place of the project's install when its build backend cannot be fetched (detected setup only). */
    readonly fromSource?: FromSourcePlan;
  };
  /** Plain variables for setup and the agent (`env:`). */
  readonly env: Readonly<Record<string, string>>;
  readonly setupAllowHosts: readonly string[];
  readonly agentAllowHosts: readonly string[];
  readonly secretNames: readonly string[];
  readonly cache: boolean;
  /**
   * Whether setup may have the setup secrets (see setup-trust.ts), and what it runs when not.
   */
  readonly trust: SetupTrust & {
    /**
     * What setup runs on a tree that is not trusted: `setup.commands` with install scripts off.
     * Absent: `setup.commands` as planned (which also key the environment cache either way).
     */
    readonly commands?: readonly { readonly command: string; readonly reason: string }[] | undefined;
    /** Variables every setup command gets beyond `env` (install scripts off), none when trusted. */
    readonly setupEnv: Readonly<Record<string, string>>;
  };
}

/** Files that decide a configured setup's result when detection names none. */
const COMMON_INPUTS = [
  'package.json',
  'package-lock.json',
  'npm-shrinkwrap.json',
  'pnpm-lock.yaml',
  'yarn.lock',
  '.npmrc',
  '.yarnrc.yml',
  'requirements.txt',
  'pyproject.toml',
  'setup.py',
  'setup.cfg',
];

/**
 * The plan from the repository's files and its config: a configured `setup:` wins over detection
 * (`setup: []` turns setup off), a configured `runtime:`/`image:` over detected versions. `origin`
 * says where the tree stands against the base branch, which decides whether setup may have the
 * setup secrets (plan.trust).
 */
export async function planEnvironment(
  probe: WorkspaceProbe,
  config: RepoEnvironmentConfig,
  origin: TreeOrigin,
): Promise<EnvironmentPlan> {
  const runtime = await detectRuntime(
    probe,
    config.runtime === undefined ? {} : { configured: config.runtime },
  );
  const detected = await detectSetup(probe);
  let setup: EnvironmentPlan['setup'];
  if (config.setup !== undefined) {
    setup = {
      source: config.setup.length === 0 ? 'none' : 'configured',
      reason:
        config.setup.length === 0
          ? `setup is turned off in ${REPO_CONFIG_PATH} (setup: [])`
          : `the commands of \`setup:\` in ${REPO_CONFIG_PATH}`,
      commands: config.setup.map((command) => ({ command, reason: `configured in ${REPO_CONFIG_PATH}` })),
      outputs: detected?.outputs ?? [],
      inputs: detected?.inputs ?? COMMON_INPUTS,
      testEnv: detected?.testEnv ?? {},
    };
  } else if (detected === null) {
    // Where the image came from the code (no project files), this is where a reader learns why.
    const why = runtime.fromCode ? `; the image follows the code, ${runtime.reason}` : '';
    setup = {
      source: 'none',
      reason: `no lockfile or Python project file was found, so nothing was installed${why}`,
      commands: [],
      outputs: [],
      inputs: [],
      testEnv: {},
    };
  } else {
    setup = {
      source: 'detected',
      reason: `detected ${detected.ecosystem}: ${detected.commands.map((c) => c.reason).join('; ')}`,
      commands: detected.commands,
      outputs: detected.outputs,
      inputs: detected.inputs,
      testEnv: detected.testEnv,
      ...(detected.unpinned === true ? { unpinned: true } : {}),
      ...(detected.fromSource === undefined ? {} : { fromSource: detected.fromSource }),
    };
  }
  const decided = await decideSetupTrust(
    origin,
    {
      ...setup,
      ...(detected === null
        ? {}
        : { ecosystem: detected.ecosystem, unreadWorkspaces: detected.unreadWorkspaces }),
    },
    probe,
  );
  const off =
    !decided.trusted && setup.commands.length > 0
      ? withoutInstallScripts(detected?.ecosystem ?? null, setup.commands)
      : null;
  // The image must hold the tools of the setup that was chosen: a repository with a package.json but
  // Python tests (detected as Python) needs the Python image, not the Node one the runtime picked.
  const image =
    config.image ??
    (detected?.ecosystem === 'python' && !runtime.image.startsWith('issue-agent/python')
      ? pythonImage(runtime.runtimes)
      : runtime.image);
  return {
    image,
    runtimes: runtime.runtimes.map((r) => ({
      language: r.language,
      version: r.version,
      requested: r.requested,
      source: r.source,
      ...(r.note === undefined ? {} : { note: r.note }),
    })),
    setup,
    env: config.env ?? {},
    setupAllowHosts: [...(detected?.allowHosts ?? []), ...(config.network?.setup ?? [])],
    agentAllowHosts: [...(config.network?.agent ?? [])],
    secretNames: [...(config.setupSecrets ?? [])],
    cache: config.cache ?? true,
    trust: {
      ...decided,
      ...(off === null ? { setupEnv: {} } : { commands: off.commands, setupEnv: off.env }),
    },
  };
}

function pythonImage(runtimes: readonly { readonly language: string; readonly version: string }[]): string {
  const python = runtimes.find((r) => r.language === 'python');
  return `issue-agent/python:${python?.version ?? 'latest'}`;
}
