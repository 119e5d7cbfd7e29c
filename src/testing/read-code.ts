/**
 * What a repository's code and tests say about its language and test runner, for when its project
 * files do not say it (no package.json test script, no pytest configuration, no manifest at all):
 * the Python and JavaScript files at the root, in its packages, `src/`, `lib/` and test folders, and
 * the style of its tests, read from their text (pytest's plain functions, unittest's TestCase
 * classes, node:test's import).
 *
 * Pure and bounded, like detect-test-command.ts: every question goes through the WorkspaceProbe, at
 * most MAX_LOOKUPS listings and existence checks, at most MAX_READS test files read and MAX_BYTES of
 * text in all (only the first MAX_FILE_CHARS of a file are looked at). A probe answers null or false
 * for anything odd, so this never throws; what is past the budget is simply not known.
 */
import type { WorkspaceProbe } from './workspace-probe.js';

/** Directory listings plus `__init__.py` checks. */
const MAX_LOOKUPS = 16;
/** Test files read to learn their style. */
const MAX_READS = 12;
/** Characters of text read in all (a file counts whole: the probe reads it whole). */
const MAX_BYTES = 512 * 1024;
/** Characters of one file that are looked at. */
const MAX_FILE_CHARS = 64 * 1024;
/** Names kept per list (enough to name them in a reason or a command). */
const MAX_NAMES = 50;

/** Root folders never looked into for packages. */
const NOT_PACKAGES = new Set(['node_modules', 'docs', 'doc', 'build', 'dist', 'site_packages', 'venv']);
/** A folder that may be a package: a lowercase identifier (PEP 8's package names). */
const PACKAGE_NAME = /^[a-z_][a-z0-9_]*$/;
/** Folders read on their own below. */
const NOT_PACKAGES_EITHER = new Set(['tests', 'test', '__tests__', 'src', 'lib']);

export type PythonTestStyle =
  /** Some test reads as pytest's: it imports pytest, or has test functions or classes outside TestCase. */
  | 'pytest'
  /** The tests read are unittest.TestCase classes and nothing of pytest's. */
  | 'unittest'
  /** Nothing either way (empty files, none read). */
  | 'unknown';

export type JsTestStyle =
  /** Some test imports node:test. */
  | 'node-test'
  /** No test framework at all: scripts that assert and exit, which `node --test` runs as one test each. */
  | 'plain'
  /** A framework to install (an import of mocha, jest, vitest, …, or describe/it used as globals). */
  | 'other'
  | 'unknown';

export interface LanguageCode<Style extends string> {
  /** Source files that are not tests, repository-relative (`calc.py`, `calc/__init__.py`, `src/a.js`). */
  readonly code: readonly string[];
  /** Test files, repository-relative. */
  readonly tests: readonly string[];
  readonly style: Style;
  /** What decided the style, naming the file: "tests/test_calc.py has module-level test functions". */
  readonly evidence: string | null;
}

export interface CodeFacts {
  /** Null when no Python file was found. */
  readonly python: LanguageCode<PythonTestStyle> | null;
  /** Null when no JavaScript file was found. */
  readonly javascript: LanguageCode<JsTestStyle> | null;
}

export function isPythonTestFile(name: string): boolean {
  return name.endsWith('.py') && (name.startsWith('test_') || name.endsWith('_test.py'));
}

const JS_FILE = /\.(?:c|m)?js$/;

/**
 * The file names `node --test` runs when given no paths (Node 20 to 24): `test.js`, `test-*.js`,
 * `*.test.js`, `*-test.js`, `*_test.js` anywhere, and every .js, .cjs or .mjs file below a `test`
 * folder.
 */
export function nodeRunsByDefault(path: string): boolean {
  if (!JS_FILE.test(path)) return false;
  const parts = path.split('/');
  if (parts.slice(0, -1).includes('test')) return true;
  const base = (parts.at(-1) ?? '').replace(JS_FILE, '');
  return base === 'test' || base.startsWith('test-') || /.[.\-_]test$/.test(base);
}

/**
 * A reader that looks once, when first asked, and answers every later call with the same facts:
 * one per detection, so the image and the test command are decided from the same reading.
 */
export function codeReader(probe: WorkspaceProbe): () => Promise<CodeFacts> {
  let facts: Promise<CodeFacts> | null = null;
  return () => (facts ??= readCode(probe));
}

export async function readCode(probe: WorkspaceProbe): Promise<CodeFacts> {
  const budget = new Budget(probe);
  const root = (await budget.listDir('.')) ?? [];
  const visible = root.filter((n) => !n.startsWith('.')).sort();

  const pyCode = visible.filter((n) => n.endsWith('.py') && !isPythonTestFile(n));
  const pyTests = visible.filter(isPythonTestFile);
  const jsCode = visible.filter((n) => JS_FILE.test(n) && !nodeRunsByDefault(n));
  const jsTests = visible.filter((n) => nodeRunsByDefault(n));

  for (const dir of ['tests', 'test', '__tests__']) {
    if (!root.includes(dir)) continue;
    for (const name of ((await budget.listDir(dir)) ?? []).slice().sort()) {
      const path = `${dir}/${name}`;
      if (isPythonTestFile(name)) pyTests.push(path);
      // Every script in a test folder is a test (node's own rule for `test/`).
      else if (JS_FILE.test(name)) jsTests.push(path);
    }
  }
  // Packages at the root: folders with an __init__.py (LICENSE, Makefile and the like are not asked).
  const candidates = visible.filter(
    (n) => PACKAGE_NAME.test(n) && !NOT_PACKAGES.has(n) && !NOT_PACKAGES_EITHER.has(n),
  );
  for (const dir of candidates) {
    if (await budget.exists(`${dir}/__init__.py`)) pyCode.push(`${dir}/__init__.py`);
  }

  for (const dir of ['src', 'lib']) {
    if (!root.includes(dir)) continue;
    for (const name of ((await budget.listDir(dir)) ?? []).slice().sort()) {
      if (name.endsWith('.py')) pyCode.push(`${dir}/${name}`);
      else if (JS_FILE.test(name)) jsCode.push(`${dir}/${name}`);
      else if (PACKAGE_NAME.test(name) && (await budget.exists(`${dir}/${name}/__init__.py`)))
        pyCode.push(`${dir}/${name}/__init__.py`);
    }
  }
  const python =
    pyCode.length + pyTests.length === 0
      ? null
      : { code: cap(pyCode), tests: cap(pyTests), ...(await pythonStyle(budget, pyTests)) };
  const javascript =
    jsCode.length + jsTests.length === 0
      ? null
      : { code: cap(jsCode), tests: cap(jsTests), ...(await jsStyle(budget, jsTests)) };
  return { python, javascript };
}

