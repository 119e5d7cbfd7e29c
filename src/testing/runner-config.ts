/**
 * Runner configuration: the files that decide how a repository's tests run, as opposed to the code
 * they test. Principle 6 says a change never decides how its own proof is run, so the verdict's
 * final and `without_fix` runs, and eval grading, take these files from the base commit whenever a
 * change touches them (a hostile change's `.npmrc` with `node-options=--require ./forge.cjs`, or a
 * root `conftest.py` that reports every test passed, would otherwise pass any test it likes).
 *
 * Three ways a path is runner configuration (docs/configuration.md lists them for users):
 * 1. Its folder: installed dependencies and tool state (`node_modules/`, `vendor/`, `.venv/`,
 *    `site-packages/`, `.yarn/`, `.cargo/`, …). A change has no business there. Nor in a new
 *    root module that stands in for the runner (`_pytest/`, `pluggy.py`).
 * 2. Its name (RUNNER_FILES below): `.npmrc`, jest/vitest/vite/mocha/ava/tap/babel/TypeScript
 *    configs, `conftest.py` at any depth, `pytest.ini`, `tox.ini`, `sitecustomize.py`, `*.pth`,
 *    `go.mod`, `Cargo.toml`, a Makefile when the tests are run by make, … Three files also hold
 *    what a fix may legitimately change, so only their runner parts are compared:
 *    - `package.json`: fields (one added or removed counts whole: it changes its folder's module
 *      type and resolution whatever it holds). Those in PACKAGE_FIELDS_FROM_CHANGE (dependencies, metadata, entry
 *      points such as `main` and `exports`: the code's, not the runner's) keep the change's values;
 *      every other field (`scripts` as far as the test command reaches, `jest`, `mocha`, `ava`,
 *      `type`, `imports`, `config`, …, including fields no tool known here reads) takes the base's.
 *      A change that only edits dependencies is not runner configuration at all; one that also
 *      edits `jest` is run with the change's dependencies and the base's `jest` (a field-level
 *      merge, written as JSON). Dependencies are installed at setup from the base anyway: the
 *      merge keeps what the code can see (`main`, `exports`, `version`) and nothing the runner reads.
 *    - `pyproject.toml` and `setup.cfg`: tables and sections. Those only a build or another tool
 *      reads (`[project]`, `[build-system]`, `[tool.black]`, `[metadata]`, `[options]`, …) may
 *      differ; when any other one differs (`[tool.pytest.ini_options]`, `[tool:pytest]`,
 *      `[tool.coverage.run]`, or text before the first table) the whole file is the base's. A
 *      TOML or INI file is not rewritten here: taking the base's file whole is always well-formed,
 *      and at test time the tables a fix edits there (dependencies, metadata) are not read.
 * 3. What the base names: files that the base commit's runner configuration and test command name
 *    (jest's `setupFiles`, mocha's `require`, `node --require ./x`, `-p plugin` in pytest's
 *    `addopts`, `pytest_plugins` in a conftest, the script `npm test` runs, and what a setup file
 *    it names requires in turn, one level down). A base config's tests (jest's `testMatch`, mocha's `spec`) are not
 *    configuration; neither is a test file that the test command merely names (`node test.js`):
 *    the change's test files are judged by the `without_fix` run instead.
 *
 * Everything here is pure: a RunnerConfigSource (agent/runner-config-guard.ts, over git in the
 * sandbox) reads the trees; the texts it gives are untrusted data, parsed defensively and never
 * interpreted as code or shell.
 *
 * What this does not cover, by design: code under test runs in the test process, so a change's
 * own source can still tamper with its runner (patch `assert` at import time); that is a change a
 * reviewer reads in the diff, not configuration that hides beside it.
 */
import { isTestPath } from './test-paths.js';

/** An entry of a git tree: mode (`100644`, `100755`, `120000`, `160000`), blob id, path. */
export interface TreeEntry {
  readonly path: string;
  readonly mode: string;
  readonly blob: string;
}

/** A path the change adds, modifies or deletes; `base` null: added; `change` null: deleted. */
export interface TreeChange {
  readonly path: string;
  readonly base: TreeEntry | null;
  readonly change: TreeEntry | null;
}

/** Reads the base tree and the change's tree (implemented over git in the sandbox). */
export interface RunnerConfigSource {
  /** Every path that differs between the base tree and the change's tree (no rename detection). */
  changes(): Promise<readonly TreeChange[]>;
  /** The base tree's blobs whose paths match these git `:(glob)` patterns (without the magic). */
  listBase(globs: readonly string[]): Promise<readonly TreeEntry[]>;
  /** Which of these paths are blobs of the base tree (mode unknown: `''`). */
  findBase(paths: readonly string[]): Promise<readonly TreeEntry[]>;
  /** UTF-8 text of blobs by id; a blob that is too large or unreadable is absent. */
  readBlobs(blobs: readonly string[]): Promise<ReadonlyMap<string, string>>;
}

/** A changed path the proof runs with the base's version of, and why, in words for the PR. */
export interface RunnerConfigTouch {
  readonly path: string;
  readonly why: string;
}

/** How to turn the change's tree into the tree the proof runs on. */
export type RunnerConfigEntry =
  /** The base's blob (the path is in the base). */
  | { readonly path: string; readonly mode: string; readonly blob: string }
  /** Not there (the change added it). */
  | { readonly path: string; readonly remove: true }
  /** Written by the harness: a package.json with the base's runner fields. */
  | { readonly path: string; readonly content: string };

export interface RunnerConfigChange {
  /** Sorted by path; empty when the change leaves how tests run alone. */
  readonly touched: readonly RunnerConfigTouch[];
  readonly entries: readonly RunnerConfigEntry[];
}

