import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildMessages } from '../../src/agent/conversation.js';
import {
  SUMMARY_REQUEST_MARKER as AGENT_MARKER,
  SUMMARY_SECTIONS,
} from '../../src/agent/condense-summary.js';
import { reduceState } from '../../src/events/reduce-state.js';
import { FileEventStore } from '../../src/events/file-event-store.js';
import {
  httpError,
  isSummaryRequest,
  reply,
  SUMMARY_REQUEST_MARKER as SIM_MARKER,
  type MessagesRequest,
  type Policy,
} from '../../src/model-sim/index.js';
import { startHarness } from '../support/agent-harness.js';
import {
  changedBefore,
  costPerStep,
  FAILING_TEST,
  LONG_RUN_TASK,
  LONG_RUN_TEST_COMMAND,
  longRunFiles,
  longRunPolicy,
  type Condensation,
} from '../support/long-run.js';

/**
 * The condenser that remembers: past its budget the prompt's older turns are replaced by a summary
 * the model writes in a call of its own (recorded as the condensation event, its cost counted), and
 * the harness's line per action when that call fails. Runs on the local sandbox against the model
 * simulator over loopback, with the real SDK.
 */

const LIMITS = { contextTokens: 60_000, maxSteps: 250, maxTokens: 1e9, maxUsd: 1e6 } as const;

const condensations = (events: readonly { kind: string }[]): Condensation[] =>
  events.filter((e): e is Condensation => e.kind === 'condensation');

test('the agent and the simulator agree on how a summary request begins', () => {
  assert.equal(AGENT_MARKER, SIM_MARKER);
});

test('a 200-step run: model-written summaries that keep the task, the changed files and the failing test; cost per step stops growing', async () => {
  const h = await startHarness({
    policy: longRunPolicy(200),
    task: LONG_RUN_TASK,
    files: longRunFiles(),
    testCommand: LONG_RUN_TEST_COMMAND,
    limits: LIMITS,
  });
  try {
    await h.run();
    const events = h.store.events;
    const state = reduceState(events);
    assert.equal(state.steps, 201, 'every scripted turn ran, summary requests took none');
    const made = condensations(events);
    assert.ok(made.length >= 5, `expected repeated condensation, got ${made.length}`);
    const summaryRequests = h.sim.requests.filter((r) => isSummaryRequest(r.body as MessagesRequest));
    assert.equal(summaryRequests.length, made.length, 'one summary call per condensation');
    for (const c of made) {
      assert.equal(c.method, 'model', `condensation ${c.id}: ${c.fallback ?? ''}`);
      assert.ok(c.call !== undefined && c.call.usd > 0);
      for (const s of SUMMARY_SECTIONS) assert.match(c.summary, new RegExp(`## ${s}`));
      assert.ok(c.summary.includes(LONG_RUN_TASK.title), `condensation ${c.id} names the task`);
      assert.ok(c.summary.includes(FAILING_TEST), `condensation ${c.id} names the failing test`);
      for (const path of changedBefore(events, c.id))
        assert.ok(c.summary.includes(`\`${path}\``), `condensation ${c.id} names ${path}`);
    }
    assert.ok(
      changedBefore(events, made.at(-1)?.id ?? 0).length === 3,
      'the last summary came after all three edits',
    );

    // The summary request shares the turn's cached prefix: it reads most of its input from cache.
    for (const r of summaryRequests) {
      const u = r.usage;
      assert.ok(u !== null);
      const total = u.input_tokens + (u.cache_read_input_tokens ?? 0) + (u.cache_creation_input_tokens ?? 0);
      assert.ok((u.cache_read_input_tokens ?? 0) > total * 0.7, `summary call read ${JSON.stringify(u)}`);
    }

    // The summary calls' cost is the run's cost.
    const turns = events.flatMap((e) => (e.kind === 'model_response' ? [e.usd] : []));
    const calls = made.reduce((n, c) => n + (c.call?.usd ?? 0), 0);
    assert.ok(Math.abs(state.usd - (turns.reduce((a, b) => a + b, 0) + calls)) < 1e-9);

    // Cost per step stops growing after the first condensation: no step after it costs more than
    // the dearest step before it, and the last 50 steps cost no more on average than the 50 after it.
    // Cost per step stops growing after the first condensation: before it, each step costs more
    // than the one before (the prompt grows by each observation); after it, the prompt of a step
    // never passes the size it had when the first condensation came, and the last 50 steps cost no
    // more on average than the 50 after the first condensation (summary calls included).
    const perStep = costPerStep(events);
    const firstAt = perStep.findIndex((s) => s.condensed);
    assert.ok(firstAt > 5 && firstAt < 100, `first condensation before step ${firstAt}`);
    const prompts = h.sim.requests
      .filter((r) => r.usage !== null && !isSummaryRequest(r.body as MessagesRequest))
      .map((r) => {
        const u = r.usage;
        return u === null
          ? 0
          : u.input_tokens + (u.cache_read_input_tokens ?? 0) + (u.cache_creation_input_tokens ?? 0);
      });
    assert.ok((prompts[firstAt - 1] ?? 0) > 2 * (prompts[0] ?? Infinity), 'the prompt grew before');
    const largestBefore = Math.max(...prompts.slice(0, firstAt));
    const largestAfter = Math.max(...prompts.slice(firstAt));
    assert.ok(largestAfter <= largestBefore * 1.1, `prompt after ${largestAfter} vs before ${largestBefore}`);
    const mean = (xs: readonly { usd: number }[]): number => xs.reduce((a, b) => a + b.usd, 0) / xs.length;
    const early = mean(perStep.slice(firstAt, firstAt + 50));
    const late = mean(perStep.slice(-50));
    assert.ok(
      late <= early * 1.15,
      `mean of the last 50 steps ${late} vs the 50 after condensing ${early}: ${perStep.map((x) => x.usd.toFixed(4)).join(' ')}`,
    );

    // Resume rebuilds the same conversation from the log, without asking for the summary again.
    const reopened = FileEventStore.open(h.store.location);
    assert.deepEqual(buildMessages(reopened.base, reopened.events), buildMessages(h.store.base, events));
  } finally {
    await h.close();
  }
});

