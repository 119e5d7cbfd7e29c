import assert from 'node:assert/strict';
import { test } from 'node:test';
import { oracle, reply, type Policy } from '../../src/model-sim/index.js';
import { gitOutput } from '../support/fixture-repo.js';
import { branchLogReader } from '../support/branch-log.js';
import type { DeliveryResult } from '../support/github-sim/types.js';
import { createConfiguredRepo, startStack } from '../support/pipeline.js';
import { requestText, taskText } from '../support/pipeline-fixtures.js';
import { redisSkipReason } from '../support/redis-server.js';

const OWNER = 'acme';
const REPO = 'calc';
const CI_ROUND = 'Its CI failed';

/** A CI round: one small change (a comment naming the turn), then finish. */
const ciFix: Policy = (request, ctx) => {
  const turns = request.messages.filter((m) => m.role === 'assistant').length;
  if (turns === 0) {
    return reply()
      .text('The check fails; adjusting.')
      .tool('bash', { command: `printf '// ci fix ${ctx.requestIndex}\\n' >> src/calc.js` });
  }
  return reply().tool('finish', { summary: 'Fixed what the check reported.' });
};

/**
 * Red CI on the App's own PR (GitHub simulator with check runs and Actions job logs, real Redis):
 * a failing check → one round whose prompt holds the log tail → a new commit; again on the new
 * head → round 2; a third failure after `ciFixRounds: 2` → a comment and no round; a check that also
 * fails on the base branch → called pre-existing, no round.
 */
