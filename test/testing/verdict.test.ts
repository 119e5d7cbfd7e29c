import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { judge } from '../../src/agent/run-agent.js';
import { NAME_CAP, parseTestOutput } from '../../src/testing/parse-test-output.js';
import { environmentProblem, verdict } from '../../src/testing/verdict.js';
import type { EventOf } from '../../src/events/schema.js';

type TestRun = EventOf<'test_run'>;

function run(
  phase: 'baseline' | 'final',
  o: {
    exitCode?: number | null;
    killed?: TestRun['killed'];
    passed?: string[];
    failed?: string[];
    counts?: { passed: number | null; failed: number | null };
    output?: string;
    runner?: string;
  } = {},
): TestRun {
  const passedNames = o.passed ?? [];
  const failedNames = o.failed ?? [];
  const named = passedNames.length + failedNames.length > 0;
  return {
    id: phase === 'baseline' ? 1 : 9,
    ts: '2026-12-01T00:00:00.000Z',
    kind: 'test_run',
    phase,
    command: 'npm test',
    exitCode: o.exitCode === undefined ? (failedNames.length > 0 ? 1 : 0) : o.exitCode,
    killed: o.killed ?? null,
    durationMs: 1000,
    summary: {
      runner: o.runner ?? 'node',
      passed: o.counts?.passed ?? (named ? passedNames.length : null),
      failed: o.counts?.failed ?? (named ? failedNames.length : null),
      skipped: null,
      passedNames,
      failedNames,
    },
    output: o.output ?? 'test output',
    outputBytes: (o.output ?? 'test output').length,
  };
}

/** A run as the harness records it: the summary parsed from real output. */
function parsed(phase: 'baseline' | 'final', output: string, exitCode: number): TestRun {
  const summary = parseTestOutput(output);
  return { ...run(phase, { exitCode, output }), summary: { ...summary } };
}

const fixture = (name: string): string =>
  readFileSync(join(import.meta.dirname, '..', 'fixtures', 'test-output', name), 'utf8');