export const NO_RUNNER_CONFIG: RunnerConfigChange = { touched: [], entries: [] };

/** A set of words given as whitespace-separated text. */
function words(text: string): ReadonlySet<string> {
  return new Set(text.split(/\s+/).filter((w) => w !== ''));
}

type Scan = 'js' | 'json' | 'ini' | 'toml' | 'conftest' | 'shell' | 'none';
type Compare = 'file' | 'package-json' | 'toml' | 'ini';

interface RunnerFile {
  /**
   * File names as globs (`*` any run of characters but `/`), matched against a path's last segment
   * wherever it is; a name with a `/` is a whole path from the root.
   */
  readonly names: readonly string[];
  readonly what: string;
  readonly compare: Compare;
  /** How its text names other files; `none`: its text is not read. */
  readonly scan: Scan;
  /** Only when the base's test command or the scripts it runs name this tool (`make test`). */
  readonly when?: RegExp;
}

/**
 * Runner configuration by name, per ecosystem. A name here is configuration wherever it is: a
 * nested `conftest.py` applies to its folder, a nested `package.json` or `.npmrc` to a workspace.
 */
export const RUNNER_FILES: readonly RunnerFile[] = [
  // Node: package manager and runtime settings (node-options, preloads, hooks, resolution).
  {
    names: ['.npmrc', '.yarnrc', '.yarnrc.yml', '.pnpmfile.cjs', 'bunfig.toml'],
    what: 'package manager settings, which can preload code into every test process',
    compare: 'file',
    scan: 'ini',
  },
  {
    names: ['.pnp.cjs', '.pnp.loader.mjs', 'deno.json', 'deno.jsonc'],
    what: 'module resolution and runtime settings',
    compare: 'file',
    scan: 'json',
  },
  { names: ['package.json'], what: 'package.json', compare: 'package-json', scan: 'json' },
  // Test runners, their setup files by convention, and coverage wrappers.
  {
    names: ['jest.config.*', 'jest.setup.*', 'jest-setup.*', 'jest.preset.*', 'jest-preset.*'],
    what: 'jest configuration',
    compare: 'file',
    scan: 'js',
  },
  {
    names: ['setupTests.*', 'setup-tests.*'],
    what: 'test setup file loaded by convention, as create-react-app does',
    compare: 'file',
    scan: 'js',
  },
  {
    names: ['vitest.config.*', 'vitest.workspace.*', 'vitest.projects.*', 'vitest.setup.*', 'vite.config.*'],
    what: 'vitest or vite configuration; vitest reads vite.config too',
    compare: 'file',
    scan: 'js',
  },
  {
    names: ['.mocharc', '.mocharc.*', 'mocha.opts'],
    what: 'mocha configuration',
    compare: 'file',
    scan: 'js',
  },
  {
    names: ['ava.config.*', '.taprc', '.taprc.*', 'tap.config.*', '.labrc.*', 'jasmine.json', 'karma.conf.*'],
    what: 'test runner configuration',
    compare: 'file',
    scan: 'js',
  },
  {
    names: ['playwright.config.*', 'cypress.config.*', 'wdio.conf.*'],
    what: 'test runner configuration',
    compare: 'file',
    scan: 'js',
  },
  {
    names: ['.c8rc', '.c8rc.*', '.nycrc', '.nycrc.*'],
    what: 'coverage tool configuration, which wraps the test run',
    compare: 'file',
    scan: 'js',
  },
  // Transforms every test goes through.
  {
    names: ['babel.config.*', '.babelrc', '.babelrc.*', '.swcrc', 'tsconfig*.json', 'jsconfig.json'],
    what: 'source transforms the tests go through: babel, swc, TypeScript paths',
    compare: 'file',
    scan: 'json',
  },
  // Environment files that test tooling loads (vite, dotenv in setup files).
  {
    names: ['.env', '.env.*'],
    what: 'environment file loaded by test tooling',
    compare: 'file',
    scan: 'ini',
  },
  // Lint steps that are part of the test command (`"test": "xo && ava"`).
  {
    names: ['.eslintrc', '.eslintrc.*', 'eslint.config.*'],
    what: 'configuration of a lint step in the test command',
    compare: 'file',
    scan: 'js',
    when: /\beslint\b/,
  },
  {
    names: ['.xo-config', '.xo-config.*', 'xo.config.*'],
    what: 'configuration of a lint step in the test command',
    compare: 'file',
    scan: 'js',
    when: /\bxo\b/,
  },
  // Python.
  {
    names: ['conftest.py'],
    what: 'pytest conftest, which runs in the test process for every test below its folder',
    compare: 'file',
    scan: 'conftest',
  },
  {
    names: ['pytest.ini', '.pytest.ini', 'tox.ini', '.coveragerc'],
    what: 'pytest/tox/coverage configuration',
    compare: 'file',
    scan: 'ini',
  },
  { names: ['setup.cfg'], what: 'setup.cfg', compare: 'ini', scan: 'ini' },
  { names: ['pyproject.toml'], what: 'pyproject.toml', compare: 'toml', scan: 'toml' },
  {
    names: ['sitecustomize.py', 'usercustomize.py', '*.pth', 'noxfile.py'],
    what: 'Python start-up hook, which runs in every interpreter that sees it',
    compare: 'file',
    scan: 'none',
  },
  // Go and Rust: module replacements, cargo runners and flags.
  {
    names: ['go.mod', 'go.work', 'Cargo.toml', 'rust-toolchain', 'rust-toolchain.toml'],
    what: 'module or build configuration: replacements, runners, flags',
    compare: 'file',
    scan: 'none',
  },
  // Task runners, when the test command goes through them.
  {
    names: ['Makefile', 'makefile', 'GNUmakefile', '*.mk'],
    what: 'Makefile of the test command',
    compare: 'file',
    scan: 'shell',
    when: /\bmake\b/,
  },
  {
    names: ['justfile', 'Justfile', '.justfile', 'Taskfile.yml', 'Taskfile.yaml'],
    what: 'task runner file of the test command',
    compare: 'file',
    scan: 'shell',
    when: /\b(?:just|task)\b/,
  },
  // The harness's own settings (the test command itself).
  {
    names: ['.github/issue-agent.yml', '.github/issue-agent.yaml'],
    what: "Issue Agent's settings, which name the test command",
    compare: 'file',
    scan: 'none',
  },
];

