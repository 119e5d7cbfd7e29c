import assert from 'node:assert/strict';
import { Octokit } from '@octokit/rest';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Queue } from 'bullmq';
import { setTimeout as delay } from 'node:timers/promises';
import { gitOutput, makeFixtureRepo, FIXTURES } from '../support/fixture-repo.js';
import { branchLogReader } from '../support/branch-log.js';
import type { GitHubSim } from '../support/github-sim/index.js';
import {
  hang,
  httpError,
  oracle,
  reply,
  type ModelSimulator,
  type Policy,
} from '../../src/model-sim/index.js';
import { startStack, type Pipeline, type Stack } from '../support/pipeline.js';
import { faultOnceAt, requestText, routeByTag, taskText } from '../support/pipeline-fixtures.js';
import { redisSkipReason } from '../support/redis-server.js';
import { redisOptions } from '../../src/queue/queues.js';

const skip = redisSkipReason();
const OWNER = 'acme';
const REPO = 'calc';
const MODEL_KEY = 'sk-ant-conversations-0123456789';
const MAINTAINER = 'maria';
const FOLLOW_UP = 'Follow-up on pull request';

const finishAt =
  (summary: string): Policy =>
  () =>
    reply().text('Nothing else to change.').tool('finish', { summary });

/** A 529 with retry-after: the client waits, which gives a test a window while the job runs. */
const overloaded = (seconds: number) => () =>
  httpError(529, { retryAfterSeconds: seconds, message: 'Overloaded' });

/**
 * Conversations on the App's pull requests against the simulators: follow-ups from PR comments,
 * review comments and reviews; mentions only; cancel; requests that arrive while a job runs; closed
 * issues. One worker, so "while a job runs" is deterministic.
 */
