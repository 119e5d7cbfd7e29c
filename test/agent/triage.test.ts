import assert from 'node:assert/strict';
import { test } from 'node:test';
import { reduceState } from '../../src/events/reduce-state.js';
import { reply, type MessagesRequest, type Policy } from '../../src/model-sim/index.js';
import { startHarness } from '../support/agent-harness.js';

const ASK = {
  missing: 'The expected rounding is not stated.',
  questions: ['Half up or half even?', 'Two decimals?'],
};

const toolNames = (request: MessagesRequest): string[] =>
  (request.tools ?? []).map((t) => ('name' in t ? t.name : ''));

test('triage on: a question before any change ends the run needs_info, with the questions and nothing run after', async () => {
  const h = await startHarness({
    triage: true,
    policy: () => reply().text('Unclear.').tool('ask_for_clarification', ASK),
  });
  try {
    const outcome = await h.run();
    assert.equal(outcome.outcome, 'needs_info');
    assert.equal(outcome.reason, ASK.missing);
    assert.equal(outcome.summary, '1. Half up or half even?\n2. Two decimals?');
    const state = reduceState(h.store.events);
    assert.deepEqual(state.question, ASK);
    assert.equal(state.finalTest, null, 'no final test run');
    assert.ok(!h.store.events.some((e) => e.kind === 'checkpoint'));
    const first = h.sim.requests[0]?.body as MessagesRequest;
    assert.ok(toolNames(first).includes('ask_for_clarification'));
    assert.match(JSON.stringify(first.messages[0]), /decide whether the issue is actionable/);
  } finally {
    await h.close();
  }
});

test('triage off: the tool is not offered and the task says nothing of it', async () => {
  const h = await startHarness({
    policy: () => reply().tool('finish', { summary: 'nothing to do' }),
  });
  try {
    await h.run();
    const first = h.sim.requests[0]?.body as MessagesRequest;
    assert.ok(!toolNames(first).includes('ask_for_clarification'));
    assert.doesNotMatch(JSON.stringify(first.messages[0]), /actionable/);
  } finally {
    await h.close();
  }
});

test('a question after a change is refused and the run goes on', async () => {
  const policy: Policy = (_r, ctx) => {
    if (ctx.requestIndex === 0) return reply().tool('bash', { command: "printf 'x\\n' >> src/calc.js" });
    if (ctx.requestIndex === 1) return reply().tool('ask_for_clarification', ASK);
    return reply().tool('finish', { summary: 'changed' });
  };
  const h = await startHarness({ triage: true, policy });
  try {
    const outcome = await h.run();
    assert.notEqual(outcome.outcome, 'needs_info');
    const refused = h.store.events.find(
      (e) => e.kind === 'observation' && e.tool === 'ask_for_clarification',
    );
    assert.ok(refused?.kind === 'observation' && refused.isError);
    assert.match(refused.content, /already changed files/);
    assert.equal(reduceState(h.store.events).question, null);
  } finally {
    await h.close();
  }
});

test('an answer (round_started) reopens the run: the model gets it after its question, and the run goes on to its end', async () => {
  let asked = false;
  const policy: Policy = (request) => {
    if (!asked) {
      asked = true;
      return reply().tool('ask_for_clarification', ASK);
    }
    const last = request.messages.at(-1);
    const text = JSON.stringify(last);
    assert.match(text, /tool_result/, 'the question’s result and the answer are one user message');
    assert.match(text, /untrusted-answer/);
    assert.match(text, /HALF-EVEN/);
    return reply().tool('finish', { summary: 'nothing needed' });
  };
  const h = await startHarness({ triage: true, policy });
  try {
    assert.equal((await h.run()).outcome, 'needs_info');
    await h.store.append({ kind: 'round_started', by: 'otto', text: 'Use HALF-EVEN, two decimals.' });
    const state = reduceState(h.store.events);
    assert.equal(state.outcome, null, 'the answer reopens the run');
    assert.equal(state.question, null);
    assert.equal(state.rounds, 1);
    const outcome = await h.run();
    assert.equal(outcome.outcome, 'no_change');
    assert.equal(h.store.events.filter((e) => e.kind === 'outcome').length, 2);
  } finally {
    await h.close();
  }
});

test('after a question, the rest of its turn does not run: the run waits unchanged', async () => {
  const h = await startHarness({
    triage: true,
    policy: () =>
      reply().tool('ask_for_clarification', ASK).tool('bash', { command: "printf 'x\\n' >> src/calc.js" }),
  });
  try {
    assert.equal((await h.run()).outcome, 'needs_info');
    const edit = h.store.events.find((e) => e.kind === 'observation' && e.tool === 'bash');
    assert.ok(edit?.kind === 'observation' && edit.isError);
    assert.match(edit.content, /waits for the answer/);
    assert.ok(!h.store.events.some((e) => e.kind === 'checkpoint'), 'nothing was changed');
  } finally {
    await h.close();
  }
});