function globRegExp(glob: string): RegExp {
  const body = glob.replace(/[.+^${}()|[\]\\]/g, '\\$&').replaceAll('*', '[^/]*');
  return new RegExp(`^${body}$`);
}

const MATCHERS = RUNNER_FILES.map((rule) => ({
  rule,
  names: rule.names.map((n) => ({ whole: n.includes('/'), re: globRegExp(n) })),
}));

/** Folders whose every file is runner configuration: installed dependencies and tool state. */
const RUNNER_FOLDERS =
  /^(?:node_modules|bower_components|jspm_packages|vendor|\.venv|venv|site-packages|dist-packages|__pypackages__|\.tox|\.nox|\.yarn|\.pnpm-store|\.cargo)$/;

/**
 * package.json fields a change's values are kept for: dependencies (installed at setup from the
 * base anyway), metadata, and the package's entry points (what `require('pkg')` resolves to is the
 * code's business). Every other field, known or not, is the runner's: the base's is used.
 */
export const PACKAGE_FIELDS_FROM_CHANGE: ReadonlySet<string> = words(`
  name version description keywords homepage bugs license licenses author contributors
  maintainers funding repository readme files main module browser types typings exports bin
  man sideEffects unpkg jsdelivr dependencies devDependencies peerDependencies
  peerDependenciesMeta optionalDependencies bundleDependencies bundledDependencies engines os
  cpu private publishConfig
`);

/** pyproject.toml tables (and their subtables) only a build or another tool reads. */
const TOML_TABLES_FROM_CHANGE =
  /^(?:project|build-system|dependency-groups|tool\.(?:setuptools|setuptools_scm|poetry|flit|hatch\.(?:version|build|metadata)|pdm\.(?:version|build)|black|ruff|isort|mypy|pyright|pylint|codespell|towncrier|bumpversion|commitizen|semantic_release|maturin|cibuildwheel|scikit-build|check-manifest|pydocstyle|interrogate|docformatter|autopep8|yapf))(?:\.|$)/;

/** setup.cfg sections only a build or another tool reads. */
const INI_SECTIONS_FROM_CHANGE =
  /^(?:metadata|options(?:\..+)?|bdist_wheel|sdist|egg_info|flake8|pycodestyle|pydocstyle|isort|mypy(?:-.+)?|bumpversion(?::.+)?|codespell|check-manifest|versioneer)$/;

/**
 * Keys whose values select which tests run or where output goes: the strings there are tests,
 * folders or globs, not configuration that runs (mocha's `spec`, jest's `testMatch`, ava's `files`,
 * pytest's `testpaths`, tsconfig's `include`).
 */
const SELECTION_KEYS = words(`
  spec specs testMatch testRegex testPathPattern testPathPatterns testPathIgnorePatterns roots
  include exclude files ignore ignores ignorePatterns collectCoverageFrom coverageDirectory
  coveragePathIgnorePatterns modulePathIgnorePatterns watchPathIgnorePatterns testpaths
  python_files python_classes python_functions norecursedirs extension extensions
  cacheDirectory outputFile outDir rootDir rootdir reportsDirectory reportDir tempDirectory
  displayName name
`);

/** Command-line options whose value is code that runs before or around the tests. */
const SETUP_OPTIONS = words(`
  -r --require --import --loader --experimental-loader --preload --file --setup --setupFiles
  --setupFilesAfterEnv --globalSetup --globalTeardown --testRunner --testEnvironment
  --testSequencer --resolver --reporter --reporters --test-reporter --config --config-file
  --configFile -c --rcfile --project --workspace --root --dir
`);

/** Extensions of files that a command or a config can run (a Makefile's `.c` sources are not). */
const SCRIPT_EXT = /\.(?:[cm]?[jt]sx?|json5?|jsonc|py|pyi|sh|bash|zsh|pl|rb|php|ya?ml|toml|ini|cfg|mk|node)$/;

/** Base files scanned at most, texts larger than this are not scanned, and transitive levels. */
export const MAX_SCANNED_FILES = 400;
export const MAX_SCANNED_BYTES = 256 * 1024;
const REFERENCE_DEPTH = 1;

/** How a base text names a file: a path (relative to its folder or the root), or a Python module. */
type Ref =
  | { readonly kind: 'path'; readonly from: string; readonly value: string; readonly setup: boolean }
  | { readonly kind: 'module'; readonly from: string; readonly value: string };

function basename(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}

function dirname(path: string): string {
  const i = path.lastIndexOf('/');
  return i < 0 ? '' : path.slice(0, i);
}

function ruleFor(path: string): RunnerFile | undefined {
  const name = basename(path);
  return MATCHERS.find((m) => m.names.some((n) => n.re.test(n.whole ? path : name)))?.rule;
}

/**
 * Python modules a new file at the root would stand in for: `python -m pytest` puts the root first
 * on `sys.path`, so a change that adds `_pytest/` or `pluggy.py` there replaces the runner itself.
 * Only added files count: a repository that is one of these projects edits its own code. (`py`
 * counts as a file only: a `py/` folder is a common name for a monorepo's Python half.)
 */
