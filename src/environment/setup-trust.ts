import type { WorkspaceProbe } from '../testing/detect-test-command.js';
import { REPO_CONFIG_PATH } from '../config/repo-config.js';
import type { SetupEcosystem } from './detect-setup.js';

/**
 * Whether a job's setup may have the setup secrets (only when every file of the tree is what the
 * maintainers committed: see SetupTrust.secrets) and run install scripts as the project expects
 * (when everything that decides what setup executes is what the maintainers committed).
 *
 * Why: setup runs code with the secrets in its environment. A pull request the agent wrote (a
 * follow-up or CI round works on its head) can add a `postinstall`, a `.npmrc` with
 * `node-options=--require ./x.cjs`, a `setup.py` that runs at install, or edit any file a configured
 * `setup:` command runs. No scan can find every copy such code makes of a secret (an encoding is one
 * line of code), so the secret must never be given to it. On a tree that is not trusted, setup runs
 * without the secrets and with install scripts turned off where the package manager has a switch
 * (setupEnvironmentWithoutScripts); the record and the PR say so.
 *
 * What counts as "deciding what setup executes", per the plan:
 *  - always: manifests, lockfiles and package-manager configuration, at any depth (a workspace
 *    package's `package.json`, a nested `.npmrc`), the runtime pins, `.yarn/` (yarn's own release and
 *    plugins are code it runs), the repository config, and every input the plan names;
 *  - the whole tree, when setup runs the repository's own code: a configured `setup:` (commands can
 *    run any file), a lifecycle script of the project's own packages (`prepare: node build.js`
 *    requires whatever it likes), a local package dependency (`file:`, `link:`, `portal:`), a Python
 *    install of the project itself (its build backend runs `setup.py`, which imports anything).
 */

/** Where the job's tree stands against the base branch (whose config the job already runs on). */
export type TreeOrigin =
  /** A commit of the base branch: a new job on an issue, its resume, each best-of-N attempt. */
  | { readonly kind: 'base'; readonly ref: string }
  /** Another commit (a follow-up or CI round on a pull request): the paths that differ from the base branch's tip. */
  | { readonly kind: 'changed'; readonly ref: string; readonly paths: readonly string[] }
  /** The CLI on the user's own checkout: the secrets come from the environment of the person running it. */
  | { readonly kind: 'own-checkout' }
  /** Not established (the base branch could not be read): never trusted. */
  | { readonly kind: 'unknown'; readonly why: string };

export interface SetupTrust {
  /** Setup runs install scripts as the project expects. */
  readonly trusted: boolean;
  /**
   * Setup may have the setup secrets: only when no file of the tree was written by anyone but the
   * maintainers (a commit of the base branch, the user's own checkout, a round whose tree is the
   * base branch's). A tree the agent changed never gets them, even when none of its changes is a
   * setup input: the tools setup runs read the working folder in ways no list of inputs covers
   * (`python3 -m venv` and `python3 -m pip` import a `logging.py` or `venv/` there first, a pinned
   * package's install script reads the project's files), so its code could run with them.
   */
  readonly secrets: boolean;
  /** One line for people: why. */
  readonly reason: string;
}

/** Basenames that are setup inputs wherever they are in the tree. */
const INPUT_NAMES = new Set([
  'package.json',
  'package-lock.json',
  'npm-shrinkwrap.json',
  'pnpm-lock.yaml',
  'pnpm-workspace.yaml',
  '.pnpmfile.cjs',
  '.pnpmfile.mjs',
  'yarn.lock',
  '.yarnrc',
  '.yarnrc.yml',
  // Yarn 4 loads it into every script's environment (`injectEnvironmentFiles`): NODE_OPTIONS too.
  '.env.yarn',
  '.npmrc',
  '.pnp.cjs',
  '.pnp.loader.mjs',
  'bun.lock',
  'bun.lockb',
  'bunfig.toml',
  '.nvmrc',
  '.node-version',
  '.tool-versions',
  '.python-version',
  'pyproject.toml',
  'setup.py',
  'setup.cfg',
  'pip.conf',
  'pip.ini',
  'Pipfile',
  'Pipfile.lock',
  'poetry.lock',
  'pdm.lock',
  'uv.lock',
  'tox.ini',
  'MANIFEST.in',
]);
/** Requirement and constraint files, however a project names them (`requirements/dev.txt` too). */
const REQUIREMENTS_NAME = /^(?:requirements|constraints)[\w.-]*\.(?:txt|in)$/i;
/** Folders whose every file is a setup input. */
const INPUT_FOLDERS = ['.yarn/', 'requirements/'];

