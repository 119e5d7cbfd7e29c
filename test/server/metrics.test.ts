import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ServerMetrics } from '../../src/server/metrics.js';
import type { FinishedRun } from '../../src/server/runs.js';

const run = (id: string, attemptOf: string | null, outcome: string): FinishedRun => ({
  summary: {
    id,
    repo: 'acme/calc',
    issue: 1,
    pull: null,
    kind: 'fix-issue',
    title: 't',
    state: 'finished',
    outcome,
    steps: 3,
    tokens: 10,
    costUsd: 0.01,
    durationMs: 1000,
    queuedAt: null,
    startedAt: null,
    finishedAt: null,
    lastEventId: 3,
    prUrl: null,
    approvedBy: null,
    ciRound: null,
    attempt: attemptOf === null ? { number: 1, of: 3, jobId: id } : { number: 2, of: 3, jobId: attemptOf },
  },
  attemptOf,
  reader: null,
  queuedAt: 1000,
  startedAt: 3000,
});

/** A best-of-3 job is one run in `issue_agent_runs_total` and one queue wait, not three. */
test('a later attempt of a best-of-N job is not counted as a run of its own', async () => {
  const metrics = new ServerMetrics({ queues: [], redis: null, prefix: 'p' });
  metrics.recordRun(run('r1-i1-job', null, 'resolved'));
  metrics.recordRun(run('r1-i1-job-a2', 'r1-i1-job', 'unverified'));
  metrics.recordRun(run('r1-i1-job-a3', 'r1-i1-job', 'failed'));
  metrics.recordRun(run('r1-i1-job', null, 'resolved'));
  const text = await metrics.text();
  assert.match(text, /^issue_agent_runs_total\{outcome="resolved"\} 1$/m);
  for (const outcome of ['unverified', 'failed'])
    assert.doesNotMatch(text, new RegExp(`^issue_agent_runs_total\\{outcome="${outcome}"\\} [1-9]`, 'm'));
  assert.match(text, /^issue_agent_queue_wait_seconds_count 1$/m);
});
