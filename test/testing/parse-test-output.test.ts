import { readFileSync } from 'node:fs';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import {
  NAME_CAP,
  parseTestOutput,
  pytestNodeId,
  stripAnsi,
  unittestName,
} from '../../src/testing/parse-test-output.js';
import type { TestSummary } from '../../src/testing/parse-test-output.js';

/** Fixtures named *-handwritten-* follow the runner's documented format; all others are real runs. */
function fixture(name: string): string {
  return readFileSync(new URL(`../fixtures/test-output/${name}`, import.meta.url), 'utf8');
}

function counts(summary: TestSummary): [string, number | null, number | null, number | null] {
  return [summary.runner, summary.passed, summary.failed, summary.skipped];
}

void describe('node:test output (real runs, node 20)', () => {
  // node's spec and TAP reporters do not print files: ids are title paths.
  const failing = ['divides with rounding', 'string utils > trims whitespace'];
  const passing = ['adds numbers', 'subtracts numbers', 'string utils > upper case', 'other passes'];

  for (const file of ['node-test-tap-fail.txt', 'node-test-spec-fail.txt', 'node-test-npm-tap-fail.txt']) {
    void test(file, () => {
      const summary = parseTestOutput(fixture(file));
      // skipped = 1 skipped + 1 todo; the failing suite "string utils" is not a test.
      assert.deepEqual(counts(summary), ['node-test', 4, 2, 2]);
      assert.deepEqual(summary.failedNames, failing);
      assert.deepEqual(summary.passedNames, passing);
    });
  }

  for (const file of ['node-test-tap-nested-pass.txt', 'node-test-spec-nested-pass.txt']) {
    void test(`${file}: suites and parent tests are not leaves`, () => {
      const summary = parseTestOutput(fixture(file));
      assert.deepEqual(counts(summary), ['node-test', 3, 0, 0]);
      assert.deepEqual(summary.passedNames, ['passing suite > inner ok', 'parent test > child one']);
      assert.equal(summary.complete, true);
      assert.deepEqual(summary.failedNames, []);
    });
  }

  void test('a timed-out (cancelled) test counts as failed, and errored', () => {
    const summary = parseTestOutput(fixture('node-test-spec-timeout.txt'));
    assert.deepEqual(counts(summary), ['node-test', 1, 1, 0]);
    assert.deepEqual(summary.failedNames, ['slow']);
    assert.deepEqual(summary.tests?.[0], {
      id: 'slow',
      file: null,
      status: 'errored',
      source: 'output',
      detail: 'timed out',
    });
  });

  void test('without the summary block, counts come from the result lines', () => {
    const text = fixture('node-test-tap-fail.txt');
    const summary = parseTestOutput(text.slice(0, text.indexOf('# tests')), 'node-test');
    assert.deepEqual(counts(summary), ['node-test', 4, 2, 2]);
  });

  void test('ANSI colours and CRLF line endings are ignored', () => {
    const text = fixture('node-test-spec-fail.txt')
      .replaceAll('✔ ', '\u001b[32m✔ \u001b[39m')
      .replaceAll('✖ ', '\u001b[31m✖ \u001b[39m')
      .replaceAll('\n', '\r\n');
    const summary = parseTestOutput(text);
    assert.deepEqual(counts(summary), ['node-test', 4, 2, 2]);
    assert.deepEqual(summary.failedNames, failing);
  });
});

