import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, test } from 'node:test';

import {
  detectTestCommand,
  guessRunnerFromScript,
  hasTestTarget,
} from '../../src/testing/detect-test-command.js';
import type { WorkspaceProbe } from '../../src/testing/detect-test-command.js';
import { sandboxProbe } from '../../src/testing/sandbox-probe.js';
import { LocalSandbox } from '../../src/sandbox/local/local-sandbox.js';
import { SandboxFiles } from '../../src/sandbox/sandbox-files.js';

async function withProbe<T>(root: string, fn: (probe: WorkspaceProbe) => Promise<T>): Promise<T> {
  const sandbox = await LocalSandbox.create({ workspace: root, path: process.env.PATH ?? '/usr/bin:/bin' });
  try {
    return await fn(sandboxProbe(new SandboxFiles(sandbox)));
  } finally {
    await sandbox.close();
  }
}

/** A probe over an in-memory tree: keys are file paths; their parent dirs exist implicitly. */
function memoryProbe(files: Record<string, string>): WorkspaceProbe {
  const dirs = new Map<string, Set<string>>([['.', new Set()]]);
  for (const file of Object.keys(files)) {
    const parts = file.split('/');
    for (let i = 0; i < parts.length; i++) {
      const parent = i === 0 ? '.' : parts.slice(0, i).join('/');
      const entry = parts[i] ?? '';
      let set = dirs.get(parent);
      if (set === undefined) {
        set = new Set();
        dirs.set(parent, set);
      }
      set.add(entry);
    }
  }
  return {
    exists: (p) => Promise.resolve(p in files || dirs.has(p)),
    readText: (p) => Promise.resolve(files[p] ?? null),
    listDir: (p) => Promise.resolve(dirs.has(p) ? [...(dirs.get(p) ?? [])] : null),
  };
}

const pkg = (scripts: Record<string, string>): string => JSON.stringify({ name: 'x', scripts });

async function detect(files: Record<string, string>): Promise<string | null> {
  return (await detectTestCommand(memoryProbe(files)))?.command ?? null;
}

void describe('package.json', () => {
  void test('npm by default, with the runner guessed from the script', async () => {
    assert.deepEqual(await detectTestCommand(memoryProbe({ 'package.json': pkg({ test: 'node --test' }) })), {
      command: 'npm test',
      runner: 'node-test',
      source: 'package.json scripts.test',
    });
  });

  void test('the lock file picks the package manager', async () => {
    const files = { 'package.json': pkg({ test: 'jest' }) };
    assert.equal(await detect({ ...files, 'pnpm-lock.yaml': '' }), 'pnpm test');
    assert.equal(await detect({ ...files, 'yarn.lock': '' }), 'yarn test');
    assert.equal(await detect({ ...files, 'package-lock.json': '{}' }), 'npm test');
  });

  void test("npm's placeholder script means no tests; detection falls through", async () => {
    const placeholder = pkg({ test: 'echo "Error: no test specified" && exit 1' });
    assert.equal(await detect({ 'package.json': placeholder }), null);
    assert.equal(await detect({ 'package.json': placeholder, 'Cargo.toml': '' }), 'cargo test');
    assert.equal(await detect({ 'package.json': '{ not json', 'go.mod': 'module x' }), 'go test ./... -v');
  });

  void test('runner guesses, following npm run indirections', () => {
    const guess = (scripts: Record<string, string>): string =>
      guessRunnerFromScript(new Map(Object.entries(scripts)), 'test');
    assert.equal(guess({ test: 'vitest run' }), 'vitest');
    assert.equal(guess({ test: 'jest --ci' }), 'jest');
    assert.equal(guess({ test: 'react-scripts test' }), 'jest');
    assert.equal(guess({ test: 'mocha "test/**/*.js"' }), 'mocha');
    assert.equal(guess({ test: 'node --import tsx --test test/*.test.ts' }), 'node-test');
    assert.equal(guess({ test: 'tsc && node --test dist/' }), 'node-test');
    assert.equal(guess({ test: 'npm run lint && npm run test:unit', 'test:unit': 'vitest' }), 'vitest');
    assert.equal(guess({ test: 'yarn unit', unit: 'mocha' }), 'mocha');
    assert.equal(guess({ test: 'npm run a', a: 'npm run test' }), 'unknown'); // cycle
    assert.equal(guess({ test: 'tap' }), 'tap');
    assert.equal(guess({ test: 'c8 tap --reporter=tap' }), 'tap');
    assert.equal(guess({ test: 'ava --verbose' }), 'ava');
    assert.equal(guess({ test: 'node tape.js' }), 'unknown');
    assert.equal(guess({ test: 'make' }), 'unknown');
  });
});

