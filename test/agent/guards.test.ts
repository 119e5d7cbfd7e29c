import assert from 'node:assert/strict';
import { test } from 'node:test';
import { reduceState } from '../../src/events/reduce-state.js';
import type { EventOf } from '../../src/events/schema.js';
import { answeringSummaries, hang, reply, type Policy } from '../../src/model-sim/index.js';
import { startHarness } from '../support/agent-harness.js';

const always =
  (make: () => ReturnType<typeof reply>): Policy =>
  () =>
    make();

test('repeating the same failing action ends stuck, after a warning to the model', async () => {
  const h = await startHarness({
    policy: always(() => reply().text('Try again.').tool('bash', { command: 'ls does-not-exist' })),
  });
  try {
    const outcome = await h.run();
    assert.equal(outcome.outcome, 'stuck');
    assert.match(outcome.reason, /repeated 4 times/);
    const warnings = h.store.events.filter((e): e is EventOf<'warning'> => e.kind === 'warning');
    assert.equal(warnings[0]?.code, 'stuck_repeat');
    // The warning reached the model in the request after it was raised.
    assert.ok(
      h.sim.requests.some((r) => JSON.stringify(r.body).includes('[harness] You have run the same action')),
    );
  } finally {
    await h.close();
  }
});

test('alternating between two actions ends stuck', async () => {
  const h = await startHarness({
    policy: (_req, ctx) =>
      reply().tool('bash', { command: ctx.requestIndex % 2 === 0 ? 'echo a' : 'echo b' }),
  });
  try {
    const outcome = await h.run();
    assert.equal(outcome.outcome, 'stuck');
    assert.match(outcome.reason, /alternated/);
  } finally {
    await h.close();
  }
});

const budgets = [
  { limit: 'steps', limits: { maxSteps: 3 } },
  { limit: 'tokens', limits: { maxTokens: 4000 } },
  { limit: 'usd', limits: { maxUsd: 0.005 } },
] as const;

for (const b of budgets) {
  test(`the ${b.limit} budget ends budget_exhausted naming the limit`, async () => {
    const h = await startHarness({
      policy: (_req, ctx) =>
        reply()
          .text('Looking around.')
          .tool('bash', { command: `echo step ${ctx.requestIndex}` }),
      limits: b.limits,
    });
    try {
      const outcome = await h.run();
      assert.equal(outcome.outcome, 'budget_exhausted');
      assert.equal(outcome.limit, b.limit);
      if (b.limit === 'steps') assert.equal(reduceState(h.store.events).steps, 3);
    } finally {
      await h.close();
    }
  });
}

test('the wall-time budget ends a run whose model call hangs', async () => {
  const h = await startHarness({ policy: () => hang(), limits: { maxWallMs: 3000 } });
  try {
    const outcome = await h.run();
    assert.equal(outcome.outcome, 'budget_exhausted');
    assert.equal(outcome.limit, 'wall_time');
  } finally {
    await h.close();
  }
});

test('a 200-step run keeps every request under the context budget', async () => {
  const contextTokens = 12_000;
  const h = await startHarness({
    policy: answeringSummaries((_req, ctx) =>
      ctx.requestIndex >= 200
        ? reply().tool('finish', { summary: 'done' })
        : reply()
            .text(`Step ${ctx.requestIndex}: reading more.`)
            .tool('bash', { command: `seq 1 300 | sed 's/^/line ${ctx.requestIndex} /'` }),
    ),
    limits: { contextTokens, maxSteps: 250, maxTokens: 100_000_000, maxUsd: 1000 },
  });
  try {
    const outcome = await h.run();
    assert.equal(reduceState(h.store.events).steps, 201);
    assert.notEqual(outcome.outcome, 'budget_exhausted');
    const condensations = h.store.events.filter((e) => e.kind === 'condensation');
    assert.ok(condensations.length >= 2, `expected repeated condensation, got ${condensations.length}`);
    for (const [i, r] of h.sim.requests.entries()) {
      const u = r.usage;
      assert.ok(u !== null);
      const input = u.input_tokens + (u.cache_read_input_tokens ?? 0) + (u.cache_creation_input_tokens ?? 0);
      assert.ok(input < contextTokens, `request ${i} had ${input} input tokens`);
    }
  } finally {
    await h.close();
  }
});

test('a command printing 50 MB is truncated for the model, kept in full on disk, and memory stays bounded', async () => {
  const h = await startHarness({
    policy: (_req, ctx) =>
      ctx.requestIndex === 0
        ? reply().tool('bash', { command: "head -c 50000000 /dev/zero | tr '\\0' x" })
        : ctx.requestIndex === 1
          ? reply().tool('bash', { command: 'echo still-going' })
          : reply().tool('finish', { summary: 'done' }),
  });
  try {
    const before = process.memoryUsage().rss;
    await h.run();
    const grown = process.memoryUsage().rss - before;
    assert.ok(grown < 200 * 1024 * 1024, `rss grew by ${Math.round(grown / 1e6)} MB`);
    const obs = h.store.events.filter((e): e is EventOf<'observation'> => e.kind === 'observation');
    assert.ok((obs[0]?.content.length ?? Infinity) < 40_000);
    assert.ok(obs[0]?.fullContentFile !== undefined, 'the full output is attached to the trajectory');
    assert.match(obs[1]?.content ?? '', /still-going/);
    const second = JSON.stringify(h.sim.requests[1]?.body ?? '').length;
    assert.ok(second < 100_000, `second request was ${second} bytes`);
  } finally {
    await h.close();
  }
});
