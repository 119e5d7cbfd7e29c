import assert from 'node:assert/strict';
import { test } from 'node:test';
import { taskFromText } from '../../src/execution/task-text.js';

test('a task file that starts with a heading: the heading is the title, the rest the body', () => {
  const t = taskFromText(
    '# Average rounds wrongly ##\n\nThe average of [1, 2] is 1.\n\n## Steps\n- run it\n',
  );
  assert.equal(t.title, 'Average rounds wrongly');
  assert.equal(t.body, 'The average of [1, 2] is 1.\n\n## Steps\n- run it');
});

test('plain text: the first line is the title, the whole text the body; --title wins', () => {
  assert.deepEqual(taskFromText('Fix the average\nIt rounds down.'), {
    title: 'Fix the average',
    body: 'Fix the average\nIt rounds down.',
    instructions: [],
    source: 'cli',
  });
  assert.equal(taskFromText('# Heading\nbody', 'Given').title, 'Given');
  assert.equal(taskFromText(`${'x'.repeat(150)}\nbody`).title, `${'x'.repeat(97)}...`);
  // `#hashtag` is not a heading (no space), and an empty heading is not a title.
  assert.equal(taskFromText('#123 is broken\nmore').title, '#123 is broken');
  assert.equal(taskFromText('#\nreal text').title, '#');
});
