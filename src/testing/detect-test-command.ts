/**
 * Works out how to run a repository's own tests from the files it contains: its project files
 * first, then, where they say nothing, its code and tests (read-code.ts).
 *
 * The module is pure: every question about the workspace goes through a WorkspaceProbe, so the same
 * logic runs over the host file system (environment/host-probe.ts), over a sandbox
 * (sandbox-probe.ts), or over an in-memory map in tests. A configured override is the caller's
 * business; this only guesses. detect-project.ts decides the image from the same answer.
 */
import { codeReader, isPythonTestFile, nodeRunsByDefault, type CodeFacts } from './read-code.js';
import type { WorkspaceProbe } from './workspace-probe.js';

export type { WorkspaceProbe } from './workspace-probe.js';

/** The test frameworks whose output parse-test-output.ts understands ('unknown' for anything else). */
export type RunnerKind =
  | 'node-test'
  | 'jest'
  | 'vitest'
  | 'mocha'
  /** node-tap (`tap`). */
  | 'tap'
  | 'ava'
  | 'pytest'
  | 'unittest'
  | 'go'
  | 'cargo'
  | 'make'
  | 'unknown';

export interface TestCommand {
  /** A shell command to run from the repository root. */
  readonly command: string;
  /** The framework the command most likely runs, used as a hint when parsing its output. */
  readonly runner: RunnerKind;
  /** Why this command was picked, e.g. "package.json scripts.test". */
  readonly source: string;
}

/** What `npm init` writes; running it can only fail, so it means "no tests". */
const NPM_PLACEHOLDER = 'no test specified';

/** Scripts reached through `npm run x` are followed this deep when guessing the runner. */
const MAX_SCRIPT_DEPTH = 4;

/**
 * Detection order is fixed and first match wins: a JavaScript project's declared script beats
 * inferred Python, Go and Rust layouts; JavaScript tests without a usable script run with node's own
 * runner when they can; and a Makefile is the last resort because its `test` target usually wraps
 * one of the others anyway.
 *
 * `code`: the reading of the code and tests to use (detect-project.ts passes the one it decides the
 * image from); by default one made for this call, read only if a step needs it.
 */
export async function detectTestCommand(
  files: WorkspaceProbe,
  code: () => Promise<CodeFacts> = codeReader(files),
): Promise<TestCommand | null> {
  return (
    (await detectPackageJson(files)) ??
    (await detectPython(files, code)) ??
    (await detectSimple(files, 'go.mod', 'go test ./... -v', 'go')) ??
    (await detectSimple(files, 'Cargo.toml', 'cargo test', 'cargo')) ??
    (await detectNodeTests(files, code)) ??
    (await detectMake(files))
  );
}

async function detectPackageJson(files: WorkspaceProbe): Promise<TestCommand | null> {
  const text = await files.readText('package.json');
  if (text === null) return null;
  const scripts = readScripts(text);
  const test = scripts.get('test');
  if (test === undefined || test.trim() === '' || test.includes(NPM_PLACEHOLDER)) return null;

  let manager = 'npm';
  if (await files.exists('pnpm-lock.yaml')) manager = 'pnpm';
  else if (await files.exists('yarn.lock')) manager = 'yarn';

  return {
    command: `${manager} test`,
    runner: guessRunnerFromScript(scripts, 'test'),
    source: 'package.json scripts.test',
  };
}

