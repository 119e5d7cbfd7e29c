import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { EventOf } from '../../src/events/schema.js';
import { compareRuns } from '../../src/testing/compare.js';
import { summarize } from '../../src/testing/parse-test-output.js';
import type { TestFact, TestStatus } from '../../src/testing/test-run.js';
import { verdict } from '../../src/testing/verdict.js';

type TestRun = EventOf<'test_run'>;

/** A fact: `file::name`, or the whole file when the name is empty. */
function fact(file: string | null, name: string, status: TestStatus, detail?: string): TestFact {
  const id = name === '' && file !== null ? file : file === null ? name : `${file}::${name}`;
  return { id, file, status, source: 'report', ...(detail === undefined ? {} : { detail }) };
}

function run(
  phase: TestRun['phase'],
  facts: TestFact[],
  o: { exitCode?: number | null; killed?: TestRun['killed']; complete?: boolean } = {},
): TestRun {
  const failing = facts.some(
    (f) => f.status === 'failed' || f.status === 'errored' || f.status === 'crashed-file',
  );
  const summary = summarize({
    runner: 'node-test',
    facts,
    counts: {
      passed: facts.filter((f) => f.status === 'passed').length,
      failed: facts.filter((f) => ['failed', 'errored', 'crashed-file'].includes(f.status)).length,
      skipped: 0,
    },
    complete: o.complete ?? true,
    sources: ['report (node:test reporter)'],
    hung: facts.filter((f) => f.detail === 'timed out').map((f) => f.file ?? f.id),
    fileMs: new Map(),
  });
  return {
    id: 1,
    ts: '2026-12-04T00:00:00.000Z',
    kind: 'test_run',
    phase,
    command: 'npm test',
    exitCode: o.exitCode === undefined ? (failing ? 1 : 0) : o.exitCode,
    killed: o.killed ?? null,
    durationMs: 1000,
    summary,
    output: '',
    outputBytes: 0,
  };
}

const math = [
  fact('test/math.test.js', 'math > adds', 'passed'),
  fact('test/math.test.js', 'math > nested > multiplies', 'passed'),
];

