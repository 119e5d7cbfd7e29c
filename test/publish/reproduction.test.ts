import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  differences,
  recordedTitle,
  reproductionSection,
  reproductionTitle,
  rowsOf,
  withReproduction,
  type ReproductionResult,
} from '../../src/publish/reproduction.js';

const table = (after: '✅' | '❌') =>
  [
    'Test command: `npm test`',
    '',
    '| Test | Before | After |',
    '| --- | :---: | :---: |',
    `| \`range\` | ✅ | ${after} |`,
  ].join('\n');

const result = (differ: ReproductionResult['differ'], recordedOn: string | null = 'a'.repeat(40)) => ({
  base: 'b'.repeat(40),
  head: 'c'.repeat(40),
  command: 'npm test',
  table: table('❌'),
  recordedOn,
  differ,
  by: 'maria',
  sandbox: 'docker',
});

test('a reproduction that differs names each test, as code, with both rows', () => {
  const differ = differences(rowsOf(table('✅')), rowsOf(table('❌')));
  assert.deepEqual(differ, [{ name: 'range', recorded: ['✅', '✅'], reproduced: ['✅', '❌'] }]);
  const r = result(differ);
  assert.equal(
    reproductionTitle(r),
    'Not reproduced: 1 test differs from the verdict recorded on aaaaaaaaaaaa',
  );
  assert.match(
    reproductionSection(r, 'now'),
    /❌ \*\*Differs\*\*[^]*- `range`: recorded ✅ before, ✅ after; reproduced ✅ before, ❌ after/,
  );
  assert.match(reproductionTitle(result([])), /^Reproduced: matches/);
  assert.match(reproductionTitle(result([], null)), /no verdict was recorded/);
});

test('a second reproduction replaces the first one’s section and title suffix, never stacks them', () => {
  const recorded = '**Outcome:** resolved';
  const once = withReproduction(recorded, reproductionSection(result([]), 't1'));
  const twice = withReproduction(once, reproductionSection(result([]), 't2'));
  assert.ok(twice.endsWith(`\n\n---\n\n${recorded}`));
  assert.ok(twice.includes('(t2)') && !twice.includes('(t1)'));
  const title = `Resolved: 1 test failing before and passing now · ${reproductionTitle(result([]))}`;
  assert.equal(recordedTitle(title), 'Resolved: 1 test failing before and passing now');
  assert.equal(recordedTitle('Unverified: no'), 'Unverified: no');
});
