import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { createAppAuth } from '@octokit/auth-app';
import { Octokit } from '@octokit/rest';
import { RequestError } from '@octokit/request-error';
import { startGitHubSimulator, type GitHubSim } from '../support/github-sim/index.js';
import {
  CREDENTIAL_HELPER,
  git,
  gitResult,
  installationOctokit,
  installationToken,
  makeSourceRepo,
  quietLog,
  tempDir,
  type TempDir,
} from './helpers.js';

// A repository's history as a tool reads it: closed issues, and the merged pull requests that fixed them.

const OWNER = 'octo';
const REPO = 'history';

let sim: GitHubSim;
let receiver: Server;
let source: TempDir;
let work: TempDir;
let clone: string;
let token: string;
let octokit: Octokit;

before(async () => {
  receiver = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(202).end('accepted'));
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  sim = await startGitHubSimulator({
    echoWebhooks: true,
    webhookTarget: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/`,
  });
  source = await makeSourceRepo({
    'README.md': '# history\n',
    'src/calc.js': 'export const add = (a, b) => a + b;\n',
  });
  await git(source.dir, ['checkout', '-q', '-b', 'feature']);
  writeFileSync(join(source.dir, 'src/feature.js'), 'export const feature = true;\n');
  await git(source.dir, ['add', '-A']);
  await git(source.dir, ['commit', '-q', '-m', 'feature']);
  await git(source.dir, ['checkout', '-q', 'main']);
  await sim.createRepo({ owner: OWNER, name: REPO, sourceDir: source.dir, private: true });
  await sim.createRepo({ owner: OWNER, name: 'listing', sourceDir: source.dir });
  token = (await installationToken(sim)).token;
  octokit = installationOctokit(sim);
  work = tempDir('github-sim-history-');
  await git(work.dir, [...CREDENTIAL_HELPER, 'clone', '-q', remote(), 'clone'], { SIM_TOKEN: token });
  clone = join(work.dir, 'clone');
});

after(async () => {
  await sim.close();
  await new Promise((resolve) => receiver.close(resolve));
  source.cleanup();
  work.cleanup();
});

function remote(): string {
  return `${sim.url}/${OWNER}/${REPO}.git`;
}

/** Git in the clone, with the installation token from a credential helper. */
function inClone(args: readonly string[]): Promise<string> {
  return git(clone, [...CREDENTIAL_HELPER, ...args], { SIM_TOKEN: token });
}

/** A new branch from `from` (as on the simulator now) with one commit per entry of `commits`; pushed. */
async function pushBranch(
  branch: string,
  commits: readonly { message: string; files: Record<string, string> }[],
  from = 'main',
): Promise<string> {
  await inClone(['fetch', '-q', 'origin']);
  await git(clone, ['checkout', '-q', '-B', branch, `origin/${from}`]);
  for (const commit of commits) {
    for (const [path, text] of Object.entries(commit.files)) writeFileSync(join(clone, path), text);
    await git(clone, ['add', '-A']);
    await git(clone, ['commit', '-q', '-m', commit.message]);
  }
  await inClone(['push', '-q', '-f', 'origin', branch]);
  return (await git(clone, ['rev-parse', 'HEAD'])).trim();
}

function bare(args: readonly string[]): Promise<string> {
  return git(sim.bareRepoPath(OWNER, REPO), args);
}

async function status(promise: Promise<unknown>): Promise<[number, string]> {
  try {
    await promise;
    return [0, ''];
  } catch (error) {
    assert.ok(error instanceof RequestError, `expected a RequestError, got ${String(error)}`);
    return [error.status, (error.response?.data as { message?: string } | undefined)?.message ?? ''];
  }
}

/** `git ls-remote` over the simulator's smart HTTP, the token as the Basic password. */
async function lsRemote(): Promise<Map<string, string>> {
  const basic = Buffer.from(`x-access-token:${token}`).toString('base64');
  const out = await git(work.dir, ['ls-remote', remote()], {
    GIT_CONFIG_COUNT: '1',
    GIT_CONFIG_KEY_0: 'http.extraHeader',
    GIT_CONFIG_VALUE_0: `Authorization: Basic ${basic}`,
  });
  return new Map(
    out
      .trim()
      .split('\n')
      .map((line) => {
        const [sha = '', ref = ''] = line.split('\t');
        return [ref, sha] as const;
      }),
  );
}

void test('issues/list-for-repo: state, since, sort, labels, creator, pull requests and pagination', async () => {
  const repo = 'listing';
  const made = [
    sim.createIssue(OWNER, repo, { title: 'one', body: 'b', author: 'alice', labels: ['bug'] }),
    sim.createIssue(OWNER, repo, { title: 'two', body: 'b', author: 'bob', labels: ['bug', 'ui'] }),
    sim.createIssue(OWNER, repo, { title: 'three', body: 'b', author: 'alice' }),
    sim.createIssue(OWNER, repo, { title: 'four', body: 'b', author: 'bob', labels: ['UI'] }),
  ];
  const pull = await sim.openPull(OWNER, repo, { head: 'feature', title: 'Feature', author: 'carol' });
  const numbers = made.map((i) => i.number);
  const [one = 0, two = 0, three = 0, four = 0] = numbers;
  // Timestamps are whole seconds: what is closed after the wait is updated later than everything else.
  await new Promise((resolve) => setTimeout(resolve, 1100));
  const since = new Date(Math.floor(Date.now() / 1000) * 1000).toISOString();
  const closed = sim.closeIssue(OWNER, repo, two, { by: 'carol' });
  assert.equal(closed.state, 'closed');
  sim.closeIssue(OWNER, repo, three, { by: 'carol', reason: 'not_planned' });

  const list = async (query: Record<string, string | number> = {}) =>
    (await octokit.request('GET /repos/{owner}/{repo}/issues', { owner: OWNER, repo, ...query })).data;

  const open = await list();
  assert.deepEqual(
    open.map((i) => i.number),
    [pull.number, four, one],
    'open by default, newest first, pull requests included',
  );
  const listedPull = open[0];
  assert.equal(listedPull?.pull_request?.merged_at, null);
  assert.equal(listedPull.pull_request.url, `${sim.url}/repos/${OWNER}/${repo}/pulls/${pull.number}`);
  assert.equal(open[1]?.pull_request, undefined);

  const closedList = await list({ state: 'closed', direction: 'asc' });
  assert.deepEqual(
    closedList.map((i) => [i.number, i.state_reason, i.closed_by?.login]),
    [
      [two, 'completed', 'carol'],
      [three, 'not_planned', 'carol'],
    ],
  );
  assert.ok(closedList.every((i) => i.closed_at !== null));

  assert.deepEqual(
    (await list({ state: 'all', since })).map((i) => i.number),
    [three, two],
    'since: only what was updated at or after it',
  );
  assert.deepEqual((await list({ state: 'all', since: '2999-01-01T00:00:00Z' })).length, 0);
  assert.deepEqual(
    (await list({ state: 'all', sort: 'updated', direction: 'desc' })).slice(0, 2).map((i) => i.number),
    [three, two],
  );
  assert.deepEqual(
    (await list({ state: 'all', labels: 'bug,ui' })).map((i) => i.number),
    [two],
    'every label named, case-insensitively',
  );
  assert.deepEqual(
    (await list({ state: 'all', labels: 'ui' })).map((i) => i.number),
    [four, two],
  );
  assert.deepEqual(
    (await list({ state: 'all', creator: 'ALICE', direction: 'asc' })).map((i) => i.number),
    [one, three],
  );
  assert.deepEqual((await list({ state: 'all', assignee: '*' })).length, 0);

  const firstPage = await octokit.request('GET /repos/{owner}/{repo}/issues', {
    owner: OWNER,
    repo,
    state: 'all',
    per_page: 2,
  });
  assert.equal(firstPage.data.length, 2);
  assert.match(firstPage.headers.link ?? '', /[?&]page=2[^>]*>; rel="next"/);
  assert.match(firstPage.headers.link ?? '', /[?&]state=all/);
  const everything = await octokit.paginate(octokit.rest.issues.listForRepo, {
    owner: OWNER,
    repo,
    state: 'all',
    per_page: 2,
  });
  assert.deepEqual(
    everything.map((i) => i.number),
    [pull.number, four, three, two, one],
  );

  const badState = octokit.request(`GET /repos/${OWNER}/${repo}/issues?state=shut`);
  assert.equal((await status(badState))[0], 422);

  // GitHub lets a token with either issues or pull_requests read list issues; contents alone is refused.
  const app = new Octokit({
    baseUrl: sim.url,
    log: quietLog,
    authStrategy: createAppAuth,
    auth: { appId: sim.app.id, privateKey: sim.app.privateKeyPem },
  });
  const scoped = async (permissions: Record<string, 'read'>) =>
    new Octokit({
      baseUrl: sim.url,
      log: quietLog,
      auth: (
        await app.rest.apps.createInstallationAccessToken({
          installation_id: sim.installationId,
          permissions,
        })
      ).data.token,
    });
  const pullsOnly = await scoped({ pull_requests: 'read' });
  assert.equal((await pullsOnly.rest.issues.listForRepo({ owner: OWNER, repo })).status, 200);
  const contentsOnly = await scoped({ contents: 'read' });
  assert.equal((await status(contentsOnly.rest.issues.listForRepo({ owner: OWNER, repo })))[0], 403);
});

void test('a merge through REST: a merge commit on the base, the pull request merged, the issues it fixes closed', async () => {
  const fixed = sim.createIssue(OWNER, REPO, { title: 'No subtract', body: 'b', author: 'alice' });
  const linked = sim.createIssue(OWNER, REPO, { title: 'No docs', body: 'b', author: 'alice' });
  const untouched = sim.createIssue(OWNER, REPO, { title: 'Slow', body: 'b', author: 'bob' });
  const elsewhere = sim.createIssue(OWNER, REPO, { title: 'Elsewhere', body: 'b', author: 'bob' });
  const headSha = await pushBranch('add-subtract', [
    {
      message: 'add subtract',
      files: { 'src/calc.js': 'export const add = (a, b) => a + b;\nexport const sub = (a, b) => a - b;\n' },
    },
  ]);
  const baseBefore = (await bare(['rev-parse', 'refs/heads/main'])).trim();
  const { data: created } = await octokit.rest.pulls.create({
    owner: OWNER,
    repo: REPO,
    head: 'add-subtract',
    base: 'main',
    title: 'Add subtract',
    body:
      `Fixes #${fixed.number}.\n\nAlso RESOLVES: ${sim.url}/${OWNER}/${REPO}/issues/${linked.number}; ` +
      `see #${untouched.number}, and closes other/repo#${elsewhere.number}.`,
  });
  assert.equal(created.merged_at, null);
  assert.equal(created.merge_commit_sha, null);
  assert.equal(created.merged_by, null);
  assert.equal((await bare(['rev-parse', `refs/pull/${created.number}/head`])).trim(), headSha);

  assert.deepEqual(
    await status(
      octokit.rest.pulls.merge({ owner: OWNER, repo: REPO, pull_number: created.number, sha: baseBefore }),
    ),
    [409, 'Head branch was modified. Review and try the merge again.'],
  );
  const { data: merged } = await octokit.rest.pulls.merge({
    owner: OWNER,
    repo: REPO,
    pull_number: created.number,
    sha: headSha,
  });
  assert.deepEqual(merged, { sha: merged.sha, merged: true, message: 'Pull Request successfully merged' });

  assert.equal((await bare(['rev-parse', 'refs/heads/main'])).trim(), merged.sha);
  assert.equal((await bare(['log', '-1', '--format=%P', merged.sha])).trim(), `${baseBefore} ${headSha}`);
  assert.match(await bare(['show', `${merged.sha}:src/calc.js`]), /export const sub/);
  const bot = await octokit.rest.users.getByUsername({ username: sim.app.botLogin });
  const identity = `${sim.app.botLogin} <${bot.data.id}+${sim.app.botLogin}@users.noreply.github.com>`;
  assert.equal(
    (await bare(['log', '-1', '--format=%an <%ae>|%cn <%ce>', merged.sha])).trim(),
    `${identity}|${identity}`,
  );
  assert.equal(
    (await bare(['log', '-1', '--format=%B', merged.sha])).trim(),
    `Merge pull request #${created.number} from ${OWNER}/add-subtract\n\nAdd subtract`,
  );

  const { data: pull } = await octokit.rest.pulls.get({
    owner: OWNER,
    repo: REPO,
    pull_number: created.number,
  });
  assert.equal(pull.state, 'closed');
  assert.equal(pull.merged, true);
  assert.equal(pull.merge_commit_sha, merged.sha);
  assert.equal(pull.merged_by?.login, sim.app.botLogin);
  assert.ok(pull.merged_at !== null && !Number.isNaN(Date.parse(pull.merged_at)));
  assert.equal(pull.closed_at, pull.merged_at);
  assert.equal(pull.head.sha, headSha);
  const { data: closedPulls } = await octokit.rest.pulls.list({ owner: OWNER, repo: REPO, state: 'closed' });
  const listed = closedPulls.find((p) => p.number === created.number);
  assert.deepEqual([listed?.merged_at, listed?.merge_commit_sha], [pull.merged_at, merged.sha]);
  const { data: asIssue } = await octokit.rest.issues.get({
    owner: OWNER,
    repo: REPO,
    issue_number: created.number,
  });
  assert.equal(asIssue.pull_request?.merged_at, pull.merged_at);
  const snapshot = sim.pulls(OWNER, REPO).find((p) => p.number === created.number);
  assert.deepEqual(
    [snapshot?.merged, snapshot?.mergedAt, snapshot?.mergeCommitSha, snapshot?.state],
    [true, pull.merged_at, merged.sha, 'closed'],
  );

  for (const issue of [fixed, linked]) {
    const { data } = await octokit.rest.issues.get({ owner: OWNER, repo: REPO, issue_number: issue.number });
    assert.deepEqual(
      [data.state, data.state_reason, data.closed_by?.login],
      ['closed', 'completed', sim.app.botLogin],
      `#${issue.number} is closed by the merge`,
    );
  }
  for (const issue of [untouched, elsewhere]) {
    const { data } = await octokit.rest.issues.get({ owner: OWNER, repo: REPO, issue_number: issue.number });
    assert.deepEqual([data.state, data.closed_at], ['open', null], `#${issue.number} is left open`);
  }
  await sim.waitFor(
    () =>
      sim.deliveries.some((d) => d.name === 'pull_request' && d.action === 'closed') &&
      sim.deliveries.filter((d) => d.name === 'issues' && d.action === 'closed').length === 2,
    5000,
    'the echoed pull_request.closed and issues.closed',
  );

  assert.deepEqual(
    await status(octokit.rest.pulls.merge({ owner: OWNER, repo: REPO, pull_number: created.number })),
    [405, 'Pull Request is not mergeable'],
  );

  // The branch goes; GitHub's ref for the pull request stays, and only the branch counts as pushed.
  const pushesBefore = sim.pushes.length;
  await inClone(['push', '-q', 'origin', '--delete', 'add-subtract']);
  assert.deepEqual(sim.pushes.slice(pushesBefore), [
    { owner: OWNER, repo: REPO, user: sim.app.botLogin, refs: ['refs/heads/add-subtract'] },
  ]);
  const refs = await lsRemote();
  assert.equal(refs.get(`refs/pull/${created.number}/head`), headSha);
  assert.equal(refs.get('refs/heads/main'), merged.sha);
  assert.equal(refs.has('refs/heads/add-subtract'), false);
  // Those refs are GitHub's: a push to one is refused and changes nothing.
  const refused = await gitResult(
    clone,
    [...CREDENTIAL_HELPER, 'push', '-q', 'origin', `${baseBefore}:refs/pull/${created.number}/head`],
    { SIM_TOKEN: token },
  );
  assert.notEqual(refused.code, 0);
  assert.equal((await lsRemote()).get(`refs/pull/${created.number}/head`), headSha);
  assert.ok(sim.pushes.every((p) => p.refs.every((r) => !r.startsWith('refs/pull/'))));
});

