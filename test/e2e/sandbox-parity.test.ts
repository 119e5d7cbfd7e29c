import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { FileEventStore } from '../../src/events/file-event-store.js';
import { reduceState } from '../../src/events/reduce-state.js';
import type { TaskResult } from '../../src/eval/run-eval.js';
import { cliEnv, runCli } from '../support/cli.js';
import { registryDeploymentEnv } from '../support/egress-env.js';
import { writeTaskSet, type TaskSpec } from '../support/eval-tasks.js';
import { dockerTest } from '../sandbox/docker/docker-test-support.js';

/**
 * Backend parity (issue 40): one table of small tasks through the isolated local sandbox and the
 * Docker sandbox with the oracle: the same outcome and grade, the same changed files (exactly the
 * gold patch's), the same tests named by the final run, the same files left out. Each base has a
 * failing test, so the agent's own verdict is `resolved` too, not only the grade.
 */

const NODE_TEST = (body: string): string =>
  `import { test } from 'node:test';\nimport assert from 'node:assert/strict';\nimport { formatDuration } from '../format.js';\n\n${body}`;
const FORMAT_BUGGY =
  "import ms from 'ms';\n\nexport function formatDuration(millis) {\n  return ms(millis * 1000);\n}\n";
const FORMAT_FIXED =
  "import ms from 'ms';\n\nexport function formatDuration(millis) {\n  return ms(millis);\n}\n";
const NODE_BASE_TESTS = NODE_TEST(
  "test('one minute', () => {\n  assert.equal(formatDuration(60_000), '1m');\n});\n\ntest('zero', () => {\n  assert.equal(formatDuration(0), '0ms');\n});\n",
);
const NODE_NEW_TESTS = `${NODE_BASE_TESTS}\ntest('two hours', () => {\n  assert.equal(formatDuration(7_200_000), '2h');\n});\n`;
const packageJson = (deps: 'dependencies' | 'devDependencies'): string =>
  `${JSON.stringify({ name: 'fmt-duration', version: '1.0.0', private: true, type: 'module', scripts: { test: 'node --test' }, [deps]: { ms: '2.1.3' } }, null, 2)}\n`;
/** As `npm install --package-lock-only` writes it for the package.json above. */
const LOCKFILE = `${JSON.stringify(
  {
    name: 'fmt-duration',
    version: '1.0.0',
    lockfileVersion: 3,
    requires: true,
    packages: {
      '': { name: 'fmt-duration', version: '1.0.0', dependencies: { ms: '2.1.3' } },
      'node_modules/ms': {
        version: '2.1.3',
        resolved: 'https://registry.npmjs.org/ms/-/ms-2.1.3.tgz',
        integrity:
          'sha512-6FlzubTLZG3J2a/NVCAleEhjzq5oxgHyaCU9yYXvcLsvoVaHJq/s5xXI6/XXP6tz7R9xAOtHnSO/tXtF3WRTlA==',
        license: 'MIT',
      },
    },
  },
  null,
  2,
)}\n`;

/** pytest-style tests, one of which writes coverage output as a coverage run would. */
const PY_TESTS = (extra: string): string =>
  `import os\n\nfrom calc import add, sub\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\ndef test_sub():\n    assert sub(5, 3) == 2\n\n\ndef test_writes_reports():\n    with open('.coverage', 'w') as f:\n        f.write('data')\n    os.makedirs('htmlcov', exist_ok=True)\n    with open(os.path.join('htmlcov', 'index.html'), 'w') as f:\n        f.write('<html></html>')\n${extra}`;
const PY_BUGGY = 'def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n';
const PY_FIXED = 'def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n';
const PY_NEW = '\n\ndef test_add_negative():\n    assert add(-1, -1) == -2\n';

const TASKS: readonly TaskSpec[] = [
  {
    // No project file, no .gitignore, tests in a plain tests/ folder: the code says Python and pytest.
    id: 'py-unmarked',
    problem: 'add() subtracts\n\nadd(2, 3) returns -1.',
    base: { 'calc.py': PY_BUGGY, 'tests/test_calc.py': PY_TESTS('') },
    fix: { 'calc.py': PY_FIXED },
    tests: { 'tests/test_calc.py': PY_TESTS(PY_NEW) },
    f2p: ['tests/test_calc.py::test_add_negative'],
    p2p: ['tests/test_calc.py::test_sub', 'tests/test_calc.py::test_writes_reports'],
  },
  {
    id: 'py-marked',
    problem: 'add() subtracts\n\nadd(2, 3) returns -1.',
    base: {
      // A marker that needs no install (a `[project]` table would make setup build the package).
      'pytest.ini': '[pytest]\ntestpaths = tests\n',
      '.gitignore': '.coverage\n',
      'calc.py': PY_BUGGY,
      'tests/test_calc.py': PY_TESTS(''),
    },
    fix: { 'calc.py': PY_FIXED },
    tests: { 'tests/test_calc.py': PY_TESTS(PY_NEW) },
    f2p: ['tests/test_calc.py::test_add_negative'],
    p2p: ['tests/test_calc.py::test_sub', 'tests/test_calc.py::test_writes_reports'],
  },
  {
    id: 'npm-lockfile',
    problem: 'formatDuration is off by a factor of 1000\n\nformatDuration(60000) says "17h".',
    base: {
      'package.json': packageJson('dependencies'),
      'package-lock.json': LOCKFILE,
      '.gitignore': 'node_modules/\n',
      'format.js': FORMAT_BUGGY,
      'test/format.test.js': NODE_BASE_TESTS,
    },
    fix: { 'format.js': FORMAT_FIXED },
    tests: { 'test/format.test.js': NODE_NEW_TESTS },
    f2p: ['test/format.test.js::two hours'],
    p2p: ['test/format.test.js::zero'],
  },
  {
    // No lockfile and no .gitignore: the install writes none, and node_modules stays out.
    id: 'npm-no-lockfile',
    problem: 'formatDuration is off by a factor of 1000\n\nformatDuration(60000) says "17h".',
    base: {
      'package.json': packageJson('devDependencies'),
      'format.js': FORMAT_BUGGY,
      'test/format.test.js': NODE_BASE_TESTS,
    },
    fix: { 'format.js': FORMAT_FIXED },
    tests: { 'test/format.test.js': NODE_NEW_TESTS },
    f2p: ['test/format.test.js::two hours'],
    p2p: ['test/format.test.js::zero'],
  },
];

