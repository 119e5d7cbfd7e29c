import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { agentEvent } from '../../src/events/schema.js';
import { modelResponseEvent } from '../../src/agent/model-response-event.js';
import type { ModelResponse } from '../../src/model/model.js';

const response = (extra: Partial<ModelResponse> = {}): ModelResponse => ({
  model: 'claude-test',
  requestId: 'req_1',
  content: [
    { type: 'thinking', thinking: 'x'.repeat(41), signature: 'sig' },
    { type: 'text', text: 'done' },
  ],
  stopReason: 'end_turn',
  usage: { inputTokens: 10, outputTokens: 20, cacheReadTokens: 0, cacheWriteTokens: 0 },
  attempts: 1,
  ...extra,
});

test('a model call is one event shape: reported thinking tokens win, else they are estimated from the thinking text', () => {
  const facts = { usd: 0.01, latencyMs: 12, promptTokensEstimate: 300 };
  const estimated = modelResponseEvent(response(), facts);
  assert.equal(estimated.thinkingTokens, 11, '41 characters, four a token, rounded up');
  assert.equal(modelResponseEvent(response({ thinkingTokens: 7 }), facts).thinkingTokens, 7);
  const plain = modelResponseEvent(response({ content: [{ type: 'text', text: 'done' }] }), facts);
  assert.equal('thinkingTokens' in plain, false);
  assert.equal('parent' in plain, false, 'a main-run call has no parent');
  assert.equal(modelResponseEvent(response(), { ...facts, parent: 'd1' }).parent, 'd1');
  // The store's schema accepts it once it has an id and a time.
  agentEvent.parse({ ...estimated, id: 1, ts: new Date(0).toISOString() });
});

test("the API's context edits are part of the turn's event, not a second one a crash could drop", () => {
  const facts = { usd: 0.01, latencyMs: 12, promptTokensEstimate: 300 };
  const edits = [{ type: 'clear_tool_uses_20250919', clearedInputTokens: 41_000, clearedToolUses: 12 }];
  const cleared = modelResponseEvent(response({ contextEdits: edits }), facts);
  assert.deepEqual(cleared.contextEdits, edits);
  agentEvent.parse({ ...cleared, id: 1, ts: new Date(0).toISOString() });
  assert.equal('contextEdits' in modelResponseEvent(response({ contextEdits: [] }), facts), false);
  assert.equal('contextEdits' in modelResponseEvent(response(), facts), false);
});

test('no file in src/ writes a context_edited event (readers keep the kind for logs that hold one)', () => {
  assert.deepEqual(srcFilesWith("kind: 'context_edited'"), []);
});

test('every model_response in src/ is built by modelResponseEvent (fix run, delegate, review)', () => {
  assert.deepEqual(srcFilesWith("kind: 'model_response'"), [join('src', 'agent', 'model-response-event.ts')]);
});

/** The .ts files under src/ whose text includes `needle`. */
function srcFilesWith(needle: string): string[] {
  const found: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (path.endsWith('.ts') && readFileSync(path, 'utf8').includes(needle)) found.push(path);
    }
  };
  walk('src');
  return found;
}
