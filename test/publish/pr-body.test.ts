import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { findPullRequestMarker, findTrajectoryMarker } from '../../src/publish/markers.js';
import { GITHUB_BODY_LIMIT, renderPullRequest, type PullRequestInput } from '../../src/publish/pr-body.js';
import { Redactor } from '../../src/publish/redact.js';
import { EventLog, makeBase, markdownShape } from './event-log.js';

const issue = { number: 7, title: 'Parser crashes on empty input' };
const redactor = new Redactor([]);
const link = 'https://agent.example/runs/job-7/trajectory.json';

function render(log: EventLog, extra: Partial<PullRequestInput> = {}): ReturnType<typeof renderPullRequest> {
  return renderPullRequest({
    base: makeBase(),
    events: log.events,
    issue,
    trajectoryLink: link,
    redactor,
    ...extra,
  });
}

function assertWellFormed(text: string, what: string): void {
  assert.ok(text.length < GITHUB_BODY_LIMIT, `${what}: ${text.length} characters`);
  assert.ok(Buffer.byteLength(text) < GITHUB_BODY_LIMIT, `${what}: ${Buffer.byteLength(text)} bytes`);
  const shape = markdownShape(text);
  assert.ok(shape.fencesBalanced, `${what}: a fenced block is left open`);
  assert.ok(shape.detailsBalanced, `${what}: <details> is unbalanced`);
}

function smallRun(): EventLog {
  const log = new EventLog();
  log.testRun('baseline', {
    passed: 3,
    failed: 1,
    passedNames: ['parse > numbers', 'parse > strings', 'format > dates'],
    failedNames: ['parse > empty input'],
  });
  log.step({
    text: 'Let me run the failing test.',
    tool: 'bash',
    input: { command: 'npm test -- parse' },
    output: 'TypeError: cannot read properties of undefined\n    at parse (src/parse.ts:3:10)',
    exitCode: 1,
  });
  log.step({
    text: 'The parser indexes `input[0]` without checking the length.',
    tool: 'editor',
    input: { command: 'str_replace', path: 'src/parse.ts', old_str: 'a', new_str: 'b' },
    output: 'The file src/parse.ts was edited.',
  });
  log.checkpoint(2, 'diff --git a/src/parse.ts b/src/parse.ts\n--- a/src/parse.ts\n+++ b/src/parse.ts\n');
  log.step({ tool: 'finish', input: { summary: 'Handled the empty input.' }, output: 'ok' });
  log.testRun('final', {
    passed: 5,
    failed: 0,
    passedNames: [
      'parse > numbers',
      'parse > strings',
      'format > dates',
      'parse > empty input',
      'parse > whitespace only',
    ],
  });
  log.outcome();
  return log;
}

test('the title is "Fix #n: title", one line, at most 256 characters', () => {
  const r = render(smallRun());
  assert.equal(r.title, 'Fix #7: Parser crashes on empty input');
  const long = render(smallRun(), { issue: { number: 7, title: `multi\nline ${'x'.repeat(400)}` } });
  assert.equal(long.title.length, 256);
  assert.ok(long.title.startsWith('Fix #7: multi line x'));
  assert.ok(long.title.endsWith('…'));
});

