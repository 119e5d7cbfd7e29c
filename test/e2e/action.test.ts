import assert from 'node:assert/strict';
import { execFileSync, type ChildProcess } from 'node:child_process';
import { createAppAuth } from '@octokit/auth-app';
import { request } from '@octokit/request';
import { Octokit } from '@octokit/rest';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ACTION_ENTRY as ENTRY, runBundledAction, type ActionRun } from '../support/action-runner.js';
import { makeFixtureRepo, gitOutput, type FixtureRepo } from '../support/fixture-repo.js';
import {
  startGitHubSimulator,
  type GitHubSim,
  type WorkflowPermissions,
} from '../support/github-sim/index.js';
import {
  hang,
  httpError,
  oracle,
  startModelSimulator,
  type ModelSimulator,
} from '../../src/model-sim/index.js';
import { tallied } from '../support/attack-log.js';
import { FORGED_MARKER, forger } from '../support/forged-verdict.js';
import { ROOT } from '../support/pipeline.js';
import {
  bashThenOracle,
  faultOnceAt,
  requestText,
  routeByTag,
  taskText,
} from '../support/pipeline-fixtures.js';

const OWNER = 'acme';
const REPO = 'calc';
const MAINTAINER = 'maria';
const OUTSIDER = 'mallory';
const MODEL_KEY = 'sk-ant-canary-action-key-0123456789abcdef';
const FOLLOW_UP = 'Follow-up on pull request';
const FIXTURES = join(ROOT, 'test', 'fixtures', 'repos');

