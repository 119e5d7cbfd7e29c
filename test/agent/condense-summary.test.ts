import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildMessages } from '../../src/agent/conversation.js';
import {
  SUMMARY_REQUEST_MARKER as AGENT_MARKER,
  SUMMARY_SECTIONS,
} from '../../src/agent/condense-summary.js';
import { runAgent } from '../../src/agent/run-agent.js';
import { worstCallUsd, type SpendBudget, type SpendReservation } from '../../src/agent/spend-budget.js';
import { reduceState } from '../../src/events/reduce-state.js';
import { FileEventStore } from '../../src/events/file-event-store.js';
import { DEFAULT_PRICES, findPrice } from '../../src/model/pricing.js';
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

/**
 * One owner's month in memory, behind the agent's SpendBudget port (the ledgers behind it are
 * tested on Redis and PostgreSQL in test/events/spend-ledger.test.ts): every hold asked for, and
 * every settle, in order. `beforeHold` may change the month first (another run's spend).
 */
function memoryMonth(capUsd: number, beforeHold: (usd: number, month: { spent: number }) => void = () => {}) {
  const month = { spent: 0, capUsd, asked: [] as number[], refused: [] as number[], settled: [] as number[] };
  const budget: SpendBudget = {
    reserve: (usd): Promise<SpendReservation> => {
      beforeHold(usd, month);
      month.asked.push(usd);
      if (month.spent + usd > month.capUsd) {
        month.refused.push(usd);
        return Promise.resolve({
          ok: false,
          refusal: {
            scope: 'owner',
            name: 'acme',
            month: '2026-12',
            spentUsd: month.spent,
            capUsd: month.capUsd,
            source: 'ISSUE_AGENT_MONTHLY_USD',
          },
        });
      }
      month.spent += usd;
      return Promise.resolve({
        ok: true,
        settle: (cost) => {
          month.spent += cost - usd;
          month.settled.push(cost);
          return Promise.resolve();
        },
      });
    },
  };
  return { month, budget };
}

/** Output limit above the summary's (15% of the context), so a summary hold's size tells it apart. */
const BUDGETED = { ...LIMITS, maxOutputTokens: 16_000 } as const;

test('the summary call is held against the month at its worst cost and settled at its real cost, like a step', async () => {
  const h = await startHarness({
    policy: longRunPolicy(40),
    task: LONG_RUN_TASK,
    files: longRunFiles(),
    testCommand: LONG_RUN_TEST_COMMAND,
    limits: BUDGETED,
  });
  try {
    const { month, budget } = memoryMonth(1e6);
    await runAgent({ store: h.store, sandbox: h.sandbox, model: h.model, prices: DEFAULT_PRICES, budget });
    const events = h.store.events;
    const made = condensations(events);
    assert.ok(made.length >= 2, `got ${made.length}`);
    assert.ok(made.every((c) => c.method === 'model' && c.call !== undefined && c.call.usd > 0));
    // Every model call, steps' and summaries', was held and then settled at what the log says it
    // cost, in the order of the log: the summaries' cost is in the month's spend.
    const costs = events.flatMap((e) =>
      e.kind === 'model_response'
        ? [e.usd]
        : e.kind === 'condensation' && e.call !== undefined
          ? [e.call.usd]
          : [],
    );
    assert.deepEqual(month.settled, costs);
    assert.equal(h.sim.requests.length, costs.length);
    assert.ok(Math.abs(month.spent - reduceState(events).usd) < 1e-9, "the month holds the run's cost");
    // A summary is held at its own worst: a whole context in, the summary's output limit out.
    const price = findPrice(DEFAULT_PRICES, h.model.name);
    const summaryWorst = worstCallUsd(price, { contextTokens: LIMITS.contextTokens, maxOutputTokens: 9_000 });
    const stepWorst = worstCallUsd(price, h.store.base.limits);
    assert.ok(summaryWorst < stepWorst);
    assert.equal(month.asked.filter((u) => u === summaryWorst).length, made.length);
    assert.equal(month.asked.filter((u) => u === stepWorst).length, costs.length - made.length);
  } finally {
    await h.close();
  }
});

test('a month with no room left for the summary call: no call, the line list with the refusal, then the run stops at the limit', async () => {
  const h = await startHarness({
    policy: longRunPolicy(40),
    task: LONG_RUN_TASK,
    files: longRunFiles(),
    testCommand: LONG_RUN_TEST_COMMAND,
    limits: BUDGETED,
  });
  try {
    const price = findPrice(DEFAULT_PRICES, h.model.name);
    const summaryWorst = worstCallUsd(price, { contextTokens: LIMITS.contextTokens, maxOutputTokens: 9_000 });
    // Other runs spend the rest of the month just before the first summary call is held.
    const { month, budget } = memoryMonth(50, (usd, m) => {
      if (usd === summaryWorst) m.spent = Math.max(m.spent, 50 - summaryWorst / 2);
    });
    const outcome = await runAgent({
      store: h.store,
      sandbox: h.sandbox,
      model: h.model,
      prices: DEFAULT_PRICES,
      budget,
    });
    const made = condensations(h.store.events);
    assert.equal(made.length, 1);
    const [c] = made;
    assert.ok(c !== undefined);
    assert.equal(c.method, 'lines');
    assert.equal(c.call, undefined);
    assert.match(
      c.fallback ?? '',
      /^no summary call was made: the monthly spending limit of acme \(\$50\.00, ISSUE_AGENT_MONTHLY_USD\) was reached/,
    );
    assert.match(c.summary, /^\[harness\] Context condensed: \d+ earlier turns are summarized here/);
    assert.ok(!h.sim.requests.some((r) => isSummaryRequest(r.body as MessagesRequest)), 'no summary call');
    assert.deepEqual(month.refused.slice(0, 1), [summaryWorst]);
    // The next step's hold is refused too: the run stops at the month's limit, no call made past it.
    assert.equal(outcome.outcome, 'budget_exhausted');
    assert.equal(outcome.limit, 'monthly_usd');
    const turns = h.store.events.filter((e) => e.kind === 'model_response').length;
    assert.equal(h.sim.requests.length, turns);
    assert.equal(month.settled.length, turns);
  } finally {
    await h.close();
  }
});
