import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseTasks, TaskFileError } from '../../src/eval/tasks.js';
import { factOf, passed, testCommands, type TestResults } from '../../src/eval/grade.js';
import { readFacts } from '../../src/testing/run-tests.js';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkoutAt, patchPaths } from '../../src/eval/checkout.js';

const task = (over: Record<string, unknown> = {}): string =>
  JSON.stringify({
    instance_id: 'acme__calc-12',
    repo: 'acme/calc',
    base_commit: 'a'.repeat(40),
    problem_statement: 'Average rounds wrong',
    test_patch: 'diff --git a/t b/t\n',
    FAIL_TO_PASS: '["tests/test_calc.py::test_avg"]',
    PASS_TO_PASS: ['tests/test_calc.py::test_sum'],
    hints_text: '',
    ...over,
  });

test('SWE-bench instances: lists as JSON strings or arrays, extra fields ignored, repo_path relative to the file', () => {
  const [t] = parseTasks(`${task({ repo_path: 'repos/calc' })}\n\n`, '/sets/one');
  assert.ok(t);
  assert.deepEqual(t.FAIL_TO_PASS, ['tests/test_calc.py::test_avg']);
  assert.deepEqual(t.PASS_TO_PASS, ['tests/test_calc.py::test_sum']);
  assert.equal(t.repo_path, '/sets/one/repos/calc');
  assert.equal('hints_text' in t, false);
});

test('a bad task file names every bad line and runs nothing', () => {
  const text = [
    task(),
    'not json',
    task({ instance_id: '../escape' }),
    task({ FAIL_TO_PASS: '[]' }),
    task({ FAIL_TO_PASS: 'tests/x.py::t' }),
    task({ repo: undefined }),
    task(),
  ].join('\n');
  assert.throws(
    () => parseTasks(text, '/'),
    (e: unknown) =>
      e instanceof TaskFileError &&
      /line 2: not JSON/.test(e.message) &&
      /line 3 \(\.\.\/escape\): instance_id/.test(e.message) &&
      /line 4 .*FAIL_TO_PASS is empty/.test(e.message) &&
      /line 5 .*a list of test ids/.test(e.message) &&
      /line 6 .*needs repo \(owner\/name\) or repo_path/.test(e.message) &&
      /line 7: instance_id acme__calc-12 appears twice/.test(e.message),
  );
  assert.throws(() => parseTasks('\n', '/'), /holds no task/);
});

test("pytest -rA and node's TAP are read per test by the engine; a test missing from the output has none", () => {
  const results = (text: string, file: string | null = null): TestResults =>
    new Map(
      (readFacts(text, { killed: null, exitCode: 1 }, [], undefined, null).tests ?? []).map((f) => [
        file !== null && f.file === null ? `${file}::${f.id}` : f.id,
        f,
      ]),
    );
  const status = (r: TestResults, id: string, byName = false): string | null =>
    factOf(r, id, byName)?.status ?? null;
  const py = results(
    [
      '=========================== short test summary info ============================',
      'PASSED tests/test_a.py::test_one',
      'FAILED tests/test_a.py::test_two - AssertionError: assert 1 == 2',
      'ERROR tests/test_b.py::test_setup',
      'XFAIL tests/test_a.py::test_known - reason',
      'SKIPPED [1] tests/test_a.py:9: no network',
      'PASSED tests/test_a.py::test_param[a-b]',
    ].join('\n'),
  );
  assert.equal(status(py, 'tests/test_a.py::test_one'), 'passed');
  assert.equal(status(py, 'tests/test_a.py::test_two'), 'failed');
  assert.equal(status(py, 'tests/test_b.py::test_setup'), 'errored');
  assert.equal(status(py, 'tests/test_a.py::test_known'), 'skipped');
  assert.ok(passed(factOf(py, 'tests/test_a.py::test_known')), 'an expected failure counts as passing');
  assert.equal(status(py, 'tests/test_a.py::test_param[a-b]'), 'passed');
  assert.equal(status(py, 'tests/test_a.py::test_absent'), null);

  const tap = results(
    [
      'TAP version 13',
      '# Subtest: top passes',
      'ok 1 - top passes # time=2.6ms',
      '# Subtest: group',
      '    # Subtest: inner \\# ok \\\\ x',
      '    ok 1 - inner \\# ok \\\\ x',
      '    # Subtest: inner bad',
      '    not ok 2 - inner bad',
      '      ---',
      '      duration_ms: 1',
      '      ...',
      '    1..2',
      'not ok 2 - group',
      '# Subtest: skipped one',
      'ok 3 - skipped one # SKIP',
      '1..3',
    ].join('\n'),
    'test/a.test.js',
  );
  assert.equal(
    status(tap, 'test/a.test.js::top passes'),
    'passed',
    'the time directive is not part of the name',
  );
  assert.equal(status(tap, 'test/a.test.js::group > inner # ok \\ x'), 'passed', 'escapes are undone');
  assert.equal(status(tap, 'test/a.test.js::group > inner bad'), 'failed');
  assert.equal(status(tap, 'test/a.test.js::group'), null, 'a suite is not a test');
  assert.equal(status(tap, 'test/a.test.js::skipped one'), 'skipped');
  // A bare name matches a `file::name` id when the output had no file.
  const bare = results('ok 1 - works\n');
  assert.equal(status(bare, 'test/x.test.js::works', true), 'passed');
  assert.equal(status(bare, 'test/x.test.js::works'), null, 'not when the listed tests span files');
  // Parameters with spaces and dashes stay in the id; the failure message after ` - ` does not.
  const params = results(
    'PASSED tests/t.py::test_op[a - b]\nFAILED tests/t.py::test_op[c - d] - AssertionError: x - y\n',
  );
  assert.equal(status(params, 'tests/t.py::test_op[a - b]'), 'passed');
  assert.equal(status(params, 'tests/t.py::test_op[c - d]'), 'failed');
});

