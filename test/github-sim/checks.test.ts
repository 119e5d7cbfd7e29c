import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { createAppAuth } from '@octokit/auth-app';
import { RequestError } from '@octokit/request-error';
import { Octokit } from '@octokit/rest';
import { createNodeMiddleware, Webhooks, type EmitterWebhookEvent } from '@octokit/webhooks';
import { startGitHubSimulator, type GitHubSim, type SimPull } from '../support/github-sim/index.js';
import { git, installationOctokit, makeSourceRepo, quietLog, type TempDir } from './helpers.js';

type CheckRunEvent = EmitterWebhookEvent<'check_run'>;

let sim: GitHubSim;
let source: TempDir;
let receiver: Server;
let octokit: Octokit;
let pull: SimPull;
/** The tip of `main`, which no pull request has as its head. */
let mainSha: string;
/** check_run deliveries as @octokit/webhooks verified, parsed and typed them. */
const received: CheckRunEvent[] = [];

const FAILING_LOG = [
  '2024-05-01T10:00:00.0000000Z ##[group]Run npm test',
  '2024-05-01T10:00:01.0000000Z > demo@1.0.0 test',
  '2024-05-01T10:00:02.0000000Z not ok 1 - add adds',
  '2024-05-01T10:00:02.0000000Z   expected: 3, actual: 4',
  '2024-05-01T10:00:03.0000000Z ##[error]Process completed with exit code 1.',
  '',
].join('\n');

