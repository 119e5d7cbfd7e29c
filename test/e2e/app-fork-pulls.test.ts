import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import { Octokit } from '@octokit/rest';
import { oracle } from '../../src/model-sim/index.js';
import { pushBranch } from '../support/person-branch.js';
import { startStack } from '../support/pipeline.js';
import { installationOctokit } from '../github-sim/helpers.js';
import { localStackSkip } from '../support/local-stack-skip.js';

// A fork's pull request is worked on only in an isolated sandbox (an unconfined worker refuses it:
// app-human-pulls.test.ts), so this stack runs the App's `local` sandbox.
const skip = await localStackSkip();

/** What alice's branch adds on top of `main`. */
const NOTES = { 'NOTES.md': 'Median is next.\n' };

const OWNER = 'acme';
const REPO = 'calc';
const BRANCH = 'median';
const MODEL_KEY = 'sk-ant-fork-pulls-0123456789abcdef';
const quiet = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};

/** A branch's tip in a bare repository of the simulator (read on disk, not through any API). */
function tipIn(bare: string, branch: string): string {
  return execFileSync('git', ['-C', bare, 'rev-parse', '--verify', '--quiet', `refs/heads/${branch}`], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
  }).trim();
}

/**
 * `@agent fix …` on a person's pull request from a fork whose author allows edits by maintainers
 * (issue 37), through the whole App: the job clones the fork, and its commit lands on the fork's
 * head branch (pushed with git under the installation token, which GitHub allows for exactly that
 * branch), the pull request shows it as its new head, and the progress comment tells the author
 * the bot pushed to their fork. When the author turns edits by maintainers off while a job runs,
 * GitHub refuses its push and the job ends saying why, the fork's branch untouched. (A fork without edits by maintainers is refused with the reason:
 * app-human-pulls.test.ts.)
 */
