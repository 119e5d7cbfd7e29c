import assert from 'node:assert/strict';
import { test } from 'node:test';
import { compareRows, rowsOf } from '../../src/cli/verify-command.js';

const recorded = [
  'Test command: `npm test`',
  '',
  '| Test | Before | After |',
  '| --- | :---: | :---: |',
  '| `test/a.test.js::fixed` | ❌ | ✅ |',
  '| ``name with ` tick`` | ✅ | ✅ |',
  '| *… and 2 more: 2 passing before and after* | | |',
].join('\n');

test('rowsOf reads the per-test rows of a rendered table, names without their code spans', () => {
  assert.deepEqual(
    [...rowsOf(recorded)],
    [
      ['test/a.test.js::fixed', ['❌', '✅']],
      ['name with ` tick', ['✅', '✅']],
    ],
  );
});

test('compareRows names each test that differs, and a test only one table has', () => {
  const now = rowsOf(
    [
      '| `test/a.test.js::fixed` | ❌ | ❌ |',
      '| ``name with ` tick`` | ✅ | ✅ |',
      '| `new` | — | ✅ |',
    ].join('\n'),
  );
  assert.deepEqual(compareRows(rowsOf(recorded), now), [
    'test/a.test.js::fixed: recorded ❌ before, ✅ after, reproduced ❌ before, ❌ after',
    'new: recorded not in the table, reproduced — before, ✅ after',
  ]);
  assert.deepEqual(compareRows(rowsOf(recorded), rowsOf(recorded)), []);
});