/** A receiver that verifies and parses deliveries with @octokit/webhooks, as Probot does. */
async function startReceiver(): Promise<string> {
  const webhooks = new Webhooks({ secret: sim.app.webhookSecret });
  webhooks.on('check_run', (event) => {
    received.push(event);
  });
  const middleware = createNodeMiddleware(webhooks);
  receiver = createServer((req, res) => {
    void middleware(req, res, () => res.writeHead(404).end());
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/api/github/webhooks`;
}

before(async () => {
  sim = await startGitHubSimulator();
  sim.setWebhookTarget(await startReceiver());
  source = await makeSourceRepo({
    'README.md': '# demo\n',
    'src/add.js': 'export const add = (a, b) => a + b;\n',
  });
  await git(source.dir, ['checkout', '-q', '-b', 'issue-agent/fix-1']);
  await git(source.dir, ['commit', '-q', '--allow-empty', '-m', 'fix']);
  await git(source.dir, ['checkout', '-q', 'main']);
  await sim.createRepo({ owner: 'octo', name: 'demo', sourceDir: source.dir });
  mainSha = (await git(source.dir, ['rev-parse', 'main'])).trim();
  pull = await sim.openPull('octo', 'demo', {
    head: 'issue-agent/fix-1',
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

void test("addCheckRun delivers a signed check_run.completed that names the pull request at the run's head", async () => {
  const before = received.length;
  const { id, delivery } = await sim.addCheckRun('octo', 'demo', {
    headSha: pull.head.sha,
    name: 'test (20.x)',
    conclusion: 'failure',
    output: { title: '1 test failed', summary: 'add adds: expected 3, got 4' },
    annotations: [
      { path: 'src/add.js', startLine: 1, level: 'failure', message: 'expected 3, got 4', title: 'add adds' },
      { path: '.github', startLine: 1, level: 'failure', message: 'Process completed with exit code 1.' },
    ],
    log: FAILING_LOG,
  });
  // @octokit/webhooks' middleware answers 200 only for a delivery whose signature verifies.
  assert.equal(delivery.status, 200);
  assert.equal(received.length, before + 1);
  const event = received.at(-1);
  assert.ok(event !== undefined);
  assert.equal(event.name, 'check_run');
  assert.equal(event.payload.action, 'completed');
  assert.deepEqual(sim.deliveries.at(-1)?.name, 'check_run');
  assert.equal(sim.deliveries.at(-1)?.id, event.id);

  const { check_run: run, installation, repository, sender } = event.payload;
  assert.deepEqual(
    [run.id, run.name, run.head_sha, run.status, run.conclusion],
    [id, 'test (20.x)', pull.head.sha, 'completed', 'failure'],
  );
  assert.deepEqual([run.app?.id, run.app?.slug, run.app?.name], [15368, 'github-actions', 'GitHub Actions']);
  assert.equal(run.output.title, '1 test failed');
  assert.equal(run.output.annotations_count, 2);
  assert.equal(run.check_suite.head_branch, 'issue-agent/fix-1');
  assert.equal(run.check_suite.head_sha, pull.head.sha);
  assert.equal(run.check_suite.status, 'completed');
  assert.equal(run.check_suite.conclusion, 'failure');
  assert.deepEqual(
    run.pull_requests.map((p) => [
      p.number,
      p.head.ref,
      p.head.sha,
      p.base.ref,
      p.base.sha,
      p.head.repo.name,
    ]),
    [[pull.number, 'issue-agent/fix-1', pull.head.sha, 'main', pull.base.sha, 'demo']],
  );
  assert.deepEqual(run.check_suite.pull_requests, run.pull_requests);
  assert.equal(run.details_url, run.html_url);
  assert.match(run.html_url, /\/octo\/demo\/actions\/runs\/\d+\/job\/\d+$/);
  assert.equal(installation?.id, sim.installationId);
  assert.equal(repository.full_name, 'octo/demo');
  // Who triggered the workflow: here whoever opened the pull request, the bot.
  assert.equal(sender.login, sim.app.botLogin);

  const [recorded] = sim.checkRuns('octo', 'demo').filter((r) => r.id === id);
  assert.deepEqual(
    [recorded?.headBranch, recorded?.conclusion, recorded?.log, recorded?.annotations.length],
    ['issue-agent/fix-1', 'failure', FAILING_LOG, 2],
  );
  assert.deepEqual(sim.responseViolations, []);
});

void test('a run on a commit no pull request has at its head carries none; deliver: false sends nothing', async () => {
  const deliveries = sim.deliveries.length;
  const quiet = await sim.addCheckRun('octo', 'demo', {
    headSha: mainSha,
    name: 'lint',
    conclusion: 'success',
    deliver: false,
  });
  assert.equal(quiet.delivery, null);
  assert.equal(sim.deliveries.length, deliveries);

  const { delivery } = await sim.addCheckRun('octo', 'demo', {
    headSha: mainSha,
    name: 'test (20.x)',
    conclusion: 'success',
  });
  assert.equal(delivery.status, 200);
  const payload = received.at(-1)?.payload;
  assert.ok(payload !== undefined);
  assert.deepEqual(payload.check_run.pull_requests, []);
  assert.equal(payload.check_run.check_suite.head_branch, 'main');
  assert.equal(payload.sender.login, 'octo');
  await assert.rejects(
    sim.addCheckRun('octo', 'demo', { headSha: 'f'.repeat(40), name: 'x', conclusion: 'success' }),
    /no commit f{40} in octo\/demo/,
  );
  await assert.rejects(
    sim.addCheckRun('octo', 'demo', { headSha: mainSha, name: 'x' }),
    /needs a conclusion/,
  );
  assert.deepEqual(sim.responseViolations, []);
});

void test('checks/list-for-ref by sha and by branch: the latest run of each name, or all with filter=all', async () => {
  // A re-run of the failing job on the pull request's head, which passed.
  const rerun = await sim.addCheckRun('octo', 'demo', {
    headSha: pull.head.sha,
    name: 'test (20.x)',
    conclusion: 'success',
    deliver: false,
  });
  const build = await sim.addCheckRun('octo', 'demo', {
    headSha: pull.head.sha,
    name: 'build',
    conclusion: 'success',
    deliver: false,
  });

  const bySha = await octokit.rest.checks.listForRef({ owner: 'octo', repo: 'demo', ref: pull.head.sha });
  assert.equal(bySha.data.total_count, 2);
  assert.deepEqual(
    bySha.data.check_runs.map((r) => [r.id, r.name, r.conclusion]),
    [
      [build.id, 'build', 'success'],
      [rerun.id, 'test (20.x)', 'success'],
    ],
  );
  const first = bySha.data.check_runs[0];
  assert.deepEqual(
    first?.pull_requests.map((p) => p.number),
    [pull.number],
  );
  assert.equal(first.app?.slug, 'github-actions');

  const byBranch = await octokit.rest.checks.listForRef({
    owner: 'octo',
    repo: 'demo',
    ref: 'issue-agent/fix-1',
  });
  assert.deepEqual(byBranch.data, bySha.data);

  const all = await octokit.rest.checks.listForRef({
    owner: 'octo',
    repo: 'demo',
    ref: 'issue-agent/fix-1',
    filter: 'all',
    check_name: 'test (20.x)',
  });
  assert.deepEqual(
    all.data.check_runs.map((r) => r.conclusion),
    ['success', 'failure'],
  );
  const failed = await octokit.rest.checks.listForRef({
    owner: 'octo',
    repo: 'demo',
    ref: pull.head.sha,
    filter: 'all',
    status: 'completed',
    per_page: 1,
    page: 3,
  });
  assert.equal(failed.data.total_count, 3);
  assert.deepEqual(
    failed.data.check_runs.map((r) => [r.name, r.conclusion]),
    [['test (20.x)', 'failure']],
  );
  assert.match(failed.headers.link ?? '', /rel="prev"/);

  // Following Link headers, with a branch name that has a slash in it.
  const paged = await octokit.paginate(octokit.rest.checks.listForRef, {
    owner: 'octo',
    repo: 'demo',
    ref: 'issue-agent/fix-1',
    filter: 'all',
    per_page: 2,
  });
  assert.deepEqual(
    paged.map((r) => r.id),
    [build.id, ...all.data.check_runs.map((r) => r.id)],
  );

  const onMain = await octokit.rest.checks.listForRef({ owner: 'octo', repo: 'demo', ref: 'main' });
  assert.deepEqual(
    onMain.data.check_runs.map((r) => [r.name, r.pull_requests.length]),
    [
      ['test (20.x)', 0],
      ['lint', 0],
    ],
  );

  assert.equal(
    await status(octokit.rest.checks.listForRef({ owner: 'octo', repo: 'demo', ref: 'no-such-branch' })),
    422,
  );
  assert.equal(
    await status(octokit.rest.checks.listForRef({ owner: 'octo', repo: 'nope', ref: 'main' })),
    404,
  );
  assert.deepEqual(sim.violations, []);
  assert.deepEqual(sim.responseViolations, []);
});

void test('checks/get and checks/list-annotations read a run back as GitHub shows it', async () => {
  const { id } = await sim.addCheckRun('octo', 'demo', {
    headSha: pull.head.sha,
    name: 'typecheck',
    conclusion: 'failure',
    output: { title: 'tsc failed', summary: '1 error', text: 'src/add.js(1,1): error TS2322' },
    annotations: [
      {
        path: 'src/add.js',
        startLine: 1,
        endLine: 2,
        level: 'failure',
        message: 'TS2322',
        rawDetails: 'details',
      },
      { path: 'README.md', startLine: 3, level: 'warning', message: 'stale' },
    ],
    deliver: false,
  });
  const { data: run } = await octokit.rest.checks.get({ owner: 'octo', repo: 'demo', check_run_id: id });
  assert.deepEqual(
    [run.id, run.name, run.head_sha, run.status, run.conclusion, run.external_id !== ''],
    [id, 'typecheck', pull.head.sha, 'completed', 'failure', true],
  );
  assert.deepEqual(run.output, {
    title: 'tsc failed',
    summary: '1 error',
    text: 'src/add.js(1,1): error TS2322',
    annotations_count: 2,
    annotations_url: `${sim.url}/repos/octo/demo/check-runs/${id}/annotations`,
  });
  assert.equal(run.url, `${sim.url}/repos/octo/demo/check-runs/${id}`);
  assert.deepEqual(
    run.pull_requests.map((p) => p.number),
    [pull.number],
  );
  assert.equal(typeof run.check_suite?.id, 'number');

  const { data: annotations } = await octokit.rest.checks.listAnnotations({
    owner: 'octo',
    repo: 'demo',
    check_run_id: id,
  });
  assert.deepEqual(
    annotations.map((a) => [a.path, a.start_line, a.end_line, a.annotation_level, a.message, a.raw_details]),
    [
      ['src/add.js', 1, 2, 'failure', 'TS2322', 'details'],
      ['README.md', 3, 3, 'warning', 'stale', null],
    ],
  );
  assert.equal(annotations[0]?.blob_href, `${sim.url}/octo/demo/blob/${pull.head.sha}/src/add.js`);
  const second = await octokit.rest.checks.listAnnotations({
    owner: 'octo',
    repo: 'demo',
    check_run_id: id,
    per_page: 1,
    page: 2,
  });
  assert.deepEqual(
    second.data.map((a) => a.path),
    ['README.md'],
  );

  assert.equal(await status(octokit.rest.checks.get({ owner: 'octo', repo: 'demo', check_run_id: 1 })), 404);
  assert.deepEqual(sim.violations, []);
  assert.deepEqual(sim.responseViolations, []);
});

void test("a job's log downloads through GitHub's redirect to a URL that needs no credentials", async () => {
  const [failed] = sim.checkRuns('octo', 'demo').filter((r) => r.conclusion === 'failure');
  assert.ok(failed !== undefined);
  const followed = await octokit.rest.actions.downloadJobLogsForWorkflowRun({
    owner: 'octo',
    repo: 'demo',
    job_id: failed.id,
  });
  assert.equal(followed.status, 200);
  assert.equal(followed.data, FAILING_LOG);
  assert.match(followed.url, /\/_blobs\/job-logs\/[0-9a-f]{32}\.txt$/);

  const redirect = await octokit.request('GET /repos/{owner}/{repo}/actions/jobs/{job_id}/logs', {
    owner: 'octo',
    repo: 'demo',
    job_id: failed.id,
    request: { redirect: 'manual' },
  });
  assert.equal(redirect.status, 302);
  const location = redirect.headers.location;
  assert.ok(location !== undefined);
  assert.ok(location.startsWith(`${sim.url}/`));
  const plain = await fetch(location);
  assert.equal(plain.status, 200);
  assert.match(plain.headers.get('content-type') ?? '', /^text\/plain/);
  assert.equal(await plain.text(), FAILING_LOG);
  assert.equal((await fetch(`${sim.url}/_blobs/job-logs/${'0'.repeat(32)}.txt`)).status, 404);
  // The URL is good for a minute, as GitHub's is.
  const realNow = Date.now;
  const later = realNow() + 61_000;
  Date.now = () => later;
  try {
    assert.equal((await fetch(location)).status, 403);
  } finally {
    Date.now = realNow;
  }

  assert.equal(
    await status(
      octokit.rest.actions.downloadJobLogsForWorkflowRun({ owner: 'octo', repo: 'demo', job_id: 1 }),
    ),
    404,
  );
  assert.equal(
    await status(
      octokit.rest.actions.downloadJobLogsForWorkflowRun({ owner: 'octo', repo: 'nope', job_id: failed.id }),
    ),
    404,
  );
  const anonymous = new Octokit({ baseUrl: sim.url, log: quietLog });
  assert.equal(
    await status(
      anonymous.rest.actions.downloadJobLogsForWorkflowRun({
        owner: 'octo',
        repo: 'demo',
        job_id: failed.id,
      }),
    ),
    401,
  );
  assert.deepEqual(sim.violations, []);
});

void test('a token without checks and actions read is refused, as GitHub refuses an app without them', async () => {
  const app = new Octokit({
    baseUrl: sim.url,
    log: quietLog,
    authStrategy: createAppAuth,
    auth: { appId: sim.app.id, privateKey: sim.app.privateKeyPem },
  });
  const { data: narrow } = await app.rest.apps.createInstallationAccessToken({
    installation_id: sim.installationId,
    permissions: { pull_requests: 'read' },
  });
  const reader = new Octokit({ baseUrl: sim.url, log: quietLog, auth: narrow.token });
  const [run] = sim.checkRuns('octo', 'demo');
  assert.ok(run !== undefined);
  assert.equal(
    await status(reader.rest.checks.listForRef({ owner: 'octo', repo: 'demo', ref: 'main' })),
    403,
  );
  assert.equal(
    await status(reader.rest.checks.get({ owner: 'octo', repo: 'demo', check_run_id: run.id })),
    403,
  );
  assert.equal(
    await status(
      reader.rest.actions.downloadJobLogsForWorkflowRun({ owner: 'octo', repo: 'demo', job_id: run.id }),
    ),
    403,
  );
});

void test('a queued run is announced as check_run.created, and completeCheckRun delivers check_run.completed', async () => {
  const { id, delivery } = await sim.addCheckRun('octo', 'demo', {
    headSha: pull.head.sha,
    name: 'e2e',
    status: 'in_progress',
  });
  assert.equal(delivery.status, 200);
  const created = received.at(-1)?.payload;
  assert.deepEqual(
    [
      created?.action,
      created?.check_run.status,
      created?.check_run.conclusion,
      created?.check_run.completed_at,
    ],
    ['created', 'in_progress', null, null],
  );
  assert.equal(created?.check_run.check_suite.status, 'in_progress');

  const done = await sim.completeCheckRun('octo', 'demo', id, {
    conclusion: 'timed_out',
    log: 'The job running on runner GitHub Actions 2 has exceeded the maximum execution time of 360 minutes.\n',
  });
  assert.equal(done.status, 200);
  const completed = received.at(-1)?.payload;
  assert.deepEqual(
    [
      completed?.action,
      completed?.check_run.id,
      completed?.check_run.status,
      completed?.check_run.conclusion,
    ],
    ['completed', id, 'completed', 'timed_out'],
  );
  assert.equal(completed?.check_run.check_suite.conclusion, 'timed_out');
  await assert.rejects(
    sim.completeCheckRun('octo', 'demo', id, { conclusion: 'success' }),
    /already completed/,
  );
  assert.deepEqual(sim.responseViolations, []);
});