void test('a squash merge: one parent, the change in its tree, "title (#N)" and the commits in its message', async () => {
  const issue = sim.createIssue(OWNER, REPO, { title: 'No multiply', body: 'b', author: 'alice' });
  const headSha = await pushBranch('add-multiply', [
    { message: 'add multiply', files: { 'src/mul.js': 'export const mul = (a, b) => a * b;\n' } },
    { message: 'test multiply', files: { 'src/mul.test.js': 'mul(2, 3) === 6;\n' } },
  ]);
  // Opened by a user through the test-facing method; merged by the app through REST.
  const opened = await sim.openPull(OWNER, REPO, {
    head: 'add-multiply',
    title: 'Add multiply',
    body: `fix: #${issue.number}`,
    author: 'alice',
  });
  assert.deepEqual(
    [opened.base.ref, opened.head.sha, opened.user, opened.merged, opened.mergedAt, opened.mergeCommitSha],
    ['main', headSha, 'alice', false, null, null],
  );
  assert.equal((await bare(['rev-parse', `refs/pull/${opened.number}/head`])).trim(), headSha);
  const base = (await bare(['rev-parse', 'refs/heads/main'])).trim();
  const { data: merged } = await octokit.rest.pulls.merge({
    owner: OWNER,
    repo: REPO,
    pull_number: opened.number,
    merge_method: 'squash',
  });
  assert.equal((await bare(['rev-parse', 'refs/heads/main'])).trim(), merged.sha);
  assert.equal((await bare(['log', '-1', '--format=%P', merged.sha])).trim(), base);
  assert.equal(
    (await bare(['ls-tree', '--name-only', merged.sha, 'src/'])).trim().split('\n').sort().join(' '),
    'src/calc.js src/mul.js src/mul.test.js',
  );
  assert.equal(
    (await bare(['log', '-1', '--format=%B', merged.sha])).trim(),
    `Add multiply (#${opened.number})\n\n* add multiply\n\n* test multiply`,
  );
  const { data: pull } = await octokit.rest.pulls.get({
    owner: OWNER,
    repo: REPO,
    pull_number: opened.number,
  });
  assert.deepEqual([pull.merged, pull.merge_commit_sha, pull.user.login], [true, merged.sha, 'alice']);
  const { data: closed } = await octokit.rest.issues.get({
    owner: OWNER,
    repo: REPO,
    issue_number: issue.number,
  });
  assert.deepEqual([closed.state, closed.state_reason], ['closed', 'completed']);

  assert.deepEqual(
    await status(
      octokit.rest.pulls.merge({
        owner: OWNER,
        repo: REPO,
        pull_number: opened.number,
        merge_method: 'squash',
      }),
    ),
    [405, 'Pull Request is not mergeable'],
  );
});