void describe('python', () => {
  const pytest = 'python3 -m pytest -rA';

  void test('pytest markers', async () => {
    assert.equal(await detect({ 'pytest.ini': '[pytest]\n' }), pytest);
    assert.equal(await detect({ 'conftest.py': '' }), pytest);
    assert.equal(await detect({ 'tests/conftest.py': '', 'tests/test_a.py': '' }), pytest);
    assert.equal(await detect({ 'pyproject.toml': '[tool.pytest.ini_options]\n' }), pytest);
    assert.equal(
      await detect({ 'pyproject.toml': '[project.optional-dependencies]\ntest = ["pytest>=7"]\n' }),
      pytest,
    );
    assert.equal(
      await detect({ 'pyproject.toml': '[tool.poetry.group.dev.dependencies]\npytest = "^8"\n' }),
      pytest,
    );
    assert.equal(await detect({ 'setup.cfg': '[tool:pytest]\naddopts = -q\n' }), pytest);
    assert.equal(await detect({ 'tox.ini': '[pytest]\n' }), pytest);
    assert.equal(await detect({ 'requirements-dev.txt': 'black\npytest==8.1\n' }), pytest);
    assert.equal(await detect({ 'requirements.txt': 'pytest-cov\n' }), pytest);
    assert.equal((await detectTestCommand(memoryProbe({ 'pytest.ini': '' })))?.runner, 'pytest');
  });

  void test('plain unittest layouts', async () => {
    const discover = 'python3 -m unittest discover -v';
    // tests/ is not a package: it must be the start dir (3.11+ discovery skips non-packages).
    assert.equal(await detect({ 'pkg/__init__.py': '', 'tests/test_a.py': '' }), `${discover} -s tests`);
    assert.equal(await detect({ 'test/test_a.py': '', 'setup.py': '' }), `${discover} -s test`);
    // tests/ is a package: keep the repo root as top-level so relative imports work.
    assert.equal(
      await detect({
        'tests/__init__.py': '',
        'tests/test_a.py': '',
        'pyproject.toml': '[project]\nname = "x"\n',
      }),
      `${discover} -s tests -t .`,
    );
    // A top-level test file is found by plain discovery.
    assert.equal(await detect({ 'test_app.py': '', 'tests/test_a.py': '' }), discover);
    assert.equal(await detect({ 'setup.py': '' }), discover);
    assert.equal((await detectTestCommand(memoryProbe({ 'setup.py': '' })))?.runner, 'unittest');
    // A tests dir without Python test files is not a Python project.
    assert.equal(await detect({ 'tests/run.sh': '' }), null);
  });

  void test('no project files: the tests decide between pytest and unittest', async () => {
    const calc = 'def add(a, b):\n    return a + b\n';
    // Module-level test functions: only pytest runs them.
    assert.deepEqual(
      await detectTestCommand(
        memoryProbe({
          'calc.py': calc,
          'tests/test_calc.py': 'from calc import add\n\ndef test_add():\n    assert add(1, 2) == 3\n',
        }),
      ),
      {
        command: pytest,
        runner: 'pytest',
        source:
          'tests/test_calc.py has module-level test functions (pytest-style tests; no Python project files)',
      },
    );
    assert.equal(
      (await detectTestCommand(memoryProbe({ 'calc.py': calc, 'test_calc.py': 'import pytest\n' })))?.source,
      'test_calc.py imports pytest (pytest-style tests; no Python project files)',
    );
    assert.equal(
      await detect({
        'calc.py': calc,
        'calc_test.py': 'class TestAdd:\n    def test_one(self):\n        pass\n',
      }),
      pytest,
      'a Test class that is not a TestCase',
    );
    // One pytest-style file among unittest ones is enough: pytest runs TestCase classes too.
    assert.equal(
      await detect({
        'tests/test_a.py': 'import unittest\nclass A(unittest.TestCase):\n    pass\n',
        'tests/test_b.py': 'async def test_b():\n    pass\n',
      }),
      pytest,
    );
    // TestCase classes alone: unittest, which needs nothing installed.
    assert.deepEqual(
      await detectTestCommand(
        memoryProbe({
          'calc.py': calc,
          'tests/test_calc.py':
            'import unittest\nfrom calc import add\n\nclass AddTest(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n',
        }),
      ),
      {
        command: 'python3 -m unittest discover -v -s tests',
        runner: 'unittest',
        source: 'tests/test_*.py: unittest.TestCase classes (no pytest configured)',
      },
    );
    // Indented test functions are methods, not pytest's module-level ones.
    assert.equal(
      await detect({
        'test_x.py':
          'from unittest import TestCase\nclass X(TestCase):\n    def test_x(self):\n        pass\n',
      }),
      'python3 -m unittest discover -v',
    );
    // Code without tests: nothing to run.
    assert.equal(await detect({ 'calc.py': calc, 'pkg/__init__.py': '' }), null);
  });

  void test('a project file without pytest, pytest-style tests: pytest', async () => {
    assert.deepEqual(
      await detectTestCommand(
        memoryProbe({
          'setup.py': 'from setuptools import setup\nsetup()\n',
          'tests/test_a.py': 'def test_a(): pass\n',
        }),
      ),
      {
        command: pytest,
        runner: 'pytest',
        source: 'tests/test_a.py has module-level test functions (pytest-style tests; no pytest configured)',
      },
    );
  });

  void test('package.json wins over python files', async () => {
    assert.equal(await detect({ 'package.json': pkg({ test: 'jest' }), 'pytest.ini': '' }), 'npm test');
  });
});

