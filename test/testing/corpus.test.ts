import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { readTestOutput } from '../../src/testing/parse-test-output.js';
import { readFacts } from '../../src/testing/run-tests.js';
import { isFailing, type TestFact } from '../../src/testing/test-run.js';
import type { RunnerKind } from '../../src/testing/detect-test-command.js';

/**
 * Every recorded run of the corpus (test/fixtures/runner-output, recorded by
 * `node --import tsx scripts/capture-runner-output.mjs --corpus`) read by the engine as the harness
 * reads a run: its report and its console output. What each case must give is written below by hand
 * from what the suites do (scripts/runner-suites.mjs), runner by runner: every test the suite has,
 * with its status, and nothing else. A sample of cases also has an `expected.json` written by hand
 * from reading its output, compared exactly.
 */

const ROOT = new URL('../fixtures/runner-output/', import.meta.url);

interface CaseMeta {
  readonly runner: RunnerKind;
  readonly reporter?: string;
  readonly scenario: 'main' | 'hang' | 'crash' | 'load' | 'spin';
  readonly variant: 'base' | 'fixed' | 'color';
  readonly exitCode: number | null;
  readonly killed: 'timeout' | null;
  readonly reports: readonly {
    readonly kind: 'pytest' | 'node-test' | 'jest' | 'vitest';
    readonly file: string;
  }[];
}

interface Case {
  readonly name: string;
  readonly meta: CaseMeta;
  readonly output: string;
  readonly reports: { kind: 'pytest' | 'node-test' | 'jest' | 'vitest'; text: string }[];
}

function cases(): Case[] {
  return readdirSync(ROOT)
    .filter((name) => existsSync(new URL(`${name}/case.json`, ROOT)))
    .sort()
    .map((name) => {
      const read = (file: string): string => readFileSync(new URL(`${name}/${file}`, ROOT), 'utf8');
      const meta = JSON.parse(read('case.json')) as CaseMeta;
      return {
        name,
        meta,
        output: read('output.txt'),
        reports: meta.reports.map((r) => ({ kind: r.kind, text: read(r.file) })),
      };
    });
}

function run(c: Case, withReports = true): TestFact[] {
  const s = readFacts(
    c.output,
    { killed: c.meta.killed, exitCode: c.meta.exitCode },
    withReports ? c.reports : [],
    c.meta.runner,
    '/w',
  );
  return s.tests ?? [];
}

// ---------------------------------------------------------------------------------------------------
// What the suites do. A test is [file, title path]; what it must read as, before and after the fix:
//   pass, fail, skip (skipped, when listed at all: node-tap does not announce a skipped subtest),
//   file (the whole file could not run: one crashed-file fact),
//   broken (not passing: the test failing or errored, or its file a crashed-file fact, or, in a
//           run that ended inside it, absent), lost (passing if listed: a crash may take it along).

type Want = 'pass' | 'fail' | 'skip' | 'file' | 'broken' | 'lost';
type Test = readonly [file: string, titles: readonly string[], base: Want, fixed: Want];

const JS_TESTS: Record<string, readonly Test[]> = {
  math: [
    ['math', ['math', 'adds'], 'pass', 'pass'],
    ['math', ['math', 'nested', 'multiplies'], 'pass', 'pass'],
    ['math', ['math', 'divides with rounding'], 'fail', 'pass'],
    ['math', ['math', 'skipped for now'], 'skip', 'skip'],
  ],
  names: [
    ['names', ['names # hash', 'back\\slash "quotes" ünï ✓ 日本語'], 'pass', 'pass'],
    ['names', ['names # hash', "it's 'single'"], 'pass', 'pass'],
    ['names', ['top # not a directive'], 'pass', 'pass'],
  ],
  load: [['load', ['loads after the fix'], 'file', 'pass']],
  hang: [
    ['hang', ['quick'], 'pass', 'pass'],
    ['hang', ['waits on a socket'], 'broken', 'pass'],
  ],
  crash: [
    ['crash', ['before the crash'], 'lost', 'pass'],
    ['crash', ['crashes the process'], 'broken', 'pass'],
  ],
  // node-tap only: a test that never yields; node-tap's file timeout kills the file.
  spin: [
    ['spin', ['quick'], 'pass', 'pass'],
    ['spin', ['spins forever'], 'broken', 'pass'],
  ],
};

