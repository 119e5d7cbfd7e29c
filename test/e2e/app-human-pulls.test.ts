import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Octokit } from '@octokit/rest';
import { oracle, reply } from '../../src/model-sim/index.js';
import { pushBranch } from '../support/person-branch.js';
import { startStack } from '../support/pipeline.js';
import { routeByTag } from '../support/pipeline-fixtures.js';
import { installationOctokit } from '../github-sim/helpers.js';
import { redisSkipReason } from '../support/redis-server.js';

const OWNER = 'acme';
const REPO = 'calc';
const STATS = [
  '/** Middle value of a list of numbers. */',
  'export function median(values) {',
  '  const sorted = [...values].sort();',
  '  return sorted[Math.floor(sorted.length / 2)];',
  '}',
  '',
].join('\n');
/** The line of src/stats.js the review comments on: the sort without a comparator. */
const SORT_LINE = 3;
const quiet = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};

/**
 * The review's trajectory, which its body links: a run of kind `review` in the run server's API with
 * the fetch, each sandbox and its tests (command and results), the model call with its tokens and
 * cost and the review tools it called, the review posted, and an outcome; no token in any of it.
 */
async function reviewTrajectory(body: string, stack: Awaited<ReturnType<typeof startStack>>): Promise<void> {
  const link =
    /📄 The full trajectory, step by step: (http:\/\/127\.0\.0\.1:\d+\/runs\/([A-Za-z0-9-]+))/.exec(body);
  assert.ok(link !== null, `the review links its trajectory:\n${body}`);
  const id = link[2] ?? '';
  const auth = { authorization: `Bearer ${stack.pipeline.adminToken}` };
  const api = `${stack.pipeline.appUrl}/api/runs/${id}`;
  // The outcome is written after the review is posted: wait for it.
  let events: { kind: string; [k: string]: unknown }[] = [];
  await stack.sim.waitFor(
    async () => {
      const res = await fetch(`${api}/events?limit=1000`, { headers: auth });
      events = res.status === 200 ? ((await res.json()) as { events: typeof events }).events : [];
      return events.at(-1)?.kind === 'outcome';
    },
    30_000,
    () => `the review's run ends with an outcome: ${JSON.stringify(events.map((e) => e.kind))}`,
  );
  // The run's summary comes from the server's index, refreshed on its own schedule: wait until it
  // has read the outcome too.
  type Summary = {
    kind: string;
    steps: number;
    costUsd: number;
    tokens: number;
    outcome: string | null;
    pull: number;
  };
  const seen: { run: Summary | null } = { run: null };
  await stack.sim.waitFor(
    async () => {
      seen.run = ((await (await fetch(api, { headers: auth })).json()) as { run: Summary }).run;
      return seen.run.outcome !== null;
    },
    30_000,
    () => `the review's run summary has its outcome: ${JSON.stringify(seen.run)}`,
  );
  const run = seen.run;
  assert.ok(run !== null);
  assert.equal(run.kind, 'review');
  assert.equal(run.steps, 1, 'one model call');
  assert.ok(run.tokens > 0 && run.costUsd > 0, 'the call’s tokens and cost are counted');
  const list = (await (await fetch(`${stack.pipeline.appUrl}/api/runs`, { headers: auth })).json()) as {
    runs: { id: string; kind: string }[];
  };
  assert.ok(
    list.runs.some((r) => r.id === id && r.kind === 'review'),
    'the run list shows it',
  );
  const notes = events.filter((e) => e.kind === 'note').map((e) => `${String(e.topic)}: ${String(e.text)}`);
  assert.ok(
    notes.some((n) => /^fetched: Fetched acme\/calc/.test(n)),
    notes.join('\n'),
  );
  assert.equal(notes.filter((n) => /^sandbox: A fresh \w+ sandbox/.test(n)).length, 2, notes.join('\n'));
  assert.ok(notes.some((n) => /^review_posted: Posted one review with 1 line comment/.test(n)));
  const tests = events.filter((e) => e.kind === 'test_run');
  assert.deepEqual(
    tests.map((e) => e.phase),
    ['baseline', 'final'],
  );
  for (const e of tests) {
    assert.equal(typeof e.command, 'string');
    assert.match(JSON.stringify(e.summary), /average rounds to the nearest hundredth/);
  }
  const call = events.find((e) => e.kind === 'model_response');
  assert.ok(call !== undefined && typeof call.usd === 'number' && call.usd > 0);
  assert.deepEqual(
    events.filter((e) => e.kind === 'action').map((e) => e.tool),
    ['review_comment', 'review_comment', 'finish_review'],
  );
  assert.equal(events.at(-1)?.outcome, 'no_change');
  assert.match(String(events.at(-1)?.reason), /^Reviewed: one review with 1 line comment; nothing pushed\./);
  // No installation token (ghs_…) or model key entered it.
  assert.doesNotMatch(JSON.stringify(events), /ghs_|sk-ant-/);
}