test(
  'App red CI: a failing check on its PR starts a fix round with the log tail; at most ciFixRounds; a failure the base branch shares is pre-existing',
  { skip: redisSkipReason(), timeout: 400_000 },
  async (t) => {
    const stack = await startStack({
      owner: OWNER,
      repo: REPO,
      maintainer: { login: 'maria', permission: 'write' },
      modelKey: 'sk-ant-ci-rounds-0123456789abcdef',
      policy: (fixture) => {
        const fix = oracle(fixture.patch);
        return (request, ctx) =>
          taskText(request).includes(CI_ROUND) ? ciFix(request, ctx) : fix(request, ctx);
      },
    });
    t.after(() => stack.stop());
    const { sim, model, pipeline } = stack;
    const bare = sim.bareRepoPath(OWNER, REPO);
    // Polled while jobs push: git runs once per tip the branch has had (branchLogReader).
    const commits = branchLogReader(sim, OWNER, REPO, '%H %s');
    const progressOf = (n: number, text: string): string | undefined =>
      sim
        .comments(OWNER, REPO, n)
        .find((c) => c.body.startsWith('<!-- issue-agent:progress') && c.body.includes(text))?.body;
    const runOf = async (progress: string): Promise<{ ciRound: unknown }> => {
      const jobId = /job=([A-Za-z0-9-]+)/.exec(progress)?.[1] ?? '';
      const res = await fetch(`${pipeline.appUrl}/api/runs/${jobId}`, {
        headers: { authorization: `Bearer ${pipeline.adminToken}` },
      });
      return ((await res.json()) as { run: { ciRound: unknown } }).run;
    };
    const progressCount = (n: number): number =>
      sim.comments(OWNER, REPO, n).filter((c) => c.body.startsWith('<!-- issue-agent:progress')).length;
    const botSays = (n: number): string[] =>
      sim
        .comments(OWNER, REPO, n)
        .filter((c) => c.user === sim.app.botLogin && !c.body.startsWith('<!-- issue-agent:'))
        .map((c) => c.body);

    const issue = sim.createIssue(OWNER, REPO, {
      title: 'Average rounds wrong',
      body: 'x',
      author: 'maria',
    }).number;
    await sim.label(OWNER, REPO, issue, 'agent', 'maria');
    await sim.waitFor(
      () => sim.pulls(OWNER, REPO).length === 1,
      120_000,
      () => `the PR\n${pipeline.logs()}`,
    );
    const pr = sim.pulls(OWNER, REPO)[0];
    assert.ok(pr !== undefined);
    const branch = pr.head.ref;
    const head = (): string => commits(branch)[0]?.split(' ')[0] ?? '';
    const fail = async (sha: string, marker: string): Promise<DeliveryResult> => {
      const { delivery } = await sim.addCheckRun(OWNER, REPO, {
        headSha: sha,
        name: 'test',
        conclusion: 'failure',
        output: { title: '1 test failed', summary: `average rounds wrong ${marker}-SUMMARY` },
        annotations: [
          { path: 'src/calc.js', startLine: 30, level: 'failure', message: `expected 1.67 ${marker}-NOTE` },
        ],
        log: [
          'Run npm test',
          ...Array.from({ length: 200 }, (_, i) => `noise line ${i}`),
          `AssertionError: ${marker}-LOG`,
        ].join('\n'),
      });
      return delivery;
    };

    // Round 1: the failing check's log tail, summary and annotation reach the model; a new commit.
    const before = commits(branch).length;
    await fail(head(), 'R1');
    await sim.waitFor(
      () => commits(branch).length === before + 1,
      120_000,
      () => `round 1's commit\n${pipeline.logs()}`,
    );
    const round1 = model.requests.map((r) => requestText(r.body)).filter((t) => t.includes('R1-LOG'));
    assert.ok(round1.length > 0, 'the log tail is in the round’s prompt');
    assert.match(round1[0] ?? '', /R1-SUMMARY/);
    assert.match(round1[0] ?? '', /R1-NOTE/);
    assert.match(round1[0] ?? '', /round 1 of at most 2/);
    assert.doesNotMatch(round1[0] ?? '', /noise line 10\b/, 'only the tail of the log');
    assert.match(commits(branch)[0] ?? '', /Fix CI on #\d+ \(round 1 of 2\): test/);
    await sim.waitFor(
      () => /Round 2 \(CI fix 1 of 2\)/.test(sim.pulls(OWNER, REPO)[0]?.body ?? ''),
      30_000,
      'the PR body to name the CI round',
    );
    // The round's progress comment and the run view say which round it is.
    const progress1 = progressOf(pr.number, 'CI fix round 1 of 2');
    assert.ok(progress1 !== undefined, 'the progress comment names the round');
    assert.deepEqual((await runOf(progress1)).ciRound, {
      round: 1,
      of: 2,
      checks: ['test'],
      preExisting: [],
    });

    // Round 2 on the new head.
    await fail(head(), 'R2');
    await sim.waitFor(
      () => commits(branch).length === before + 2,
      120_000,
      () => `round 2's commit\n${pipeline.logs()}`,
    );
    assert.ok(model.requests.some((r) => requestText(r.body).includes('R2-LOG')));

    // A third failure: the rounds are used up; a comment, and no round.
    const jobsBefore = progressCount(pr.number);
    const third = await fail(head(), 'R3');
    await sim.waitFor(
      () => botSays(pr.number).some((b) => /after 2 automatic rounds/.test(b)),
      60_000,
      () => `the comment\n${pipeline.logs()}`,
    );
    // Intake is done with the delivery and announced no job: no round can follow.
    await pipeline.intakeDone(third);
    assert.equal(progressCount(pr.number), jobsBefore, 'no job for a third round');
    assert.equal(commits(branch).length, before + 2);
    assert.ok(!model.requests.some((r) => requestText(r.body).includes('R3-LOG')));

    // A check that fails on main too is pre-existing: said so, no round.
    const other = sim.createIssue(OWNER, REPO, {
      title: 'Average rounds wrong again',
      body: 'x',
      author: 'maria',
    }).number;
    await sim.label(OWNER, REPO, other, 'agent', 'maria');
    await sim.waitFor(
      () => sim.pulls(OWNER, REPO).length === 2,
      120_000,
      () => `the second PR\n${pipeline.logs()}`,
    );
    const pr2 = sim.pulls(OWNER, REPO).find((p) => p.number !== pr.number);
    assert.ok(pr2 !== undefined);
    const mainTip = gitOutput(bare, 'rev-parse', 'main').trim();
    await sim.addCheckRun(OWNER, REPO, {
      headSha: mainTip,
      name: 'lint',
      conclusion: 'failure',
      deliver: false,
    });
    // `lint` fails on main too, `test` only here: a round for `test`, `lint` named as pre-existing.
    const before2 = commits(pr2.head.ref).length;
    await sim.addCheckRun(OWNER, REPO, {
      headSha: pr2.head.sha,
      name: 'lint',
      conclusion: 'failure',
      log: 'LINT-LOG',
      deliver: false,
    });
    await sim.addCheckRun(OWNER, REPO, {
      headSha: pr2.head.sha,
      name: 'test',
      conclusion: 'failure',
      log: 'M1-LOG',
    });
    await sim.waitFor(
      () => commits(pr2.head.ref).length === before2 + 1,
      120_000,
      () => `the mixed round's commit\n${pipeline.logs()}`,
    );
    const mixed = model.requests.map((r) => requestText(r.body)).find((t) => t.includes('M1-LOG')) ?? '';
    assert.match(mixed, /failing on `main` too \(pre-existing[^)]*\)[^.]*: \\?"lint\\?"/);
    assert.ok(
      !model.requests.some((r) => requestText(r.body).includes('LINT-LOG')),
      'no log of a pre-existing check',
    );
    await sim.waitFor(
      () => progressOf(pr2.number, 'pre-existing, not fixed here') !== undefined,
      30_000,
      'the round’s progress comment to name the pre-existing check',
    );
    const mixedProgress = progressOf(pr2.number, 'pre-existing, not fixed here') ?? '';
    assert.match(mixedProgress, /`lint` fails on `main` too: pre-existing, not fixed here/);
    assert.deepEqual((await runOf(mixedProgress)).ciRound, {
      round: 1,
      of: 2,
      checks: ['test'],
      preExisting: ['lint'],
    });

    // On the new head only `lint` fails: pre-existing, said so, no round.
    const head2 = commits(pr2.head.ref)[0]?.split(' ')[0] ?? '';
    const jobsBefore2 = progressCount(pr2.number);
    const { delivery: lint } = await sim.addCheckRun(OWNER, REPO, {
      headSha: head2,
      name: 'lint',
      conclusion: 'failure',
      log: 'LINT-LOG',
    });
    await sim.waitFor(
      () => botSays(pr2.number).some((b) => /pre-existing/.test(b)),
      60_000,
      () => `the pre-existing comment\n${pipeline.logs()}`,
    );
    assert.match(botSays(pr2.number).find((b) => /pre-existing/.test(b)) ?? '', /`lint`.*`main`/);
    await pipeline.intakeDone(lint);
    assert.equal(progressCount(pr2.number), jobsBefore2, 'no job for a pre-existing failure');
    assert.equal(commits(pr2.head.ref).length, before2 + 1);
    assert.ok(!model.requests.some((r) => requestText(r.body).includes('LINT-LOG')));

    // A repository that allows one round (`ciFixRounds: 1`): the second failure gets the comment.
    await createConfiguredRepo(sim, { owner: OWNER, name: 'calc-one', writer: 'maria' }, 'ciFixRounds: 1\n');
    const oneIssue = sim.createIssue(OWNER, 'calc-one', {
      title: 'Average rounds wrong',
      body: 'x',
      author: 'maria',
    }).number;
    await sim.label(OWNER, 'calc-one', oneIssue, 'agent', 'maria');
    await sim.waitFor(
      () => sim.pulls(OWNER, 'calc-one').length === 1,
      120_000,
      () => `calc-one's PR\n${pipeline.logs()}`,
    );
    const onePr = sim.pulls(OWNER, 'calc-one')[0];
    assert.ok(onePr !== undefined);
    const oneLog = branchLogReader(sim, OWNER, 'calc-one', '%H %s');
    const oneCommits = (): string[] => oneLog(onePr.head.ref);
    const oneBefore = oneCommits().length;
    const failOne = async (marker: string): Promise<void> => {
      await sim.addCheckRun(OWNER, 'calc-one', {
        headSha: oneCommits()[0]?.split(' ')[0] ?? '',
        name: 'test',
        conclusion: 'failure',
        log: `${marker}-LOG`,
      });
    };
    await failOne('ONE1');
    await sim.waitFor(
      () => oneCommits().length === oneBefore + 1,
      120_000,
      () => `calc-one's round\n${pipeline.logs()}`,
    );
    assert.match(oneCommits()[0] ?? '', /\(round 1 of 1\)/);
    await failOne('ONE2');
    const oneSays = (): string[] =>
      sim
        .comments(OWNER, 'calc-one', onePr.number)
        .filter((c) => c.user === sim.app.botLogin)
        .map((c) => c.body);
    await sim.waitFor(
      () => oneSays().some((b) => /after 1 automatic round of fixes/.test(b)),
      60_000,
      () => `calc-one's comment\n${pipeline.logs()}`,
    );
    assert.equal(oneCommits().length, oneBefore + 1);
    assert.ok(!model.requests.some((r) => requestText(r.body).includes('ONE2-LOG')));
  },
);