const SCENARIO_FILES: Record<CaseMeta['scenario'], readonly string[]> = {
  main: ['math', 'names', 'load'],
  hang: ['hang', 'math'],
  crash: ['crash', 'math'],
  load: ['load', 'math'],
  spin: ['spin', 'math'],
};

/** How a runner's ids read: the file's path, and the name from the title path. */
interface Family {
  readonly path: (file: string) => string | null;
  /** A whole file's id where `path` is null (the runner names a file that could not run). */
  readonly crashPath?: (file: string) => string;
  /** Scenarios whose broken test stops the whole run (one process): the rest may not have run. */
  readonly stops?: readonly CaseMeta['scenario'][];
  readonly name: (file: string, titles: readonly string[]) => string;
  readonly tests?: Record<string, readonly Test[]>;
  /** Files of the suite the runner's scenario left out (mocha and pytest stop at a file that does not load). */
  readonly skipFiles?: (scenario: CaseMeta['scenario']) => readonly string[];
}

const joined = (_file: string, titles: readonly string[]): string => titles.join(' > ');

const PY_TESTS: Record<string, readonly Test[]> = {
  math: [
    ['math', ['TestMath', 'test_adds'], 'pass', 'pass'],
    ['math', ['TestMath', 'TestNested', 'test_multiplies'], 'pass', 'pass'],
    ['math', ['TestMath', 'test_divides_with_rounding'], 'fail', 'pass'],
    ['math', ['TestMath', 'test_skipped_for_now'], 'skip', 'skip'],
    ['math', ['TestMath', 'test_known_failure'], 'skip', 'skip'],
  ],
  names: [
    ['names', ['test_names[a#b]'], 'pass', 'pass'],
    ['names', ['test_names[back\\\\slash]'], 'pass', 'pass'],
    ['names', [`test_names[q'uote "dq"]`], 'pass', 'pass'],
    // pytest writes a parameter's non-ASCII characters as escapes in its ids.
    ['names', ['test_names[\\xfcn\\xef \\u2713 \\u65e5\\u672c\\u8a9e]'], 'pass', 'pass'],
  ],
  load: [['load', ['test_loads_after_the_fix'], 'file', 'pass']],
  hang: [
    ['hang', ['test_quick'], 'pass', 'pass'],
    ['hang', ['test_waits_on_a_socket'], 'broken', 'pass'],
  ],
  crash: [
    ['crash', ['test_before_the_crash'], 'lost', 'pass'],
    ['crash', ['test_crashes_the_process'], 'broken', 'pass'],
  ],
};

const UNITTEST_TESTS: Record<string, readonly Test[]> = {
  math: [
    ['math', ['TestMath', 'test_adds'], 'pass', 'pass'],
    ['math', ['TestNested', 'test_multiplies'], 'pass', 'pass'],
    ['math', ['TestMath', 'test_divides_with_rounding'], 'fail', 'pass'],
    ['math', ['TestMath', 'test_skipped_for_now'], 'skip', 'skip'],
  ],
  names: [['names', ['TestNames', 'test_ünï_日本語'], 'pass', 'pass']],
  load: [['load', ['TestLoad', 'test_loads_after_the_fix'], 'file', 'pass']],
  hang: [
    ['hang', ['TestHang', 'test_quick'], 'pass', 'pass'],
    ['hang', ['TestHang', 'test_waits_on_a_socket'], 'broken', 'pass'],
  ],
  crash: [
    ['crash', ['TestCrash', 'test_before_the_crash'], 'lost', 'pass'],
    ['crash', ['TestCrash', 'test_crashes_the_process'], 'broken', 'pass'],
  ],
};

