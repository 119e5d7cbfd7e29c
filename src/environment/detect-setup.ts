/**
 * Works out what to run in the sandbox before the baseline test run so the repository's tests can
 * find their dependencies: an install from the lockfile (npm, pnpm, yarn classic or berry) or a
 * virtualenv for a Python project.
 *
 * Pure, like detect-test-command.ts: every question goes through a WorkspaceProbe. A configured
 * `setup:` replaces this; that is the caller's business.
 *
 * Invariant: every command is built from fixed text plus values that passed a strict pattern
 * (versions, extras, paths). Repository text never reaches a command unchecked; what fails a check
 * falls back to a default and the command's `reason` says why.
 */
import { parse as parseYaml } from 'yaml';
import { detectTestCommand, type WorkspaceProbe } from '../testing/detect-test-command.js';
import { planFromSource, type FromSourcePlan } from './python-from-source.js';

export type SetupEcosystem = 'npm' | 'pnpm' | 'yarn-classic' | 'yarn-berry' | 'python';

export interface SetupCommand {
  /** A shell command, run from the workspace root as the sandbox user. */
  readonly command: string;
  /** Why it runs, for people reading the run, e.g. "package-lock.json is present". */
  readonly reason: string;
}

export interface SetupPlan {
  readonly ecosystem: SetupEcosystem;
  /** Run in order; the first failure ends the setup. */
  readonly commands: readonly SetupCommand[];
  /** The registries the setup needs through the egress proxy. */
  readonly allowHosts: readonly string[];
  /** Variables the test command needs afterwards (e.g. the virtualenv on PATH). */
  readonly testEnv: Readonly<Record<string, string>>;
  /** Workspace-relative paths the setup creates, which a cache may keep and restore. */
  readonly outputs: readonly string[];
  /** Workspace-relative files (that exist) whose content determines the result: the cache key. */
  readonly inputs: readonly string[];
  /**
   * Nothing pins the versions (a package.json without a lockfile): the same inputs give another
   * environment as the registry moves, so a cached one is kept only for a while.
   */
  readonly unpinned?: boolean;
  /**
   * Workspace patterns whose packages were not all read (a `**` or brace glob, a path this does not
   * expand, more than MAX_WORKSPACE_PACKAGES packages). The install still runs those packages'
   * lifecycle scripts, so setup-trust.ts counts them as running the project's own code.
   */
  readonly unreadWorkspaces?: readonly string[];
  /**
   * What runs in place of the project's editable install when pip cannot fetch its build backend
   * (python-from-source.ts). Absent: no fallback, a failed install fails setup.
   */
  readonly fromSource?: FromSourcePlan;
}

/** The sandbox's workspace and default PATH (the node and python images' own). */
export const SANDBOX_WORKSPACE = '/workspace';
export const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/**
 * Where setup installs the project's package manager (pnpm, yarn): in the workspace, so it is kept
 * with the cached environment, excluded from the change like node_modules, and first on the PATH
 * of the tests and the agent (a test command of `pnpm test` needs a pnpm; the images have npm only).
 */
export const TOOLS_DIR = '.issue-agent-tools';
const TOOLS_BIN = `${TOOLS_DIR}/bin`;
const TOOLS_ENV = { PATH: `${SANDBOX_WORKSPACE}/${TOOLS_BIN}:${DEFAULT_PATH}` };

function installTool(spec: string): SetupCommand {
  return {
    command: `npm install --global --prefix ${TOOLS_DIR} --no-audit --no-fund --loglevel=error ${spec}`,
    reason: `the package manager the project uses, in ${TOOLS_DIR} (first on the tests' PATH)`,
  };
}

/**
 * Setup as it runs on a tree that is not trusted (see setup-trust.ts): install scripts off where the
 * package manager has a switch. The commands this file writes get the flag (a command line outranks
 * any `.npmrc` or `.yarnrc` in the tree); every command, a configured one included, gets the
 * variables. Yarn berry has no flag, only `enableScripts`; `YARN_IGNORE_SCRIPTS` is yarn classic's
 * alone (berry refuses to start on it). pip has no such switch: building a local project runs its
 * code, which is why such a tree never gets the secrets (projectCodeSetupRuns).
 */
export function withoutInstallScripts(
  ecosystem: SetupEcosystem | null,
  commands: readonly SetupCommand[],
): { readonly commands: SetupCommand[]; readonly env: Record<string, string> } {
  const flagged = commands.map((c) => {
    const m = OWN_INSTALL.exec(c.command);
    return m === null ? c : { ...c, command: `${m[1] ?? ''} --ignore-scripts${m[2] ?? ''}` };
  });
  const env: Record<string, string> =
    ecosystem === 'python' ? {} : { npm_config_ignore_scripts: 'true', YARN_ENABLE_SCRIPTS: 'false' };
  if (ecosystem === 'yarn-classic') {
    env.YARN_IGNORE_SCRIPTS = 'true';
    delete env.YARN_ENABLE_SCRIPTS;
  }
  return { commands: flagged, env };
}

