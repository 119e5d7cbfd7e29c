import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import {
  editorInputOf,
  nativeBashTool,
  nativeEditorTool,
  withNativeTools,
} from '../../src/agent/tools/native.js';
import { defaultTools } from '../../src/agent/tools/index.js';
import { DEFAULT_THINKING_BUDGET, resolveModelSetup } from '../../src/model/capabilities.js';
import { ConfigError, readAgentEnv } from '../../src/config/agent-env.js';
import { reply, startModelSimulator, type ModelSimulator } from '../../src/model-sim/index.js';

const KEY = 'sk-ant-thinking';
const TOOLS = [
  { type: 'text_editor_20250728', name: 'str_replace_based_edit_tool', max_characters: 16000 },
  { type: 'bash_20250124', name: 'bash' },
] as const;

describe('native tools and thinking against the simulator', () => {
  let sim: ModelSimulator;
  let client: Anthropic;
  before(async () => {
    sim = await startModelSimulator({
      policy: () => reply().text('Looking.').tool('editor', { command: 'view', path: 'a.txt' }),
      apiKey: KEY,
    });
    client = new Anthropic({ apiKey: KEY, baseURL: sim.url, maxRetries: 0 });
  });
  after(() => sim.close());

  const user = { role: 'user' as const, content: 'Fix it' };
  const thinking = { type: 'enabled' as const, budget_tokens: 2048 };

  test('a thinking turn: signed thinking first, the editor call under the declared native name, thinking tokens reported', async () => {
    const m = await client.messages.create({
      model: 'm',
      max_tokens: 4096,
      tools: [...TOOLS],
      thinking,
      messages: [user],
    });
    assert.equal(m.content[0]?.type, 'thinking');
    const use = m.content.find((b) => b.type === 'tool_use');
    assert.ok(use?.type === 'tool_use');
    assert.equal(use.name, 'str_replace_based_edit_tool');
    assert.ok((m.usage.output_tokens_details?.thinking_tokens ?? 0) > 0);
    // Continued with the blocks as they came: accepted.
    const next = await client.messages.create({
      model: 'm',
      max_tokens: 4096,
      tools: [...TOOLS],
      thinking,
      messages: [
        user,
        { role: 'assistant', content: m.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'ok' }] },
      ],
    });
    assert.equal(next.content[0]?.type, 'thinking');
  });

  test('a changed or missing thinking block on continue is a 400 invalid_request_error, as at the API', async () => {
    const m = await client.messages.create({
      model: 'm',
      max_tokens: 4096,
      tools: [...TOOLS],
      thinking,
      messages: [user],
    });
    const use = m.content.find((b) => b.type === 'tool_use');
    const result = {
      role: 'user' as const,
      content: [{ type: 'tool_result' as const, tool_use_id: use?.id ?? '', content: 'ok' }],
    };
    const changed = m.content.map((b) =>
      b.type === 'thinking' ? { ...b, thinking: `${b.thinking} (edited)` } : b,
    );
    const dropped = m.content.filter((b) => b.type !== 'thinking');
    for (const [content, message] of [
      [changed, /Invalid `signature` in `thinking` block/],
      [dropped, /must start with a thinking block/],
    ] as const) {
      await assert.rejects(
        client.messages.create({
          model: 'm',
          max_tokens: 4096,
          tools: [...TOOLS],
          thinking,
          messages: [user, { role: 'assistant', content }, result],
        }),
        (e: unknown) =>
          e instanceof Anthropic.BadRequestError &&
          (e.error as { error: { type: string } }).error.type === 'invalid_request_error' &&
          message.test(e.message),
      );
    }
  });

  test('what the API refuses: a native tool under another name, an unknown type, a small budget, a budget past max_tokens, temperature, forced tool use', async () => {
    const cases: [Record<string, unknown>, RegExp, Record<string, string>?][] = [
      [
        { tools: [{ type: 'text_editor_20250728', name: 'editor' }] },
        /tools\.0\.name: Input should be 'str_replace_based_edit_tool'/,
      ],
      [{ tools: [{ type: 'text_editor_20990101', name: 'x' }] }, /does not match any of the expected tags/],
      [
        { tools: [{ type: 'bash_20250124', name: 'bash', max_characters: 5 }] },
        /Extra inputs are not permitted/,
      ],
      [{ thinking: { type: 'enabled', budget_tokens: 512 } }, /greater than or equal to 1024/],
      [
        { thinking: { type: 'enabled', budget_tokens: 8192 }, max_tokens: 4096 },
        /must be greater than `thinking.budget_tokens`/,
      ],
      [{ thinking, temperature: 0.2 }, /temperature/],
      [{ thinking, tools: [...TOOLS], tool_choice: { type: 'any' } }, /forces tool use/],
    ];
    for (const [extra, message] of cases) {
      const res = await fetch(`${sim.url}/v1/messages`, {
        method: 'POST',
        headers: { 'x-api-key': KEY, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', max_tokens: 4096, messages: [user], ...extra }),
      });
      const body = (await res.json()) as { error: { type: string; message: string } };
      assert.equal(res.status, 400, JSON.stringify(extra));
      assert.equal(body.error.type, 'invalid_request_error');
      assert.match(body.error.message, message);
    }
    // With the interleaved-thinking beta the budget may pass max_tokens (it spans the whole turn).
    const ok = await fetch(`${sim.url}/v1/messages`, {
      method: 'POST',
      headers: {
        'x-api-key': KEY,
        'anthropic-version': '2023-06-01',
        'anthropic-beta': 'interleaved-thinking-2025-05-14',
        'content-type': 'application/json',
      },
      body: JSON.stringify({
        model: 'm',
        max_tokens: 4096,
        thinking: { type: 'enabled', budget_tokens: 8192 },
        messages: [user],
      }),
    });
    assert.equal(ok.status, 200);
  });
});

