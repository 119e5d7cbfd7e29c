/**
 * Contract: forks and people, from GitHub's documentation (https://docs.github.com/rest/repos/forks,
 * "Allowing changes to a pull request branch created from a fork"): a fork is a repository of its
 * own, owned by the person whose token made it, with refs of its own; a pull request with
 * `head: "user:branch"` is a cross-repository one whose `head.repo` is the fork; with
 * `maintainer_can_modify` the base repository's App may push to that head branch and nothing else of
 * the fork. The git server takes a person's token as well as the App's and attributes each push to
 * the token's owner.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Octokit } from '@octokit/rest';
import { startGitHubSimulator, type GitHubSim } from '../support/github-sim/index.js';
import {
  CREDENTIAL_HELPER,
  git,
  gitResult,
  installationOctokit,
  installationToken,
  makeSourceRepo,
  quietLog,
  status,
  tempDir,
  type TempDir,
} from './helpers.js';

let sim: GitHubSim;
let source: TempDir;
let work: TempDir;
let app: Octokit;
let appToken: string;
let alice: Octokit;
let aliceToken: string;

before(async () => {
  sim = await startGitHubSimulator();
  source = await makeSourceRepo({ 'README.md': '# upstream\n' });
  await sim.createRepo({ owner: 'octo', name: 'upstream', sourceDir: source.dir });
  app = installationOctokit(sim);
  appToken = (await installationToken(sim)).token;
  aliceToken = sim.oauth.issueToken('alice');
  alice = new Octokit({ baseUrl: sim.url, auth: aliceToken, log: quietLog });
  work = tempDir('contract-forks-');
});

after(async () => {
  await sim.close();
  source.cleanup();
  work.cleanup();
});

function withToken(dir: string, token: string, args: readonly string[]) {
  return gitResult(dir, [...CREDENTIAL_HELPER, ...args], { SIM_TOKEN: token });
}

test('a person forks: a repository of their own, with its own refs; a user:branch pull request has the fork as head.repo', async () => {
  const fork = await alice.rest.repos.createFork({ owner: 'octo', repo: 'upstream' });
  assert.equal(fork.status, 202);
  assert.equal(fork.data.full_name, 'alice/upstream');
  assert.equal(fork.data.owner.login, 'alice');
  assert.equal(fork.data.fork, true);
  assert.equal(fork.data.parent?.full_name, 'octo/upstream');
  assert.equal(fork.data.source?.full_name, 'octo/upstream');
  // Forking again answers with the fork that exists.
  assert.equal(
    (await alice.rest.repos.createFork({ owner: 'octo', repo: 'upstream' })).data.id,
    fork.data.id,
  );
  // The App has no account to fork into: only with `organization`.
  assert.equal(await status(app.rest.repos.createFork({ owner: 'octo', repo: 'upstream' })), 403);

  const clone = `${work.dir}/alice`;
  assert.equal(
    (await withToken(work.dir, aliceToken, ['clone', '-q', `${sim.url}/alice/upstream.git`, clone])).code,
    0,
  );
  await git(clone, ['checkout', '-q', '-b', 'feature']);
  await git(clone, ['commit', '-q', '--allow-empty', '-m', 'feature']);
  const pushed = await withToken(clone, aliceToken, ['push', '-q', 'origin', 'feature', 'HEAD:other']);
  assert.equal(pushed.code, 0, pushed.stderr);
  assert.deepEqual(sim.pushes.at(-1), {
    owner: 'alice',
    repo: 'upstream',
    user: 'alice',
    refs: ['refs/heads/feature', 'refs/heads/other'],
  });
  // The fork's branch is not the base repository's.
  assert.equal(
    await status(app.rest.git.getRef({ owner: 'octo', repo: 'upstream', ref: 'heads/feature' })),
    404,
  );
  assert.equal(
    (await alice.rest.git.getRef({ owner: 'alice', repo: 'upstream', ref: 'heads/feature' })).data.object.sha,
    (await git(clone, ['rev-parse', 'HEAD'])).trim(),
  );

  const pr = await alice.rest.pulls.create({
    owner: 'octo',
    repo: 'upstream',
    head: 'alice:feature',
    base: 'main',
    title: 'From a fork',
    maintainer_can_modify: true,
  });
  assert.equal(pr.data.head.repo.full_name, 'alice/upstream');
  assert.equal(pr.data.head.label, 'alice:feature');
  assert.equal(pr.data.head.user.login, 'alice');
  assert.equal(pr.data.base.repo.full_name, 'octo/upstream');
  assert.equal(pr.data.maintainer_can_modify, true);
  assert.equal(pr.data.user.login, 'alice');
  // GitHub keeps the head fetchable from the base repository.
  const fetched = await withToken(clone, appToken, [
    'fetch',
    '-q',
    `${sim.url}/octo/upstream.git`,
    `pull/${pr.data.number}/head`,
  ]);
  assert.equal(fetched.code, 0, fetched.stderr);
  // A branch the fork lacks cannot be a head.
  assert.equal(
    await status(
      alice.rest.pulls.create({
        owner: 'octo',
        repo: 'upstream',
        head: 'alice:missing',
        base: 'main',
        title: 'x',
      }),
    ),
    422,
  );
  assert.deepEqual(sim.violations, []);
  assert.deepEqual(sim.responseViolations, []);
});

test('maintainer_can_modify: the App pushes to the fork head branch, nothing else of the fork, and the pull request follows', async () => {
  const pulls = await app.rest.pulls.list({ owner: 'octo', repo: 'upstream' });
  const pr = pulls.data.find((p) => p.head.label === 'alice:feature');
  assert.ok(pr !== undefined);
  const clone = `${work.dir}/app`;
  await git(work.dir, ['clone', '-q', `${sim.url}/alice/upstream.git`, clone]);
  await git(clone, ['checkout', '-q', 'feature']);
  await git(clone, ['commit', '-q', '--allow-empty', '-m', 'the App fixes the fork branch']);
  const ok = await withToken(clone, appToken, ['push', '-q', 'origin', 'feature']);
  assert.equal(ok.code, 0, ok.stderr);
  assert.equal(sim.pushes.at(-1)?.user, sim.app.botLogin);
  const head = (await git(clone, ['rev-parse', 'HEAD'])).trim();
  const after = await app.rest.pulls.get({ owner: 'octo', repo: 'upstream', pull_number: pr.number });
  assert.equal(after.data.head.sha, head);

  const other = await withToken(clone, appToken, ['push', '-q', 'origin', 'HEAD:other']);
  assert.notEqual(other.code, 0);
  assert.match(
    other.stderr,
    new RegExp(`Permission to alice/upstream.git denied to ${escape(sim.app.botLogin)}`),
  );
  // Nor through the REST API: the fork is not in the App's installation.
  assert.equal(
    await status(
      app.rest.git.createRef({ owner: 'alice', repo: 'upstream', ref: 'refs/heads/x', sha: head }),
    ),
    404,
  );

  // A pull request that does not allow maintainers gives the App nothing.
  await git(clone, ['checkout', '-q', '-b', 'closed-to-maintainers']);
  await git(clone, ['commit', '-q', '--allow-empty', '-m', 'private work']);
  assert.equal(
    (await withToken(clone, aliceToken, ['push', '-q', 'origin', 'closed-to-maintainers'])).code,
    0,
  );
  await alice.rest.pulls.create({
    owner: 'octo',
    repo: 'upstream',
    head: 'alice:closed-to-maintainers',
    base: 'main',
    title: 'Not for maintainers',
    maintainer_can_modify: false,
  });
  await git(clone, ['commit', '-q', '--allow-empty', '-m', 'the App tries']);
  const refused = await withToken(clone, appToken, ['push', '-q', 'origin', 'closed-to-maintainers']);
  assert.notEqual(refused.code, 0);
});

test("people's tokens on git: a collaborator's push is theirs; a reader's push is refused", async () => {
  sim.setPermission('octo', 'upstream', 'carol', 'write');
  const carol = sim.oauth.issueToken('carol');
  const bob = sim.oauth.issueToken('bob');
  const clone = `${work.dir}/carol`;
  assert.equal(
    (await withToken(work.dir, carol, ['clone', '-q', `${sim.url}/octo/upstream.git`, clone])).code,
    0,
  );
  await git(clone, ['commit', '-q', '--allow-empty', '-m', 'by carol']);
  assert.equal((await withToken(clone, carol, ['push', '-q', 'origin', 'HEAD:carol-branch'])).code, 0);
  assert.deepEqual(sim.pushes.at(-1), {
    owner: 'octo',
    repo: 'upstream',
    user: 'carol',
    refs: ['refs/heads/carol-branch'],
  });
  const denied = await withToken(clone, bob, ['push', '-q', 'origin', 'HEAD:bob-branch']);
  assert.notEqual(denied.code, 0);
  assert.match(denied.stderr, /Permission to octo\/upstream\.git denied to bob\./);
  const invalid = await withToken(clone, 'ghu_not-a-token', ['push', '-q', 'origin', 'HEAD:nobody']);
  assert.match(invalid.stderr, /Invalid username or token/);
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
