import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Redis } from 'ioredis';
import { worstCallUsd } from '../../src/agent/spend-budget.js';
import { DEFAULT_LIMITS } from '../../src/config/agent-env.js';
import { FileEventStore } from '../../src/events/file-event-store.js';
import { RedisSpendLedger } from '../../src/events/redis-spend-ledger.js';
import { monthOf } from '../../src/events/spend-ledger.js';
import { reply, type Policy } from '../../src/model-sim/index.js';
import { emptyChangeBranch } from '../support/person-branch.js';
import { createConfiguredRepo, stackOrSkip } from '../support/pipeline.js';
import { requestText, taskText } from '../support/pipeline-fixtures.js';

const OWNER = 'acme';
const CAP = 1.5;
const CONTEXT = 30_000;
const PRICE = { input: 10, output: 10, cacheWrite: 10, cacheRead: 10 };
const MODEL = 'sim-budget-model';

/**
 * Jobs that never finish on their own: the first turn of each waits (in its sandbox) until the
 * other job's first turn ran, so both are certainly running at once; then a quick bash step per
 * turn, each a different command, until something stops the run.
 */
function spendForever(barrier: string): Policy {
  return (request) => {
    const task = taskText(request);
    const me = task.includes('[budget-a]') ? 'a' : task.includes('[budget-b]') ? 'b' : 'c';
    const other = me === 'a' ? 'b' : 'a';
    const turns = request.messages.filter((m) => m.role === 'assistant').length;
    if (turns === 0) {
      const command = `touch ${barrier}/${me}; for i in $(seq 600); do [ -e ${barrier}/${other} ] && break; sleep 0.1; done; echo together`;
      return reply().text('Waiting for the other job.').tool('bash', { command });
    }
    return reply()
      .text(`Step ${turns + 1}.`)
      .tool('bash', { command: `echo ${me}-step-${turns + 1}` });
  };
}

/**
 * Must-show 5 of issue 37: a monthly limit per owner (ISSUE_AGENT_MONTHLY_USD) reached mid-run by
 * two workers at once, each running a job of the same owner (two repositories). Real App, two
 * workers, Redis, the GitHub and model simulators; the model's costs are the simulator's usage at
 * a price the test sets. Both jobs stop `budget_exhausted` at the limit (the month's spend, kept in
 * Redis, never passes it: each call is held at its most before it is made), their progress
 * comments give the spend and the limit and nothing is published; a third job then refuses before
 * it starts (no sandbox, no model call); the run server shows the month's spend per repository.
 */
