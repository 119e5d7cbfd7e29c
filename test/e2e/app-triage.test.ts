import assert from 'node:assert/strict';
import { test } from 'node:test';
import { oracle, reply } from '../../src/model-sim/index.js';
import { gitOutput } from '../support/fixture-repo.js';
import { readJobRun, startStack } from '../support/pipeline.js';
import { requestText } from '../support/pipeline-fixtures.js';
import { redisSkipReason } from '../support/redis-server.js';

const OWNER = 'acme';
const REPO = 'calc';

/**
 * Pre-flight triage through the whole App: the scripted model finds the issue unclear and asks →
 * one comment with its questions, outcome `needs_info`, no branch and no PR; a reader's comment is
 * not an answer; the author's plain reply continues the same conversation as a new round (its
 * trajectory holds the question, the answer and the fix) and ends in a PR.
 */
test(
  'App triage: an unclear issue gets one comment with questions and ends needs_info; the author’s answer continues the conversation to a PR',
  { skip: redisSkipReason(), timeout: 300_000 },
  async (t) => {
    const stack = await startStack({
      owner: OWNER,
      repo: REPO,
      maintainer: { login: 'maria', permission: 'write' },
      modelKey: 'sk-ant-triage-0123456789abcdef',
      policy: (fixture) => {
        const fix = oracle(fixture.patch);
        return (request, ctx) => {
          if (request.messages.length === 1) {
            return reply()
              .text('The issue does not say how halves should round.')
              .tool('ask_for_clarification', {
                missing: 'How averages that end in a half should round is not stated.',
                questions: [
                  'Should 0.375 round to 0.38 (half away from zero)?',
                  'And negative means likewise?',
                ],
              });
          }
          // The answered round: the oracle's plan, as if its first turn came after the answer.
          return fix(
            {
              ...request,
              messages: [request.messages[0], ...request.messages.slice(3)].filter((m) => m !== undefined),
            },
            ctx,
          );
        };
      },
    });
    t.after(() => stack.stop());
    const { sim, model, pipeline } = stack;
    sim.setPermission(OWNER, REPO, 'rita', 'read');
    const issue = sim.createIssue(OWNER, REPO, {
      title: 'Average rounds wrong',
      body: 'average() gives odd results',
      author: 'otto',
    }).number;
    const bot = (): { id: number; body: string; edits: readonly string[] }[] =>
      sim
        .comments(OWNER, REPO, issue)
        .filter((c) => c.user === sim.app.botLogin)
        .map((c) => ({ id: c.id, body: c.body, edits: c.edits }));
    const progress = () => bot().filter((c) => c.body.startsWith('<!-- issue-agent:progress'));

    await sim.label(OWNER, REPO, issue, 'agent', 'maria');
    await sim.waitFor(
      () => bot().some((c) => c.body.includes('Before I change anything')),
      120_000,
      () => `the question\n${pipeline.logs()}`,
    );
    await sim.waitFor(
      () => progress()[0]?.body.includes('Waiting for an answer') === true,
      30_000,
      () => `the progress comment's end\n${pipeline.logs()}`,
    );
    const questions = bot().filter((c) => c.body.includes('Before I change anything'));
    assert.equal(questions.length, 1, 'one clarifying comment');
    assert.match(questions[0]?.body ?? '', /1\. Should 0\.375 round to 0\.38/);
    assert.match(questions[0]?.body ?? '', /2\. And negative means likewise\?/);
    assert.match(questions[0]?.body ?? '', /How averages that end in a half should round is not stated/);
    assert.equal(sim.pulls(OWNER, REPO).length, 0, 'no PR');
    assert.doesNotMatch(
      gitOutput(sim.bareRepoPath(OWNER, REPO), 'branch', '--list'),
      /issue-agent\//,
      'no branch was pushed',
    );
    const firstJob = /job=([A-Za-z0-9-]+)/.exec(progress()[0]?.body ?? '')?.[1] ?? '';
    const first = readJobRun(stack, firstJob);
    assert.equal(first.base.triage, true);
    const ended = first.events.findLast((e) => e.kind === 'outcome');
    assert.equal(ended?.kind === 'outcome' ? ended.outcome : null, 'needs_info');
    assert.ok(!first.events.some((e) => e.kind === 'checkpoint'), 'nothing was changed');

    // A reader's comment is discussion, not an answer: nothing starts.
    const reader = await sim.comment(OWNER, REPO, issue, 'rita', 'I think it should just truncate.');
    await pipeline.intakeDone(reader.delivery);
    assert.equal(progress().length, 1);

    // The author answers, without mentioning the App. otto cannot start jobs: the maintainer's label
    // approved the issue's text, not an answer written later, so the answer waits for its own
    // approval; once approved, the same conversation continues.
    await sim.comment(OWNER, REPO, issue, 'otto', 'Yes to both: round half away from zero (ANSWER-MARK).');
    await sim.waitFor(
      () => bot().some((c) => c.body.includes("needs a maintainer's approval")),
      30_000,
      () => `the approval request\n${pipeline.logs()}`,
    );
    assert.equal(progress().length, 1, 'an unapproved answer starts nothing');
    sim.advanceClock(1000);
    await sim.comment(OWNER, REPO, issue, 'maria', '@agent approve');
    await sim.waitFor(
      () => sim.pulls(OWNER, REPO).length === 1,
      180_000,
      () => `the PR\n${pipeline.logs()}`,
    );
    assert.equal(progress().length, 2, 'the answer started one job');
    const secondJob = /job=([A-Za-z0-9-]+)/.exec(progress()[1]?.body ?? '')?.[1] ?? '';
    const second = readJobRun(stack, secondJob);
    assert.equal(second.base.conversationId, firstJob, 'the same conversation');
    const round = second.events.find((e) => e.kind === 'round_started');
    assert.ok(round?.kind === 'round_started' && round.by === 'otto' && round.text.includes('ANSWER-MARK'));
    assert.ok(
      second.events.some((e) => e.kind === 'action' && e.tool === 'ask_for_clarification'),
      'the question is part of the same trajectory',
    );
    const outcomes = second.events.flatMap((e) => (e.kind === 'outcome' ? [e.outcome] : []));
    assert.deepEqual(outcomes, ['needs_info', 'resolved']);
    // The model saw the answer in the conversation that holds its own question.
    const continued = model.requests.filter((r) => requestText(r.body).includes('ANSWER-MARK'));
    assert.ok(continued.length > 0);
    // …in an assistant turn of its own (the tool's name alone is also in every request's tool list).
    const askedInTurn = (body: unknown): boolean =>
      typeof body === 'object' &&
      body !== null &&
      'messages' in body &&
      Array.isArray(body.messages) &&
      body.messages.some(
        (m: unknown) =>
          typeof m === 'object' &&
          m !== null &&
          'role' in m &&
          m.role === 'assistant' &&
          /"name":"ask_for_clarification"/.test(JSON.stringify(m)),
      );
    assert.ok(continued.every((r) => askedInTurn(r.body)));
    const pr = sim.pulls(OWNER, REPO)[0];
    assert.match(pr?.body ?? '', /A new round/);

    // The question was answered once: a later comment starts nothing.
    const thanks = await sim.comment(OWNER, REPO, issue, 'otto', 'Thanks!');
    await pipeline.intakeDone(thanks.delivery);
    assert.equal(progress().length, 2);

    // Someone with write access may answer too (not only the issue's author).
    const another = sim.createIssue(OWNER, REPO, {
      title: 'Average rounds wrong again',
      body: 'average() still gives odd results',
      author: 'otto',
    }).number;
    const botOn = (n: number): string[] =>
      sim
        .comments(OWNER, REPO, n)
        .filter((c) => c.user === sim.app.botLogin)
        .map((c) => c.body);
    await sim.label(OWNER, REPO, another, 'agent', 'maria');
    await sim.waitFor(
      () => botOn(another).some((b) => b.includes('Before I change anything')),
      120_000,
      () => `the second question\n${pipeline.logs()}`,
    );
    await sim.waitFor(
      () => botOn(another).some((b) => b.includes('Waiting for an answer')),
      30_000,
      () => `the second wait\n${pipeline.logs()}`,
    );
    await sim.comment(OWNER, REPO, another, 'maria', 'Half away from zero (WRITER-ANSWER).');
    await sim.waitFor(
      () => sim.pulls(OWNER, REPO).length === 2,
      180_000,
      () => `the second PR\n${pipeline.logs()}`,
    );
    const secondProgress = botOn(another).filter((b) => b.startsWith('<!-- issue-agent:progress'));
    const answered = readJobRun(stack, /job=([A-Za-z0-9-]+)/.exec(secondProgress[1] ?? '')?.[1] ?? '');
    const byWriter = answered.events.find((e) => e.kind === 'round_started');
    assert.ok(
      byWriter?.kind === 'round_started' &&
        byWriter.by === 'maria' &&
        byWriter.text.includes('WRITER-ANSWER'),
    );
  },
);