void describe('javascript without a test script', () => {
  const nodeTest = "const test = require('node:test');\nconst assert = require('node:assert');\n";

  void test('node:test tests run with node --test, named when node would not find them', async () => {
    assert.deepEqual(
      await detectTestCommand(
        memoryProbe({
          'calc.js': 'module.exports = {};\n',
          'test/calc.test.js': `${nodeTest}test('a', () => {});\n`,
        }),
      ),
      {
        command: 'node --test',
        runner: 'node-test',
        source: 'test/calc.test.js imports node:test (no package.json)',
      },
    );
    assert.equal(
      await detect({ 'calc.mjs': '', 'calc.test.mjs': "import { test } from 'node:test';\n" }),
      'node --test',
    );
    // tests/ (plural) is not one of node's defaults: the files are named.
    assert.equal(
      await detect({ 'src/calc.js': '', 'tests/calc.js': nodeTest, 'tests/more.cjs': nodeTest }),
      'node --test tests/calc.js tests/more.cjs',
    );
  });

  void test('a package.json without a usable test script', async () => {
    const files = { 'index.js': '', 'test/index.test.js': nodeTest };
    assert.deepEqual(
      await detectTestCommand(memoryProbe({ ...files, 'package.json': pkg({ lint: 'eslint .' }) })),
      {
        command: 'node --test',
        runner: 'node-test',
        source: 'test/index.test.js imports node:test (no test script in package.json)',
      },
    );
    const placeholder = pkg({ test: 'echo "Error: no test specified" && exit 1' });
    assert.equal(await detect({ ...files, 'package.json': placeholder }), 'node --test');
    // A usable script still wins.
    assert.equal(await detect({ ...files, 'package.json': pkg({ test: 'mocha' }) }), 'npm test');
  });

  void test('plain scripts run as one test each; a framework to install gets nothing', async () => {
    assert.equal(
      await detect({ 'test/calc.js': "const assert = require('assert');\nassert.equal(1, 1);\n" }),
      'node --test',
    );
    assert.equal(
      await detect({ 'test/calc.test.js': "describe('x', () => { it('y', () => {}); });\n" }),
      null,
    );
    assert.equal(await detect({ 'test/calc.test.js': "import { expect } from 'vitest';\n" }), null);
    assert.equal(await detect({ 'index.js': '' }), null, 'code without tests');
  });

  void test('python and go come first; node --test before a Makefile', async () => {
    const js = { 'test/a.test.js': nodeTest };
    assert.equal(await detect({ ...js, 'test_a.py': '' }), 'python3 -m unittest discover -v');
    assert.equal(await detect({ ...js, 'go.mod': '' }), 'go test ./... -v');
    assert.equal(await detect({ ...js, Makefile: 'test:\n\tnode --test\n' }), 'node --test');
  });
});