describe('per-test verdict', () => {
  test('a test failing before for an unrelated reason and still failing does not count against a fix', () => {
    const before = run('baseline', { passed: ['a', 'b'], failed: ['flaky network', 'parse empty'] });
    const after = run('final', { passed: ['a', 'b', 'parse empty'], failed: ['flaky network'] });
    const v = verdict(before, after);
    assert.equal(v.outcome, 'resolved');
    assert.equal(v.cause, undefined);
    assert.deepEqual(v.comparison.fixed, ['parse empty']);
    assert.deepEqual(v.comparison.preExisting, ['flaky network']);
    assert.deepEqual(v.comparison.regressed, []);
    assert.equal(v.comparison.perTest, true);
    assert.match(v.reason, /tests that failed before pass now: parse empty/);
    assert.match(v.reason, /failing before and after, not caused by this change: flaky network/);
  });

  test('a fix that breaks a test that passed at baseline is unverified and names the regression', () => {
    const before = run('baseline', { passed: ['a', 'b'], failed: ['parse empty'] });
    const after = run('final', { passed: ['a', 'parse empty'], failed: ['b'] });
    const v = verdict(before, after);
    assert.equal(v.outcome, 'unverified');
    assert.equal(v.cause, undefined);
    assert.deepEqual(v.comparison.regressed, ['b']);
    assert.deepEqual(v.comparison.fixed, ['parse empty']);
    assert.match(v.reason, /tests that passed before fail now: b\b/);
  });

  test('a new passing test proves a fix when everything passed before', () => {
    const v = verdict(
      run('baseline', { passed: ['a'] }),
      run('final', { passed: ['a', 'handles empty input'] }),
    );
    assert.equal(v.outcome, 'resolved');
    assert.deepEqual(v.comparison.newPassing, ['handles empty input']);
    assert.match(v.reason, /new passing tests: handles empty input/);
  });

  test('nothing fixed and nothing new: no test demonstrates the fix', () => {
    const v = verdict(
      run('baseline', { passed: ['a'], failed: ['x'] }),
      run('final', { passed: ['a'], failed: ['x'] }),
    );
    assert.equal(v.outcome, 'unverified');
    assert.deepEqual(v.comparison.preExisting, ['x']);
    assert.match(v.reason, /no test demonstrates the fix/);
  });

  test('a failing test the final run no longer reports (removed, renamed or skipped) keeps the change unverified', () => {
    const before = run('baseline', { passed: ['a'], failed: ['average rounds'] });
    const after = run('final', { passed: ['a', 'roundTo exists'] });
    const v = verdict(before, after);
    assert.equal(v.outcome, 'unverified');
    assert.deepEqual(v.comparison.vanished, ['average rounds']);
    assert.match(v.reason, /not reported by the final run \(removed, renamed or skipped\).*: average rounds/);
    // A final run that named only part of its tests cannot tell.
    const capped = run('final', {
      passed: Array.from({ length: NAME_CAP }, (_, i) => `t${i}`),
      counts: { passed: NAME_CAP + 5, failed: 0 },
    });
    assert.equal(
      verdict(run('baseline', { passed: ['t0'], failed: ['average rounds'] }), capped).comparison.vanished
        .length,
      1,
    );
    assert.doesNotMatch(
      verdict(run('baseline', { passed: ['t0'], failed: ['average rounds'] }), capped).reason,
      /removed, renamed or skipped/,
    );
  });

  test('a final run that ran no test, or names none where the baseline named some, proves nothing', () => {
    const before = run('baseline', { passed: ['a'], failed: ['x'] });
    const none = verdict(before, run('final', { exitCode: 0, counts: { passed: 0, failed: 0 } }));
    assert.equal(none.outcome, 'unverified');
    assert.match(none.reason, /ran no test/);
    const unnamed = verdict(before, run('final', { exitCode: 0, counts: { passed: 3, failed: 0 } }));
    assert.equal(unnamed.outcome, 'unverified');
    assert.match(unnamed.reason, /names no test, though the baseline named 2/);
    // By exit code, with counts: a suite that ran nothing is no fix either.
    const counted = run('baseline', { exitCode: 1, counts: { passed: 3, failed: 1 }, runner: 'unknown' });
    assert.equal(
      verdict(counted, run('final', { exitCode: 0, counts: { passed: 0, failed: 0 } })).outcome,
      'unverified',
    );
  });

  test('a new test that fails keeps the change unverified', () => {
    const v = verdict(
      run('baseline', { passed: ['a'], failed: ['x'] }),
      run('final', { passed: ['a', 'x'], failed: ['repro'] }),
    );
    assert.equal(v.outcome, 'unverified');
    assert.deepEqual(v.comparison.newFailing, ['repro']);
    assert.match(v.reason, /new tests fail: repro/);
  });

  test('a test that passed before and is missing from a stopped final run counts against the fix', () => {
    const v = verdict(
      run('baseline', { passed: ['a', 'b'], failed: ['x'] }),
      run('final', { passed: ['x'], exitCode: null, killed: 'timeout' }),
    );
    assert.equal(v.outcome, 'unverified');
    assert.deepEqual(v.comparison.missing, ['a', 'b']);
  });

  test('a passing test that a complete final run no longer reports (removed, renamed or skipped) keeps the change unverified', () => {
    // The change fixes x and drops (or skips) the test it breaks: the badge must not hide that.
    const v = verdict(
      run('baseline', { passed: ['a', 'old'], failed: ['x'] }),
      run('final', { passed: ['a', 'x'] }),
    );
    assert.equal(v.outcome, 'unverified');
    assert.deepEqual(v.comparison.missing, ['old']);
    assert.deepEqual(v.comparison.regressed, []);
    assert.match(
      v.reason,
      /tests that passed before are not reported by the final run \(removed, renamed or skipped\), so the change may hide what it breaks: old/,
    );
    // The same runs with every test still reported: resolved.
    assert.equal(
      verdict(
        run('baseline', { passed: ['a', 'old'], failed: ['x'] }),
        run('final', { passed: ['a', 'old', 'x'] }),
      ).outcome,
      'resolved',
    );
  });

  test('past the parser name cap, a missing name is not a regression and an unseen name is not new', () => {
    const many = (prefix: string): string[] =>
      Array.from({ length: NAME_CAP }, (_, i) => `${prefix}${String(i).padStart(3, '0')}`);
    const passing = many('t');
    // The fixed test takes a place in the capped list and pushes the last name out.
    const after = run('final', { passed: ['fixed', ...passing.slice(0, -1)] });
    const v = verdict(run('baseline', { passed: passing, failed: ['fixed'] }), after);
    assert.equal(v.outcome, 'resolved');
    assert.deepEqual(v.comparison.missing, [passing.at(-1)]);
    // Nothing failed before and the baseline's list is cut: a name it did not list is not proof.
    const w = verdict(run('baseline', { passed: passing }), run('final', { passed: ['other', ...passing] }));
    assert.equal(w.outcome, 'unverified');
    assert.match(w.reason, /not known to be new/);
  });

  test('a final run that fails without naming the failure cannot be compared', () => {
    const v = verdict(
      run('baseline', { passed: ['a'], failed: ['x'] }),
      run('final', { passed: ['a', 'x'], exitCode: 1 }),
    );
    assert.equal(v.outcome, 'unverified');
    assert.match(v.reason, /without naming a failing test/);
  });

  test('judge (run-agent) returns the same outcome, reason and cause as a Stop', () => {
    const before = run('baseline', { passed: ['a'], failed: ['x'] });
    const after = run('final', { passed: ['a', 'x'] });
    const v = verdict(before, after);
    assert.deepEqual(judge(before, after), { outcome: v.outcome, reason: v.reason });
  });
});

