import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { verify } from '@octokit/webhooks-methods';
import { startGitHubSimulator, type GitHubSim, type WebhookEvent } from '../support/github-sim/index.js';
import { git, installationOctokit, makeSourceRepo, type TempDir } from './helpers.js';

interface Received {
  readonly headers: IncomingMessage['headers'];
  readonly body: string;
  readonly payload: Record<string, unknown>;
  readonly verified: boolean;
}

let sim: GitHubSim;
let source: TempDir;
let receiver: Server;
const received: Received[] = [];

/** A webhook receiver that checks X-Hub-Signature-256 with @octokit/webhooks-methods, as Probot does. */
async function startReceiver(secret: () => string): Promise<string> {
  receiver = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (chunk: Buffer) => parts.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(parts).toString('utf8');
      const signature = req.headers['x-hub-signature-256'];
      let payload: Record<string, unknown> = {};
      try {
        payload = JSON.parse(body) as Record<string, unknown>;
      } catch {
        // Malformed bodies are recorded as they came.
      }
      // verify() rejects when there is no signature at all: that is a 400, a wrong one a 401.
      verify(secret(), body, typeof signature === 'string' ? signature : '').then(
        (verified) => {
          received.push({ headers: req.headers, body, payload, verified });
          res.writeHead(verified ? 202 : 401).end(verified ? 'accepted' : 'bad signature');
        },
        () => {
          received.push({ headers: req.headers, body, payload, verified: false });
          res.writeHead(400).end('no signature');
        },
      );
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/api/github/webhooks`;
}

before(async () => {
  sim = await startGitHubSimulator({ echoWebhooks: true });
  sim.setWebhookTarget(await startReceiver(() => sim.app.webhookSecret));
  source = await makeSourceRepo({ 'README.md': '# demo\n', 'src/a.js': 'export const a = 1;\n' });
  await git(source.dir, ['checkout', '-q', '-b', 'feature']);
  await git(source.dir, ['commit', '-q', '--allow-empty', '-m', 'feature']);
  await git(source.dir, ['checkout', '-q', 'main']);
  await sim.createRepo({ owner: 'octo', name: 'demo', sourceDir: source.dir });
});

after(async () => {
  await sim.close();
  await new Promise((resolve) => receiver.close(resolve));
  source.cleanup();
});

void test('comment() stores the comment and delivers a signed issue_comment.created', async () => {
  const issue = sim.createIssue('octo', 'demo', {
    title: 'Crash on start',
    body: 'It crashes.',
    author: 'alice',
    labels: ['bug'],
  });
  const { commentId, delivery } = await sim.comment(
    'octo',
    'demo',
    issue.number,
    'alice',
    '@issue-agent-sim fix this',
  );
  assert.equal(delivery.status, 202);
  const hook = received.at(-1);
  assert.ok(hook?.verified, 'the signature verifies with the app secret');
  assert.equal(hook.headers['x-github-event'], 'issue_comment');
  assert.match(
    String(hook.headers['x-github-delivery']),
    /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/,
  );
  assert.match(String(hook.headers['user-agent']), /^GitHub-Hookshot\//);
  assert.equal(hook.headers['x-github-hook-installation-target-type'], 'integration');
  assert.equal(hook.headers['x-github-hook-installation-target-id'], String(sim.app.id));
  assert.equal(hook.headers['content-type'], 'application/json');

  const payload = hook.payload as {
    action: string;
    issue: {
      number: number;
      title: string;
      body: string;
      user: { login: string; type: string };
      labels: { name: string }[];
      pull_request?: unknown;
    };
    comment: {
      id: number;
      body: string;
      user: { login: string };
      author_association: string;
      performed_via_github_app: unknown;
    };
    repository: { full_name: string; clone_url: string };
    sender: { login: string; type: string };
    installation: { id: number };
  };
  assert.equal(payload.action, 'created');
  assert.deepEqual(
    [
      payload.issue.number,
      payload.issue.title,
      payload.issue.body,
      payload.issue.user.login,
      payload.issue.labels.map((l) => l.name),
    ],
    [issue.number, 'Crash on start', 'It crashes.', 'alice', ['bug']],
  );
  assert.equal('pull_request' in payload.issue, false);
  assert.deepEqual(
    [payload.comment.id, payload.comment.body, payload.comment.user.login],
    [commentId, '@issue-agent-sim fix this', 'alice'],
  );
  assert.equal(payload.comment.author_association, 'NONE');
  assert.equal(payload.comment.performed_via_github_app, null);
  assert.equal(payload.repository.full_name, 'octo/demo');
  assert.equal(payload.repository.clone_url, `${sim.url}/octo/demo.git`);
  assert.deepEqual([payload.sender.login, payload.sender.type], ['alice', 'User']);
  assert.equal(payload.installation.id, sim.installationId);
  assert.equal('organization' in hook.payload, false);
  assert.deepEqual(
    sim.comments('octo', 'demo', issue.number).map((c) => [c.id, c.user]),
    [[commentId, 'alice']],
  );
});

void test('a delivery signed with another secret is refused by the receiver; sendRaw sends bytes as given', async () => {
  const issue = sim.createIssue('octo', 'demo', { title: 'Sig', body: 'b', author: 'alice' });
  const hook = sim.buildWebhook('issues', 'opened', {
    owner: 'octo',
    repo: 'demo',
    issue: issue.number,
    sender: 'alice',
  });
  assert.equal((await sim.deliver(hook, { secret: 'not-the-secret' })).status, 401);
  assert.equal(received.at(-1)?.verified, false);
  const raw = await sim.sendRaw(
    { 'content-type': 'application/json', 'x-github-event': 'issues' },
    '{not json',
  );
  assert.equal(raw.status, 400);
  assert.equal(received.at(-1)?.body, '{not json');
  assert.equal(sim.deliveries.at(-1)?.id, hook.id);
});

void test('label() labels the issue and delivers issues.labeled; on a pull request, pull_request.labeled', async () => {
  const issue = sim.createIssue('octo', 'demo', { title: 'Label me', body: 'b', author: 'alice' });
  const result = await sim.label('octo', 'demo', issue.number, 'issue-agent', 'octo');
  assert.equal(result.status, 202);
  const payload = received.at(-1)?.payload as {
    action: string;
    label: { name: string };
    issue: { labels: { name: string }[] };
  };
  assert.equal(received.at(-1)?.headers['x-github-event'], 'issues');
  assert.equal(payload.action, 'labeled');
  assert.equal(payload.label.name, 'issue-agent');
  assert.deepEqual(
    payload.issue.labels.map((l) => l.name),
    ['issue-agent'],
  );
  assert.deepEqual(sim.issue('octo', 'demo', issue.number).labels, ['issue-agent']);

  const octokit = installationOctokit(sim);
  const { data: pull } = await octokit.rest.pulls.create({
    owner: 'octo',
    repo: 'demo',
    head: 'feature',
    base: 'main',
    title: 'PR',
  });
  await sim.label('octo', 'demo', pull.number, 'issue-agent', 'octo');
  const last = received.at(-1);
  assert.equal(last?.headers['x-github-event'], 'pull_request');
  assert.equal((last.payload as { number: number }).number, pull.number);
});

void test('writes through the API are echoed as the webhooks GitHub sends, with the bot as sender', async () => {
  const issue = sim.createIssue('octo', 'demo', { title: 'Echo', body: 'b', author: 'alice' });
  const octokit = installationOctokit(sim);
  const { data: comment } = await octokit.rest.issues.createComment({
    owner: 'octo',
    repo: 'demo',
    issue_number: issue.number,
    body: 'On it.',
  });
  await sim.waitFor(
    () => received.some((r) => (r.payload.comment as { id?: number } | undefined)?.id === comment.id),
    3000,
    'the echoed issue_comment.created',
  );
  const echoed = received.find((r) => (r.payload.comment as { id?: number } | undefined)?.id === comment.id);
  assert.equal((echoed?.payload.sender as { login: string; type: string }).login, sim.app.botLogin);
  assert.equal((echoed?.payload.sender as { type: string }).type, 'Bot');

  await octokit.rest.issues.updateComment({
    owner: 'octo',
    repo: 'demo',
    comment_id: comment.id,
    body: 'Done.',
  });
  await sim.waitFor(
    () => received.some((r) => r.payload.action === 'edited'),
    3000,
    'the echoed issue_comment.edited',
  );
  const edited = received.find((r) => r.payload.action === 'edited');
  assert.deepEqual(edited?.payload.changes, { body: { from: 'On it.' } });
});

void test('payloads for every supported event and action match the OpenAPI webhook schemas', async () => {
  const issue = sim.createIssue('octo', 'demo', { title: 'Shapes', body: 'b', author: 'alice' });
  const octokit = installationOctokit(sim);
  const open = await octokit.rest.pulls.list({ owner: 'octo', repo: 'demo', head: 'octo:feature' });
  const pullNumber = open.data[0]?.number;
  assert.ok(pullNumber !== undefined);
  const p = { owner: 'octo', repo: 'demo', sender: 'alice' };
  const cases: [WebhookEvent, string, Record<string, unknown>][] = [
    ['issues', 'opened', { issue: issue.number }],
    ['issues', 'edited', { issue: issue.number }],
    ['issues', 'labeled', { issue: issue.number, label: 'bug' }],
    ['issues', 'unlabeled', { issue: issue.number, label: 'bug' }],
    ['issues', 'closed', { issue: issue.number }],
    ['issues', 'reopened', { issue: issue.number }],
    ['issue_comment', 'created', { issue: issue.number, comment: { body: 'hello' } }],
    ['issue_comment', 'created', { issue: pullNumber, comment: { body: 'on the PR' } }],
    ['pull_request', 'opened', { pull: pullNumber }],
    ['pull_request', 'synchronize', { pull: pullNumber }],
    ['pull_request', 'ready_for_review', { pull: pullNumber }],
    ['pull_request', 'edited', { pull: pullNumber }],
    ['pull_request_review', 'submitted', { pull: pullNumber, comment: { body: 'Looks good' } }],
    [
      'pull_request_review_comment',
      'created',
      { pull: pullNumber, comment: { body: 'nit' }, path: 'README.md', line: 1 },
    ],
  ];
  for (const [event, action, extra] of cases) {
    const hook = sim.buildWebhook(event, action, { ...p, ...extra });
    assert.equal(hook.payload.action, action);
    assert.equal((hook.payload.installation as { id: number }).id, sim.installationId);
  }
  const onPull = sim.buildWebhook('issue_comment', 'created', {
    ...p,
    issue: pullNumber,
    comment: { body: 'again' },
  });
  assert.ok(
    (onPull.payload.issue as { pull_request?: unknown }).pull_request,
    'a comment on a PR has issue.pull_request',
  );
  const created = sim.buildWebhook('issue_comment', 'created', {
    ...p,
    issue: issue.number,
    comment: { body: 'to edit' },
  });
  const id = (created.payload.comment as { id: number }).id;
  const edited = sim.buildWebhook('issue_comment', 'edited', {
    ...p,
    issue: issue.number,
    comment: { id, body: 'edited' },
  });
  assert.deepEqual(edited.payload.changes, { body: { from: 'to edit' } });
  sim.buildWebhook('issue_comment', 'deleted', {
    ...p,
    issue: issue.number,
    comment: { id, body: 'edited' },
  });
  assert.ok(!sim.comments('octo', 'demo', issue.number).some((c) => c.id === id));

  assert.throws(
    () => sim.buildWebhook('issues', 'exploded', { ...p, issue: issue.number }),
    /issues has no action exploded/,
  );
  assert.deepEqual(sim.responseViolations, []);
});
