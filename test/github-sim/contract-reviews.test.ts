/**
 * Contract: pull request reviews and review comments, from GitHub's documentation
 * (https://docs.github.com/rest/pulls/reviews, https://docs.github.com/rest/pulls/comments): a review
 * with `comments[]` placed on lines of the diff, its state from `event` (PENDING without one), the
 * refusals of approving or requesting changes on one's own pull request, a single review comment
 * and a reply to it.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { RequestError } from '@octokit/request-error';
import { Octokit } from '@octokit/rest';
import { startGitHubSimulator, type GitHubSim } from '../support/github-sim/index.js';
import { git, installationOctokit, makeSourceRepo, quietLog, type TempDir } from './helpers.js';

let sim: GitHubSim;
let source: TempDir;
let app: Octokit;
let reviewer: Octokit;
let number: number;
let head: string;
const repo = { owner: 'octo', repo: 'reviewed' };

before(async () => {
  sim = await startGitHubSimulator();
  source = await makeSourceRepo({
    'src/a.js': 'one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\n',
  });
  await git(source.dir, ['checkout', '-q', '-b', 'fix']);
  await git(source.dir, ['mv', 'src/a.js', 'src/a.js.tmp']);
  await git(source.dir, ['mv', 'src/a.js.tmp', 'src/a.js']);
  const { writeFileSync } = await import('node:fs');
  writeFileSync(`${source.dir}/src/a.js`, 'one\ntwo\nthree\nfour\nfive\nsix\nseven\nEIGHT\nnine\nten\n');
  writeFileSync(`${source.dir}/src/b.js`, 'new file\n');
  await git(source.dir, ['add', '-A']);
  await git(source.dir, ['commit', '-q', '-m', 'fix']);
  head = (await git(source.dir, ['rev-parse', 'HEAD'])).trim();
  await git(source.dir, ['checkout', '-q', 'main']);
  await sim.createRepo({ owner: 'octo', name: 'reviewed', sourceDir: source.dir });
  sim.setPermission('octo', 'reviewed', 'rita', 'write');
  app = installationOctokit(sim);
  reviewer = new Octokit({ baseUrl: sim.url, auth: sim.oauth.issueToken('rita'), log: quietLog });
  number = (await app.rest.pulls.create({ ...repo, head: 'fix', base: 'main', title: 'Fix' })).data.number;
});

after(async () => {
  await sim.close();
  source.cleanup();
});

async function errorOf(p: Promise<unknown>): Promise<RequestError> {
  try {
    await p;
  } catch (error) {
    if (error instanceof RequestError) return error;
    throw error;
  }
  throw new Error('expected the request to fail');
}

test('a review with comments[] on lines of the diff: REQUEST_CHANGES, its comments in one review', async () => {
  const review = await reviewer.rest.pulls.createReview({
    ...repo,
    pull_number: number,
    commit_id: head,
    event: 'REQUEST_CHANGES',
    body: 'Two things.',
    comments: [
      { path: 'src/a.js', line: 8, body: 'Why upper case?' },
      { path: 'src/b.js', line: 1, body: 'Needs a test.' },
    ],
  });
  assert.equal(review.status, 200);
  assert.equal(review.data.state, 'CHANGES_REQUESTED');
  assert.equal(review.data.user?.login, 'rita');
  assert.equal(review.data.commit_id, head);
  const comments = await app.rest.pulls.listReviewComments({ ...repo, pull_number: number });
  assert.deepEqual(
    comments.data.map((c) => [c.path, c.line, c.body, c.pull_request_review_id]),
    [
      ['src/a.js', 8, 'Why upper case?', review.data.id],
      ['src/b.js', 1, 'Needs a test.', review.data.id],
    ],
  );
  assert.match(comments.data[0]?.diff_hunk ?? '', /^@@ .* @@[\s\S]*\+EIGHT$/);
  const reviews = await app.rest.pulls.listReviews({ ...repo, pull_number: number });
  assert.deepEqual(
    reviews.data.map((r) => r.state),
    ['CHANGES_REQUESTED'],
  );
  assert.deepEqual(sim.violations, []);
  assert.deepEqual(sim.responseViolations, []);
});

test('refusals: approving or requesting changes on your own pull request, a line outside the diff, a path outside it', async () => {
  const own = await errorOf(app.rest.pulls.createReview({ ...repo, pull_number: number, event: 'APPROVE' }));
  assert.equal(own.status, 422);
  assert.deepEqual((own.response?.data as { errors?: unknown }).errors, [
    'Can not approve your own pull request',
  ]);
  const ownChanges = await errorOf(
    app.rest.pulls.createReview({ ...repo, pull_number: number, event: 'REQUEST_CHANGES', body: 'x' }),
  );
  assert.deepEqual((ownChanges.response?.data as { errors?: unknown }).errors, [
    'Can not request changes on your own pull request',
  ]);
  const line = await errorOf(
    reviewer.rest.pulls.createReview({
      ...repo,
      pull_number: number,
      event: 'COMMENT',
      comments: [{ path: 'src/a.js', line: 1, body: 'not in the diff' }],
    }),
  );
  assert.equal(line.status, 422);
  const path = await errorOf(
    reviewer.rest.pulls.createReview({
      ...repo,
      pull_number: number,
      event: 'COMMENT',
      comments: [{ path: 'nope.js', line: 1, body: 'no such file' }],
    }),
  );
  assert.equal(path.status, 422);
  // The OpenAPI description's validation: `event` is one of three values.
  const bad = await errorOf(
    reviewer.request('POST /repos/{owner}/{repo}/pulls/{pull_number}/reviews', {
      ...repo,
      pull_number: number,
      event: 'MERGE',
    } as never),
  );
  assert.equal(bad.status, 422);
});

test('a review without an event is PENDING; a review comment and its reply through pulls/create-review-comment', async () => {
  const pending = await reviewer.rest.pulls.createReview({ ...repo, pull_number: number, body: 'draft' });
  assert.equal(pending.data.state, 'PENDING');
  assert.equal(pending.data.submitted_at, undefined);

  const comment = await app.rest.pulls.createReviewComment({
    ...repo,
    pull_number: number,
    commit_id: head,
    path: 'src/a.js',
    line: 8,
    side: 'RIGHT',
    body: 'Upper case on purpose: the spec says so.',
  });
  assert.equal(comment.status, 201);
  assert.equal(comment.data.line, 8);
  assert.equal(comment.data.user.login, sim.app.botLogin);
  const reply = await reviewer.rest.pulls.createReviewComment({
    ...repo,
    pull_number: number,
    commit_id: head,
    path: 'src/a.js',
    body: 'Fine.',
    in_reply_to: comment.data.id,
  });
  assert.equal(reply.data.in_reply_to_id, comment.data.id);
  const file = await app.rest.pulls.createReviewComment({
    ...repo,
    pull_number: number,
    commit_id: head,
    path: 'src/b.js',
    subject_type: 'file',
    body: 'About the whole file.',
  });
  assert.equal(file.data.subject_type, 'file');
  assert.deepEqual(sim.responseViolations, []);
});