void describe('a file that could not run, reconciled with its tests', () => {
  void test('a file that ran out of memory before and whose tests all pass now is fixed, and the reason says so', () => {
    const before = run('baseline', [
      ...math,
      fact('test/parse.test.js', '', 'crashed-file', 'out of memory'),
    ]);
    const after = run('final', [
      ...math,
      fact('test/parse.test.js', 'parse > reads a line', 'passed'),
      fact('test/parse.test.js', 'parse > reads a huge line', 'passed'),
    ]);
    const c = compareRuns(before, after);
    assert.deepEqual(c.fixed, ['test/parse.test.js']);
    assert.deepEqual(c.vanished, [], 'not "a failing test is gone"');
    assert.deepEqual(c.newPassing, [], "the file's tests are the file, not new tests");
    assert.deepEqual(c.filesFixed, [{ file: 'test/parse.test.js', detail: 'out of memory', tests: 2 }]);
    const v = verdict(before, after);
    assert.equal(v.outcome, 'resolved', v.reason);
    assert.match(
      v.reason,
      /test files that could not run before run now and their tests pass: test\/parse\.test\.js \(out of memory before; its 2 tests pass now\)/,
    );
  });

  void test('a file that hung before and still hangs is not fixed', () => {
    const before = run('baseline', [...math, fact('test/proxy.test.js', '', 'crashed-file', 'timed out')]);
    const after = run('final', [
      ...math,
      fact('test/proxy.test.js', 'proxy > connects', 'passed'),
      fact('test/proxy.test.js', 'proxy > waits on a socket', 'errored', 'timed out'),
    ]);
    const c = compareRuns(before, after);
    assert.deepEqual(c.preExisting, ['test/proxy.test.js']);
    assert.deepEqual(c.filesFixed, []);
    const v = verdict(before, after);
    assert.equal(v.outcome, 'unverified', v.reason);
    assert.match(v.reason, /failing before and after, not caused by this change: test\/proxy\.test\.js/);
  });

  void test('a file still crashing as a whole is not fixed either', () => {
    const before = run('baseline', [
      ...math,
      fact('test/a.test.js', '', 'crashed-file', 'crashed (SIGABRT)'),
    ]);
    const after = run('final', [...math, fact('test/a.test.js', '', 'crashed-file', 'crashed (SIGABRT)')]);
    assert.equal(verdict(before, after).outcome, 'unverified');
  });

  void test('a file whose tests passed before and that crashes now is a regression, named as a file', () => {
    const before = run('baseline', [
      ...math,
      fact('test/parse.test.js', 'parse > reads a line', 'passed'),
      fact('test/bug.test.js', 'bug > is fixed', 'failed'),
    ]);
    const after = run('final', [
      ...math,
      fact('test/parse.test.js', '', 'crashed-file', 'out of memory'),
      fact('test/bug.test.js', 'bug > is fixed', 'passed'),
    ]);
    const c = compareRuns(before, after);
    assert.deepEqual(c.regressed, ['test/parse.test.js']);
    assert.deepEqual(c.filesBroken, [{ file: 'test/parse.test.js', detail: 'out of memory', tests: 1 }]);
    const v = verdict(before, after);
    assert.equal(v.outcome, 'unverified');
    assert.match(
      v.reason,
      /test files whose tests passed before cannot run now: test\/parse\.test\.js \(out of memory now; its 1 test passed before\)/,
    );
  });

  void test('a baseline stopped in a file (killed) still shows that file fixed; tests it never reached are not new', () => {
    // The harness stopped the baseline while test/oom.test.js ran; test/zz.test.js never ran.
    const before = run('baseline', [...math, fact('test/oom.test.js', '', 'crashed-file', 'out of memory')], {
      killed: 'memory',
      exitCode: null,
      complete: false,
    });
    const after = run('final', [
      ...math,
      fact('test/oom.test.js', 'oom > keeps memory bounded', 'passed'),
      fact('test/zz.test.js', 'zz > later', 'passed'),
    ]);
    const v = verdict(before, after);
    assert.equal(v.outcome, 'resolved', v.reason);
    assert.match(v.reason, /test\/oom\.test\.js \(out of memory before; its 1 test passes now\)/);
    assert.doesNotMatch(v.reason, /new passing tests/);
  });

  void test('a test named without its file matches the one test of that name that has one', () => {
    const before = run('baseline', [
      fact(null, 'math > adds', 'passed'),
      fact(null, 'math > divides', 'failed'),
    ]);
    const after = run('final', [
      fact('test/math.test.js', 'math > adds', 'passed'),
      fact('test/math.test.js', 'math > divides', 'passed'),
    ]);
    const c = compareRuns(before, after);
    assert.deepEqual(c.fixed, ['math > divides']);
    assert.deepEqual(c.newPassing, []);
  });

  void test('runs recorded before ids had files are not compared test by test with newer ones', () => {
    const newer = run('final', [fact('test/math.test.js', 'math > adds', 'passed')]);
    const older: TestRun = {
      ...newer,
      phase: 'baseline',
      summary: { runner: 'node', passed: 1, failed: 0, skipped: 0, failedNames: [], passedNames: ['adds'] },
    };
    assert.equal(compareRuns(older, newer).perTest, false);
  });
});

void describe('without_fix reads files as the final run does', () => {
  void test('a test file that crashes on the code before the change proves it; one that passes there does not', () => {
    const before = run('baseline', [...math]);
    const after = run('final', [
      ...math,
      fact('test/new.test.js', 'new > works', 'passed'),
      fact('test/trivial.test.js', 'trivial > passes', 'passed'),
    ]);
    const without = run('without_fix', [
      fact('test/new.test.js', '', 'crashed-file', 'failed to load'),
      fact('test/trivial.test.js', 'trivial > passes', 'passed'),
    ]);
    const v = verdict(before, after, without);
    assert.equal(v.outcome, 'resolved', v.reason);
    assert.deepEqual(v.passWithoutFix, ['test/trivial.test.js::trivial > passes']);
    assert.match(v.reason, /new passing tests: test\/new\.test\.js::new > works/);
  });

  void test('a without_fix run that was not complete cannot show a test missing from it failing', () => {
    const before = run('baseline', [...math]);
    const after = run('final', [...math, fact('test/new.test.js', 'new > works', 'passed')]);
    const without = run('without_fix', [fact('test/other.test.js', 'other > x', 'failed')], {
      complete: false,
    });
    const v = verdict(before, after, without);
    assert.equal(v.outcome, 'unverified', v.reason);
  });
});
