/**
 * Contract: check runs an App makes, as GitHub's documentation describes them
 * (https://docs.github.com/rest/checks/runs): checks/create and checks/update with the App's
 * installation token, `checks: write` needed, a conclusion completing a run, annotations added on
 * each update, listing attributed to the App that made the run (not GitHub Actions).
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import type { Octokit } from '@octokit/rest';
import { createNodeMiddleware, Webhooks } from '@octokit/webhooks';
import { startGitHubSimulator, type GitHubSim } from '../support/github-sim/index.js';
import { git, installationOctokit, makeSourceRepo, status, type TempDir } from './helpers.js';

let sim: GitHubSim;
let source: TempDir;
let octokit: Octokit;
let sha: string;
const repo = { owner: 'octo', repo: 'checks' };

before(async () => {
  // The App asks for checks: write (app.yml's default is read); the test chooses, as a registration would.
  sim = await startGitHubSimulator({ appPermissions: { checks: 'write' } });
  source = await makeSourceRepo({ 'src/a.js': 'export const a = 1;\n' });
  await sim.createRepo({ owner: 'octo', name: 'checks', sourceDir: source.dir });
  sha = (await git(source.dir, ['rev-parse', 'HEAD'])).trim();
  octokit = installationOctokit(sim);
});

after(async () => {
  await sim.close();
  source.cleanup();
});

test('checks/create makes a queued run attributed to the App; checks/update completes it and adds annotations', async () => {
  const created = await octokit.rest.checks.create({
    ...repo,
    name: 'issue-agent / verify',
    head_sha: sha,
    external_id: 'job-1',
    status: 'in_progress',
    output: { title: 'Running', summary: 'the tests are running' },
  });
  assert.equal(created.status, 201);
  assert.equal(created.data.status, 'in_progress');
  assert.equal(created.data.conclusion, null);
  assert.equal(created.data.external_id, 'job-1');
  assert.deepEqual(
    { id: created.data.app?.id, slug: created.data.app?.slug },
    { id: sim.app.id, slug: sim.app.slug },
  );

  const annotation = {
    path: 'src/a.js',
    start_line: 1,
    end_line: 1,
    annotation_level: 'failure' as const,
    message: 'a is wrong',
  };
  const updated = await octokit.rest.checks.update({
    ...repo,
    check_run_id: created.data.id,
    conclusion: 'failure',
    output: { title: 'Failed', summary: '1 test failed', annotations: [annotation] },
  });
  // A conclusion sets the status to completed (GitHub's documentation of `conclusion`).
  assert.equal(updated.data.status, 'completed');
  assert.equal(updated.data.conclusion, 'failure');
  assert.notEqual(updated.data.completed_at, null);
  assert.equal(updated.data.output.title, 'Failed');
  assert.equal(updated.data.output.annotations_count, 1);

  await octokit.rest.checks.update({
    ...repo,
    check_run_id: created.data.id,
    output: {
      title: 'Failed',
      summary: '1 test failed',
      annotations: [{ ...annotation, message: 'second' }],
    },
  });
  const annotations = await octokit.rest.checks.listAnnotations({ ...repo, check_run_id: created.data.id });
  assert.deepEqual(
    annotations.data.map((a) => a.message),
    ['a is wrong', 'second'],
    'annotations of each update are added to the earlier ones',
  );

  const listed = await octokit.rest.checks.listForRef({ ...repo, ref: sha });
  assert.equal(listed.data.total_count, 1);
  assert.equal(listed.data.check_runs[0]?.app?.slug, sim.app.slug);
  const byApp = await octokit.rest.checks.listForRef({ ...repo, ref: sha, app_id: sim.app.id });
  assert.equal(byApp.data.total_count, 1);
  const byActions = await octokit.rest.checks.listForRef({ ...repo, ref: sha, app_id: 15368 });
  assert.equal(byActions.data.total_count, 0, 'not attributed to GitHub Actions');
  assert.deepEqual(sim.violations, []);
  assert.deepEqual(sim.responseViolations, []);
});

test('checks/create refuses an unknown sha (422) and a completed status without a conclusion (422)', async () => {
  assert.equal(
    await status(octokit.rest.checks.create({ ...repo, name: 'x', head_sha: 'f'.repeat(40) })),
    422,
  );
  assert.equal(
    await status(octokit.rest.checks.create({ ...repo, name: 'x', head_sha: sha, status: 'completed' })),
    422,
  );
  // The request validation of GitHub's description: `name` is required.
  assert.equal(
    await status(
      octokit.request('POST /repos/{owner}/{repo}/check-runs', { ...repo, head_sha: sha } as never),
    ),
    422,
  );
});

test("an App with checks: read cannot create check runs; GitHub Actions' runs are not the App's to update", async () => {
  const readOnly = await startGitHubSimulator();
  try {
    await readOnly.createRepo({ owner: 'octo', name: 'checks', sourceDir: source.dir });
    const client = installationOctokit(readOnly);
    assert.equal(await status(client.rest.checks.create({ ...repo, name: 'x', head_sha: sha })), 403);
    const { id } = await readOnly.addCheckRun('octo', 'checks', {
      headSha: sha,
      name: 'ci',
      status: 'in_progress',
      deliver: false,
    });
    const listed = await client.rest.checks.listForRef({ ...repo, ref: sha });
    assert.equal(listed.data.check_runs[0]?.app?.slug, 'github-actions');
    assert.equal(listed.data.check_runs.at(0)?.id, id);
  } finally {
    await readOnly.close();
  }
  const { id } = await sim.addCheckRun('octo', 'checks', {
    headSha: sha,
    name: 'ci',
    status: 'in_progress',
    deliver: false,
  });
  assert.equal(
    await status(octokit.rest.checks.update({ ...repo, check_run_id: id, conclusion: 'success' })),
    403,
  );
});

test('with echoWebhooks the App receives check_run created and completed about its own run, as GitHub sends them', async () => {
  const events: { action: string; app: number | undefined; status: string }[] = [];
  const echoing = await startGitHubSimulator({ appPermissions: { checks: 'write' }, echoWebhooks: true });
  const webhooks = new Webhooks({ secret: echoing.app.webhookSecret });
  webhooks.on('check_run', (event) => {
    events.push({
      action: event.payload.action,
      app: event.payload.check_run.app?.id,
      status: event.payload.check_run.status,
    });
  });
  const middleware = createNodeMiddleware(webhooks);
  const receiver = createServer((req, res) => {
    void middleware(req, res, () => res.writeHead(404).end());
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  echoing.setWebhookTarget(
    `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/api/github/webhooks`,
  );
  try {
    await echoing.createRepo({ owner: 'octo', name: 'checks', sourceDir: source.dir });
    const client = installationOctokit(echoing);
    const run = await client.rest.checks.create({
      ...repo,
      name: 'verify',
      head_sha: sha,
      status: 'in_progress',
    });
    await client.rest.checks.update({ ...repo, check_run_id: run.data.id, conclusion: 'success' });
    await echoing.waitFor(() => events.length === 2, 10_000, 'two check_run deliveries');
    assert.deepEqual(events, [
      { action: 'created', app: echoing.app.id, status: 'in_progress' },
      { action: 'completed', app: echoing.app.id, status: 'completed' },
    ]);
    assert.deepEqual(echoing.responseViolations, []);
  } finally {
    await echoing.close();
    await new Promise((resolve) => receiver.close(resolve));
  }
});
