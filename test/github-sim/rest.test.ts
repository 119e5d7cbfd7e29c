import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createAppAuth } from '@octokit/auth-app';
import { Octokit } from '@octokit/rest';
import { RequestError } from '@octokit/request-error';
import { startGitHubSimulator, type GitHubSim } from '../support/github-sim/index.js';
import {
  git,
  installationOctokit,
  installationToken,
  makeSourceRepo,
  quietLog,
  type TempDir,
} from './helpers.js';

let sim: GitHubSim;
let source: TempDir;
let octokit: Octokit;

before(async () => {
  sim = await startGitHubSimulator();
  source = await makeSourceRepo({
    'README.md': '# demo\n',
    'src/index.js': 'export const answer = 42;\n',
    '.github/issue-agent.yml': 'maxSteps: 7\n',
  });
  await git(source.dir, ['checkout', '-q', '-b', 'feature']);
  await git(source.dir, ['commit', '-q', '--allow-empty', '-m', 'feature work']);
  await git(source.dir, ['checkout', '-q', 'main']);
  await sim.createRepo({ owner: 'octo', name: 'demo', sourceDir: source.dir });
  octokit = installationOctokit(sim);
});

after(async () => {
  await sim.close();
  source.cleanup();
});

async function status(promise: Promise<unknown>): Promise<number> {
  try {
    await promise;
    return 0;
  } catch (error) {
    assert.ok(error instanceof RequestError, `expected a RequestError, got ${String(error)}`);
    return error.status;
  }
}

void test('the app JWT and installation token flow works with @octokit/auth-app', async () => {
  const app = new Octokit({
    baseUrl: sim.url,
    log: quietLog,
    authStrategy: createAppAuth,
    auth: { appId: sim.app.id, privateKey: sim.app.privateKeyPem },
  });
  const { data: integration } = await app.rest.apps.getAuthenticated();
  assert.deepEqual([integration?.id, integration?.slug], [sim.app.id, sim.app.slug]);
  const { data: installation } = await app.rest.apps.getRepoInstallation({ owner: 'octo', repo: 'demo' });
  assert.equal(installation.id, sim.installationId);

  const { data: repo } = await octokit.rest.repos.get({ owner: 'octo', repo: 'demo' });
  assert.equal(repo.full_name, 'octo/demo');
  assert.equal(repo.default_branch, 'main');
  assert.equal(repo.clone_url, `${sim.url}/octo/demo.git`);
  const request = sim.requests.find((r) => r.operationId === 'apps/create-installation-access-token');
  assert.ok(request, 'the token was requested');
  assert.match(request.headers.authorization ?? '', /^bearer [\w-]+\.[\w-]+\.[\w-]+$/i);
  const last = sim.requests.at(-1);
  assert.match(last?.headers.authorization ?? '', /^token ghs_[A-Za-z0-9]{36}$/);

  const { data: bot } = await octokit.rest.users.getByUsername({ username: sim.app.botLogin });
  assert.deepEqual([bot.id, bot.type], [sim.app.botUserId, 'Bot']);
});

void test('a JWT signed with another key, and a missing or unknown token, get 401', async () => {
  const { generateKeyPairSync } = await import('node:crypto');
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const impostor = new Octokit({
    baseUrl: sim.url,
    log: quietLog,
    authStrategy: createAppAuth,
    auth: { appId: sim.app.id, privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() },
  });
  assert.equal(await status(impostor.rest.apps.getAuthenticated()), 401);
  const anonymous = new Octokit({ baseUrl: sim.url, log: quietLog });
  assert.equal(await status(anonymous.rest.repos.get({ owner: 'octo', repo: 'demo' })), 401);
  const unknown = new Octokit({ baseUrl: sim.url, log: quietLog, auth: `ghs_${'x'.repeat(36)}` });
  await assert.rejects(unknown.rest.repos.get({ owner: 'octo', repo: 'demo' }), (error: RequestError) => {
    assert.equal(error.status, 401);
    assert.match(error.message, /^Bad credentials/);
    return true;
  });
});

