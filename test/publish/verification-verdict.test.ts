import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { verdict } from '../../src/testing/verdict.js';
import type { EventOf, NewEvent } from '../../src/events/schema.js';
import { describeOutcome } from '../../src/publish/outcome-words.js';
import { renderPullRequest } from '../../src/publish/pr-body.js';
import { renderProgress } from '../../src/publish/progress.js';
import { Redactor } from '../../src/publish/redact.js';
import { renderVerification } from '../../src/publish/verification.js';
import { EventLog, makeBase, markdownShape } from './event-log.js';

type TestRun = EventOf<'test_run'>;

function run(
  phase: 'baseline' | 'final',
  o: { exitCode?: number; passed?: string[]; failed?: string[]; output?: string } = {},
): TestRun {
  const passedNames = o.passed ?? [];
  const failedNames = o.failed ?? [];
  const named = passedNames.length + failedNames.length > 0;
  return {
    id: phase === 'baseline' ? 1 : 9,
    ts: '2026-12-01T00:00:00.000Z',
    kind: 'test_run',
    phase,
    command: 'npm test',
    exitCode: o.exitCode ?? (failedNames.length > 0 ? 1 : 0),
    killed: null,
    durationMs: 1000,
    summary: {
      runner: 'node',
      passed: named ? passedNames.length : null,
      failed: named ? failedNames.length : null,
      skipped: null,
      passedNames,
      failedNames,
    },
    output: o.output ?? 'test output',
    outputBytes: 11,
  };
}

const jestNotFound = run('baseline', {
  exitCode: 127,
  output: '\n> calc@1.0.0 test\n> jest\n\nsh: 1: jest: not found\n',
});

/** The run as the agent appends it (the store gives the id and time). */
function asNew(r: TestRun): NewEvent {
  const { id, ts, ...rest } = r;
  assert.ok(id > 0 && ts !== '');
  return rest;
}

/** The text above the counts table. */
function verdictPart(md: string): string {
  return md.slice(0, md.indexOf('Test command:'));
}

