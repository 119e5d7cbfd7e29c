import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { cancelRequest, addPending } from '../../src/queue/control.js';
import type { FixJob } from '../../src/queue/payloads.js';
import { connectionOptions, issueKey, openQueues, redisClient, type Queues } from '../../src/queue/queues.js';
import type { RunSummary } from '../../src/server/runs.js';
import { redisSkipReason, startRedis, type TestRedis } from '../support/redis-server.js';
import { admin, fixJob, makeRun, outcomeEvent, serverOptions, startServer, step } from './helpers.js';
import { parsePrometheusText, valueOf } from './prometheus-text.js';

const skip = redisSkipReason();
type Started = Awaited<ReturnType<typeof startServer>>;

/**
 * Runs the queue knows about (real BullMQ on a real Redis): queued, running and finished runs in the
 * list; cancel of a waiting job (removed, listed as cancelled), of a waiting request behind a running
 * job, and of a running job (flagged; its worker ends it `cancelled`); metrics when a run finishes.
 */
describe('run server: runs in the queue', { skip, timeout: 120_000 }, () => {
  let redisServer: TestRedis;
  let redis: Redis;
  let queues: Queues;
  let workDir: string;
  let server: Started;
  const prefix = `srv${Math.random().toString(36).slice(2, 7)}`;

  before(async () => {
    redisServer = await startRedis();
    redis = redisClient(redisServer.url, 'test-server');
    const settings = { redisUrl: redisServer.url, prefix, jobAttempts: 1, retryBackoffMs: 10 };
    queues = openQueues(settings);
    workDir = mkdtempSync(join(tmpdir(), 'ia-server-q-'));
    server = await startServer(serverOptions(workDir, { queues, redis, settings }));
  });

  after(async () => {
    await server.close();
    await queues.close();
    redis.disconnect();
    await redisServer.stop();
    rmSync(workDir, { recursive: true, force: true });
  });

  const run = async (id: string): Promise<RunSummary | null> => {
    const res = await fetch(`${server.url}/api/runs/${id}`, { headers: admin });
    if (res.status === 404) return null;
    return ((await res.json()) as { run: RunSummary }).run;
  };
  const waitFor = async (what: string, check: () => Promise<boolean>, ms = 20_000) => {
    const deadline = Date.now() + ms;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await delay(50);
    }
  };
  const cancel = (id: string) =>
    fetch(`${server.url}/api/runs/${id}/cancel`, { method: 'POST', headers: admin });
  const add = (id: string, job: FixJob) =>
    queues.fix.add(job.kind, job, {
      jobId: id,
      deduplication: { id: issueKey(job.repo.id, job.issue.number) },
    });

  it('a waiting job is listed as queued; cancel removes it and it stays listed as cancelled', async () => {
    const job = fixJob('acme/calc', 5);
    await add('r1-i5-aaa', job);
    await waitFor('the queued run', async () => (await run('r1-i5-aaa'))?.state === 'queued');
    const s = await run('r1-i5-aaa');
    assert.equal(s?.repo, 'acme/calc');
    assert.equal(s.issue, 5);
    assert.equal(s.title, job.issue.title);
    const res = await cancel('r1-i5-aaa');
    assert.equal(res.status, 202);
    const body = (await res.json()) as { run: RunSummary };
    assert.equal(body.run.state, 'finished');
    assert.equal(body.run.outcome, 'cancelled');
    assert.equal(await queues.fix.getJob('r1-i5-aaa'), undefined, 'removed from the queue');
    assert.equal(await cancelRequest(redis, prefix, 'r1-i5-aaa'), 'admin');
    assert.equal((await run('r1-i5-aaa'))?.outcome, 'cancelled');
    assert.equal((await cancel('r1-i5-aaa')).status, 409, 'a finished run cannot be cancelled');
  });

  it('a request waiting behind a running job is listed and can be cancelled on its own', async () => {
    const job = fixJob('acme/calc', 6);
    await addPending(redis, prefix, issueKey(job.repo.id, 6), { jobId: 'r1-i6-bbb', job });
    await waitFor('the pending run', async () => (await run('r1-i6-bbb'))?.state === 'queued');
    const res = await cancel('r1-i6-bbb');
    assert.equal(res.status, 202);
    assert.equal(((await res.json()) as { run: RunSummary }).run.outcome, 'cancelled');
    assert.equal(await redis.llen(`${prefix}:pending:${issueKey(job.repo.id, 6)}`), 0);
  });

  it('a running job is flagged, its worker ends it cancelled, and /metrics counts the run once', async () => {
    const metricsText = async () => {
      const res = await fetch(`${server.url}/metrics`, { headers: admin });
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
      return parsePrometheusText(await res.text()).samples;
    };
    const before = await metricsText();
    // A stand-in worker on the real queue: it writes a trajectory like the real one and polls the
    // cancel flag as runFixJob does.
    const worker = new Worker<FixJob>(
      'fix',
      async (j) => {
        const id = j.id ?? '';
        const store = makeRun(workDir, id, { repo: 'acme/calc', issue: 7, steps: 1, finished: false });
        for (let i = 0; ; i++) {
          const by = await cancelRequest(redis, prefix, id);
          if (by !== null) {
            store.appendSync(outcomeEvent('cancelled', `cancelled by ${by}`));
            return { outcome: 'cancelled', pullRequest: null, pushed: false, trajectory: '' };
          }
          if (i === 0) for (const e of step(2)) store.appendSync(e);
          await delay(50);
        }
      },
      { connection: connectionOptions(redisServer.url, 'test-worker'), prefix },
    );
    try {
      await add('r1-i7-ccc', fixJob('acme/calc', 7));
      await waitFor('the run to be active with steps', async () => {
        const s = await run('r1-i7-ccc');
        return s?.state === 'active' && s.steps === 2;
      });
      const res = await cancel('r1-i7-ccc');
      assert.equal(res.status, 202);
      assert.equal(
        ((await res.json()) as { run: RunSummary }).run.state,
        'active',
        'it ends when its worker stops it',
      );
      await waitFor('the run to finish', async () => (await run('r1-i7-ccc'))?.state === 'finished');
      const done = await run('r1-i7-ccc');
      assert.equal(done?.outcome, 'cancelled');
      assert.equal(done.steps, 2);
      const after = await metricsText();
      assert.equal(
        valueOf(after, 'issue_agent_runs_total', { outcome: 'cancelled' }) -
          valueOf(before, 'issue_agent_runs_total', { outcome: 'cancelled' }),
        1,
      );
      assert.equal(
        valueOf(after, 'issue_agent_tokens_total', { kind: 'input' }) -
          valueOf(before, 'issue_agent_tokens_total', { kind: 'input' }),
        200,
      );
      assert.equal(
        valueOf(after, 'issue_agent_model_latency_seconds_count') -
          valueOf(before, 'issue_agent_model_latency_seconds_count'),
        2,
      );
      assert.ok(valueOf(after, 'issue_agent_cost_usd_total') > valueOf(before, 'issue_agent_cost_usd_total'));
      assert.ok(after.some((s) => s.name === 'issue_agent_queue_depth' && s.labels.queue === 'fix'));
      assert.ok(
        after.some((s) => s.name === 'process_cpu_user_seconds_total'),
        'default process metrics',
      );
      // Scraped again: nothing is counted twice.
      const again = await metricsText();
      assert.equal(
        valueOf(again, 'issue_agent_runs_total', { outcome: 'cancelled' }),
        valueOf(after, 'issue_agent_runs_total', { outcome: 'cancelled' }),
      );
    } finally {
      await worker.close();
    }
  });

  it('serves bull-board to the admin and reports Redis in /healthz', async () => {
    const board = await fetch(`${server.url}/admin/queues`, { headers: admin });
    assert.equal(board.status, 200);
    assert.match(await board.text(), /<html/i);
    const api = await fetch(`${server.url}/admin/queues/api/queues?activeQueue=fix&page=1&jobsPerPage=10`, {
      headers: admin,
    });
    assert.equal(api.status, 200);
    const names = ((await api.json()) as { queues: { name: string }[] }).queues.map((q) => q.name).sort();
    assert.deepEqual(names, ['fix', 'intake']);
    assert.equal((await fetch(`${server.url}/admin/queues`)).status, 401);
    const health = (await (await fetch(`${server.url}/healthz`)).json()) as { ok: boolean; redis: string };
    assert.deepEqual(health, { ok: true, redis: 'up' });
  });

  it('answers 503 to a start request without the App credentials', async () => {
    const res = await fetch(`${server.url}/api/runs`, {
      method: 'POST',
      headers: { ...admin, 'content-type': 'application/json' },
      body: JSON.stringify({ repo: 'acme/calc', issue: 1 }),
    });
    assert.equal(res.status, 503);
    assert.match(((await res.json()) as { error: { message: string } }).error.message, /credentials/);
  });
});