void describe('go, cargo, make', () => {
  void test('markers', async () => {
    assert.deepEqual(await detectTestCommand(memoryProbe({ 'go.mod': 'module x\n' })), {
      command: 'go test ./... -v',
      runner: 'go',
      source: 'go.mod',
    });
    assert.equal(await detect({ 'Cargo.toml': '[package]\n' }), 'cargo test');
    assert.equal(await detect({ 'go.mod': '', Makefile: 'test:\n\tgo test ./...\n' }), 'go test ./... -v');
  });

  void test('make only with a test target', async () => {
    assert.deepEqual(
      await detectTestCommand(memoryProbe({ Makefile: 'all: build\n\ntest: build\n\t./run\n' })),
      {
        command: 'make test',
        runner: 'make',
        source: 'Makefile test target',
      },
    );
    assert.equal(await detect({ Makefile: 'build:\n\tcc x.c\n' }), null);
    assert.equal(await detect({}), null);
  });

  void test('hasTestTarget', () => {
    assert.equal(hasTestTarget('test:\n'), true);
    assert.equal(hasTestTarget('check test: deps\n'), true);
    assert.equal(hasTestTarget('test:: deps\n'), true);
    assert.equal(hasTestTarget('.PHONY: test\n'), false);
    assert.equal(hasTestTarget('test := 1\ntest ::= 2\n'), false);
    assert.equal(hasTestTarget('build:\n\ttest: foo\n'), false);
    assert.equal(hasTestTarget('tests:\n'), false);
  });
});

void describe('sandboxProbe', () => {
  const repos = new URL('../fixtures/repos/', import.meta.url);

  void test('detects the fixture repositories', async () => {
    const node = await withProbe(fileURLToPath(new URL('node-calc/', repos)), detectTestCommand);
    assert.deepEqual(node, {
      command: 'npm test',
      runner: 'node-test',
      source: 'package.json scripts.test',
    });
    const python = await withProbe(fileURLToPath(new URL('python-inventory/', repos)), detectTestCommand);
    assert.deepEqual(python, {
      command: 'python3 -m unittest discover -v -s tests',
      runner: 'unittest',
      source: 'tests/test_*.py: unittest.TestCase classes (no pytest configured)',
    });
  });

  void test('reads, lists and refuses paths outside the root, links leading out included', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'sandbox-probe-'));
    try {
      writeFileSync(path.join(root, 'a.txt'), 'hello');
      symlinkSync('/etc/hostname', path.join(root, 'package.json'));
      await withProbe(root, async (probe) => {
        assert.equal(await probe.readText('a.txt'), 'hello');
        assert.equal(await probe.readText('missing.txt'), null);
        assert.equal(await probe.readText('.'), null);
        assert.deepEqual(await probe.listDir('.'), ['a.txt', 'package.json']);
        assert.equal(await probe.listDir('a.txt'), null);
        assert.equal(await probe.exists('a.txt'), true);
        assert.equal(await probe.exists('../'), false);
        assert.equal(await probe.readText(`../${path.basename(root)}/a.txt`), 'hello');
        assert.equal(await probe.readText('/etc/hostname'), null);
        assert.equal(await probe.readText('package.json'), null);
        assert.equal(await probe.listDir('..'), null);
      });
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