/** Whether `path` (repository-relative) is a file that decides what setup executes. */
export function isSetupInput(path: string, planInputs: readonly string[] = []): boolean {
  if (planInputs.includes(path) || path === REPO_CONFIG_PATH) return true;
  if (INPUT_FOLDERS.some((f) => path.startsWith(f))) return true;
  const name = path.slice(path.lastIndexOf('/') + 1);
  return INPUT_NAMES.has(name) || REQUIREMENTS_NAME.test(name);
}

/** npm's lifecycle scripts that `npm ci` (and pnpm, yarn) run for the project's own packages. */
const INSTALL_LIFECYCLE = [
  'preinstall',
  'install',
  'postinstall',
  'prepublish',
  'preprepare',
  'prepare',
  'postprepare',
  'dependencies',
];
const LOCAL_PROTOCOL = /^\s*(?:file|link|portal):/;
const DEPENDENCY_FIELDS = ['dependencies', 'devDependencies', 'optionalDependencies', 'peerDependencies'];
/** A requirements line that installs something from the repository (built, so its code runs). */
const LOCAL_REQUIREMENT = /^\s*(?:-e\b|--editable\b|\.|\/|[\w.-]*\s*@\s*file:|file:|git\+file:)/;

/**
 * Why setup runs the repository's own code (so every file of the tree decides what it executes),
 * or null when it runs only what its manifests pin.
 */
export async function projectCodeSetupRuns(
  setup: {
    readonly source: 'configured' | 'detected' | 'none';
    readonly commands: readonly { readonly command: string }[];
    readonly inputs: readonly string[];
    readonly ecosystem?: SetupEcosystem | undefined;
    readonly unreadWorkspaces?: readonly string[] | undefined;
  },
  probe: WorkspaceProbe,
): Promise<string | null> {
  if (setup.commands.length === 0) return null;
  if (setup.source === 'configured') {
    return `\`setup:\` in ${REPO_CONFIG_PATH} runs commands that may run any file of the repository`;
  }
  if (setup.unreadWorkspaces !== undefined && setup.unreadWorkspaces.length > 0) {
    return `the install runs the lifecycle scripts of workspace packages this did not read (${listed(setup.unreadWorkspaces)})`;
  }
  for (const input of setup.inputs) {
    if (input === 'package.json' || input.endsWith('/package.json')) {
      const why = packageRunsOwnCode(await probe.readText(input));
      if (why !== null) return `${input} ${why}`;
    }
  }
  if (setup.commands.some((c) => /\binstall\b.*\s(?:-e|--editable)\s/.test(`${c.command} `))) {
    return 'setup installs the Python project itself, which runs its build (setup.py, the build backend)';
  }
  for (const input of setup.inputs) {
    const name = input.slice(input.lastIndexOf('/') + 1);
    // A Python plan's inputs besides its manifests are requirement files, whatever their names
    // (`-r reqs/local.txt`); elsewhere only files named like one are.
    const requirementFile =
      setup.ecosystem === 'python' ? !INPUT_NAMES.has(name) : REQUIREMENTS_NAME.test(name);
    if (!requirementFile) continue;
    const text = (await probe.readText(input)) ?? '';
    if (text.split('\n').some((line) => LOCAL_REQUIREMENT.test(line))) {
      return `${input} installs a package from the repository, which runs its build`;
    }
  }
  return null;
}

/** Why a package.json makes an install run the repository's own code, or null. */
function packageRunsOwnCode(text: string | null): string | null {
  if (text === null) return null;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    // An install would fail on it anyway; counted as running code, the safe side.
    return 'is not valid JSON';
  }
  if (typeof json !== 'object' || json === null) return null;
  const pkg = json as Record<string, unknown>;
  const scripts = pkg.scripts;
  if (typeof scripts === 'object' && scripts !== null) {
    const named = INSTALL_LIFECYCLE.filter((s) => Object.hasOwn(scripts, s));
    if (named.length > 0) return `has install lifecycle scripts (${named.join(', ')})`;
  }
  for (const field of DEPENDENCY_FIELDS) {
    const deps = pkg[field];
    if (typeof deps !== 'object' || deps === null) continue;
    for (const [name, spec] of Object.entries(deps)) {
      if (typeof spec === 'string' && LOCAL_PROTOCOL.test(spec)) {
        return `depends on a package of the repository (${name.slice(0, 80)}: ${spec.slice(0, 80)})`;
      }
    }
  }
  return null;
}

