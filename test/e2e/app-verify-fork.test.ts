import assert from 'node:assert/strict';
import { Octokit } from '@octokit/rest';
import { oracle } from '../../src/model-sim/index.js';
import { installationOctokit } from '../github-sim/helpers.js';
import { dockerTest } from '../sandbox/docker/docker-test-support.js';
import { pushBranch } from '../support/person-branch.js';
import { stackOrSkip } from '../support/pipeline.js';

const OWNER = 'acme';
const REPO = 'calc';
/** The deployment's setup secret, granted to acme/calc, whose setup names it. */
const NPM_TOKEN = 'npm_canary_fork_verify_7d41c2a9e8b3';
const quiet = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};

/**
 * The base's setup, as its maintainers committed it: it writes the token (hex, so a literal scan
 * would not find it) into the workspace, where a test could read it, if setup had it.
 */
const BASE_CONFIG = `setupSecrets: [NPM_TOKEN]\nsetup:\n  - ${JSON.stringify(
  'printf %s "${NPM_TOKEN:-}" | od -An -tx1 | tr -d " \\n" > .setup-token',
)}\n`;

/**
 * The fork's head: its own setup (which would print the token, were it used), an install script, and
 * a test whose name carries, hex-encoded, whatever of the token it finds: in its environment, in
 * what the base's setup left, and in what its own setup would have left.
 */
const FORK_FILES = {
  '.github/issue-agent.yml': `setup:\n  - "printenv NPM_TOKEN > .head-setup"\ntestCommand: "printenv > /dev/null; node --test"\n`,
  'package.json': `${JSON.stringify(
    {
      name: 'node-calc',
      version: '1.0.0',
      type: 'module',
      private: true,
      scripts: { test: 'node --test', postinstall: 'printenv NPM_TOKEN > .postinstall' },
    },
    null,
    2,
  )}\n`,
  'test/leak.test.js': [
    "import { test } from 'node:test';",
    "import { existsSync, readFileSync } from 'node:fs';",
    "const read = (f) => (existsSync(f) ? readFileSync(f, 'utf8').trim() : '');",
    "const seen = [process.env.NPM_TOKEN ?? '', read('.setup-token'), read('.head-setup'), read('.postinstall')].join('');",
    "test(`leak [${seen === '' ? 'nothing' : Buffer.from(seen).toString('hex')}]`, () => {});",
    '',
  ].join('\n'),
};

/** Every form a leak above could take: plain, reversed, hex of either. */
function tokenForms(): string[] {
  const reversed = NPM_TOKEN.split('').reverse().join('');
  return [NPM_TOKEN, reversed, Buffer.from(NPM_TOKEN).toString('hex'), Buffer.from(reversed).toString('hex')];
}

/**
 * `@agent verify` on a fork's pull request (issue 37), with the Docker sandbox: the head is fetched
 * from `pull/<n>/head`, tested in a fresh sandbox, and the result goes on a new check run on the
 * fork's head. The attack: the fork's head changes the config (its own setup and test command), adds
 * an install script, and adds a test that reports any trace of the repository's setup secret in its
 * name. Setup ran on the merge base without the secret; the head's setup and command were never
 * used; the test saw nothing; no form of the secret is in a comment or a check run.
 */
dockerTest(
  '@agent verify on a fork’s PR (Docker): a check run on the fork’s head; the fork’s code never reaches a setup secret',
  async (_docker, t) => {
    const stack = await stackOrSkip(t, {
      owner: OWNER,
      repo: REPO,
      maintainer: { login: 'maria', permission: 'write' },
      modelKey: 'sk-ant-verify-fork-0123456789abcdef',
      sandbox: 'docker',
      appPermissions: { checks: 'write' },
      files: { '.github/issue-agent.yml': BASE_CONFIG },
      env: {
        ISSUE_AGENT_SETUP_SECRET_NPM_TOKEN: NPM_TOKEN,
        ISSUE_AGENT_SETUP_SECRET_NPM_TOKEN_REPOS: `${OWNER}/${REPO}`,
      },
      policy: (fixture) => oracle(fixture.patch),
    });
    if (stack === null) return;
    t.after(() => stack.stop());
    const { sim, pipeline } = stack;
    const alice = new Octokit({ baseUrl: sim.url, auth: sim.oauth.issueToken('alice'), log: quiet });
    await alice.rest.repos.createFork({ owner: OWNER, repo: REPO });
    pushBranch(sim.bareRepoPath('alice', REPO), sim.bareRepoPath(OWNER, REPO), 'probe', FORK_FILES);
    const { data: pr } = await alice.rest.pulls.create({
      owner: OWNER,
      repo: REPO,
      head: 'alice:probe',
      base: 'main',
      title: 'A probe, from a fork',
      maintainer_can_modify: false,
    });
    const head = pr.head.sha;

    await sim.comment(OWNER, REPO, pr.number, 'maria', '@agent verify');
    const reply = (): string =>
      sim
        .comments(OWNER, REPO, pr.number)
        .filter((c) => c.user === sim.app.botLogin && c.body.includes('Issue Agent: verification'))
        .map((c) => c.body)
        .join('\n');
    await sim.waitFor(
      () => reply() !== '' && !/⏳/.test(reply()),
      300_000,
      () => `the verification's reply\n${reply()}\n${pipeline.logs()}`,
    );
    const said = reply();
    assert.match(said, /The head had no check run of mine, so I added one/, said);
    assert.doesNotMatch(said, /changed after/, 'the App never judged this pull request');
    const gh = installationOctokit(sim);
    const { data: checks } = await gh.rest.checks.listForRef({ owner: OWNER, repo: REPO, ref: head });
    const made = checks.check_runs.filter((c) => c.app?.id === sim.app.id);
    assert.equal(made.length, 1, 'one check run of the App’s on the fork’s head');
    const run = made[0];
    assert.ok(run !== undefined);
    assert.equal(run.head_sha, head);
    assert.equal(run.status, 'completed');
    assert.equal(run.conclusion, 'neutral', 'nothing was recorded to compare with');
    assert.equal(run.external_id?.startsWith('verify-'), true);
    // The head's test ran, in the sandbox, and found no trace of the token anywhere it looked.
    assert.match(run.output.text ?? '', /leak \[nothing\]/, run.output.text ?? '');
    assert.match(said, /with `npm test` \(detected on the base/, 'the base’s command, not the head’s');
    // The base's settings ran it: the head's own test command and setup were never used.
    assert.doesNotMatch(`${said}\n${run.output.text ?? ''}`, /printenv/);
    const everything = JSON.stringify([
      sim.comments(OWNER, REPO, pr.number),
      checks.check_runs.map((c) => c.output),
    ]);
    for (const form of tokenForms()) assert.ok(!everything.includes(form), `no form of the token: ${form}`);
    assert.deepEqual(sim.violations, []);
  },
  { timeout: 420_000, attack: true },
);