/** The installs this file writes that take `--ignore-scripts`: npm's, a tool's install, pnpm's and yarn classic's. */
const OWN_INSTALL =
  /^(npm ci|npm install(?: --global --prefix \S+)?|\S*\/pnpm install|\S*\/yarn install(?= --frozen-lockfile))(\s.*)?$/;

const NPM_REGISTRY = 'registry.npmjs.org';
const YARN_REGISTRY = 'registry.yarnpkg.com';
const PYPI_HOSTS = ['pypi.org', 'files.pythonhosted.org'] as const;

/** A plain semver (`9.12.0`, `4.0.0-rc.1`); anything else never reaches a command. */
const SAFE_VERSION = /^\d+\.\d+\.\d+(-[0-9A-Za-z.]+)?$/;
/** Corepack's integrity suffix on packageManager (`pnpm@9.12.0+sha512.<hex>`). */
const INTEGRITY_SUFFIX = /^\+sha(224|256|384|512)\.[0-9A-Fa-f]+$/;
const SAFE_EXTRA = /^[A-Za-z0-9._-]+$/;
/** Relative paths made of plain characters: what commands, the cache and `.git/info/exclude` accept. */
const SAFE_REL_PATH = /^[A-Za-z0-9._@][A-Za-z0-9._@/-]*$/;

/** Requirement files installed with `-r`, in this order, when present at the root. */
export const REQUIREMENT_FILES = [
  'requirements.txt',
  'requirements-dev.txt',
  'requirements-test.txt',
  'test-requirements.txt',
  'dev-requirements.txt',
] as const;
/** Extras installed with the project when it declares them (compared PEP 685-normalized). */
export const TEST_EXTRAS = ['test', 'tests', 'testing', 'dev'] as const;

const MAX_WORKSPACE_PACKAGES = 200;

/**
 * The setup for a workspace, or null when there is nothing to install: no lockfile (a package.json
 * alone gets no install, so nothing unpinned runs) and no Python manifest.
 *
 * When a JavaScript lockfile and a Python manifest are both present, the plan follows the test
 * command detectTestCommand would pick: package.json's test script means JavaScript, otherwise Python.
 */
export async function detectSetup(probe: WorkspaceProbe): Promise<SetupPlan | null> {
  const js = await detectJavaScript(probe);
  const python = await detectPython(probe);
  if (js !== null && python !== null) {
    const test = await detectTestCommand(probe);
    return test?.source === 'package.json scripts.test' ? js : python;
  }
  return js ?? python;
}

// ---------------------------------------------------------------------------------------------------
// JavaScript

interface PackageJson {
  readonly packageManager: string | null;
  readonly workspaces: readonly string[];
  /** How many packages `dependencies`, `devDependencies` and `optionalDependencies` name. */
  readonly dependencies: number;
}

type LockKind = 'npm' | 'pnpm' | 'yarn';

async function detectJavaScript(probe: WorkspaceProbe): Promise<SetupPlan | null> {
  const locks: { kind: LockKind; file: string }[] = [];
  for (const [kind, file] of [
    ['pnpm', 'pnpm-lock.yaml'],
    ['yarn', 'yarn.lock'],
    ['npm', 'package-lock.json'],
    ['npm', 'npm-shrinkwrap.json'],
  ] as const) {
    if (await probe.exists(file)) locks.push({ kind, file });
  }
  const pkg = readPackageJson(await probe.readText('package.json'));
  const declared = pkg === null ? null : splitPackageManager(pkg.packageManager);
  // The manager package.json names wins when its lockfile is there; otherwise pnpm, yarn, npm (the
  // order detectTestCommand uses for `<manager> test`).
  const lock = locks.find((l) => l.kind === declared?.name) ?? locks[0];
  if (lock === undefined) return pkg === null ? null : unlockedPlan(probe, pkg);

  const inputs = await existing(probe, [lock.file, 'package.json', '.npmrc']);
  const registryNote = await npmrcRegistryNote(probe);
  switch (lock.kind) {
    case 'npm': {
      const workspaces = await expandWorkspaces(probe, pkg?.workspaces ?? []);
      return {
        ecosystem: 'npm',
        commands: [
          {
            command: 'npm ci --no-audit --no-fund',
            reason: `${lock.file} is present${registryNote}`,
          },
        ],
        allowHosts: [NPM_REGISTRY],
        testEnv: {},
        outputs: nodeModules(workspaces.dirs),
        inputs: [...inputs, ...workspaces.dirs.map((w) => `${w}/package.json`)],
        ...unreadOf(workspaces),
      };
    }
    case 'pnpm':
      return pnpmPlan(probe, declared, inputs, registryNote);
    case 'yarn':
      return yarnPlan(probe, pkg, declared, inputs, registryNote);
  }
}

/**
 * A package.json that names dependencies but commits no lockfile (as libraries often do): installed
 * with npm as the registry has them today, writing no lockfile into the workspace (so none reaches
 * the change). The plan is unpinned: its cached environment expires (see SetupPlan.unpinned). npm
 * whatever `packageManager` says: without a lockfile there is nothing of pnpm's or yarn's to honour,
 * and npm reads every package.json (a `workspace:` protocol dependency is the one thing it cannot).
 */
