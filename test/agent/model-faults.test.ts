import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { EventOf } from '../../src/events/schema.js';
import { httpError, oracle, reply } from '../../src/model-sim/index.js';
import { startHarness } from '../support/agent-harness.js';
import { makeFixtureRepo } from '../support/fixture-repo.js';

const patch = (() => {
  const r = makeFixtureRepo('node-calc');
  r.cleanup();
  return r.patch;
})();

test('529 twice then success: the run completes, each retry is in the trajectory', async () => {
  const h = await startHarness({ policy: oracle(patch) });
  try {
    h.sim.injectFaults(httpError(529), httpError(529, { retryAfterSeconds: 0 }));
    const outcome = await h.run();
    assert.equal(outcome.outcome, 'resolved');
    const retries = h.store.events.filter((e): e is EventOf<'model_retry'> => e.kind === 'model_retry');
    assert.equal(retries.length, 2);
    assert.equal(retries[0]?.status, 529);
    assert.equal(h.sim.requests.filter((r) => r.status === 529).length, 2);
  } finally {
    await h.close();
  }
});

test('401 ends failed with a model-auth cause and a clear message, without retrying', async () => {
  const h = await startHarness({ policy: oracle(patch) });
  try {
    h.sim.injectFaults(httpError(401));
    const outcome = await h.run();
    assert.equal(outcome.outcome, 'failed');
    assert.equal(outcome.cause, 'model_auth');
    assert.match(outcome.reason, /rejected the API key \(401\)/);
    assert.equal(h.sim.requests.length, 1);
  } finally {
    await h.close();
  }
});

test('malformed tool input and an unknown tool become error observations and the loop goes on', async () => {
  const h = await startHarness({
    policy: (_req, ctx) =>
      [
        reply().tool('editor', { command: 'view' }),
        reply().tool('launch_rockets', { now: true }),
        reply().tool('bash', { command: 'echo recovered' }),
        reply().tool('finish', { summary: 'nothing to do' }),
      ].at(ctx.requestIndex) ?? reply().text('done'),
  });
  try {
    const outcome = await h.run();
    const obs = h.store.events.filter((e): e is EventOf<'observation'> => e.kind === 'observation');
    assert.equal(obs[0]?.isError, true);
    assert.match(obs[0].content, /Invalid input for tool "editor"[\s\S]*path/);
    assert.equal(obs[1]?.isError, true);
    assert.match(
      obs[1].content,
      /Unknown tool "launch_rockets". Available tools: bash, editor, search, run_tests, delegate, finish/,
    );
    assert.match(obs[2]?.content ?? '', /recovered/);
    assert.equal(outcome.outcome, 'no_change');
    // The error went back to the model as an is_error tool_result.
    assert.ok(JSON.stringify(h.sim.requests[1]?.body).includes('"is_error":true'));
  } finally {
    await h.close();
  }
});

test('a lazy placeholder edit is refused with an observation the model can act on', async () => {
  const h = await startHarness({
    policy: (_req, ctx) =>
      [
        reply().tool('editor', {
          command: 'str_replace',
          path: 'src/calc.js',
          old_str: 'export',
          new_str: '// ... rest of code ...\nexport',
        }),
        reply().tool('finish', { summary: 'gave up' }),
      ].at(ctx.requestIndex) ?? reply().text('done'),
  });
  try {
    await h.run();
    const obs = h.store.events.find((e): e is EventOf<'observation'> => e.kind === 'observation');
    assert.equal(obs?.isError, true);
    assert.match(obs.content, /placeholder/);
  } finally {
    await h.close();
  }
});