void describe('pytest output (real runs, pytest 9 with -rA)', () => {
  void test('mixed results: errors count as failed, xfail as skipped', () => {
    const summary = parseTestOutput(fixture('pytest-mixed-fail.txt'));
    assert.deepEqual(counts(summary), ['pytest', 6, 3, 2]);
    assert.deepEqual(summary.failedNames, [
      'tests/test_calc.py::test_uses_broken',
      'tests/test_calc.py::test_sub',
      'tests/test_calc.py::test_param[2-3]',
    ]);
    assert.ok(summary.passedNames.includes('tests/test_calc.py::test_param[a b-a b]'));
    assert.ok(summary.passedNames.includes('tests/test_calc.py::TestLegacy::test_legacy'));
    assert.equal(summary.passedNames.length, 6);
  });

  void test('all passing', () => {
    const summary = parseTestOutput(fixture('pytest-pass.txt'), 'pytest');
    assert.deepEqual(counts(summary), ['pytest', 1, 0, 0]);
    assert.deepEqual(summary.passedNames, ['tests/test_other.py::test_ok']);
  });

  void test('a collection error is a file that could not run', () => {
    const summary = parseTestOutput(fixture('pytest-collection-error.txt'));
    assert.deepEqual(counts(summary), ['pytest', 0, 1, 0]);
    assert.deepEqual(summary.failedNames, ['tests/test_bad.py']);
    assert.equal(summary.tests?.[0]?.status, 'crashed-file');
  });

  void test('-v lines and a -q summary without rulers', () => {
    const summary = parseTestOutput(
      [
        'tests/test_a.py::test_one PASSED                                   [ 50%]',
        'tests/test_a.py::test_two[x - y] FAILED                            [100%]',
        '1 failed, 1 passed in 0.05s',
      ].join('\n'),
    );
    assert.deepEqual(counts(summary), ['pytest', 1, 1, 0]);
    assert.deepEqual(summary.failedNames, ['tests/test_a.py::test_two[x - y]']);
    assert.deepEqual(summary.passedNames, ['tests/test_a.py::test_one']);
  });

  void test('a test id may start with a digit', () => {
    const summary = parseTestOutput('01_suite/test_b.py::test_z PASSED  [100%]\n=== 1 passed in 0.01s ===\n');
    assert.deepEqual(summary.passedNames, ['01_suite/test_b.py::test_z']);
  });

  void test('pytestNodeId strips the message, keeping parametrize ids with " - "', () => {
    assert.equal(pytestNodeId('tests/t.py::test_a - assert 1 == 2'), 'tests/t.py::test_a');
    assert.equal(pytestNodeId('tests/t.py::test_b[a - b] - assert x'), 'tests/t.py::test_b[a - b]');
    assert.equal(pytestNodeId('tests/t.py::test_c[a - b]'), 'tests/t.py::test_c[a - b]');
    assert.equal(pytestNodeId('tests/t.py'), 'tests/t.py');
  });
});

void describe('unittest output (real runs, python 3.11, -v)', () => {
  void test('failures, errors, subtests, skips, expected failures and docstrings', () => {
    const summary = parseTestOutput(fixture('unittest-fail.txt'));
    // failures=2 (one is a subtest), errors=1; skipped=1 + expected failures=1.
    assert.deepEqual(counts(summary), ['unittest', 2, 3, 2]);
    assert.deepEqual(summary.failedNames, [
      'test_things.TestMath.test_error',
      'test_things.TestMath.test_sub',
      'test_things.TestMath.test_sub_tests',
    ]);
    assert.deepEqual(summary.passedNames, [
      'test_things.TestMath.test_add',
      'test_things.TestStrings.test_upper',
    ]);
  });

  void test('all passing', () => {
    const summary = parseTestOutput(fixture('unittest-pass.txt'));
    assert.deepEqual(counts(summary), ['unittest', 2, 0, 0]);
  });

  void test('without -v the passed count is derived from the summary', () => {
    const summary = parseTestOutput(
      '..F.s\n' + '-'.repeat(70) + '\nRan 5 tests in 0.001s\n\nFAILED (failures=1, skipped=1)\n',
    );
    assert.deepEqual(counts(summary), ['unittest', 3, 1, 1]);
  });

  void test('unittestName normalises old and new formats', () => {
    assert.equal(unittestName('test_a (pkg.mod.TestX.test_a)'), 'pkg.mod.TestX.test_a');
    assert.equal(unittestName('test_a (pkg.mod.TestX)'), 'pkg.mod.TestX.test_a');
    assert.equal(unittestName('test_a (pkg.mod.TestX.test_a) (i=2)'), 'pkg.mod.TestX.test_a');
    assert.equal(unittestName('Subtraction works.'), null);
  });
});

