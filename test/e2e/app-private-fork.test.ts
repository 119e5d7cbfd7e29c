import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Octokit } from '@octokit/rest';
import { oracle } from '../../src/model-sim/index.js';
import { pushBranch } from '../support/person-branch.js';
import { startStack } from '../support/pipeline.js';
import { localStackSkip } from '../support/local-stack-skip.js';

// A fork's pull request is worked on only in an isolated sandbox (an unconfined worker refuses it:
// app-human-pulls.test.ts), so this stack runs the App's `local` sandbox.
const skip = await localStackSkip();

const OWNER = 'acme';
const REPO = 'calc';
const quiet = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};

/**
 * `@agent fix …` on a pull request from a private fork whose author allows edits by maintainers
 * (issue 37): the App's installation token covers the base repository only, so the fork's clone is
 * refused as if it were not there. The job ends at once (no retry, no model call) with the typed
 * reason said plainly: which fork could not be read, why, and what to do instead.
 */
test(
  'App: @agent fix on a private fork’s PR ends with “could not read the fork”, not a generic clone failure',
  { skip, timeout: 300_000 },
  async (t) => {
    const stack = await startStack({
      sandbox: 'local',
      owner: OWNER,
      repo: REPO,
      private: true,
      maintainer: { login: 'maria', permission: 'write' },
      modelKey: 'sk-ant-private-fork-0123456789abcdef',
      policy: (fixture) => oracle(fixture.patch),
    });
    t.after(() => stack.stop());
    const { sim, pipeline, model } = stack;
    sim.setPermission(OWNER, REPO, 'alice', 'read');
    const alice = new Octokit({ baseUrl: sim.url, auth: sim.oauth.issueToken('alice'), log: quiet });
    const { data: fork } = await alice.rest.repos.createFork({ owner: OWNER, repo: REPO });
    assert.equal(fork.private, true, 'a fork of a private repository is private');
    pushBranch(sim.bareRepoPath('alice', REPO), sim.bareRepoPath(OWNER, REPO), 'rounding', {
      'NOTES.md': 'rounding\n',
    });
    const { data: pr } = await alice.rest.pulls.create({
      owner: OWNER,
      repo: REPO,
      head: 'alice:rounding',
      base: 'main',
      title: 'Rounding, from a private fork',
      maintainer_can_modify: true,
    });
    await sim.comment(OWNER, REPO, pr.number, 'maria', '@agent fix the rounding in average');
    const said = (): string =>
      sim
        .comments(OWNER, REPO, pr.number)
        .filter((c) => c.user === sim.app.botLogin)
        .map((c) => c.body)
        .join('\n---\n');
    await sim.waitFor(
      () => /could not read the fork/.test(said()),
      120_000,
      () => `the reason\n${said()}\n${pipeline.logs()}`,
    );
    const body = said();
    assert.match(body, /I could not read the fork `alice\/calc` to work on its branch `rounding`/, body);
    assert.match(body, /this App's access covers this repository, not the fork/);
    assert.match(body, /Nothing was changed/);
    assert.doesNotMatch(body, /tried again|retry/i, 'a permanent failure: not retried');
    assert.equal(model.requests.length, 0, 'nothing ran');
    assert.equal(sim.pulls(OWNER, REPO).find((p) => p.number === pr.number)?.head.sha, pr.head.sha);
  },
);
