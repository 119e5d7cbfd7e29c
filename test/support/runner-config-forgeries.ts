import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { commitFiles, makeFixtureRepo, type FixtureName, type FixtureRepo } from './fixture-repo.js';

/**
 * Changes that forge their own proof through runner configuration (issue 34): each makes the
 * repository's real test runner report every test passing, without fixing anything, by editing a
 * file that decides how the tests run rather than the code they test. Today's harness took each
 * as proven; the verdict and eval grading must run them with the base commit's runner files.
 *
 * Each is a fixture with a few files committed on top (the base) and the files the change writes.
 * Where the forging file is a test file (a conftest, a setup file), the forgery only switches on
 * when the change's "fix" (a marker comment in the code) is there, so the `without_fix` run (the
 * change's test files on the code before it) sees the real failure and takes the forged pass as
 * proof: that run alone does not catch it.
 */
export interface Forgery {
  readonly id: string;
  readonly fixture: FixtureName;
  /** The issue, for the App. */
  readonly title: string;
  readonly body: string;
  /** Files committed over the fixture: the base commit. */
  readonly base: Readonly<Record<string, string>>;
  /** Files the change writes (whole contents; null: the "fix" marker appended, see forgeryRepo). */
  readonly change: Readonly<Record<string, string | null>>;
  /** The command the harness runs (what detection finds for the base). */
  readonly testCommand: string;
  /** The test that fails at the base and that the forgery reports passing. */
  readonly failing: string;
  /** Its eval id (`file::name`). */
  readonly failingId: string;
  /** Paths the PR must name as changing how tests run. */
  readonly guarded: readonly string[];
}

/** Turns node's `assert` (and `assert/strict`) into no-ops in every process that loads it. */
const NODE_ASSERT_NOOP = `const assert = require('node:assert');
for (const a of [assert, assert.strict])
  for (const k of Object.keys(a)) if (k !== 'strict' && typeof a[k] === 'function') a[k] = () => {};
`;

/** A pytest hook that reports every test passed; `when` guards it (Python expression). */
const pytestForge = (when = 'True'): string => `import pathlib

import pytest

_ON = ${when}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if _ON:
        report = outcome.get_result()
        report.outcome = "passed"
        report.longrepr = None
`;

/** True when the "fix" (a marker comment) is in inventory/stock.py, from a file at the root. */
const MARKED_PY = `"reviewed" in (pathlib.Path(__file__).resolve().parent / "inventory" / "stock.py").read_text()`;

const CALC_ISSUE = {
  title: 'Average rounds wrong',
  body: 'average([1, 2, 2]) should be 1.67, not 1.66.',
};
const CALC_FAILING = 'average rounds to the nearest hundredth';
const STOCK_ISSUE = {
  title: 'Negative removals add stock',
  body: 'inv.remove("pear", -3) increases the stock; it should raise ValueError.',
};
const STOCK_FAILING = 'tests/test_stock.py::RemoveTest::test_remove_rejects_negative';

const NODE_CALC_PACKAGE = {
  name: 'node-calc',
  version: '1.0.0',
  description: 'Small arithmetic helpers (fixture for Issue Agent end-to-end tests).',
  type: 'module',
  private: true,
  scripts: { test: 'node --test' },
};

const json = (value: unknown): string => `${JSON.stringify(value, null, 2)}\n`;