void describe('cargo test output (real runs, cargo 1.95)', () => {
  void test('unit, integration and doc test binaries are summed', () => {
    const summary = parseTestOutput(fixture('cargo-fail.txt'));
    assert.deepEqual(counts(summary), ['cargo', 5, 2, 1]);
    // Ids are the target cargo names ("Running src/lib.rs", "Doc-tests") and libtest's path.
    assert.deepEqual(summary.failedNames, [
      'src/lib.rs::tests::it_halves',
      'doc-tests::src/lib.rs - half (line 12)',
    ]);
    assert.ok(summary.passedNames.includes('src/lib.rs::tests::it_panics'));
    assert.ok(summary.passedNames.includes('tests/integration.rs::integration_add'));
  });

  void test('all passing', () => {
    const summary = parseTestOutput(fixture('cargo-pass.txt'), 'cargo');
    assert.deepEqual(counts(summary), ['cargo', 7, 0, 1]);
    assert.equal(summary.passedNames.length, 7);
  });
});

void describe('runners not installed here (hand-written samples of their documented output)', () => {
  void test('jest --verbose', () => {
    const summary = parseTestOutput(fixture('jest-handwritten-verbose-fail.txt'));
    assert.deepEqual(counts(summary), ['jest', 5, 1, 2]);
    assert.deepEqual(summary.failedNames, ['src/math.test.js::math > divides with rounding']);
    assert.deepEqual(summary.passedNames, [
      'src/sum.test.js::sum > adds positive numbers',
      'src/sum.test.js::sum > adds negative numbers',
      'src/math.test.js::math > rounds down',
      'src/math.test.js::math > nested > deep test',
      'src/math.test.js::top level test',
    ]);
  });

  void test('vitest default reporter', () => {
    const summary = parseTestOutput(fixture('vitest-handwritten-fail.txt'));
    assert.deepEqual(counts(summary), ['vitest', 3, 1, 1]);
    assert.deepEqual(summary.failedNames, ['src/math.test.ts::math > divides with rounding']);
    // The failing file's passing test is not printed: the list is not complete.
    assert.deepEqual(summary.passedNames, ['src/sum.test.ts']);
    assert.equal(summary.complete, false);
  });

  void test('vitest verbose reporter', () => {
    const summary = parseTestOutput(fixture('vitest-handwritten-verbose-fail.txt'));
    assert.deepEqual(counts(summary), ['vitest', 3, 1, 1]);
    assert.deepEqual(summary.failedNames, ['src/math.test.ts::math > divides with rounding']);
    assert.equal(summary.passedNames.length, 3);
  });

  void test('mocha spec reporter', () => {
    const summary = parseTestOutput(fixture('mocha-handwritten-fail.txt'));
    assert.deepEqual(counts(summary), ['mocha', 3, 2, 1]);
    // Names carry their describe path, so equal titles in different suites stay apart.
    assert.deepEqual(summary.failedNames, ['math > divides with rounding', 'strings > trims whitespace']);
    assert.deepEqual(summary.passedNames, ['math > adds', 'math > subtracts', 'strings > upper case']);
  });

  void test('go test -v: subtests, skips and a package that failed to build', () => {
    const summary = parseTestOutput(fixture('go-handwritten-fail.txt'));
    assert.deepEqual(counts(summary), ['go', 3, 4, 1]);
    // go prints a package's tests before its "ok"/"FAIL" line: ids are `package::Test`.
    assert.deepEqual(summary.failedNames, [
      'example.com/calc::TestHalf',
      'example.com/calc::TestTable',
      'example.com/calc::TestTable/big',
      'example.com/calc/broken',
    ]);
    assert.deepEqual(summary.passedNames, [
      'example.com/calc::TestAdd',
      'example.com/calc::TestTable/small',
      'example.com/calc/format::TestFormat',
    ]);
    assert.equal(summary.tests?.at(-1)?.status, 'crashed-file');
  });

  void test('go test without -v leaves the passed count unknown', () => {
    const summary = parseTestOutput('--- FAIL: TestHalf (0.00s)\nFAIL\nFAIL\texample.com/calc\t0.002s\n');
    assert.deepEqual(counts(summary), ['go', null, 1, 0]);
  });
});

