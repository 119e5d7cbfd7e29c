import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createAppAuth } from '@octokit/auth-app';
import { request } from '@octokit/request';
import { Octokit } from '@octokit/rest';
import { FIXTURES } from '../support/fixture-repo.js';
import { oracle } from '../../src/model-sim/index.js';
import { labelledIssue, startStack, type Stack } from '../support/pipeline.js';
import { routeByTag, taskText } from '../support/pipeline-fixtures.js';
import { redisSkipReason } from '../support/redis-server.js';

const skip = redisSkipReason();
const OWNER = 'acme';
const REPO = 'calc';
const MODEL_KEY = 'sk-ant-checkruns-0123456789';
const MAINTAINER = 'maria';
const FOLLOW_UP = 'Follow-up on pull request';

/** A change that fixes nothing: the failing test still fails, so the run is unverified. */
const COMMENT_ONLY = `diff --git a/src/calc.js b/src/calc.js
--- a/src/calc.js
+++ b/src/calc.js
@@ -1,3 +1,4 @@
+// Reviewed: the helpers below are used by the reporting CLI.
 /**
  * Small arithmetic helpers used by the reporting CLI.
  */
`;

/** What GitHub answers, asked as a client would (the App's installation token), never the simulator's state. */
async function installationOctokit(stack: Stack): Promise<Octokit> {
  const auth = createAppAuth({
    appId: stack.sim.app.id,
    privateKey: stack.sim.app.privateKeyPem,
    request: request.defaults({ baseUrl: stack.sim.url }),
  });
  const { token } = await auth({ type: 'installation', installationId: stack.sim.installationId });
  return new Octokit({ auth: token, baseUrl: stack.sim.url });
}

async function pullFor(stack: Stack, issue: number): Promise<{ number: number; head: string }> {
  const branch = `issue-agent/issue-${issue}`;
  await stack.sim.waitFor(
    () => stack.sim.pulls(OWNER, REPO).some((p) => p.head.ref === branch),
    120_000,
    () => `a PR for #${issue}\n${stack.pipeline.logs()}`,
  );
  const gh = await installationOctokit(stack);
  const { data } = await gh.rest.pulls.list({ owner: OWNER, repo: REPO, head: `${OWNER}:${branch}` });
  const pr = data[0];
  assert.ok(pr, 'the PR is listed');
  return { number: pr.number, head: pr.head.sha };
}

async function agentChecks(stack: Stack, sha: string) {
  const gh = await installationOctokit(stack);
  const { data } = await gh.rest.checks.listForRef({
    owner: OWNER,
    repo: REPO,
    ref: sha,
    check_name: 'Issue Agent',
    filter: 'all',
  });
  return data.check_runs;
}

