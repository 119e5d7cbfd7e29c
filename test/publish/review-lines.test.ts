import assert from 'node:assert/strict';
import { test } from 'node:test';
import { reviewToolCall } from '../../src/agent/tools/review-comment.js';
import { commentableLines, commentableLinesOfDiff, placeComment } from '../../src/publish/review-lines.js';

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

void test('the review tools: a comment outside the diff is kept for the body, the model told; finish ends it', () => {
  const onDiff = (path: string, line: number) => path === 'a.js' && line === 3;
  assert.deepEqual(reviewToolCall('review_comment', { path: 'a.js', line: 3, body: 'why?' }, onDiff), {
    kind: 'comment',
    content: 'Comment added.',
    comment: { path: 'a.js', line: 3, body: 'why?' },
  });
  const outside = reviewToolCall('review_comment', { path: 'a.js', line: 9, body: 'x' }, onDiff);
  assert.equal(outside.kind, 'comment');
  assert.match(outside.content, /not in the diff, so this comment goes in the review's body/);
  assert.equal(reviewToolCall('review_comment', { path: 'a.js' }, onDiff).kind, 'error');
  assert.equal(reviewToolCall('editor', { command: 'create' }, onDiff).kind, 'error');
  assert.deepEqual(reviewToolCall('finish_review', { summary: 'Fine.' }, onDiff), {
    kind: 'finish',
    content: 'Review posted.',
    summary: 'Fine.',
  });
});

void test('the same lines from a whole git diff: per file, a deleted file with none', () => {
  const diff = [
    'diff --git a/a.js b/a.js',
    'index 1..2 100644',
    '--- a/a.js',
    '+++ b/a.js',
    patch,
    'diff --git a/gone.js b/gone.js',
    'deleted file mode 100644',
    '--- a/gone.js',
    '+++ /dev/null',
    '@@ -1 +0,0 @@',
    '-x',
    'diff --git a/new.js b/new.js',
    'new file mode 100644',
    '--- /dev/null',
    '+++ b/new.js',
    '@@ -0,0 +1,2 @@',
    '+a',
    '+b',
    '',
  ].join('\n');
  const lines = commentableLinesOfDiff(diff);
  assert.deepEqual([...lines.keys()], ['a.js', 'new.js']);
  assert.deepEqual([...(lines.get('a.js') ?? [])], [1, 2, 3, 4, 5, 21, 22, 23]);
  assert.deepEqual([...(lines.get('new.js') ?? [])], [1, 2]);
});