test(
  'a monthly limit reached by two workers at once stops both at the limit, and the next job does not start',
  { timeout: 400_000 },
  async (t) => {
    const barrier = mkdtempSync(join(tmpdir(), 'ia-budget-barrier-'));
    t.after(() => {
      rmSync(barrier, { recursive: true, force: true });
    });
    const stack = await stackOrSkip(t, {
      owner: OWNER,
      repo: 'calc',
      maintainer: { login: 'maria', permission: 'write' },
      modelKey: 'sk-ant-budget-0123456789abcdef',
      workers: 2,
      env: {
        ISSUE_AGENT_MONTHLY_USD: String(CAP),
        ISSUE_AGENT_MODEL: MODEL,
        ISSUE_AGENT_PRICES: JSON.stringify({ [MODEL]: PRICE }),
        ISSUE_AGENT_CONTEXT_TOKENS: String(CONTEXT),
        ISSUE_AGENT_MAX_STEPS: '200',
        ISSUE_AGENT_MAX_USD: '50',
      },
      policy: () => spendForever(barrier),
    });
    if (stack === null) return;
    t.after(() => stack.stop());
    const { sim, model, pipeline } = stack;
    await createConfiguredRepo(sim, { owner: OWNER, name: 'calc2', writer: 'maria' }, 'triage: off\n');
    const progressOf = (repo: string, n: number): string =>
      sim
        .comments(OWNER, repo, n)
        .filter((c) => c.user === sim.app.botLogin && c.body.includes('issue-agent:progress'))
        .map((c) => c.body)
        .join('\n');
    const open = async (repo: string, title: string): Promise<number> => {
      const n = sim.createIssue(OWNER, repo, { title, body: 'average() truncates.', author: 'maria' }).number;
      await sim.label(OWNER, repo, n, 'agent', 'maria');
      return n;
    };

    const a = await open('calc', 'Spend it [budget-a]');
    const b = await open('calc2', 'Spend it too [budget-b]');
    const ended = (repo: string, n: number): boolean =>
      progressOf(repo, n).includes('Finished without a pull request');
    await sim.waitFor(
      () => ended('calc', a) && ended('calc2', b),
      300_000,
      () => `both jobs to end\n${pipeline.logs()}`,
    );

    const callUsd = worstCallUsd(PRICE, {
      contextTokens: CONTEXT,
      maxOutputTokens: DEFAULT_LIMITS.maxOutputTokens,
    });
    for (const [repo, n] of [
      ['calc', a],
      ['calc2', b],
    ] as const) {
      const text = progressOf(repo, n);
      assert.match(text, /monthly spending limit/, text);
      assert.match(
        text,
        new RegExp(
          `\\$${CAP.toFixed(2)}, ISSUE_AGENT_MONTHLY_USD\\) was reached: \\$\\d+\\.\\d\\d spent in ${monthOf(new Date())}`,
        ),
        text,
      );
      assert.equal(sim.pulls(OWNER, repo).length, 0, 'a stopped run publishes nothing');
    }

    // The month's spend as the workers kept it, and as the runs' own logs count it.
    const redis = new Redis(stack.redis.url);
    t.after(() => {
      redis.disconnect();
    });
    const month = monthOf(new Date());
    const spend = await new RedisSpendLedger(redis, pipeline.prefix).monthSpend(month);
    const owner = spend.owners.find((o) => o.owner === OWNER)?.usd ?? 0;
    const jobsDir = join(pipeline.workDir, 'work', 'jobs');
    let logged = 0;
    const perJob: number[] = [];
    for (const job of readdirSync(jobsDir)) {
      const dir = join(jobsDir, job, 'trajectory');
      if (!existsSync(join(dir, 'base_state.json'))) continue;
      const events = FileEventStore.open(dir).events;
      const usd = events.reduce((sum, e) => sum + (e.kind === 'model_response' ? e.usd : 0), 0);
      const outcome = events.findLast((e) => e.kind === 'outcome');
      assert.equal(
        outcome?.kind === 'outcome' ? `${outcome.outcome}/${outcome.limit}` : null,
        'budget_exhausted/monthly_usd',
      );
      perJob.push(usd);
      logged += usd;
    }
    assert.equal(perJob.length, 2, 'two runs');
    assert.ok(
      perJob.every((usd) => usd > 0),
      `both runs spent: ${perJob.join(', ')}`,
    );
    assert.ok(
      Math.abs(owner - logged) < 0.0001,
      `the ledger (${owner}) counts what the runs logged (${logged})`,
    );
    // Never past the limit (by more than one call at most, which the holds rule out), and stopped at
    // it: what is left is less than one call may cost.
    assert.ok(owner <= CAP, `spent ${owner} of ${CAP}`);
    assert.ok(owner > CAP - callUsd, `stopped at the limit: ${owner} spent, one call may cost ${callUsd}`);
    const byRepo = Object.fromEntries(spend.repositories.map((r) => [r.repo, r.usd]));
    assert.ok(Math.abs((byRepo['acme/calc'] ?? 0) + (byRepo['acme/calc2'] ?? 0) - owner) < 0.0001);
    // The two ran at once: each job's calls began before the other's ended.
    const order = model.requests.map((r) => (requestText(r.body).includes('[budget-a]') ? 'a' : 'b'));
    assert.ok(
      order.lastIndexOf('a') > order.indexOf('b') && order.lastIndexOf('b') > order.indexOf('a'),
      order.join(''),
    );

    // A third job of the same owner refuses before it starts: no model call, no sandbox, no run log.
    const calls = model.requests.length;
    const c = await open('calc', 'Spend more [budget-c]');
    await sim.waitFor(
      () => ended('calc', c),
      120_000,
      () => `the third job to refuse\n${pipeline.logs()}`,
    );
    const third = progressOf('calc', c);
    assert.match(third, /the job did not start: the monthly spending limit of acme/, third);
    assert.doesNotMatch(third, /Preparing the environment/);
    assert.equal(model.requests.length, calls, 'no model call');
    assert.ok(!model.requests.some((r) => requestText(r.body).includes('[budget-c]')));
    assert.equal(
      readdirSync(jobsDir).filter((j) => existsSync(join(jobsDir, j, 'trajectory', 'base_state.json')))
        .length,
      2,
      'no run log for the third job',
    );

    // A review is held to the same month: asked on a person's pull request now, it does not start.
    emptyChangeBranch(sim.bareRepoPath(OWNER, 'calc'), 'alice/change');
    sim.setPermission(OWNER, 'calc', 'alice', 'write');
    const pr = await sim.openPull(OWNER, 'calc', {
      head: 'alice/change',
      title: 'A change',
      author: 'alice',
    });
    const reviewCalls = model.requests.length;
    await sim.comment(OWNER, 'calc', pr.number, 'maria', '@agent review');
    await sim.waitFor(
      () => progressOf('calc', pr.number).includes('Not reviewed'),
      120_000,
      () => `the review to refuse\n${pipeline.logs()}`,
    );
    assert.match(
      progressOf('calc', pr.number),
      /the review did not start: the monthly spending limit of acme/,
    );
    assert.equal(model.requests.length, reviewCalls, 'no model call for the review');

    // The run server shows the month's spend per repository.
    const res = await fetch(`${pipeline.appUrl}/api/spend`, {
      headers: { authorization: `Bearer ${pipeline.adminToken}` },
    });
    assert.equal(res.status, 200);
    const body = (await res.json()) as {
      month: string;
      ownerLimitUsd: number | null;
      repositories: { repo: string; usd: number }[];
      owners: { owner: string; usd: number }[];
    };
    assert.equal(body.month, month);
    assert.equal(body.ownerLimitUsd, CAP);
    assert.deepEqual(
      body.repositories.map((r) => r.repo),
      ['acme/calc', 'acme/calc2'],
    );
    assert.equal(body.owners.find((o) => o.owner === OWNER)?.usd, owner);
  },
);
