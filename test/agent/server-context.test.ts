import assert from 'node:assert/strict';
import { test } from 'node:test';
import { serverClearing } from '../../src/agent/prepare-request.js';
import { ConfigError, readAgentEnv } from '../../src/config/agent-env.js';
import { reduceState } from '../../src/events/reduce-state.js';
import type { EventOf, ModelSetup } from '../../src/events/schema.js';
import { renderTrajectory } from '../../src/cli/render-trajectory.js';
import {
  CLEARED_TOOL_RESULT,
  CONTEXT_MANAGEMENT_BETA,
  isSummaryRequest,
  type MessagesRequest,
} from '../../src/model-sim/index.js';
import { startHarness } from '../support/agent-harness.js';
import { LONG_RUN_TASK, LONG_RUN_TEST_COMMAND, longRunFiles, longRunPolicy } from '../support/long-run.js';

/**
 * ISSUE_AGENT_CONDENSER=server: the harness asks the API to clear old tool results itself
 * (`context_management`, clear_tool_uses_20250919) and sends its log whole; the simulator clears
 * what the model reads and bills, and says so in `context_management.applied_edits`. The real
 * SDK over loopback, the local sandbox.
 */

const CONTEXT = 60_000;
const LIMITS = {
  contextTokens: CONTEXT,
  maxSteps: 100,
  maxTokens: 1e9,
  maxUsd: 1e6,
  condenser: 'server',
} as const;

/** What the model read per turn (input + cache reads + cache writes), in request order. */
function seenPrompts(
  requests: readonly {
    usage: {
      input_tokens: number;
      cache_read_input_tokens?: number | null;
      cache_creation_input_tokens?: number | null;
    } | null;
  }[],
): number[] {
  return requests.flatMap((r) => {
    const u = r.usage;
    return u === null
      ? []
      : [u.input_tokens + (u.cache_read_input_tokens ?? 0) + (u.cache_creation_input_tokens ?? 0)];
  });
}

async function longServerRun(steps: number, modelSetup?: ModelSetup) {
  const h = await startHarness({
    policy: longRunPolicy(steps),
    task: LONG_RUN_TASK,
    files: longRunFiles(),
    testCommand: LONG_RUN_TEST_COMMAND,
    limits: LIMITS,
    ...(modelSetup === undefined ? {} : { modelSetup }),
  });
  await h.run();
  return h;
}

