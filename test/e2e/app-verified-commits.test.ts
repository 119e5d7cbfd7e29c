/**
 * Verified commits, end to end (App + worker + GitHub simulator + model simulator): the base branch
 * requires signed commits. The App makes its PR's commits through the git database API, so GitHub
 * signs them: the PR's commits (the first round's and a follow-up's) read `verification.verified:
 * true` through the REST API, authored by the App with the requester as co-author, and the PR merges
 * into the protected branch; an unsigned git push to that branch is refused with GH006.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createAppAuth } from '@octokit/auth-app';
import { request } from '@octokit/request';
import { Octokit } from '@octokit/rest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { oracle } from '../../src/model-sim/index.js';
import { FIXTURES } from '../support/fixture-repo.js';
import { labelledIssue, startStack, type Stack } from '../support/pipeline.js';
import { taskText } from '../support/pipeline-fixtures.js';
import { redisSkipReason } from '../support/redis-server.js';
import { CREDENTIAL_HELPER, git, gitResult, quietLog, tempDir } from '../github-sim/helpers.js';

const skip = redisSkipReason();
const OWNER = 'acme';
const REPO = 'calc';
const MODEL_KEY = 'sk-ant-verified-0123456789';
const MAINTAINER = 'maria';
const FOLLOW_UP = 'Follow-up on pull request';
const where = { owner: OWNER, repo: REPO };

async function installationOctokit(stack: Stack): Promise<Octokit> {
  const auth = createAppAuth({
    appId: stack.sim.app.id,
    privateKey: stack.sim.app.privateKeyPem,
    request: request.defaults({ baseUrl: stack.sim.url }),
  });
  const { token } = await auth({ type: 'installation', installationId: stack.sim.installationId });
  return new Octokit({ auth: token, baseUrl: stack.sim.url, log: quietLog });
}

/** The PR of the job for `issue`, once it is open and its progress comment points at it (the job ended). */
async function pullFor(stack: Stack, issue: number): Promise<{ number: number; head: string }> {
  const branch = `issue-agent/issue-${issue}`;
  await stack.sim.waitFor(
    () => stack.sim.pulls(OWNER, REPO).some((p) => p.head.ref === branch),
    120_000,
    () => `a PR for #${issue}\n${stack.pipeline.logs()}`,
  );
  const gh = await installationOctokit(stack);
  const { data } = await gh.rest.pulls.list({ ...where, head: `${OWNER}:${branch}` });
  const pr = data[0];
  assert.ok(pr, 'the PR is listed');
  return { number: pr.number, head: pr.head.sha };
}

