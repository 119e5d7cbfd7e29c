/**
 * Contract: branch protection, from GitHub's documentation
 * (https://docs.github.com/rest/branches/branch-protection, "About protected branches"): the PUT
 * body's four required keys, required signatures through their own endpoint, and the rules enforced
 * on every update of the branch — a git push holding an unsigned commit is refused with GH006's
 * text, as are force pushes, deletions, direct pushes where a pull request is required and pushes
 * without a required check; a commit GitHub signed (the git database API) goes through.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { RequestError } from '@octokit/request-error';
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
let octokit: Octokit;
let token: string;
const repo = { owner: 'octo', repo: 'guarded' };
const OPEN = {
  required_status_checks: null,
  enforce_admins: null,
  required_pull_request_reviews: null,
  restrictions: null,
};

before(async () => {
  // Protecting a branch needs administration: write, which app.yml does not ask for: the test chooses.
  sim = await startGitHubSimulator({ appPermissions: { administration: 'write', checks: 'write' } });
  source = await makeSourceRepo({ 'README.md': '# guarded\n' });
  await sim.createRepo({ owner: 'octo', name: 'guarded', sourceDir: source.dir });
  octokit = installationOctokit(sim);
  token = (await installationToken(sim)).token;
  work = tempDir('contract-protection-');
});

after(async () => {
  await sim.close();
  source.cleanup();
  work.cleanup();
});

let clones = 0;
async function cloneAs(secret: string): Promise<string> {
  const dir = `${work.dir}/clone-${++clones}`;
  await git(work.dir, [...CREDENTIAL_HELPER, 'clone', '-q', `${sim.url}/octo/guarded.git`, dir], {
    SIM_TOKEN: secret,
  });
  return dir;
}

function push(dir: string, secret: string, ...args: string[]) {
  return gitResult(dir, [...CREDENTIAL_HELPER, 'push', 'origin', ...args], { SIM_TOKEN: secret });
}

test('PUT protection: GitHub request validation, the rules it set read back, required signatures on their own endpoint', async () => {
  // All four keys are required by GitHub's description, null or not.
  assert.equal(
    await status(
      octokit.request('PUT /repos/{owner}/{repo}/branches/{branch}/protection', {
        ...repo,
        branch: 'main',
        enforce_admins: null,
      } as never),
    ),
    422,
  );
  // Users and team restrictions belong to organization repositories only.
  assert.equal(
    await status(
      octokit.rest.repos.updateBranchProtection({
        ...repo,
        branch: 'main',
        ...OPEN,
        restrictions: { users: ['alice'], teams: [] },
      }),
    ),
    422,
  );
  assert.equal(
    await status(octokit.rest.repos.updateBranchProtection({ ...repo, branch: 'nope', ...OPEN })),
    404,
  );
  assert.equal(await status(octokit.rest.repos.getBranchProtection({ ...repo, branch: 'main' })), 404);

  const put = await octokit.rest.repos.updateBranchProtection({ ...repo, branch: 'main', ...OPEN });
  assert.equal(put.status, 200);
  assert.equal(put.data.required_signatures?.enabled, false);
  assert.equal(put.data.allow_force_pushes?.enabled, false);
  const signatures = await octokit.rest.repos.createCommitSignatureProtection({ ...repo, branch: 'main' });
  assert.deepEqual(signatures.data.enabled, true);
  const read = await octokit.rest.repos.getBranchProtection({ ...repo, branch: 'main' });
  assert.equal(read.data.required_signatures?.enabled, true);

  // Without administration: write the App is refused, as on GitHub.
  const plain = await startGitHubSimulator();
  try {
    await plain.createRepo({ owner: 'octo', name: 'guarded', sourceDir: source.dir });
    assert.equal(
      await status(
        installationOctokit(plain).rest.repos.updateBranchProtection({ ...repo, branch: 'main', ...OPEN }),
      ),
      403,
    );
  } finally {
    await plain.close();
  }
  assert.deepEqual(sim.responseViolations, []);
});

test("required signatures: a push with an unsigned commit is refused with GitHub's text; a GitHub-signed commit goes in", async () => {
  const dir = await cloneAs(token);
  await git(dir, ['commit', '-q', '--allow-empty', '-m', 'unsigned']);
  const refused = await push(dir, token, 'HEAD:main');
  assert.notEqual(refused.code, 0);
  assert.match(
    refused.stderr,
    /remote: error: GH006: Protected branch update failed for refs\/heads\/main\./,
  );
  assert.match(refused.stderr, /remote: error: Commits must have verified signatures\./);
  assert.match(refused.stderr, /\[remote rejected\] HEAD -> main/);
  const main = (await octokit.rest.git.getRef({ ...repo, ref: 'heads/main' })).data.object.sha;
  assert.equal(main, (await git(source.dir, ['rev-parse', 'HEAD'])).trim(), 'main did not move');
  assert.equal(sim.pushes.length, 0);

  // The same change made through the git database API is signed by GitHub and accepted.
  const tree = (await octokit.rest.git.getCommit({ ...repo, commit_sha: main })).data.tree.sha;
  const signed = await octokit.rest.git.createCommit({ ...repo, message: 'signed', tree, parents: [main] });
  await octokit.rest.git.updateRef({ ...repo, ref: 'heads/main', sha: signed.data.sha });
  // A signed commit also passes by git push: a clone that fetched it pushes it on.
  const other = await cloneAs(token);
  await git(other, ['checkout', '-q', '-b', 'topic']);
  const pushed = await push(other, token, 'topic');
  assert.equal(pushed.code, 0, pushed.stderr);
  // The API refuses an unsigned commit as well (422 with the rule).
  const unsigned = await octokit.rest.git.createCommit({
    ...repo,
    message: 'custom committer',
    tree,
    parents: [signed.data.sha],
    committer: { name: 'Someone', email: 'someone@example.com' },
  });
  const error = await octokit.rest.git.updateRef({ ...repo, ref: 'heads/main', sha: unsigned.data.sha }).then(
    () => null,
    (e: unknown) => e,
  );
  assert.ok(error instanceof RequestError);
  assert.equal(error.status, 422);
  assert.match(error.message, /Commits must have verified signatures/);

  // A pull request bringing the unsigned commit does not merge into the branch (405); the merge
  // commit GitHub makes for a signed one is signed.
  assert.equal((await push(dir, token, 'HEAD:unsigned-topic')).code, 0);
  const pr = await octokit.rest.pulls.create({
    ...repo,
    head: 'unsigned-topic',
    base: 'main',
    title: 'Unsigned',
  });
  const notMerged = await octokit.rest.pulls.merge({ ...repo, pull_number: pr.data.number }).then(
    () => null,
    (e: unknown) => e,
  );
  assert.ok(notMerged instanceof RequestError);
  assert.equal(notMerged.status, 405);
  assert.match(notMerged.message, /Commits must have verified signatures/);
  await octokit.rest.pulls.update({ ...repo, pull_number: pr.data.number, state: 'closed' });
});

test('force pushes and deletions of a protected branch are refused; an unprotected branch takes them', async () => {
  await octokit.rest.repos.deleteCommitSignatureProtection({ ...repo, branch: 'main' });
  const dir = await cloneAs(token);
  await git(dir, ['commit', '-q', '--allow-empty', '-m', 'fast-forward']);
  assert.equal((await push(dir, token, 'HEAD:main')).code, 0);
  await git(dir, ['reset', '-q', '--hard', 'HEAD~1']);
  await git(dir, ['commit', '-q', '--allow-empty', '-m', 'rewrite']);
  const forced = await push(dir, token, '--force', 'HEAD:main');
  assert.notEqual(forced.code, 0);
  assert.match(forced.stderr, /remote: error: Cannot force-push to this branch/);
  const deleted = await push(dir, token, '--delete', 'main');
  assert.match(deleted.stderr, /remote: error: Cannot delete this branch/);
  assert.equal((await push(dir, token, 'HEAD:scratch')).code, 0);
  assert.equal((await push(dir, token, '--delete', 'scratch')).code, 0);
});

test('required pull requests and required checks refuse direct pushes; an admin bypasses unless enforce_admins', async () => {
  await octokit.rest.repos.updateBranchProtection({
    ...repo,
    branch: 'main',
    ...OPEN,
    required_pull_request_reviews: { required_approving_review_count: 1 },
  });
  const dir = await cloneAs(token);
  await git(dir, ['commit', '-q', '--allow-empty', '-m', 'direct']);
  const direct = await push(dir, token, 'HEAD:main');
  assert.match(direct.stderr, /remote: error: Changes must be made through a pull request\./);

  // The owner (admin) pushes through, with a user token, unless admins are included.
  const owner = sim.oauth.issueToken('octo');
  assert.equal((await push(dir, owner, 'HEAD:main')).code, 0);
  assert.equal(sim.pushes.at(-1)?.user, 'octo');
  await octokit.rest.repos.updateBranchProtection({
    ...repo,
    branch: 'main',
    ...OPEN,
    enforce_admins: true,
    // eslint-disable-next-line @typescript-eslint/no-deprecated -- GitHub's description still requires the key.
    required_status_checks: { strict: false, contexts: ['ci'] },
  });
  await git(dir, ['commit', '-q', '--allow-empty', '-m', 'unchecked']);
  const unchecked = await push(dir, owner, 'HEAD:main');
  assert.match(unchecked.stderr, /remote: error: Required status check "ci" is expected\./);
  const sha = (await git(dir, ['rev-parse', 'HEAD'])).trim();
  await octokit.rest.git.createRef({ ...repo, ref: 'refs/heads/checked', sha }).catch(async () => {
    // The commit is not on the server yet: push it to a branch of its own first.
    assert.equal((await push(dir, owner, 'HEAD:checked')).code, 0);
  });
  await octokit.rest.checks.create({ ...repo, name: 'ci', head_sha: sha, conclusion: 'success' });
  assert.equal((await push(dir, owner, 'HEAD:main')).code, 0);

  // A person's token works with the REST API too: the owner reads the rules.
  const person = new Octokit({ baseUrl: sim.url, auth: owner, log: quietLog });
  const rules = await person.rest.repos.getBranchProtection({ ...repo, branch: 'main' });
  assert.deepEqual(
    rules.data.required_status_checks?.checks.map((c) => c.context),
    ['ci'],
  );
  assert.equal(rules.data.enforce_admins?.enabled, true);
});