void test('JWT claims are checked as GitHub checks them: lifetime at most ten minutes, iss the app id', async () => {
  const { createSign } = await import('node:crypto');
  const jwt = (claims: Record<string, unknown>): string => {
    const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
    const unsigned = `${encode({ alg: 'RS256', typ: 'JWT' })}.${encode(claims)}`;
    return `${unsigned}.${createSign('RSA-SHA256').update(unsigned).sign(sim.app.privateKeyPem, 'base64url')}`;
  };
  const now = Math.floor(Date.now() / 1000);
  const attempt = async (claims: Record<string, unknown>): Promise<[number, string]> => {
    const response = await fetch(`${sim.url}/app`, { headers: { authorization: `Bearer ${jwt(claims)}` } });
    return [response.status, ((await response.json()) as { message: string }).message];
  };
  assert.deepEqual((await attempt({ iat: now - 30, exp: now + 570, iss: String(sim.app.id) }))[0], 200);
  assert.deepEqual(await attempt({ iat: now, exp: now + 1200, iss: sim.app.id }), [
    401,
    "'Expiration time' claim ('exp') is too far in the future",
  ]);
  assert.equal((await attempt({ iat: now - 700, exp: now - 100, iss: sim.app.id }))[0], 401);
  assert.equal((await attempt({ iat: now + 300, exp: now + 600, iss: sim.app.id }))[0], 401);
  assert.equal((await attempt({ iat: now, exp: now + 60, iss: sim.app.id + 1 }))[0], 401);
});

void test('a token asked for with fewer permissions or repositories is held to them', async () => {
  const app = new Octokit({
    baseUrl: sim.url,
    log: quietLog,
    authStrategy: createAppAuth,
    auth: { appId: sim.app.id, privateKey: sim.app.privateKeyPem },
  });
  const { data: readOnly } = await app.rest.apps.createInstallationAccessToken({
    installation_id: sim.installationId,
    permissions: { issues: 'read' },
  });
  assert.deepEqual(readOnly.permissions, { metadata: 'read', issues: 'read' });
  const reader = new Octokit({ baseUrl: sim.url, log: quietLog, auth: readOnly.token });
  const issue = sim.createIssue('octo', 'demo', { title: 'Scoped', body: 'b', author: 'alice' });
  await reader.rest.issues.get({ owner: 'octo', repo: 'demo', issue_number: issue.number });
  await assert.rejects(
    reader.rest.issues.createComment({ owner: 'octo', repo: 'demo', issue_number: issue.number, body: 'no' }),
    (error: RequestError) =>
      error.status === 403 && error.message.startsWith('Resource not accessible by integration'),
  );
  await assert.rejects(
    app.rest.apps.createInstallationAccessToken({
      installation_id: sim.installationId,
      permissions: { administration: 'write' },
    }),
    { status: 422 },
  );
  const { data: elsewhere } = await app.rest.apps.createInstallationAccessToken({
    installation_id: sim.installationId,
    repository_ids: [],
  });
  assert.equal(elsewhere.repository_selection, 'selected');
  const outsider = new Octokit({ baseUrl: sim.url, log: quietLog, auth: elsewhere.token });
  assert.equal(await status(outsider.rest.repos.get({ owner: 'octo', repo: 'demo' })), 404);
});

void test('an installation token is accepted until its expires_at and gets 401 from then on', async () => {
  // The simulator's clock is moved rather than waited on: a loaded machine may take longer than a
  // short-lived token's life between minting it and using it.
  const clocked = await startGitHubSimulator();
  try {
    await clocked.createRepo({ owner: 'octo', name: 'demo', sourceDir: source.dir });
    const { token, expiresAt } = await installationToken(clocked);
    const client = new Octokit({ baseUrl: clocked.url, log: quietLog, auth: token });
    assert.equal((await client.rest.repos.get({ owner: 'octo', repo: 'demo' })).status, 200);
    const left = Date.parse(expiresAt) - Date.now();
    assert.ok(left > 3500 * 1000 && left <= 3600 * 1000, `GitHub's hour, to the second: ${expiresAt}`);
    clocked.advanceClock(left - 60_000);
    assert.equal((await client.rest.repos.get({ owner: 'octo', repo: 'demo' })).status, 200);
    clocked.advanceClock(60_000);
    assert.equal(await status(client.rest.repos.get({ owner: 'octo', repo: 'demo' })), 401);
  } finally {
    await clocked.close();
  }
});