void describe('runner selection and robustness', () => {
  void test('unrecognised output gives unknown and null counts', () => {
    const unknown = parseTestOutput('make: *** No rule to make target test.  Stop.\n', 'make');
    assert.deepEqual(counts(unknown), ['unknown', null, null, null]);
    assert.deepEqual(
      [unknown.failedNames, unknown.passedNames, unknown.tests, unknown.complete],
      [[], [], [], false],
    );
    assert.equal(parseTestOutput('').runner, 'unknown');
  });

  void test('a wrong hint is overridden by what the output shows', () => {
    assert.equal(parseTestOutput(fixture('cargo-fail.txt'), 'jest').runner, 'cargo');
    assert.equal(parseTestOutput(fixture('unittest-fail.txt'), 'pytest').runner, 'unittest');
    assert.equal(parseTestOutput(fixture('pytest-mixed-fail.txt'), 'unittest').runner, 'pytest');
  });

  void test('make wrapping a runner is parsed as that runner', () => {
    const text = 'python3 -m pytest -rA\n' + fixture('pytest-pass.txt') + 'make: Leaving directory\n';
    assert.equal(parseTestOutput(text, 'make').runner, 'pytest');
  });

  void test('stripAnsi removes colour, cursor and hyperlink sequences', () => {
    const esc = '\u001b';
    assert.equal(
      stripAnsi(`${esc}[1;31mred${esc}[0m ${esc}[2K${esc}]8;;http://x${esc}\\link${esc}]8;;\u0007`),
      'red link',
    );
  });

  // No timed assertion (this machine's speed varies with its load): a quadratic parser would take
  // hours on this input, so the test's own timeout is the bound.
  void test('tens of megabytes parse in linear time and name lists are capped', { timeout: 120_000 }, () => {
    const lines: string[] = [];
    for (let i = 0; i < 300_000; i++) {
      lines.push(i % 3 === 0 ? `not ok ${i} - test number ${i}` : `ok ${i} - test number ${i}`);
      lines.push('  ---', '  duration_ms: 0.123456', '  ...');
    }
    lines.push('# tests 300000', '# pass 200000', '# fail 100000');
    const text = lines.join('\n');
    assert.ok(text.length > 15_000_000);
    const summary = parseTestOutput(text);
    assert.deepEqual(counts(summary), ['tap', 200_000, 100_000, 0]);
    assert.equal(summary.failedNames.length, NAME_CAP);
    assert.equal(summary.passedNames.length, NAME_CAP);
  });

  // Catastrophic backtracking on these lines takes far longer than the timeout.
  void test('adversarial lines do not backtrack catastrophically', { timeout: 60_000 }, () => {
    const evil = [
      '= ' + '1 '.repeat(5000) + '11111111111 x',
      '1 ' + '123456789 '.repeat(1500),
      'Tests: ' + '9'.repeat(15_000),
      'a::b' + '::'.repeat(7000) + ' X',
      ' '.repeat(16_000) + '%]',
      '\u001b[' + '1'.repeat(15_000),
      'x'.repeat(5_000_000),
    ].join('\n');
    parseTestOutput(evil.repeat(4));
  });
});
