import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { pino } from 'pino';
import { createNodeMiddleware, Probot } from 'probot';
import { startGitHubSimulator, type GitHubSim } from '../support/github-sim/index.js';
import { makeSourceRepo, type TempDir } from './helpers.js';

let sim: GitHubSim;
let configured: TempDir;
let bare: TempDir;

function newProbot(): Probot {
  return new Probot({
    appId: sim.app.id,
    privateKey: sim.app.privateKeyPem,
    secret: sim.app.webhookSecret,
    baseUrl: sim.url,
    log: pino({ level: 'silent' }),
  });
}

before(async () => {
  sim = await startGitHubSimulator();
  configured = await makeSourceRepo({
    'README.md': '# demo\n',
    '.github/issue-agent.yml': 'maxSteps: 7\nlabels: [fix-me]\n',
  });
  bare = await makeSourceRepo({ 'README.md': '# no config\n' });
  await sim.createRepo({ owner: 'octo', name: 'configured', sourceDir: configured.dir });
  await sim.createRepo({ owner: 'octo', name: 'plain', sourceDir: bare.dir });
});

after(async () => {
  await sim.close();
  configured.cleanup();
  bare.cleanup();
});

void test("Probot's config plugin reads .github/issue-agent.yml, and falls back through the owner's .github repo", async () => {
  const octokit = await newProbot().auth(sim.installationId);
  const found = await octokit.config.get({
    owner: 'octo',
    repo: 'configured',
    path: '.github/issue-agent.yml',
  });
  assert.deepEqual(found.config, { maxSteps: 7, labels: ['fix-me'] });

  const missing = await octokit.config.get({
    owner: 'octo',
    repo: 'plain',
    path: '.github/issue-agent.yml',
    defaults: { maxSteps: 60 },
  });
  assert.deepEqual(missing.config, { maxSteps: 60 });
  assert.deepEqual(
    missing.files.map((f) => [f.repo, f.config]),
    [
      ['plain', null],
      ['.github', null],
    ],
  );
  const contents = sim.requests.filter((r) => r.operationId === 'repos/get-content');
  assert.deepEqual(
    contents.map((r) => [r.path, r.status, r.headers.accept]),
    [
      ['/repos/octo/configured/contents/.github%2Fissue-agent.yml', 200, 'application/vnd.github.v3.raw'],
      ['/repos/octo/plain/contents/.github%2Fissue-agent.yml', 404, 'application/vnd.github.v3.raw'],
      ['/repos/octo/.github/contents/.github%2Fissue-agent.yml', 404, 'application/vnd.github.v3.raw'],
    ],
  );
  assert.deepEqual(sim.violations, []);
});

void test('a Probot app receives a delivery, reads its config and reacts through the API', async () => {
  const probot = newProbot();
  const seen: unknown[] = [];
  const middleware = await createNodeMiddleware(
    (app) => {
      app.on('issue_comment.created', async (context) => {
        seen.push(await context.config('issue-agent.yml'));
        await context.octokit.rest.reactions.createForIssueComment(
          context.repo({ comment_id: context.payload.comment.id, content: 'eyes' as const }),
        );
      });
    },
    { probot },
  );
  const server: Server = createServer((req, res) => {
    void middleware(req, res, () => res.writeHead(404).end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    sim.setWebhookTarget(`http://127.0.0.1:${(server.address() as AddressInfo).port}/api/github/webhooks`);
    const issue = sim.createIssue('octo', 'configured', { title: 'Bug', body: 'Broken', author: 'alice' });
    const { commentId, delivery } = await sim.comment(
      'octo',
      'configured',
      issue.number,
      'alice',
      'please fix',
    );
    assert.equal(delivery.status, 200);
    assert.deepEqual(seen, [{ maxSteps: 7, labels: ['fix-me'] }]);
    assert.deepEqual(sim.reactions('octo', 'configured', commentId), [
      { id: sim.reactions('octo', 'configured', commentId)[0]?.id, content: 'eyes', user: sim.app.botLogin },
    ]);

    const forged = sim.buildWebhook('issue_comment', 'created', {
      owner: 'octo',
      repo: 'configured',
      issue: issue.number,
      sender: 'mallory',
      comment: { body: 'forged' },
    });
    const refused = await sim.deliver(forged, { secret: 'wrong-secret' });
    assert.equal(refused.status, 400);
    assert.equal(seen.length, 1);
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
});