/** The string-valued entries of package.json "scripts"; empty when the file is not valid JSON. */
export function readScripts(packageJson: string): Map<string, string> {
  const scripts = new Map<string, string>();
  let parsed: unknown;
  try {
    parsed = JSON.parse(packageJson);
  } catch {
    return scripts;
  }
  if (!isRecord(parsed)) return scripts;
  const raw = parsed['scripts'];
  if (!isRecord(raw)) return scripts;
  for (const [name, value] of Object.entries(raw)) {
    if (typeof value === 'string') scripts.set(name, value);
  }
  return scripts;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Guesses the framework from a script's text, following `npm run x` / `yarn x` / `pnpm x` into other
 * scripts (bounded depth, cycle-safe) because "test" is often just `npm run lint && npm run test:unit`.
 */
export function guessRunnerFromScript(scripts: ReadonlyMap<string, string>, name: string): RunnerKind {
  const seen = new Set<string>();
  const visit = (scriptName: string, depth: number): RunnerKind => {
    const text = scripts.get(scriptName);
    if (text === undefined || seen.has(scriptName) || depth > MAX_SCRIPT_DEPTH) return 'unknown';
    seen.add(scriptName);
    const direct = runnerFromCommandText(text);
    if (direct !== 'unknown') return direct;
    for (const ref of referencedScripts(text)) {
      const found = visit(ref, depth + 1);
      if (found !== 'unknown') return found;
    }
    return 'unknown';
  };
  return visit(name, 0);
}

/** Maps a command line to the framework it invokes; order matters where one name contains another. */
export function runnerFromCommandText(text: string): RunnerKind {
  if (/\bvitest\b/.test(text)) return 'vitest';
  if (/\bjest\b/.test(text) || /\breact-scripts\s+test\b/.test(text)) return 'jest';
  if (/\bmocha\b/.test(text)) return 'mocha';
  if (/\bava\b/.test(text)) return 'ava';
  // node-tap's bin is `tap` (also `tap run`); "tap" inside another word or after a dash is not it.
  if (/(?:^|[\s;&|(])(?:npx\s+)?tap(?:\s|$)/.test(text)) return 'tap';
  if (/\bnode\b/.test(text) && /(^|\s)--test(\s|$|=)/.test(text)) return 'node-test';
  if (/\bpytest\b/.test(text)) return 'pytest';
  if (/\bunittest\b/.test(text)) return 'unittest';
  if (/\bgo\s+test\b/.test(text)) return 'go';
  if (/\bcargo\s+test\b/.test(text)) return 'cargo';
  return 'unknown';
}

/** Names of scripts a command line runs via the package manager (`npm run x`, `yarn x`, `pnpm run x`). */
function referencedScripts(text: string): string[] {
  const refs: string[] = [];
  const re = /\b(?:npm|pnpm|yarn)\s+(?:run(?:-script)?\s+)?([\w:.-]+)/g;
  for (const match of text.matchAll(re)) {
    const ref = match[1];
    if (ref !== undefined && ref !== 'run' && ref !== 'install') refs.push(ref);
  }
  // `npm test` / `npm t` inside another script means the "test" script.
  return refs.map((ref) => (ref === 't' ? 'test' : ref));
}

/**
 * pytest when something configures it (findPytestMarker) or a test reads as pytest's (read-code.ts:
 * it imports pytest, or has test functions or plain Test classes, which unittest never runs);
 * otherwise unittest's discovery, which needs nothing installed (the local sandbox's host may have
 * no pytest) and runs TestCase classes alone.
 */
async function detectPython(
  files: WorkspaceProbe,
  code: () => Promise<CodeFacts>,
): Promise<TestCommand | null> {
  const pytestSource = await findPytestMarker(files);
  if (pytestSource !== null) return pytestCommand(pytestSource);

  const root = (await files.listDir('.')) ?? [];
  const hasTopLevelTests = root.some(isPythonTestFile);
  let testDir: string | null = null;
  for (const dir of ['tests', 'test']) {
    const entries = await files.listDir(dir);
    if (entries?.some(isPythonTestFile) === true) {
      testDir = dir;
      break;
    }
  }
  const hasProject = root.includes('setup.py') || root.includes('pyproject.toml');
  if (!hasProject && !hasTopLevelTests && testDir === null) return null;

  const python = hasTopLevelTests || testDir !== null ? (await code()).python : null;
  if (python?.style === 'pytest' && python.evidence !== null) {
    const unconfigured = hasProject ? 'no pytest configured' : 'no Python project files';
    return pytestCommand(`${python.evidence} (pytest-style tests; ${unconfigured})`);
  }

  let command = 'python3 -m unittest discover -v';
  if (testDir !== null && !hasTopLevelTests) {
    // Since Python 3.11 discovery from "." only descends into packages (dirs with __init__.py), so a
    // plain tests/ dir must be the start dir. The repo root stays importable because `python3 -m`
    // puts the cwd on sys.path. When tests/ is a package, `-t .` keeps its modules named
    // tests.test_x so relative imports inside the test package still work.
    const isPackage = await files.exists(`${testDir}/__init__.py`);
    command += isPackage ? ` -s ${testDir} -t .` : ` -s ${testDir}`;
  }
  const source =
    testDir !== null && !hasTopLevelTests
      ? `${testDir}/test_*.py`
      : hasProject
        ? 'python project'
        : 'test_*.py';
  const style = python?.style === 'unittest' ? ': unittest.TestCase classes' : '';
  return { command, runner: 'unittest', source: `${source}${style} (no pytest configured)` };
}

function pytestCommand(source: string): TestCommand {
  // -rA lists every test as "PASSED path::name" / "FAILED path::name" so names can be parsed.
  return { command: 'python3 -m pytest -rA', runner: 'pytest', source };
}

/** A path `node --test` may be given as written: plain characters only, never an option. */
const PLAIN_PATH = /^[A-Za-z0-9_@][A-Za-z0-9._@/-]*$/;

/**
 * JavaScript tests with no package.json test script to run them (read-code.ts): node's own runner
 * when a test imports node:test or none uses a framework (each plain script is then one test).
 * Tests written for jest, mocha or another framework get nothing: with no script there is nothing
 * saying how to install and run it. `node --test` alone finds what it runs by default (Node 20 to
 * 24: `*.test.js`, `test/**`, …); other test files (`tests/calc.js`) are named, because node 20
 * takes no glob and node 22 no folder.
 */
async function detectNodeTests(
  files: WorkspaceProbe,
  code: () => Promise<CodeFacts>,
): Promise<TestCommand | null> {
  const js = (await code()).javascript;
  if (js === null || js.tests.length === 0 || js.evidence === null) return null;
  if (js.style !== 'node-test' && js.style !== 'plain') return null;
  const named = js.tests.every(nodeRunsByDefault) ? [] : js.tests.filter((t) => PLAIN_PATH.test(t));
  const manifest = (await files.exists('package.json'))
    ? 'no test script in package.json'
    : 'no package.json';
  return {
    command: ['node --test', ...named].join(' '),
    runner: 'node-test',
    source: `${js.evidence} (${manifest})`,
  };
}

/** The reason to believe the project uses pytest, or null. */
async function findPytestMarker(files: WorkspaceProbe): Promise<string | null> {
  if (await files.exists('pytest.ini')) return 'pytest.ini';
  if (await files.exists('conftest.py')) return 'conftest.py';
  if (await files.exists('tests/conftest.py')) return 'tests/conftest.py';

  const pyproject = await files.readText('pyproject.toml');
  if (pyproject !== null) {
    if (pyproject.includes('[tool.pytest')) return 'pyproject.toml [tool.pytest]';
    // PEP 621 / requirements-style arrays ("pytest>=7") and Poetry tables (pytest = "^7").
    if (/["']pytest\b/.test(pyproject) || /^\s*pytest\s*=/m.test(pyproject)) {
      return 'pyproject.toml dependencies';
    }
  }
  for (const cfg of ['setup.cfg', 'tox.ini']) {
    const text = await files.readText(cfg);
    if (text !== null && (text.includes('[tool:pytest]') || text.includes('[pytest]'))) {
      return `${cfg} [pytest]`;
    }
  }
  const root = (await files.listDir('.')) ?? [];
  for (const name of root.filter((n) => /^requirements.*\.txt$/.test(n)).sort()) {
    const text = await files.readText(name);
    if (text !== null && text.split('\n').some((line) => /^\s*pytest(\b|[-_])/i.test(line))) {
      return `${name} pytest`;
    }
  }
  return null;
}

async function detectSimple(
  files: WorkspaceProbe,
  marker: string,
  command: string,
  runner: RunnerKind,
): Promise<TestCommand | null> {
  return (await files.exists(marker)) ? { command, runner, source: marker } : null;
}

async function detectMake(files: WorkspaceProbe): Promise<TestCommand | null> {
  for (const name of ['GNUmakefile', 'makefile', 'Makefile']) {
    const text = await files.readText(name);
    if (text !== null && hasTestTarget(text)) {
      return { command: 'make test', runner: 'make', source: `${name} test target` };
    }
  }
  return null;
}

/**
 * True when some rule line names a `test` target (`test:`, `test: deps`, `unit test:`), excluding
 * variable assignments (`test := x`, `test ::= x`) and recipe lines (which start with a tab).
 */
export function hasTestTarget(makefile: string): boolean {
  for (const line of makefile.split('\n')) {
    if (line.startsWith('\t') || line.startsWith('#')) continue;
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const after = line.slice(colon + 1);
    // `test := x` / `test ::= x` assign; `test:: deps` is a (double-colon) rule.
    if (after.startsWith('=') || after.startsWith(':=')) continue;
    const targets = line.slice(0, colon).trim().split(/\s+/);
    if (targets.includes('test')) return true;
  }
  return false;
}