interface Seen {
  readonly outcome: string | undefined;
  readonly resolved: boolean;
  readonly files: readonly string[];
  readonly passed: readonly string[];
  readonly failed: readonly string[];
  readonly baselineFailed: readonly string[];
  readonly leftOut: readonly string[];
  readonly testCommand: string | null;
}

function seen(result: TaskResult): Seen {
  const store = FileEventStore.open(result.trajectory);
  const state = reduceState(store.events);
  const diff = state.lastCheckpoint?.diff ?? '';
  return {
    outcome: state.outcome?.outcome,
    resolved: result.resolved,
    files: [...diff.matchAll(/^diff --git a\/(.*?) b\//gm)].map((m) => m[1] ?? '').sort(),
    passed: [...(state.finalTest?.summary.passedNames ?? [])].sort(),
    failed: [...(state.finalTest?.summary.failedNames ?? [])].sort(),
    baselineFailed: [...(state.baseline?.summary.failedNames ?? [])].sort(),
    leftOut: (state.lastCheckpoint?.leftOut ?? []).map((l) => `${l.pattern} ${String(l.files)}`).sort(),
    testCommand: store.base.testCommand,
  };
}

async function runEval(file: string, out: string, sandbox: 'local' | 'docker'): Promise<Map<string, Seen>> {
  const r = await runCli(
    ['eval', file, '--model', 'oracle', '--sandbox', sandbox, '--concurrency', '2', '--out', out],
    // What a deployment on this network sets so setup reaches the registry (support/egress-env.ts).
    cliEnv(await registryDeploymentEnv()),
  );
  assert.equal(r.code, 0, `${sandbox}:\n${r.stdout}\n${r.stderr}`);
  const results = readFileSync(join(out, 'results.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as TaskResult);
  return new Map(results.map((x) => [x.instance_id, seen(x)]));
}

dockerTest(
  'sandbox parity: Python with and without project files, npm with and without a lockfile, repositories without .gitignore: the same verdict, changed files, named tests and left-out files in the local and Docker sandboxes',
  async (_docker, t) => {
    const set = writeTaskSet(TASKS, 'ia-parity-');
    t.after(() => {
      set.cleanup();
    });
    const docker = await runEval(set.file, join(set.dir, 'out-docker'), 'docker');
    const local = await runEval(set.file, join(set.dir, 'out-local'), 'local');
    for (const task of TASKS) {
      const d = docker.get(task.id);
      const l = local.get(task.id);
      assert.ok(d !== undefined && l !== undefined, task.id);
      assert.deepEqual(l, d, `${task.id}: local and Docker differ`);
      assert.equal(d.outcome, 'resolved', `${task.id}: ${JSON.stringify(d)}`);
      assert.equal(d.resolved, true, task.id);
      // Exactly the fix: no bytecode, cache, coverage, lockfile or node_modules.
      assert.deepEqual(d.files, Object.keys(task.fix).sort(), task.id);
      assert.deepEqual(d.failed, [], task.id);
    }
    const unmarked = docker.get('py-unmarked');
    // Run and named by pytest (unittest would find none of these module-level tests).
    assert.match(unmarked?.testCommand ?? '', /pytest/);
    assert.deepEqual(unmarked?.passed, [
      'tests/test_calc.py::test_add',
      'tests/test_calc.py::test_sub',
      'tests/test_calc.py::test_writes_reports',
    ]);
    assert.deepEqual(unmarked.baselineFailed, ['tests/test_calc.py::test_add']);
    // The coverage output its tests write is left out, and said; the marked task's .gitignore
    // already ignores `.coverage`, so only `htmlcov/` is named there.
    assert.deepEqual(unmarked.leftOut, ['/.coverage 1', '/htmlcov/ 1']);
    assert.deepEqual(docker.get('py-marked')?.leftOut, ['/htmlcov/ 1']);
    assert.deepEqual(docker.get('npm-no-lockfile')?.files, ['format.js']);
  },
  { timeout: 900_000 },
);
