import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { askTool } from '../../src/agent/tools/ask.js';
import { defaultTools } from '../../src/agent/tools/index.js';
import { RunFailure, type RunControl } from '../../src/agent/tools/run-control.js';
import { newToolContext, runToolCall, type Tool, type ToolContext } from '../../src/agent/tools/tool.js';
import { DEFAULT_LIMITS } from '../../src/config/agent-env.js';
import type { EventOf } from '../../src/events/schema.js';
import { ModelError } from '../../src/model/model.js';
import { LocalSandbox } from '../../src/sandbox/local/local-sandbox.js';

/**
 * delegate, ask_for_clarification and run_tests's baseline answer are ordinary tools: each is run
 * through runToolCall like any other, and asks the loop only through its RunControl, faked here.
 */

const tools: ReadonlyMap<string, Tool> = new Map([...defaultTools(), [askTool.name, askTool]]);
const TEST_COMMAND = "echo 'ran the tests'";

interface Calls {
  delegate: { question: string; maxSteps: number }[];
  baseline: number;
}

function control(over: Partial<RunControl> = {}): { readonly control: RunControl; readonly calls: Calls } {
  const calls: Calls = { delegate: [], baseline: 0 };
  return {
    calls,
    control: {
      changedFiles: over.changedFiles ?? false,
      reusableBaseline: () => {
        calls.baseline++;
        return over.reusableBaseline?.() ?? null;
      },
      delegate: (question, maxSteps) => {
        calls.delegate.push({ question, maxSteps });
        return over.delegate?.(question, maxSteps) ?? Promise.resolve(`found: ${question}`);
      },
    },
  };
}

const baseline = (command: string): EventOf<'test_run'> => ({
  id: 3,
  ts: '2026-12-04T00:00:00.000Z',
  kind: 'test_run',
  phase: 'baseline',
  command,
  exitCode: 1,
  killed: null,
  durationMs: 900,
  summary: {
    runner: 'node-test',
    passed: 2,
    failed: 1,
    skipped: 0,
    failedNames: ['rounds'],
    passedNames: [],
  },
  output: 'not ok 3 - rounds',
  outputBytes: 17,
});

let dir: string;
let sandbox: LocalSandbox;
let ctx: ToolContext;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ia-run-control-'));
  sandbox = await LocalSandbox.create({ workspace: dir, path: process.env.PATH ?? '/usr/bin:/bin' });
  ctx = newToolContext({ sandbox, limits: DEFAULT_LIMITS, testCommand: TEST_COMMAND });
});
after(async () => {
  await sandbox.close();
  rmSync(dir, { recursive: true, force: true });
});

const ASK = { missing: 'The rounding rule.', questions: ['Half up or half even?'] };

describe('ask_for_clarification', () => {
  it('before any change: the question is the output, for the loop to end the run needs_info', async () => {
    const r = await runToolCall(tools, 'ask_for_clarification', ASK, ctx, control().control);
    assert.equal(r.isError, false);
    assert.deepEqual(r.question, ASK);
    assert.match(r.content, /The question is posted on the issue/);
  });

  it('after a change: refused, with no question, nothing ran', async () => {
    const r = await runToolCall(
      tools,
      'ask_for_clarification',
      ASK,
      ctx,
      control({ changedFiles: true }).control,
    );
    assert.equal(r.isError, true);
    assert.equal(r.question, undefined);
    assert.equal(r.mutates, false);
    assert.equal(r.durationMs, 0);
    assert.match(r.content, /^Not asked: you have already changed files\./);
  });
});

describe('delegate', () => {
  it('hands the question to the run, its steps capped, and answers with the summary', async () => {
    const { control: c, calls } = control();
    const r = await runToolCall(tools, 'delegate', { question: 'Where is sum?' }, ctx, c);
    assert.deepEqual(r, { ...r, content: 'found: Where is sum?', isError: false, mutates: false });
    await runToolCall(tools, 'delegate', { question: 'q2', max_steps: 5 }, ctx, c);
    await runToolCall(tools, 'delegate', { question: 'q3', max_steps: 30 }, ctx, c);
    assert.deepEqual(calls.delegate, [
      { question: 'Where is sum?', maxSteps: 20 },
      { question: 'q2', maxSteps: 5 },
      { question: 'q3', maxSteps: 20 },
    ]);
  });

  it('invalid input is the model to fix, and no sub-agent runs', async () => {
    const { control: c, calls } = control();
    const r = await runToolCall(tools, 'delegate', { question: '' }, ctx, c);
    assert.equal(r.isError, true);
    assert.match(r.content, /^Invalid input for tool "delegate":\n- question:/);
    assert.deepEqual(calls.delegate, []);
  });

  it("a failure of the run (RunFailure) reaches the loop as it was thrown; the sub-agent's own error is the model's", async () => {
    const refused = new ModelError('auth', 'the API key was refused', 401);
    const failing = control({ delegate: () => Promise.reject(new RunFailure(refused)) }).control;
    await assert.rejects(
      runToolCall(tools, 'delegate', { question: 'q' }, ctx, failing),
      (e) => e === refused,
    );
    const broken = control({ delegate: () => Promise.reject(new Error('no such file')) }).control;
    const r = await runToolCall(tools, 'delegate', { question: 'q' }, ctx, broken);
    assert.equal(r.isError, true);
    assert.equal(r.content, 'The delegate tool failed: no such file');
  });

  it('outside an agent loop it is an error for the model, not a crash', async () => {
    const r = await runToolCall(tools, 'delegate', { question: 'q' }, ctx);
    assert.equal(r.isError, true);
    assert.match(r.content, /delegate runs only inside the agent loop/);
  });
});

describe('run_tests', () => {
  it('the whole suite while the baseline is reusable: that run, not run again', async () => {
    const { control: c, calls } = control({ reusableBaseline: () => baseline(TEST_COMMAND) });
    const r = await runToolCall(tools, 'run_tests', {}, ctx, c);
    assert.equal(calls.baseline, 1);
    assert.equal(r.isError, false);
    assert.equal(r.mutates, false, 'no checkpoint follows: nothing ran');
    assert.equal(r.durationMs, 0);
    assert.equal(r.exitCode, 1);
    assert.equal(r.killed, null);
    assert.deepEqual(r.testSummary, baseline(TEST_COMMAND).summary);
    assert.match(r.content, /^\$ echo 'ran the tests'\nNot run again: nothing has changed/);
    assert.match(r.content, /not ok 3 - rounds/);
    assert.doesNotMatch(r.content, /ran the tests\n/);
  });

  it('runs the tests when filtered, when there is no reusable baseline, or when its command differs', async () => {
    const cases: [string, Record<string, unknown>, RunControl][] = [
      ['filtered', { filter: '--one' }, control({ reusableBaseline: () => baseline(TEST_COMMAND) }).control],
      ['no baseline', {}, control().control],
      ['another command', {}, control({ reusableBaseline: () => baseline('npm test') }).control],
    ];
    for (const [name, input, c] of cases) {
      const r = await runToolCall(tools, 'run_tests', input, ctx, c);
      assert.equal(r.isError, false, name);
      assert.equal(r.mutates, true, name);
      assert.doesNotMatch(r.content, /Not run again/, name);
      assert.match(r.content, /ran the tests/, name);
    }
  });

  it('a filtered run does not read the log for a baseline', async () => {
    const { control: c, calls } = control();
    await runToolCall(tools, 'run_tests', { filter: '--one' }, ctx, c);
    assert.equal(calls.baseline, 0);
  });
});
