import { readFileSync } from 'node:fs';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { parseTestOutput } from '../../src/testing/parse-test-output.js';
import type { RunnerKind } from '../../src/testing/parse-test-output.js';

/**
 * Real output of jest, vitest and mocha (fixtures/real-runners/README.md says which versions and
 * commands; scripts/capture-runner-output.mjs regenerates them). The expectations below were written
 * by reading those files. Name lists are compared as sets in a fixed order: jest and vitest run files
 * in parallel, so the order of their file blocks may change when the fixtures are captured again.
 */
function fixture(name: string): string {
  return readFileSync(new URL(`fixtures/real-runners/${name}.txt`, import.meta.url), 'utf8');
}

interface Expected {
  readonly runner: RunnerKind;
  readonly counts: readonly [number, number, number];
  readonly failed: readonly string[];
  readonly passed: readonly string[];
}

function sorted(names: readonly string[]): string[] {
  return [...names].sort();
}

function check(name: string, expected: Expected, root?: string): void {
  const text = fixture(name);
  for (const hint of [undefined, expected.runner]) {
    const summary = parseTestOutput(text, hint, root);
    const label = `${name} (hint: ${hint ?? 'none'})`;
    assert.equal(summary.runner, expected.runner, label);
    assert.deepEqual([summary.passed, summary.failed, summary.skipped], expected.counts, label);
    assert.deepEqual(sorted(summary.failedNames), sorted(expected.failed), label);
    assert.deepEqual(sorted(summary.passedNames), sorted(expected.passed), label);
  }
}

const ESC = String.fromCharCode(27);

// The same two test files for every runner: "math" and "strings". Ids as test-run.ts documents them:
// `file::describe > test` where the output names the file (jest, vitest), the title path alone where
// it does not (mocha's spec reporter). A file that failed to load is one `crashed-file` fact.
const jestFile = (file: string, names: readonly string[]): string[] =>
  names.map((n) => `__tests__/${file}.test.js::${n}`);
const jestTests = {
  failing: [
    ...jestFile('math', ['math > divides with rounding']),
    ...jestFile('strings', ['strings "quoted" › arrow > trims › whitespace']),
  ],
  passing: [
    ...jestFile('math', [
      'math > adds',
      'math > nested > deeper > multiplies',
      'math > add(1, 1) = 2',
      'math > add(2, 3) = 5',
    ]),
    ...jestFile('strings', [
      `strings "quoted" › arrow > handles 'single' and "double" quotes`,
      'strings "quoted" › arrow > unicode ünïcödé ✓ 日本語 🚀',
      'top level passes',
    ]),
  ],
  loadFailures: ['__tests__/missing-module.test.js', '__tests__/syntax-error.test.js'],
};

const vitestTests = {
  failing: [
    'test/math.test.js::math > divides with rounding',
    'test/strings.test.js::strings "quoted" › arrow > trims › whitespace',
  ],
  passing: [
    'test/math.test.js::math > adds',
    'test/math.test.js::math > nested > deeper > multiplies',
    'test/math.test.js::math > add(1, 1) = 2',
    'test/math.test.js::math > add(2, 3) = 5',
    `test/strings.test.js::strings "quoted" › arrow > handles 'single' and "double" quotes`,
    'test/strings.test.js::strings "quoted" › arrow > unicode ünïcödé ✓ 日本語 🚀',
    'test/strings.test.js::top level passes',
  ],
  loadFailures: ['test/missing-module.test.js', 'test/syntax-error.test.js'],
};

const mochaTests = {
  failing: ['math > divides with rounding', 'strings "quoted" › arrow > trims › whitespace'],
  passing: [
    'top level passes',
    'math > adds',
    'math > nested > deeper > multiplies',
    `strings "quoted" › arrow > handles 'single' and "double" quotes`,
    'strings "quoted" › arrow > unicode ünïcödé ✓ 日本語 🚀',
  ],
};