void test('a request body the OpenAPI description rejects gets 422 and is recorded as a violation', async () => {
  sim.createIssue('octo', 'demo', { title: 'Body check', body: 'x', author: 'alice' });
  const before = sim.violations.length;
  await assert.rejects(
    octokit.request('POST /repos/{owner}/{repo}/issues/{issue_number}/comments', {
      owner: 'octo',
      repo: 'demo',
      issue_number: 1,
      // Deliberately not a string.
      body: 5 as unknown as string,
    }),
    (error: RequestError) => {
      assert.equal(error.status, 422);
      const data = error.response?.data as { message: string; errors: unknown[] };
      assert.match(data.message, /^Invalid request\.\n\nFor 'properties\/body', 5 is not a string\.$/);
      assert.equal(data.errors.length, 1);
      return true;
    },
  );
  const violation = sim.violations[before];
  assert.equal(violation?.operationId, 'issues/create-comment');
  assert.match(violation.errors, /is not a string/);

  await assert.rejects(
    octokit.request('POST /repos/{owner}/{repo}/issues/{issue_number}/reactions', {
      owner: 'octo',
      repo: 'demo',
      issue_number: 1,
      content: 'thumbs-up' as 'eyes',
    }),
    { status: 422 },
  );
  assert.equal(sim.violations.length, before + 2);
});

void test('unknown and unimplemented routes get 404 and are recorded as violations', async () => {
  const before = sim.violations.length;
  assert.equal(
    await status(octokit.request('GET /repos/{owner}/{repo}/no-such-thing', { owner: 'octo', repo: 'demo' })),
    404,
  );
  assert.equal(await status(octokit.rest.repos.listBranches({ owner: 'octo', repo: 'demo' })), 404);
  assert.deepEqual(
    sim.violations.slice(before).map((v) => v.operationId),
    [null, 'repos/list-branches'],
  );
});

void test('issues and pull requests share numbers; comments paginate with a Link header', async () => {
  const issue = sim.createIssue('octo', 'demo', { title: 'Paging', body: 'many comments', author: 'alice' });
  for (let i = 0; i < 5; i++) {
    await octokit.rest.issues.createComment({
      owner: 'octo',
      repo: 'demo',
      issue_number: issue.number,
      body: `c${i}`,
    });
  }
  const first = await octokit.rest.issues.listComments({
    owner: 'octo',
    repo: 'demo',
    issue_number: issue.number,
    per_page: 2,
  });
  assert.deepEqual(
    first.data.map((c) => c.body),
    ['c0', 'c1'],
  );
  assert.match(first.headers.link ?? '', /page=2>; rel="next", <[^>]+page=3>; rel="last"/);
  const all = await octokit.paginate(octokit.rest.issues.listComments, {
    owner: 'octo',
    repo: 'demo',
    issue_number: issue.number,
    per_page: 2,
  });
  assert.deepEqual(
    all.map((c) => c.body),
    ['c0', 'c1', 'c2', 'c3', 'c4'],
  );

  const { data: pull } = await octokit.rest.pulls.create({
    owner: 'octo',
    repo: 'demo',
    head: 'feature',
    base: 'main',
    title: 'Feature',
  });
  assert.equal(pull.number, issue.number + 1);
  const { data: asIssue } = await octokit.rest.issues.get({
    owner: 'octo',
    repo: 'demo',
    issue_number: pull.number,
  });
  assert.ok(asIssue.pull_request, 'a pull request read as an issue has pull_request');
  assert.equal(
    (await octokit.rest.issues.get({ owner: 'octo', repo: 'demo', issue_number: issue.number })).data
      .pull_request,
    undefined,
  );
  assert.equal(
    await status(octokit.rest.pulls.get({ owner: 'octo', repo: 'demo', pull_number: issue.number })),
    404,
  );
  await octokit.rest.pulls.update({ owner: 'octo', repo: 'demo', pull_number: pull.number, state: 'closed' });
});

void test('comments are edited, deleted and reacted to; edits are kept', async () => {
  const issue = sim.createIssue('octo', 'demo', { title: 'Edits', body: 'b', author: 'alice' });
  const { data: comment } = await octokit.rest.issues.createComment({
    owner: 'octo',
    repo: 'demo',
    issue_number: issue.number,
    body: 'Working on it',
  });
  assert.equal(comment.user?.login, sim.app.botLogin);
  assert.equal(comment.performed_via_github_app, null);
  await octokit.rest.issues.updateComment({
    owner: 'octo',
    repo: 'demo',
    comment_id: comment.id,
    body: 'Done',
  });
  const first = await octokit.rest.reactions.createForIssueComment({
    owner: 'octo',
    repo: 'demo',
    comment_id: comment.id,
    content: 'eyes',
  });
  const again = await octokit.rest.reactions.createForIssueComment({
    owner: 'octo',
    repo: 'demo',
    comment_id: comment.id,
    content: 'eyes',
  });
  assert.deepEqual([first.status, again.status], [201, 200]);
  assert.equal(again.data.id, first.data.id);
  const onIssue = await octokit.rest.reactions.createForIssue({
    owner: 'octo',
    repo: 'demo',
    issue_number: issue.number,
    content: '+1',
  });
  assert.equal(onIssue.status, 201);

  const [stored] = sim.comments('octo', 'demo', issue.number);
  assert.deepEqual(stored?.edits, ['Working on it', 'Done']);
  assert.deepEqual(
    sim.reactions('octo', 'demo', comment.id).map((r) => [r.content, r.user]),
    [['eyes', sim.app.botLogin]],
  );
  assert.deepEqual(
    sim.reactions('octo', 'demo', { issue: issue.number }).map((r) => r.content),
    ['+1'],
  );
  const { data: read } = await octokit.rest.issues.getComment({
    owner: 'octo',
    repo: 'demo',
    comment_id: comment.id,
  });
  assert.equal(read.reactions?.eyes, 1);

  const deleted = await octokit.rest.issues.deleteComment({
    owner: 'octo',
    repo: 'demo',
    comment_id: comment.id,
  });
  assert.equal(deleted.status, 204);
  assert.equal(
    await status(octokit.rest.issues.getComment({ owner: 'octo', repo: 'demo', comment_id: comment.id })),
    404,
  );
});

