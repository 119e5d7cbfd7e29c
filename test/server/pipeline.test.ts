import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { oracle } from '../../src/model-sim/index.js';
import { startStack, type Stack } from '../support/pipeline.js';
import { redisSkipReason } from '../support/redis-server.js';
import type { RunSummary } from '../../src/server/runs.js';
import { signInWithGitHub } from './helpers.js';
import { parsePrometheusText, valueOf } from './prometheus-text.js';

const skip = redisSkipReason();
const OWNER = 'acme';
const REPO = 'calc';

/**
 * The run server inside the App (src/app/main.ts) with a real worker: a run started through
 * POST /api/runs goes through intake (progress comment on the issue), runs, opens its PR, and the
 * App's /metrics counts it once it finishes.
 */
describe('run server in the App pipeline', { skip, timeout: 300_000 }, () => {
  let stack: Stack | undefined;
  let url: string;
  let auth: { authorization: string };

  before(async () => {
    stack = await startStack({
      owner: OWNER,
      repo: REPO,
      maintainer: { login: 'maria', permission: 'write' },
      modelKey: 'sk-ant-server-test-0123456789abcdef',
      policy: (fixture) => oracle(fixture.patch),
      githubSignIn: true,
    });
    stack.sim.addUser({ login: 'bob' });
    stack.sim.setPermission(OWNER, REPO, 'bob', 'read');
    url = stack.pipeline.appUrl;
    auth = { authorization: `Bearer ${stack.pipeline.adminToken}` };
  });

  after(async () => {
    await stack?.stop();
  });

  /** Polls the run until it is finished, as whoever `headers` authenticate. */
  const finished = async (id: string, headers: Record<string, string>): Promise<RunSummary> => {
    let run: RunSummary | undefined;
    const deadline = Date.now() + 180_000;
    for (;;) {
      const r = await fetch(`${url}/api/runs/${id}`, { headers });
      if (r.status === 200) run = ((await r.json()) as { run: RunSummary }).run;
      if (run?.state === 'finished') return run;
      if (Date.now() > deadline)
        throw new Error(`the run did not finish: ${JSON.stringify(run)}\n${stack?.pipeline.logs() ?? ''}`);
      await delay(200);
    }
  };

  const metrics = async () => {
    const res = await fetch(`${url}/metrics`, { headers: auth });
    assert.equal(res.status, 200);
    return parsePrometheusText(await res.text()).samples;
  };

  it('4. a run started from the API finishes with a PR and moves the /metrics counters', async () => {
    if (stack === undefined) throw new Error('no stack');
    const { sim, pipeline } = stack;
    assert.equal((await fetch(`${url}/metrics`)).status, 401);
    assert.equal((await fetch(`${url}/admin/queues`)).status, 401);
    assert.equal((await fetch(`${url}/admin/queues`, { headers: auth })).status, 200);
    const before = await metrics();
    const issue = sim.createIssue(OWNER, REPO, {
      title: 'Average rounds wrong [api]',
      body: 'average() truncates instead of rounding: average([1, 2, 2]) should be 1.67.',
      author: 'maria',
    }).number;
    const res = await fetch(`${url}/api/runs`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ repo: `${OWNER}/${REPO}`, issue, instructions: 'keep the change small' }),
    });
    const started = (await res.json()) as { id: string; status: string };
    assert.equal(res.status, 202, `${JSON.stringify(started)}\n${pipeline.logs()}`);
    assert.match(started.id, /^[A-Za-z0-9-]+$/);
    assert.equal(started.status, 'queued');
    const run = await finished(started.id, auth);
    assert.equal(run.outcome, 'resolved');
    assert.equal(run.repo, `${OWNER}/${REPO}`);
    assert.equal(run.issue, issue);
    assert.ok(run.steps > 0 && run.tokens > 0);
    assert.match(run.prUrl ?? '', /\/pull\/\d+$/);
    assert.ok(run.queuedAt !== null && run.startedAt !== null && run.finishedAt !== null);
    // The same path as a label: a progress comment on the issue, and the instruction reached the job.
    assert.ok(sim.comments(OWNER, REPO, issue).some((c) => c.body.includes('issue-agent:progress')));
    const events = (await (
      await fetch(`${url}/api/runs/${started.id}/events?limit=1000`, { headers: auth })
    ).json()) as {
      events: { kind: string }[];
    };
    assert.equal(events.events.at(-1)?.kind, 'outcome');
    const base = (await (await fetch(`${url}/api/runs/${started.id}`, { headers: auth })).json()) as {
      base: { task: { instructions: string[] } };
    };
    assert.deepEqual(base.base.task.instructions, ['keep the change small']);
    const afterRun = await metrics();
    assert.equal(
      valueOf(afterRun, 'issue_agent_runs_total', { outcome: 'resolved' }) -
        valueOf(before, 'issue_agent_runs_total', { outcome: 'resolved' }),
      1,
    );
    assert.ok(
      valueOf(afterRun, 'issue_agent_tokens_total', { kind: 'output' }) >
        valueOf(before, 'issue_agent_tokens_total', { kind: 'output' }),
    );
    assert.ok(
      valueOf(afterRun, 'issue_agent_step_duration_seconds_count') >
        valueOf(before, 'issue_agent_step_duration_seconds_count'),
    );
    assert.equal(
      valueOf(afterRun, 'issue_agent_queue_wait_seconds_count') -
        valueOf(before, 'issue_agent_queue_wait_seconds_count'),
      1,
    );
    assert.deepEqual(sim.violations, []);
  });

  it('a maintainer signed in with GitHub starts a run from the browser; a reader may not', async () => {
    if (stack === undefined) throw new Error('no stack');
    const { sim, pipeline } = stack;
    const issue = sim.createIssue(OWNER, REPO, {
      title: 'Average rounds wrong [signed-in]',
      body: 'average() truncates instead of rounding: average([1, 2, 2]) should be 1.67.',
      author: 'maria',
    }).number;
    const start = (cookie: string) =>
      fetch(`${url}/api/runs`, {
        method: 'POST',
        // What a browser sends for a same-origin fetch.
        headers: { cookie, origin: url, 'sec-fetch-site': 'same-origin', 'content-type': 'application/json' },
        body: JSON.stringify({ repo: `${OWNER}/${REPO}`, issue }),
      });
    const reader = await signInWithGitHub(url, sim, 'bob', '/');
    assert.equal((await start(reader.cookie)).status, 403, 'read access is not enough to start a run');
    const { cookie } = await signInWithGitHub(url, sim, 'maria', '/');
    const res = await start(cookie);
    const started = (await res.json()) as { id: string; status: string };
    assert.equal(res.status, 202, `${JSON.stringify(started)}\n${pipeline.logs()}`);
    const run = await finished(started.id, { cookie });
    assert.equal(run.outcome, 'resolved');
    assert.match(run.prUrl ?? '', /\/pull\/\d+$/);
    // Intake checked maria's role and answered her as the requester.
    assert.ok(sim.comments(OWNER, REPO, issue).some((c) => c.body.includes('issue-agent:progress')));
  });

  it('the run page URL the PR links to is served, and a bad start request is refused', async () => {
    const runs = (await (await fetch(`${url}/api/runs?state=finished`, { headers: auth })).json()) as {
      runs: RunSummary[];
    };
    const id = runs.runs[0]?.id ?? '';
    const page = await fetch(`${url}/runs/${id}`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type') ?? '', /text\/html/);
    const missing = await fetch(`${url}/api/runs`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ repo: `${OWNER}/${REPO}`, issue: 999 }),
    });
    assert.equal(missing.status, 404);
    const bad = await fetch(`${url}/api/runs`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ repo: 'not a repo', issue: 1 }),
    });
    assert.equal(bad.status, 400);
  });
});