async function unlockedPlan(probe: WorkspaceProbe, pkg: PackageJson): Promise<SetupPlan | null> {
  const workspaces = await expandWorkspaces(probe, pkg.workspaces);
  if (pkg.dependencies === 0 && workspaces.dirs.length === 0 && workspaces.unread.length === 0) return null;
  return {
    ecosystem: 'npm',
    commands: [
      {
        command: 'npm install --no-package-lock --no-audit --no-fund',
        reason: `package.json names ${pkg.dependencies} dependencies and there is no lockfile: installed as the registry has them now, no lockfile written${await npmrcRegistryNote(probe)}`,
      },
    ],
    allowHosts: [NPM_REGISTRY],
    testEnv: {},
    outputs: nodeModules(workspaces.dirs),
    inputs: [
      ...(await existing(probe, ['package.json', '.npmrc'])),
      ...workspaces.dirs.map((w) => `${w}/package.json`),
    ],
    ...unreadOf(workspaces),
    unpinned: true,
  };
}

async function pnpmPlan(
  probe: WorkspaceProbe,
  declared: DeclaredManager | null,
  inputs: readonly string[],
  registryNote: string,
): Promise<SetupPlan> {
  let version: string;
  let why: string;
  const fromField = declared?.name === 'pnpm' ? checkVersion(declared) : null;
  if (fromField?.ok === true) {
    version = fromField.version;
    why = `pnpm-lock.yaml is present; package.json packageManager names pnpm@${version}`;
  } else {
    const lockVersion = readPnpmLockfileVersion(await probe.readText('pnpm-lock.yaml'));
    const major = lockVersion === null ? null : pnpmMajorForLockfile(lockVersion);
    version = major ?? 'latest';
    why =
      major !== null
        ? `pnpm-lock.yaml (lockfileVersion ${lockVersion ?? ''}) is present; pnpm ${major} writes that version`
        : `pnpm-lock.yaml is present but its lockfileVersion ${lockVersion === null ? 'is missing' : `${lockVersion} is not one this knows`}; using the latest pnpm`;
    if (fromField?.ok === false) why += ` (${fromField.problem})`;
  }
  const workspaceFile = await probe.readText('pnpm-workspace.yaml');
  const workspaces = await expandWorkspaces(probe, readPnpmWorkspaces(workspaceFile));
  return {
    ecosystem: 'pnpm',
    commands: [
      installTool(`pnpm@${version}`),
      { command: `${TOOLS_BIN}/pnpm install --frozen-lockfile`, reason: why + registryNote },
    ],
    allowHosts: [NPM_REGISTRY],
    testEnv: TOOLS_ENV,
    outputs: [...nodeModules(workspaces.dirs), TOOLS_DIR],
    inputs: [
      ...inputs,
      ...(await existing(probe, ['pnpm-workspace.yaml', '.pnpmfile.cjs'])),
      ...workspaces.dirs.map((w) => `${w}/package.json`),
    ],
    ...unreadOf(workspaces),
  };
}

/**
 * Which lockfile versions each pnpm major writes: 5.3 is pnpm 6 (older 5.x read by it too), 5.4 is
 * pnpm 7, 6.x is pnpm 8, 9.0 is pnpm 9 (pnpm 10 writes 9.0 as well; 9 is chosen because it still
 * runs dependencies' install scripts by default, as the project expects).
 */
export function pnpmMajorForLockfile(lockfileVersion: string): string | null {
  const m = /^(\d+)\.(\d+)$/.exec(lockfileVersion);
  if (m === null) return null;
  const major = Number(m[1]);
  const minor = Number(m[2]);
  if (major === 5) return minor >= 4 ? '7' : '6';
  if (major === 6) return '8';
  if (major === 9) return '9';
  return null;
}

