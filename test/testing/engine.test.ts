import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { boundsAfter, firstBounds } from '../../src/testing/bounds.js';
import { planReport } from '../../src/testing/report-plan.js';
import { mergeFacts, readFacts } from '../../src/testing/run-tests.js';
import { TapReader } from '../../src/testing/tap.js';
import type { TestFact } from '../../src/testing/test-run.js';

function tap(text: string, file: string | null = null): Record<string, string> {
  const r = new TapReader({ root: '/w', file, source: 'output' });
  for (const line of text.split('\n')) r.feed(line);
  r.finish();
  return Object.fromEntries(
    r.facts.values().map((f) => [f.id, f.detail === undefined ? f.status : `${f.status}: ${f.detail}`]),
  );
}

void describe('the TAP reader', () => {
  void test('node-tap: files are top-level subtests, assertions are not tests, `# time=` is not part of a name', () => {
    const out = tap(
      [
        'TAP version 14',
        '# Subtest: test/a.test.js',
        '    # Subtest: outer \\# hash',
        '        # Subtest: back\\\\slash "q" ünï',
        '            ok 1 - should be equal',
        '            1..1',
        '        ok 1 - back\\\\slash "q" ünï # time=16.413ms',
        '        # Subtest: fails',
        '            not ok 1 - should be equal',
        '              ---',
        '              stack: |',
        '                not ok 7 - looks like TAP inside YAML',
        '              ...',
        '            1..1',
        '        not ok 2 - fails # time=52.91ms',
        '        ok 3 - skipped # SKIP',
        '        1..3',
        '    not ok 1 - outer \\# hash # time=147.756ms',
        '    1..1',
        'not ok 1 - test/a.test.js # time=5151.378ms',
        '# Subtest: test/crash.test.js',
        '    1..0 # no tests found',
        'not ok 2 - test/crash.test.js # time=4192.513ms',
        '  ---',
        '  exitCode: 1',
        '  ...',
        '1..2',
      ].join('\n'),
    );
    assert.deepEqual(out, {
      'test/a.test.js::outer # hash > back\\slash "q" ünï': 'passed',
      'test/a.test.js::outer # hash > fails': 'failed',
      'test/a.test.js::outer # hash > skipped': 'skipped',
      'test/crash.test.js': 'crashed-file: exited with code 1',
    });
  });

  void test("node's TAP: escapes undone, suites are containers, a whole file that timed out is a crashed file", () => {
    const out = tap(
      [
        'TAP version 13',
        '# Subtest: outer \\# hash',
        '    # Subtest: back\\\\slash and "quotes"',
        '    ok 1 - back\\\\slash and "quotes"',
        '      ---',
        '      duration_ms: 0.8',
        '      ...',
        '    # Subtest: todo one',
        '    ok 2 - todo one # TODO',
        '    1..2',
        'ok 1 - outer \\# hash',
        '  ---',
        "  type: 'suite'",
        '  ...',
        '# Subtest: /w/test/hang.test.js',
        'not ok 2 - /w/test/hang.test.js',
        '  ---',
        "  failureType: 'testTimeoutFailure'",
        "  error: 'test timed out after 3000ms'",
        '  ...',
        '1..2',
        '# tests 3',
        '# pass 1',
        '# fail 0',
        '# cancelled 1',
        '# skipped 0',
        '# todo 1',
      ].join('\n'),
    );
    assert.deepEqual(out, {
      'outer # hash > back\\slash and "quotes"': 'passed',
      'outer # hash > todo one': 'skipped',
      'test/hang.test.js': 'crashed-file: timed out',
    });
  });

  void test('vitest: `{` blocks nest, `# time=` is dropped; ava: an unescaped `#` that is no directive stays in the name', () => {
    assert.deepEqual(
      tap(
        [
          'TAP version 13',
          '1..2',
          'not ok 1 - test/math.test.js # time=12.00ms {',
          '    1..1',
          '    not ok 1 - math # time=3.00ms {',
          '        1..2',
          '        ok 1 - adds # time=1.00ms',
          '        not ok 2 - divides # time=2.00ms',
          '    }',
          '}',
          'not ok 2 - test/load.test.js # time=0.00ms',
        ].join('\n'),
      ),
      {
        'test/math.test.js::math > adds': 'passed',
        'test/math.test.js::math > divides': 'failed',
        'test/load.test.js': 'crashed-file',
      },
    );
    assert.deepEqual(
      tap('TAP version 13\nok 1 - a › names # hash: it works\nok 2 - a › later # SKIP\n1..2\n'),
      {
        'a › names # hash: it works': 'passed',
        'a › later': 'skipped',
      },
    );
  });

  // node-tap 21.8.0's own file timeout (30 s), as it printed it in the eval-libraries e2e test
  // (test/fixtures/eval-libraries/shell-words: test/escapes.test.js spins forever). The killed file's
  // result comes first; then a top-level `timeout!` naming it takes the place of the next file's
  // result, whether that file had finished (its plan printed) or, on a loaded machine, was still
  // loading when the run timed it out too.
  const KILLED_ESCAPES = [
    'TAP version 14',
    '1..2',
    '# Subtest: test/escapes.test.js',
    '    # Subtest: escapes',
    '        # Subtest: \\\\ before a blank joins words',
    '            ok 1 - should be equivalent',
    '            1..1',
    '        ok 1 - \\\\ before a blank joins words # time=15.915ms',
    '        ',
    '    1..0 # no tests found',
    '        # test count(1) != plan(null)',
    '    TAP version 14',
    '    1..0 # no tests found',
    'not ok 1 - test/escapes.test.js # time=35281.731ms',
    '  ---',
    '  stdio: inherit',
    '  cwd: /w',
    '  externalID: test/escapes.test.js',
    '  command: /usr/local/bin/node',
    '  args:',
    '    - /w/test/escapes.test.js',
    '  exitCode: null',
    '  signal: SIGKILL',
    '  ...',
    '',
  ];
  const TIMEOUT = ['not ok 2 - timeout!', '  ---', '  expired: test/escapes.test.js', '  ...', ''];

  void test('node-tap: a file killed at its timeout is timed out and hung; the next file ran as its tests say', () => {
    const output = [
      ...KILLED_ESCAPES,
      '# Subtest: test/split.test.js',
      '    # Subtest: split',
      '        # Subtest: a \\# is an ordinary character',
      '            ok 1 - should be equivalent',
      '            1..1',
      '        ok 1 - a \\# is an ordinary character # time=2.913ms',
      '        ',
      '        1..1',
      '    ok 1 - split # time=53.409ms',
      '    ',
      '    1..1',
      '    # time=62.923ms',
      ...TIMEOUT,
      '# { total: 4, pass: 3, fail: 1 }',
      '# time=38936.918ms',
    ].join('\n');
    assert.deepEqual(tap(output), {
      'test/escapes.test.js::escapes > \\ before a blank joins words': 'passed',
      'test/escapes.test.js': 'crashed-file: timed out',
      'test/split.test.js::split > a # is an ordinary character': 'passed',
    });
    const s = readFacts(`\n> tap\n\n${output}`, { killed: null, exitCode: 1 }, [], 'tap', '/w');
    assert.deepEqual(s.hung, ['test/escapes.test.js']);
    assert.equal(s.complete, true);
  });

  void test('node-tap: a file still loading when the run timed out is a timed-out file, not left out', () => {
    const output = [
      ...KILLED_ESCAPES,
      '# Subtest: test/split.test.js',
      '    1..0 # no tests found',
      "{ message: 'timeout!', test: 'test/split.test.js' }",
      ...TIMEOUT,
      '# No coverage generated',
      '# { total: 4, pass: 2, fail: 2 }',
      '# time=77089.517ms',
    ].join('\n');
    assert.deepEqual(tap(output), {
      'test/escapes.test.js::escapes > \\ before a blank joins words': 'passed',
      'test/escapes.test.js': 'crashed-file: timed out',
      // Before: no fact for it, in a list called complete, so its tests passing in the next run were
      // "new passing tests" to the verdict.
      'test/split.test.js': 'crashed-file: timed out',
    });
    const s = readFacts(output, { killed: null, exitCode: 1 }, [], 'tap', '/w');
    assert.deepEqual(s.hung, ['test/escapes.test.js', 'test/split.test.js']);
  });

  void test('a bail-out or an unmet plan means the list is not whole', () => {
    const r = new TapReader({ root: null, source: 'output' });
    for (const line of ['TAP version 13', '1..3', 'ok 1 - a', 'Bail out! database gone']) r.feed(line);
    r.finish();
    assert.equal(r.planMet(), false);
  });
});