describe('runners that do not name tests', () => {
  test('the verdict goes by exit code and says why', () => {
    const before = run('baseline', { exitCode: 1, counts: { passed: 3, failed: 1 } });
    const after = run('final', { exitCode: 0, counts: { passed: 4, failed: 0 } });
    const v = verdict(before, after);
    assert.equal(v.outcome, 'resolved');
    assert.equal(v.comparison.perTest, false);
    assert.match(v.reason, /judged by exit code, because the test runner did not name individual tests/);
  });

  test('a final run that fails is unverified under the exit-code rule', () => {
    const v = verdict(
      run('baseline', { exitCode: 1, counts: { passed: 3, failed: 1 } }),
      run('final', { exitCode: 1, counts: { passed: 3, failed: 1 } }),
    );
    assert.equal(v.outcome, 'unverified');
    assert.match(v.reason, /does not pass .*judged by exit code/);
  });

  test('names on one side only fall back to the exit code too', () => {
    const v = verdict(
      run('baseline', { exitCode: 0, counts: { passed: 3, failed: 0 } }),
      run('final', { passed: ['a', 'b', 'c'] }),
    );
    assert.equal(v.comparison.perTest, false);
    assert.equal(v.outcome, 'unverified');
    assert.match(v.reason, /no new test demonstrates the fix .*judged by exit code/);
  });
});