function readPnpmLockfileVersion(lock: string | null): string | null {
  if (lock === null) return null;
  const head = lock.split('\n', 20).join('\n');
  return /^lockfileVersion:\s*['"]?(\d+\.\d+)['"]?\s*$/m.exec(head)?.[1] ?? null;
}

async function yarnPlan(
  probe: WorkspaceProbe,
  pkg: PackageJson | null,
  declared: DeclaredManager | null,
  inputs: readonly string[],
  registryNote: string,
): Promise<SetupPlan> {
  const lock = (await probe.readText('yarn.lock')) ?? '';
  const yarnrcText = await probe.readText('.yarnrc.yml');
  const yarnrc = readYarnrc(yarnrcText);
  const fromField = declared?.name === 'yarn' ? checkVersion(declared) : null;
  const fieldMajor = fromField?.ok === true ? Number(fromField.version.split('.')[0]) : null;
  const isV1Lock = /^# yarn lockfile v1\s*$/m.test(lock.split('\n', 5).join('\n'));
  const berryLock = /^__metadata:/m.test(lock);
  const workspaces = await expandWorkspaces(probe, pkg?.workspaces ?? []);
  const allInputs = [
    ...inputs,
    ...(await existing(probe, ['.yarnrc.yml', '.yarnrc'])),
    ...workspaces.dirs.map((w) => `${w}/package.json`),
  ];
  const fieldNote = fromField?.ok === false ? ` (${fromField.problem})` : '';
  const allowHosts = [NPM_REGISTRY, YARN_REGISTRY];

  const classic = fieldMajor !== null ? fieldMajor === 1 : yarnrcText === null && (isV1Lock || !berryLock);
  if (classic) {
    const version = fieldMajor === 1 && fromField?.ok === true ? fromField.version : '1';
    const why =
      fieldMajor === 1
        ? `yarn.lock is present; package.json packageManager names yarn@${version}`
        : `yarn.lock ${isV1Lock ? 'is a yarn v1 lockfile' : 'is present'} and there is no .yarnrc.yml: yarn classic${fieldNote}`;
    return {
      ecosystem: 'yarn-classic',
      commands: [
        installTool(`yarn@${version}`),
        { command: `${TOOLS_BIN}/yarn install --frozen-lockfile`, reason: why + registryNote },
      ],
      allowHosts,
      testEnv: TOOLS_ENV,
      outputs: [...nodeModules(workspaces.dirs), TOOLS_DIR],
      inputs: allInputs,
      ...unreadOf(workspaces),
    };
  }

  const signs = [
    ...(yarnrcText !== null ? ['.yarnrc.yml'] : []),
    ...(berryLock ? ['__metadata: in yarn.lock'] : []),
    ...(fieldMajor !== null ? [`packageManager yarn@${fieldMajor}`] : []),
  ].join(', ');
  // Packages go to the workspace's .yarn/cache rather than the global cache under HOME, so that a
  // Plug'n'Play map that points at them survives the cache (HOME does not).
  const cacheEnv = 'YARN_ENABLE_GLOBAL_CACHE=false';
  const commands: SetupCommand[] = [];
  let why: string;
  let testEnv: Record<string, string> = TOOLS_ENV;
  const yarnPath = yarnrc.yarnPath;
  const pathProblem = yarnPath === null ? null : unsafeRelPath(yarnPath);
  if (
    yarnPath !== null &&
    pathProblem === null &&
    /^[\w./-]+$/.test(yarnPath) &&
    (await probe.exists(yarnPath))
  ) {
    // The repository's own yarn release, behind a `yarn` on the PATH (the path was checked to be a
    // plain relative one inside the repository, so it is safe in the shim's text).
    commands.push({
      command: `mkdir -p ${TOOLS_BIN} && printf '%s\\n' '#!/bin/sh' 'exec node ${SANDBOX_WORKSPACE}/${yarnPath} "$@"' > ${TOOLS_BIN}/yarn && chmod +x ${TOOLS_BIN}/yarn`,
      reason: `a \`yarn\` in ${TOOLS_DIR} that runs the repository's yarnPath (first on the tests' PATH)`,
    });
    why = `yarn berry (${signs}); .yarnrc.yml yarnPath is ${yarnPath}`;
    commands.push({
      command: `${cacheEnv} ${TOOLS_BIN}/yarn install --immutable`,
      reason: why + registryNote,
    });
    allInputs.push(yarnPath);
  } else {
    let version: string;
    if (fromField?.ok === true && fieldMajor !== null && fieldMajor >= 2) version = fromField.version;
    else version = berryMajorForLockfile(lock);
    // A yarnPath that is not used here would still be followed by yarn itself: YARN_IGNORE_PATH
    // turns that off, for setup and for the tests.
    const ignorePath = yarnPath !== null ? ' YARN_IGNORE_PATH=1' : '';
    if (yarnPath !== null) testEnv = { ...TOOLS_ENV, YARN_IGNORE_PATH: '1' };
    why = `yarn berry (${signs})${fieldNote}`;
    if (yarnPath !== null) {
      why +=
        pathProblem !== null
          ? `; yarnPath ignored: ${pathProblem}`
          : `; yarnPath ${yarnPath} is not in the repository, or not a plain path`;
    }
    commands.push(installTool(`@yarnpkg/cli-dist@${version}`));
    commands.push({
      command: `${cacheEnv}${ignorePath} ${TOOLS_BIN}/yarn install --immutable`,
      reason: why + registryNote,
    });
  }
  const linker = yarnrc.nodeLinker;
  const outputs =
    linker === 'node-modules' || linker === 'pnpm'
      ? nodeModules(workspaces.dirs)
      : ['.pnp.cjs', '.pnp.loader.mjs', '.yarn/cache', '.yarn/unplugged', '.yarn/install-state.gz'];
  return {
    ecosystem: 'yarn-berry',
    commands,
    allowHosts,
    testEnv,
    outputs: [...outputs, TOOLS_DIR],
    inputs: allInputs,
    ...unreadOf(workspaces),
  };
}

/** The yarn major a berry lockfile's `__metadata: version:` belongs to (4 when unknown). */
export function berryMajorForLockfile(lock: string): string {
  const m = /^__metadata:\s*\n(?:[ \t]+.*\n)*?[ \t]+version:\s*['"]?(\d+)/m.exec(lock);
  const v = m === null ? null : Number(m[1]);
  if (v === null) return '4';
  if (v <= 4) return '2';
  if (v <= 6) return '3';
  return '4';
}

function readYarnrc(text: string | null): { yarnPath: string | null; nodeLinker: string | null } {
  if (text === null) return { yarnPath: null, nodeLinker: null };
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch {
    return { yarnPath: null, nodeLinker: null };
  }
  if (!isRecord(doc)) return { yarnPath: null, nodeLinker: null };
  const yarnPath = doc['yarnPath'];
  const nodeLinker = doc['nodeLinker'];
  return {
    yarnPath: typeof yarnPath === 'string' ? yarnPath : null,
    nodeLinker: typeof nodeLinker === 'string' ? nodeLinker : null,
  };
}

interface DeclaredManager {
  readonly name: string;
  readonly raw: string;
  readonly version: string;
}

/** `pnpm@9.12.0+sha512.abc` → name pnpm, version `9.12.0+sha512.abc` (unchecked). */
function splitPackageManager(field: string | null): DeclaredManager | null {
  if (field === null) return null;
  const at = field.lastIndexOf('@');
  if (at <= 0) return null;
  return { name: field.slice(0, at), raw: field, version: field.slice(at + 1) };
}

type VersionCheck = { ok: true; version: string } | { ok: false; problem: string };

function checkVersion(declared: DeclaredManager): VersionCheck {
  const plus = declared.version.indexOf('+');
  const version = plus === -1 ? declared.version : declared.version.slice(0, plus);
  const suffix = plus === -1 ? '' : declared.version.slice(plus);
  if (SAFE_VERSION.test(version) && (suffix === '' || INTEGRITY_SUFFIX.test(suffix))) {
    return { ok: true, version };
  }
  return {
    ok: false,
    problem: `packageManager ${JSON.stringify(declared.raw.slice(0, 80))} is not name@x.y.z, so it was not used`,
  };
}

function readPackageJson(text: string | null): PackageJson | null {
  if (text === null) return null;
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return null;
  }
  if (!isRecord(doc)) return null;
  const pm = doc['packageManager'];
  const ws = doc['workspaces'];
  const list = Array.isArray(ws) ? ws : isRecord(ws) && Array.isArray(ws['packages']) ? ws['packages'] : [];
  const count = (field: string): number => {
    const deps = doc[field];
    return isRecord(deps) ? Object.keys(deps).length : 0;
  };
  return {
    packageManager: typeof pm === 'string' ? pm : null,
    workspaces: list.filter((w): w is string => typeof w === 'string'),
    dependencies: count('dependencies') + count('devDependencies') + count('optionalDependencies'),
  };
}

function readPnpmWorkspaces(text: string | null): string[] {
  if (text === null) return [];
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch {
    return [];
  }
  if (!isRecord(doc) || !Array.isArray(doc['packages'])) return [];
  return doc['packages'].filter((p): p is string => typeof p === 'string');
}

/** Workspace package directories, and the patterns whose packages were not all read. */
export interface Workspaces {
  readonly dirs: string[];
  readonly unread: string[];
}

/**
 * Directories of workspace packages (those holding a package.json), from globs such as
 * `packages/*`. `*` matches within one path segment. Patterns with `**`, braces or anything that is
 * not a plain relative path are not expanded, and at most MAX_WORKSPACE_PACKAGES directories are:
 * those patterns (and the cap, when reached) are `unread` (their node_modules are then not cached,
 * and setup-trust.ts treats their packages as running their own code). A negation only excludes
 * packages, so skipping it reads more, never less.
 */
export async function expandWorkspaces(
  probe: WorkspaceProbe,
  patterns: readonly string[],
): Promise<Workspaces> {
  const found = new Set<string>();
  const unread: string[] = [];
  let capped = false;
  for (const raw of patterns) {
    const pattern = raw.replace(/^\.\//, '').replace(/\/+$/, '');
    if (pattern === '' || pattern.startsWith('!')) continue;
    if (
      pattern.includes('**') ||
      !/^[A-Za-z0-9._@*][A-Za-z0-9._@*/-]*$/.test(pattern) ||
      pattern.split('/').includes('..')
    ) {
      unread.push(raw.slice(0, 100));
      continue;
    }
    let dirs = ['.'];
    for (const segment of pattern.split('/')) {
      const next: string[] = [];
      for (const dir of dirs) {
        const join = (name: string): string => (dir === '.' ? name : `${dir}/${name}`);
        if (!segment.includes('*')) {
          next.push(join(segment));
          continue;
        }
        const re = new RegExp(`^${segment.split('*').map(escapeRegExp).join('[^/]*')}$`);
        const entries = (await probe.listDir(dir)) ?? [];
        for (const name of [...entries].sort()) {
          if (name !== 'node_modules' && !name.startsWith('.') && re.test(name)) next.push(join(name));
        }
      }
      if (next.length > MAX_WORKSPACE_PACKAGES) capped = true;
      dirs = next.slice(0, MAX_WORKSPACE_PACKAGES);
    }
    for (const dir of dirs) {
      if (dir === '.' || !SAFE_REL_PATH.test(dir)) {
        if (dir !== '.') unread.push(raw.slice(0, 100));
        continue;
      }
      if (!(await probe.exists(`${dir}/package.json`))) continue;
      if (found.size >= MAX_WORKSPACE_PACKAGES) {
        capped = true;
        break;
      }
      found.add(dir);
    }
  }
  if (capped) unread.push(`more than ${MAX_WORKSPACE_PACKAGES} packages`);
  return { dirs: [...found].sort(), unread: [...new Set(unread)] };
}

/** The plan's `unreadWorkspaces`, when there are any. */
function unreadOf(w: Workspaces): { unreadWorkspaces?: readonly string[] } {
  return w.unread.length === 0 ? {} : { unreadWorkspaces: w.unread };
}

function nodeModules(workspaces: readonly string[]): string[] {
  return ['node_modules', ...workspaces.map((w) => `${w}/node_modules`)];
}

/** A note for the reason when .npmrc points at a registry the default allowlist does not open. */
async function npmrcRegistryNote(probe: WorkspaceProbe): Promise<string> {
  const text = await probe.readText('.npmrc');
  if (text === null) return '';
  const hosts = new Set<string>();
  for (const m of text.matchAll(/^\s*(?:@[\w.-]+:)?registry\s*=\s*(\S+)/gm)) {
    try {
      const host = new URL(m[1] ?? '').hostname.toLowerCase();
      if (host !== NPM_REGISTRY && host !== YARN_REGISTRY && /^[a-z0-9.-]+$/.test(host)) hosts.add(host);
    } catch {
      // not a URL: npm will complain itself
    }
  }
  if (hosts.size === 0) return '';
  return `; .npmrc names the registry ${[...hosts].sort().join(', ')}, which setup reaches only when listed under network.setup`;
}

// ---------------------------------------------------------------------------------------------------
// Python

const VENV = '.venv';
const PIP = `${VENV}/bin/pip`;

async function detectPython(probe: WorkspaceProbe): Promise<SetupPlan | null> {
  const root = (await probe.listDir('.')) ?? [];
  const requirements = REQUIREMENT_FILES.filter((f) => root.includes(f));
  const pyprojectText = root.includes('pyproject.toml') ? await probe.readText('pyproject.toml') : null;
  const setupPy = root.includes('setup.py') ? await probe.readText('setup.py') : null;
  const setupCfg = root.includes('setup.cfg') ? await probe.readText('setup.cfg') : null;
  if (requirements.length === 0 && pyprojectText === null && setupPy === null) {
    return null;
  }

  const commands: SetupCommand[] = [];
  const notes: string[] = [];
  let fromSource: FromSourcePlan | null = null;
  if (requirements.length > 0) {
    commands.push({
      command: `${PIP} install ${requirements.map((f) => `-r ${f}`).join(' ')}`,
      reason: `${requirements.join(', ')} ${requirements.length === 1 ? 'is' : 'are'} present`,
    });
  }

  const pyproject = pyprojectText === null ? null : scanToml(pyprojectText);
  const hasProjectTable = pyproject?.tables.some((t) => t === 'project' || t.startsWith('project.')) === true;
  const isPoetry =
    pyproject?.tables.some((t) => t === 'tool.poetry' || t.startsWith('tool.poetry.')) === true;
  const hasBuildSystem = pyproject?.tables.includes('build-system') === true;

  if (hasProjectTable || setupPy !== null) {
    const declared = [
      ...(pyproject?.keys.get('project.optional-dependencies') ?? []),
      ...(setupPy === null ? [] : setupPyExtras(setupPy)),
      ...(setupCfg === null ? [] : setupCfgExtras(setupCfg)),
    ];
    const extras = chooseExtras(declared);
    const source = hasProjectTable ? 'pyproject.toml has a [project] table' : 'setup.py is present';
    const target = extras.length > 0 ? `'.[${extras.join(',')}]'` : '.';
    const install = `${PIP} install -e ${target}`;
    commands.push({
      command: install,
      reason:
        extras.length > 0
          ? `${source}; with the extras it declares for tests (${extras.join(', ')})`
          : `${source}; it declares none of the extras ${TEST_EXTRAS.join(', ')}`,
    });
    fromSource = await planFromSource(probe, {
      replaces: install,
      pyproject: pyprojectText,
      declaredIn: hasProjectTable ? 'project' : 'setup.py',
      extras,
      venv: VENV,
    });
  } else if (isPoetry) {
    if (hasBuildSystem) {
      const install = `${PIP} install -e .`;
      commands.push({
        command: install,
        reason:
          'pyproject.toml is a Poetry project with a [build-system]: installed with pip (Poetry dependency groups are not installed; configure setup: for those)',
      });
      fromSource = await planFromSource(probe, {
        replaces: install,
        pyproject: pyprojectText,
        declaredIn: 'poetry',
        extras: [],
        venv: VENV,
      });
    } else {
      notes.push(
        'pyproject.toml is a Poetry project without a [build-system], which pip cannot install: configure setup: (e.g. pip install poetry && poetry install)',
      );
    }
  }

  if (commands.length === 0 && notes.length === 0) return null;
  const venvReason = [
    `a virtualenv in the workspace for the Python project (${describePython(requirements, pyprojectText, setupPy)})`,
    "--system-site-packages keeps the image's pytest importable without adding it to the project",
    ...notes,
  ].join('; ');
  const inputs = await existing(probe, [
    ...requirements,
    ...(await referencedRequirementFiles(probe, requirements)),
    'pyproject.toml',
    'setup.py',
    'setup.cfg',
  ]);
  return {
    ecosystem: 'python',
    commands: [
      { command: `python3 -m venv --system-site-packages ${VENV}`, reason: venvReason },
      ...commands,
    ],
    allowHosts: [...PYPI_HOSTS],
    testEnv: {
      VIRTUAL_ENV: `${SANDBOX_WORKSPACE}/${VENV}`,
      PATH: `${SANDBOX_WORKSPACE}/${VENV}/bin:${DEFAULT_PATH}`,
    },
    outputs: [VENV],
    inputs: [...new Set(inputs)],
    ...(fromSource === null ? {} : { fromSource }),
  };
}

function describePython(
  requirements: readonly string[],
  pyproject: string | null,
  setupPy: string | null,
): string {
  const parts = [...requirements];
  if (pyproject !== null) parts.push('pyproject.toml');
  if (setupPy !== null) parts.push('setup.py');
  return parts.length > 0 ? parts.join(', ') : 'requirements files';
}

/** PEP 685 name normalization, as pip compares extras. */
function normalizeExtra(name: string): string {
  return name.toLowerCase().replace(/[-_.]+/g, '-');
}

/**
 * The test extras among the declared ones, in TEST_EXTRAS order, written in their canonical form
 * (pip normalizes extras, so `Test` in the project is installed by `.[test]`).
 */
export function chooseExtras(declared: readonly string[]): string[] {
  const normalized = new Set(declared.filter((d) => SAFE_EXTRA.test(d)).map(normalizeExtra));
  return TEST_EXTRAS.filter((e) => normalized.has(e) && SAFE_EXTRA.test(e));
}

/** At most this many files are followed through `-r` / `-c`. */
const MAX_REFERENCED_REQUIREMENTS = 50;

/**
 * Files that requirement files pull in with `-r` / `-c`, at any depth, each path taken relative to
 * the file that names it (as pip does): the cache key, and what setup-trust.ts reads for packages
 * installed from the repository. A reference this cannot follow (a URL, a path outside the
 * repository) is left to pip.
 */
async function referencedRequirementFiles(
  probe: WorkspaceProbe,
  files: readonly string[],
): Promise<string[]> {
  const seen = new Set(files);
  const found: string[] = [];
  const queue = [...files];
  for (let file = queue.shift(); file !== undefined; file = queue.shift()) {
    const text = (await probe.readText(file)) ?? '';
    const dir = file.includes('/') ? file.slice(0, file.lastIndexOf('/')) : '';
    for (const m of text.matchAll(/^\s*(?:-r|-c|--requirement|--constraint)[\s=]+(\S+)/gm)) {
      const ref = normalizeRelPath(dir === '' ? (m[1] ?? '') : `${dir}/${m[1] ?? ''}`);
      if (ref === null || unsafeRelPath(ref) !== null || seen.has(ref)) continue;
      if (found.length >= MAX_REFERENCED_REQUIREMENTS) return found;
      seen.add(ref);
      found.push(ref);
      queue.push(ref);
    }
  }
  return found;
}

/** `a/./b/../c` → `a/c`; null when it leaves the repository or is absolute. */
function normalizeRelPath(path: string): string | null {
  if (path.startsWith('/')) return null;
  const out: string[] = [];
  for (const part of path.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') {
      if (out.pop() === undefined) return null;
    } else out.push(part);
  }
  return out.length === 0 ? null : out.join('/');
}

/**
 * Just enough of TOML for this: the table headers (`[a.b]`, not arrays of tables) and, per table,
 * the keys at its top level. Values spanning lines (arrays, multi-line strings) are skipped.
 */
export function scanToml(text: string): { tables: string[]; keys: Map<string, string[]> } {
  const tables: string[] = [];
  const keys = new Map<string, string[]>();
  let current = '';
  let depth = 0;
  let inMultiline: string | null = null;
  for (const line of text.split('\n')) {
    if (inMultiline !== null) {
      if (line.includes(inMultiline)) inMultiline = null;
      continue;
    }
    if (depth === 0) {
      const arrayHeader = /^\s*\[\[([^[\]]+)\]\]\s*(?:#.*)?$/.exec(line);
      if (arrayHeader !== null) {
        // Keys below an array of tables belong to its elements, not to the table before it.
        current = `[[${(arrayHeader[1] ?? '').trim()}]]`;
        continue;
      }
      const header = /^\s*\[([^[\]]+)\]\s*(?:#.*)?$/.exec(line);
      if (header !== null) {
        current = (header[1] ?? '')
          .split('.')
          .map((p) => p.trim().replace(/^["']|["']$/g, ''))
          .join('.');
        tables.push(current);
        continue;
      }
      const key = /^\s*(?:"([^"]+)"|'([^']+)'|([A-Za-z0-9_-]+))\s*=/.exec(line);
      if (key !== null) {
        const list = keys.get(current) ?? [];
        list.push(key[1] ?? key[2] ?? key[3] ?? '');
        keys.set(current, list);
      }
    }
    const code = stripStringsAndComment(line);
    const multi = /("""|''')/.exec(code.rest);
    if (multi !== null) {
      const after = code.rest.slice(multi.index + 3);
      if (!after.includes(multi[1] ?? '')) inMultiline = multi[1] ?? null;
    }
    for (const ch of code.code) {
      if (ch === '[' || ch === '{') depth++;
      else if ((ch === ']' || ch === '}') && depth > 0) depth--;
    }
    // A header line never reaches here, so its brackets are not counted.
  }
  return { tables, keys };
}

/** The line without quoted strings and comment (for bracket counting), and the raw line. */
function stripStringsAndComment(line: string): { code: string; rest: string } {
  let code = '';
  let quote: string | null = null;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i] ?? '';
    if (quote !== null) {
      if (ch === '\\' && quote === '"') i++;
      else if (ch === quote) quote = null;
      continue;
    }
    if (ch === '#') break;
    if (ch === '"' || ch === "'") {
      if (line.startsWith(ch.repeat(3), i)) break;
      quote = ch;
      continue;
    }
    code += ch;
  }
  return { code, rest: line };
}

/** Keys of `extras_require` in setup.py: a dict literal, `dict(...)`, or a name assigned one. */
export function setupPyExtras(source: string): string[] {
  const at = /extras_require\s*=\s*/.exec(source);
  if (at === null) return [];
  let start = at.index + at[0].length;
  const ident = /^([A-Za-z_]\w*)\s*(?:[,)\n])/.exec(source.slice(start));
  if (ident !== null && ident[1] !== 'dict') {
    const assigned = new RegExp(`^\\s*${ident[1] ?? ''}\\s*=\\s*`, 'm').exec(source);
    if (assigned === null) return [];
    start = assigned.index + assigned[0].length;
  }
  const rest = source.slice(start);
  if (rest.startsWith('{')) {
    const body = topLevel(rest, '{', '}');
    return [...body.matchAll(/(["'])((?:(?!\1)[^\n])+)\1\s*:/g)].map((m) => m[2] ?? '');
  }
  if (rest.startsWith('dict(')) {
    const body = topLevel(rest.slice(4), '(', ')');
    return [...body.matchAll(/(?:^|,)\s*([A-Za-z_]\w*)\s*=/g)].map((m) => m[1] ?? '');
  }
  return [];
}

/**
 * The text directly inside the first bracket pair, with nested brackets' contents left out. Quoted
 * strings are kept whole (their brackets do not count).
 */
function topLevel(text: string, open: string, close: string): string {
  let depth = 0;
  let out = '';
  let quote: string | null = null;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i] ?? '';
    if (quote !== null) {
      if (depth === 1) out += ch;
      if (ch === '\\') {
        if (depth === 1) out += text[i + 1] ?? '';
        i++;
      } else if (ch === quote) quote = null;
      continue;
    }
    if (ch === '"' || ch === "'") {
      quote = ch;
      if (depth === 1) out += ch;
      continue;
    }
    if (ch === open || '[({'.includes(ch)) {
      depth++;
      if (depth === 1) continue;
    } else if (ch === close || '])}'.includes(ch)) {
      depth--;
      if (depth === 0) break;
    }
    if (depth === 1) out += ch;
  }
  return out;
}

/** Keys of the `[options.extras_require]` section of setup.cfg. */
export function setupCfgExtras(text: string): string[] {
  const out: string[] = [];
  let inSection = false;
  for (const line of text.split('\n')) {
    const section = /^\s*\[([^\]]+)\]/.exec(line);
    if (section !== null) {
      inSection = (section[1] ?? '').trim() === 'options.extras_require';
      continue;
    }
    const key = inSection ? /^([A-Za-z0-9._-]+)\s*[=:]/.exec(line) : null;
    if (key !== null) out.push(key[1] ?? '');
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------
// Shared

/** Why a repository-given path must not be used, or null for a plain relative path. */
export function unsafeRelPath(path: string): string | null {
  if (path.startsWith('/')) return `${JSON.stringify(path.slice(0, 80))} is absolute`;
  if (!/^[A-Za-z0-9._/-]+$/.test(path))
    return `${JSON.stringify(path.slice(0, 80))} has characters other than A-Z a-z 0-9 . _ / -`;
  if (path.split('/').includes('..')) return `${JSON.stringify(path.slice(0, 80))} leaves the repository`;
  if (path.startsWith('-')) return `${JSON.stringify(path.slice(0, 80))} starts with -`;
  return null;
}

async function existing(probe: WorkspaceProbe, paths: readonly string[]): Promise<string[]> {
  const out: string[] = [];
  for (const p of paths) if (await probe.exists(p)) out.push(p);
  return out;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