void describe('what the harness asks of each runner', () => {
  const plan = (command: string, packageJson: string | null = null, runner?: 'pytest' | 'node-test') =>
    planReport({
      command,
      runner,
      packageJson,
      dir: '/tmp/r',
      perTestMs: 180_000,
      nodeFlags: 'timeout+force-exit',
    });
  const pkg = (test: string): string => JSON.stringify({ scripts: { test } });

  void test('jest and vitest: arguments only when they reach the runner alone', () => {
    assert.equal(
      plan('npm test', pkg('jest --ci')).command,
      'npm test -- --json --outputFile="/tmp/r/jest.json" --forceExit',
    );
    assert.equal(
      plan('FORCE_COLOR=1 npm test -- test/a.test.js', pkg('jest')).command,
      'FORCE_COLOR=1 npm test -- test/a.test.js --json --outputFile="/tmp/r/jest.json" --forceExit',
    );
    assert.equal(
      plan('npm test', pkg('vitest run')).command,
      'npm test -- --reporter=default --reporter=json --outputFile.json="/tmp/r/vitest.json"',
    );
    assert.equal(
      plan('npm test -- --reporter=verbose', pkg('vitest run')).command,
      'npm test -- --reporter=verbose --reporter=json --outputFile.json="/tmp/r/vitest.json"',
    );
    assert.equal(
      plan('npx jest --verbose').command,
      'npx jest --verbose --json --outputFile="/tmp/r/jest.json" --forceExit',
    );
    // Arguments after `jest && eslint .` would go to eslint: nothing is added.
    for (const script of ['jest && eslint .', 'npm run build; jest', 'jest "quoted arg"', 'vitest watch']) {
      const p = plan('npm test', pkg(script));
      assert.equal(p.command, 'npm test', script);
    }
    assert.equal(
      plan('yarn test', pkg('jest')).command,
      'yarn test',
      'only npm passes arguments the same way',
    );
  });

  void test('pytest through the environment; node:test through NODE_OPTIONS and a node wrapper', () => {
    const py = plan('python3 -m pytest -rA');
    assert.equal(py.runner, 'pytest');
    assert.match(py.setup, /PYTEST_ADDOPTS="-p issue_agent_pytest/);
    assert.match(py.setup, /ISSUE_AGENT_TEST_BOUND_S=180\b/);
    assert.deepEqual(py.reports, [{ kind: 'pytest', file: 'pytest.jsonl' }]);
    const node = plan('npm test', pkg('node --test test/'));
    assert.equal(node.runner, 'node-test');
    assert.match(
      node.setup,
      /--test-reporter=spec --test-reporter-destination=stdout --test-reporter=\/tmp\/r\/node-test-reporter\.mjs/,
    );
    assert.match(node.setup, /ISSUE_AGENT_NODE_FLAGS="--test-timeout=180000 --test-force-exit"/);
    assert.equal(node.command, 'npm test', 'the command itself is unchanged');
    // A script that picks its own reporters keeps them (node refuses mismatched lists): bound only.
    const own = plan('npm test', pkg('node --test --test-reporter=dot'));
    assert.doesNotMatch(own.setup, /test-reporter/);
    assert.match(own.setup, /ISSUE_AGENT_NODE_FLAGS/);
    for (const command of ['go test ./... -v', 'cargo test', 'npm test']) {
      const p = plan(command, command === 'npm test' ? pkg('mocha') : null);
      assert.deepEqual(p.reports, [], command);
    }
  });
});

void describe('the bounds of a run', () => {
  test('the first run: the test timeout for the run, a fifth of it (one to five minutes) for a test', () => {
    assert.deepEqual(firstBounds({ testTimeoutMs: 15 * 60_000 }), { runMs: 900_000, perTestMs: 180_000 });
    assert.deepEqual(firstBounds({ testTimeoutMs: 60_000 }), { runMs: 60_000, perTestMs: 20_000 });
    assert.deepEqual(firstBounds({ testTimeoutMs: 15_000 }), { runMs: 15_000, perTestMs: 5_000 });
  });

  test("later runs: bounded by the baseline's durations", () => {
    const limits = { testTimeoutMs: 15 * 60_000 };
    const baseline = {
      durationMs: 20_000,
      killed: null,
      exitCode: 1,
      summary: { fileMs: { 'a.js': 4_000, 'b.js': 9_000 } },
    };
    assert.deepEqual(boundsAfter(baseline, limits), { runMs: 120_000, perTestMs: 60_000 });
    const slow = { ...baseline, durationMs: 200_000, summary: { fileMs: { 'a.js': 50_000 } } };
    assert.deepEqual(boundsAfter(slow, limits), { runMs: 780_000, perTestMs: 180_000 });
    // A baseline that was stopped bounds nothing.
    assert.deepEqual(
      boundsAfter({ ...baseline, killed: 'timeout', exitCode: null }, limits),
      firstBounds(limits),
    );
  });
});

void describe('a report and the console output, merged', () => {
  const f = (id: string, file: string | null, status: TestFact['status']): TestFact => ({
    id,
    file,
    status,
    source: 'report',
  });

  test('the output can only make a test worse: a report the tests rewrote cannot hide a failure', () => {
    const report = [f('t/a.js::x', 't/a.js', 'passed'), f('t/a.js::y', 't/a.js', 'passed')];
    const output = [
      { ...f('x', null, 'failed'), source: 'output' as const },
      { ...f('y', null, 'passed'), source: 'output' as const },
    ];
    const merged = mergeFacts(report, output);
    assert.deepEqual(
      merged.facts.map((x) => [x.id, x.status, x.source]),
      [
        ['t/a.js::x', 'failed', 'output'],
        ['t/a.js::y', 'passed', 'report'],
      ],
    );
    assert.equal(merged.added, 0);
  });

  test('jest\'s " › " joined failure headers match the report\'s titles', () => {
    const report = [f('t/s.test.js::strings › arrow > trims', 't/s.test.js', 'failed')];
    const output = [
      { ...f('t/s.test.js::strings > arrow > trims', 't/s.test.js', 'failed'), source: 'output' as const },
    ];
    assert.equal(mergeFacts(report, output).added, 0);
  });

  test('a name in several files: a failure the report shows in none of them fails them all', () => {
    const report = [f('t/a.js::same', 't/a.js', 'passed'), f('t/b.js::same', 't/b.js', 'passed')];
    const merged = mergeFacts(report, [{ ...f('same', null, 'failed'), source: 'output' }]);
    assert.deepEqual(
      merged.facts.map((x) => x.status),
      ['failed', 'failed'],
    );
  });

  test('without a report the output is the facts; a stopped run names the file it stopped in', () => {
    const s = readFacts(
      'tests/test_a.py ..\ntests/test_hang.py .',
      { killed: 'timeout', exitCode: null },
      [],
      'pytest',
      '/w',
    );
    assert.equal(s.complete, false);
    assert.deepEqual(s.hung, ['tests/test_hang.py']);
    assert.deepEqual(
      (s.tests ?? []).map((t) => [t.id, t.status, t.source]),
      [
        ['tests/test_a.py', 'passed', 'output'],
        ['tests/test_hang.py', 'crashed-file', 'harness'],
      ],
    );
  });
});