describe(
  'verified commits on a branch that requires signatures (end to end)',
  { skip, timeout: 480_000 },
  () => {
    let stack: Stack | undefined;
    const followUpPatch = readFileSync(join(FIXTURES, 'node-calc.followup.patch'), 'utf8');

    before(async () => {
      stack = await startStack({
        owner: OWNER,
        repo: REPO,
        maintainer: { login: MAINTAINER, permission: 'write' },
        modelKey: MODEL_KEY,
        policy: (fixture) => {
          const first = oracle(fixture.patch);
          const followUp = oracle(followUpPatch);
          return (req, ctx) => (taskText(req).includes(FOLLOW_UP) ? followUp(req, ctx) : first(req, ctx));
        },
      });
      // The repository's owner (an admin) protects main and requires signed commits on it.
      const admin = new Octokit({
        baseUrl: stack.sim.url,
        auth: stack.sim.oauth.issueToken(OWNER),
        log: quietLog,
      });
      await admin.rest.repos.updateBranchProtection({
        ...where,
        branch: 'main',
        required_status_checks: null,
        enforce_admins: true,
        required_pull_request_reviews: null,
        restrictions: null,
      });
      await admin.rest.repos.createCommitSignatureProtection({ ...where, branch: 'main' });
    });

    after(async () => {
      await stack?.stop();
    });

    it('the App’s commits, first round and follow-up, are verified, co-authored by the requester, and merge into the protected branch', async () => {
      assert.ok(stack);
      const s = stack;
      const issue = await labelledIssue(s, {
        title: 'average() truncates',
        body: 'average([1,2,2]) should be 1.67',
      });
      const pr = await pullFor(s, issue);
      const gh = await installationOctokit(s);

      await s.sim.comment(OWNER, REPO, pr.number, MAINTAINER, '@agent rename the helper to roundHalfAway');
      const deadline = Date.now() + 240_000;
      let head = pr.head;
      while (head === pr.head) {
        if (Date.now() > deadline) throw new Error(`no follow-up commit\n${s.pipeline.logs()}`);
        await new Promise((r) => setTimeout(r, 250));
        head = (await gh.rest.pulls.get({ ...where, pull_number: pr.number })).data.head.sha;
      }
      const commits = (await gh.rest.pulls.listCommits({ ...where, pull_number: pr.number })).data;
      assert.deepEqual(
        commits.map((c) => c.sha),
        [pr.head, head],
        'the follow-up is one commit on the PR head',
      );
      for (const c of commits) {
        assert.deepEqual(
          { verified: c.commit.verification?.verified, reason: c.commit.verification?.reason },
          { verified: true, reason: 'valid' },
          `${c.sha} is verified`,
        );
        assert.equal(c.author?.login, s.sim.app.botLogin, 'authored by the App');
        assert.equal(c.committer?.login, s.sim.app.botLogin);
        assert.match(c.commit.message, /Issue-Agent-Job: /);
      }
      const maria = (await gh.rest.users.getByUsername({ username: MAINTAINER })).data;
      assert.match(
        commits[0]?.commit.message ?? '',
        new RegExp(
          `\\nCo-authored-by: ${MAINTAINER} <${maria.id}\\+${MAINTAINER}@users\\.noreply\\.github\\.com>$`,
        ),
      );
      const one = await gh.rest.repos.getCommit({ ...where, ref: head });
      assert.equal(one.data.commit.verification?.verified, true);
      // No push: the branch moved through the refs API.
      assert.ok(!s.sim.requests.some((r) => r.path === `/${OWNER}/${REPO}.git/git-receive-pack`));
      const body = (await gh.rest.pulls.get({ ...where, pull_number: pr.number })).data.body ?? '';
      assert.doesNotMatch(body, /pushed with git/);

      // The PR merges into main, whose rule requires verified signatures on every commit it brings.
      const merged = await gh.rest.pulls.merge({
        ...where,
        pull_number: pr.number,
        merge_method: 'merge',
      });
      assert.equal(merged.data.merged, true);
      const mergeCommit = await gh.rest.repos.getCommit({ ...where, ref: merged.data.sha });
      assert.equal(
        mergeCommit.data.commit.verification?.verified,
        true,
        'GitHub signs the merge commit it makes',
      );
      assert.deepEqual(s.sim.violations, []);
    });

    it('an unsigned git push to the protected branch is refused with GH006', async () => {
      assert.ok(stack);
      const s = stack;
      const work = tempDir('verified-push-');
      try {
        const token = s.sim.oauth.issueToken(OWNER);
        const dir = join(work.dir, 'clone');
        await git(work.dir, [...CREDENTIAL_HELPER, 'clone', '-q', `${s.sim.url}/${OWNER}/${REPO}.git`, dir], {
          SIM_TOKEN: token,
        });
        const before = (await git(dir, ['rev-parse', 'HEAD'])).trim();
        await git(dir, [
          '-c',
          'user.name=acme',
          '-c',
          'user.email=acme@example.com',
          'commit',
          '-q',
          '--allow-empty',
          '-m',
          'unsigned',
        ]);
        const pushed = await gitResult(dir, [...CREDENTIAL_HELPER, 'push', 'origin', 'HEAD:main'], {
          SIM_TOKEN: token,
        });
        assert.notEqual(pushed.code, 0);
        assert.match(
          pushed.stderr,
          /remote: error: GH006: Protected branch update failed for refs\/heads\/main\./,
        );
        assert.match(pushed.stderr, /remote: error: Commits must have verified signatures\./);
        const gh = await installationOctokit(s);
        assert.equal((await gh.rest.git.getRef({ ...where, ref: 'heads/main' })).data.object.sha, before);
      } finally {
        work.cleanup();
      }
    });
  },
);
