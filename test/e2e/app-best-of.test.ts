import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { oracle, reply, type Policy } from '../../src/model-sim/index.js';
import { gitOutput, makeFixtureRepo } from '../support/fixture-repo.js';
import { createConfiguredRepo, readJobRun, startStack } from '../support/pipeline.js';
import { perConversation } from '../support/pipeline-fixtures.js';
import { redisSkipReason } from '../support/redis-server.js';
import { dockerTest } from '../sandbox/docker/docker-test-support.js';

const OWNER = 'acme';
const LONG_LOCK = { ISSUE_AGENT_LOCK_DURATION_MS: '60000', ISSUE_AGENT_STALLED_INTERVAL_MS: '15000' };
const REPO = 'calc';

/** A change to node-calc's src/calc.js, as a diff made by git. */
function calcPatch(edit: (source: string) => string): string {
  const repo = makeFixtureRepo('node-calc');
  try {
    const file = join(repo.dir, 'src', 'calc.js');
    writeFileSync(file, edit(readFileSync(file, 'utf8')));
    return execFileSync('git', ['diff'], { cwd: repo.dir, encoding: 'utf8' });
  } finally {
    repo.cleanup();
  }
}

/** Rounds half away from zero in one line: the whole fix, two changed lines. */
const SMALL_FIX = calcPatch((s) =>
  s.replace(
    'return Math.floor(mean * 100) / 100;',
    'return (Math.sign(mean) * Math.round(Math.abs(mean) * 100)) / 100;',
  ),
);
/** A change that fixes nothing: the failing test still fails, so the attempt ends unverified. */
const NO_FIX = calcPatch((s) =>
  s.replace('/** Sum of a list of numbers. */', '/** Sum of a list of numbers (in order). */'),
);

/**
 * The first conversation to start kills every process of its sandbox (its shell included) in its
 * first turn, then goes on like the oracle; every other conversation is the oracle from the start.
 * (Docker attempts all work in /workspace, so their prompts are identical: only the order tells them
 * apart.)
 */
function killFirstSandbox(patch: string): { policy: Policy; killed: () => boolean } {
  const rest = oracle(patch);
  let killer: string | null = null;
  return {
    policy: (request, ctx) => {
      if (request.messages.length === 1 && killer === null) {
        killer = `toolu_kill_${ctx.requestIndex}`;
        return reply()
          .text('Clearing the machine.')
          .tool('bash', { command: 'kill -9 -1; sleep 5' }, { id: killer });
      }
      const first = request.messages[1];
      const mine = killer !== null && JSON.stringify(first?.content ?? '').includes(killer);
      // The killer's later turns: the oracle's plan, as if its first turn came after the kill.
      return rest(
        mine
          ? {
              ...request,
              messages: [request.messages[0], ...request.messages.slice(3)].filter((m) => m !== undefined),
            }
          : request,
        ctx,
      );
    },
    killed: () => killer !== null,
  };
}

/**
 * Best-of-N through the whole App (GitHub simulator, model simulator, real Redis, the isolated local
 * sandbox): three attempts that end unverified, resolved with a large change and resolved with a
 * small one → the PR is the small one's and its body lists all three with links; together they
 * spend within the job's budget.
 */