test(
  'App: @agent fix on a fork’s PR that allows edits by maintainers pushes to the fork’s branch; a refused push is said',
  { skip, timeout: 300_000 },
  async (t) => {
    /** Run once, at the next model call (the job is past its pre-flight checks and not yet pushed). */
    let onModelCall: (() => void) | null = null;
    const stack = await startStack({
      sandbox: 'local',
      owner: OWNER,
      repo: REPO,
      maintainer: { login: 'maria', permission: 'write' },
      modelKey: MODEL_KEY,
      policy: (fixture) => {
        const fix = oracle(fixture.patch);
        return (request, ctx) => {
          const hook = onModelCall;
          onModelCall = null;
          hook?.();
          return fix(request, ctx);
        };
      },
    });
    t.after(() => stack.stop());
    const { sim, pipeline } = stack;
    const bare = sim.bareRepoPath(OWNER, REPO);
    const alice = new Octokit({ baseUrl: sim.url, auth: sim.oauth.issueToken('alice'), log: quiet });
    await alice.rest.repos.createFork({ owner: OWNER, repo: REPO });
    const forkBare = sim.bareRepoPath('alice', REPO);
    pushBranch(forkBare, bare, BRANCH, NOTES, `${BRANCH}: notes`);
    const { data: pr } = await alice.rest.pulls.create({
      owner: OWNER,
      repo: REPO,
      head: `alice:${BRANCH}`,
      base: 'main',
      title: 'Median, from a fork',
      body: 'ALICE-TEXT',
      maintainer_can_modify: true,
    });
    const headBefore = pr.head.sha;
    assert.equal(tipIn(forkBare, BRANCH), headBefore);
    const bot = (): string[] =>
      sim
        .comments(OWNER, REPO, pr.number)
        .filter((c) => c.user === sim.app.botLogin)
        .map((c) => c.body);

    await sim.comment(OWNER, REPO, pr.number, 'maria', '@agent fix the rounding in average');
    await sim.waitFor(
      // Polled while the job runs: the simulator's ref files, no git process per poll.
      () => (sim.branchTip('alice', REPO, BRANCH) ?? headBefore) !== headBefore,
      240_000,
      () => `the push to the fork\n${bot().join('\n---\n')}\n${pipeline.logs()}`,
    );
    const head = tipIn(forkBare, BRANCH);
    // The bot's commit, on top of alice's, in her fork; the base repository has no such branch.
    const reader = installationOctokit(sim);
    const { data: commit } = await reader.rest.git.getCommit({
      owner: 'alice',
      repo: REPO,
      commit_sha: head,
    });
    assert.deepEqual(
      commit.parents.map((p) => p.sha),
      [headBefore],
    );
    assert.match(commit.message, new RegExp(`^Follow-up on #${pr.number}: fix the rounding in average`));
    assert.throws(() => tipIn(bare, BRANCH), 'nothing is pushed to the base repository');
    await sim.waitFor(
      () => sim.pulls(OWNER, REPO).find((p) => p.number === pr.number)?.head.sha === head,
      30_000,
      () => 'the pull request’s head',
    );

    // One progress comment names the fork and its branch to the author.
    const progress = bot().filter((c) => c.includes('asked me to work on this pull request'));
    assert.equal(progress.length, 1, bot().join('\n---\n'));
    assert.match(
      progress[0] ?? '',
      /`alice`: `maria` asked me to work on this pull request, so I push my commits to its branch `median` in your fork `alice\/calc`/,
    );
    await sim.waitFor(
      () => bot().some((c) => /Pushed new commits to/.test(c)),
      30_000,
      () => `the end\n${bot().join('\n---\n')}\n${pipeline.logs()}`,
    );
    // Why the commit is not GitHub-signed is said where the round's report is.
    assert.ok(
      bot().some((c) => /pushed with git[\s\S]*the branch is in the fork `alice\/calc`/.test(c)),
      bot().join('\n---\n'),
    );
    assert.equal(sim.pulls(OWNER, REPO).find((p) => p.number === pr.number)?.body, 'ALICE-TEXT');
    // No token anywhere the App wrote.
    for (const c of bot()) assert.doesNotMatch(c, /ghs_|x-access-token|sk-ant-/);
    assert.deepEqual(sim.violations, []);

    // A second pull request from the fork, whose author turns edits by maintainers off while the
    // job runs (at its first model call): GitHub refuses the push, and the job says so.
    pushBranch(forkBare, bare, 'median2', NOTES, 'median2: notes');
    const { data: second } = await alice.rest.pulls.create({
      owner: OWNER,
      repo: REPO,
      head: 'alice:median2',
      base: 'main',
      title: 'Median again',
      maintainer_can_modify: true,
    });
    const flip: { done: Promise<unknown> | null } = { done: null };
    onModelCall = () => {
      flip.done = alice.rest.pulls.update({
        owner: OWNER,
        repo: REPO,
        pull_number: second.number,
        maintainer_can_modify: false,
      });
    };
    const said = (): string[] =>
      sim
        .comments(OWNER, REPO, second.number)
        .filter((c) => c.user === sim.app.botLogin)
        .map((c) => c.body);
    await sim.comment(OWNER, REPO, second.number, 'maria', '@agent fix the rounding in average');
    const ended = (): string =>
      said().find((c) => c.includes('asked me to work on this pull request') && /\*\*Why:\*\*/.test(c)) ?? '';
    await sim.waitFor(
      () => ended() !== '',
      240_000,
      () => `the refusal\n${said().join('\n---\n')}\n${pipeline.logs()}`,
    );
    assert.ok(flip.done !== null, 'the job called the model');
    await flip.done;
    assert.equal(tipIn(forkBare, 'median2'), second.head.sha, 'nothing was pushed');
    assert.match(
      ended(),
      /I could not push to `median2` in the fork `alice\/calc`: GitHub refused it .*allows edits by maintainers\)\. Nothing was changed there/,
    );
    assert.equal(sim.pulls(OWNER, REPO).find((p) => p.number === second.number)?.head.sha, second.head.sha);
    assert.deepEqual(sim.violations, []);
  },
);
