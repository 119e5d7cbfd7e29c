import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { RequestError } from '@octokit/request-error';
import { Octokit } from '@octokit/rest';
import { createNodeMiddleware, Webhooks, type EmitterWebhookEvent } from '@octokit/webhooks';
import { startGitHubSimulator, type GitHubSim, type SimPull } from '../support/github-sim/index.js';
import { git, installationOctokit, makeSourceRepo, quietLog, type TempDir } from './helpers.js';

type WorkflowRunEvent = EmitterWebhookEvent<'workflow_run'>;

let sim: GitHubSim;
let source: TempDir;
let receiver: Server;
let octokit: Octokit;
let pull: SimPull;
/** Tips of branches no pull request has as its head. */
let mainSha: string;
let skippedSha: string;
let greenSha: string;
/** workflow_run deliveries as @octokit/webhooks verified, parsed and typed them. */
const received: WorkflowRunEvent[] = [];

/** A receiver that verifies and parses deliveries with @octokit/webhooks, as Probot does. */
async function startReceiver(): Promise<string> {
  const webhooks = new Webhooks({ secret: sim.app.webhookSecret });
  webhooks.on('workflow_run', (event) => {
    received.push(event);
  });
  const middleware = createNodeMiddleware(webhooks);
  receiver = createServer((req, res) => {
    void middleware(req, res, () => res.writeHead(404).end());
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/api/github/webhooks`;
}

async function branchTip(name: string): Promise<string> {
  await git(source.dir, ['checkout', '-q', '-b', name, 'main']);
  await git(source.dir, ['commit', '-q', '--allow-empty', '-m', `${name}\n\nbody`]);
  const sha = (await git(source.dir, ['rev-parse', 'HEAD'])).trim();
  await git(source.dir, ['checkout', '-q', 'main']);
  return sha;
}

before(async () => {
  sim = await startGitHubSimulator();
  sim.setWebhookTarget(await startReceiver());
  source = await makeSourceRepo({
    'README.md': '# demo\n',
    'src/add.js': 'export const add = (a, b) => a + b;\n',
  });
  await branchTip('issue-agent/issue-1');
  skippedSha = await branchTip('docs');
  greenSha = await branchTip('green');
  await sim.createRepo({ owner: 'octo', name: 'demo', sourceDir: source.dir });
  mainSha = (await git(source.dir, ['rev-parse', 'main'])).trim();
  pull = await sim.openPull('octo', 'demo', {
    head: 'issue-agent/issue-1',
    title: 'Fix add',
    author: sim.app.botLogin,
  });
  octokit = installationOctokit(sim);
});

after(async () => {
  await sim.close();
  await new Promise((resolve) => receiver.close(resolve));
  source.cleanup();
});

async function status(promise: Promise<unknown>): Promise<number> {
  try {
    await promise;
    return 0;
  } catch (error) {
    assert.ok(error instanceof RequestError, `expected a RequestError, got ${String(error)}`);
    return error.status;
  }
}

function runOf(sha: string): number {
  const run = sim.checkRuns('octo', 'demo').find((r) => r.headSha === sha);
  assert.ok(run !== undefined, `no check run on ${sha}`);
  return run.workflowRunId;
}

void test('completeWorkflowRun delivers a signed workflow_run.completed that fails with a job and names the pull request', async () => {
  for (const [name, conclusion] of [
    ['lint', 'success'],
    ['test (20.x)', 'failure'],
    // Cancelled by fail-fast when the test job failed: the run still concludes `failure`.
    ['test (22.x)', 'cancelled'],
  ] as const)
    await sim.addCheckRun('octo', 'demo', { headSha: pull.head.sha, name, conclusion, deliver: false });
  const jobs = sim.checkRuns('octo', 'demo').filter((r) => r.headSha === pull.head.sha);
  const [first] = jobs;
  assert.ok(first !== undefined);

  const before = received.length;
  const { event, payload, delivery } = await sim.completeWorkflowRun('octo', 'demo', {
    headSha: pull.head.sha,
  });
  assert.equal(event, 'workflow_run');
  // @octokit/webhooks' middleware answers 200 only for a delivery whose signature verifies.
  assert.equal(delivery.status, 200);
  assert.equal(received.length, before + 1);
  const hook = received.at(-1);
  assert.ok(hook !== undefined);
  assert.equal(hook.name, 'workflow_run');
  assert.deepEqual(hook.payload, JSON.parse(JSON.stringify(payload)));
  assert.deepEqual(
    [sim.deliveries.at(-1)?.name, sim.deliveries.at(-1)?.action, sim.deliveries.at(-1)?.id],
    ['workflow_run', 'completed', hook.id],
  );
  assert.equal(hook.payload.action, 'completed');

  const { workflow_run: run, workflow, repository, sender, installation } = hook.payload;
  const id = first.workflowRunId;
  assert.ok(jobs.every((j) => j.workflowRunId === id && j.checkSuiteId === first.checkSuiteId));
  assert.deepEqual(
    [run.id, run.check_suite_id, run.head_sha, run.head_branch, run.status, run.conclusion, run.name],
    [id, first.checkSuiteId, pull.head.sha, 'issue-agent/issue-1', 'completed', 'failure', 'CI'],
  );
  assert.deepEqual(
    [run.event, run.run_attempt, run.run_number, run.previous_attempt_url],
    ['pull_request', 1, 1, null],
  );
  assert.equal(run.html_url, `${sim.url}/octo/demo/actions/runs/${id}`);
  assert.equal(run.jobs_url, `${sim.url}/repos/octo/demo/actions/runs/${id}/jobs`);
  assert.equal(run.logs_url, `${sim.url}/repos/octo/demo/actions/runs/${id}/logs`);
  assert.equal(run.display_title, 'Fix add');
  assert.equal(run.head_commit.id, pull.head.sha);
  assert.equal(run.head_commit.message, 'issue-agent/issue-1\n\nbody');
  const { data: pr } = await octokit.rest.pulls.get({
    owner: 'octo',
    repo: 'demo',
    pull_number: pull.number,
  });
  const repoRef = { id: repository.id, url: `${sim.url}/repos/octo/demo`, name: 'demo' };
  assert.deepEqual(run.pull_requests, [
    {
      url: `${sim.url}/repos/octo/demo/pulls/${pull.number}`,
      id: pr.id,
      number: pull.number,
      head: { ref: 'issue-agent/issue-1', sha: pull.head.sha, repo: repoRef },
      base: { ref: 'main', sha: pr.base.sha, repo: repoRef },
    },
  ]);
  assert.equal(run.head_repository.id, repository.id);
  assert.equal(run.repository.full_name, 'octo/demo');
  assert.equal(run.workflow_id, workflow?.id);
  assert.deepEqual([workflow?.name, workflow?.path], ['CI', '.github/workflows/ci.yml']);
  assert.equal(repository.full_name, 'octo/demo');
  // Who triggered the workflow: whoever opened the pull request, here the bot.
  assert.equal(sender.login, sim.app.botLogin);
  assert.equal(run.actor?.login, sim.app.botLogin);
  assert.equal(installation?.id, sim.installationId);

  await assert.rejects(
    sim.completeWorkflowRun('octo', 'demo', { headSha: pull.head.sha }),
    /is already completed/,
  );
  assert.deepEqual(sim.violations, []);
  assert.deepEqual(sim.responseViolations, []);
});

void test('actions/get-workflow-run and list-jobs-for-workflow-run show the run and its check runs as jobs', async () => {
  const id = runOf(pull.head.sha);
  const checkRuns = sim.checkRuns('octo', 'demo').filter((r) => r.workflowRunId === id);
  const { data: run } = await octokit.rest.actions.getWorkflowRun({
    owner: 'octo',
    repo: 'demo',
    run_id: id,
  });
  assert.deepEqual(
    [run.id, run.status, run.conclusion, run.event, run.head_sha, run.head_branch, run.name, run.run_attempt],
    [id, 'completed', 'failure', 'pull_request', pull.head.sha, 'issue-agent/issue-1', 'CI', 1],
  );
  assert.equal(run.check_suite_id, checkRuns[0]?.checkSuiteId);
  assert.deepEqual(
    run.pull_requests?.map((p) => p.number),
    [pull.number],
  );
  const excluded = await octokit.rest.actions.getWorkflowRun({
    owner: 'octo',
    repo: 'demo',
    run_id: id,
    exclude_pull_requests: true,
  });
  assert.deepEqual([excluded.data.pull_requests, excluded.data.event], [[], 'pull_request']);

  const { data: listed } = await octokit.rest.actions.listJobsForWorkflowRun({
    owner: 'octo',
    repo: 'demo',
    run_id: id,
  });
  assert.equal(listed.total_count, 3);
  assert.deepEqual(
    listed.jobs.map((j) => [j.id, j.run_id, j.head_sha, j.name, j.status, j.conclusion]),
    checkRuns.map((r) => [r.id, id, pull.head.sha, r.name, 'completed', r.conclusion]),
  );
  const [job] = listed.jobs;
  assert.ok(job !== undefined);
  assert.equal(job.html_url, `${sim.url}/octo/demo/actions/runs/${id}/job/${job.id}`);
  assert.equal(job.check_run_url, `${sim.url}/repos/octo/demo/check-runs/${job.id}`);
  assert.deepEqual([job.workflow_name, job.head_branch, job.run_attempt], ['CI', 'issue-agent/issue-1', 1]);
  assert.deepEqual(
    job.steps?.map((s) => [s.number, s.status, s.conclusion]),
    [[1, 'completed', 'success']],
  );
  assert.deepEqual([job.runner_id, job.runner_name], [null, null]);
  assert.ok(job.started_at !== '' && job.completed_at !== null);
  // A job is its check run: the same id reads back through the checks API.
  const { data: check } = await octokit.rest.checks.get({
    owner: 'octo',
    repo: 'demo',
    check_run_id: job.id,
  });
  assert.equal(check.html_url, job.html_url);

  const second = await octokit.rest.actions.listJobsForWorkflowRun({
    owner: 'octo',
    repo: 'demo',
    run_id: id,
    per_page: 1,
    page: 2,
  });
  assert.deepEqual(
    second.data.jobs.map((j) => j.name),
    ['test (20.x)'],
  );
  assert.match(second.headers.link ?? '', /rel="prev".*rel="next"/);
  const paged = await octokit.paginate(octokit.rest.actions.listJobsForWorkflowRun, {
    owner: 'octo',
    repo: 'demo',
    run_id: id,
    per_page: 2,
  });
  assert.deepEqual(
    paged.map((j) => j.id),
    checkRuns.map((r) => r.id),
  );

  assert.equal(
    await status(octokit.rest.actions.getWorkflowRun({ owner: 'octo', repo: 'demo', run_id: 1 })),
    404,
  );
  assert.equal(
    await status(octokit.rest.actions.listJobsForWorkflowRun({ owner: 'octo', repo: 'demo', run_id: 1 })),
    404,
  );
  assert.equal(
    await status(octokit.rest.actions.getWorkflowRun({ owner: 'octo', repo: 'nope', run_id: id })),
    404,
  );
  assert.deepEqual(sim.violations, []);
  assert.deepEqual(sim.responseViolations, []);
});

void test('a job added to a completed run is a re-run: the next attempt runs, then completes in turn', async () => {
  const id = runOf(pull.head.sha);
  // "Re-run failed jobs" re-runs the failed and the cancelled ones.
  const rerun = await sim.addCheckRun('octo', 'demo', {
    headSha: pull.head.sha,
    name: 'test (20.x)',
    status: 'in_progress',
    deliver: false,
  });
  await sim.addCheckRun('octo', 'demo', {
    headSha: pull.head.sha,
    name: 'test (22.x)',
    conclusion: 'success',
    deliver: false,
  });
  const running = await octokit.rest.actions.getWorkflowRun({ owner: 'octo', repo: 'demo', run_id: id });
  assert.deepEqual(
    [running.data.status, running.data.conclusion, running.data.run_attempt],
    ['in_progress', null, 2],
  );
  await assert.rejects(
    sim.completeWorkflowRun('octo', 'demo', { headSha: pull.head.sha }),
    /still has jobs running: test \(20\.x\) \(in_progress\)/,
  );
  await sim.completeCheckRun('octo', 'demo', rerun.id, { conclusion: 'success' });

  const { payload } = await sim.completeWorkflowRun('octo', 'demo', { headSha: pull.head.sha });
  const run = received.at(-1)?.payload.workflow_run;
  assert.deepEqual(received.at(-1)?.payload, JSON.parse(JSON.stringify(payload)));
  assert.deepEqual(
    [run?.id, run?.status, run?.conclusion, run?.run_attempt, run?.previous_attempt_url],
    [id, 'completed', 'success', 2, `${sim.url}/repos/octo/demo/actions/runs/${id}/attempts/1`],
  );

  const latest = await octokit.rest.actions.listJobsForWorkflowRun({
    owner: 'octo',
    repo: 'demo',
    run_id: id,
  });
  assert.deepEqual(
    latest.data.jobs.map((j) => [j.name, j.conclusion, j.run_attempt]),
    [
      ['lint', 'success', 1],
      ['test (20.x)', 'success', 2],
      ['test (22.x)', 'success', 2],
    ],
  );
  const all = await octokit.rest.actions.listJobsForWorkflowRun({
    owner: 'octo',
    repo: 'demo',
    run_id: id,
    filter: 'all',
  });
  assert.equal(all.data.total_count, 5);
  assert.deepEqual(sim.violations, []);
  assert.deepEqual(sim.responseViolations, []);
});

void test('runs of other workflows and pushes: event push, no pull requests, conclusions rolled up as GitHub does', async () => {
  await sim.addCheckRun('octo', 'demo', {
    headSha: mainSha,
    name: 'test',
    conclusion: 'cancelled',
    deliver: false,
  });
  const deliveries = sim.deliveries.length;
  const quiet = await sim.completeWorkflowRun('octo', 'demo', {
    headSha: mainSha,
    name: 'Nightly',
    deliver: false,
  });
  assert.equal(quiet.delivery, null);
  assert.equal(sim.deliveries.length, deliveries);
  const run = quiet.payload.workflow_run as Record<string, unknown>;
  const workflow = quiet.payload.workflow as Record<string, unknown>;
  assert.deepEqual(
    [
      run.event,
      run.pull_requests,
      run.head_branch,
      run.conclusion,
      run.name,
      run.display_title,
      run.run_number,
    ],
    ['push', [], 'main', 'cancelled', 'Nightly', 'initial', 1],
  );
  assert.deepEqual([workflow.name, workflow.path], ['Nightly', '.github/workflows/nightly.yml']);
  assert.equal((quiet.payload.sender as { login: string }).login, 'octo');

  // Every job skipped: the run is skipped; some skipped and the rest passing: success.
  await sim.addCheckRun('octo', 'demo', {
    headSha: skippedSha,
    name: 'deploy',
    conclusion: 'skipped',
    deliver: false,
  });
  const skipped = await sim.completeWorkflowRun('octo', 'demo', {
    headSha: skippedSha,
    name: 'Nightly',
    deliver: false,
  });
  const skippedRun = skipped.payload.workflow_run as Record<string, unknown>;
  assert.deepEqual([skippedRun.conclusion, skippedRun.run_number], ['skipped', 2]);

  // buildWebhook completes the run it reports, as completeWorkflowRun does, under the run's name.
  await sim.addCheckRun('octo', 'demo', {
    headSha: greenSha,
    name: 'test',
    conclusion: 'success',
    deliver: false,
  });
  await sim.addCheckRun('octo', 'demo', {
    headSha: greenSha,
    name: 'deploy',
    conclusion: 'skipped',
    deliver: false,
  });
  const hook = sim.buildWebhook('workflow_run', 'completed', {
    owner: 'octo',
    repo: 'demo',
    sender: 'octo',
    workflowRun: runOf(greenSha),
  });
  assert.equal((await sim.deliver(hook)).status, 200);
  const green = received.at(-1)?.payload;
  const ci = await octokit.rest.actions.getWorkflowRun({
    owner: 'octo',
    repo: 'demo',
    run_id: runOf(pull.head.sha),
  });
  assert.deepEqual(
    [
      green?.workflow_run.conclusion,
      green?.workflow_run.name,
      green?.workflow_run.head_branch,
      green?.workflow?.id,
    ],
    ['success', 'CI', 'green', ci.data.workflow_id],
  );
  // Runs are numbered per workflow: the pull request's run was CI's first.
  assert.deepEqual([green?.workflow_run.run_number, ci.data.run_number], [2, 1]);

  await assert.rejects(
    sim.completeWorkflowRun('octo', 'demo', { headSha: 'f'.repeat(40) }),
    /no GitHub Actions check runs on f{40} in octo\/demo/,
  );
  assert.throws(
    () =>
      sim.buildWebhook('workflow_run', 'completed', {
        owner: 'octo',
        repo: 'demo',
        sender: 'octo',
        workflowRun: 1,
      }),
    /needs workflowRun/,
  );
  assert.deepEqual(sim.violations, []);
  assert.deepEqual(sim.responseViolations, []);
});

void test("a workflow's GITHUB_TOKEN reads checks and Actions only when its permissions ask for them", async () => {
  const id = runOf(pull.head.sha);
  const [job] = sim.checkRuns('octo', 'demo');
  assert.ok(job !== undefined);
  const calls = (client: Octokit) => [
    client.rest.actions.getWorkflowRun({ owner: 'octo', repo: 'demo', run_id: id }),
    client.rest.actions.listJobsForWorkflowRun({ owner: 'octo', repo: 'demo', run_id: id }),
    client.rest.checks.listForRef({ owner: 'octo', repo: 'demo', ref: pull.head.sha }),
    client.rest.checks.get({ owner: 'octo', repo: 'demo', check_run_id: job.id }),
  ];

  const plain = new Octokit({ baseUrl: sim.url, log: quietLog, auth: sim.actionsToken('octo', 'demo') });
  for (const call of calls(plain)) {
    const error = await call.then(
      () => null,
      (e: unknown) => e,
    );
    assert.ok(error instanceof RequestError);
    assert.equal(error.status, 403);
    assert.match(error.message, /Resource not accessible by integration/);
  }
  // What the default set grants still works.
  assert.equal(
    (await plain.rest.pulls.get({ owner: 'octo', repo: 'demo', pull_number: pull.number })).status,
    200,
  );

  const reader = new Octokit({
    baseUrl: sim.url,
    log: quietLog,
    auth: sim.actionsToken('octo', 'demo', { checks: 'read', actions: 'read' }),
  });
  for (const call of calls(reader)) assert.equal((await call).status, 200);
  const followed = await reader.rest.actions.downloadJobLogsForWorkflowRun({
    owner: 'octo',
    repo: 'demo',
    job_id: job.id,
  });
  assert.equal(followed.status, 200);

  // `none` takes a scope of the default set away.
  const narrow = new Octokit({
    baseUrl: sim.url,
    log: quietLog,
    auth: sim.actionsToken('octo', 'demo', { pull_requests: 'none', actions: 'read' }),
  });
  assert.equal(
    await status(narrow.rest.pulls.get({ owner: 'octo', repo: 'demo', pull_number: pull.number })),
    403,
  );
  assert.equal(
    (await narrow.rest.actions.getWorkflowRun({ owner: 'octo', repo: 'demo', run_id: id })).status,
    200,
  );
  assert.deepEqual(sim.violations, []);
  assert.deepEqual(sim.responseViolations, []);
});