/** Until the agent's check run on `sha` passes `test` (a verification updated it, say). */
async function checkWhere(
  stack: Stack,
  sha: string,
  test: (run: Awaited<ReturnType<typeof agentChecks>>[number]) => boolean,
  what: string,
) {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const found = (await agentChecks(stack, sha)).find(test);
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`${what} on ${sha}\n${stack.pipeline.logs()}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** A person's commit on the PR's branch that breaks `range includes both ends` (as GitHub's editor makes it). */
async function breakBranch(stack: Stack, pr: number): Promise<string> {
  const person = new Octokit({ auth: stack.sim.oauth.issueToken(MAINTAINER), baseUrl: stack.sim.url });
  const reader = await installationOctokit(stack);
  const where = { owner: OWNER, repo: REPO };
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
  return commit.sha;
}

/** Until the App's reply to `@agent verify` on `pr` holds `pattern`. */
async function verifyReply(stack: Stack, pr: number, pattern: RegExp): Promise<string> {
  const find = () =>
    stack.sim
      .comments(OWNER, REPO, pr)
      .find(
        (c) =>
          c.user === stack.sim.app.botLogin &&
          c.body.includes('Issue Agent: verification') &&
          pattern.test(c.body),
      );
  await stack.sim.waitFor(
    () => find() !== undefined,
    120_000,
    () => `a reply matching ${pattern}\n${stack.pipeline.logs()}`,
  );
  return find()?.body ?? '';
}

/** Until the job that pushed `sha` has put its check run there (it is made right after the PR). */
async function checkOn(stack: Stack, sha: string) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const runs = await agentChecks(stack, sha);
    if (runs.length > 0) return runs;
    if (Date.now() > deadline) throw new Error(`no check run on ${sha}\n${stack.pipeline.logs()}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * Two stacks, started together: one whose App may write checks, one whose App has app.yml's old
 * `checks: read`. The second one's job starts at once and runs beside the first stack's cases.
 */
describe('a check run per published head (end to end)', { skip, timeout: 300_000 }, () => {
  let stack: Stack | undefined;
  let readOnly: Stack | undefined;
  let readOnlyIssue: Promise<number> | undefined;
  const followUpPatch = readFileSync(join(FIXTURES, 'node-calc.followup.patch'), 'utf8');

  before(async () => {
    const started = await Promise.allSettled([
      startStack({
        owner: OWNER,
        repo: REPO,
        maintainer: { login: MAINTAINER, permission: 'write' },
        modelKey: MODEL_KEY,
        appPermissions: { checks: 'write' },
        policy: (fixture) => {
          const first = routeByTag({ '[unverified]': oracle(COMMENT_ONLY) }, oracle(fixture.patch));
          const followUp = oracle(followUpPatch);
          return (request, ctx) =>
            taskText(request).includes(FOLLOW_UP) ? followUp(request, ctx) : first(request, ctx);
        },
      }),
      startStack({
        owner: OWNER,
        repo: REPO,
        maintainer: { login: MAINTAINER, permission: 'write' },
        modelKey: MODEL_KEY,
        policy: (fixture) => oracle(fixture.patch),
      }),
    ]);
    const [writer, reader] = started;
    if (writer.status === 'fulfilled') stack = writer.value;
    if (reader.status === 'fulfilled') readOnly = reader.value;
    for (const s of started) if (s.status === 'rejected') throw s.reason;
    const ro = readOnly;
    if (ro !== undefined) {
      readOnlyIssue = labelledIssue(ro, {
        title: 'average() truncates',
        body: 'average([1,2,2]) should be 1.67',
      });
    }
  });

  after(async () => {
    await Promise.all([stack?.stop(), readOnly?.stop()]);
  });
  it('a resolved job: success on the PR head with the per-test table; a follow-up round: a new run on its head, the old one as it was', async () => {
    assert.ok(stack);
    const issue = await labelledIssue(stack, {
      title: 'average() truncates',
      body: 'average([1,2,2]) should be 1.67',
    });
    const pr = await pullFor(stack, issue);
    const [run, ...others] = await checkOn(stack, pr.head);
    assert.ok(run);
    assert.equal(others.length, 0, 'one check run per head');
    assert.equal(run.status, 'completed');
    assert.equal(run.conclusion, 'success');
    assert.equal(run.app?.id, stack.sim.app.id);
    assert.match(run.output.title ?? '', /^Resolved/);
    assert.match(run.output.summary ?? '', /Outcome/);
    const text = run.output.text ?? '';
    assert.match(text, /\| Test \| Before \| After \|/);
    assert.match(text, /\| .*average.* \| ❌ \| ✅ \|/, 'the fixed test: failing before, passing after');
    assert.match(run.details_url ?? '', new RegExp(`^${stack.pipeline.appUrl}/`), 'the run page');
    // The PR body holds the same table: one renderer.
    const gh = await installationOctokit(stack);
    const body =
      (await gh.rest.pulls.get({ owner: OWNER, repo: REPO, pull_number: pr.number })).data.body ?? '';
    for (const row of text.split('\n').filter((l) => /\| (✅|❌|—) \| (✅|❌|—) \|$/.test(l))) {
      assert.ok(body.includes(row), `the PR body has the row ${row}`);
    }
    const annotations = (
      await gh.rest.checks.listAnnotations({ owner: OWNER, repo: REPO, check_run_id: run.id })
    ).data;
    // The harness's node:test reporter gives each test's line: the proof sits on its definition.
    assert.ok(annotations.length > 0, 'the proof is annotated');
    for (const a of annotations) {
      const lines = readFileSync(join(FIXTURES, 'node-calc', a.path), 'utf8').split('\n');
      assert.ok(a.start_line > 1, `${a.path}:${a.start_line}`);
      assert.match(
        lines[a.start_line - 1] ?? '',
        /\btest\(|\bit\(/,
        `${a.path}:${a.start_line} defines a test`,
      );
      assert.doesNotMatch(a.message ?? '', /first line of the file/);
    }

    await stack.sim.comment(OWNER, REPO, pr.number, MAINTAINER, '@agent rename the helper to roundHalfAway');
    const deadline = Date.now() + 120_000;
    let newHead = pr.head;
    while (newHead === pr.head) {
      if (Date.now() > deadline) throw new Error(`no follow-up commit\n${stack.pipeline.logs()}`);
      await new Promise((r) => setTimeout(r, 250));
      newHead = (await gh.rest.pulls.get({ owner: OWNER, repo: REPO, pull_number: pr.number })).data.head.sha;
    }
    const [second] = await checkOn(stack, newHead);
    assert.ok(second);
    assert.notEqual(second.id, run.id);
    assert.equal(second.head_sha, newHead);
    assert.equal(second.status, 'completed');
    const [old, ...more] = await agentChecks(stack, pr.head);
    assert.equal(more.length, 0);
    assert.deepEqual(
      { id: old?.id, conclusion: old?.conclusion, completed_at: old?.completed_at, output: old?.output },
      { id: run.id, conclusion: run.conclusion, completed_at: run.completed_at, output: run.output },
      'the first head’s check run is left as it was',
    );
  });

  it('an unverified job: neutral', async () => {
    assert.ok(stack);
    const issue = await labelledIssue(stack, {
      title: 'average() truncates [unverified]',
      body: 'average([1,2,2]) should be 1.67',
    });
    const pr = await pullFor(stack, issue);
    const [run] = await checkOn(stack, pr.head);
    assert.ok(run);
    assert.equal(run.conclusion, 'neutral');
    assert.match(run.output.title ?? '', /^Unverified/);
    assert.match(run.output.text ?? '', /\| .*average.* \| ❌ \| ❌ \|/, 'still failing');
  });

  it('`@agent verify`: the head’s check run says the verdict is reproduced; after a person breaks a test, a new check run on the new head says it differs and names the test', async () => {
    assert.ok(stack);
    const s = stack;
    const issue = await labelledIssue(s, {
      title: 'average() truncates [verify]',
      body: 'average([1,2,2]) should be 1.67',
    });
    const pr = await pullFor(s, issue);
    const [recorded] = await checkOn(s, pr.head);
    assert.ok(recorded);
    assert.equal(recorded.conclusion, 'success');

    await s.sim.comment(OWNER, REPO, pr.number, MAINTAINER, '@agent verify');
    const updated = await checkWhere(
      s,
      pr.head,
      (r) => /Matches/.test(r.output.summary ?? ''),
      'no reproduction on the check run',
    );
    assert.equal(updated.id, recorded.id, 'the same check run, updated');
    assert.equal(updated.conclusion, 'success', 'the recorded verdict stays');
    assert.equal(updated.output.text, recorded.output.text, 'and so does its table');
    assert.match(updated.output.title ?? '', /^Resolved.* · Reproduced: matches the verdict recorded on /);
    assert.match(updated.output.summary ?? '', /\*\*Outcome:\*\*/, 'the recorded summary follows');
    const matched = await verifyReply(s, pr.number, /Matches/);
    assert.ok(
      matched.includes(`](${updated.html_url ?? '?'})`),
      `the reply links the check run:\n${matched}`,
    );

    const broken = await breakBranch(s, pr.number);
    await s.sim.comment(OWNER, REPO, pr.number, MAINTAINER, '@agent verify');
    const made = await checkWhere(s, broken, () => true, 'no check run');
    assert.equal(made.conclusion, 'failure');
    assert.equal(made.app?.id, s.sim.app.id);
    assert.match(made.output.title ?? '', /^Not reproduced: 1 test differ/);
    assert.match(
      made.output.summary ?? '',
      /`[^`]*range includes both ends`: recorded ✅ before, ✅ after; reproduced ✅ before, ❌ after/,
    );
    assert.match(made.output.text ?? '', /range includes both ends.* \| ✅ \| ❌ \|/, 'the reproduced table');
    const differs = await verifyReply(s, pr.number, /Differs/);
    assert.match(differs, /range includes both ends/);
    assert.ok(
      differs.includes(`changed after my verdict on \`${pr.head.slice(0, 12)}\`), so I added one`),
      `the reply says why the head had no check run:\n${differs}`,
    );
    assert.ok(
      differs.includes(`](${made.html_url ?? '?'})`),
      `the reply links the new check run:\n${differs}`,
    );
    // The first head's run still records the agent's verdict; the new one is a reproduction's.
    assert.equal((await agentChecks(s, pr.head))[0]?.conclusion, 'success');
  });

  it('an App without checks: write: the job still opens its PR, with no check run, and the log says why once', async () => {
    assert.ok(readOnly && readOnlyIssue);
    const ro = readOnly;
    const issue = await readOnlyIssue;
    const pr = await pullFor(ro, issue);
    // The job has ended when its progress comment points at the PR (the check run comes before).
    await ro.sim.waitFor(
      () =>
        ro.sim
          .comments(OWNER, REPO, issue)
          .some(
            (c) =>
              c.user === ro.sim.app.botLogin &&
              (c.body.includes(`/pull/${pr.number}`) || c.body.includes(`#${pr.number}`)),
          ),
      30_000,
      () => `the job ended\n${ro.pipeline.logs()}`,
    );
    assert.equal((await agentChecks(ro, pr.head)).length, 0);
    const said = ro.pipeline
      .logs()
      .split('\n')
      .filter((l) => l.includes('grant \\"checks: write\\"'));
    assert.equal(said.length, 1, `said once:\n${said.join('\n')}`);
    assert.doesNotMatch(ro.pipeline.logs(), /fix job failed/);
  });
});