describe('the verdict line above the verification tables', () => {
  test('names failures that were there before and are still there', () => {
    const md = renderVerification(
      run('baseline', { passed: ['a'], failed: ['flaky network', 'parse empty'] }),
      run('final', { passed: ['a', 'parse empty'], failed: ['flaky network'] }),
    );
    const top = verdictPart(md);
    assert.match(top, /Failing before and after, not caused by this change:\*\* `flaky network`\./);
    assert.doesNotMatch(top, /Passing before, failing now/);
    // The per-test table is still there, below.
    assert.ok(md.indexOf('| `parse empty` | ❌ | ✅ |') > md.indexOf('not caused by this change'));
  });

  test('names regressions', () => {
    const md = renderVerification(
      run('baseline', { passed: ['a', 'b'], failed: ['x'] }),
      run('final', { passed: ['a', 'x'], failed: ['b'] }),
    );
    assert.match(verdictPart(md), /Passing before, failing now:\*\* `b`\./);
  });

  test('says nothing extra when nothing failed before or after', () => {
    const md = renderVerification(
      run('baseline', { passed: ['a'], failed: ['x'] }),
      run('final', { passed: ['a', 'x'] }),
    );
    assert.equal(verdictPart(md), '');
  });

  test('caps the names it lists and shows them as code', () => {
    const many = Array.from({ length: 25 }, (_, i) => `t${String(i).padStart(2, '0')} @someone #1`);
    const md = renderVerification(
      run('baseline', { passed: ['a'], failed: many }),
      run('final', { passed: ['a'], failed: many }),
      { maxRows: 50 },
    );
    const top = verdictPart(md);
    assert.match(top, /`t09 @someone #1`, and 15 more\./);
    assert.doesNotMatch(top, /t10/);
  });

  test('a broken baseline says the environment is broken and quotes the start of its output, fenced', () => {
    const md = renderVerification(jestNotFound, run('final', { passed: ['a'] }));
    const top = verdictPart(md);
    assert.match(
      top,
      /The test environment is broken:\*\* the baseline run could not run \(a command was not found \(exit code 127\): sh: 1: jest: not found\)/,
    );
    assert.match(top, /```text\n> calc@1\.0\.0 test\n> jest\n\nsh: 1: jest: not found\n```/);
    assert.match(top, /issue-agent\.yml/);
  });

  test('the quoted output cannot break out of its fence, and is redacted', () => {
    const secret = 'hunter2-very-secret-token';
    const output = `\`\`\`\n</details>\n@everyone\nTOKEN=${secret}\nsh: 1: jest: not found\n${'x\n'.repeat(100)}`;
    const md = renderVerification(
      run('baseline', { exitCode: 127, output }),
      run('final', { passed: ['a'] }),
      {
        redact: (t) => t.replaceAll(secret, '[REDACTED]'),
      },
    );
    assert.ok(!md.includes(secret));
    assert.ok(markdownShape(md).fencesBalanced);
    assert.match(md, /````text\n```\n<\/details>/);
    // The first 20 lines, then a mark that there is more.
    assert.match(md, /\n\[…\]\n````/);
  });

  test('a final run that could not run after a baseline that ran blames the change', () => {
    const md = renderVerification(run('baseline', { passed: ['a'], failed: ['x'] }), {
      ...jestNotFound,
      phase: 'final',
    });
    assert.match(verdictPart(md), /The final run could not run\*\* .*the change broke the test setup/);
  });
});

describe('the words for an unverified run whose environment is broken', () => {
  test('the outcome sentence says the environment is broken, not that tests fail', () => {
    const words = describeOutcome({ outcome: 'unverified', cause: 'environment' });
    assert.match(words, /the test environment is broken/);
    assert.doesNotMatch(words, /tests do not prove/);
    assert.match(describeOutcome({ outcome: 'unverified' }), /tests do not prove/);
  });

  test('the progress comment of an ended run says so, with what to do', () => {
    const v = verdict(jestNotFound, run('final', { passed: ['a'] }));
    assert.equal(v.cause, 'environment');
    const text = renderProgress({
      kind: 'ended',
      jobId: 'job-1',
      outcome: v.outcome,
      reason: v.reason,
      summary: null,
      cause: 'environment',
    });
    assert.match(text, /Not verified: the test environment is broken/);
    assert.match(text, /\*\*Why:\*\* the test environment is broken: the baseline test run could not run/);
    assert.match(text, /`setup`/);
  });

  test('a pull request opened for such a run says so too', () => {
    const text = renderProgress({
      kind: 'pr_opened',
      jobId: 'job-1',
      url: 'https://github.com/o/r/pull/2',
      number: 2,
      outcome: 'unverified',
      draft: true,
      cause: 'environment',
    });
    assert.match(text, /the test environment is broken/);
    assert.match(text, /`setup`/, 'and what to do about it');
  });

  test('the pull request body carries the outcome words and the broken-environment paragraph', () => {
    const log = new EventLog();
    log.add(asNew(jestNotFound));
    log.step({ tool: 'finish', input: { summary: 'Done.' }, output: 'ok' });
    log.checkpoint(1, 'diff --git a/x b/x\n');
    const final = run('final', { passed: ['a'] });
    log.add(asNew(final));
    const v = verdict(jestNotFound, final);
    log.outcome({
      outcome: v.outcome,
      reason: v.reason,
      ...(v.cause === undefined ? {} : { cause: v.cause }),
    });
    const body = renderPullRequest({
      base: makeBase(),
      events: log.events,
      issue: { number: 7, title: 't' },
      trajectoryLink: 'https://agent.example/t.json',
      redactor: new Redactor([]),
    }).body;
    assert.match(body, /\*\*Outcome:\*\* ⚠️ Not verified: the test environment is broken/);
    const section = body.slice(body.indexOf('### Verification'), body.indexOf('### Files changed'));
    assert.match(section, /The test environment is broken:\*\* the baseline run could not run/);
    assert.ok(markdownShape(body).fencesBalanced);
  });
});