describe('a broken environment', () => {
  const notFound = run('baseline', {
    exitCode: 127,
    output: '> calc@1.0.0 test\n> jest\n\nsh: 1: jest: not found\n',
  });

  test('a baseline that exits 127 with jest not found, then a passing final run: unverified, environment', () => {
    const v = verdict(notFound, run('final', { passed: ['a', 'b'] }));
    assert.equal(v.outcome, 'unverified');
    assert.equal(v.cause, 'environment');
    assert.match(v.reason, /test environment is broken: the baseline test run could not run/);
    assert.match(v.reason, /sh: 1: jest: not found/);
    assert.match(v.baselineProblem ?? '', /command was not found \(exit code 127\)/);
    assert.equal(v.finalProblem, null);
    assert.deepEqual(judge(notFound, run('final', { passed: ['a'] })).cause, 'environment');
  });

  test('neither run could run: unverified, environment', () => {
    const v = verdict(notFound, { ...notFound, phase: 'final', id: 9 });
    assert.equal(v.outcome, 'unverified');
    assert.equal(v.cause, 'environment');
    assert.match(v.reason, /neither the baseline nor the final test run could run/);
  });

  test('the baseline ran but the final run could not: the change broke the setup, not the environment', () => {
    const v = verdict(run('baseline', { passed: ['a'], failed: ['x'] }), {
      ...notFound,
      phase: 'final',
    });
    assert.equal(v.outcome, 'unverified');
    assert.equal(v.cause, undefined);
    assert.match(v.reason, /the change broke the test setup/);
  });

  test('a pytest collection error at baseline is an environment problem, quoting the import', () => {
    const baseline = parsed('baseline', fixture('pytest-collection-error.txt'), 2);
    const problem = environmentProblem(baseline);
    assert.match(problem ?? '', /ModuleNotFoundError: No module named 'nonexistent_mod'/);
    const v = verdict(baseline, parsed('final', fixture('pytest-pass.txt'), 0));
    assert.equal(v.outcome, 'unverified');
    assert.equal(v.cause, 'environment');
  });

  test("a collection error in the repository's own package (a circular import) is a failing run, which the fix that breaks the cycle proves", () => {
    const baseline = parsed('baseline', fixture('pytest-circular-import.txt'), 2);
    assert.equal(environmentProblem(baseline), null);
    const final = parsed(
      'final',
      [
        '============================= test session starts ==============================',
        'collected 2 items',
        '',
        'tests/test_a.py::test_helper_a PASSED                                    [ 50%]',
        'tests/test_a.py::test_helper_b PASSED                                    [100%]',
        '',
        '============================== 2 passed in 0.01s ===============================',
      ].join('\n'),
      0,
    );
    const v = verdict(baseline, final);
    assert.equal(v.outcome, 'resolved', v.reason);
    assert.equal(v.cause, undefined);
    assert.match(v.reason, /tests\/test_a\.py/);
    // The same collection error for a dependency that is not installed stays the environment's.
    const missing = parsed('baseline', fixture('pytest-collection-error.txt'), 2);
    assert.equal(verdict(missing, final).cause, 'environment');
  });

  test('each way a run cannot run is recognised', () => {
    const cases: [string, number | null, RegExp][] = [
      ['bash: pytest: command not found', 127, /command was not found/],
      ['npm ERR! Missing script: "test"', 1, /no such npm script/],
      ['npm error Missing script: "test"', 1, /no such npm script/],
      ["Error: Cannot find module 'vitest/config'", 1, /module could not be loaded/],
      [
        "Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'lodash' imported from /w/src/a.js",
        1,
        /module could not be loaded/,
      ],
      ["E   ImportError: cannot import name 'x' from 'y'", 1, /Python import failed/],
      ['/bin/sh: 1: ./run-tests.sh: Permission denied', 126, /could not be executed \(exit code 126\)/],
      ['Segmentation fault', 139, /failed \(exit code 139\) without reporting any test/],
    ];
    for (const [output, exitCode, words] of cases) {
      const problem = environmentProblem(run('baseline', { exitCode, output }));
      assert.match(problem ?? '(null)', words, output);
    }
  });

  test('a run that ran is not an environment problem', () => {
    // Tests fail, some pass: it ran.
    assert.equal(environmentProblem(run('baseline', { passed: ['a'], failed: ['b'] })), null);
    // A missing module in one file while other tests pass is that file's failure.
    assert.equal(
      environmentProblem(
        run('baseline', { passed: ['a'], failed: ['b'], output: "Error: Cannot find module 'left-pad'" }),
      ),
      null,
    );
    // The repository's own file missing is what a fix may create.
    assert.equal(
      environmentProblem(
        run('baseline', {
          failed: ['test/calc.test.js'],
          output:
            "Error [ERR_MODULE_NOT_FOUND]: Cannot find module '/w/src/round.js' imported from /w/src/calc.js\n  code: 'ERR_MODULE_NOT_FOUND'",
        }),
      ),
      null,
    );
    // Stopped runs are incomplete, not broken.
    assert.equal(environmentProblem(run('baseline', { exitCode: null, killed: 'timeout' })), null);
    // A passing run with no summary did run.
    assert.equal(environmentProblem(run('baseline', { exitCode: 0 })), null);
  });
});

