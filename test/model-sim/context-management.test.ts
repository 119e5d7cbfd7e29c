import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import {
  CLEARED_TOOL_RESULT,
  CONTEXT_MANAGEMENT_BETA,
  reply,
  startModelSimulator,
  type MessagesRequest,
  type ModelSimulator,
} from '../../src/model-sim/index.js';

/** The simulator's server-side context management, through the real SDK's beta surface over HTTP. */

const KEY = 'sk-ant-context';
const TOOLS = [{ name: 'bash', description: 'run', input_schema: { type: 'object' as const } }];

/** A conversation of `n` bash calls, each with a result of about 1,000 tokens. */
function history(n: number): Anthropic.Beta.BetaMessageParam[] {
  const out: Anthropic.Beta.BetaMessageParam[] = [{ role: 'user', content: 'Fix it' }];
  for (let i = 0; i < n; i++) {
    out.push({
      role: 'assistant',
      content: [{ type: 'tool_use', id: `t${i}`, name: 'bash', input: { command: `ls ${i}` } }],
    });
    out.push({
      role: 'user',
      content: [{ type: 'tool_result', tool_use_id: `t${i}`, content: `result ${i} `.repeat(400) }],
    });
  }
  return out;
}

const edit = (extra: Record<string, unknown> = {}) => ({
  edits: [
    {
      type: 'clear_tool_uses_20250919' as const,
      trigger: { type: 'input_tokens' as const, value: 3000 },
      keep: { type: 'tool_uses' as const, value: 2 },
      ...extra,
    },
  ],
});

describe('context management in the model simulator', () => {
  let sim: ModelSimulator;
  let client: Anthropic;
  const seen: MessagesRequest[] = [];
  before(async () => {
    sim = await startModelSimulator({
      policy: (request) => {
        seen.push(request);
        return reply().text('ok');
      },
      apiKey: KEY,
    });
    client = new Anthropic({ apiKey: KEY, baseURL: sim.url, maxRetries: 0 });
  });
  after(() => sim.close());

  const base = { model: 'claude-sonnet-4-5', max_tokens: 512, tools: TOOLS };

  test('past the trigger: all but the newest `keep` results cleared before the model reads them, applied_edits reported, input tokens of the cleared prompt (plain JSON)', async () => {
    const full = await client.beta.messages.create({ ...base, messages: history(8) });
    const m = await client.beta.messages.create({
      ...base,
      messages: history(8),
      betas: [CONTEXT_MANAGEMENT_BETA],
      context_management: edit(),
    });
    const applied = m.context_management?.applied_edits ?? [];
    assert.equal(applied.length, 1);
    const [first] = applied;
    assert.ok(first !== undefined && first.type === 'clear_tool_uses_20250919');
    assert.equal(first.cleared_tool_uses, 6);
    const cleared = first.cleared_input_tokens;
    assert.ok(cleared > 4000, String(cleared));
    assert.equal(m.usage.input_tokens, full.usage.input_tokens - cleared);
    const read = seen.at(-1);
    const results = (read?.messages ?? []).flatMap((msg) =>
      typeof msg.content === 'string' ? [] : msg.content.filter((b) => b.type === 'tool_result'),
    );
    assert.deepEqual(
      results.map((b) =>
        b.type === 'tool_result' && b.content === CLEARED_TOOL_RESULT ? 'cleared' : 'kept',
      ),
      ['cleared', 'cleared', 'cleared', 'cleared', 'cleared', 'cleared', 'kept', 'kept'],
    );
  });

  test('streamed: the applied edits come with the final message_delta, and the SDK keeps them', async () => {
    const stream = client.beta.messages.stream({
      ...base,
      messages: history(8),
      betas: [CONTEXT_MANAGEMENT_BETA],
      context_management: edit(),
    });
    const m = await stream.finalMessage();
    assert.equal(m.context_management?.applied_edits.length, 1);
  });

  test('under the trigger, or freeing less than clear_at_least: nothing applied, an empty list', async () => {
    for (const [messages, extra] of [
      [history(2), {}],
      [history(8), { clear_at_least: { type: 'input_tokens', value: 100_000 } }],
    ] as const) {
      const m = await client.beta.messages.create({
        ...base,
        messages,
        betas: [CONTEXT_MANAGEMENT_BETA],
        context_management: edit(extra),
      });
      assert.deepEqual(m.context_management?.applied_edits, []);
    }
  });

  test('400 as the API: an unknown edit type, a malformed keep, and context_management without the beta header', async () => {
    const refused = async (params: Record<string, unknown>, pattern: RegExp): Promise<void> => {
      await assert.rejects(
        client.beta.messages.create({
          ...base,
          messages: history(1),
          ...params,
        } as Anthropic.Beta.MessageCreateParamsNonStreaming),
        (e: unknown) => e instanceof Anthropic.BadRequestError && pattern.test(e.message),
      );
    };
    await refused(
      {
        betas: [CONTEXT_MANAGEMENT_BETA],
        context_management: { edits: [{ type: 'clear_everything_20990101' }] },
      },
      /context_management\.edits\.0: Input tag 'clear_everything_20990101'/,
    );
    await refused(
      {
        betas: [CONTEXT_MANAGEMENT_BETA],
        context_management: edit({ keep: { type: 'tool_uses', value: -1 } }),
      },
      /context_management\.edits\.0\.keep\.value/,
    );
    await refused({ context_management: edit() }, /context_management: Extra inputs are not permitted/);
  });
});