/**
 * `@agent` on pull requests a person opened, through the whole App (issue 37): `@agent review` posts
 * one review with its comment on the line the model named (inside the diff) and names the tests it
 * ran on the base and the head, pushing nothing; on a fork whose author did not allow edits by
 * maintainers, `@agent fix …` says why it cannot push; on a same-repository pull request, a writer's
 * `@agent fix …` pushes a commit to its branch, tells its author, and leaves their text as it was.
 */
test(
  'App: @agent review on a person’s PR posts one review on the right line; @agent fix is refused on a locked fork and pushes to a same-repository branch',
  { skip: redisSkipReason(), timeout: 400_000 },
  async (t) => {
    const stack = await startStack({
      owner: OWNER,
      repo: REPO,
      maintainer: { login: 'maria', permission: 'write' },
      modelKey: 'sk-ant-human-pulls-0123456789abcdef',
      policy: (fixture) =>
        routeByTag(
          {
            // The review's one turn: a line comment with a suggested change, and the summary.
            'The tests, run by the harness on the base and on the head': () =>
              reply()
                .tool('review_comment', {
                  path: 'src/stats.js',
                  line: SORT_LINE,
                  body: 'Sorts as strings: `[10, 9].sort()` is `[10, 9]`.\n\n```suggestion\n  const sorted = [...values].sort((a, b) => a - b);\n```',
                })
                .tool('review_comment', { path: 'src/calc.js', line: 1, body: 'OUTSIDE-THE-DIFF' })
                .tool('finish_review', { summary: 'REVIEW-SUMMARY: median sorts numbers as strings.' }),
          },
          oracle(fixture.patch),
        ),
    });
    t.after(() => stack.stop());
    const { sim, pipeline } = stack;
    const bare = sim.bareRepoPath(OWNER, REPO);
    sim.setPermission(OWNER, REPO, 'alice', 'write');
    pushBranch(bare, bare, 'alice/median', { 'src/stats.js': STATS }, 'alice/median: add median');
    const pr = await sim.openPull(OWNER, REPO, {
      head: 'alice/median',
      title: 'Add median',
      body: 'ALICE-TEXT',
      author: 'alice',
    });
    const headBefore = pr.head.sha;
    // Reads as the App's installation (a person's OAuth token reaches only what the App may).
    const maria = installationOctokit(sim);
    const bot = (n: number): string[] =>
      sim
        .comments(OWNER, REPO, n)
        .filter((c) => c.user === sim.app.botLogin)
        .map((c) => c.body);

    // `@agent review`: one review, its comment on the line named, the other moved into the body.
    await sim.comment(OWNER, REPO, pr.number, 'maria', '@agent review');
    const reviews = async () =>
      (await maria.rest.pulls.listReviews({ owner: OWNER, repo: REPO, pull_number: pr.number })).data;
    await sim.waitFor(
      async () => (await reviews()).length > 0,
      240_000,
      () => `the review\n${pipeline.logs()}`,
    );
    const all = await reviews();
    assert.equal(all.length, 1, 'one review');
    const review = all[0];
    assert.ok(review !== undefined);
    assert.equal(review.state, 'COMMENTED');
    assert.equal(review.user?.login, sim.app.botLogin);
    assert.equal(review.commit_id, headBefore);
    const body = review.body;
    assert.match(body, /REVIEW-SUMMARY: median sorts numbers as strings\./);
    // What ran: the fixture's tests on the base and the head, the rounding test failing on both.
    assert.match(body, /### What ran/);
    assert.match(body, /average rounds to the nearest hundredth/);
    assert.match(body, /❌/);
    assert.match(body, /`src\/calc\.js` line 1: OUTSIDE-THE-DIFF/);
    const comments = (
      await maria.rest.pulls.listReviewComments({ owner: OWNER, repo: REPO, pull_number: pr.number })
    ).data;
    assert.deepEqual(
      comments.map((c) => [c.path, c.line, c.side, c.pull_request_review_id]),
      [['src/stats.js', SORT_LINE, 'RIGHT', review.id]],
    );
    assert.match(
      comments[0]?.body ?? '',
      /```suggestion\n {2}const sorted = \[\.\.\.values\]\.sort\(\(a, b\) => a - b\);\n```/,
    );
    assert.equal(sim.pulls(OWNER, REPO)[0]?.head.sha, headBefore, 'a review pushes nothing');
    assert.deepEqual(sim.violations, []);
    await reviewTrajectory(body, stack);

    // A fork whose author did not allow edits by maintainers: said why, nothing queued.
    const alice = new Octokit({ baseUrl: sim.url, auth: sim.oauth.issueToken('alice'), log: quiet });
    await alice.rest.repos.createFork({ owner: OWNER, repo: REPO });
    pushBranch(sim.bareRepoPath('alice', REPO), bare, 'locked', { 'src/stats.js': STATS });
    const { data: forked } = await alice.rest.pulls.create({
      owner: OWNER,
      repo: REPO,
      head: 'alice:locked',
      base: 'main',
      title: 'Median, from a fork',
      maintainer_can_modify: false,
    });
    await sim.comment(OWNER, REPO, forked.number, 'maria', '@agent fix the rounding in average');
    await sim.waitFor(
      () => bot(forked.number).length > 0,
      30_000,
      () => `the refusal\n${pipeline.logs()}`,
    );
    assert.match(bot(forked.number)[0] ?? '', /did not allow edits by maintainers/);
    assert.match(bot(forked.number)[0] ?? '', /alice\/calc/);
    // `@agent verify` there: this stack's sandbox (`unconfined`) is a plain child process of the
    // worker, so a fork's code is not run (an isolated one verifies it: app-verify-fork.test.ts).
    await sim.comment(OWNER, REPO, forked.number, 'maria', '@agent verify');
    const refusal = (): string =>
      bot(forked.number).find((c) => c.includes('Issue Agent: verification') && !c.includes('⏳')) ?? '';
    await sim.waitFor(
      () => refusal() !== '',
      60_000,
      () => `the verify refusal\n${pipeline.logs()}`,
    );
    assert.match(
      refusal(),
      /its branch is in `alice\/calc`, and this worker's sandbox \(`unconfined`\) is not isolated/,
    );
    assert.equal(sim.checkRuns(OWNER, REPO).length, 0, 'nothing ran, no check run');

    // A fork that allows edits, on this unconfined worker: the fork's tree would be worked on (its
    // tests run, the agent's commands in it) on the worker's host, so the job ends before a clone.
    pushBranch(sim.bareRepoPath('alice', REPO), bare, 'open-edits', { 'src/stats.js': STATS });
    const { data: editable } = await alice.rest.pulls.create({
      owner: OWNER,
      repo: REPO,
      head: 'alice:open-edits',
      base: 'main',
      title: 'Median, from a fork that allows edits',
      maintainer_can_modify: true,
    });
    const headOfFork = editable.head.sha;
    await sim.comment(OWNER, REPO, editable.number, 'maria', '@agent fix the rounding in average');
    const notChanged = (): string => bot(editable.number).find((c) => c.includes("I can't change")) ?? '';
    await sim.waitFor(
      () => notChanged() !== '',
      120_000,
      () => `the fix refusal\n${bot(editable.number).join('\n---\n')}\n${pipeline.logs()}`,
    );
    assert.match(
      notChanged(),
      /its branch is in `alice\/calc`, and this worker's sandbox \(`unconfined`\) is not isolated/,
    );
    assert.equal(sim.pulls(OWNER, REPO).find((p) => p.number === editable.number)?.head.sha, headOfFork);

    // The same-repository PR: the writer's request is a commit on alice's branch, alice told.
    await sim.comment(OWNER, REPO, pr.number, 'maria', '@agent fix the rounding in average');
    const head = () => sim.pulls(OWNER, REPO).find((p) => p.number === pr.number)?.head.sha;
    await sim.waitFor(
      () => head() !== headBefore,
      240_000,
      () => `the push\n${pipeline.logs()}`,
    );
    const { data: commit } = await maria.rest.git.getCommit({
      owner: OWNER,
      repo: REPO,
      commit_sha: head() ?? '',
    });
    assert.deepEqual(
      commit.parents.map((p) => p.sha),
      [headBefore],
    );
    assert.match(commit.message, new RegExp(`^Follow-up on #${pr.number}: fix the rounding in average`));
    const progress = bot(pr.number).find((c) => c.includes('asked me to work on this pull request')) ?? '';
    assert.match(
      progress,
      /`alice`: `maria` asked me to work on this pull request, so I push my commits to its branch `alice\/median`/,
    );
    await sim.waitFor(
      () => bot(pr.number).some((c) => /Pushed new commits to/.test(c)),
      30_000,
      () => `the end\n${pipeline.logs()}`,
    );
    const now = sim.pulls(OWNER, REPO).find((p) => p.number === pr.number);
    assert.equal(now?.body, 'ALICE-TEXT', 'a person’s pull request keeps its text');
    assert.deepEqual(sim.violations, []);
  },
);