describe("the change's tests run without its code (without_fix)", () => {
  const withoutFix = (o: Parameters<typeof run>[1]): TestRun => ({
    ...run('final', o),
    phase: 'without_fix',
  });

  test('a trivial new test that passes without the change is not proof, and a still-failing test stays named', () => {
    const before = run('baseline', { passed: ['a'], failed: ['average rounds'] });
    const after = run('final', { passed: ['a', 'counts shells'], failed: ['average rounds'] });
    // Without the run, the new passing test would be taken as proof.
    assert.equal(verdict(before, after).outcome, 'resolved');
    const v = verdict(
      before,
      after,
      withoutFix({ passed: ['a', 'counts shells'], failed: ['average rounds'] }),
    );
    assert.equal(v.outcome, 'unverified');
    assert.deepEqual(v.passWithoutFix, ['counts shells']);
    assert.match(v.reason, /also pass without it .*: counts shells/);
    assert.match(v.reason, /failing before and after, not caused by this change: average rounds/);
  });

  test("a failing test edited until it passes is not proof: it passes without the change's code", () => {
    const before = run('baseline', { passed: ['a'], failed: ['average rounds'] });
    const after = run('final', { passed: ['a', 'average rounds'] });
    const v = verdict(before, after, withoutFix({ passed: ['a', 'average rounds'] }));
    assert.equal(v.outcome, 'unverified');
    assert.deepEqual(v.passWithoutFix, ['average rounds']);
  });

  test('a new test that fails without the change is proof, and the reason says it was checked', () => {
    const before = run('baseline', { passed: ['a'] });
    const after = run('final', { passed: ['a', 'handles empty input'] });
    const v = verdict(before, after, withoutFix({ passed: ['a'], failed: ['handles empty input'] }));
    assert.equal(v.outcome, 'resolved');
    assert.deepEqual(v.passWithoutFix, []);
    assert.match(v.reason, /new passing tests: handles empty input; each fails without the change/);
  });

  test('a new test file that cannot load without the code it tests is proof (missing from a run that failed)', () => {
    const before = run('baseline', { passed: ['a'] });
    const after = run('final', { passed: ['a', 'parses dates'] });
    const v = verdict(
      before,
      after,
      withoutFix({ passed: ['a'], failed: ['tests/test_dates.py'], exitCode: 2 }),
    );
    assert.equal(v.outcome, 'resolved', v.reason);
  });

  test('missing from a stopped run, or from a run that passed, shows nothing', () => {
    const before = run('baseline', { passed: ['a'] });
    const after = run('final', { passed: ['a', 'parses dates'] });
    const stopped = verdict(before, after, withoutFix({ passed: ['a'], exitCode: null, killed: 'timeout' }));
    assert.equal(stopped.outcome, 'unverified');
    const passed = verdict(before, after, withoutFix({ passed: ['a'], exitCode: 0 }));
    assert.equal(passed.outcome, 'unverified');
    assert.deepEqual(passed.passWithoutFix, ['parses dates']);
  });

  test('only the tests that fail without the change count; the rest are named as not proof', () => {
    const before = run('baseline', { passed: ['a'], failed: ['x'] });
    const after = run('final', { passed: ['a', 'x', 'trivial'] });
    const v = verdict(before, after, withoutFix({ passed: ['a', 'trivial'], failed: ['x'] }));
    assert.equal(v.outcome, 'resolved');
    assert.match(v.reason, /tests that failed before pass now: x; each fails without the change/);
    assert.match(v.reason, /passing without the change too, so not counted as proof: trivial/);
  });

  test("judged by exit code: a suite that passes with the change's test files alone is not proof", () => {
    const before = run('baseline', { exitCode: 1, counts: { passed: 3, failed: 1 }, runner: 'unknown' });
    const after = run('final', { exitCode: 0, counts: { passed: 4, failed: 0 }, runner: 'unknown' });
    assert.equal(verdict(before, after).outcome, 'resolved');
    assert.equal(
      verdict(before, after, withoutFix({ exitCode: 0, runner: 'unknown' })).outcome,
      'unverified',
    );
    assert.equal(verdict(before, after, withoutFix({ exitCode: 1, runner: 'unknown' })).outcome, 'resolved');
  });
});