for (const setup of [undefined, { tools: 'native', thinkingBudget: 2048 }] as const) {
  const name = setup === undefined ? 'schema tools' : 'native tools and thinking';
  test(`condenser server (${name}): the API clears old tool results, the run records it, and the prompt per step stops growing`, async () => {
    const h = await longServerRun(45, setup);
    try {
      const events = h.store.events;
      const state = reduceState(events);
      assert.equal(state.outcome?.outcome === 'failed', false, JSON.stringify(state.outcome));
      const clearing = serverClearing(CONTEXT);
      // Every turn asked for the edit, with the beta header (and interleaved thinking's, when it thinks).
      const turns = h.sim.requests.filter((r) => r.outcome === 'reply');
      assert.ok(turns.length >= 45);
      for (const r of turns) {
        const body = r.body as { context_management?: { edits: unknown[] } };
        assert.deepEqual(body.context_management?.edits, [
          {
            type: 'clear_tool_uses_20250919',
            trigger: { type: 'input_tokens', value: clearing.triggerTokens },
            keep: { type: 'tool_uses', value: clearing.keepToolUses },
            clear_at_least: { type: 'input_tokens', value: clearing.clearAtLeastTokens },
          },
        ]);
        const beta = String(r.headers['anthropic-beta'] ?? '');
        assert.ok(beta.split(',').includes(CONTEXT_MANAGEMENT_BETA), beta);
        if (setup !== undefined) assert.ok(beta.includes('interleaved-thinking-2025-05-14'), beta);
      }
      // The server applied clearing, and each turn it cleared says so in its own model_response
      // event: one append, so no crash can record the turn without its edits.
      const applied = turns.filter((r) => (r.contextManagement?.applied_edits.length ?? 0) > 0);
      assert.ok(applied.length >= 3, `clearing applied on ${applied.length} turns`);
      assert.equal(events.filter((e) => e.kind === 'context_edited').length, 0);
      const edited = events.filter(
        (e): e is EventOf<'model_response'> => e.kind === 'model_response' && e.contextEdits !== undefined,
      );
      assert.deepEqual(
        edited.map((e) => e.contextEdits?.length),
        applied.map((r) => r.contextManagement?.applied_edits.length),
      );
      for (const e of edited) {
        const [first] = e.contextEdits ?? [];
        assert.ok(first !== undefined);
        assert.equal(first.type, 'clear_tool_uses_20250919');
        assert.ok(
          (first.clearedToolUses ?? 0) > 0 && first.clearedInputTokens >= clearing.clearAtLeastTokens,
        );
      }
      // The log keeps every result whole: nothing the harness records is the placeholder.
      assert.ok(!events.some((e) => e.kind === 'observation' && e.content.includes(CLEARED_TOOL_RESULT)));
      // The harness did not condense on its own: what the API leaves stayed under the budget.
      assert.equal(events.filter((e) => e.kind === 'condensation').length, 0);

      // Input tokens per step stop growing: once clearing starts, no turn's prompt passes the
      // trigger by more than a few results, and the largest before the first clearing bounds them.
      const prompts = seenPrompts(turns);
      const first = turns.findIndex((r) => (r.contextManagement?.applied_edits.length ?? 0) > 0);
      assert.ok(first > 3, `first clearing at turn ${first}`);
      const largestBefore = Math.max(...prompts.slice(0, first));
      const after = prompts.slice(first);
      assert.ok(
        Math.max(...after) <= largestBefore * 1.1,
        `after ${Math.max(...after)} vs before ${largestBefore}`,
      );
      // The harness sends its results whole; the clearing is the server's alone, and the log it
      // sends kept growing past what the model read.
      assert.ok(turns.every((r) => !JSON.stringify(r.body).includes(CLEARED_TOOL_RESULT)));
      const sent = JSON.stringify((turns.at(-1)?.body as { messages: unknown[] }).messages).length / 4;
      assert.ok(sent > Math.max(...after) * 1.3, `sent ${sent} vs read ${Math.max(...after)}`);
      // The recorded usage is what the API billed for the cleared prompt: the run's cost is the turns'.
      const responses = events.filter((e): e is EventOf<'model_response'> => e.kind === 'model_response');
      assert.deepEqual(
        responses.map((e) => e.usage.inputTokens + e.usage.cacheReadTokens + e.usage.cacheWriteTokens),
        prompts,
      );
      assert.ok(Math.abs(state.usd - responses.reduce((n, e) => n + e.usd, 0)) < 1e-9);
      assert.match(renderTrajectory(h.store.base, events), /The API cleared \d+ old tool results/);
    } finally {
      await h.close();
    }
  });
}

test('condenser server, last resort: when even the cleared prompt passes the budget, the harness condenses with lines, no summary call', async () => {
  const h = await startHarness({
    policy: longRunPolicy(30),
    task: LONG_RUN_TASK,
    files: longRunFiles(),
    testCommand: LONG_RUN_TEST_COMMAND,
    limits: { ...LIMITS, contextTokens: 20_000 },
  });
  try {
    await h.run();
    const condensed = h.store.events.filter((e): e is EventOf<'condensation'> => e.kind === 'condensation');
    assert.ok(condensed.length >= 1);
    assert.ok(
      condensed.every((c) => c.method === 'lines' && c.call === undefined && c.fallback === undefined),
    );
    assert.ok(!h.sim.requests.some((r) => isSummaryRequest(r.body as MessagesRequest)));
    assert.equal(reduceState(h.store.events).steps, 31);
  } finally {
    await h.close();
  }
});

test('condenser server: refused on Bedrock and Vertex, with the setting named', () => {
  assert.equal(readAgentEnv({ ISSUE_AGENT_CONDENSER: 'server' }).limits.condenser, 'server');
  for (const provider of [
    { ISSUE_AGENT_MODEL_PROVIDER: 'bedrock', AWS_REGION: 'us-east-1' },
    { ISSUE_AGENT_MODEL_PROVIDER: 'vertex', CLOUD_ML_REGION: 'us-east5', ANTHROPIC_VERTEX_PROJECT_ID: 'p' },
  ]) {
    assert.throws(
      () => readAgentEnv({ ...provider, ISSUE_AGENT_CONDENSER: 'server' }),
      (e: unknown) =>
        e instanceof ConfigError && /ISSUE_AGENT_CONDENSER=server needs Anthropic's API/.test(e.message),
    );
  }
  assert.throws(() => readAgentEnv({ ISSUE_AGENT_CONDENSER: 'clever' }), /summary, lines or server/);
});