const LISTED = 5;

function listed(paths: readonly string[]): string {
  const shown = paths.slice(0, LISTED).map((p) => (p.length > 100 ? `${p.slice(0, 99)}…` : p));
  return `${shown.join(', ')}${paths.length > LISTED ? ` and ${paths.length - LISTED} more` : ''}`;
}

/**
 * The trust of a job's setup, from where its tree stands (origin) and what its setup reads and runs
 * (the plan's setup, read through `probe`: the job's own tree).
 */
export async function decideSetupTrust(
  origin: TreeOrigin,
  setup: Parameters<typeof projectCodeSetupRuns>[0],
  probe: WorkspaceProbe,
): Promise<SetupTrust> {
  switch (origin.kind) {
    case 'base':
      return {
        trusted: true,
        secrets: true,
        reason: `the workspace is a commit of the base branch \`${origin.ref}\``,
      };
    case 'own-checkout':
      return {
        trusted: true,
        secrets: true,
        reason: 'the workspace is your own checkout, and the secrets come from your own environment',
      };
    case 'unknown':
      return {
        trusted: false,
        secrets: false,
        reason: `it could not be checked against the base branch (${origin.why})`,
      };
    case 'changed':
      break;
  }
  if (origin.paths.length === 0) {
    return {
      trusted: true,
      secrets: true,
      reason: `the workspace's files are those of the base branch \`${origin.ref}\``,
    };
  }
  const inputs = origin.paths.filter((p) => isSetupInput(p, setup.inputs));
  if (inputs.length > 0) {
    return {
      trusted: false,
      secrets: false,
      reason: `the workspace changes what setup runs against the base branch \`${origin.ref}\` (${listed(inputs)})`,
    };
  }
  const runs = await projectCodeSetupRuns(setup, probe);
  if (runs !== null) {
    return {
      trusted: false,
      secrets: false,
      reason: `${runs}, and the workspace differs from the base branch \`${origin.ref}\` in ${origin.paths.length} file(s) (${listed(origin.paths)})`,
    };
  }
  return {
    trusted: true,
    secrets: false,
    reason: `setup runs only what the manifests pin, and none of the ${origin.paths.length} file(s) that differ from the base branch \`${origin.ref}\` is a manifest, lockfile or package-manager setting; but files the agent wrote are in the workspace, and the tools setup runs may read them`,
  };
}

/** The setup secrets a job's setup gets, by the plan's trust, and what its record says of them. */
export function setupSecretsOf(
  plan: {
    readonly secretNames: readonly string[];
    readonly trust: SetupTrust & { readonly setupEnv: Readonly<Record<string, string>> };
  },
  provided: Readonly<Record<string, string>>,
): {
  /** Name → value: what setup's environment gets. */
  readonly values: Record<string, string>;
  readonly given: string[];
  /** Provided, but not given to a setup that is not trusted. */
  readonly withheld: string[];
  /** Named by the repository, not provided by the deployment. */
  readonly missing: string[];
  readonly record: {
    readonly trusted: boolean;
    readonly reason: string;
    readonly withheld: string[];
    readonly scriptsOff: boolean;
  };
} {
  const available = plan.secretNames.filter((n) => provided[n] !== undefined);
  const given = plan.trust.secrets ? available : [];
  const withheld = plan.trust.secrets ? [] : available;
  const values: Record<string, string> = {};
  for (const n of given) values[n] = provided[n] ?? '';
  return {
    values,
    given,
    withheld,
    missing: plan.secretNames.filter((n) => provided[n] === undefined),
    record: {
      trusted: plan.trust.trusted,
      reason: plan.trust.reason,
      withheld,
      scriptsOff: Object.keys(plan.trust.setupEnv).length > 0,
    },
  };
}

/** One clause for a setup failure's message on a tree that is not trusted, or '' when it is. */
export function untrustedSetupNote(record: {
  readonly trusted: boolean;
  readonly reason: string;
  readonly withheld: readonly string[];
  readonly scriptsOff: boolean;
}): string {
  if (record.trusted && record.withheld.length === 0) return '';
  const what = [
    ...(record.withheld.length > 0 ? [`without the setup secrets (${record.withheld.join(', ')})`] : []),
    ...(record.scriptsOff ? ['with install scripts off'] : []),
  ];
  return what.length === 0 ? '' : ` (setup ran ${what.join(' and ')}: ${record.reason})`;
}