describe('without_fix and the verdict, on real runner output', () => {
  const real = (
    phase: TestRun['phase'],
    name: string,
    exitCode: number,
    extra: Partial<TestRun> = {},
  ): TestRun => {
    const output = fixture(name);
    return {
      ...run('final', { exitCode, output }),
      phase,
      summary: { ...parseTestOutput(output) },
      ...extra,
    };
  };

  test("a test whose file the change edited, which cannot load without the change's code, is not proof", () => {
    // The change adds `VERSION = 2` and edits the failing test to `from calc import add, VERSION` with
    // an expectation that matches the bug: the edited file cannot even load on the code before it.
    const before = real('baseline', 'pytest-edited-test-baseline.txt', 1);
    const after = real('final', 'pytest-edited-test-final.txt', 0);
    const without = real('without_fix', 'pytest-edited-test-without-fix.txt', 2, {
      changeFiles: { paths: ['tests/test_calc.py'], total: 1 },
    });
    assert.deepEqual(verdict(before, after).comparison.fixed, ['tests/test_calc.py::test_add']);
    const v = verdict(before, after, without);
    assert.equal(v.outcome, 'unverified', v.reason);
    assert.match(v.reason, /only as the change edited their test files/);
    assert.match(v.reason, /tests\/test_calc\.py::test_add/);
    assert.deepEqual(v.passWithoutFix, []);
    // The same crash in a file the change did not edit (the base's test needs the fix's code to
    // load) is proof, as before.
    const untouched = verdict(before, after, {
      ...without,
      changeFiles: { paths: ['other/test_other.py'], total: 1 },
    });
    assert.equal(untouched.outcome, 'resolved', untouched.reason);
    // Past the recorded paths' cap, every file may be one of the change's.
    const capped = verdict(before, after, {
      ...without,
      changeFiles: { paths: ['other/test_other.py'], total: 51 },
    });
    assert.equal(capped.outcome, 'unverified', capped.reason);
    // A helper beside the test that the change edited (the test file itself untouched) is the same.
    const helper = verdict(before, after, {
      ...without,
      changeFiles: { paths: ['tests/helpers.py'], total: 1 },
    });
    assert.equal(helper.outcome, 'unverified', helper.reason);
    // A data file beside it (a fixture a test run rewrote) is judged by what the run shows.
    const data = verdict(before, after, {
      ...without,
      changeFiles: { paths: ['tests/fixture.txt'], total: 1 },
    });
    assert.equal(data.outcome, 'resolved', data.reason);
    // So is the edited test failing on its own (an import of the new name moved into its body).
    const alone = real('without_fix', 'pytest-edited-test-baseline.txt', 1, {
      changeFiles: { paths: ['tests/test_calc.py'], total: 1 },
    });
    const inBody = verdict(before, after, alone);
    assert.equal(inBody.outcome, 'unverified', inBody.reason);
    assert.match(inBody.reason, /only as the change edited their test files/);
  });

  test('an expected failure (xfail) on the code before the change is that code failing the test', () => {
    const before = real('baseline', 'pytest-xfail-baseline.txt', 0);
    const after = real('final', 'pytest-xpass-final.txt', 0);
    // No test file changed: the without_fix run is the base run again.
    const without = real('without_fix', 'pytest-xfail-baseline.txt', 0, {
      changeFiles: { paths: [], total: 0 },
    });
    const v = verdict(before, after, without);
    assert.equal(v.outcome, 'resolved', v.reason);
    assert.match(v.reason, /tests\/test_calc\.py::test_add/);
    assert.deepEqual(v.passWithoutFix, []);
  });

  test('a runner that names only failures (unittest): a final run naming none, having run as many tests, can prove', () => {
    const before = real('baseline', 'unittest-quiet-fail.txt', 1);
    const after = real('final', 'unittest-quiet-pass.txt', 0);
    assert.equal(before.summary.failedNames.length, 1);
    assert.equal(after.summary.passedNames.length + after.summary.failedNames.length, 0);
    const v = verdict(before, after);
    assert.equal(v.outcome, 'resolved', v.reason);
    // The base's tests again on the code before the change: they still fail there.
    const without = { ...before, phase: 'without_fix' as const, changeFiles: { paths: [], total: 0 } };
    assert.equal(verdict(before, after, without).outcome, 'resolved');
    assert.equal(
      verdict(before, after, { ...after, phase: 'without_fix', changeFiles: { paths: [], total: 0 } })
        .outcome,
      'unverified',
      'passing without the change too',
    );
    // As many tests, but the failing one replaced by a new one that needs the change: without the
    // change the new one fails, not the one that failed before.
    const replaced = verdict(before, after, {
      ...after,
      phase: 'without_fix',
      exitCode: 1,
      summary: { ...after.summary, failed: 1, failedNames: ['test_new (tests.test_calc.TestCalc.test_new)'] },
      changeFiles: { paths: ['tests/test_calc.py'], total: 1 },
    });
    assert.equal(replaced.outcome, 'unverified', replaced.reason);
    assert.match(
      replaced.reason,
      /may have been removed or replaced rather than fixed: tests\.test_calc\.TestCalc\.test_add/,
    );
    // Fewer tests than before: the failing one was removed.
    const fewer = { ...after, summary: { ...after.summary, passed: 2 } };
    const removed = verdict(before, fewer);
    assert.equal(removed.outcome, 'unverified');
    assert.match(removed.reason, /names no test, though the baseline named 1/);
  });
});