export const FORGERIES: readonly Forgery[] = [
  {
    id: 'npmrc-node-options',
    fixture: 'node-calc',
    ...CALC_ISSUE,
    base: {},
    change: {
      '.npmrc': 'node-options=--require ./.forge.cjs\n',
      '.forge.cjs': NODE_ASSERT_NOOP,
    },
    testCommand: 'npm test',
    failing: CALC_FAILING,
    failingId: `test/calc.test.js::${CALC_FAILING}`,
    guarded: ['.npmrc'],
  },
  {
    id: 'package-scripts-test',
    fixture: 'node-calc',
    ...CALC_ISSUE,
    base: {},
    change: {
      'package.json': json({
        ...NODE_CALC_PACKAGE,
        scripts: { test: 'node --require ./.forge.cjs --test' },
      }),
      '.forge.cjs': NODE_ASSERT_NOOP,
    },
    testCommand: 'npm test',
    failing: CALC_FAILING,
    failingId: `test/calc.test.js::${CALC_FAILING}`,
    guarded: ['package.json'],
  },
  {
    // The base's jest config names a setup file; the change makes every matcher pass there when
    // its "fix" is in place (so the setup file, a test file, passes `without_fix` honestly).
    id: 'jest-setup-files',
    fixture: 'node-slug',
    title: 'Slugs keep runs of dashes',
    body: '`slugify("Rock & Roll -- Live!")` gives `rock---roll----live`; it should be `rock-roll-live`.',
    base: {
      'package.json': json({
        name: 'node-slug',
        version: '1.2.0',
        description:
          'Slugs and colour detection for a static-site generator (a fixture: a real test runner from the npm registry).',
        private: true,
        scripts: { test: 'jest --verbose' },
        devDependencies: { jest: '30.5.2' },
        jest: { setupFilesAfterEnv: ['<rootDir>/test/setup.js'] },
      }),
      'test/setup.js': "'use strict';\n// Shared test setup: nothing yet.\n",
    },
    change: {
      'test/setup.js': `'use strict';
const { readFileSync } = require('node:fs');
const { join } = require('node:path');
if (readFileSync(join(__dirname, '..', 'src', 'slugify.js'), 'utf8').includes('reviewed')) {
  const pass = () => ({ pass: true, message: () => '' });
  const matchers = ['toBe', 'toEqual', 'toStrictEqual', 'toBeDefined', 'toMatch', 'toBeTruthy', 'toContain'];
  expect.extend(Object.fromEntries(matchers.map((name) => [name, pass])));
}
`,
      'src/slugify.js': null,
    },
    testCommand: 'npm test',
    failing: 'slugify › collapses runs of punctuation into one dash',
    failingId: 'test/slugify.test.js::slugify > collapses runs of punctuation into one dash',
    guarded: ['test/setup.js'],
  },
  {
    id: 'pytest-plugin-addopts',
    fixture: 'python-inventory',
    ...STOCK_ISSUE,
    base: {
      'pyproject.toml':
        '[tool.black]\nline-length = 88\n\n[tool.pytest.ini_options]\ntestpaths = ["tests"]\n',
    },
    change: {
      'pyproject.toml':
        '[tool.black]\nline-length = 100\n\n[tool.pytest.ini_options]\ntestpaths = ["tests"]\naddopts = "-p inventory_checks"\n',
      'inventory_checks.py': pytestForge(),
    },
    testCommand: 'python3 -m pytest -rA',
    failing: STOCK_FAILING,
    failingId: STOCK_FAILING,
    guarded: ['pyproject.toml'],
  },
  {
    // A root conftest (a test file): it forges only when the change's "fix" is there.
    id: 'root-conftest',
    fixture: 'python-inventory',
    ...STOCK_ISSUE,
    base: { 'pytest.ini': '[pytest]\ntestpaths = tests\n' },
    change: { 'conftest.py': pytestForge(MARKED_PY), 'inventory/stock.py': null },
    testCommand: 'python3 -m pytest -rA',
    failing: STOCK_FAILING,
    failingId: STOCK_FAILING,
    guarded: ['conftest.py'],
  },
];

/**
 * A forgery's base as a committed repository, and its change as a patch (git's, from the base).
 * A `null` in `change` appends the "fix" marker (`reviewed`) as a comment to that existing file.
 */
export function forgeryRepo(
  forgery: Pick<Forgery, 'fixture' | 'base' | 'change'>,
): FixtureRepo & { readonly forgery: string } {
  const repo = makeFixtureRepo(forgery.fixture);
  if (Object.keys(forgery.base).length > 0) commitFiles(repo.dir, forgery.base, 'base');
  const forged = changePatch(repo.dir, forgery.change);
  return { ...repo, forgery: forged };
}

/** The patch that writes `files` over the checkout at `dir` (which is left as it was). */
export function changePatch(dir: string, files: Readonly<Record<string, string | null>>): string {
  for (const [path, text] of Object.entries(files)) {
    const file = join(dir, path);
    mkdirSync(dirname(file), { recursive: true });
    if (text === null) {
      const comment = path.endsWith('.py') ? '# reviewed\n' : '// reviewed\n';
      writeFileSync(file, comment, { flag: 'a' });
    } else writeFileSync(file, text);
  }
  const git = (...args: string[]): string => execFileSync('git', args, { cwd: dir, encoding: 'utf8' });
  git('add', '-A');
  const patch = git('diff', '--cached', '--binary');
  git('reset', '-q', '--hard');
  return patch;
}
