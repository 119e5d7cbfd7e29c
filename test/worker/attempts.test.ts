import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { Outcome } from '../../src/agent/run-agent.js';
import { FileEventStore } from '../../src/events/file-event-store.js';
import { FileRunStorage } from '../../src/events/run-storage.js';
import { asksNothingNew, buildFixJob, parseTries } from '../../src/app/trigger-rules.js';
import type { Trigger } from '../../src/queue/trigger.js';
import { parseRepoConfig } from '../../src/config/repo-config.js';
import { renderPullRequest, type AttemptTableRow } from '../../src/publish/pr-body.js';
import { renderProgress } from '../../src/publish/progress.js';
import { Redactor } from '../../src/publish/redact.js';
import {
  AttemptNotStarted,
  crashedStanding,
  diffLines,
  rankAttempts,
  runAttempts,
  standingOf,
  type AttemptStanding,
} from '../../src/worker/stages/attempts.js';
import { readDecision, recordDecision, type AttemptSlot } from '../../src/worker/stages/attempt-run.js';
import type { JobContext } from '../../src/worker/stages/types.js';
import { EventLog, makeBase } from '../publish/event-log.js';

function standing(number: number, o: Partial<AttemptStanding>): AttemptStanding {
  return {
    number,
    runId: `job-a${number}`,
    outcome: 'resolved',
    reason: '',
    newlyPassing: 1,
    failing: 0,
    changedLines: 10,
    filesChanged: 1,
    usd: 0.1,
    ...o,
  };
}

test('ranking: resolved beats unverified beats the rest; then more newly passing tests, fewer lines, lower cost', () => {
  const order = (list: AttemptStanding[]): number[] => rankAttempts(list).map((s) => s.number);
  assert.deepEqual(
    order([
      standing(1, { outcome: 'unverified', changedLines: 1 }),
      standing(2, { outcome: 'failed', newlyPassing: 9 }),
      standing(3, { outcome: 'resolved', changedLines: 500 }),
    ]),
    [3, 1, 2],
  );
  assert.deepEqual(
    order([standing(1, { newlyPassing: 1 }), standing(2, { newlyPassing: 3, changedLines: 900 })]),
    [2, 1],
    'more newly passing tests first',
  );
  assert.deepEqual(
    order([
      standing(1, { changedLines: 40 }),
      standing(2, { changedLines: 4 }),
      standing(3, { changedLines: null }),
    ]),
    [2, 1, 3],
    'fewer changed lines; a change too large to keep ranks after any counted one',
  );
  assert.deepEqual(order([standing(1, { usd: 0.3 }), standing(2, { usd: 0.2 })]), [2, 1], 'lower cost');
  assert.deepEqual(order([standing(2, {}), standing(1, {})]), [1, 2], 'ties: the earlier attempt');
  assert.deepEqual(
    order([
      crashedStanding(1, 'a', 'sandbox died', 0),
      standing(2, { outcome: 'no_change', changedLines: null }),
    ]),
    [2, 1],
  );
});

test('an attempt’s standing is read from its trajectory: newly passing tests, failures, changed lines, cost', () => {
  const log = new EventLog();
  log.testRun('baseline', { passed: 2, failed: 1, passedNames: ['a', 'b'], failedNames: ['c'] });
  log.step({ tool: 'bash', input: { command: 'edit' }, output: 'ok' });
  log.checkpoint(1, 'diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1,2 @@\n-old\n+new\n+more\n');
  log.testRun('final', { passed: 4, failed: 0, passedNames: ['a', 'b', 'c', 'd'], failedNames: [] });
  const outcome = log.add({
    kind: 'outcome',
    outcome: 'resolved',
    reason: 'tests pass',
    summary: 'fixed',
    diffStat: ' x | 3 ++-',
  }) as Outcome;
  const s = standingOf(2, 'job-a2', { base: makeBase(), events: log.events }, outcome);
  assert.equal(s.outcome, 'resolved');
  assert.equal(s.newlyPassing, 2, 'c was fixed, d is new');
  assert.equal(s.failing, 0);
  assert.equal(s.changedLines, 3);
  assert.equal(s.filesChanged, 1);
  assert.ok(Math.abs(s.usd - 0.0123) < 1e-9);
  assert.equal(diffLines('--- a/x\n+++ b/x\n-a\n+b\n context\n'), 2);
});

