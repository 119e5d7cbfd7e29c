import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { AgentRun } from '../../src/agent/agent-run.js';
import { StopRun } from '../../src/agent/run-stop.js';
import { step, toolCalls } from '../../src/agent/step.js';
import { WorkspaceGit } from '../../src/agent/workspace-git.js';
import { reduceState } from '../../src/events/reduce-state.js';
import type { AgentEvent } from '../../src/events/schema.js';
import { DEFAULT_PRICES } from '../../src/model/pricing.js';
import { reply, scripted, type Policy } from '../../src/model-sim/index.js';
import { startHarness, type Harness } from '../support/agent-harness.js';

/**
 * `step`, the loop's unit: one model call, then its tool calls, each recorded action, checkpoint
 * (when it may have changed files), observation; then how the loop ends, or null. Run here on a
 * real sandbox and the model simulator, one step at a time, without the driver around it.
 */

async function withRun(
  options: { policy: Policy; triage?: boolean; maxSteps?: number },
  body: (run: AgentRun, h: Harness) => Promise<void>,
): Promise<void> {
  const h = await startHarness({
    policy: options.policy,
    ...(options.triage === true ? { triage: true } : {}),
    ...(options.maxSteps === undefined ? {} : { limits: { maxSteps: options.maxSteps } }),
  });
  try {
    const git = await WorkspaceGit.open(h.sandbox);
    const deps = { store: h.store, sandbox: h.sandbox, model: h.model, prices: DEFAULT_PRICES };
    await body(new AgentRun(deps, git, reduceState(h.store.events), Date.now()), h);
  } finally {
    await h.close();
  }
}

const kinds = (events: readonly AgentEvent[]): string[] =>
  events.map((e) => (e.kind === 'action' || e.kind === 'observation' ? `${e.kind}:${e.tool}` : e.kind));

const FIX = { command: 'str_replace', path: 'src/calc.js', old_str: 'Math.floor', new_str: 'Math.round' };

test('a step: one model call, then each call recorded action, checkpoint (only for a change), observation; the loop goes on', async () => {
  await withRun(
    { policy: scripted([reply().text('Fixing.').tool('editor', FIX).tool('bash', { command: 'ls src' })]) },
    async (run, h) => {
      const end = await step(run);
      assert.equal(end, null);
      assert.equal(h.sim.requests.length, 1);
      const events = h.store.events;
      assert.deepEqual(kinds(events), [
        'model_response',
        'action:editor',
        'checkpoint',
        'observation:editor',
        'action:bash',
        'observation:bash',
      ]);
      const [, edit, checkpoint, observed, , listed] = events;
      assert.ok(
        edit?.kind === 'action' && checkpoint?.kind === 'checkpoint' && observed?.kind === 'observation',
      );
      assert.equal(checkpoint.toolUseId, edit.toolUseId, 'the checkpoint names the call whose change it is');
      assert.equal(observed.tree, checkpoint.tree, 'the observation states the tree its change is in');
      assert.equal(run.lastTree, checkpoint.tree);
      assert.ok(
        listed?.kind === 'observation' && listed.tree === undefined,
        'a read-only command: no checkpoint',
      );
      assert.match(readFileSync(join(h.repo.dir, 'src/calc.js'), 'utf8'), /Math\.round/);
    },
  );
});

test('finish ends the loop done; the next step is never asked', async () => {
  await withRun({ policy: scripted([reply().tool('finish', { summary: 'done' })]) }, async (run, h) => {
    assert.deepEqual(await step(run), { kind: 'done' });
    assert.equal(h.sim.requests.length, 1);
    assert.equal(reduceState(h.store.events).finishSummary, 'done');
  });
});

test('a question ends the loop with it, and the rest of its turn is not run', async () => {
  const ask = { missing: 'The rounding rule.', questions: ['Half up?'] };
  await withRun(
    {
      triage: true,
      policy: scripted([reply().tool('ask_for_clarification', ask).tool('editor', FIX)]),
    },
    async (run, h) => {
      assert.deepEqual(await step(run), { kind: 'question', question: ask });
      const edit = h.store.events.find((e) => e.kind === 'observation' && e.tool === 'editor');
      assert.ok(edit?.kind === 'observation' && edit.isError);
      assert.match(edit.content, /^Not run: you asked for clarification in this turn/);
      assert.ok(!h.store.events.some((e) => e.kind === 'checkpoint'));
      assert.doesNotMatch(readFileSync(join(h.repo.dir, 'src/calc.js'), 'utf8'), /Math\.round/);
    },
  );
});

test('a turn with no tool call: a warning before the next model call, and the second such turn ends the loop', async () => {
  await withRun(
    { policy: scripted([reply().text('I think it is fine.'), reply().text('Still fine.')]) },
    async (run, h) => {
      assert.equal(await step(run), null);
      assert.deepEqual(await step(run), { kind: 'done' });
      assert.deepEqual(kinds(h.store.events), ['model_response', 'warning', 'model_response']);
      const warning = h.store.events[1];
      assert.ok(warning?.kind === 'warning' && warning.code === 'no_tool_call');
    },
  );
});

test('the budgets are checked before the model is asked: at the step limit the run stops, no request sent', async () => {
  await withRun(
    { maxSteps: 1, policy: scripted([reply().tool('bash', { command: 'true' })]) },
    async (run, h) => {
      assert.equal(await step(run), null);
      await assert.rejects(
        step(run),
        (e) => e instanceof StopRun && e.stop.outcome === 'budget_exhausted' && e.stop.limit === 'steps',
      );
      assert.equal(h.sim.requests.length, 1);
    },
  );
});

test('toolCalls finishes an interrupted turn: a call whose checkpoint is recorded is not run again', async () => {
  await withRun({ policy: scripted([]) }, async (run, h) => {
    // The log as a kill right after the edit's checkpoint leaves it: the turn's observations lost.
    await run.append({
      kind: 'model_response',
      model: 'claude-sonnet-4-6',
      requestId: 'req_1',
      content: [
        { type: 'tool_use', id: 'toolu_edit', name: 'editor', input: FIX },
        { type: 'tool_use', id: 'toolu_ls', name: 'bash', input: { command: 'ls src' } },
      ],
      stopReason: 'tool_use',
      usage: { inputTokens: 10, outputTokens: 10, cacheReadTokens: 0, cacheWriteTokens: 0 },
      usd: 0,
      latencyMs: 1,
      attempts: 1,
      promptTokensEstimate: 10,
    });
    await run.append({ kind: 'action', toolUseId: 'toolu_edit', tool: 'editor', input: FIX });
    const file = join(h.repo.dir, 'src/calc.js');
    writeFileSync(file, readFileSync(file, 'utf8').replace('Math.floor', 'Math.round'));
    await run.checkpoint('toolu_edit');
    const before = h.store.events.length;

    assert.equal(await toolCalls(run), null);
    const after = h.store.events.slice(before);
    assert.deepEqual(kinds(after), ['observation:editor', 'action:bash', 'observation:bash']);
    const [interrupted] = after;
    assert.ok(interrupted?.kind === 'observation' && !interrupted.isError);
    assert.match(interrupted.content, /the run was interrupted before its output was recorded/);
    assert.equal(interrupted.tree, run.lastTree);
    assert.equal(h.sim.requests.length, 0);
  });
});
