import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { detectProject } from '../../src/testing/detect-project.js';
import type { WorkspaceProbe } from '../../src/testing/detect-test-command.js';
import { readCode } from '../../src/testing/read-code.js';
import { memoryProbe } from '../support/memory-probe.js';

const calc = 'def add(a, b):\n    return a + b\n';
const pytestStyle = 'from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n';
const unittestStyle =
  'import unittest\nfrom calc import add\n\n\nclass AddTest(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n';
const nodeTest =
  "import { test } from 'node:test';\nimport assert from 'node:assert';\ntest('adds', () => {});\n";
const pkg = (fields: Record<string, unknown> = {}): string => JSON.stringify({ name: 'x', ...fields });

describe('detectProject: no project files, the code and the tests decide', () => {
  test('pytest-style tests: the python image and pytest, and the reason names the file', async () => {
    const p = await detectProject(memoryProbe({ 'calc.py': calc, 'tests/test_calc.py': pytestStyle }));
    assert.equal(p.kind, 'python');
    assert.equal(p.fromCode, true);
    assert.equal(p.testCommand?.command, 'python3 -m pytest -rA');
    assert.equal(
      p.reason,
      'python: tests/test_calc.py has module-level test functions (pytest-style tests; no Python project files)',
    );
    assert.deepEqual(p.languages, { node: null, python: p.testCommand.source });
  });

  test('unittest.TestCase tests only: the python image and unittest (nothing to install)', async () => {
    const p = await detectProject(memoryProbe({ 'calc.py': calc, 'test_calc.py': unittestStyle }));
    assert.equal(p.kind, 'python');
    assert.deepEqual(p.testCommand, {
      command: 'python3 -m unittest discover -v',
      runner: 'unittest',
      source: 'test_*.py: unittest.TestCase classes (no pytest configured)',
    });
  });

  test('Python code without tests: the python image (pip and pytest for the tests to come), no command', async () => {
    const p = await detectProject(memoryProbe({ 'calc.py': calc, 'README.md': '# calc' }));
    assert.equal(p.kind, 'python');
    assert.equal(p.testCommand, null);
    assert.equal(p.reason, 'python: calc.py, no tests; no project files');
    const pkgOnly = await detectProject(memoryProbe({ 'calc/__init__.py': calc, 'calc/core.py': '' }));
    assert.equal(pkgOnly.kind, 'python');
    assert.equal(pkgOnly.reason, 'python: calc/__init__.py, no tests; no project files');
  });

  test('JavaScript with node:test tests: the node image and node --test', async () => {
    const p = await detectProject(memoryProbe({ 'src/calc.js': '', 'test/calc.test.mjs': nodeTest }));
    assert.equal(p.kind, 'node');
    assert.equal(p.fromCode, true);
    assert.deepEqual(p.testCommand, {
      command: 'node --test',
      runner: 'node-test',
      source: 'test/calc.test.mjs imports node:test (no package.json)',
    });
    assert.equal(p.reason, 'node: test/calc.test.mjs imports node:test (no package.json)');
    assert.deepEqual(p.languages, { node: p.testCommand.source, python: null });
  });

  test('JavaScript code without runnable tests: the node image (the base image has no node), no command', async () => {
    const p = await detectProject(
      memoryProbe({ 'index.js': '', 'test/a.test.js': "describe('a', () => {});\n" }),
    );
    assert.equal(p.kind, 'node');
    assert.equal(p.testCommand, null);
    assert.equal(
      p.reason,
      'node: test/a.test.js calls describe/it/test without importing them (a jest or mocha suite); no package.json',
    );
  });

  test('both languages: the tests decide; without tests, node (whose image also has python3)', async () => {
    assert.equal(
      (await detectProject(memoryProbe({ 'tool.js': '', 'calc.py': calc, 'test_calc.py': pytestStyle })))
        .kind,
      'python',
    );
    assert.equal((await detectProject(memoryProbe({ 'tool.js': '', 'calc.py': calc }))).kind, 'node');
  });

  test('nothing at all: base, and not from the code', async () => {
    const p = await detectProject(memoryProbe({ 'README.md': '', 'main.c': '', Makefile: 'all:\n' }));
    assert.deepEqual(
      { kind: p.kind, fromCode: p.fromCode, reason: p.reason },
      { kind: 'base', fromCode: false, reason: 'no project files and no Python or JavaScript code' },
    );
  });
});