const GO_TESTS: Record<string, readonly Test[]> = {
  math: [
    ['corpus', ['TestAdds'], 'pass', 'pass'],
    ['corpus', ['TestNested'], 'pass', 'pass'],
    ['corpus', ['TestNested/multiplies'], 'pass', 'pass'],
    // go writes spaces in subtest names as underscores.
    ['corpus', ["TestNested/back\\slash_#hash_'q'_ünï"], 'pass', 'pass'],
    ['corpus', ['TestDividesWithRounding'], 'fail', 'pass'],
    ['corpus', ['TestSkipped'], 'skip', 'skip'],
  ],
  load: [['broken', [], 'file', 'file']],
  hang: [
    ['corpus', ['TestQuick'], 'pass', 'pass'],
    ['corpus', ['TestWaitsOnASocket'], 'broken', 'pass'],
  ],
  crash: [
    ['corpus', ['TestBeforeTheCrash'], 'lost', 'pass'],
    ['corpus', ['TestCrashesTheProcess'], 'broken', 'pass'],
  ],
};

const CARGO_TESTS: Record<string, readonly Test[]> = {
  // One binary a scenario (the library's unit tests), the integration test and the doc test.
  math: [
    ['src/lib.rs', ['tests', 'adds'], 'lost', 'pass'],
    ['src/lib.rs', ['tests', 'nested', 'multiplies'], 'lost', 'pass'],
    ['tests/api.rs', ['api_adds'], 'lost', 'pass'],
    ['doc-tests', ['src/lib.rs - add (line 3)'], 'lost', 'pass'],
  ],
  main: [
    ['src/lib.rs', ['tests', 'divides_with_rounding'], 'fail', 'pass'],
    ['src/lib.rs', ['tests', 'skipped_for_now'], 'skip', 'skip'],
  ],
  hang: [['src/lib.rs', ['tests', 'waits_on_a_socket'], 'broken', 'pass']],
  crash: [['src/lib.rs', ['tests', 'crashes_the_process'], 'broken', 'pass']],
};

const FAMILIES: Record<string, Family> = {
  // process.exit in a test ends jest itself.
  jest: { path: (f) => `test/${f}.test.js`, name: joined, stops: ['crash'] },
  vitest: { path: (f) => `test/${f}.test.mjs`, name: joined },
  tap: { path: (f) => `test/${f}.test.js`, name: joined },
  'node-test': { path: (f) => `test/${f}.test.js`, name: joined },
  // node's TAP reporter and mocha's spec reporter do not say a test's file.
  'node-test tap': { path: () => null, crashPath: (f) => `test/${f}.test.js`, name: joined },
  mocha: {
    path: () => null,
    crashPath: (f) => `test/${f}.spec.js`,
    name: joined,
    skipFiles: (s) => (s === 'main' ? ['load'] : []),
    stops: ['crash', 'load', 'hang'],
  },
  ava: {
    path: () => null,
    crashPath: (f) => `test/${f}.test.js`,
    // ava titles are flat ("math: nested: multiplies"), and start with the file's short name.
    name: (f, titles) => `${f} › ${titles.join(': ')}`,
    tests: {
      ...JS_TESTS,
      names: [
        ['names', ['names # hash', 'back\\slash "quotes" ünï ✓ 日本語'], 'pass', 'pass'],
        ['names', ['names # hash', "it's 'single'"], 'pass', 'pass'],
      ],
    },
  },
  pytest: {
    path: (f) => `tests/test_${f}.py`,
    name: (_f, titles) => titles.join('::'),
    tests: PY_TESTS,
    skipFiles: (s) => (s === 'main' ? ['load'] : []),
    stops: ['crash', 'load', 'hang'],
  },
  unittest: {
    path: () => null,
    crashPath: (f) => `test_${f}.py`,
    name: (f, titles) => `test_${f}.${titles.join('.')}`,
    tests: UNITTEST_TESTS,
    stops: ['crash', 'hang'],
  },
  go: {
    path: (f) => `example.com/${f === 'broken' ? 'corpus/broken' : f}`,
    name: (_f, titles) => titles.join(''),
    tests: GO_TESTS,
    stops: ['crash', 'hang'],
  },
};

function familyOf(meta: CaseMeta): string {
  if (meta.runner === 'node-test' && meta.reporter === 'tap') return 'node-test tap';
  return meta.runner;
}