void describe('jest 30 (real output)', () => {
  // Tests: 2 failed, 1 skipped, 1 todo, 7 passed; plus two files that failed to load, one failure each.
  const failed = [...jestTests.failing, ...jestTests.loadFailures];

  for (const variant of ['plain', 'color']) {
    void test(`--verbose, ${variant}`, () => {
      check(`jest-verbose-${variant}`, {
        runner: 'jest',
        counts: [7, 4, 2],
        failed,
        passed: jestTests.passing,
      });
    });

    void test(`default (not verbose), ${variant}: only the failing tests have names`, () => {
      // Both test files have a failure, so no file passed and no passing test is named. The
      // "● describe › test" headers join titles with " › ", so a title holding " › " is split.
      const split = [
        '__tests__/math.test.js::math > divides with rounding',
        '__tests__/strings.test.js::strings "quoted" > arrow > trims > whitespace',
      ];
      check(`jest-default-${variant}`, {
        runner: 'jest',
        counts: [7, 4, 2],
        failed: [...split, ...jestTests.loadFailures],
        passed: [],
      });
      assert.equal(parseTestOutput(fixture(`jest-default-${variant}`)).complete, false);
    });
  }

  void test('--verbose after the fix', () => {
    check('jest-verbose-fixed', {
      runner: 'jest',
      counts: [9, 2, 2],
      failed: jestTests.loadFailures,
      passed: [...jestTests.passing, ...jestTests.failing],
    });
  });

  void test('default after the fix: a file that passed is named by its path', () => {
    check('jest-default-fixed', {
      runner: 'jest',
      counts: [9, 2, 2],
      failed: jestTests.loadFailures,
      passed: ['__tests__/math.test.js', '__tests__/strings.test.js'],
    });
  });
});

void describe('vitest 5 (real output)', () => {
  // Tests 2 failed | 7 passed | 1 skipped | 1 todo; "Failed Suites 2": the two files that did not load.
  const failing: Expected = {
    runner: 'vitest',
    counts: [7, 4, 2],
    failed: [...vitestTests.failing, ...vitestTests.loadFailures],
    passed: vitestTests.passing,
  };
  // Under CI=true vitest colours its output even without FORCE_COLOR: "plain" has colour codes too.
  for (const name of ['plain', 'color', 'nocolor', 'verbose-plain', 'verbose-color']) {
    void test(name, () => {
      check(`vitest-${name}`, failing);
    });
  }

  void test('default reporter after the fix: a file that passed is one line, named by its path', () => {
    check('vitest-fixed', {
      runner: 'vitest',
      counts: [9, 2, 2],
      failed: vitestTests.loadFailures,
      passed: ['test/math.test.js', 'test/strings.test.js'],
    });
  });
});

void describe('vitest 4 (real output)', () => {
  // Its default reporter lists the tests of a failing file without their describe lines, so only a
  // test at the top of a file can be named; the failing ones are named by their "FAIL" detail lines.
  for (const name of ['plain', 'color', 'nocolor']) {
    void test(`default reporter, ${name}`, () => {
      check(`vitest4-${name}`, {
        runner: 'vitest',
        counts: [7, 4, 2],
        failed: [...vitestTests.failing, ...vitestTests.loadFailures],
        passed: ['test/strings.test.js::top level passes'],
      });
    });
  }

  void test('verbose reporter', () => {
    check('vitest4-verbose-plain', {
      runner: 'vitest',
      counts: [7, 4, 2],
      failed: [...vitestTests.failing, ...vitestTests.loadFailures],
      passed: vitestTests.passing,
    });
  });
});

