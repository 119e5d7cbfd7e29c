import type { AgentEvent, EventOf, Task } from '../../src/events/schema.js';
import { reply, scripted, type Policy, type ScriptStep } from '../../src/model-sim/index.js';

/**
 * A long scripted run with observations of a real run's size, for the condenser's test and the
 * token benchmark (bench/tokens-bench.ts): the node-calc fixture plus a 420-line module and a
 * 160-test suite, and a script of `steps` turns that reads the module 200 lines at a time, greps,
 * edits three files at fixed turns and runs the tests every 20 turns (hundreds of lines of TAP
 * output, with `average rounds to the nearest hundredth` failing throughout), then finishes.
 */

export const LONG_RUN_TASK: Task = {
  title: 'Monthly report shows truncated averages',
  body: 'The monthly report prints 1.66 where the mean is 1.666…; averages must round to the nearest hundredth.',
  instructions: [],
  source: 'test',
};

export const FAILING_TEST = 'average rounds to the nearest hundredth';

/** The files the script changes, and the turn of each one's first change. */
export const LONG_RUN_EDITS: readonly { readonly turn: number; readonly path: string }[] = [
  { turn: 6, path: 'src/report.js' },
  { turn: 45, path: 'src/calc.js' },
  { turn: 120, path: 'src/round.js' },
];

function reportModule(): string {
  const lines = ['/** Report rows for the monthly summary (fixture for the condenser test). */', ''];
  for (let k = 0; k < 60; k++) {
    lines.push(
      `/** Row ${k}: label, padded value and the marker ${k}. */`,
      `export function formatRow${k}(value) {`,
      `  const label = 'row ${k}'; // marker ${k}`,
      `  const padded = String(value).padStart(${8 + (k % 5)}, ' ');`,
      '  return `${label}: ${padded}`;',
      '}',
      '',
    );
  }
  return `${lines.join('\n')}\n`;
}

function reportTests(): string {
  const lines = [
    "import { test } from 'node:test';",
    "import assert from 'node:assert/strict';",
    "import * as report from '../src/report.js';",
    '',
  ];
  for (let k = 0; k < 160; k++) {
    const row = k % 60;
    lines.push(
      `test('formatRow${row} pads case ${k}', () => {`,
      `  assert.match(report.formatRow${row}(${k}), /^row ${row}: +${k}$/);`,
      '});',
    );
  }
  return `${lines.join('\n')}\n`;
}

/**
 * What `node --test` prints for the fixture's suites (TAP, each test with its YAML block; the one
 * failing test with its assertion and stack), about 1,200 lines. The run's test command prints it
 * rather than running node: the observations are the same size and shape, without a node process
 * per run (which on a loaded machine took seconds each).
 */
function recordedTestOutput(): string {
  const lines = ['TAP version 13'];
  let n = 0;
  const ok = (name: string): void => {
    n += 1;
    lines.push(
      `# Subtest: ${name}`,
      `ok ${n} - ${name}`,
      '  ---',
      `  duration_ms: ${(0.3 + (n % 7) * 0.11).toFixed(6)}`,
      "  type: 'test'",
      '  ...',
    );
  };
  for (const name of [
    'sum adds every value',
    'sum of an empty list is zero',
    'range includes both ends',
    'range is empty when start is past end',
    'average of whole numbers',
  ])
    ok(name);
  n += 1;
  lines.push(
    `# Subtest: ${FAILING_TEST}`,
    `not ok ${n} - ${FAILING_TEST}`,
    '  ---',
    '  duration_ms: 1.612785',
    "  type: 'test'",
    "  location: 'test/calc.test.js:26:1'",
    "  failureType: 'testCodeFailure'",
    '  error: |-',
    '    Expected values to be strictly equal:',
    '    ',
    '    1.66 !== 1.67',
    '    ',
    "  code: 'ERR_ASSERTION'",
    "  name: 'AssertionError'",
    '  expected: 1.67',
    '  actual: 1.66',
    "  operator: 'strictEqual'",
    '  stack: |-',
    '    TestContext.<anonymous> (file:///workspace/test/calc.test.js:27:10)',
    '    Test.runInAsyncScope (node:async_hooks:214:14)',
    '    Test.run (node:internal/test_runner/test:1047:25)',
    '  ...',
  );
  for (const name of ['average rounds negative means away from zero', 'average of an empty list throws'])
    ok(name);
  for (let k = 0; k < 160; k++) ok(`formatRow${k % 60} pads case ${k}`);
  lines.push(
    '1..' + String(n),
    `# tests ${n}`,
    '# suites 0',
    `# pass ${n - 1}`,
    '# fail 1',
    '# cancelled 0',
    '# skipped 0',
    '# todo 0',
    '# duration_ms 412.5',
  );
  return `${lines.join('\n')}\n`;
}

