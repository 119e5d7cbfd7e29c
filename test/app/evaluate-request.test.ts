import assert from 'node:assert/strict';
import { test } from 'node:test';
import { EVALUATE, parseEvaluate } from '../../src/app/evaluate-request.js';

void test('`@agent evaluate` options: oracle, limit, since in any spelling; anything else is refused with the reason', () => {
  assert.ok(EVALUATE.test('evaluate'));
  assert.ok(EVALUATE.test('Evaluate oracle'));
  assert.ok(!EVALUATE.test('evaluated the fix, please retry'));
  assert.ok(!EVALUATE.test('please evaluate'));
  assert.deepEqual(parseEvaluate('evaluate'), {
    ok: true,
    request: { model: 'configured', limit: 10, since: null },
  });
  for (const text of [
    'evaluate oracle limit 5 since 2026-01-31',
    'evaluate --limit=5 --since 2026-01-31 ORACLE',
  ]) {
    assert.deepEqual(parseEvaluate(text), {
      ok: true,
      request: { model: 'oracle', limit: 5, since: '2026-01-31' },
    });
  }
  for (const [text, problem] of [
    ['evaluate limit 0', /1 to 50/],
    ['evaluate limit 51', /1 to 50/],
    ['evaluate limit', /1 to 50/],
    ['evaluate since yesterday', /YYYY-MM-DD/],
    ['evaluate since 2026-13-45', /YYYY-MM-DD/],
    ['evaluate since 2026-02-31', /YYYY-MM-DD/],
    ['evaluate `rm -rf /`', /don't know the option `rm`/],
  ] as const) {
    const parsed = parseEvaluate(text);
    assert.ok(!parsed.ok && problem.test(parsed.problem), `${text}: ${JSON.stringify(parsed)}`);
  }
});