describe('the tool mapping and the settings', () => {
  test('native tools replace editor and bash and are recorded as them; the rest stay', () => {
    const tools = withNativeTools(defaultTools());
    assert.deepEqual([...tools.keys()].sort(), [
      'bash',
      'delegate',
      'finish',
      'run_tests',
      'search',
      'str_replace_based_edit_tool',
    ]);
    assert.equal(tools.get('str_replace_based_edit_tool'), nativeEditorTool);
    assert.equal(tools.get('bash'), nativeBashTool);
    assert.equal(nativeEditorTool.records, 'editor');
    assert.deepEqual(editorInputOf({ command: 'insert', path: 'a', insert_line: 0, insert_text: 'x' }), {
      command: 'insert',
      path: 'a',
      insert_line: 0,
      new_str: 'x',
    });
    // undo_edit is not a command of text_editor_20250728.
    assert.equal(nativeEditorTool.schema.safeParse({ command: 'undo_edit', path: 'a' }).success, false);
    assert.equal(nativeBashTool.schema.safeParse({ restart: true }).success, true);
    assert.equal(nativeBashTool.schema.safeParse({}).success, false);
  });

  test('defaults come from the model table; the settings override them; what the API would refuse is a clear error', () => {
    assert.deepEqual(resolveModelSetup('claude-sonnet-4-6', { tools: null, thinkingBudget: null }, 8192), {
      tools: 'native',
      thinkingBudget: DEFAULT_THINKING_BUDGET,
    });
    assert.deepEqual(resolveModelSetup('claude-sim', { tools: null, thinkingBudget: null }, 8192), {
      tools: 'schema',
      thinkingBudget: 0,
    });
    assert.deepEqual(
      readAgentEnv({ ISSUE_AGENT_TOOLS: 'schema', ISSUE_AGENT_THINKING_BUDGET: '0' }).modelChoice,
      {
        tools: 'schema',
        thinkingBudget: 0,
      },
    );
    assert.throws(
      () => readAgentEnv({ ISSUE_AGENT_TOOLS: 'mcp' }),
      (e: unknown) => e instanceof ConfigError && /native .* or schema/.test(e.message),
    );
    assert.throws(
      () => readAgentEnv({ ISSUE_AGENT_THINKING_BUDGET: '500' }),
      (e: unknown) => e instanceof ConfigError && /at least 1024/.test(e.message),
    );
    assert.throws(
      () => readAgentEnv({ ISSUE_AGENT_THINKING_BUDGET: 'lots' }),
      (e: unknown) => e instanceof ConfigError && /number of tokens/.test(e.message),
    );
    assert.throws(
      () => readAgentEnv({ ISSUE_AGENT_MODEL: 'claude-opus-4-1', ISSUE_AGENT_THINKING_BUDGET: '30000' }),
      (e: unknown) => e instanceof ConfigError && /output limit/.test(e.message),
    );
  });
});
