import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AgentRun } from '../../src/agent/agent-run.js';
import { StopRun } from '../../src/agent/run-stop.js';
import { worstCallUsd, type SpendBudget, type SpendReservation } from '../../src/agent/spend-budget.js';
import { step } from '../../src/agent/step.js';
import { WorkspaceGit } from '../../src/agent/workspace-git.js';
import { reduceState } from '../../src/events/reduce-state.js';
import { DEFAULT_PRICES, findPrice } from '../../src/model/pricing.js';
import { reply } from '../../src/model-sim/index.js';
import { startHarness } from '../support/agent-harness.js';

/**
 * The agent core's side of the monthly limits: each model call is held at its most through the
 * `budget` port before it is made and settled at its real cost after; a refused hold stops the run
 * `budget_exhausted` (limit `monthly_usd`) with the month's spend and the limit in its reason, and
 * no call is made. The port here is an in-memory month (the ledgers behind it are tested on Redis
 * and PostgreSQL in test/events/spend-ledger.test.ts).
 */
test('a refused hold stops the run before the model call, with the month and the limit in its reason', async () => {
  const h = await startHarness({
    policy: (request) =>
      reply()
        .text('Looking.')
        .tool('bash', { command: `echo step-${request.messages.length}` }),
  });
  try {
    const callUsd = worstCallUsd(findPrice(DEFAULT_PRICES, h.model.name), h.store.base.limits);
    // Room for one call at its most: after the first call's (smaller) real cost, none for a second.
    const cap = callUsd * 1.000001;
    let spent = 0;
    const settled: number[] = [];
    const budget: SpendBudget = {
      reserve: (usd): Promise<SpendReservation> => {
        if (spent + usd > cap) {
          return Promise.resolve({
            ok: false,
            refusal: {
              scope: 'owner',
              name: 'acme',
              month: '2026-12',
              spentUsd: spent,
              capUsd: cap,
              source: 'ISSUE_AGENT_MONTHLY_USD',
            },
          });
        }
        spent += usd;
        return Promise.resolve({
          ok: true,
          settle: (cost) => {
            spent += cost - usd;
            settled.push(cost);
            return Promise.resolve();
          },
        });
      },
    };
    const git = await WorkspaceGit.open(h.sandbox);
    const deps = { store: h.store, sandbox: h.sandbox, model: h.model, prices: DEFAULT_PRICES, budget };
    const run = new AgentRun(deps, git, reduceState(h.store.events), Date.now());
    let stop: StopRun | null = null;
    for (let i = 0; i < 10 && stop === null; i++) {
      try {
        await step(run);
      } catch (error) {
        if (!(error instanceof StopRun)) throw error;
        stop = error;
      }
    }
    assert.ok(stop !== null, 'the run stopped');
    assert.equal(stop.stop.outcome, 'budget_exhausted');
    assert.equal(stop.stop.limit, 'monthly_usd');
    assert.match(stop.stop.reason, /monthly spending limit of acme \(\$\d+\.\d\d, ISSUE_AGENT_MONTHLY_USD\)/);
    assert.match(stop.stop.reason, /spent in 2026-12 \(UTC\)/);
    // Each call was held at its most and settled at what the log says it cost; the refused one was never made.
    const costs = h.store.events.flatMap((e) => (e.kind === 'model_response' ? [e.usd] : []));
    assert.deepEqual(settled, costs);
    assert.equal(h.sim.requests.length, costs.length);
    assert.equal(costs.length, 1);
    assert.ok((costs[0] ?? 0) > 0);
    assert.ok(spent <= cap);
  } finally {
    await h.close();
  }
});