test('attempts run at most `parallel` at once; one that throws never stops the others', async () => {
  let running = 0;
  let peak = 0;
  const results = await runAttempts({
    count: 4,
    parallel: 2,
    stopOnFirstResolved: false,
    signal: new AbortController().signal,
    resolved: (v: string) => v === 'resolved',
    run: async (k) => {
      running += 1;
      peak = Math.max(peak, running);
      await new Promise((r) => setTimeout(r, 20));
      running -= 1;
      if (k === 2) throw new Error('sandbox died');
      return k === 3 ? 'resolved' : 'unverified';
    },
  });
  assert.equal(peak, 2);
  assert.deepEqual(
    results.map((r) => (r.ok ? r.value : 'threw')),
    ['unverified', 'threw', 'resolved', 'unverified'],
  );
});

test('stopOnFirstResolved aborts the running attempts and leaves the rest unstarted', async () => {
  const aborted: number[] = [];
  const results = await runAttempts({
    count: 3,
    parallel: 2,
    stopOnFirstResolved: true,
    signal: new AbortController().signal,
    resolved: (v: string) => v === 'resolved',
    run: (k, signal) =>
      new Promise<string>((resolve) => {
        if (k === 1) {
          setTimeout(() => {
            resolve('resolved');
          }, 10);
          return;
        }
        signal.addEventListener('abort', () => {
          aborted.push(k);
          resolve('cancelled');
        });
      }),
  });
  assert.deepEqual(aborted, [2]);
  assert.equal(results[0]?.ok === true ? results[0].value : null, 'resolved');
  assert.ok(results[2]?.ok === false && results[2].error instanceof AttemptNotStarted);
});

test('`(try N)` in a request sets this job’s attempts (1–5) and leaves the marker out of the instruction', () => {
  assert.deepEqual(parseTries('please fix this (try 3)'), { instruction: 'please fix this', attempts: 3 });
  assert.deepEqual(parseTries('(Try 9) and be careful'), { instruction: 'and be careful', attempts: 5 });
  assert.deepEqual(parseTries('(try 0)'), { instruction: '', attempts: 1 });
  assert.deepEqual(parseTries('try 3 things'), { instruction: 'try 3 things', attempts: null });
});

test('a bare `(try N)` while a job runs is a request of its own (it waits), not a duplicate of that job', () => {
  const repoConfig = parseRepoConfig({}, { label: 'agent', handle: '@agent' });
  const mention = (body: string): Trigger => ({
    v: 1,
    kind: 'mention',
    deliveryId: `d-${body.length}`,
    installationId: 5,
    repo: { id: 7, owner: 'acme', name: 'calc', private: false },
    issue: { number: 3, title: 'Bug', state: 'open', isPullRequest: false, body: 'text' },
    sender: { login: 'maria', id: 42, type: 'User' },
    comment: { id: 99, body },
    receivedAt: new Date().toISOString(),
  });
  const job = (instruction: string) =>
    buildFixJob(mention(`@agent ${instruction}`), { kind: 'issue', number: 3 }, repoConfig, instruction, []);
  const live = (n: number) => ({ repository: 1, live: n });
  // The live job makes the repository's one attempt.
  assert.equal(asksNothingNew(job(''), live(1)), true);
  assert.equal(asksNothingNew(job('(try 3)'), live(1)), false);
  assert.equal(asksNothingNew(job('(try 1)'), live(1)), true);
  assert.equal(asksNothingNew(job('use the other parser'), live(1)), false);
  // The live job was asked for three: the same again, or a second label, is a repeat; two is new.
  assert.equal(asksNothingNew(job('(try 3)'), live(3)), true);
  assert.equal(asksNothingNew(job(''), live(3)), true);
  assert.equal(asksNothingNew(job('(try 2)'), live(3)), false);
});

test('`attempts` and `stopOnFirstResolved` in the repository config: 1–5, defaults 1 and false', () => {
  const defaults = { label: 'agent', handle: '@agent' };
  const c = parseRepoConfig({}, defaults);
  assert.equal(c.attempts, 1);
  assert.equal(c.stopOnFirstResolved, false);
  assert.equal(parseRepoConfig({ attempts: 5, stopOnFirstResolved: true }, defaults).attempts, 5);
  assert.throws(() => parseRepoConfig({ attempts: 6 }, defaults), /attempts/);
  assert.throws(() => parseRepoConfig({ attempts: 0 }, defaults), /attempts/);
});