/** The suite's tests for a case, with their ids. */
function expectations(c: Case): { id: string; file: string | null; want: Want }[] {
  const m = c.meta;
  const fixed = m.variant === 'fixed';
  if (m.runner === 'cargo') {
    const list = [...(CARGO_TESTS['math'] ?? []), ...(CARGO_TESTS[m.scenario] ?? [])];
    return list.map(([file, titles, base, after]) => ({
      id: `${file}::${titles.join('::')}`,
      file,
      want: fixed ? after : base,
    }));
  }
  const family = FAMILIES[familyOf(m)];
  assert.ok(family !== undefined, `a family for ${c.name}`);
  const tests = family.tests ?? JS_TESTS;
  const skip = new Set(family.skipFiles?.(m.scenario) ?? []);
  const files =
    m.runner === 'go'
      ? m.scenario === 'main'
        ? fixed
          ? ['math']
          : ['math', 'load']
        : [m.scenario, 'math']
      : SCENARIO_FILES[m.scenario].filter((f) => !skip.has(f));
  const out: { id: string; file: string | null; want: Want }[] = [];
  // A run that the broken test stopped may not have reached the other files' tests.
  const stopped = !fixed && (family.stops ?? []).includes(m.scenario);
  for (const f of files) {
    for (const [file, titles, base, after] of tests[f] ?? []) {
      const path = family.path(file);
      let want = fixed ? after : base;
      if (stopped && f !== m.scenario && (want === 'pass' || want === 'fail')) want = 'lost';
      const name = titles.length === 0 ? '' : family.name(file, titles);
      const whole = path ?? family.crashPath?.(file) ?? file;
      out.push({
        id: want === 'file' || name === '' ? whole : path === null ? name : `${path}::${name}`,
        file: path ?? family.crashPath?.(file) ?? null,
        want,
      });
    }
  }
  return out;
}

/** What is wrong with a case's facts (empty when nothing is). */
function check(c: Case, facts: readonly TestFact[]): string[] {
  const wrong: string[] = [];
  const byId = new Map(facts.map((f) => [f.id, f]));
  const crashedFiles = new Set(facts.filter((f) => f.status === 'crashed-file').map((f) => f.id));
  const ended = c.meta.killed === null && c.meta.exitCode !== null;
  const explained = new Set<string>();
  for (const e of expectations(c)) {
    // A run cut inside a go package names its tests without the package, not printed yet.
    const bare = e.id.includes('::') ? e.id.slice(e.id.indexOf('::') + 2) : e.id;
    const f = byId.get(e.id) ?? (ended ? undefined : byId.get(bare));
    if (f !== undefined) explained.add(f.id);
    explained.add(e.id);
    const fileDown = e.file !== null && crashedFiles.has(e.file);
    if (e.file !== null && fileDown) explained.add(e.file);
    const status = f?.status ?? 'absent';
    const ok = ((): boolean => {
      switch (e.want) {
        case 'pass':
          return status === 'passed';
        case 'fail':
          return status === 'failed' || status === 'errored';
        case 'skip':
          return status === 'skipped' || status === 'absent';
        case 'file':
          return status === 'crashed-file';
        case 'lost':
          return status !== 'skipped';
        case 'broken':
          return (
            isFailing(status === 'absent' ? 'passed' : status) ||
            fileDown ||
            (status === 'absent' && c.meta.exitCode !== 0)
          );
      }
    })();
    if (!ok) wrong.push(`${e.id}: want ${e.want}, got ${status}`);
  }
  // Nothing but the suite's tests, the files that could not run, and, in a run that was cut, a test
  // named without the file the runner had not printed yet.
  for (const f of facts) {
    if (explained.has(f.id)) continue;
    if (f.status === 'crashed-file' && expectations(c).some((e) => e.file === f.id || e.id === f.id))
      continue;
    const bare = expectations(c).some((e) => e.id.endsWith(`::${f.id}`) || e.id.endsWith(`.${f.id}`));
    if (bare && !ended) continue;
    wrong.push(`unexpected ${f.id} (${f.status})`);
  }
  return wrong;
}

const all = cases();

