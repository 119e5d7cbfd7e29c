import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isTestPath } from '../../src/testing/test-paths.js';
import { closingReferences, judge, runnableTestFiles } from '../../src/eval/from-repo.js';
import type { TestRun } from '../../src/eval/grade.js';
import type { TestStatus } from '../../src/testing/test-run.js';

void test('closing keywords name issues of this repository only, in every form GitHub links', () => {
  const text = [
    'Fixes #12 and closes: #13.',
    'resolved octo/Calc#14; fix other/repo#15',
    'Resolves https://github.example/octo/calc/issues/16',
    'see #17, refs #18, prefix#19, closes#20',
    'CLOSED #21',
  ].join('\n');
  assert.deepEqual(
    closingReferences(text, 'octo', 'calc', ['github.example']).sort((a, b) => a - b),
    [12, 13, 14, 16, 21],
  );
  assert.deepEqual(
    closingReferences('Fixes https://github.com/other/calc/issues/3', 'octo', 'calc', ['github.com']),
    [],
  );
  // An issue URL on another host is not this repository's issue.
  assert.deepEqual(
    closingReferences('Fixes https://evil.example/octo/calc/issues/3', 'octo', 'calc', ['github.com']),
    [],
  );
  assert.deepEqual(closingReferences('fixes #0', 'octo', 'calc', ['github.com']), []);
});

void test('test paths and the test files a runner runs', () => {
  for (const p of [
    'tests/test_calc.py',
    'pkg/tests/helpers.py',
    'src/__tests__/a.js',
    'calc_test.py',
    'conftest.py',
    'polls/tests.py',
    'lib/x.test.ts',
    'e2e/flow.js',
    'test/fixtures/data.json',
  ]) {
    assert.equal(isTestPath(p), true, p);
  }
  for (const p of ['calc.py', 'src/contest.py', 'README.md', 'latest/index.js', 'attestation.py']) {
    assert.equal(isTestPath(p), false, p);
  }
  assert.deepEqual(
    runnableTestFiles([
      'tests/test_calc.py',
      'tests/conftest.py',
      'tests/helpers.py',
      'test/parse.js',
      'test/fixtures/broken.js',
      'test/helpers/make.js',
      'src/a.spec.ts',
      'test/data.json',
    ]),
    ['tests/test_calc.py', 'test/parse.js', 'src/a.spec.ts'],
  );
});

function ran(results: Record<string, TestStatus>): Extract<TestRun, { kind: 'ran' }> {
  const facts = Object.entries(results).map(
    ([id, status]) => [id, { id, file: 't', status, source: 'output' as const }] as const,
  );
  return { kind: 'ran', results: new Map(facts), output: 'out', testMs: 1, runnerConfig: [] };
}

void test('FAIL_TO_PASS are the tests that did not pass before and pass after; PASS_TO_PASS pass both times', () => {
  const before = ran({ 't::a': 'passed', 't::b': 'failed', 't::c': 'errored', 't::skip': 'skipped' });
  const after = ran({
    't::a': 'passed',
    't::b': 'passed',
    't::c': 'passed',
    't::new': 'passed',
    't::skip': 'skipped',
    't::still': 'failed',
  });
  assert.deepEqual(judge(before, after), {
    failToPass: ['t::b', 't::c', 't::new'],
    passToPass: ['t::a'],
  });
  // A test file that did not even import before (no results at all) makes every passing test F2P.
  assert.deepEqual(judge(ran({}), ran({ 't::a': 'passed' })), { failToPass: ['t::a'], passToPass: [] });
  const none = judge(ran({ 't::a': 'passed' }), ran({ 't::a': 'passed' }));
  assert.ok('code' in none && none.code === 'no_fail_to_pass', JSON.stringify(none));
  const silent = judge(ran({}), { ...ran({}), output: 'ERROR: not found' });
  assert.ok('code' in silent && silent.code === 'tests_did_not_run' && /not found/.test(silent.reason));
  const broken = judge(ran({}), { kind: 'patch_failed', output: 'error: patch failed: calc.py:3' });
  assert.ok('code' in broken && broken.code === 'patch_does_not_apply' && /calc\.py/.test(broken.reason));
  // The test patch not applying is the candidate's; a reset failing is the harness's (not cached).
  const tests = judge(
    { kind: 'harness_failed', stage: 'test_patch', reason: 'the test patch does not apply' },
    ran({}),
  );
  assert.ok('code' in tests && tests.code === 'patch_does_not_apply');
  const reset = judge({ kind: 'harness_failed', stage: 'reset', reason: 'could not reset' }, ran({}));
  assert.ok('code' in reset && reset.code === 'harness_error');
});