void test('labels are added and removed', async () => {
  const issue = sim.createIssue('octo', 'demo', {
    title: 'Labels',
    body: 'b',
    author: 'alice',
    labels: ['bug'],
  });
  const { data: added } = await octokit.rest.issues.addLabels({
    owner: 'octo',
    repo: 'demo',
    issue_number: issue.number,
    labels: ['agent:working'],
  });
  assert.deepEqual(
    added.map((l) => l.name),
    ['bug', 'agent:working'],
  );
  const { data: left } = await octokit.rest.issues.removeLabel({
    owner: 'octo',
    repo: 'demo',
    issue_number: issue.number,
    name: 'bug',
  });
  assert.deepEqual(
    left.map((l) => l.name),
    ['agent:working'],
  );
  assert.equal(
    await status(
      octokit.rest.issues.removeLabel({
        owner: 'octo',
        repo: 'demo',
        issue_number: issue.number,
        name: 'bug',
      }),
    ),
    404,
  );
  assert.deepEqual(sim.issue('octo', 'demo', issue.number).labels, ['agent:working']);
});

void test('contents are read raw or as base64 JSON; missing files and repos are 404', async () => {
  const raw = await octokit.rest.repos.getContent({
    owner: 'octo',
    repo: 'demo',
    path: '.github/issue-agent.yml',
    mediaType: { format: 'raw' },
  });
  assert.equal(raw.data, 'maxSteps: 7\n');
  assert.equal(raw.headers['content-type'], 'application/vnd.github.v3.raw; charset=utf-8');
  const { data: file } = await octokit.rest.repos.getContent({
    owner: 'octo',
    repo: 'demo',
    path: 'src/index.js',
    ref: 'main',
  });
  assert.ok(!Array.isArray(file) && file.type === 'file');
  assert.equal(Buffer.from(file.content, 'base64').toString('utf8'), 'export const answer = 42;\n');
  const { data: dir } = await octokit.rest.repos.getContent({ owner: 'octo', repo: 'demo', path: 'src' });
  assert.ok(Array.isArray(dir));
  assert.deepEqual(
    dir.map((e) => [e.name, e.type]),
    [['index.js', 'file']],
  );
  assert.equal(
    await status(octokit.rest.repos.getContent({ owner: 'octo', repo: 'demo', path: 'nope.txt' })),
    404,
  );
  assert.equal(
    await status(
      octokit.rest.repos.getContent({ owner: 'octo', repo: 'demo', path: 'README.md', ref: 'no-branch' }),
    ),
    404,
  );
  assert.equal(
    await status(octokit.rest.repos.getContent({ owner: 'octo', repo: '.github', path: 'issue-agent.yml' })),
    404,
  );
});

void test('collaborator permission maps fine-grained roles as GitHub does', async () => {
  sim.setPermission('octo', 'demo', 'maintainer', 'maintain');
  sim.setPermission('octo', 'demo', 'triager', 'triage');
  const level = async (username: string) => {
    const { data } = await octokit.rest.repos.getCollaboratorPermissionLevel({
      owner: 'octo',
      repo: 'demo',
      username,
    });
    return [data.permission, data.role_name];
  };
  assert.deepEqual(await level('octo'), ['admin', 'admin']);
  assert.deepEqual(await level('maintainer'), ['write', 'maintain']);
  assert.deepEqual(await level('triager'), ['read', 'triage']);
  assert.equal(await status(level('nobody-at-all')), 404);
});