void describe('mocha 12 (real output, spec reporter)', () => {
  // 5 passing, 2 pending (one skipped, one without a body), 2 failing.
  for (const variant of ['plain', 'color']) {
    void test(variant, () => {
      check(`mocha-${variant}`, {
        runner: 'mocha',
        counts: [5, 2, 2],
        failed: mochaTests.failing,
        passed: mochaTests.passing,
      });
    });

    void test(`a spec file that fails to load stops the run, ${variant}`, () => {
      // The file is named by the error's require stack.
      check(
        `mocha-load-error-${variant}`,
        {
          runner: 'mocha',
          counts: [0, 1, 0],
          failed: ['test/missing-module.spec.js'],
          passed: [],
        },
        '/tmp/runner-project/mocha-broken',
      );
    });
  }

  void test('after the fix', () => {
    check('mocha-fixed', {
      runner: 'mocha',
      counts: [7, 0, 2],
      failed: [],
      passed: [...mochaTests.passing, ...mochaTests.failing],
    });
  });
});

void describe('names compare across runs', () => {
  const pairs: [string, string][] = [
    ['jest-verbose-plain', 'jest-verbose-color'],
    ['jest-default-plain', 'jest-default-color'],
    ['vitest-nocolor', 'vitest-color'],
    ['vitest-plain', 'vitest-verbose-plain'],
    ['vitest4-nocolor', 'vitest4-color'],
    ['mocha-plain', 'mocha-color'],
  ];
  for (const [plain, color] of pairs) {
    void test(`${plain} and ${color} give the same names`, () => {
      const a = parseTestOutput(fixture(plain));
      const b = parseTestOutput(fixture(color));
      assert.deepEqual(sorted(a.failedNames), sorted(b.failedNames));
      assert.deepEqual(sorted(a.passedNames), sorted(b.passedNames));
    });
  }

  void test('the colour captures really are coloured', () => {
    for (const name of ['jest-verbose-color', 'jest-default-color', 'vitest-color', 'mocha-color']) {
      assert.ok(fixture(name).includes(`${ESC}[`), name);
    }
  });

  for (const [baseline, final] of [
    ['jest-verbose-plain', 'jest-verbose-fixed'],
    ['vitest-verbose-plain', 'vitest-fixed'],
    ['mocha-plain', 'mocha-fixed'],
  ] as const) {
    void test(`a test failing in ${baseline} passes under the same name in ${final}`, () => {
      const before = parseTestOutput(fixture(baseline));
      const after = parseTestOutput(fixture(final));
      const fixedTests = before.failedNames.filter((n) => !after.failedNames.includes(n));
      assert.equal(fixedTests.length, 2);
      // vitest's default reporter names a file that passed by its path: the test's file stands for it.
      for (const n of fixedTests) {
        assert.ok(
          after.passedNames.includes(n) || after.passedNames.some((file) => n.startsWith(`${file}::`)),
          n,
        );
      }
      // Nothing that passed before is reported failing after (the harness's regression check).
      assert.deepEqual(
        after.failedNames.filter((n) => before.passedNames.includes(n)),
        [],
      );
    });
  }
});

void describe('runner detection between jest, vitest and mocha', () => {
  void test('a wrong hint does not win over another runner’s summary', () => {
    assert.equal(parseTestOutput(fixture('vitest-plain'), 'jest').runner, 'vitest');
    assert.equal(parseTestOutput(fixture('vitest-verbose-color'), 'mocha').runner, 'vitest');
    assert.equal(parseTestOutput(fixture('jest-default-color'), 'vitest').runner, 'jest');
    assert.equal(parseTestOutput(fixture('mocha-color'), 'jest').runner, 'mocha');
    assert.equal(parseTestOutput(fixture('mocha-plain'), 'node-test').runner, 'mocha');
  });

  void test('output cut before the summary still goes to the runner that printed it', () => {
    const cut = (name: string, marker: string): string => {
      const text = fixture(name);
      return text.slice(0, text.indexOf(marker));
    };
    assert.equal(parseTestOutput(cut('jest-verbose-plain', 'Test Suites:')).runner, 'jest');
    assert.equal(parseTestOutput(cut('vitest-verbose-plain', 'Test Files')).runner, 'vitest');
    assert.equal(parseTestOutput(cut('mocha-plain', 'passing')).runner, 'mocha');
  });
});
