import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { OutcomeKind } from '../../src/events/schema.js';
import { eventSchemas } from '../../src/events/schema.js';
import { describeOutcome } from '../../src/publish/outcome-words.js';
import { findProgressMarker, renderProgress, type ProgressState } from '../../src/publish/progress.js';
import { Redactor } from '../../src/publish/redact.js';
import { markdownShape } from './event-log.js';

const jobId = 'octo-repo-issue-7';
const runLink = 'https://agent.example/runs/octo-repo-issue-7';

const states: readonly ProgressState[] = [
  { kind: 'queued', jobId, position: 3 },
  { kind: 'queued', jobId, position: null },
  { kind: 'working', jobId, runLink, step: 12, tokens: 123_456, costUsd: 0.4213, elapsedMs: 192_000 },
  { kind: 'publishing', jobId },
  {
    kind: 'pr_opened',
    jobId,
    runLink,
    url: 'https://github.com/octo/repo/pull/9',
    number: 9,
    outcome: 'resolved',
    draft: false,
  },
  {
    kind: 'pr_opened',
    jobId,
    url: 'https://github.com/octo/repo/pull/9',
    number: 9,
    outcome: 'unverified',
    draft: true,
  },
  {
    kind: 'ended',
    jobId,
    outcome: 'no_change',
    reason: 'the agent finished without changing any file',
    summary: null,
  },
  {
    kind: 'ended',
    jobId,
    outcome: 'stuck',
    reason: 'the same command 4 times',
    summary: 'I could not find the bug.',
  },
  {
    kind: 'ended',
    jobId,
    outcome: 'budget_exhausted',
    limit: 'usd',
    reason: 'the cost limit ($5.00) was reached',
    summary: null,
  },
  {
    kind: 'ended',
    jobId,
    outcome: 'failed',
    cause: 'sandbox_oom_killed',
    reason: 'the container was OOM-killed',
    summary: null,
  },
  {
    kind: 'refused',
    jobId,
    reason: 'the push was not made',
    violations: [
      {
        rule: 'workflow',
        path: '.github/workflows/ci.yml',
        detail: 'changes to GitHub Actions workflows are not allowed',
      },
      {
        rule: 'blocked_path',
        path: 'secrets/prod.env',
        detail: 'the path matches the blocked pattern "secrets/"',
      },
      { rule: 'max_lines', detail: '2500 lines changed (added + deleted), more than the limit of 2000' },
    ],
  },
  { kind: 'cancelled', jobId, by: 'octocat' },
  { kind: 'cancelled', jobId, by: null },
  { kind: 'retrying', jobId, attempt: 2, reason: 'the worker stopped; resuming from the event log' },
];

test('every progress state renders with the marker first, and the marker gives back the job id', () => {
  const seen = new Set<string>();
  for (const s of states) {
    const body = renderProgress(s);
    assert.ok(body.startsWith(`<!-- issue-agent:progress job=${jobId} -->\n`), s.kind);
    assert.equal(findProgressMarker(body), jobId, s.kind);
    const shape = markdownShape(body);
    assert.ok(shape.fencesBalanced && shape.detailsBalanced, s.kind);
    assert.ok(
      !body.includes('undefined') && !body.includes('null') && !body.includes('NaN'),
      `${s.kind}: ${body}`,
    );
    seen.add(body);
  }
  assert.equal(seen.size, states.length, 'each state reads differently');
});

test('the rendered states say what a maintainer needs', () => {
  const by = (i: number): string => {
    const s = states[i];
    assert.ok(s !== undefined);
    return renderProgress(s);
  };
  assert.match(by(0), /Queued.*number 3 in line/);
  assert.match(by(2), /step 12 · 123,456 tokens · \$0\.4213 · 3 min 12 s/);
  assert.ok(by(2).includes(`[details](${runLink})`));
  assert.ok(by(4).includes('[#9](https://github.com/octo/repo/pull/9)'));
  assert.ok(by(5).includes('as a draft') && by(5).includes('Not verified'));
  assert.ok(by(8).includes('cost limit'));
  assert.ok(by(9).includes('ran out of memory') && by(9).includes('`sandbox_oom_killed`'));
  const refused = by(10);
  assert.ok(refused.includes('- `.github/workflows/ci.yml`: changes to GitHub Actions workflows'));
  assert.ok(refused.includes('- `secrets/prod.env`: '));
  assert.ok(refused.includes('more than the limit of 2000'));
  assert.ok(by(11).includes('by `octocat`'), 'the canceller is named, not pinged');
  assert.doesNotMatch(markdownShape(by(11)).live, /@octocat/);
  assert.match(by(13), /Retrying.*attempt 2/);
});

test('every outcome in the schema has its own sentence, with the limit and the cause', () => {
  const outcomes = eventSchemas.outcome.shape.outcome.options as readonly OutcomeKind[];
  const sentences = new Set(outcomes.map((o) => describeOutcome({ outcome: o })));
  assert.equal(sentences.size, outcomes.length);
  for (const limit of ['steps', 'tokens', 'usd', 'wall_time'] as const) {
    const text = describeOutcome({ outcome: 'budget_exhausted', limit });
    assert.match(text, /step limit|token limit|cost limit|time limit/, limit);
  }
  assert.match(
    describeOutcome({ outcome: 'failed', cause: 'model_auth' }),
    /rejected its credentials.*`model_auth`/,
  );
  assert.match(describeOutcome({ outcome: 'failed', cause: 'something_new' }), /`something_new`/);
  assert.match(describeOutcome({ outcome: 'failed' }), /unexpected error/);
  // A job that ended on purpose is not called an error of the service.
  const refused = describeOutcome({ outcome: 'failed', cause: 'refused' });
  assert.match(refused, /^Not done: this request cannot be carried out/);
  assert.doesNotMatch(refused, /unexpected|problem of the service/);
});

test('untrusted reasons and summaries are made inert and redacted', () => {
  const token = `ghs_${'x'.repeat(36)}`;
  const body = renderProgress(
    {
      kind: 'ended',
      jobId,
      outcome: 'stuck',
      reason: `</details> <!-- x --> @octocat fixes #3 ${token}`,
      summary: '```\nunclosed fence and known-secret-1',
    },
    new Redactor(['known-secret-1']),
  );
  const shape = markdownShape(body);
  assert.ok(shape.fencesBalanced && shape.detailsBalanced);
  assert.equal((shape.live.match(/<!--/g) ?? []).length, 1);
  assert.doesNotMatch(shape.live, /@octocat|#3|<\/details>/);
  assert.ok(!body.includes(token) && !body.includes('known-secret-1'));
});

test('the marker round-trips any job id and is only found on the first line', () => {
  for (const id of ['a', 'repo#12', 'with space', 'x-->y', 'ünï/cödé', '--']) {
    assert.equal(findProgressMarker(renderProgress({ kind: 'publishing', jobId: id })), id);
  }
  assert.equal(findProgressMarker('hello\n<!-- issue-agent:progress job=x -->'), null);
  assert.equal(findProgressMarker('<!-- issue-agent:progress job= -->'), null);
  assert.equal(findProgressMarker('<!-- issue-agent:progress job=%E0%A4%A -->'), null, 'bad encoding');
  assert.equal(findProgressMarker('<!-- issue-agent:pr conversation=x -->'), null);
  assert.equal(findProgressMarker('\r\n  <!-- issue-agent:progress job=abc -->\r\nrest'), 'abc');
});