test('the body leads with the marker and has every section, and matches the golden file', () => {
  const r = render(smallRun());
  assert.equal(findPullRequestMarker(r.body), 'conv-1');
  assert.ok(r.body.startsWith('<!-- issue-agent:pr conversation=conv-1 -->\n'));
  for (const section of [
    '### Verification',
    '### Files changed',
    '### Run',
    '<summary>Trajectory</summary>',
  ]) {
    assert.ok(r.body.includes(section), section);
  }
  assert.match(r.body, /^Fixes #7$/m);
  assert.ok(r.body.includes(link));
  assert.ok(r.body.includes('Resolved: '));
  assert.ok(
    r.body.includes('| 3 | 3,600 | 240 | 9,000 | 300 | $0.0369 |'),
    'steps, tokens in/out/cache, cost',
  );
  assert.deepEqual(r.trajectoryComments, []);
  assertWellFormed(r.body, 'body');

  const golden = join(import.meta.dirname, 'fixtures', 'pr-body.golden.md');
  if (process.env.UPDATE_GOLDEN === '1') writeFileSync(golden, r.body);
  assert.equal(
    r.body,
    readFileSync(golden, 'utf8'),
    'run with UPDATE_GOLDEN=1 to accept a deliberate change',
  );
});

test('the verification table lists fixed and new tests first, then the rest, with both counts', () => {
  const r = render(smallRun());
  const table = r.body.slice(r.body.indexOf('### Verification'), r.body.indexOf('### Files changed'));
  assert.ok(table.includes('| Passed | 3 | 5 |'));
  assert.ok(table.includes('| Failed | 1 | 0 |'));
  assert.ok(table.includes('| Result | ❌ exit 1 | ✅ exit 0 |'));
  const rows = table.split('\n').filter((l) => l.startsWith('| `'));
  assert.deepEqual(rows, [
    '| `parse > empty input` | ❌ | ✅ |',
    '| `parse > whitespace only` | — | ✅ |',
    '| `format > dates` | ✅ | ✅ |',
    '| `parse > numbers` | ✅ | ✅ |',
    '| `parse > strings` | ✅ | ✅ |',
  ]);
});

test('with counts only, the table has the counts and says names are unknown', () => {
  const log = new EventLog();
  log.testRun('baseline', { passed: 10, failed: 2, skipped: 1 });
  log.step({ output: 'x' });
  log.testRun('final', { passed: 12, failed: 0, skipped: 1 });
  log.outcome();
  const r = render(log);
  assert.ok(r.body.includes('| Passed | 10 | 12 |'));
  assert.ok(r.body.includes('| Skipped | 1 | 1 |'));
  assert.ok(r.body.includes('only the counts are known'));
  assert.ok(!r.body.includes('| Test | Before | After |'));
});

test('without any test run the section says why; a missing final run shows "not run"', () => {
  const log = new EventLog();
  log.step({ output: 'x' });
  log.outcome({ outcome: 'unverified', reason: 'no test command' });
  const none = renderPullRequest({
    base: makeBase({ testCommand: null }),
    events: log.events,
    issue,
    trajectoryLink: link,
    redactor,
  });
  assert.ok(none.body.includes('no test command is known for this repository'));

  const partial = new EventLog();
  partial.testRun('baseline', { passed: 1, failed: 1, failedNames: ['t1'], passedNames: ['t2'] });
  partial.step({ output: 'x' });
  partial.outcome({ outcome: 'budget_exhausted', limit: 'steps', reason: 'the step limit (60) was reached' });
  const r = render(partial);
  assert.ok(r.body.includes('| Result | ❌ exit 1 | not run |'));
  assert.ok(r.body.includes('| `t1` | ❌ | — |'));
  assert.ok(r.body.includes('step limit'));
});

test('the per-test rows are capped with "and N more", test names with pipes stay in their cell', () => {
  const log = new EventLog();
  const many = Array.from({ length: 200 }, (_, i) => `suite | case ${String(i).padStart(3, '0')}`);
  log.testRun('baseline', { passed: 200, failed: 1, passedNames: many, failedNames: ['the | bug'] });
  log.step({ output: 'x' });
  log.testRun('final', { passed: 201, failed: 0, passedNames: [...many, 'the | bug'] });
  log.outcome();
  const r = render(log);
  const rows = r.body.split('\n').filter((l) => l.startsWith('| `'));
  assert.equal(rows.length, 50);
  assert.equal(rows[0], '| `the \\| bug` | ❌ | ✅ |', 'the fixed test comes first, its pipe escaped');
  assert.ok(r.body.includes('| *… and 151 more: 151 passing before and after* | | |'));
  for (const row of rows) assert.equal(row.split(/(?<!\\)\|/).length, 5, `three cells: ${row}`);
});

test('a run of 2,000 steps with large outputs is split into parts that each fit and keep every step', () => {
  const log = new EventLog();
  log.testRun('baseline', { passed: 1, failed: 1 });
  const big = (i: number): string =>
    `${'line of output with ``` backticks and </details> and <!-- x -->\n'.repeat(400)}end of step ${i}`;
  for (let i = 1; i <= 2000; i++) {
    log.step({
      text: `Step ${i}: trying ${'again '.repeat(50)}`,
      input: { command: `make test-${i}` },
      output: big(i),
      exitCode: i % 2,
    });
    if (i % 100 === 0) log.add({ kind: 'warning', code: 'stuck_repeat', message: 'the same command again' });
    if (i % 500 === 0)
      log.add({ kind: 'condensation', throughEventId: log.events.length, summary: 's', condensedTurns: 50 });
  }
  log.testRun('final', { passed: 2, failed: 0 });
  log.outcome();
  const r = render(log);
  assert.ok(r.trajectoryComments.length > 0);
  const parts = [r.body, ...r.trajectoryComments];
  parts.forEach((p, i) => {
    assertWellFormed(p, `part ${i}`);
  });
  const total = parts.length;
  assert.ok(r.body.includes(`<summary>Trajectory (part 1 of ${total})</summary>`));
  r.trajectoryComments.forEach((c, i) => {
    assert.deepEqual(findTrajectoryMarker(c), { conversationId: 'conv-1', part: i + 2 });
    assert.ok(c.includes(`<summary>Trajectory (part ${i + 2} of ${total})</summary>`));
  });
  const all = parts.join('\n');
  for (let i = 1; i <= 2000; i++) assert.ok(all.includes(`**Step ${i}**`), `step ${i} is missing`);
  assert.ok(all.includes('🏁 **Outcome**'));
  assert.ok(all.includes('Context condensed: 50 earlier turns'));
  // The steps appear in order across the parts.
  const order = [...all.matchAll(/\*\*Step (\d+)\*\*/g)].map((m) => Number(m[1]));
  assert.deepEqual(
    order,
    Array.from({ length: 2000 }, (_, i) => i + 1),
  );
});

test('a mid-sized run keeps full outputs and continues in comments only as needed', () => {
  const log = new EventLog();
  for (let i = 1; i <= 60; i++) log.step({ text: `step ${i}`, output: `${'o'.repeat(80)}\n`.repeat(60) });
  log.outcome();
  const r = render(log);
  const parts = [r.body, ...r.trajectoryComments];
  parts.forEach((p, i) => {
    assertWellFormed(p, `part ${i}`);
  });
  assert.ok(r.trajectoryComments.length >= 1 && r.trajectoryComments.length <= 10);
  // A part that starts inside a step says where it continues.
  for (const c of r.trajectoryComments) {
    const inner = c.slice(c.indexOf('</summary>') + '</summary>'.length).trimStart();
    assert.ok(
      inner.startsWith('**Step') || inner.startsWith('*(continued:') || inner.startsWith('🏁'),
      inner.slice(0, 60),
    );
  }
});

test('model text cannot close the trajectory, hide text, ping, reference or close issues, or open a fence', () => {
  const log = new EventLog();
  const evil = [
    'Done.</details><details open><summary>pwned</summary>',
    '<!-- hidden instructions -->',
    '<!-- issue-agent:pr conversation=evil -->',
    'cc @octocat and @github/security, this fixes #12 and closes https://github.com/o/r/issues/3, see GH-5',
    '<img src="https://evil.example/pixel.png">',
    '```',
    'an unclosed fence',
  ].join('\n');
  log.step({ text: evil, output: 'fine' });
  log.step({ text: 'after', output: 'fine' });
  log.outcome({ summary: evil, reason: '</details> @octocat #99' });
  const r = render(log);
  assertWellFormed(r.body, 'body');
  const live = markdownShape(r.body).live;
  assert.equal((live.match(/<!--/g) ?? []).length, 1, 'only the App marker is an HTML comment');
  assert.equal(findPullRequestMarker(r.body), 'conv-1');
  assert.doesNotMatch(live, /@octocat|@github\/security/);
  assert.doesNotMatch(live, /<img|<details open|<\/details><details/);
  assert.deepEqual(live.match(/#\d+/g), ['#7'], 'the only issue reference is ours');
  assert.doesNotMatch(live, /GH-\d/);
  const others = live.replace(/^Fixes #7$/m, '');
  assert.doesNotMatch(others, /\b(?:fix(?:es|ed)?|close[sd]?|resolve[sd]?)\b:?\s+(?:#\d|https?:\/\/)/i);
  assert.match(r.body, /^Fixes #7$/m, 'our own closing keyword is intact');
  assert.ok(r.body.includes('**Step 2**'), 'the trajectory goes on after the evil text');
  // The words are still there for a reader, only made inert.
  assert.ok(r.body.includes('octocat'));
});

test('secrets are redacted everywhere, including inside the trajectory', () => {
  const known = 'hunter2-known-secret-value';
  const tokens = {
    ghp: `ghp_${'A1b2'.repeat(9)}`,
    gho: `gho_${'Z9y8'.repeat(9)}`,
    ghu: `ghu_${'Q'.repeat(36)}`,
    ghs: `ghs_${'s3cr'.repeat(9)}`,
    ghr: `ghr_${'r'.repeat(36)}`,
    pat: `github_pat_11ABCDEFG0${'x'.repeat(12)}_${'y'.repeat(59)}`,
    ant: `sk-ant-api03-${'k'.repeat(90)}-AAAA`,
  };
  const log = new EventLog();
  log.testRun('baseline', { passed: 0, failed: 1, failedNames: [`token ${tokens.ghp}`] });
  log.step({
    text: `I found ${tokens.gho} and ${known} in the env.`,
    input: {
      command: `curl -H "Authorization: Bearer ${tokens.ghu}" https://x-access-token:${tokens.ghs}@github.com/o/r.git`,
    },
    output: [
      `GITHUB_TOKEN=${tokens.ghr}`,
      `pat=${tokens.pat}`,
      `ANTHROPIC_API_KEY=${tokens.ant}`,
      `authorization: token ${'t'.repeat(40)}`,
      `encoded=${encodeURIComponent(known)} b64=${Buffer.from(`user:${known}`).toString('base64')}`,
      '-----BEGIN RSA PRIVATE KEY-----',
      'MIIEowIBAAKCAQEA1234567890abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN',
      'ZmFrZWtleW1hdGVyaWFsZmFrZWtleW1hdGVyaWFsZmFrZWtleW1hdGVyaWFs',
      '-----END RSA PRIVATE KEY-----',
    ].join('\n'),
  });
  log.outcome({
    summary: `used ${known}`,
    reason: `push to https://x-access-token:${tokens.ghs}@github.com failed`,
    diffStat: ` ${known} | 1 +\n`,
  });
  const r = renderPullRequest({
    base: makeBase(),
    events: log.events,
    issue: { number: 7, title: `leak ${tokens.ghp}` },
    trajectoryLink: link,
    redactor: new Redactor([known, tokens.ghs]),
  });
  const all = [r.title, r.body, ...r.trajectoryComments].join('\n');
  for (const [name, value] of Object.entries({ ...tokens, known })) {
    assert.ok(!all.includes(value), `${name} leaked`);
    assert.ok(!all.includes(value.slice(0, 24)), `the head of ${name} leaked`);
  }
  assert.ok(
    !all.includes(Buffer.from(`user:${known}`).toString('base64').slice(8, 24)),
    'base64 form leaked',
  );
  assert.ok(!all.includes('MIIEowIBAAKCAQEA'), 'private key leaked');
  assert.ok(!all.includes('t'.repeat(40)), 'authorization header value leaked');
  assert.ok(all.includes('[REDACTED]'));
  assert.ok(r.title.includes('[REDACTED]'));
});

test('rounds: several runs render in order, each with its heading, totals summed', () => {
  const a = smallRun();
  const b = new EventLog();
  b.step({ text: 'Addressing the review: rename the helper.', output: 'ok' });
  b.testRun('final', { passed: 6, failed: 0 });
  b.outcome({ summary: 'Renamed the helper as asked in review.', diffStat: ' src/parse.ts | 2 +-\n' });
  const r = renderPullRequest({
    runs: [
      { base: makeBase(), events: a.events, label: 'Initial fix' },
      { base: makeBase({ conversationId: 'conv-2' }), events: b.events, label: 'Review by @maintainer' },
    ],
    issue,
    trajectoryLink: link,
    redactor,
  });
  assertWellFormed(r.body, 'body');
  assert.equal(findPullRequestMarker(r.body), 'conv-1');
  assert.ok(r.body.includes('Renamed the helper as asked in review.'), 'the summary is the latest round');
  assert.ok(r.body.includes('| Passed | 3 | 6 |'), 'before = first baseline, after = last final');
  const r1 = r.body.indexOf('#### Round 1: Initial fix');
  const r2 = r.body.indexOf('#### Round 2: Review by @\u200Dmaintainer');
  assert.ok(r1 > 0 && r2 > r1);
  assert.ok(r.body.includes('| **Total** | 4 |'));
});

test('a small budget shortens the sections above the trajectory and moves the trajectory to comments', () => {
  const log = new EventLog();
  const names = Array.from({ length: 200 }, (_, i) => `${'deeply nested suite > '.repeat(6)}case ${i}`);
  log.testRun('baseline', { passed: 0, failed: 200, failedNames: names });
  for (let i = 1; i <= 30; i++) log.step({ text: `step ${i}`, output: 'out\n'.repeat(300) });
  log.testRun('final', { passed: 200, failed: 0, passedNames: names });
  log.outcome({
    summary: 'A long summary. '.repeat(400),
    reason: 'r'.repeat(3000),
    diffStat: ' f | 1 +\n'.repeat(500),
  });
  const r = renderPullRequest({
    base: makeBase(),
    events: log.events,
    issue,
    trajectoryLink: link,
    redactor,
    budget: 10_000,
    conversationId: 'c/with spaces',
  });
  assert.equal(findPullRequestMarker(r.body), 'c/with spaces');
  assert.ok(r.trajectoryComments.length > 1);
  for (const p of [r.body, ...r.trajectoryComments]) {
    assertWellFormed(p, 'part');
    assert.ok(Buffer.byteLength(p) <= 10_000, `${Buffer.byteLength(p)} bytes`);
  }
  assert.ok(r.body.includes('| Passed | 0 | 200 |'), 'the counts survive the shortening');
  assert.match(r.body, /^Fixes #7$/m);
});

test('input errors are typed: no run, or a budget GitHub would refuse', () => {
  assert.throws(() => renderPullRequest({ runs: [], issue, trajectoryLink: link, redactor }), {
    name: 'PublishInputError',
  });
  assert.throws(() => render(smallRun(), { budget: 70_000 }), { name: 'PublishInputError' });
});

test('every event kind has its line: retries, resumes, test tools, finish, an interrupted call', () => {
  const log = new EventLog();
  log.add({ kind: 'model_retry', attempt: 1, status: 529, reason: 'overloaded', waitMs: 2000 });
  log.step({ tool: 'run_tests', input: { filter: 'parse' }, output: '\u001b[31mFAIL\u001b[0m parse' });
  const obs = log.events.at(-1);
  assert.ok(obs?.kind === 'observation');
  log.events[log.events.length - 1] = {
    ...obs,
    testSummary: {
      runner: 'node',
      passed: 3,
      failed: 1,
      skipped: 0,
      failedNames: ['parse > empty'],
      passedNames: [],
    },
  };
  log.step({ tool: 'bash', input: { command: 'cat colors.txt' }, output: '\u001b[32mgreen\u001b[0m text' });
  log.add({
    kind: 'model_response',
    model: 'm',
    requestId: null,
    content: [{ type: 'tool_use', id: 'lost', name: 'bash', input: { command: 'sleep 1000' } }],
    stopReason: 'tool_use',
    usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0 },
    usd: 0,
    latencyMs: 1,
    attempts: 1,
    promptTokensEstimate: 1,
  });
  log.add({ kind: 'action', toolUseId: 'lost', tool: 'bash', input: { command: 'sleep 1000' } });
  log.add({ kind: 'run_resumed', pid: 42 });
  log.step({ tool: 'finish', input: { summary: 'done' }, output: 'Finished.' });
  const fin = log.events.at(-1);
  assert.ok(fin?.kind === 'observation');
  log.events[log.events.length - 1] = { ...fin, finishSummary: 'done' };
  log.outcome({ outcome: 'cancelled', reason: 'stopped by @octocat', summary: null, diffStat: '' });
  const r = render(log);
  assertWellFormed(r.body, 'body');
  for (const expected of [
    '↻ Model call retried (attempt 1, HTTP 529, waited 2.0 s): overloaded',
    '→ `run_tests` `parse` · exit 0',
    'Tests: 3 passed, 1 failed, 0 skipped',
    'Failing: `parse > empty`',
    '```text\ngreen text\n```',
    '→ `bash` `sleep 1000` · no result recorded',
    '⏯️ The run was interrupted and resumed',
    '→ `finish` `done` · exit 0',
    'Cancelled: the run was stopped before it finished.',
    'No file was changed.',
  ]) {
    assert.ok(r.body.includes(expected), expected);
  }
  assert.equal(r.body.split('\n\n')[1], 'done', "the finish tool's summary stands in for the outcome's");
  assert.ok(!r.body.includes('FAIL'), 'parsed test counts stand for the output');
  assert.ok(!r.body.includes('Finished.'), 'the finish acknowledgement is not repeated');
  assert.ok(!r.body.includes('\u001b'), 'no terminal escapes');
});

test('thinking: the PR says how many thinking tokens, never what was thought; an API clearing has its line (in the turn, or a separate event of a log that holds one)', () => {
  const log = new EventLog();
  const thought = 'Perhaps the parser should treat empty input as a syntax error instead.';
  const turn = log.add({
    kind: 'model_response',
    model: 'm',
    requestId: null,
    content: [
      { type: 'thinking', thinking: thought, signature: 'sig' },
      { type: 'redacted_thinking', data: 'opaque-redacted-bytes' },
      { type: 'text', text: 'Checking the parser.' },
    ],
    stopReason: 'end_turn',
    usage: { inputTokens: 10, outputTokens: 300, cacheReadTokens: 0, cacheWriteTokens: 0 },
    usd: 0.01,
    latencyMs: 5,
    attempts: 1,
    promptTokensEstimate: 10,
    thinkingTokens: 250,
    contextEdits: [{ type: 'clear_tool_uses_20250919', clearedInputTokens: 41_000, clearedToolUses: 12 }],
  });
  log.add({
    kind: 'context_edited',
    responseEventId: turn.id,
    edits: [{ type: 'clear_tool_uses_20250919', clearedInputTokens: 9_000, clearedToolUses: 1 }],
  });
  log.outcome();
  const r = render(log);
  assertWellFormed(r.body, 'body');
  const all = [r.body, ...r.trajectoryComments].join('\n');
  assert.ok(all.includes('250 thinking tokens'), 'the count is in the PR');
  assert.ok(!all.includes(thought), 'the thinking is not');
  assert.ok(!all.includes('opaque-redacted-bytes'));
  assert.ok(
    all.includes('The API cleared 12 old tool results (41000 input tokens) from what the model read'),
  );
  assert.ok(all.includes('The API cleared 1 old tool result (9000 input tokens) from what the model read'));
});
