/**
 * A synthetic trajectory shaped like a long real run, written with the real FileEventStore: model
 * turns with text and tool calls, short and long command outputs (with ANSI colours), edits,
 * checkpoints with growing diffs, test runs with pass/fail names, retries, warnings, a condensation
 * and an outcome. Used by the run-view benchmark and the browser tests. It can also carry hostile
 * text (markup, script) in outputs, which the client must show as text.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { FileEventStore } from '../../src/events/file-event-store.js';
import { SCHEMA_VERSION, type BaseState, type NewEvent } from '../../src/events/schema.js';

export const HOSTILE = '<img src=x onerror="window.__iaXss=1"><script>window.__iaXss=2</script>';

/** Step 4's thinking, with markup that must stay text. */
export const SYNTHETIC_THINKING =
  'The sum is divided before rounding, so <i>average()</i> loses the last digit.';

export interface SyntheticRunOptions {
  readonly steps: number;
  readonly repo?: string;
  readonly issue?: number;
  readonly title?: string;
  /** Whether the run ends with an outcome event (false: it looks live). */
  readonly finished?: boolean;
}

const RED = '\u001b[31m';
const GREEN = '\u001b[32m';
const BOLD = '\u001b[1m';
const RESET = '\u001b[0m';

function lines(n: number, make: (i: number) => string): string {
  return Array.from({ length: n }, (_, i) => make(i)).join('\n');
}

function testOutput(passed: number, failed: readonly string[]): string {
  const ok = lines(passed, (i) => `${GREEN}✔${RESET} calc › case ${i} (${(i % 7) + 1}.${i % 10}ms)`);
  const bad = failed.map(
    (n) =>
      `${RED}✖ ${n}${RESET}\n  AssertionError: expected 1.67, got 1.66\n    at Context.<anonymous> (test/calc.test.js:${n.length}:5)`,
  );
  return `${BOLD}> node --test${RESET}\n${ok}\n${bad.join('\n')}\nℹ tests ${passed + failed.length}\nℹ pass ${passed}\nℹ fail ${failed.length}\n`;
}

function fileDiff(file: number, edits: number): string {
  const body = lines(Math.min(30, 3 + edits * 2), (i) =>
    i % 3 === 0 ? `-  const v${i} = old(${i});\n+  const v${i} = fixed(${i}, ${edits});` : `   keep(${i});`,
  );
  return `diff --git a/src/mod${file}.js b/src/mod${file}.js\nindex 1111111..2222222 100644\n--- a/src/mod${file}.js\n+++ b/src/mod${file}.js\n@@ -1,${edits + 3} +1,${edits + 3} @@\n${body}\n`;
}

