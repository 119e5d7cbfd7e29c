import assert from 'node:assert/strict';
import { test } from 'node:test';
import { reviewToolCall } from '../../src/agent/tools/review-comment.js';
import { commentableLines, placeComment } from '../../src/publish/review-lines.js';

const patch = [
  '@@ -1,4 +1,5 @@',
  ' one',
  '-two',
  '+TWO',
  '+two and a half',
  ' three',
  ' four',
  '@@ -20,2 +21,3 @@ function f() {',
  ' twenty',
  '+new',
  ' twenty-one',
  '\\ No newline at end of file',
].join('\n');

void test('the lines a review comment may go on: added and context lines of each hunk, on the head side', () => {
  const lines = commentableLines([{ filename: 'a.js', patch }, { filename: 'bin.png' }]);
  assert.deepEqual([...(lines.get('a.js') ?? [])], [1, 2, 3, 4, 5, 21, 22, 23]);
  assert.deepEqual([...(lines.get('bin.png') ?? [])], []);
  assert.equal(placeComment(lines, 'a.js', 3), 'line');
  assert.equal(placeComment(lines, 'a.js', 10), 'body');
  assert.equal(placeComment(lines, 'other.js', 1), 'body');
});

void test('the review tools: a comment outside the diff is refused for the model; finish ends it', () => {
  const onDiff = (path: string, line: number) => path === 'a.js' && line === 3;
  assert.deepEqual(reviewToolCall('review_comment', { path: 'a.js', line: 3, body: 'why?' }, onDiff), {
    kind: 'comment',
    content: 'Comment added.',
    comment: { path: 'a.js', line: 3, body: 'why?' },
  });
  const outside = reviewToolCall('review_comment', { path: 'a.js', line: 9, body: 'x' }, onDiff);
  assert.equal(outside.kind, 'error');
  assert.match(outside.content, /not in the diff/);
  assert.equal(reviewToolCall('review_comment', { path: 'a.js' }, onDiff).kind, 'error');
  assert.equal(reviewToolCall('editor', { command: 'create' }, onDiff).kind, 'error');
  assert.deepEqual(reviewToolCall('finish_review', { summary: 'Fine.' }, onDiff), {
    kind: 'finish',
    content: 'Review posted.',
    summary: 'Fine.',
  });
});