void test('a conflicting merge is refused with 405 and changes nothing; a push moves refs/pull/<n>/head', async () => {
  const first = await pushBranch('conflict/one', [{ message: 'one', files: { 'README.md': '# one\n' } }]);
  const second = await pushBranch('conflict/two', [{ message: 'two', files: { 'README.md': '# two\n' } }]);
  const a = await sim.openPull(OWNER, REPO, { head: 'conflict/one', title: 'One', author: 'alice' });
  const b = await sim.openPull(OWNER, REPO, { head: 'conflict/two', title: 'Two', author: 'bob' });
  assert.deepEqual([a.head.sha, b.head.sha], [first, second]);
  await octokit.rest.pulls.merge({ owner: OWNER, repo: REPO, pull_number: a.number });
  const base = (await bare(['rev-parse', 'refs/heads/main'])).trim();

  assert.deepEqual(
    await status(octokit.rest.pulls.merge({ owner: OWNER, repo: REPO, pull_number: b.number })),
    [405, 'Pull Request is not mergeable'],
  );
  assert.equal((await bare(['rev-parse', 'refs/heads/main'])).trim(), base);
  const { data: still } = await octokit.rest.pulls.get({ owner: OWNER, repo: REPO, pull_number: b.number });
  assert.deepEqual(
    [still.state, still.merged, still.merged_at, still.merge_commit_sha],
    ['open', false, null, null],
  );
  await assert.rejects(
    sim.mergePull(OWNER, REPO, b.number, { by: 'bob' }),
    /cannot merge octo\/history#\d+: Pull Request is not mergeable \(405\)/,
  );

  // Resolving the conflict on the branch moves the pull request's head and GitHub's ref for it.
  await inClone(['fetch', '-q', 'origin']);
  await git(clone, ['checkout', '-q', 'conflict/two']);
  await git(clone, ['merge', '-q', '-X', 'ours', '-m', 'merge main', 'origin/main']);
  await inClone(['push', '-q', 'origin', 'conflict/two']);
  const resolved = (await git(clone, ['rev-parse', 'HEAD'])).trim();
  assert.equal((await bare(['rev-parse', `refs/pull/${b.number}/head`])).trim(), resolved);
  assert.equal((await lsRemote()).get(`refs/pull/${b.number}/head`), resolved);
  assert.deepEqual(
    await status(octokit.rest.pulls.merge({ owner: OWNER, repo: REPO, pull_number: b.number, sha: second })),
    [409, 'Head branch was modified. Review and try the merge again.'],
  );
  const { sha } = await sim.mergePull(OWNER, REPO, b.number, { by: 'bob', method: 'merge' });
  assert.equal((await bare(['log', '-1', '--format=%P|%an', sha])).trim(), `${base} ${resolved}|bob`);
  assert.equal((await bare(['show', `${sha}:README.md`])).trim(), '# two');
  const merged = sim.pulls(OWNER, REPO).find((p) => p.number === b.number);
  assert.deepEqual([merged?.merged, merged?.mergeCommitSha], [true, sha]);
});

