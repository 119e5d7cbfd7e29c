import assert from 'node:assert/strict';
import { test } from 'node:test';
import { oracle } from '../../src/model-sim/index.js';
import { startStack } from '../support/pipeline.js';
import { freePort, redisSkipReason } from '../support/redis-server.js';

/** `name{labels} value` → value, from Prometheus text. */
function sample(text: string, series: string): number | null {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? null : Number(line.slice(series.length + 1));
}

/**
 * A worker serves its own metrics (ISSUE_AGENT_WORKER_METRICS_PORT): after one job, the job is
 * counted as completed and its queue wait, sandbox start, steps and model calls are observed; nothing
 * is running. A worker whose port is taken stops at start. Real App, workers, Redis and simulators.
 */
test(
  'a worker serves its own Prometheus metrics: one job counted, its timings observed',
  { skip: redisSkipReason(), timeout: 300_000 },
  async (t) => {
    const port = await freePort();
    const stack = await startStack({
      owner: 'acme',
      repo: 'calc',
      maintainer: { login: 'maria', permission: 'write' },
      modelKey: 'sk-ant-worker-metrics-0123456789',
      policy: (fixture) => oracle(fixture.patch),
      env: { ISSUE_AGENT_WORKER_METRICS_PORT: String(port) },
    });
    t.after(() => stack.stop());
    const { sim, pipeline } = stack;
    const scrape = async (): Promise<string> => {
      const res = await fetch(`http://127.0.0.1:${port}/metrics`);
      assert.equal(res.status, 200);
      return res.text();
    };
    const before = await scrape();
    assert.equal(sample(before, 'issue_agent_worker_jobs_total{result="completed"}'), 0);
    assert.equal(sample(before, 'issue_agent_worker_jobs_active'), 0);
    const n = sim.createIssue('acme', 'calc', {
      title: 'Average rounds wrong',
      body: 'x',
      author: 'maria',
    }).number;
    await sim.label('acme', 'calc', n, 'agent', 'maria');
    await sim.waitFor(
      () => sim.pulls('acme', 'calc').length === 1,
      120_000,
      () => pipeline.logs(),
    );
    let text = '';
    await sim.waitFor(
      async () => {
        text = await scrape();
        return sample(text, 'issue_agent_worker_jobs_total{result="completed"}') === 1;
      },
      30_000,
      () => `the job counted\n${text}`,
    );
    assert.equal(sample(text, 'issue_agent_worker_jobs_active'), 0);
    assert.equal(sample(text, 'issue_agent_worker_queue_wait_seconds_count'), 1);
    assert.equal(sample(text, 'issue_agent_worker_sandbox_start_seconds_count'), 1);
    assert.ok((sample(text, 'issue_agent_worker_step_duration_seconds_count') ?? 0) > 0, text);
    assert.ok((sample(text, 'issue_agent_worker_model_latency_seconds_count') ?? 0) > 0, text);
    assert.equal(sample(text, 'issue_agent_worker_lost_locks_total'), 0);
    assert.equal((await fetch(`http://127.0.0.1:${port}/other`)).status, 404);
    // A second worker with the same port stops at start, before it takes any job, and says why.
    await assert.rejects(
      pipeline.startWorker(),
      /ISSUE_AGENT_WORKER_METRICS_PORT: cannot listen on 127\.0\.0\.1:\d+/,
    );
  },
);