test('the progress comment shows each attempt of N, and the PR body a table of all of them', () => {
  const progress = renderProgress({
    kind: 'working',
    jobId: 'job',
    step: 7,
    tokens: 1000,
    costUsd: 0.3,
    elapsedMs: 5000,
    attempts: [
      { number: 2, of: 3, step: 3, costUsd: 0.1, outcome: null },
      { number: 1, of: 3, step: 4, costUsd: 0.2, outcome: 'resolved' },
    ],
  });
  assert.match(progress, /3 independent attempts/);
  assert.match(progress, /Attempt 1 of 3: .*ended `resolved` after 4 steps/);
  assert.match(progress, /Attempt 2 of 3: working, step 3/);

  const log = new EventLog();
  log.step({ tool: 'finish', input: { summary: 'done' }, output: 'ok' });
  const rows: AttemptTableRow[] = [
    {
      ...standing(1, { outcome: 'unverified', changedLines: 4 }),
      winner: false,
      link: 'https://agent.example/runs/job',
    },
    {
      ...standing(2, { changedLines: 2, usd: 0.25 }),
      winner: true,
      link: 'https://agent.example/runs/job-a2',
    },
    {
      ...crashedStanding(3, 'job-a3', 'the sandbox did not start', 0),
      winner: false,
      link: 'kept on the host',
    },
  ];
  const body = renderPullRequest({
    base: makeBase(),
    events: log.events,
    issue: { number: 7, title: 't' },
    trajectoryLink: 'https://agent.example/runs/job-a2',
    redactor: new Redactor([]),
    attempts: rows,
  }).body;
  assert.match(body, /### Attempts/);
  assert.match(body, /\| 2 ✅ \*\*published\*\* \| ✅ `resolved` \| 1 \| 0 \| 2 lines in 1 file \| \$0\.25/);
  assert.match(body, /\[trajectory\]\(https:\/\/agent\.example\/runs\/job\)/);
  assert.match(body, /\| 3 \| 💥 `crashed` .*kept on the host \| the sandbox did not start \|/);
  assert.match(body, /\| \*\*Total\*\* \| \| \| \| \| \$0\.3500/);
});

test('a retried best-of-N job keeps the winner it chose: an attempt that threw the first time is not run again and cannot take over', async () => {
  const jobsDir = mkdtempSync(join(tmpdir(), 'ia-decision-'));
  try {
    const jobId = 'octo-repo-7-abc';
    const job = { storage: new FileRunStorage(jobsDir), jobId };
    const slot = (k: number, outcome: 'resolved' | null): AttemptSlot => {
      const runId = k === 1 ? jobId : `${jobId}-a${k}`;
      const ctx = { jobId: runId } as JobContext;
      if (outcome === null) return { number: k, ctx, store: null, outcome: null };
      const store = FileEventStore.create(join(jobsDir, runId, 'trajectory'), makeBase());
      store.appendSync({ kind: 'outcome', outcome, reason: 'tests pass', summary: null, diffStat: '' });
      return { number: k, ctx, store, outcome: { outcome, reason: 'tests pass' } as Outcome };
    };
    // No choice recorded yet: the job runs its attempts.
    const first = [slot(1, 'resolved'), slot(2, null)];
    assert.equal(await readDecision(job, first), null);

    // First try: attempt 2 threw; attempt 1 wins and the choice is recorded before publishing.
    const winner = first[0];
    assert.ok(winner?.store);
    const table = [
      { ...standing(1, { runId: jobId, changedLines: 40 }), winner: true, link: 'run 1' },
      { ...crashedStanding(2, `${jobId}-a2`, 'sandbox died', 0), winner: false, link: 'run 2' },
    ];
    await recordDecision(job, {
      winner: {
        ctx: winner.ctx,
        store: winner.store,
        outcome: { outcome: 'resolved', reason: 'tests pass' } as Outcome,
      },
      error: null,
      table,
    });

    // The retry finds attempt 2 resolved with a smaller change (had it been run again): the choice holds.
    const retry = [winner, slot(2, 'resolved')];
    const decided = await readDecision(job, retry);
    assert.ok(decided?.winner);
    assert.equal(decided.winner.ctx.jobId, jobId);
    assert.equal(decided.winner.outcome.outcome, 'resolved');
    assert.deepEqual(decided.table, table);

    // A recorded winner whose trajectory lost its outcome is an error, not a silent re-run.
    await assert.rejects(readDecision(job, [slot(1, null), slot(2, null)]), /has no outcome/);
  } finally {
    rmSync(jobsDir, { recursive: true, force: true });
  }
});