const SHADOWED_MODULES =
  /^(?:(?:pytest|_pytest|pluggy|iniconfig|unittest|doctest|nose2?)(?:\.py$|\/)|py\.py$)/;

/** The folder rule: a path inside installed dependencies or tool state. */
export function inRunnerFolder(path: string): boolean {
  return path
    .split('/')
    .slice(0, -1)
    .some((d) => RUNNER_FOLDERS.test(d));
}

/**
 * Whether a path is runner configuration by its name or folder alone (package.json, pyproject.toml
 * and setup.cfg count: whether a given edit of them is, depends on the fields). Rules with a `when`
 * count only when `tools` (the test command and the scripts it runs) names the tool.
 */
export function isRunnerConfigPath(path: string, tools = ''): boolean {
  if (inRunnerFolder(path)) return true;
  const rule = ruleFor(path);
  return rule !== undefined && (rule.when === undefined || rule.when.test(tools));
}

/** Every glob that lists the base's scanned configuration files. */
export const SCANNED_GLOBS: readonly string[] = RUNNER_FILES.filter((r) => r.scan !== 'none').flatMap((r) =>
  r.names.flatMap((n) => (n.includes('/') ? [n] : [n, `**/${n}`])),
);

/**
 * Decides which of a change's paths decide how tests run, and the entries that give the tree the
 * proof runs on. `testCommand` is the base's (null: none known; then only names and folders count).
 */
export async function findRunnerConfig(
  source: RunnerConfigSource,
  testCommand: string | null,
): Promise<RunnerConfigChange> {
  const changes = (await source.changes()).filter((c) => !c.path.includes('\n'));
  if (changes.length === 0) return NO_RUNNER_CONFIG;

  // The base's configuration files (shallowest first, capped) and the change's structured files.
  const listed = [...(await source.listBase(SCANNED_GLOBS))]
    .filter((e) => !inRunnerFolder(e.path))
    .sort((a, b) => depth(a.path) - depth(b.path) || a.path.localeCompare(b.path))
    .slice(0, MAX_SCANNED_FILES);
  const structured = changes.filter((c) => {
    const compare = ruleFor(c.path)?.compare;
    return compare === 'package-json' || compare === 'toml' || compare === 'ini';
  });
  const texts = await source.readBlobs([
    ...new Set([
      ...listed.map((e) => e.blob),
      ...structured
        .flatMap((c) => [c.base?.blob, c.change?.blob])
        .filter((b): b is string => b !== undefined),
    ]),
  ]);

  const rootPackage = parseObject(
    textOf(
      texts,
      listed.find((e) => e.path === 'package.json'),
    ),
  );
  const chain = testCommand === null ? [] : scriptChain(rootScripts(rootPackage), testCommand);
  const tools = [testCommand ?? '', ...chain.map((c) => c.text)].join('\n');

  // Names in the base: its configuration files, the test command and the scripts it runs.
  const refs: Ref[] = [];
  if (testCommand !== null) refs.push(...shellRefs(testCommand, 'the test command'));
  for (const s of chain) refs.push(...shellRefs(s.text, `package.json scripts.${s.name}`));
  for (const e of listed) {
    const rule = ruleFor(e.path);
    if (rule === undefined || (rule.when !== undefined && !rule.when.test(tools))) continue;
    const text = texts.get(e.blob);
    if (text === undefined) continue;
    if (e.mode === '120000') {
      refs.push({ kind: 'path', from: e.path, value: text.trim(), setup: true });
      continue;
    }
    refs.push(...configRefs(e.path, text, rule.scan));
  }
  // The files those name, and what they name in turn (setup files that require helpers).
  let frontier = refs;
  const scanned = new Set(listed.map((e) => e.path));
  for (let level = 0; level < REFERENCE_DEPTH && frontier.length > 0; level++) {
    // Only what loads as setup: a test file or a script that a command names is not read further.
    const candidates = [
      ...new Set(frontier.flatMap((r) => (r.kind === 'path' && r.setup ? candidatesOf(r) : []))),
    ]
      .filter((p) => !scanned.has(p) && !inRunnerFolder(p) && SCRIPT_EXT.test(p))
      .slice(0, MAX_SCANNED_FILES);
    if (candidates.length === 0) break;
    const found = await source.findBase(candidates);
    const bodies = await source.readBlobs(found.map((e) => e.blob));
    frontier = [];
    for (const e of found) {
      scanned.add(e.path);
      const text = bodies.get(e.blob);
      if (text === undefined) continue;
      frontier.push(...scriptRefs(e.path, text));
    }
    refs.push(...frontier);
  }

  const touched: RunnerConfigTouch[] = [];
  const entries: RunnerConfigEntry[] = [];
  const fromBase = (c: TreeChange, why: string): void => {
    touched.push({ path: c.path, why });
    entries.push(
      c.base === null
        ? { path: c.path, remove: true }
        : { path: c.path, mode: c.base.mode, blob: c.base.blob },
    );
  };
  for (const c of changes) {
    if (inRunnerFolder(c.path)) {
      fromBase(c, 'installed dependencies or tool state');
      continue;
    }
    if (c.base === null && SHADOWED_MODULES.test(c.path)) {
      fromBase(c, 'a module that stands in for the test runner or the standard library');
      continue;
    }
    const rule = ruleFor(c.path);
    if (rule !== undefined && (rule.when === undefined || rule.when.test(tools))) {
      const before = c.base === null ? null : (texts.get(c.base.blob) ?? null);
      const after = c.change === null ? null : (texts.get(c.change.blob) ?? null);
      if (
        rule.compare !== 'file' &&
        ((c.base !== null && before === null) || (c.change !== null && after === null))
      ) {
        // Too large to read (or not text): nothing shows which parts changed.
        fromBase(c, `${rule.what}, too large to compare`);
        continue;
      }
      if (rule.compare === 'package-json') {
        const root = c.path === 'package.json';
        const merged = mergePackageJson(before, after, root ? chain.map((s) => s.name) : null);
        if (merged === null) continue;
        touched.push({ path: c.path, why: `fields ${merged.fields.join(', ')}` });
        entries.push(
          merged.content === null || c.change === null || c.change.mode === '120000'
            ? c.base === null
              ? { path: c.path, remove: true }
              : { path: c.path, mode: c.base.mode, blob: c.base.blob }
            : { path: c.path, content: merged.content },
        );
        continue;
      }
      if (rule.compare === 'toml' || rule.compare === 'ini') {
        const differing = differingSections(before, after, rule.compare);
        if (differing.length === 0) continue;
        fromBase(c, `${rule.compare === 'toml' ? 'tables' : 'sections'} ${differing.join(', ')}`);
        continue;
      }
      fromBase(c, rule.what);
      continue;
    }
    const by = refs.find((r) => names(r, c.path));
    if (by !== undefined) fromBase(c, `named by ${by.from}`);
  }
  const order = (a: { path: string }, b: { path: string }): number => a.path.localeCompare(b.path);
  return { touched: touched.sort(order), entries: entries.sort(order) };
}