/** The run's test command: prints the suites' recorded output and fails, as `node --test` does here. */
export const LONG_RUN_TEST_COMMAND = 'cat test/results.tap; exit 1';

/** Files committed over the node-calc fixture before the run. */
export function longRunFiles(): Record<string, string> {
  return {
    'src/report.js': reportModule(),
    'test/report.test.js': reportTests(),
    'test/results.tap': recordedTestOutput(),
  };
}

function turn(i: number): ScriptStep {
  const note = (text: string): ReturnType<typeof reply> => reply().text(`Turn ${i}: ${text}`);
  if (i === 6)
    return note('the label text is built twice; tidy it.').tool('editor', {
      command: 'str_replace',
      path: 'src/report.js',
      old_str: "const label = 'row 7'; // marker 7",
      new_str: "const label = 'row 7'; // marker 7 (checked)",
    });
  if (i === 45)
    return note('document the rounding in average.').tool('editor', {
      command: 'str_replace',
      path: 'src/calc.js',
      old_str: '/** Mean of a list of numbers, rounded to the nearest hundredth. */',
      new_str: '/** Mean of a list of numbers, rounded to the nearest hundredth (see round.js). */',
    });
  if (i === 120)
    return note('add a rounding helper.').tool('editor', {
      command: 'create',
      path: 'src/round.js',
      file_text:
        'export function roundTo(value, digits) {\n  const f = 10 ** digits;\n  return Math.round(value * f) / f;\n}\n',
    });
  if (i % 20 === 0) return note('run the tests.').tool('run_tests', {});
  if (i % 7 === 3)
    return note('look for uses of the padding.').tool('bash', {
      command: `grep -n "padStart(${8 + (i % 5)}" -r src test | head -150`,
    });
  if (i % 9 === 4)
    return note('read the tests around this row.').tool('editor', {
      command: 'view',
      path: 'test/report.test.js',
      view_range: [1 + ((i * 13) % 250), 200 + ((i * 13) % 250)],
    });
  const start = 1 + ((i * 37) % 220);
  return note('read the report module.').tool('editor', {
    command: 'view',
    path: 'src/report.js',
    view_range: [start, start + 199],
  });
}

/** The scripted model for `steps` turns, then finish. */
export function longRunPolicy(steps: number): Policy {
  const script: ScriptStep[] = [];
  for (let i = 0; i < steps; i++) script.push(turn(i));
  script.push(reply().tool('finish', { summary: 'Averages now round through roundTo.' }));
  return scripted(script);
}

/**
 * Per main-loop step, what it cost in dollars (its model turn, plus a summary call made just before
 * it) and whether the context was condensed before it.
 */
export function costPerStep(events: readonly AgentEvent[]): { usd: number; condensed: boolean }[] {
  const out: { usd: number; condensed: boolean }[] = [];
  let pending = 0;
  let condensed = false;
  for (const e of events) {
    if (e.kind === 'condensation') {
      condensed = true;
      pending += e.call?.usd ?? 0;
    }
    if (e.kind === 'model_response' && e.parent === undefined) {
      out.push({ usd: e.usd + pending, condensed });
      pending = 0;
      condensed = false;
    }
  }
  return out;
}

/** The files changed before event `id` (by the editor's create, str_replace and insert). */
export function changedBefore(events: readonly AgentEvent[], id: number): string[] {
  const paths = new Set<string>();
  for (const e of events) {
    if (e.id >= id) break;
    if (e.kind !== 'action' || e.tool !== 'editor') continue;
    const input = e.input as { command?: unknown; path?: unknown };
    if (input.command !== 'view' && typeof input.path === 'string') paths.add(input.path);
  }
  return [...paths];
}

export type Condensation = EventOf<'condensation'>;