void test('pull requests: validation errors, filters, updates, review comments and replies', async () => {
  await assert.rejects(
    octokit.rest.pulls.create({ owner: 'octo', repo: 'demo', head: 'missing', base: 'main', title: 'x' }),
    (error: RequestError) => {
      assert.equal(error.status, 422);
      const data = error.response?.data as { message: string; errors: unknown[] };
      assert.equal(data.message, 'Validation Failed');
      assert.deepEqual(data.errors, [{ resource: 'PullRequest', field: 'head', code: 'invalid' }]);
      return true;
    },
  );
  const { data: pull } = await octokit.rest.pulls.create({
    owner: 'octo',
    repo: 'demo',
    head: 'octo:feature',
    base: 'main',
    title: 'Fix',
    body: 'Body',
    draft: true,
  });
  assert.equal(pull.draft, true);
  assert.equal(pull.head.ref, 'feature');
  assert.equal(pull.commits, 1);
  await assert.rejects(
    octokit.rest.pulls.create({ owner: 'octo', repo: 'demo', head: 'feature', base: 'main', title: 'Again' }),
    (error: RequestError) => {
      const data = error.response?.data as { errors: { message: string }[] };
      assert.equal(data.errors[0]?.message, 'A pull request already exists for octo:feature.');
      return true;
    },
  );
  const { data: open } = await octokit.rest.pulls.list({ owner: 'octo', repo: 'demo', head: 'octo:feature' });
  assert.deepEqual(
    open.map((p) => p.number),
    [pull.number],
  );
  assert.deepEqual((await octokit.rest.pulls.list({ owner: 'octo', repo: 'demo', base: 'other' })).data, []);

  const { data: updated } = await octokit.rest.pulls.update({
    owner: 'octo',
    repo: 'demo',
    pull_number: pull.number,
    title: 'Fix it',
  });
  assert.equal(updated.title, 'Fix it');
  assert.deepEqual(
    sim.pulls('octo', 'demo').find((p) => p.number === pull.number),
    {
      number: pull.number,
      title: 'Fix it',
      body: 'Body',
      head: { ref: 'feature', sha: pull.head.sha },
      base: { ref: 'main', sha: pull.base.sha },
      draft: true,
      state: 'open',
      merged: false,
      mergedAt: null,
      mergeCommitSha: null,
      user: sim.app.botLogin,
      labels: [],
    },
  );

  const hook = sim.buildWebhook('pull_request_review_comment', 'created', {
    owner: 'octo',
    repo: 'demo',
    pull: pull.number,
    sender: 'octo',
    comment: { body: 'Please rename this' },
    path: 'src/index.js',
    line: 1,
  });
  const commentId = (hook.payload.comment as { id: number }).id;
  const { data: reply } = await octokit.rest.pulls.createReplyForReviewComment({
    owner: 'octo',
    repo: 'demo',
    pull_number: pull.number,
    comment_id: commentId,
    body: 'Renamed.',
  });
  assert.equal(reply.in_reply_to_id, commentId);
  const { data: comments } = await octokit.rest.pulls.listReviewComments({
    owner: 'octo',
    repo: 'demo',
    pull_number: pull.number,
  });
  assert.deepEqual(
    comments.map((c) => [c.user.login, c.body, c.path]),
    [
      ['octo', 'Please rename this', 'src/index.js'],
      [sim.app.botLogin, 'Renamed.', 'src/index.js'],
    ],
  );
  const { data: reviews } = await octokit.rest.pulls.listReviews({
    owner: 'octo',
    repo: 'demo',
    pull_number: pull.number,
  });
  assert.equal(reviews.length, 2);
  await octokit.rest.pulls.update({ owner: 'octo', repo: 'demo', pull_number: pull.number, state: 'closed' });
  assert.deepEqual(
    (await octokit.rest.pulls.list({ owner: 'octo', repo: 'demo', head: 'octo:feature' })).data,
    [],
  );
});

void test('responses carry rate-limit headers and GET /rate_limit answers', async () => {
  const response = await octokit.rest.rateLimit.get();
  assert.equal(response.data.resources.core.limit, 5000);
  assert.equal(response.headers['x-ratelimit-limit'], '5000');
  assert.equal(response.headers['x-ratelimit-resource'], 'core');
  assert.ok(Number(response.headers['x-ratelimit-remaining']) < 5000);
  assert.ok(Number(response.headers['x-ratelimit-reset']) > Date.now() / 1000);
});

void test('every response so far matches the OpenAPI response schema', () => {
  assert.deepEqual(sim.responseViolations, []);
});