test('a summary call that fails, or answers without the sections, falls back to the line list and says why', async () => {
  const script = longRunPolicy(40);
  let summaries = 0;
  const policy: Policy = (request, ctx) => {
    if (!isSummaryRequest(request)) return script(request, ctx);
    summaries += 1;
    return summaries === 1
      ? httpError(400, { message: 'summaries are off today' })
      : reply().text('All good.');
  };
  const h = await startHarness({
    policy,
    task: LONG_RUN_TASK,
    files: longRunFiles(),
    testCommand: LONG_RUN_TEST_COMMAND,
    limits: LIMITS,
  });
  try {
    await h.run();
    const made = condensations(h.store.events);
    assert.ok(made.length >= 2, `got ${made.length}`);
    const [first, second] = made;
    assert.ok(first !== undefined && second !== undefined);
    assert.equal(first.method, 'lines');
    assert.match(first.fallback ?? '', /the summary call failed: .*summaries are off today/);
    assert.equal(first.call, undefined, 'a failed call cost nothing');
    assert.equal(second.method, 'lines');
    assert.match(second.fallback ?? '', /lacks the section\(s\): Task understanding/);
    assert.ok(second.call !== undefined && second.call.usd > 0, 'an unusable answer was still paid for');
    assert.match(second.summary, /^\[harness\] Context condensed: \d+ earlier turns are summarized here/);
  } finally {
    await h.close();
  }
});

test('ISSUE_AGENT_CONDENSER=lines: no summary call is made', async () => {
  const h = await startHarness({
    policy: longRunPolicy(30),
    task: LONG_RUN_TASK,
    files: longRunFiles(),
    testCommand: LONG_RUN_TEST_COMMAND,
    limits: { ...LIMITS, condenser: 'lines' },
  });
  try {
    await h.run();
    const made = condensations(h.store.events);
    assert.ok(made.length >= 1);
    assert.ok(made.every((c) => c.method === 'lines' && c.call === undefined && c.fallback === undefined));
    assert.ok(!h.sim.requests.some((r) => isSummaryRequest(r.body as MessagesRequest)));
  } finally {
    await h.close();
  }
});
