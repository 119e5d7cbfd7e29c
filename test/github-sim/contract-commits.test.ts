/**
 * Contract: commits and the git database API, from GitHub's documentation
 * (https://docs.github.com/rest/git, https://docs.github.com/rest/commits/commits): blobs, trees
 * (with base_tree), commits and refs made through the API; a commit the API makes for an App
 * installation is signed by GitHub (`verification: { verified: true, reason: "valid" }`), a pushed
 * commit is `unsigned`; repos/get-commit and pulls/list-commits show it.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Octokit } from '@octokit/rest';
import { startGitHubSimulator, type GitHubSim } from '../support/github-sim/index.js';
import {
  CREDENTIAL_HELPER,
  git,
  installationOctokit,
  installationToken,
  makeSourceRepo,
  status,
  tempDir,
  type TempDir,
} from './helpers.js';

let sim: GitHubSim;
let source: TempDir;
let work: TempDir;
let octokit: Octokit;
let base: string;
const repo = { owner: 'octo', repo: 'gitdb' };

before(async () => {
  sim = await startGitHubSimulator();
  source = await makeSourceRepo({ 'README.md': '# gitdb\n', 'src/a.js': 'export const a = 1;\n' });
  await sim.createRepo({ owner: 'octo', name: 'gitdb', sourceDir: source.dir });
  base = (await git(source.dir, ['rev-parse', 'HEAD'])).trim();
  octokit = installationOctokit(sim);
  work = tempDir('contract-commits-');
});

after(async () => {
  await sim.close();
  source.cleanup();
  work.cleanup();
});

test('blobs, a tree on base_tree, a commit and a branch through the git database API: the commit is verified', async () => {
  const blob = await octokit.rest.git.createBlob({ ...repo, content: 'export const b = 2;\n' });
  assert.equal(blob.status, 201);
  const readBack = await octokit.rest.git.getBlob({ ...repo, file_sha: blob.data.sha });
  assert.equal(Buffer.from(readBack.data.content, 'base64').toString('utf8'), 'export const b = 2;\n');
  assert.equal(readBack.data.encoding, 'base64');

  const baseCommit = await octokit.rest.git.getCommit({ ...repo, commit_sha: base });
  const tree = await octokit.rest.git.createTree({
    ...repo,
    base_tree: baseCommit.data.tree.sha,
    tree: [
      { path: 'src/b.js', mode: '100644', type: 'blob', sha: blob.data.sha },
      { path: 'docs/new.md', mode: '100644', type: 'blob', content: 'new\n' },
      { path: 'README.md', mode: '100644', type: 'blob', sha: null },
    ],
  });
  assert.equal(tree.status, 201);
  const listed = await octokit.rest.git.getTree({ ...repo, tree_sha: tree.data.sha, recursive: 'true' });
  assert.deepEqual(
    listed.data.tree
      .filter((e) => e.type === 'blob')
      .map((e) => e.path)
      .sort(),
    ['docs/new.md', 'src/a.js', 'src/b.js'],
  );

  const commit = await octokit.rest.git.createCommit({
    ...repo,
    message: 'Add b',
    tree: tree.data.sha,
    parents: [base],
  });
  assert.equal(commit.status, 201);
  assert.deepEqual(
    { verified: commit.data.verification.verified, reason: commit.data.verification.reason },
    { verified: true, reason: 'valid' },
  );
  assert.equal(commit.data.author.name, sim.app.botLogin);
  assert.equal(commit.data.author.email, `${sim.app.botUserId}+${sim.app.botLogin}@users.noreply.github.com`);
  assert.match(commit.data.verification.signature ?? '', /^-----BEGIN PGP SIGNATURE-----/);

  const ref = await octokit.rest.git.createRef({
    ...repo,
    ref: 'refs/heads/api-branch',
    sha: commit.data.sha,
  });
  assert.equal(ref.status, 201);
  assert.equal(ref.data.object.sha, commit.data.sha);
  const got = await octokit.rest.git.getRef({ ...repo, ref: 'heads/api-branch' });
  assert.equal(got.data.object.sha, commit.data.sha);
  assert.equal(
    await status(octokit.rest.git.createRef({ ...repo, ref: 'refs/heads/api-branch', sha: base })),
    422,
  );

  const viaCommits = await octokit.rest.repos.getCommit({ ...repo, ref: 'api-branch' });
  assert.equal(viaCommits.data.sha, commit.data.sha);
  const verification = viaCommits.data.commit.verification;
  assert.deepEqual(
    { verified: verification?.verified, reason: verification?.reason },
    { verified: true, reason: 'valid' },
  );
  assert.equal(viaCommits.data.author?.login, sim.app.botLogin);
  assert.deepEqual(viaCommits.data.files?.map((f) => `${f.status} ${f.filename}`).sort(), [
    'added docs/new.md',
    'added src/b.js',
    'removed README.md',
  ]);
  assert.deepEqual(sim.pushes.at(-1), {
    owner: 'octo',
    repo: 'gitdb',
    user: sim.app.botLogin,
    refs: ['refs/heads/api-branch'],
  });
  assert.deepEqual(sim.violations, []);
  assert.deepEqual(sim.responseViolations, []);
});

test('a pushed commit is unsigned; git/update-ref moves a branch fast-forward only unless forced', async () => {
  const { token } = await installationToken(sim);
  const clone = `${work.dir}/clone`;
  await git(work.dir, [...CREDENTIAL_HELPER, 'clone', '-q', `${sim.url}/octo/gitdb.git`, clone], {
    SIM_TOKEN: token,
  });
  await git(clone, ['checkout', '-q', '-b', 'pushed']);
  await git(clone, ['commit', '-q', '--allow-empty', '-m', 'pushed commit']);
  await git(clone, [...CREDENTIAL_HELPER, 'push', '-q', 'origin', 'pushed'], { SIM_TOKEN: token });
  const pushed = (await git(clone, ['rev-parse', 'HEAD'])).trim();
  const c = await octokit.rest.repos.getCommit({ ...repo, ref: pushed });
  assert.deepEqual(
    { verified: c.data.commit.verification?.verified, reason: c.data.commit.verification?.reason },
    { verified: false, reason: 'unsigned' },
  );

  // A commit with a custom committer is not GitHub's to sign; a client's own signature is unverifiable.
  const tree = (await octokit.rest.git.getCommit({ ...repo, commit_sha: pushed })).data.tree.sha;
  const custom = await octokit.rest.git.createCommit({
    ...repo,
    message: 'custom',
    tree,
    parents: [pushed],
    committer: { name: 'Someone', email: 'someone@example.com' },
  });
  assert.equal(custom.data.verification.reason, 'unsigned');

  // Not a fast-forward: refused without force (422), done with it.
  const sideways = await octokit.rest.git.createCommit({
    ...repo,
    message: 'sideways',
    tree,
    parents: [base],
  });
  assert.equal(
    await status(octokit.rest.git.updateRef({ ...repo, ref: 'heads/pushed', sha: sideways.data.sha })),
    422,
  );
  const forced = await octokit.rest.git.updateRef({
    ...repo,
    ref: 'heads/pushed',
    sha: sideways.data.sha,
    force: true,
  });
  assert.equal(forced.data.object.sha, sideways.data.sha);
  const fastForward = await octokit.rest.git.updateRef({
    ...repo,
    ref: 'heads/pushed',
    sha: sideways.data.sha,
  });
  assert.equal(fastForward.data.object.sha, sideways.data.sha);
  assert.equal(await status(octokit.rest.git.getRef({ ...repo, ref: 'heads/no-such-branch' })), 404);
  assert.equal(await status(octokit.rest.repos.getCommit({ ...repo, ref: 'no-such-ref' })), 422);
});

test('pulls/list-commits lists the pull request commits, oldest first, each with its verification', async () => {
  const tree = (await octokit.rest.git.getCommit({ ...repo, commit_sha: base })).data.tree.sha;
  const first = await octokit.rest.git.createCommit({ ...repo, message: 'one', tree, parents: [base] });
  const second = await octokit.rest.git.createCommit({
    ...repo,
    message: 'two',
    tree: (
      await octokit.rest.git.createTree({
        ...repo,
        base_tree: tree,
        tree: [{ path: 'two.txt', mode: '100644', type: 'blob', content: '2\n' }],
      })
    ).data.sha,
    parents: [first.data.sha],
  });
  await octokit.rest.git.createRef({ ...repo, ref: 'refs/heads/two-commits', sha: second.data.sha });
  const pr = await octokit.rest.pulls.create({ ...repo, head: 'two-commits', base: 'main', title: 'Two' });
  const commits = await octokit.rest.pulls.listCommits({ ...repo, pull_number: pr.data.number });
  assert.deepEqual(
    commits.data.map((c) => [c.commit.message, c.commit.verification?.reason]),
    [
      ['one', 'valid'],
      ['two', 'valid'],
    ],
  );
  assert.deepEqual(sim.responseViolations, []);
});