describe('GitHub Action (end to end, bundled entry)', { timeout: 600_000 }, () => {
  let fixture: FixtureRepo;
  let sim: GitHubSim;
  let model: ModelSimulator;
  const temps: string[] = [];
  let runId = 1000;
  /** Test 1's issue: its pull request is the one test 2 follows up on. */
  let firstIssue: number | undefined;
  let cancelHang: ReturnType<typeof faultOnceAt>;

  before(async () => {
    assert.ok(existsSync(ENTRY), `${ENTRY} is missing: run npm run build:action`);
    fixture = makeFixtureRepo('node-calc');
    sim = await startGitHubSimulator();
    await sim.createRepo({ owner: OWNER, name: REPO, sourceDir: fixture.dir });
    sim.addUser({ login: MAINTAINER });
    sim.setPermission(OWNER, REPO, MAINTAINER, 'write');
    sim.addUser({ login: OUTSIDER });
    sim.setPermission(OWNER, REPO, OUTSIDER, 'read');
    const followUpPatch = readFileSync(join(FIXTURES, 'node-calc.followup.patch'), 'utf8');
    cancelHang = faultOnceAt(2, hang, oracle(fixture.patch));
    const firstRound = routeByTag(
      {
        '[cancel]': cancelHang.policy,
        // Unconfined, a command can read the action's environment; it writes the token into the change.
        // It reads its own ancestors' environments (the action is one), not every process's: in CI
        // other files' runs hold tokens of other jobs, which this job cannot know as its own.
        '[leak]': bashThenOracle(
          [
            'p=$$; while [ "$p" -gt 1 ]; do grep -aho "ghs_[A-Za-z0-9]*" /proc/$p/environ 2>/dev/null;',
            "p=$(awk '/^PPid:/ {print $2}' /proc/$p/status); done | head -1 > leaked.txt; cat leaked.txt",
          ].join(' '),
          fixture.patch,
        ),
        '[authfail]': () => httpError(401, { message: 'invalid x-api-key' }),
        '[forge]': forger,
        // A prompt-injected agent hunting for the token: its environment, the clone's config, every
        // process's environment, the workflow checkout's config, the runner's file commands.
        '[canary]': bashThenOracle(
          [
            'env; cat .git/config',
            'grep -aho "ghs_[A-Za-z0-9]*" /proc/*/environ 2>/dev/null | head -3',
            'cat /tmp/ia-runner-*/workspace/.git/config 2>&1',
            'echo outcome=pwned >> /tmp/ia-runner-*/file-commands/output 2>&1',
            'ls /proc | grep -c "^[0-9]"',
          ].join('; '),
          fixture.patch,
        ),
      },
      oracle(fixture.patch),
    );
    const notePatch = [
      'diff --git a/ROUNDING.md b/ROUNDING.md',
      'new file mode 100644',
      '--- /dev/null',
      '+++ b/ROUNDING.md',
      '@@ -0,0 +1 @@',
      '+average() rounds half away from zero, to two decimals.',
      '',
    ].join('\n');
    const followUps = routeByTag({ '[review]': oracle(notePatch) }, oracle(followUpPatch));
    model = await startModelSimulator({
      apiKey: MODEL_KEY,
      policy: (request, ctx) =>
        taskText(request).includes(FOLLOW_UP) ? followUps(request, ctx) : firstRound(request, ctx),
    });
  });

  after(async () => {
    await model.close();
    await sim.close();
    fixture.cleanup();
    for (const t of temps) rmSync(t, { recursive: true, force: true });
  });

  const runAction = (
    event: string,
    payload: Record<string, unknown>,
    inputs: Record<string, string> = {},
    onSpawn?: (child: ChildProcess) => void,
    tokenPermissions?: WorkflowPermissions,
  ): Promise<ActionRun> =>
    runBundledAction({
      sim,
      owner: OWNER,
      repo: REPO,
      modelUrl: model.url,
      modelKey: MODEL_KEY,
      event,
      payload,
      inputs,
      runId: ++runId,
      temps,
      ...(onSpawn === undefined ? {} : { onSpawn }),
      ...(tokenPermissions === undefined ? {} : { tokenPermissions }),
    });

  const issueWith = (title: string) =>
    sim.createIssue(OWNER, REPO, {
      title,
      body: 'average() truncates instead of rounding: average([1, 2, 2]) should be 1.67.',
      author: MAINTAINER,
    }).number;
  const labeled = (n: number, sender: string) =>
    sim.buildWebhook('issues', 'labeled', {
      owner: OWNER,
      repo: REPO,
      issue: n,
      label: 'issue-agent',
      sender,
    }).payload;
  const commented = (n: number, body: string) =>
    sim.buildWebhook('issue_comment', 'created', {
      owner: OWNER,
      repo: REPO,
      issue: n,
      sender: MAINTAINER,
      comment: { body },
    }).payload;
  const prFor = (issue: number) =>
    sim.pulls(OWNER, REPO).filter((p) => p.head.ref === `issue-agent/issue-${issue}`);
  const botComments = (n: number) =>
    sim.comments(OWNER, REPO, n).filter((c) => c.user === 'github-actions[bot]');
  const requestsFor = (tag: string) => model.requests.filter((r) => requestText(r.body).includes(tag));
  const git = (...args: string[]) => gitOutput(sim.bareRepoPath(OWNER, REPO), ...args).trim();
  /** The check runs named Issue Agent on `sha`, as a client with the App's installation token reads them. */
  const checkRunsOn = async (sha: string) => {
    const auth = createAppAuth({
      appId: sim.app.id,
      privateKey: sim.app.privateKeyPem,
      request: request.defaults({ baseUrl: sim.url }),
    });
    const { token } = await auth({ type: 'installation', installationId: sim.installationId });
    const gh = new Octokit({ auth: token, baseUrl: sim.url });
    const { data } = await gh.rest.checks.listForRef({
      owner: OWNER,
      repo: REPO,
      ref: sha,
      check_name: 'Issue Agent',
      filter: 'all',
    });
    return data.check_runs;
  };

  it('1. an issue labelled by a maintainer → a PR, outputs set, the trajectory in the summary and a file', async () => {
    const n = issueWith('Average rounds wrong [canary]');
    firstIssue = n;
    // The example workflow's permissions: `checks: write` too, for the check run on the commit.
    const run = await runAction('issues', labeled(n, MAINTAINER), {}, undefined, { checks: 'write' });
    assert.equal(run.code, 0, run.stdout);
    const [pr] = prFor(n);
    assert.ok(pr !== undefined, `a PR was opened\n${run.stdout}`);
    // The check run on the pushed head, made with the workflow's token: GitHub Actions' app.
    const checks = await checkRunsOn(git('rev-parse', `issue-agent/issue-${n}`));
    assert.equal(checks.length, 1, `one check run\n${run.stdout}`);
    const [check] = checks;
    assert.ok(check);
    assert.equal(check.app?.slug, 'github-actions');
    assert.equal(check.status, 'completed');
    assert.equal(check.conclusion, 'success');
    assert.match(check.output.text ?? '', /\| .*average.* \| ❌ \| ✅ \|/);
    assert.match(check.details_url ?? '', new RegExp(`/actions/runs/${runId}$`), 'the workflow run');
    assert.doesNotMatch(run.stdout, /no check runs/);
    assert.equal(pr.user, 'github-actions[bot]');
    assert.equal(run.outputs.outcome, 'resolved', run.stdout);
    assert.equal(run.outputs['pr-number'], String(pr.number));
    assert.match(run.outputs['pr-url'] ?? '', new RegExp(`/pull/${pr.number}$`));
    assert.equal(run.outputs.branch, `issue-agent/issue-${n}`);
    assert.ok(Number(run.outputs.tokens) > 0);
    assert.ok(Number(run.outputs['cost-usd']) > 0);
    assert.ok(Number(run.outputs.steps) > 0);
    // The commit is the Actions bot's, on the PR's branch.
    const author = git('log', '-1', '--format=%an <%ae>', `issue-agent/issue-${n}`);
    assert.equal(author, 'github-actions[bot] <41898282+github-actions[bot]@users.noreply.github.com>');
    // The trajectory: in the summary, and as a redacted JSON file under RUNNER_TEMP for upload-artifact.
    assert.match(run.summary, /## Issue Agent: resolved/);
    assert.match(run.summary, /env; cat \.git\/config/, 'the summary shows the steps');
    const file = run.outputs.trajectory ?? '';
    assert.ok(file.startsWith(run.runnerTemp) && existsSync(file), `trajectory file ${file}`);
    const trajectory = JSON.parse(readFileSync(file, 'utf8')) as { events: { kind: string }[] };
    assert.ok(trajectory.events.some((e) => e.kind === 'outcome'));
    // A progress comment on the issue, ending at the PR; the 👀 reaction on the issue.
    const progress = botComments(n).find((c) => c.body.includes('issue-agent:progress'));
    assert.ok(progress !== undefined, 'a progress comment');
    assert.match(progress.body, new RegExp(`#${pr.number}`));
    assert.ok(sim.reactions(OWNER, REPO, { issue: n }).some((r) => r.content === 'eyes'));
    // Neither the token nor the model key went anywhere: not to the model, the PR, comments, outputs.
    const token = /ghs_[A-Za-z0-9]{36}/;
    for (const r of requestsFor('[canary]')) {
      assert.doesNotMatch(requestText(r.body), token);
      assert.ok(!requestText(r.body).includes(MODEL_KEY));
    }
    const published = [pr.body, ...sim.comments(OWNER, REPO, pr.number).map((c) => c.body), run.summary];
    for (const text of [...published, readFileSync(file, 'utf8'), JSON.stringify(run.outputs)]) {
      assert.doesNotMatch(text, token);
      assert.ok(!text.includes(MODEL_KEY));
    }
    // The sandbox ran in namespaces: no other process, no checkout, no file commands to write to.
    assert.ok(!readFileSync(join(run.runnerTemp, '..', 'file-commands', 'output'), 'utf8').includes('pwned'));
    const observed = requestsFor('[canary]')
      .map((r) => requestText(r.body))
      .join('\n');
    assert.doesNotMatch(observed, /extraheader = AUTHORIZATION/i, 'the checkout config is hidden');
    // Workflow commands are off while untrusted text is logged; secrets were masked first.
    assert.match(run.stdout, /^::add-mask::/m);
    assert.match(run.stdout, /^::stop-commands::[0-9a-f]{32}$/m);
    assert.deepEqual(sim.violations, []);
    assert.deepEqual(sim.responseViolations, []);
  });

  it('2. `@issue-agent …` on its PR → a follow-up commit on the same branch, no new PR', async () => {
    // Test 1's pull request: a round of its own here would only repeat test 1's first run.
    const n = firstIssue;
    assert.ok(n !== undefined, 'test 1 opened a PR');
    const [pr] = prFor(n);
    assert.ok(pr !== undefined);
    const before = git('rev-parse', `issue-agent/issue-${n}`);
    // A workflow without `checks: write`: no check run, said once in the log, and the run goes on.
    const run = await runAction(
      'issue_comment',
      commented(pr.number, '@issue-agent please make average([]) return 0 instead of NaN'),
    );
    assert.equal(run.code, 0, run.stdout);
    const said = run.stdout.split('\n').filter((l) => l.includes('no check runs'));
    assert.equal(said.length, 1, `said once:\n${said.join('\n')}`);
    assert.match(said[0] ?? '', /add \\"checks: write\\" to the workflow job's permissions/);
    assert.equal(prFor(n).length, 1, 'no second PR');
    const after = git('rev-parse', `issue-agent/issue-${n}`);
    assert.notEqual(after, before, 'the branch moved');
    assert.equal(git('rev-parse', `${after}^`), before, 'one commit on top, no force push');
    assert.equal(run.outputs.branch, `issue-agent/issue-${n}`);
    assert.equal(run.outputs['pr-number'], String(pr.number));
    const task = model.requests
      .map((r) => requestText(r.body))
      .find((t) => t.includes(`pull request #${pr.number}`));
    assert.match(task ?? '', /average\(\[\]\) return 0/);

    // A review comment with the handle on the same PR: another commit, and the answer in its thread.
    const review = sim.buildWebhook('pull_request_review_comment', 'created', {
      owner: OWNER,
      repo: REPO,
      pull: pr.number,
      sender: MAINTAINER,
      comment: { body: '@issue-agent document the rounding rule [review]' },
    }).payload;
    const third = await runAction('pull_request_review_comment', review);
    assert.equal(third.code, 0, third.stdout);
    assert.equal(git('rev-parse', `issue-agent/issue-${n}^`), after, 'a second follow-up commit on top');
    const replies = sim
      .reviewComments(OWNER, REPO, pr.number)
      .filter((c) => c.user === 'github-actions[bot]');
    assert.equal(replies.length, 1, 'one reply in the review thread');
    assert.equal(prFor(n).length, 1);
  });

  it('an App installation token as `github-token` (with `app-slug`) → the App bot opens the PR', async () => {
    const n = issueWith('Average rounds wrong [apptoken]');
    const auth = createAppAuth({
      appId: sim.app.id,
      privateKey: sim.app.privateKeyPem,
      request: request.defaults({ baseUrl: sim.url }),
    });
    const { token } = await auth({ type: 'installation', installationId: sim.installationId });
    const run = await runAction('issues', labeled(n, MAINTAINER), {
      'github-token': token,
      'app-slug': sim.app.slug,
    });
    assert.equal(run.code, 0, run.stdout);
    const [pr] = prFor(n);
    assert.equal(pr?.user, sim.app.botLogin);
    const author = git('log', '-1', '--format=%an', `issue-agent/issue-${n}`);
    assert.equal(author, sim.app.botLogin);
    assert.ok(!readFileSync(run.outputs.trajectory ?? '', 'utf8').includes(token));
  });

  it("unconfined: a change that holds the job's token is never pushed", async () => {
    const n = issueWith('Average rounds wrong [leak]');
    const run = await runAction('issues', labeled(n, MAINTAINER), { sandbox: 'unconfined' });
    assert.notEqual(run.code, 0, run.stdout);
    assert.equal(prFor(n).length, 0, 'no PR');
    assert.equal(run.outputs.outcome, 'failed');
    assert.throws(() => git('rev-parse', '--verify', `issue-agent/issue-${n}`), 'no branch pushed');
    assert.match(
      botComments(n)
        .map((c) => c.body)
        .join('\n'),
      /contains a secret/,
    );
    // The command printed the token; what the model and the trajectory got is scrubbed.
    const seen = requestsFor('[leak]').map((r) => requestText(r.body));
    assert.ok(
      seen.some((t) => t.includes('[REDACTED]')),
      'the printed token was replaced',
    );
    for (const t of seen) assert.doesNotMatch(t, /ghs_[A-Za-z0-9]{36}/);
    assert.doesNotMatch(readFileSync(run.outputs.trajectory ?? '', 'utf8'), /ghs_[A-Za-z0-9]{36}/);
  });

  const forgeName =
    'attack: a hostile agent forges passing tests in its sandbox (npm node-options in its home, a process left running) → the final run is made in a fresh sandbox, the PR is a draft';
  it(forgeName, () =>
    tallied(forgeName, async () => {
      const n = issueWith('Average rounds wrong [forge]');
      const run = await runAction('issues', labeled(n, MAINTAINER));
      assert.equal(run.code, 0, run.stdout);
      const file = run.outputs.trajectory ?? '';
      const trajectory = JSON.parse(readFileSync(file, 'utf8')) as {
        events: { kind: string; phase?: string; sandbox?: string; content?: string }[];
      };
      const forged = trajectory.events.find((e) => e.kind === 'observation');
      assert.ok(JSON.stringify(forged).includes(FORGED_MARKER), 'the forgery worked where the agent ran');
      const final = trajectory.events.find((e) => e.kind === 'test_run' && e.phase === 'final');
      assert.ok(final !== undefined, 'a final run');
      assert.ok(!JSON.stringify(final).includes(FORGED_MARKER), 'the forged runner ran for the verdict');
      assert.equal(run.outputs.outcome, 'unverified', run.stdout);
      const [pr] = prFor(n);
      assert.ok(pr !== undefined, `a draft PR\n${run.stdout}`);
      assert.equal(pr.draft, true);
      assert.equal(final.sandbox, 'fresh');
      assert.match(pr.body, /The final run was made in a new sandbox that the agent never ran in/);
    }),
  );

  it('3. an untrusted sender → a clean exit, no model request, no comment', async () => {
    const n = issueWith('Average rounds wrong [untrusted]');
    const before = model.requests.length;
    const run = await runAction('issues', labeled(n, OUTSIDER));
    assert.equal(run.code, 0, run.stdout);
    assert.equal(run.outputs.outcome, 'skipped');
    assert.match(run.stdout, /untrusted sender: mallory has role read/);
    assert.equal(model.requests.length, before, 'no model request at all');
    assert.equal(botComments(n).length, 0);
    assert.equal(prFor(n).length, 0);
  });

  it('3b. events the action does not handle, or without our label or handle → a log line and exit 0', async () => {
    const n = issueWith('Not for us');
    const other = sim.buildWebhook('issues', 'labeled', {
      owner: OWNER,
      repo: REPO,
      issue: n,
      label: 'bug',
      sender: MAINTAINER,
    }).payload;
    const before = model.requests.length;
    const notOurs = await runAction('issues', other);
    assert.equal(notOurs.code, 0);
    assert.match(notOurs.stdout, /not our label/);
    const push = await runAction('push', { ref: 'refs/heads/main' });
    assert.equal(push.code, 0);
    assert.match(push.stdout, /event push is not handled/);
    assert.equal(model.requests.length, before);
  });

  it('4. a model 401 → a failure comment on the issue naming the cause, exit code non-zero', async () => {
    const n = issueWith('Average rounds wrong [authfail]');
    const run = await runAction('issues', labeled(n, MAINTAINER));
    assert.notEqual(run.code, 0, run.stdout);
    assert.equal(run.outputs.outcome, 'failed');
    assert.match(run.stdout, /::error::issue-agent: the run failed/);
    const bodies = botComments(n)
      .map((c) => c.body)
      .join('\n');
    assert.match(bodies, /failed/i);
    assert.match(bodies, /401|auth|key/i, bodies);
    assert.equal(prFor(n).length, 0);
  });

  it('a mention on a person’s pull request, even from a branch named like ours → one reply, no model request, nothing pushed', async () => {
    const bare = sim.bareRepoPath(OWNER, REPO);
    const work = mkdtempSync(join(tmpdir(), 'ia-human-pr-'));
    temps.push(work);
    execFileSync(
      'bash',
      [
        '-c',
        `git clone -q "${bare}" r && cd r && echo "# human" >> README.md && git add -A && git -c user.name=Hu -c user.email=hu@example.invalid commit -qm "human change" && git push -q origin HEAD:refs/heads/issue-agent/issue-999`,
      ],
      { cwd: work },
    );
    const tip = git('rev-parse', 'issue-agent/issue-999');
    // Opened by a person (a user token), from a branch named like the agent's own.
    const gh = new Octokit({ auth: sim.oauth.issueToken(MAINTAINER), baseUrl: sim.url });
    const { data: pr } = await gh.rest.pulls.create({
      owner: OWNER,
      repo: REPO,
      head: 'issue-agent/issue-999',
      base: 'main',
      title: 'A human change',
    });
    const before = model.requests.length;
    const run = await runAction(
      'issue_comment',
      commented(pr.number, '@issue-agent please fix the lint errors'),
    );
    assert.equal(run.code, 0, run.stdout);
    assert.equal(run.outputs.outcome, 'skipped');
    assert.equal(model.requests.length, before, 'no model request');
    assert.match(
      botComments(pr.number)
        .map((c) => c.body)
        .join('\n'),
      /only push to pull requests I opened/,
    );
    assert.equal(pr.user.login, MAINTAINER);
    assert.equal(git('rev-parse', 'issue-agent/issue-999'), tip, 'nothing pushed');
  });

  it('the workflow run cancelled (SIGINT) while the model hangs → outcome cancelled, said on the issue', async () => {
    const n = issueWith('Average rounds wrong [cancel]');
    const run = await runAction('issues', labeled(n, MAINTAINER), {}, (child) => {
      void sim
        .waitFor(() => cancelHang.fired(), 60_000, 'the model to hang')
        .then(() => child.kill('SIGINT'));
    });
    assert.equal(run.code, 0, run.stdout);
    assert.equal(run.outputs.outcome, 'cancelled');
    assert.match(
      botComments(n)
        .map((c) => c.body)
        .join('\n'),
      /cancel/i,
    );
    assert.equal(prFor(n).length, 0);
  });

  it('invalid inputs → exit 1 with a comment that names the input', async () => {
    const n = issueWith('Budget typo');
    const run = await runAction('issues', labeled(n, MAINTAINER), { 'max-usd': 'lots' });
    assert.equal(run.code, 1, run.stdout);
    assert.match(run.stdout, /::error::issue-agent: .*max-usd/);
    assert.match(
      botComments(n)
        .map((c) => c.body)
        .join('\n'),
      /max-usd/,
    );
  });
});