function depth(path: string): number {
  return path.split('/').length;
}

function textOf(texts: ReadonlyMap<string, string>, entry: TreeEntry | undefined): string | null {
  return entry === undefined || entry.mode === '120000' ? null : (texts.get(entry.blob) ?? null);
}

// ---------------------------------------------------------------------------------------------
// package.json

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

function parseObject(text: string | null): Record<string, Json> | null {
  if (text === null) return null;
  try {
    const v = JSON.parse(text.replace(/^\uFEFF/, '')) as Json;
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? v : null;
  } catch {
    return null;
  }
}

function rootScripts(pkg: Record<string, Json> | null): ReadonlyMap<string, string> {
  const scripts = new Map<string, string>();
  const raw = pkg === null ? undefined : own(pkg, 'scripts');
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return scripts;
  for (const [k, v] of Object.entries(raw)) if (typeof v === 'string') scripts.set(k, v);
  return scripts;
}

function own(o: Record<string, Json>, key: string): Json | undefined {
  return Object.prototype.hasOwnProperty.call(o, key) ? o[key] : undefined;
}

function same(a: Json | undefined, b: Json | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return a === b;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((x, i) => same(x, b[i]));
  }
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => same(own(a, k), own(b, k)));
}

/**
 * The package.json the proof runs with, from the base's and the change's texts (null: absent), or
 * null when the change edits no runner field. `chain`: for the root manifest, the scripts the test
 * command runs (only those count; null: every script counts). `content` null: the base's file as
 * it is (a manifest that is not a JSON object cannot be merged).
 */
export function mergePackageJson(
  base: string | null,
  change: string | null,
  chain: readonly string[] | null,
): { readonly fields: string[]; readonly content: string | null } | null {
  // A manifest added or removed changes its folder's module type and resolution whatever it holds.
  if (base === null || change === null)
    return base === change ? null : { fields: [base === null ? '(added)' : '(deleted)'], content: null };
  const b = parseObject(base);
  const c = parseObject(change);
  if (b === null || c === null)
    return base === change ? null : { fields: ['(not a JSON object)'], content: null };
  const fields: string[] = [];
  for (const key of [...new Set([...Object.keys(b), ...Object.keys(c)])]) {
    if (PACKAGE_FIELDS_FROM_CHANGE.has(key)) continue;
    if (key === 'scripts' && chain !== null) {
      const bs = own(b, key);
      const cs = own(c, key);
      const get = (s: Json | undefined, n: string): Json | undefined =>
        typeof s === 'object' && s !== null && !Array.isArray(s) ? own(s, n) : undefined;
      const changed = chain.filter((n) => !same(get(bs, n), get(cs, n)));
      // A script the change adds and the changed chain runs is caught by the chain's own edit.
      for (const n of changed) fields.push(`scripts.${n}`);
      continue;
    }
    if (!same(own(b, key), own(c, key))) fields.push(key);
  }
  if (fields.length === 0) return null;
  // The change's fields in its order, runner fields replaced by the base's, then base-only ones.
  const merged: [string, Json][] = [];
  for (const key of Object.keys(c)) {
    const from = PACKAGE_FIELDS_FROM_CHANGE.has(key) ? c : b;
    const v = own(from, key);
    if (v !== undefined) merged.push([key, v]);
  }
  for (const key of Object.keys(b)) {
    if (!PACKAGE_FIELDS_FROM_CHANGE.has(key) && own(c, key) === undefined) {
      const v = own(b, key);
      if (v !== undefined) merged.push([key, v]);
    }
  }
  // fromEntries defines own properties, so a `__proto__` key stays data.
  return { fields, content: `${JSON.stringify(Object.fromEntries(merged), null, 2)}\n` };
}