describe('pull request conversations (end to end)', { skip, timeout: 900_000 }, () => {
  let stack: Stack | undefined;
  let sim: GitHubSim;
  let model: ModelSimulator;
  let pipeline: Pipeline;
  const followUpPatch = readFileSync(join(FIXTURES, 'node-calc.followup.patch'), 'utf8');
  const pushWindow = faultOnceAt(1, overloaded(4), oracle(followUpPatch));
  const busy = faultOnceAt(0, overloaded(4), finishAt('busy round'));
  const busy2 = faultOnceAt(0, overloaded(5), finishAt('busy round'));
  const busy3 = faultOnceAt(0, overloaded(5), finishAt('busy round'));
  let stopHang: ReturnType<typeof faultOnceAt>;
  let unlabelHang: ReturnType<typeof faultOnceAt>;
  let replaceHang: ReturnType<typeof faultOnceAt>;

  before(async () => {
    stack = await startStack({
      owner: OWNER,
      repo: REPO,
      maintainer: { login: MAINTAINER, permission: 'write' },
      modelKey: MODEL_KEY,
      policy: (fixture) => {
        const fix = oracle(fixture.patch);
        stopHang = faultOnceAt(2, hang, fix);
        unlabelHang = faultOnceAt(2, hang, fix);
        replaceHang = faultOnceAt(2, hang, fix);
        const firstRound = routeByTag(
          {
            '[replace]': replaceHang.policy,
            '[stop]': stopHang.policy,
            '[unlabel]': unlabelHang.policy,
            '[busy]': busy.policy,
            '[busy2]': busy2.policy,
            '[busy3]': busy3.policy,
          },
          fix,
        );
        const followUps = routeByTag(
          {
            '[pushed]': pushWindow.policy,
            '[queue]': finishAt('handled the request'),
            '[review]': finishAt('answered in the thread'),
          },
          oracle(followUpPatch),
        );
        return (request, ctx) =>
          taskText(request).includes(FOLLOW_UP) ? followUps(request, ctx) : firstRound(request, ctx);
      },
    });
    ({ sim, model, pipeline } = stack);
  });

  after(async () => {
    await stack?.stop();
  });

  const prFor = (issue: number) =>
    sim.pulls(OWNER, REPO).filter((p) => p.head.ref === `issue-agent/issue-${issue}`);
  const botComments = (n: number) => sim.comments(OWNER, REPO, n).filter((c) => c.user === sim.app.botLogin);
  let logOf: ((branch: string) => string[]) | undefined;
  /** The bot branch's `git log`, newest first; read again only when the branch moves (polled below). */
  const branchLog = (issue: number) => {
    logOf ??= branchLogReader(sim, OWNER, REPO, '%H %an %s');
    return logOf(`issue-agent/issue-${issue}`);
  };
  const followUpRequests = (tag: string) =>
    model.requests.filter((r) => {
      const t = taskText(r.body as never);
      return t.includes(FOLLOW_UP) && t.includes(tag);
    });

  /** Until the worker has no job running or waiting: the end of a job, not a fixed wait. */
  const idle = async (): Promise<void> => {
    const fix = new Queue('fix', {
      connection: redisOptions(stack?.redis.url ?? '', 'idle'),
      prefix: pipeline.prefix,
    });
    try {
      const deadline = Date.now() + 60_000;
      for (;;) {
        const c = await fix.getJobCounts('active', 'waiting', 'delayed', 'prioritized');
        if (Object.values(c).every((v) => v === 0)) return;
        if (Date.now() > deadline) throw new Error(`the worker is still busy: ${JSON.stringify(c)}`);
        await delay(100);
      }
    } finally {
      await fix.close();
    }
  };

  /** An issue fixed by a first round: returns the issue and its PR number. */
  const withPr = async (tag: string): Promise<{ issue: number; pr: number }> => {
    const issue = sim.createIssue(OWNER, REPO, {
      title: `Average rounds wrong ${tag}`,
      body: 'average([1,2,2]) should be 1.67',
      author: MAINTAINER,
    }).number;
    await sim.label(OWNER, REPO, issue, 'agent', MAINTAINER);
    await sim.waitFor(
      () => prFor(issue).length > 0,
      120_000,
      () => `round 1 PR for ${tag}\n${pipeline.logs()}`,
    );
    const pr = prFor(issue)[0];
    assert.ok(pr);
    // Round 1 is over when its progress comment points at the PR.
    await sim.waitFor(
      () =>
        botComments(issue).some(
          (c) => c.body.includes(`/pull/${pr.number}`) || c.body.includes(`#${pr.number}`),
        ),
      20_000,
      'round 1 done',
    );
    return { issue, pr: pr.number };
  };

  /**
   * The PR of test 1, for the tests that only need some open PR of the App and push nothing to it
   * (a round costs tens of seconds on a loaded machine). Made here when test 1 did not run. A
   * follow-up on it is told apart by a tag in its instruction (`[review]`, `[queue]`): the model
   * then finishes without a change, so the branch stays as test 1 left it.
   */
  let shared: Promise<{ issue: number; pr: number }> | undefined;
  const sharedPr = (): Promise<{ issue: number; pr: number }> =>
    (shared ??= withPr('[rename]').catch((error: unknown) => {
      shared = undefined;
      throw error;
    }));

  /**
   * The PR of test 4 (a follow-up that did not push: a person's commit is its tip), where the
   * submitted review's follow-up then pushes its commit on top instead of on a PR of its own.
   */
  let pushed: Promise<{ issue: number; pr: number }> | undefined;
  const pushedPr = (): Promise<{ issue: number; pr: number }> =>
    (pushed ??= withPr('[pushed]').catch((error: unknown) => {
      pushed = undefined;
      throw error;
    }));

  it('1. `@agent rename the helper` on the PR → a second commit on the same branch, a reply, both rounds in the body, one PR', async () => {
    const { issue, pr } = await sharedPr();
    assert.equal(branchLog(issue).length, 2, 'round 1: one commit on top of main');
    const { delivery } = await sim.comment(
      OWNER,
      REPO,
      pr,
      MAINTAINER,
      '@agent rename the helper to roundHalfAway and use a constant',
    );
    assert.equal(delivery.status, 200);
    await sim.waitFor(
      () => branchLog(issue).length === 3,
      120_000,
      () => `a second commit\n${pipeline.logs()}`,
    );
    const [top] = branchLog(issue);
    assert.match(top ?? '', new RegExp(`${sim.app.botLogin.replace(/[[\]]/g, '\\$&')} Follow-up on #${pr}`));
    await sim.waitFor(
      () => botComments(pr).some((c) => /Pushed new commits/i.test(c.body)),
      20_000,
      'the reply on the PR',
    );
    const body = prFor(issue)[0]?.body ?? '';
    assert.match(body, /Round 1/);
    assert.match(body, /Round 2/);
    assert.equal(prFor(issue).length, 1);
    assert.equal(
      sim.pulls(OWNER, REPO).length,
      sim.pulls(OWNER, REPO).filter((p) => p.state === 'open').length,
    );
    const changed = gitOutput(
      sim.bareRepoPath(OWNER, REPO),
      'show',
      '--name-only',
      '--format=',
      `issue-agent/issue-${issue}`,
    );
    assert.deepEqual(changed.trim().split('\n').sort(), ['src/calc.js', 'src/round.js']);
    const prompt = requestText(followUpRequests('[rename]')[0]?.body);
    assert.match(prompt, /rename the helper to roundHalfAway/);
    assert.match(prompt, /Round 1 \(resolved\)/, 'the earlier round is summarised');
  });

  it('2. a review comment on line N of file F → the prompt has F, N and the comment; the reply lands in that thread', async () => {
    const { pr } = await sharedPr();
    const hook = sim.buildWebhook('pull_request_review_comment', 'created', {
      owner: OWNER,
      repo: REPO,
      pull: pr,
      sender: MAINTAINER,
      comment: { body: '@agent use a constant here [review]' },
      path: 'src/round.js',
      line: 7,
    });
    assert.equal((await sim.deliver(hook)).status, 200);
    const commentId = (hook.payload.comment as { id: number }).id;
    await sim.waitFor(
      () =>
        sim
          .reviewComments(OWNER, REPO, pr)
          .some((c) => c.user === sim.app.botLogin && c.inReplyToId === commentId),
      120_000,
      () => `a reply in the review thread\n${pipeline.logs()}`,
    );
    const prompt = requestText(followUpRequests('[review]')[0]?.body);
    assert.match(prompt, /src\/round\.js/);
    assert.match(prompt, /line 7/);
    assert.match(prompt, /use a constant here/);
  });

  it('3. a PR comment without the handle → no job', async () => {
    const { pr } = await sharedPr();
    await idle();
    const before = botComments(pr).length;
    const requests = model.requests.length;
    const plain = await sim.comment(
      OWNER,
      REPO,
      pr,
      MAINTAINER,
      'Looks good to me, maybe rename the helper later?',
    );
    const cc = await sim.comment(OWNER, REPO, pr, MAINTAINER, 'cc agent: not a mention either');
    await pipeline.intakeDone(plain.delivery);
    await pipeline.intakeDone(cc.delivery);
    assert.equal(botComments(pr).length, before, 'no progress comment, no reply');
    assert.equal(model.requests.length, requests, 'no model request');
  });

  it('4. someone pushes to the branch while a follow-up runs → no push, their commit kept, the reply explains', async () => {
    const { issue, pr } = await pushedPr();
    await sim.comment(OWNER, REPO, pr, MAINTAINER, '@agent rename the helper');
    await sim.waitFor(
      () => pushWindow.fired(),
      60_000,
      () => `the follow-up to start\n${pipeline.logs()}`,
    );
    // A maintainer pushes a commit of their own to the PR branch meanwhile.
    const work = mkdtempSync(join(tmpdir(), 'ia-human-'));
    try {
      const git = (...args: string[]) => execFileSync('git', args, { cwd: work, stdio: 'pipe' });
      git('clone', '-q', '--branch', `issue-agent/issue-${issue}`, sim.bareRepoPath(OWNER, REPO), 'r');
      execFileSync(
        'bash',
        [
          '-c',
          'echo "# notes" >> r/README.md || echo "# notes" > r/NOTES.md; cd r && git add -A && git -c user.name=Maria -c user.email=maria@example.invalid commit -qm "Maria: notes" && git push -q origin HEAD',
        ],
        { cwd: work },
      );
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
    const theirs = branchLog(issue)[0] ?? '';
    assert.match(theirs, /Maria: notes/);
    await sim.waitFor(
      () => botComments(pr).some((c) => /did not push|someone pushed/i.test(c.body)),
      120_000,
      () => `the explanation\n${pipeline.logs()}`,
    );
    assert.equal(branchLog(issue)[0], theirs, 'their commit is still the tip; nothing was force-pushed');
    assert.equal(branchLog(issue).length, 3);
  });

  it('5. `@agent stop` while the model hangs → cancelled within seconds, the progress says who, no PR', async () => {
    const issue = sim.createIssue(OWNER, REPO, {
      title: 'Average rounds wrong [stop]',
      body: 'x',
      author: MAINTAINER,
    }).number;
    await sim.label(OWNER, REPO, issue, 'agent', MAINTAINER);
    await sim.waitFor(
      () => stopHang.fired(),
      60_000,
      () => `the model to hang\n${pipeline.logs()}`,
    );
    const t0 = Date.now();
    await sim.comment(OWNER, REPO, issue, MAINTAINER, '@agent stop');
    await sim.waitFor(
      () => botComments(issue).some((c) => /cancel/i.test(c.body) && c.body.includes(MAINTAINER)),
      30_000,
      () => `the cancel\n${pipeline.logs()}`,
    );
    assert.ok(Date.now() - t0 < 15_000, `cancelled after ${Date.now() - t0} ms`);
    // The cancelled job has ended: it can push nothing more.
    assert.equal(await pipeline.jobsEnded(issue), 1);
    assert.equal(prFor(issue).length, 0);
    assert.equal(
      gitOutput(sim.bareRepoPath(OWNER, REPO), 'branch', '--list', `issue-agent/issue-${issue}`).trim(),
      '',
    );
  });

  it('6. two instructions 100 ms apart while a job runs → both handled, in order, none lost', async () => {
    const { pr } = await sharedPr();
    const queuedBefore = botComments(pr).filter((c) => /queued/i.test(c.edits[0] ?? '')).length;
    // Keep the worker busy with another issue's job.
    const other = sim.createIssue(OWNER, REPO, {
      title: 'Average rounds wrong [busy]',
      body: 'x',
      author: MAINTAINER,
    }).number;
    await sim.label(OWNER, REPO, other, 'agent', MAINTAINER);
    await sim.waitFor(() => busy.fired(), 60_000, 'the busy job to start');
    await sim.comment(OWNER, REPO, pr, MAINTAINER, '@agent first request: add a comment [queue]');
    const running = followUpRequests('[queue]').length;
    await delay(100);
    await sim.comment(OWNER, REPO, pr, MAINTAINER, '@agent second request: add another comment [queue]');
    await sim.waitFor(
      () => {
        const tasks = followUpRequests('[queue]').map((r) => taskText(r.body as never));
        return tasks.some((t) => t.includes('second request'));
      },
      120_000,
      () => `the second request to run\n${pipeline.logs()}`,
    );
    const order = followUpRequests('[queue]')
      .slice(running)
      .map((r) =>
        requestText(r.body).includes('first request')
          ? 'first'
          : requestText(r.body).includes('second request')
            ? 'second'
            : '?',
      );
    assert.deepEqual([...new Set(order)], ['first', 'second']);
    await sim.waitFor(
      () => botComments(pr).filter((c) => /queued/i.test(c.edits[0] ?? '')).length >= queuedBefore + 2,
      10_000,
      'two progress comments',
    );
  });

  it('7. the issue is closed while its job is queued → dropped with a note, no PR', async () => {
    const busyIssue = sim.createIssue(OWNER, REPO, {
      title: 'Average rounds wrong [busy2]',
      body: 'again',
      author: MAINTAINER,
    }).number;
    const queued = sim.createIssue(OWNER, REPO, {
      title: 'Average rounds wrong [closed]',
      body: 'x',
      author: MAINTAINER,
    }).number;
    await sim.label(OWNER, REPO, busyIssue, 'agent', MAINTAINER);
    await sim.waitFor(() => busy2.fired(), 60_000, 'the busy job to start');
    await sim.label(OWNER, REPO, queued, 'agent', MAINTAINER);
    await sim.waitFor(
      () => botComments(queued).some((c) => /queued/i.test(c.body)),
      30_000,
      'the queued job',
    );
    await sim.deliver(
      sim.buildWebhook('issues', 'closed', { owner: OWNER, repo: REPO, issue: queued, sender: MAINTAINER }),
    );
    await sim.waitFor(
      () => botComments(queued).some((c) => /closed/i.test(c.body) && /dropped/i.test(c.body)),
      120_000,
      () => `the note\n${pipeline.logs()}`,
    );
    assert.equal(prFor(queued).length, 0);
  });

  it('a submitted review that mentions the handle → a follow-up whose prompt holds the review', async () => {
    const { issue, pr } = await pushedPr();
    await idle();
    const commits = branchLog(issue).length;
    const hook = sim.buildWebhook('pull_request_review', 'submitted', {
      owner: OWNER,
      repo: REPO,
      pull: pr,
      sender: MAINTAINER,
      comment: { body: '@agent please rename the helper as discussed [reviewed]' },
    });
    assert.equal((await sim.deliver(hook)).status, 200);
    await sim.waitFor(
      () => branchLog(issue).length === commits + 1,
      120_000,
      () => `the follow-up commit\n${pipeline.logs()}`,
    );
    assert.match(
      requestText(followUpRequests('[reviewed]')[0]?.body),
      /please rename the helper as discussed/,
    );
  });

  it('removing the label cancels the running job', async () => {
    const issue = sim.createIssue(OWNER, REPO, {
      title: 'Average rounds wrong [unlabel]',
      body: 'x',
      author: MAINTAINER,
    }).number;
    await sim.label(OWNER, REPO, issue, 'agent', MAINTAINER);
    await sim.waitFor(
      () => unlabelHang.fired(),
      60_000,
      () => `the model to hang\n${pipeline.logs()}`,
    );
    await sim.deliver(
      sim.buildWebhook('issues', 'unlabeled', {
        owner: OWNER,
        repo: REPO,
        issue,
        sender: MAINTAINER,
        label: 'agent',
      }),
    );
    await sim.waitFor(
      () => botComments(issue).some((c) => /cancel/i.test(c.body)),
      30_000,
      () => `the cancel\n${pipeline.logs()}`,
    );
    assert.equal(prFor(issue).length, 0);
  });

  it("labelling an issue that already has the App's open PR → a follow-up on that PR, not a second PR", async () => {
    const { issue, pr } = await withPr('[relabel]');
    await sim.label(OWNER, REPO, issue, 'agent', MAINTAINER);
    await sim.waitFor(
      () => branchLog(issue).length === 3 && /Round 2/.test(prFor(issue)[0]?.body ?? ''),
      120_000,
      () => `a follow-up commit and round 2 in the PR body\n${pipeline.logs()}`,
    );
    assert.equal(prFor(issue).length, 1);
    assert.equal(prFor(issue)[0]?.number, pr);
  });

  it('onBusy: replace → a new request cancels the running job and runs next; the progress comments say so', async () => {
    const repo = makeFixtureRepo('node-calc');
    try {
      mkdirSync(join(repo.dir, '.github'), { recursive: true });
      writeFileSync(join(repo.dir, '.github', 'issue-agent.yml'), 'onBusy: replace\n');
      execFileSync('git', ['add', '-A'], { cwd: repo.dir });
      execFileSync(
        'git',
        ['-c', 'user.name=F', '-c', 'user.email=f@example.invalid', 'commit', '-qm', 'config'],
        { cwd: repo.dir },
      );
      await sim.createRepo({ owner: OWNER, name: 'calc-replace', sourceDir: repo.dir });
    } finally {
      repo.cleanup();
    }
    sim.setPermission(OWNER, 'calc-replace', MAINTAINER, 'write');
    const n = sim.createIssue(OWNER, 'calc-replace', {
      title: 'Average rounds wrong [replace]',
      body: 'x',
      author: MAINTAINER,
    }).number;
    await sim.label(OWNER, 'calc-replace', n, 'agent', MAINTAINER);
    await sim.waitFor(
      () => replaceHang.fired(),
      60_000,
      () => `the first job to hang\n${pipeline.logs()}`,
    );
    await sim.comment(OWNER, 'calc-replace', n, MAINTAINER, '@agent do it with a helper module instead');
    const bot = () => sim.comments(OWNER, 'calc-replace', n).filter((c) => c.user === sim.app.botLogin);
    await sim.waitFor(
      () => sim.pulls(OWNER, 'calc-replace').length > 0,
      120_000,
      () => `the replacing job's PR\n${pipeline.logs()}`,
    );
    const bodies = bot().map((c) => c.edits.join('\n'));
    assert.ok(
      bodies.some((b) => /cancel/i.test(b) && /newer request/.test(b)),
      'the first job says it was replaced',
    );
    assert.ok(
      bodies.some((b) => /replaces the running job/i.test(b)),
      'the second job said it replaces the first',
    );
    const prompts = model.requests.map((r) => requestText(r.body)).filter((t) => t.includes('[replace]'));
    assert.ok(prompts.some((t) => t.includes('do it with a helper module instead')));
  });

  it('a PR closed while its follow-up is queued → the follow-up is dropped with a note, nothing pushed', async () => {
    const { issue, pr } = await sharedPr();
    await idle();
    const commits = branchLog(issue).length;
    const queuedBefore = botComments(pr).filter((c) => /queued/i.test(c.body)).length;
    const busyIssue = sim.createIssue(OWNER, REPO, {
      title: 'Average rounds wrong [busy3]',
      body: 'x',
      author: MAINTAINER,
    }).number;
    await sim.label(OWNER, REPO, busyIssue, 'agent', MAINTAINER);
    await sim.waitFor(() => busy3.fired(), 60_000, 'the busy job to start');
    await sim.comment(OWNER, REPO, pr, MAINTAINER, '@agent rename the helper');
    await sim.waitFor(
      () => botComments(pr).filter((c) => /queued/i.test(c.body)).length > queuedBefore,
      30_000,
      'the queued follow-up',
    );
    await sim.deliver(
      sim.buildWebhook('pull_request', 'closed', { owner: OWNER, repo: REPO, pull: pr, sender: MAINTAINER }),
    );
    await sim.waitFor(
      () => botComments(pr).some((c) => /closed/i.test(c.body) && /dropped/i.test(c.body)),
      120_000,
      () => `the note\n${pipeline.logs()}`,
    );
    assert.equal(branchLog(issue).length, commits, 'nothing pushed');
  });

  it('a mention on a fork’s pull request that maintainers may not edit → one reply, no job, nothing pushed anywhere', async () => {
    const bare = sim.bareRepoPath(OWNER, REPO);
    // Hugo forks the repository and opens a pull request from it without allowing maintainer edits.
    const hugo = new Octokit({ baseUrl: sim.url, auth: sim.oauth.issueToken('hugo') });
    await hugo.rest.repos.createFork({ owner: OWNER, repo: REPO });
    const fork = sim.bareRepoPath('hugo', REPO);
    const work = mkdtempSync(join(tmpdir(), 'ia-human-pr-'));
    try {
      execFileSync(
        'bash',
        [
          '-c',
          `git clone -q "${bare}" r && cd r && echo "# human" >> README.md && git add -A && git -c user.name=Hu -c user.email=hu@example.invalid commit -qm "human change" && git push -q "${fork}" HEAD:refs/heads/human-feature`,
        ],
        { cwd: work },
      );
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
    const featureTip = gitOutput(fork, 'rev-parse', 'human-feature').trim();
    const { data: pr } = await hugo.rest.pulls.create({
      owner: OWNER,
      repo: REPO,
      head: 'hugo:human-feature',
      base: 'main',
      title: 'A human change',
      maintainer_can_modify: false,
    });
    const before = model.requests.length;
    const mainTip = gitOutput(bare, 'rev-parse', 'main').trim();
    const first = await sim.comment(OWNER, REPO, pr.number, MAINTAINER, '@agent please fix the lint errors');
    const again = await sim.comment(OWNER, REPO, pr.number, MAINTAINER, '@agent and again');
    await pipeline.intakeDone(first.delivery);
    await pipeline.intakeDone(again.delivery);
    assert.equal(botComments(pr.number).length, 1, 'one reply, not one per mention');
    assert.match(botComments(pr.number)[0]?.body ?? '', /did not allow edits by maintainers/);
    assert.equal(model.requests.length, before, 'no job ran');
    assert.equal(gitOutput(bare, 'rev-parse', 'main').trim(), mainTip);
    assert.equal(gitOutput(fork, 'rev-parse', 'human-feature').trim(), featureTip);
  });
});