function cap(names: readonly string[]): string[] {
  return names.slice(0, MAX_NAMES);
}

const PYTEST_IMPORT = /^[ \t]*(?:import[ \t]+pytest\b|from[ \t]+_?pytest\b)/m;
/** A test function at module level: pytest collects it, unittest never does. */
const TEST_FUNCTION = /^(?:async[ \t]+)?def[ \t]+test\w*[ \t]*\(/m;
const TEST_CASE_CLASS = /^class[ \t]+\w+[ \t]*\([^)]*\bTestCase\b/m;
/** A `Test…` class that is not a TestCase: only pytest collects it. */
const PLAIN_TEST_CLASS = /^class[ \t]+Test\w*[ \t]*(?:\([ \t]*(?:object)?[ \t]*\))?[ \t]*:/m;

async function pythonStyle(
  budget: Budget,
  tests: readonly string[],
): Promise<{ style: PythonTestStyle; evidence: string | null }> {
  let unittest: string | null = null;
  for (const path of tests) {
    const text = await budget.read(path);
    if (text === null) continue;
    if (PYTEST_IMPORT.test(text)) return { style: 'pytest', evidence: `${path} imports pytest` };
    if (TEST_FUNCTION.test(text))
      return { style: 'pytest', evidence: `${path} has module-level test functions` };
    if (PLAIN_TEST_CLASS.test(text))
      return { style: 'pytest', evidence: `${path} has Test classes that are not unittest.TestCase` };
    if (unittest === null && TEST_CASE_CLASS.test(text)) unittest = `${path} has unittest.TestCase classes`;
  }
  return unittest === null ? { style: 'unknown', evidence: null } : { style: 'unittest', evidence: unittest };
}

/** `from 'x'`, `require('x')`, `import('x')`, `import 'x'`: the module named. */
const IMPORT = /(?:\bfrom[ \t]*|\brequire[ \t]*\([ \t]*|\bimport[ \t]*\(?[ \t]*)['"]([^'"\n]+)['"]/g;
const FRAMEWORKS = new Set([
  'mocha',
  'jest',
  '@jest/globals',
  'vitest',
  'ava',
  'tap',
  'tape',
  'uvu',
  'jasmine',
  'chai',
  'qunit',
]);
/** describe/it/expect called at the start of a line: a framework's globals when nothing imports them. */
const GLOBALS = /^[ \t]*(?:describe|it|test|expect|beforeEach|beforeAll)[ \t]*\(/m;

async function jsStyle(
  budget: Budget,
  tests: readonly string[],
): Promise<{ style: JsTestStyle; evidence: string | null }> {
  let other: string | null = null;
  let plain: string | null = null;
  for (const path of tests) {
    const text = await budget.read(path);
    if (text === null) continue;
    const imported = [...text.matchAll(IMPORT)].map((m) => m[1] ?? '');
    if (imported.includes('node:test')) return { style: 'node-test', evidence: `${path} imports node:test` };
    const framework = imported.find((m) => FRAMEWORKS.has(m.replace(/^(@[^/]+\/[^/]+|[^/]+).*$/, '$1')));
    if (other === null && framework !== undefined) other = `${path} imports ${framework}`;
    else if (other === null && GLOBALS.test(text))
      other = `${path} calls describe/it/test without importing them (a jest or mocha suite)`;
    else if (plain === null && framework === undefined && !GLOBALS.test(text))
      plain = `${path} uses no test framework`;
  }
  if (other !== null) return { style: 'other', evidence: other };
  if (plain !== null) return { style: 'plain', evidence: plain };
  return { style: 'unknown', evidence: null };
}

/**
 * The probe behind the limits: past them, a listing is null, a check false, a read null. A probe
 * that throws (which the interface does not allow) is answered the same way.
 */
class Budget {
  private lookups = 0;
  private reads = 0;
  private bytes = 0;

  constructor(private readonly probe: WorkspaceProbe) {}

  async listDir(path: string): Promise<readonly string[] | null> {
    if (this.lookups >= MAX_LOOKUPS) return null;
    this.lookups++;
    return this.probe.listDir(path).catch(() => null);
  }

  async exists(path: string): Promise<boolean> {
    if (this.lookups >= MAX_LOOKUPS) return false;
    this.lookups++;
    return this.probe.exists(path).catch(() => false);
  }

  async read(path: string): Promise<string | null> {
    if (this.reads >= MAX_READS || this.bytes >= MAX_BYTES) return null;
    this.reads++;
    const text = await this.probe.readText(path).catch(() => null);
    if (text === null) return null;
    this.bytes += text.length;
    return text.slice(0, MAX_FILE_CHARS);
  }
}
