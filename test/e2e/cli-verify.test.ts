import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createAppAuth } from '@octokit/auth-app';
import { request } from '@octokit/request';
import { Octokit } from '@octokit/rest';
import { oracle } from '../../src/model-sim/index.js';
import { cliEnv, runCli } from '../support/cli.js';
import { labelledIssue, startStack, type Stack } from '../support/pipeline.js';
import { redisSkipReason } from '../support/redis-server.js';

const skip = redisSkipReason();
const OWNER = 'acme';
const REPO = 'calc';
const MAINTAINER = 'maria';
const where = { owner: OWNER, repo: REPO };

/**
 * `issue-agent verify` against the GitHub simulator: a PR the App published (with its check run) is
 * reproduced in fresh sandboxes; after a person pushes a commit that breaks a test, it is not.
 */
describe('issue-agent verify (end to end)', { skip, timeout: 300_000 }, () => {
  let stack: Stack | undefined;
  let pr = 0;
  let token = '';

  before(async () => {
    stack = await startStack({
      owner: OWNER,
      repo: REPO,
      maintainer: { login: MAINTAINER, permission: 'write' },
      modelKey: 'sk-ant-verify-0123456789',
      appPermissions: { checks: 'write' },
      policy: (fixture) => oracle(fixture.patch),
    });
    const s = stack;
    const auth = createAppAuth({
      appId: s.sim.app.id,
      privateKey: s.sim.app.privateKeyPem,
      request: request.defaults({ baseUrl: s.sim.url }),
    });
    token = (await auth({ type: 'installation', installationId: s.sim.installationId })).token;
    const gh = new Octokit({ auth: token, baseUrl: s.sim.url });
    const issue = await labelledIssue(s, {
      title: 'average() truncates',
      body: 'average([1,2,2]) should be 1.67',
    });
    const branch = `issue-agent/issue-${issue}`;
    const deadline = Date.now() + 180_000;
    for (;;) {
      const { data } = await gh.rest.pulls.list({ ...where, head: `${OWNER}:${branch}` });
      const head = data[0]?.head.sha;
      if (head !== undefined) {
        const runs = (await gh.rest.checks.listForRef({ ...where, ref: head, check_name: 'Issue Agent' }))
          .data;
        if (runs.total_count > 0) {
          pr = data[0]?.number ?? 0;
          break;
        }
      }
      if (Date.now() > deadline) throw new Error(`no published PR with a check run\n${s.pipeline.logs()}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  });

  after(async () => {
    await stack?.stop();
  });

  const verify = (sandbox = 'local') => {
    assert.ok(stack);
    return runCli(
      [
        'verify',
        `${OWNER}/${REPO}`,
        '--pr',
        String(pr),
        '--api-url',
        stack.sim.url,
        '--sandbox',
        sandbox,
        '--setup',
        'off',
        // The simulator's App (the default is the App registered from app.yml, `issue-agent`).
        '--app',
        stack.sim.app.slug,
      ],
      cliEnv({ GITHUB_TOKEN: token }),
    );
  };

  it('refuses a sandbox that is not isolated: a verdict is worth what its sandbox keeps out', async () => {
    const r = await verify('unconfined');
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /verify runs in a sandbox: --sandbox docker or local/);
  });

  it('reproduces the published table: exit 0', async () => {
    const r = await verify();
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /\| Test \| Before \| After \|/);
    assert.match(r.stdout, /average rounds to the nearest hundredth.* \| ❌ \| ✅ \|/);
    assert.match(r.stderr, new RegExp(`matches the verdict recorded by \`${stack?.sim.app.slug ?? '?'}\``));
  });

  it('after a hand-made commit that breaks a test: non-zero, naming the test', async () => {
    assert.ok(stack);
    // A person (the maintainer) changes the branch through the API, as GitHub's web editor does.
    const person = new Octokit({ auth: stack.sim.oauth.issueToken(MAINTAINER), baseUrl: stack.sim.url });
    const reader = new Octokit({ auth: token, baseUrl: stack.sim.url });
    const { data: pull } = await reader.rest.pulls.get({ ...where, pull_number: pr });
    const { data: file } = await reader.rest.repos.getContent({
      ...where,
      path: 'src/calc.js',
      ref: pull.head.sha,
    });
    assert.ok(!Array.isArray(file) && file.type === 'file');
    const broken = Buffer.from(file.content, 'base64').toString('utf8').replace('i <= end', 'i < end');
    const { data: blob } = await person.rest.git.createBlob({ ...where, content: broken, encoding: 'utf-8' });
    const { data: parent } = await person.rest.git.getCommit({ ...where, commit_sha: pull.head.sha });
    const { data: tree } = await person.rest.git.createTree({
      ...where,
      base_tree: parent.tree.sha,
      tree: [{ path: 'src/calc.js', mode: '100644', type: 'blob', sha: blob.sha }],
    });
    const { data: commit } = await person.rest.git.createCommit({
      ...where,
      message: 'tidy range',
      tree: tree.sha,
      parents: [pull.head.sha],
    });
    await person.rest.git.updateRef({ ...where, ref: `heads/${pull.head.ref}`, sha: commit.sha });

    const r = await verify();
    assert.equal(r.code, 1, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stderr, /differs from the verdict recorded/);
    assert.match(
      r.stderr,
      /range includes both ends: recorded ✅ before, ✅ after, reproduced ✅ before, ❌ after/,
    );
  });
});