describe('detectProject: project files first', () => {
  test('package.json with a test script: node and npm test, whatever Python sits beside', async () => {
    const p = await detectProject(
      memoryProbe({ 'package.json': pkg({ scripts: { test: 'jest' } }), 'test_a.py': pytestStyle }),
    );
    assert.deepEqual(
      { kind: p.kind, reason: p.reason, command: p.testCommand?.command },
      { kind: 'node', reason: 'package.json', command: 'npm test' },
    );
  });

  test('package.json without a test script, node:test tests: node, node --test', async () => {
    const p = await detectProject(memoryProbe({ 'package.json': pkg(), 'test/a.test.js': nodeTest }));
    assert.equal(p.kind, 'node');
    assert.equal(p.fromCode, false);
    assert.equal(p.testCommand?.command, 'node --test');
  });

  test('a Python project file: python, without reading the code for the image', async () => {
    const probe = memoryProbe({ 'pyproject.toml': '[tool.pytest.ini_options]\n', 'app.js': '' });
    const p = await detectProject(probe);
    assert.deepEqual(
      { kind: p.kind, reason: p.reason, fromCode: p.fromCode, runner: p.testCommand?.runner },
      { kind: 'python', reason: 'python: pyproject.toml', fromCode: false, runner: 'pytest' },
    );
    assert.ok(!probe.calls.includes('readText app.js'));
    assert.equal(p.languages.node, null, 'a stray script is not a language when a project file decides');
  });

  test('go.mod: the base image', async () => {
    const p = await detectProject(memoryProbe({ 'go.mod': 'module x\n', 'gen.py': '' }));
    assert.deepEqual([p.kind, p.testCommand?.command], ['base', 'go test ./... -v']);
  });
});

describe('detectProject: the image follows the runner', () => {
  test('pytest beside a package.json without a test script: the python image', async () => {
    const p = await detectProject(memoryProbe({ 'package.json': pkg(), 'pytest.ini': '[pytest]\n' }));
    assert.equal(p.kind, 'python');
    assert.equal(p.reason, 'python: the tests run with pytest (pytest.ini), which the node image lacks');
    assert.equal(p.fromCode, true);
    assert.equal(p.languages.node, 'package.json');
    assert.equal(p.languages.python, 'pytest.ini');
  });

  test('... but not when a lockfile means an npm install, which needs the node image', async () => {
    const p = await detectProject(
      memoryProbe({ 'package.json': pkg(), 'package-lock.json': '{}', 'test_a.py': pytestStyle }),
    );
    assert.equal(p.kind, 'node');
    assert.equal(p.testCommand?.runner, 'pytest');
  });

  test('pytest-style tests in a go module: python', async () => {
    const p = await detectProject(memoryProbe({ 'go.mod': '', 'tests/test_a.py': pytestStyle }));
    assert.equal(p.kind, 'python');
  });

  test('node:test tests beside a requirements.txt: node', async () => {
    const p = await detectProject(
      memoryProbe({ 'requirements.txt': 'requests\n', 'test/a.test.js': nodeTest }),
    );
    assert.deepEqual([p.kind, p.testCommand?.command], ['node', 'node --test']);
    assert.equal(p.languages.python, 'requirements.txt');
  });
});

describe('readCode: bounded, never throws', () => {
  test('reads at most 12 test files and asks at most 16 listings or checks', async () => {
    const files: Record<string, string> = {};
    for (let i = 0; i < 200; i++) {
      files[`tests/test_${String(i).padStart(3, '0')}.py`] = unittestStyle;
      files[`pkg${i}/__init__.py`] = '';
    }
    files['tests/test_199.py'] = pytestStyle;
    const probe = memoryProbe(files);
    const facts = await readCode(probe);
    const reads = probe.calls.filter((c) => c.startsWith('readText'));
    const lookups = probe.calls.filter((c) => !c.startsWith('readText'));
    assert.equal(reads.length, 12);
    assert.ok(lookups.length <= 16, String(lookups.length));
    // The pytest file past the budget is not known: what was read decides.
    assert.equal(facts.python?.style, 'unittest');
    assert.ok(facts.python.tests.length <= 50);
  });

  test('stops reading past 512 KiB', async () => {
    const big = `# ${'x'.repeat(300 * 1024)}\n`;
    const probe = memoryProbe({ 'test_a.py': big, 'test_b.py': big, 'test_c.py': pytestStyle });
    const facts = await readCode(probe);
    assert.deepEqual(
      probe.calls.filter((c) => c.startsWith('readText')),
      ['readText test_a.py', 'readText test_b.py'],
    );
    assert.equal(facts.python?.style, 'unknown');
  });

  test('a probe that fails answers nothing, and detection goes on', async () => {
    const failing: WorkspaceProbe = {
      exists: () => Promise.reject(new Error('gone')),
      readText: () => Promise.reject(new Error('gone')),
      listDir: (p) => (p === '.' ? Promise.resolve(['test_a.py']) : Promise.reject(new Error('gone'))),
    };
    assert.deepEqual(await readCode(failing), {
      python: { code: [], tests: ['test_a.py'], style: 'unknown', evidence: null },
      javascript: null,
    });
  });
});