test('the default test commands: one pytest run over the files, one node run over the JavaScript files; otherwise a test_command is needed', () => {
  const t = (f2p: string[], extra: Record<string, unknown> = {}) =>
    parseTasks(task({ FAIL_TO_PASS: f2p, PASS_TO_PASS: [], ...extra }), '/')[0] ?? assert.fail();
  assert.deepEqual(
    testCommands(t(['tests/test_a.py::x', "tests/it's.py::y"])).map((c) => c.command),
    ["python3 -m pytest -rA -p no:cacheprovider 'tests/test_a.py' 'tests/it'\\''s.py'"],
  );
  assert.deepEqual(
    testCommands(t(['test/a.test.js::one', 'test/b.test.js::two'])).map((c) => c.command),
    ["node --test 'test/a.test.js' 'test/b.test.js'"],
  );
  assert.throws(() => testCommands(t(['works'])), /give the task a test_command/);
  assert.deepEqual(
    testCommands(t(['works'], { test_command: 'npx jest --verbose' })).map((c) => c.command),
    ['npx jest --verbose'],
  );
});

test('the paths a patch touches', () => {
  assert.deepEqual(
    patchPaths(
      'diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n--- removed SQL comment\n+++ added text\ndiff --git a/n.py b/n.py\nnew file mode 100644\n--- /dev/null\n+++ b/n.py\n',
    ),
    ['x.py', 'n.py'],
    'lines inside a hunk are content, not headers',
  );
});

test('a checkout at the base commit holds nothing later: no branch, tag or object of the fix, fetched or cloned', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ia-eval-history-'));
  const git = (...args: string[]): string =>
    execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@e', ...args], {
      cwd: dir,
      encoding: 'utf8',
    });
  try {
    git('init', '-q', '-b', 'main');
    writeFileSync(join(dir, 'a.txt'), 'base\n');
    git('add', '-A');
    git('commit', '-qm', 'base');
    const base = git('rev-parse', 'HEAD').trim();
    // The base's objects in a pack of their own: exactly what the checkout keeps, so its repack
    // would find that pack as it is (a local clone hardlinks it).
    git('gc', '--quiet');
    writeFileSync(join(dir, 'a.txt'), 'THE FIX\n');
    git('commit', '-qam', 'the fix');
    git('tag', 'v2');
    const fix = git('rev-parse', 'HEAD').trim();
    // Made at the place of a workspace copy (the sandbox works in it as is). By its full id (the
    // commit alone is fetched) and by a revision (a fetch cannot name it: the clone is pruned).
    for (const at of [base, 'main~1']) {
      const checkout = await checkoutAt(dir, at, 'tasks-test-checkout');
      try {
        const inCopy = (...args: string[]): string =>
          execFileSync('git', args, { cwd: checkout.dir, encoding: 'utf8' });
        assert.match(checkout.dir, /cli-tasks-test-checkout\/repo$/);
        // Its own object store: no file shared (hardlinked) with the source repository's.
        const files = (d: string): string[] =>
          readdirSync(d, { withFileTypes: true }).flatMap((e) =>
            e.isDirectory() ? files(join(d, e.name)) : [join(d, e.name)],
          );
        for (const f of files(join(checkout.dir, '.git', 'objects'))) assert.equal(statSync(f).nlink, 1, f);
        assert.equal(inCopy('log', '--all', '--format=%s').trim(), 'base');
        assert.equal(inCopy('for-each-ref', '--format=%(refname)').trim(), 'refs/heads/eval-base');
        assert.throws(() => inCopy('cat-file', '-e', fix), 'the fix commit is not in the checkout');
        assert.doesNotMatch(inCopy('rev-list', '--all', '--objects'), new RegExp(fix));
        assert.equal(inCopy('rev-parse', 'HEAD').trim(), base, at);
      } finally {
        await checkout.cleanup();
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