test(
  'App best-of-N: three attempts in parallel; the tests pick the small resolved one; the PR lists every attempt with links; the job stays within its budget',
  { skip: redisSkipReason(), timeout: 400_000 },
  async (t) => {
    const three = perConversation([
      (r, c) => oracle(NO_FIX)(r, c),
      (r, c) =>
        oracle(
          readFileSync(join(import.meta.dirname, '..', 'fixtures', 'repos', 'node-calc.fix.patch'), 'utf8'),
        )(r, c),
      (r, c) => oracle(SMALL_FIX)(r, c),
    ]);
    const stack = await startStack({
      owner: OWNER,
      repo: REPO,
      maintainer: { login: 'maria', permission: 'write' },
      modelKey: 'sk-ant-bestof-0123456789abcdef',
      policy: () => three.policy,
      // Parallel attempts on a busy CI machine: a lock long enough that a slow moment is not a stall.
      env: { ISSUE_AGENT_WORKER_CONCURRENCY: '3', ...LONG_LOCK },
    });
    t.after(() => stack.stop());
    const { sim, pipeline } = stack;

    // The repository asks for three attempts and caps a job at $1.50.
    await createConfiguredRepo(
      sim,
      { owner: OWNER, name: 'calc-best', writer: 'maria' },
      'attempts: 3\nbudgets:\n  maxUsd: 1.5\n',
    );
    const issue = sim.createIssue(OWNER, 'calc-best', {
      title: 'Average rounds wrong [three]',
      body: 'average([1,2,2]) should be 1.67',
      author: 'maria',
    }).number;
    await sim.label(OWNER, 'calc-best', issue, 'agent', 'maria');
    await sim.waitFor(
      () => sim.pulls(OWNER, 'calc-best').length === 1,
      240_000,
      () => `the PR\n${pipeline.logs()}`,
    );
    assert.equal(three.started(), 3, 'three independent conversations');
    const pr = sim.pulls(OWNER, 'calc-best')[0];
    assert.ok(pr !== undefined);
    const diff = gitOutput(sim.bareRepoPath(OWNER, 'calc-best'), 'diff', `${pr.base.sha}..${pr.head.sha}`);
    assert.match(diff, /Math\.sign\(mean\) \* Math\.round/, 'the small fix is published');
    assert.doesNotMatch(diff, /round\.js/, 'not the large one');
    assert.equal(pr.draft, false, 'a resolved winner opens a ready PR');

    // The table: all three attempts, their outcomes, links to each trajectory, the winner marked.
    const table = /### Attempts\n\n[^\n]*\n\n([\s\S]*?)(?:\n\n|$)/.exec(pr.body)?.[1] ?? '';
    const rows = table.split('\n').filter((l) => /^\| [123]( |$)/.test(l));
    assert.equal(rows.length, 3, table);
    assert.equal(rows.filter((r) => r.includes('published')).length, 1, table);
    assert.match(rows.find((r) => r.includes('published')) ?? '', /`resolved`.*2 lines in 1 file/);
    assert.equal(rows.filter((r) => r.includes('`resolved`')).length, 2, table);
    assert.equal(rows.filter((r) => r.includes('`unverified`')).length, 1, table);
    const jobId = /job=([A-Za-z0-9-]+)/.exec(
      sim.comments(OWNER, 'calc-best', issue).find((c) => c.body.includes('issue-agent:progress'))?.body ??
        '',
    )?.[1];
    assert.ok(jobId !== undefined, 'the progress comment names the job');
    for (const id of [jobId, `${jobId}-a2`, `${jobId}-a3`]) {
      assert.ok(table.includes(`/runs/${id}`), `a link to ${id}'s trajectory\n${table}`);
    }

    // The choice was recorded before publishing, so a retry of the job publishes the same attempt.
    const decision = JSON.parse(
      readFileSync(join(stack.pipeline.workDir, 'work', 'jobs', jobId, 'attempts.json'), 'utf8'),
    ) as { winner: string; table: { runId: string; winner: boolean }[] };
    assert.equal(decision.table.length, 3);
    assert.equal(decision.table.find((r) => r.winner)?.runId, decision.winner);
    assert.ok(table.includes(`/runs/${decision.winner}`));

    // Each attempt is its own run, with its share of the budget; together within the job's $1.50.
    const runs = [jobId, `${jobId}-a2`, `${jobId}-a3`].map((id) => readJobRun(stack, id));
    for (const [i, run] of runs.entries()) {
      assert.deepEqual(run.base.attempt, { number: i + 1, of: 3, jobId });
      assert.equal(run.base.limits.maxUsd, 0.5);
    }
    const spent = runs.reduce(
      (sum, run) => sum + run.events.reduce((s, e) => s + (e.kind === 'model_response' ? e.usd : 0), 0),
      0,
    );
    assert.ok(spent <= 1.5, `spent ${spent}`);
    // The run view knows each attempt as attempt k of 3 of the job.
    for (const [i, id] of [jobId, `${jobId}-a2`, `${jobId}-a3`].entries()) {
      const res = await fetch(`${pipeline.appUrl}/api/runs/${id}`, {
        headers: { authorization: `Bearer ${pipeline.adminToken}` },
      });
      assert.equal(res.status, 200, id);
      const { run } = (await res.json()) as { run: { attempt: unknown; outcome: string | null } };
      assert.deepEqual(run.attempt, { number: i + 1, of: 3, jobId });
      assert.notEqual(run.outcome, null, `${id} has ended`);
    }
    const progress = sim
      .comments(OWNER, 'calc-best', issue)
      .find((c) => c.body.includes('issue-agent:progress'));
    assert.ok(
      progress?.edits.some((b) => /Attempt \d of 3/.test(b)),
      `the progress comment showed the attempts\n${progress?.edits.join('\n---\n') ?? ''}`,
    );
  },
);

/**
 * `(try 2)` in a request, with the Docker sandbox: one attempt kills every process of its sandbox
 * from inside (its shell included); that attempt ends without a change, and the job still opens the
 * other attempt's PR. (Docker, not the local sandbox: the App's `local` sandbox is a plain child
 * process, and `kill -9 -1` there would reach the host's processes.)
 */
dockerTest(
  'App best-of-N with Docker: an attempt whose sandbox is killed from inside does not fail the job',
  async (_docker, t) => {
    const skip = redisSkipReason();
    if (skip !== false) {
      t.skip(skip);
      return;
    }
    const two = killFirstSandbox(SMALL_FIX);
    const stack = await startStack({
      owner: OWNER,
      repo: REPO,
      maintainer: { login: 'maria', permission: 'write' },
      modelKey: 'sk-ant-bestof-docker-0123456789abcdef',
      policy: () => two.policy,
      sandbox: 'docker',
      env: { ISSUE_AGENT_WORKER_CONCURRENCY: '2', ...LONG_LOCK },
    });
    t.after(() => stack.stop());
    const { sim, pipeline } = stack;
    const crash = sim.createIssue(OWNER, REPO, {
      title: 'Average rounds wrong [two]',
      body: 'average([1,2,2]) should be 1.67',
      author: 'maria',
    }).number;
    await sim.comment(OWNER, REPO, crash, 'maria', '@agent please fix this (try 2)');
    await sim.waitFor(
      () => sim.pulls(OWNER, REPO).length === 1,
      240_000,
      () => `the PR\n${pipeline.logs()}`,
    );
    assert.ok(two.killed());
    const crashed = sim.pulls(OWNER, REPO)[0];
    assert.ok(crashed !== undefined);
    assert.match(crashed.body, /### Attempts/);
    const crashRows = (/### Attempts\n\n[^\n]*\n\n([\s\S]*?)(?:\n\n|$)/.exec(crashed.body)?.[1] ?? '')
      .split('\n')
      .filter((l) => /^\| [12]( |$)/.test(l));
    assert.equal(crashRows.length, 2);
    assert.ok(crashRows.some((r) => r.includes('published') && r.includes('`resolved`')));
    assert.ok(
      crashRows.some((r) => !r.includes('published') && /`failed`|`crashed`/.test(r)),
      crashRows.join('\n'),
    );
  },
  { timeout: 400_000 },
);