/** npm's and yarn's ways of naming a script in a command line. */
function scriptNames(text: string, scripts: ReadonlyMap<string, string>): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(
    /\b(?:npm|pnpm|yarn|bun)\s+(?:run(?:-script)?\s+|-s\s+|--silent\s+)?([\w:.@/-]+)/g,
  )) {
    const n = m[1] ?? '';
    if (n === 't' || n === 'tst' || n === 'test') out.push('test');
    else if (!['run', 'install', 'ci', 'exec', 'x', 'dlx', 'add'].includes(n)) out.push(n);
  }
  // npm-run-all / run-s / run-p take script names and globs (`test:*`).
  for (const m of text.matchAll(/\b(?:npm-run-all|run-s|run-p)((?:\s+[^\s&|;]+)+)/g)) {
    for (const arg of (m[1] ?? '').trim().split(/\s+/)) {
      if (arg.startsWith('-')) continue;
      if (arg.includes('*')) {
        const prefix = arg.slice(0, arg.indexOf('*'));
        for (const k of scripts.keys()) if (k.startsWith(prefix)) out.push(k);
      } else out.push(arg);
    }
  }
  for (const m of text.matchAll(/["']npm:([\w:.-]+)["']/g)) out.push(m[1] ?? '');
  return out.filter((n) => n !== '');
}

/** The root scripts the test command runs, with npm's `pre`/`post` ones, each with its text. */
function scriptChain(
  scripts: ReadonlyMap<string, string>,
  testCommand: string,
): { readonly name: string; readonly text: string }[] {
  const seen = new Set<string>();
  const out: { name: string; text: string }[] = [];
  let next = scriptNames(testCommand, scripts);
  for (let d = 0; d < 6 && next.length > 0; d++) {
    const now = next;
    next = [];
    for (const n of now.flatMap((x) => [`pre${x}`, x, `post${x}`])) {
      if (seen.has(n)) continue;
      seen.add(n);
      const text = scripts.get(n);
      out.push({ name: n, text: text ?? '' });
      if (text !== undefined) next.push(...scriptNames(text, scripts));
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// pyproject.toml and setup.cfg

/**
 * The runner-relevant parts of a TOML or INI text, by header: everything before the first header
 * (`''`), and each table or section not in the from-change list. A header is any line starting
 * with `[`; a header inside a multi-line string only splits the text more finely, so a change
 * cannot hide a table from this comparison.
 */
function runnerSections(text: string, kind: 'toml' | 'ini'): Map<string, string> {
  const parts = new Map<string, string>();
  let header = '';
  let body: string[] = [];
  const seen = new Map<string, number>();
  const flush = (): void => {
    const keep =
      header === ''
        ? true
        : kind === 'toml'
          ? !TOML_TABLES_FROM_CHANGE.test(tomlName(header))
          : !INI_SECTIONS_FROM_CHANGE.test(header.slice(1, header.lastIndexOf(']')).trim());
    const content = body
      .map((l) => l.trimEnd())
      .filter((l) => l !== '' && !/^\s*[#;]/.test(l))
      .join('\n');
    if (!keep || (header === '' && content === '')) return;
    const n = seen.get(header) ?? 0;
    seen.set(header, n + 1);
    parts.set(`${header}#${n}`, content);
  };
  for (const line of text.split(/\r?\n/)) {
    if (/^\s*\[/.test(line)) {
      flush();
      header = line.trim();
      body = [];
    } else body.push(line);
  }
  flush();
  return parts;
}

/** A TOML header's dotted name (`[tool.pytest.ini_options]` → tool.pytest.ini_options); quoted keys never match the list. */
function tomlName(header: string): string {
  const m = /^\[\[?\s*([A-Za-z0-9_-]+(?:\s*\.\s*[A-Za-z0-9_-]+)*)\s*\]\]?\s*(?:#.*)?$/.exec(header);
  return m === null ? header : (m[1] ?? '').replace(/\s+/g, '');
}

/** Headers of the runner parts that differ between the base's and the change's text. */
function differingSections(base: string | null, change: string | null, kind: 'toml' | 'ini'): string[] {
  if (base === change) return [];
  if (base === null || change === null) return [base === null ? 'added' : 'deleted'];
  const a = runnerSections(base, kind);
  const b = runnerSections(change, kind);
  const out = new Set<string>();
  for (const k of new Set([...a.keys(), ...b.keys()])) {
    if (a.get(k) !== b.get(k)) out.add(k.slice(0, k.lastIndexOf('#')) || '(top level)');
  }
  return [...out];
}

// ---------------------------------------------------------------------------------------------
// Names in texts

/** String literals of JavaScript-like text with their positions; comments skipped. */
function jsLiterals(text: string): { value: string; start: number; end: number }[] {
  const out: { value: string; start: number; end: number }[] = [];
  let i = 0;
  while (i < text.length) {
    const ch = text[i];
    if (ch === '/' && text[i + 1] === '/') {
      const nl = text.indexOf('\n', i);
      i = nl < 0 ? text.length : nl;
    } else if (ch === '/' && text[i + 1] === '*') {
      const close = text.indexOf('*/', i + 2);
      i = close < 0 ? text.length : close + 2;
    } else if (ch === '"' || ch === "'" || ch === '`') {
      let j = i + 1;
      let value = '';
      let dynamic = false;
      while (j < text.length && text[j] !== ch) {
        if (text[j] === '\\') {
          value += text[j + 1] ?? '';
          j += 2;
          continue;
        }
        if (ch !== '`' && text[j] === '\n') break;
        if (ch === '`' && text[j] === '$' && text[j + 1] === '{') dynamic = true;
        value += text.charAt(j);
        j++;
      }
      if (!dynamic) out.push({ value, start: i, end: j + 1 });
      i = j + 1;
    } else i++;
  }
  return out;
}

/** A literal's key: the nearest `key:` before it. */
function keysBefore(text: string): { key: string; end: number }[] {
  const keys: { key: string; end: number }[] = [];
  for (const m of text.matchAll(/(?:([A-Za-z_$][\w$]*)|'([^'\n]*)'|"([^"\n]*)")\s*:(?!:)/g)) {
    keys.push({ key: m[1] ?? m[2] ?? m[3] ?? '', end: m.index + m[0].length });
  }
  return keys;
}

function jsRefs(path: string, text: string, setup: boolean): Ref[] {
  const keys = keysBefore(text);
  const refs: Ref[] = [];
  let k = 0;
  for (const lit of jsLiterals(text)) {
    // A literal followed by `:` is a key, not a value.
    if (/^\s*:(?!:)/.test(text.slice(lit.end, lit.end + 20))) continue;
    while (k < keys.length && (keys[k]?.end ?? 0) <= lit.start) k++;
    const key = keys[k - 1]?.key ?? '';
    if (SELECTION_KEYS.has(key)) continue;
    refs.push(...valueRefs(path, lit.value, setup));
  }
  return refs;
}

/** A string value: options inside it (`--require ./x` in node-options), or a path. */
function valueRefs(from: string, value: string, setup: boolean): Ref[] {
  if (/\s/.test(value.trim())) return shellRefs(value, from, setup);
  const v = value.trim();
  return isPathLike(v) ? [{ kind: 'path', from, value: v, setup }] : [];
}

function jsonRefs(path: string, text: string): Ref[] {
  let parsed: Json;
  try {
    parsed = JSON.parse(text) as Json;
  } catch {
    return jsRefs(path, text, true);
  }
  const refs: Ref[] = [];
  const walk = (v: Json, key: string): void => {
    if (typeof v === 'string') {
      if (!SELECTION_KEYS.has(key)) refs.push(...valueRefs(path, v, true));
    } else if (Array.isArray(v)) for (const x of v) walk(x, key);
    else if (v !== null && typeof v === 'object') for (const [k, x] of Object.entries(v)) walk(x, k);
  };
  if (
    basename(path) === 'package.json' &&
    typeof parsed === 'object' &&
    parsed !== null &&
    !Array.isArray(parsed)
  ) {
    // Scripts are read through the test command's chain; entry points and dependencies are code's.
    for (const [k, x] of Object.entries(parsed)) {
      if (!PACKAGE_FIELDS_FROM_CHANGE.has(k) && k !== 'scripts') walk(x, k);
    }
    return refs;
  }
  walk(parsed, '');
  return refs;
}

/** INI, YAML, TOML and .npmrc: `key = value` / `key: value` lines, values as tokens. */
function lineRefs(path: string, text: string): Ref[] {
  const refs: Ref[] = [];
  let key = '';
  for (const line of text.split(/\r?\n/)) {
    if (/^\s*[#;]/.test(line)) continue;
    if (/^\s*\[/.test(line)) {
      key = '';
      continue;
    }
    const m = /^\s*(?:-\s+)?([\w.-]+)\s*[:=](.*)$/.exec(line);
    let value = line;
    if (m !== null) {
      key = m[1] ?? '';
      value = m[2] ?? '';
    }
    if (SELECTION_KEYS.has(key)) continue;
    refs.push(...shellRefs(value, path, true));
  }
  return refs;
}

function conftestRefs(path: string, text: string): Ref[] {
  const refs: Ref[] = [];
  for (const m of text.matchAll(/^pytest_plugins\s*=\s*([[(]?)/gm)) {
    const start = m.index + m[0].length;
    const open = m[1] ?? '';
    const end = open === '' ? text.indexOf('\n', start) : text.indexOf(open === '[' ? ']' : ')', start);
    const rhs = text.slice(start, end < 0 ? text.length : end);
    for (const s of rhs.matchAll(/(['"])([^'"\n]*)\1/g)) {
      const name = (s[2] ?? '').trim();
      if (/^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$/.test(name))
        refs.push({ kind: 'module', from: path, value: name });
    }
  }
  return refs;
}

function configRefs(path: string, text: string, scan: Scan): Ref[] {
  if (text.length > MAX_SCANNED_BYTES) return [];
  switch (scan) {
    case 'js':
      return /\.(?:json5?|jsonc)$|^\.(?:mocharc|taprc|c8rc|nycrc|babelrc|swcrc)$/.test(basename(path))
        ? jsonOrLines(path, text)
        : /\.ya?ml$/.test(path)
          ? lineRefs(path, text)
          : jsRefs(path, text, true);
    case 'json':
      return jsonRefs(path, text);
    case 'ini':
    case 'toml': {
      // setup.cfg and pyproject.toml: only their runner parts (`packages = ["src/pkg"]` is the build's).
      const compare = ruleFor(path)?.compare;
      if (compare === 'ini' || compare === 'toml')
        return lineRefs(path, [...runnerSections(text, compare).values()].join('\n'));
      return lineRefs(path, text);
    }
    case 'conftest':
      return conftestRefs(path, text);
    case 'shell':
      return text.split('\n').flatMap((l) => shellRefs(l, path));
    case 'none':
      return [];
  }
}

/** `.mocharc` and `.taprc` are JSON or YAML. */
function jsonOrLines(path: string, text: string): Ref[] {
  try {
    JSON.parse(text);
    return jsonRefs(path, text);
  } catch {
    return /^\s*[{[]/.test(text) ? jsRefs(path, text, true) : lineRefs(path, text);
  }
}

/** What a named file names in turn: by its kind (a setup script requiring a helper). */
function scriptRefs(path: string, text: string): Ref[] {
  if (text.length > MAX_SCANNED_BYTES) return [];
  if (/\.py$/.test(path)) {
    return jsLiterals(text).flatMap((l): Ref[] =>
      /^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$/.test(l.value)
        ? [{ kind: 'module', from: path, value: l.value }]
        : isPathLike(l.value)
          ? [{ kind: 'path', from: path, value: l.value, setup: true }]
          : [],
    );
  }
  if (/\.(?:[cm]?[jt]sx?)$/.test(path)) return jsRefs(path, text, true);
  if (/\.(?:json5?|jsonc)$/.test(path)) return jsonRefs(path, text);
  if (/\.(?:ya?ml|toml|ini|cfg)$/.test(path)) return lineRefs(path, text);
  return text.split('\n').flatMap((l) => shellRefs(l, path));
}

/**
 * Names in a command line: the values of options that load code (`--require x`, `-p plugin`,
 * `-c file`), which are setup even when they are test files, and other path-like words, which
 * are not when they name a test file (the tests a command runs are judged by `without_fix`).
 * `setupAll`: every path counts as setup (a config file's value).
 */
function shellRefs(text: string, from: string, setupAll = false): Ref[] {
  const refs: Ref[] = [];
  const words = text.split(/[\s;&|()<>'"`,[\]{}]+/).filter((w) => w !== '');
  for (let i = 0; i < words.length; i++) {
    const word = words[i] ?? '';
    const eq = word.indexOf('=');
    const opt = eq > 0 && word.startsWith('-') ? word.slice(0, eq) : word;
    const inline = eq > 0 && word.startsWith('-') ? word.slice(eq + 1) : null;
    if (opt === '-p' || opt === '-m' || (opt.startsWith('-p') && opt.length > 2 && inline === null)) {
      const value = inline ?? (opt === '-p' || opt === '-m' ? words[++i] : opt.slice(2)) ?? '';
      if (/^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$/.test(value)) refs.push({ kind: 'module', from, value });
      continue;
    }
    if (SETUP_OPTIONS.has(opt)) {
      const value = inline ?? words[i + 1] ?? '';
      if (inline === null) i++;
      if (isPathLike(value)) refs.push({ kind: 'path', from, value, setup: true });
      continue;
    }
    const value = inline ?? word;
    if (!value.startsWith('-') && isPathLike(value))
      refs.push({ kind: 'path', from, value, setup: setupAll });
  }
  return refs;
}

/** A string that may name a repository file: no globs, regexes, URLs, options or spaces. */
function isPathLike(value: string): boolean {
  const v = stripPrefix(value);
  if (v.length === 0 || v.length > 300 || /[\s*?{}[\]|^$()<>!,;\\]|:\/\//.test(v)) return false;
  if (/^(?:-|~|@|node:)/.test(v)) return false;
  return v.includes('/') || /\.[A-Za-z][\w]{0,5}$/.test(v);
}

function stripPrefix(value: string): string {
  return value.replace(/^(?:<rootDir>\/|file:|\$\{__dirname\}\/)/, '');
}

/** Resolves `.`/`..` in a repository-relative path; null when it leaves the repository. */
function normalize(path: string): string | null {
  const out: string[] = [];
  for (const part of path.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') {
      if (out.length === 0) return null;
      out.pop();
    } else out.push(part);
  }
  return out.length === 0 ? null : out.join('/');
}

/** The repository paths a path reference may mean: from its file's folder, or from the root. */
function resolved(ref: Extract<Ref, { kind: 'path' }>): string[] {
  const v = stripPrefix(ref.value);
  if (v.startsWith('/')) return [];
  const folder = dirname(ref.from);
  const out = new Set<string>();
  for (const p of [folder === '' ? v : `${folder}/${v}`, v]) {
    const n = normalize(p);
    if (n !== null) out.add(n);
  }
  return [...out];
}

const RESOLVE_EXT = ['.js', '.cjs', '.mjs', '.ts', '.cts', '.mts', '.jsx', '.tsx', '.json', '.py'];

/** Files a path reference may load, for reading the base's copies (node's extension search). */
function candidatesOf(ref: Extract<Ref, { kind: 'path' }>): string[] {
  return resolved(ref).flatMap((p) => [p, ...RESOLVE_EXT.map((e) => `${p}${e}`)]);
}

function stripExt(path: string): string {
  const name = basename(path);
  const dot = name.lastIndexOf('.');
  return dot <= 0 ? path : path.slice(0, path.length - (name.length - dot));
}

function moduleOf(path: string): string | null {
  if (!path.endsWith('.py')) return null;
  return path
    .slice(0, -3)
    .replace(/\/__init__$/, '')
    .replaceAll('/', '.');
}

/** Whether a reference names a changed path. */
function names(ref: Ref, path: string): boolean {
  if (ref.kind === 'module') {
    const m = moduleOf(path);
    return m !== null && (m === ref.value || m.endsWith(`.${ref.value}`));
  }
  // A command's words name tests and sources too: only scripts that are not tests count (the
  // tests a command runs are judged by `without_fix`; a Makefile's `.c` sources are code).
  if (!ref.setup && (isTestLike(path) || (basename(path).includes('.') && !SCRIPT_EXT.test(path))))
    return false;
  return resolved(ref).some((r) => path === r || stripExt(path) === r);
}

function isTestLike(path: string): boolean {
  return isTestPath(path) || /^(?:tests?|specs?)\.[cm]?[jt]sx?$/.test(basename(path));
}

/**
 * The note a verdict's reason gets when the proof ran with the base's runner configuration: which
 * of the change's files (`total` of them, the first named), so a reader knows the change's own
 * versions were not what was tested.
 */
export function runnerConfigNote(paths: readonly string[], total = paths.length, max = 5): string {
  const shown = paths.slice(0, max);
  const more = total > shown.length ? ` and ${total - shown.length} more` : '';
  return `the change changes how tests run (${shown.join(', ')}${more}), so the tests ran with the base commit's versions of those files`;
}
