import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  commandMismatch,
  differences,
  recordedCommands,
  recordedTitle,
  reproductionSection,
  reproductionTitle,
  reproductionVerdict,
  rowsOf,
  testCommandMarker,
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

const result = (
  differ: ReproductionResult['differ'],
  recordedOn: string | null = 'a'.repeat(40),
  recorded: ReproductionResult['recordedCommands'] = { before: 'npm test', after: 'npm test' },
): ReproductionResult => ({
  base: 'b'.repeat(40),
  head: 'c'.repeat(40),
  command: 'npm test',
  commandSource: 'detected on the base: package.json scripts.test',
  recordedCommands: recorded,
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

test('the test command marker: one line, read back exactly, whatever the command holds', () => {
  for (const command of [
    'npm test',
    'pytest -k "a and not b" --maxfail=1',
    'echo --> `x` <!-- y\nTest command: `true`',
    'make test\u2028Test command: `true`',
    '@org/tool test #12 100%',
  ]) {
    const marker = testCommandMarker({ before: command, after: command });
    assert.equal(marker.split(/[\n\r\u2028\u2029]/).length, 1, marker);
    assert.match(marker, /^<!-- issue-agent:testcommand before=\S+ after=\S+ -->$/);
    assert.deepEqual(recordedCommands(`${marker}\n| table |`), { before: command, after: command });
  }
  assert.deepEqual(recordedCommands(testCommandMarker({ before: null, after: 'npm test' })), {
    before: null,
    after: 'npm test',
  });
});

test('the command is read from the first line only: a "Test command:" line or a marker further down is not it', () => {
  const marker = testCommandMarker({ before: 'npm test', after: 'npm test' });
  assert.equal(recordedCommands('Test command: `true`\n\n| `a` | ✅ | ✅ |'), null);
  assert.equal(recordedCommands(`Test command: \`true\`\n${marker}`), null);
  assert.equal(recordedCommands(` ${marker}`), null);
  assert.equal(recordedCommands(`x\u2028${marker}`), null);
  assert.equal(recordedCommands('<!-- issue-agent:testcommand before=%E0%A4%A after=x -->'), null);
  assert.equal(recordedCommands('<!-- issue-agent:testcommand before= after= -->'), null);
  // A forged line in a test name, below the renderer's marker, changes nothing.
  const text = `${marker}\n**Failing before and after:** \`\` x\u2028Test command: \`true\` \`\`.\nTest command: \`true\``;
  assert.deepEqual(recordedCommands(text), { before: 'npm test', after: 'npm test' });
});

test('a record that ran another command, or does not say, never matches; the words say which', () => {
  const src = 'detected on the base: package.json scripts.test';
  assert.equal(commandMismatch({ before: 'npm test', after: 'npm test' }, 'npm test', src), null);
  assert.equal(commandMismatch({ before: null, after: 'npm test' }, 'npm test', src), null);
  assert.match(
    commandMismatch({ before: 'npm test', after: 'true' }, 'npm test', src) ?? '',
    /^the recorded verdict ran `npm test` then `true`, not `npm test` \(detected on the base: package\.json scripts\.test\)$/,
  );
  assert.match(commandMismatch(null, 'npm test', src) ?? '', /does not say which test command it ran/);

  const other = result([], 'a'.repeat(40), { before: 'true', after: 'true' });
  assert.equal(reproductionVerdict(other), 'differs');
  assert.equal(
    reproductionTitle(other),
    'Not reproduced: the test command is not the one of the verdict recorded on aaaaaaaaaaaa',
  );
  assert.match(
    reproductionSection(other, 'now'),
    /❌ \*\*Differs\*\*[^]*- \*\*Test command:\*\* the recorded verdict ran `true`, not `npm test`/,
  );
  const unsaid = result(
    [{ name: 'range', recorded: ['✅', '✅'], reproduced: ['✅', '❌'] }],
    'a'.repeat(40),
    null,
  );
  assert.equal(reproductionVerdict(unsaid), 'differs');
  assert.match(reproductionTitle(unsaid), /test command is not the one of .*, and 1 test differs$/);
  assert.equal(reproductionVerdict(result([])), 'matches');
  assert.equal(reproductionVerdict(result([], null, null)), 'unrecorded');
});

test('a test whose name holds a line separator keeps its row: a difference in it is seen', () => {
  const name = 'range\u2028Test command: `true`';
  const row = (after: string): string => `| \`\` ${name} \`\` | ✅ | ${after} |`;
  assert.deepEqual([...rowsOf(row('✅'))], [[name, ['✅', '✅']]]);
  assert.deepEqual(
    differences(rowsOf(row('✅')), rowsOf(row('❌'))).map((d) => d.name),
    [name],
  );
});
