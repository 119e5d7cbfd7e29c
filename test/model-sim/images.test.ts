import assert from 'node:assert/strict';
import { test } from 'node:test';
import { findRequestViolation } from '../../src/model-sim/validate.js';

/** The smallest PNG (1×1, transparent), as an issue's screenshot would arrive. */
const PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';

function withImage(source: Record<string, unknown>, role: 'user' | 'assistant' = 'user'): unknown {
  const image = { type: 'image', source };
  const messages =
    role === 'user'
      ? [{ role: 'user', content: [{ type: 'text', text: 'see the screenshot' }, image] }]
      : [
          { role: 'user', content: 'hi' },
          { role: 'assistant', content: [image] },
        ];
  return { model: 'claude-sonnet-4-6', max_tokens: 10, messages };
}

test('image blocks: accepted as the API takes them, refused as it refuses them', () => {
  assert.equal(findRequestViolation(withImage({ type: 'base64', media_type: 'image/png', data: PNG })), null);
  assert.match(
    findRequestViolation(withImage({ type: 'base64', media_type: 'image/svg+xml', data: PNG })) ?? '',
    /media_type: Input should be 'image\/jpeg', 'image\/png', 'image\/gif', 'image\/webp'/,
  );
  assert.match(
    findRequestViolation(withImage({ type: 'base64', media_type: 'image/png', data: 'not base64!' })) ?? '',
    /not valid base64/,
  );
  const big = 'A'.repeat(5 * 1024 * 1024 + 4);
  assert.match(
    findRequestViolation(withImage({ type: 'base64', media_type: 'image/png', data: big })) ?? '',
    /image exceeds 5 MB maximum/,
  );
  assert.match(
    findRequestViolation(withImage({ type: 'base64', media_type: 'image/png', data: PNG }, 'assistant')) ??
      '',
    /image blocks can only appear in user messages/,
  );
});
