import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { retry } from '@octokit/plugin-retry';
import { throttling } from '@octokit/plugin-throttling';
import { Octokit } from '@octokit/rest';
import { startGitHubSimulator, type GitHubSim } from '../support/github-sim/index.js';
import { installationToken, makeSourceRepo, quietLog, type TempDir } from './helpers.js';

let sim: GitHubSim;
let source: TempDir;
let issueNumber: number;

before(async () => {
  sim = await startGitHubSimulator();
  source = await makeSourceRepo({ 'README.md': '# demo\n' });
  await sim.createRepo({ owner: 'octo', name: 'demo', sourceDir: source.dir });
  issueNumber = sim.createIssue('octo', 'demo', { title: 'Faults', body: 'b', author: 'alice' }).number;
});

after(async () => {
  await sim.close();
  source.cleanup();
});

void test('a 502 is retried by @octokit/plugin-retry and the retry succeeds', async () => {
  const RetryingOctokit = Octokit.plugin(retry);
  const client = new RetryingOctokit({
    baseUrl: sim.url,
    retry: { retryAfterBaseValue: 10 },
    auth: (await installationToken(sim)).token,
    log: quietLog,
  });
  sim.injectFault({
    method: 'GET',
    path: '/repos/{owner}/{repo}/issues/{issue_number}',
    kind: 'status',
    status: 502,
    times: 2,
  });
  const { data } = await client.rest.issues.get({ owner: 'octo', repo: 'demo', issue_number: issueNumber });
  assert.equal(data.number, issueNumber);
  const statuses = sim.requests.filter((r) => r.operationId === 'issues/get').map((r) => r.status);
  assert.deepEqual(statuses, [502, 502, 200]);
});

void test('a secondary rate limit reaches plugin-throttling as one, with retry-after', async () => {
  const { token } = await installationToken(sim);
  const seen: { retryAfter: number; route: string }[] = [];
  const ThrottledOctokit = Octokit.plugin(throttling);
  const client = new ThrottledOctokit({
    baseUrl: sim.url,
    auth: token,
    log: quietLog,
    throttle: {
      retryAfterBaseValue: 1,
      onSecondaryRateLimit: (retryAfter, options) => {
        seen.push({ retryAfter, route: `${options.method} ${options.url}` });
        return seen.length === 1;
      },
      onRateLimit: () => false,
    },
  });
  // A read: plugin-throttling spaces writes that notify (comments) 3 s apart, process-wide.
  sim.injectFault({ method: 'GET', path: /\/comments$/, kind: 'secondary-rate-limit', retryAfterSeconds: 7 });
  const { data } = await client.rest.issues.listComments({
    owner: 'octo',
    repo: 'demo',
    issue_number: issueNumber,
  });
  assert.deepEqual(data, []);
  assert.deepEqual(seen, [
    { retryAfter: 7, route: 'GET /repos/{owner}/{repo}/issues/{issue_number}/comments' },
  ]);
  const attempts = sim.requests.filter((r) => r.operationId === 'issues/list-comments');
  assert.deepEqual(
    attempts.map((r) => r.status),
    [403, 200],
  );
});