void test('closing keywords close issues only for a merge into the default branch, and never pull requests', async () => {
  const issue = sim.createIssue(OWNER, REPO, { title: 'Release note', body: 'b', author: 'alice' });
  await bare(['branch', 'release', 'main']);
  await pushBranch('release-fix', [{ message: 'note', files: { 'NOTES.md': 'notes\n' } }], 'release');
  const other = await pushBranch('other', [{ message: 'other', files: { 'OTHER.md': 'x\n' } }]);
  const target = await sim.openPull(OWNER, REPO, { head: 'other', title: 'Other', author: 'bob' });
  assert.equal(target.head.sha, other);
  const pull = await sim.openPull(OWNER, REPO, {
    head: 'release-fix',
    base: 'release',
    title: 'Note',
    body: `Fixes #${issue.number}, closes #${target.number}`,
    author: 'alice',
  });
  await sim.mergePull(OWNER, REPO, pull.number, { by: 'alice', method: 'squash' });
  assert.equal(sim.issue(OWNER, REPO, issue.number).state, 'open');
  assert.equal(sim.issue(OWNER, REPO, target.number).state, 'open');

  const onMain = await pushBranch('main-fix', [{ message: 'fix', files: { 'FIX.md': 'fix\n' } }]);
  const fix = await sim.openPull(OWNER, REPO, {
    head: 'main-fix',
    title: 'Fix',
    body: `Closes #${issue.number}\nfixes #${target.number}`,
    author: 'alice',
  });
  assert.equal(fix.head.sha, onMain);
  await sim.mergePull(OWNER, REPO, fix.number, { by: 'carol' });
  const { data: closed } = await octokit.rest.issues.get({
    owner: OWNER,
    repo: REPO,
    issue_number: issue.number,
  });
  assert.deepEqual(
    [closed.state, closed.state_reason, closed.closed_by?.login],
    ['closed', 'completed', 'carol'],
  );
  assert.equal(sim.issue(OWNER, REPO, target.number).state, 'open');
  await assert.rejects(
    sim.openPull(OWNER, REPO, { head: 'nope', title: 'x', author: 'alice' }),
    /head invalid \(422\)/,
  );
});

void test('every request and response in this file matches the OpenAPI description', () => {
  assert.deepEqual(sim.violations, []);
  assert.deepEqual(sim.responseViolations, []);
});