/** Writes the run into `dir` (created; must not hold a conversation) and returns its base state. */
export function writeSyntheticRun(dir: string, options: SyntheticRunOptions): BaseState {
  const repo = options.repo ?? 'acme/calc';
  const issue = options.issue ?? 1;
  const base: BaseState = {
    schemaVersion: SCHEMA_VERSION,
    conversationId: `synthetic-${issue}`,
    createdAt: new Date().toISOString(),
    task: {
      title: options.title ?? 'Average rounds wrong',
      body: 'average() truncates instead of rounding: average([1, 2, 2]) should be 1.67.',
      instructions: [],
      source: `${repo}#${issue}`,
    },
    workspace: { path: '/work/repo', baseCommit: 'a'.repeat(40), baseTree: 'b'.repeat(40) },
    model: 'claude-sonnet-4-6',
    sandbox: 'docker',
    testCommand: 'npm test',
    testCommandSource: 'package.json',
    limits: {
      maxSteps: options.steps + 10,
      maxTokens: 400_000_000,
      maxUsd: 5000,
      maxWallMs: 10 * 3_600_000,
      contextTokens: 150_000,
      commandTimeoutMs: 120_000,
      testTimeoutMs: 900_000,
      testMemoryBytes: 4 * 1024 ** 3,
      observationChars: 16_000,
      maxOutputTokens: 8192,
    },
  };
  mkdirSync(dir, { recursive: true });
  const store = FileEventStore.create(dir, base);
  const add = (e: NewEvent): void => {
    store.appendSync(e);
  };
  const failing = ['calc › average rounds to two places', 'calc › average of [1, 2, 2]'];
  const testRun = (phase: 'baseline' | 'agent' | 'final', fail: readonly string[]): NewEvent => {
    const output = testOutput(40, fail);
    return {
      kind: 'test_run',
      phase,
      command: 'npm test',
      exitCode: fail.length === 0 ? 0 : 1,
      killed: null,
      durationMs: 1800 + fail.length * 10,
      summary: {
        runner: 'node:test',
        passed: 40,
        failed: fail.length,
        skipped: 0,
        failedNames: [...fail],
        passedNames: Array.from({ length: 40 }, (_, i) => `calc › case ${i}`),
      },
      output,
      outputBytes: Buffer.byteLength(output),
    };
  };
  add(testRun('baseline', failing));
  const edited = new Map<number, number>();
  for (let step = 1; step <= options.steps; step++) {
    const id = `toolu_${String(step).padStart(6, '0')}`;
    const kind = step % 10;
    let tool: string;
    let input: Record<string, unknown>;
    switch (kind) {
      case 4:
        tool = 'editor';
        input = { command: 'view', path: `src/mod${step % 12}.js`, view_range: [1, 60] };
        break;
      case 5:
        tool = 'editor';
        input = {
          command: 'str_replace',
          path: `src/mod${step % 12}.js`,
          old_str: `  const v = old(${step});\n  return v;`,
          new_str: `  const v = fixed(${step});\n  return Math.round(v * 100) / 100;`,
        };
        break;
      case 6:
        tool = 'search';
        input = { pattern: 'average\\(', path: 'src' };
        break;
      case 7:
        tool = 'run_tests';
        input = {};
        break;
      case 9:
        tool = 'editor';
        input = {
          command: 'create',
          path: `test/case${step}.test.js`,
          file_text: lines(12, (i) => `test('case ${step}.${i}', () => {});`),
        };
        break;
      default:
        tool = 'bash';
        input = {
          command:
            kind === 8
              ? 'node scripts/check.js'
              : step % 7 === 0
                ? 'npm run build --verbose'
                : `cat src/mod${step % 12}.js | head -n 20`,
        };
    }
    if (step % 100 === 50) {
      add({
        kind: 'model_retry',
        attempt: 1,
        status: 529,
        reason: 'overloaded_error: Overloaded',
        waitMs: 1000,
      });
    }
    const text =
      step % 50 === 1
        ? `Let me think this through in detail.\n\n${lines(80, (i) => `Point ${i}: the rounding in average() loses precision when the sum is not divisible; step ${step}.`)}`
        : `Step ${step}: ${kind === 5 ? 'Fix the rounding in this module.' : kind === 7 ? 'Run the tests again.' : 'Look at the code around average().'}`;
    add({
      kind: 'model_response',
      model: 'claude-sonnet-4-6',
      requestId: `req_${step}`,
      content: [
        // Step 4 thought first (extended thinking): the run view folds it for signed-in readers.
        ...(step === 4
          ? [{ type: 'thinking' as const, thinking: SYNTHETIC_THINKING, signature: 'sig-4' }]
          : []),
        { type: 'text', text },
        { type: 'tool_use', id, name: tool, input },
      ],
      ...(step === 4 ? { thinkingTokens: 40 } : {}),
      // Step 6's prompt was cleared by the API (condenser: server): the turn says so itself.
      ...(step === 6
        ? {
            contextEdits: [
              { type: 'clear_tool_uses_20250919', clearedInputTokens: 41_000, clearedToolUses: 12 },
            ],
          }
        : {}),
      stopReason: 'tool_use',
      usage: {
        inputTokens: 900 + step,
        outputTokens: 120 + (step % 40),
        cacheReadTokens: 12_000,
        cacheWriteTokens: step % 10 === 1 ? 2000 : 0,
      },
      usd: 0.0061 + (step % 5) * 0.0007,
      latencyMs: 800 + (step % 13) * 90,
      attempts: step % 100 === 50 ? 2 : 1,
      promptTokensEstimate: 13_000,
    });
    add({ kind: 'action', toolUseId: id, tool, input });
    let content: string;
    let exitCode: number | null = 0;
    let isError = false;
    let testSummary: Extract<NewEvent, { kind: 'test_run' }>['summary'] | undefined;
    switch (kind) {
      case 4:
        content = lines(
          60,
          (i) => `${String(i + 1).padStart(4)}\tconst v${i} = compute(${i}); // ${'x'.repeat(i % 30)}`,
        );
        exitCode = null;
        break;
      case 5:
        content = `The file src/mod${step % 12}.js has been edited.`;
        exitCode = null;
        break;
      case 6:
        content = lines(14, (i) => `src/mod${i}.js:${i * 3 + 1}:export function average(xs) {`);
        exitCode = null;
        break;
      case 7: {
        const fail = step > options.steps - 20 ? [] : failing.slice(0, 1 + (step % 2));
        content = testOutput(40, fail);
        exitCode = fail.length === 0 ? 0 : 1;
        testSummary = {
          runner: 'node:test',
          passed: 40,
          failed: fail.length,
          skipped: 0,
          failedNames: fail,
          passedNames: Array.from({ length: 40 }, (_, i) => `calc › case ${i}`),
        };
        break;
      }
      case 8:
        content = `${RED}Error: check failed${RESET}\n    at main (scripts/check.js:3:9)\n${step % 40 === 8 ? HOSTILE : ''}`;
        exitCode = 1;
        isError = true;
        break;
      case 9:
        content = `File created successfully at: test/case${step}.test.js`;
        exitCode = null;
        break;
      default:
        content =
          step % 7 === 0
            ? lines(
                400,
                (i) =>
                  `${i % 25 === 0 ? `${BOLD}${GREEN}` : ''}[build] compiling module ${i} of 400: src/part${i}.js ${'.'.repeat(i % 40)}${i % 25 === 0 ? RESET : ''}`,
              )
            : lines(20, (i) => `  line ${i}: return xs.reduce((a, b) => a + b, 0) / xs.length; // ${step}`);
    }
    add({
      kind: 'observation',
      toolUseId: id,
      tool,
      isError,
      content,
      ...(exitCode === null ? {} : { exitCode }),
      killed: null,
      durationMs: kind === 7 ? 1900 : 20 + (step % 17) * 11,
      ...(testSummary === undefined ? {} : { testSummary }),
    });
    if (kind === 5 || kind === 9) {
      const file = step % 12;
      edited.set(file, (edited.get(file) ?? 0) + 1);
      const diff = [...edited.entries()].map(([f, n]) => fileDiff(f, n)).join('');
      add({ kind: 'checkpoint', tree: step.toString(16).padStart(40, '0'), diff, filesChanged: edited.size });
    }
    if (step % 250 === 0) {
      add({
        kind: 'condensation',
        throughEventId: step * 3,
        summary: `Summary of the first ${step} steps: the rounding bug is in average().`,
        condensedTurns: step - 10,
      });
    }
    if (step % 333 === 0)
      add({
        kind: 'warning',
        code: 'stuck_repeat',
        message: 'The same command ran three times with the same output.',
      });
  }
  if (options.finished !== false) {
    add(testRun('final', []));
    add({
      kind: 'outcome',
      outcome: 'resolved',
      reason: 'The final test run passes and the baseline failed.',
      summary: 'Rounded average() to two places.',
      diffStat: ' src/mod1.js | 4 ++--\n 1 file changed, 2 insertions(+), 2 deletions(-)',
    });
  }
  return base;
}

/** Lays a run out as a worker does: `<workDir>/jobs/<jobId>/trajectory`, plus `job.json`. */
export function writeSyntheticJob(workDir: string, jobId: string, options: SyntheticRunOptions): string {
  const jobDir = join(workDir, 'jobs', jobId);
  mkdirSync(jobDir, { recursive: true });
  writeSyntheticRun(join(jobDir, 'trajectory'), options);
  writeFileSync(
    join(jobDir, 'job.json'),
    `${JSON.stringify({ payload: null, startedAt: new Date().toISOString() })}\n`,
  );
  return jobDir;
}
