import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  balanceFences,
  codeSpan,
  fenced,
  neutralizeProse,
  truncateInline,
  truncateMiddle,
  ZWJ,
} from '../../src/publish/markdown.js';
import { markdownShape } from './event-log.js';

test('fenced blocks and code spans use a delimiter longer than any backtick run inside', () => {
  assert.equal(fenced('plain'), '```text\nplain\n```');
  assert.equal(fenced('a ``` b\n````\n'), '`````text\na ``` b\n````\n`````');
  assert.ok(markdownShape(`${fenced('```\nopen')}\n\n<details>\n</details>`).fencesBalanced);
  assert.equal(codeSpan('npm test'), '`npm test`');
  assert.equal(codeSpan('a `b` c'), '``a `b` c``');
  assert.equal(codeSpan('`x`'), '`` `x` ``');
  assert.equal(codeSpan('two\nlines'), '`two lines`');
  assert.equal(codeSpan(''), '` `');
  assert.equal(fenced('nul\u0000 and \u202Ebidi'), '```text\nnul\uFFFD and bidi\n```');
});

test('balanceFences closes what untrusted Markdown leaves open, and only that', () => {
  assert.equal(balanceFences('text\n```js\ncode'), 'text\n```js\ncode\n```');
  assert.equal(balanceFences('~~~~\ncode\n~~~'), '~~~~\ncode\n~~~\n~~~~');
  assert.equal(balanceFences('```\ncode\n```\nafter'), '```\ncode\n```\nafter');
  assert.equal(balanceFences('inline ```code``` only'), 'inline ```code``` only');
  assert.equal(balanceFences('```a`b\nnot a fence'), '```a`b\nnot a fence');
});

test('neutralizeProse keeps the words but no tag, comment, mention, reference or closing keyword', () => {
  const out = neutralizeProse(
    '</details> <!-- x --> <img src=x> @octocat @org/team fixes #12, GH-3; Closes: https://github.com/o/r/issues/1 a < b, me@x.io',
  );
  assert.equal(
    out.replace(new RegExp(ZWJ, 'g'), ''),
    '</details> <!-- x --> <img src=x> @octocat @org/team fixes #12, GH-3; Closes: https://github.com/o/r/issues/1 a < b, me@x.io',
  );
  assert.doesNotMatch(out, /<[A-Za-z/!?]|@[A-Za-z]|#\d|GH-\d|closes:?\s+https/i);
  assert.ok(out.includes('a < b'), 'a lone < is left alone');
});

test('truncation keeps head and tail and never splits a surrogate pair', () => {
  const text = Array.from({ length: 100 }, (_, i) => `line ${i}`).join('\n');
  const cut = truncateMiddle(text, 200);
  assert.ok(cut.startsWith('line 0\n') && cut.endsWith('line 99'));
  assert.match(cut, /\[… [\d,]+ characters omitted …\]/);
  assert.ok(cut.length < 260);
  const emoji = '😀'.repeat(50);
  for (let max = 3; max < 40; max++) {
    for (const s of [truncateMiddle(emoji, max), truncateInline(emoji, max)]) {
      assert.ok(
        !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s),
        `max ${max}: ${s}`,
      );
    }
  }
  assert.equal(truncateInline('suite > a very long name > case 12', 20), 'suite > a …> case 12');
});