void describe('the corpus of real runner output', () => {
  void test('it holds every runner at the versions the issue names', () => {
    const seen = new Set(
      all.map((c) => `${c.meta.runner}${c.meta.reporter === undefined ? '' : `/${c.meta.reporter}`}`),
    );
    for (const r of [
      'jest',
      'vitest',
      'mocha',
      'node-test/default',
      'node-test/tap',
      'tap',
      'ava',
      'pytest',
      'unittest',
      'go',
      'cargo',
    ]) {
      assert.ok(seen.has(r), r);
    }
    assert.ok(all.length >= 80, `${all.length} cases`);
  });

  for (const c of all) {
    void test(`${c.name}: every test of the suite, read as it ran`, () => {
      const wrong = check(c, run(c));
      assert.deepEqual(wrong, [], `${c.name}\n${JSON.stringify(run(c), null, 1)}`);
    });
  }

  void test('a run of the main suite that ended on its own, with its report, is a complete list', () => {
    // A baseline the engine calls incomplete proves nothing new passing (verdict.ts): a report cut
    // short where the run was not (node 20 exits under --test-force-exit before its reporter's
    // stream ends) would withhold every proof.
    const main = all.filter(
      (x) => x.reports.length > 0 && x.meta.scenario === 'main' && x.meta.killed === null,
    );
    assert.ok(main.length >= 10, `${main.length} cases`);
    for (const c of main) {
      const s = readFacts(
        c.output,
        { killed: null, exitCode: c.meta.exitCode },
        c.reports,
        c.meta.runner,
        '/w',
      );
      assert.equal(s.complete, true, `${c.name}: ${(s.sources ?? []).join(', ')}`);
    }
  });

  void test('a report and the console output give the same ids', () => {
    for (const c of all.filter((x) => x.reports.length > 0)) {
      const fromReport = new Map(run(c).map((f) => [f.id, f]));
      const fromOutput = readTestOutput(c.output, { hint: c.meta.runner, root: '/w' }).facts;
      for (const o of fromOutput) {
        // A whole file in the output (jest's `PASS file`) stands for the report's tests of it.
        if (o.id === o.file && [...fromReport.values()].some((f) => f.file === o.file)) continue;
        if (o.file === null) {
          // A name without its file: the report has one test of that name with a file.
          const same = [...fromReport.values()].filter(
            (f) => f.file !== null && f.id === `${f.file}::${o.id}`,
          );
          assert.ok(same.length > 0 || fromReport.has(o.id), `${c.name}: ${o.id}`);
        } else {
          const loose = (id: string): string => id.replaceAll(' › ', ' > ');
          assert.ok(
            fromReport.has(o.id) || [...fromReport.keys()].some((id) => loose(id) === loose(o.id)),
            `${c.name}: ${o.id} is not in the report`,
          );
        }
      }
    }
  });

  void test('without the report (the text fallback), a finished run still names every failing test it names with one', () => {
    for (const c of all.filter(
      (x) => x.reports.length > 0 && x.meta.variant !== 'fixed' && x.meta.exitCode !== null,
    )) {
      const withReport = run(c);
      const textOnly = run(c, false);
      // The text may name fewer tests (jest's default reporter names no passing test), but never
      // calls a test passing that the report shows failing.
      for (const t of textOnly.filter((f) => f.status === 'passed')) {
        const r = withReport.find((f) => f.id === t.id || (f.file !== null && f.id === `${f.file}::${t.id}`));
        assert.ok(r === undefined || !isFailing(r.status), `${c.name}: ${t.id}`);
      }
    }
  });
});

void describe('expected.json, written by hand for a sample', () => {
  for (const c of all) {
    const path = new URL(`${c.name}/expected.json`, ROOT);
    if (!existsSync(path)) continue;
    void test(c.name, () => {
      const expected = JSON.parse(readFileSync(path, 'utf8')) as Record<string, string>;
      const got = Object.fromEntries(
        run(c).map((f) => [f.id, f.detail === undefined ? f.status : `${f.status} (${f.detail})`]),
      );
      assert.deepEqual(got, expected);
    });
  }

  void test('the sample covers a case of each reading: a report, TAP, the console alone, a hang, a crash', () => {
    const sample = all.filter((c) => existsSync(new URL(`${c.name}/expected.json`, ROOT)));
    assert.ok(sample.length >= 8, `${sample.length} cases with expected.json`);
  });
});
