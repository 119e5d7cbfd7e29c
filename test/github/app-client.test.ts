import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { pino } from 'pino';
import { botIdentity, installationClient, InstallationTokens } from '../../src/github/app-client.js';
import { makeFixtureRepo, type FixtureRepo } from '../support/fixture-repo.js';
import { startGitHubSimulator, type GitHubSim } from '../support/github-sim/index.js';

let sim: GitHubSim;
let fixture: FixtureRepo;
let repoId: number;

before(async () => {
  fixture = makeFixtureRepo('node-calc');
  sim = await startGitHubSimulator({ tokenTtlSeconds: 2 });
  repoId = (await sim.createRepo({ owner: 'acme', name: 'calc', sourceDir: fixture.dir })).id;
});

after(async () => {
  await sim.close();
  fixture.cleanup();
});

const credentials = () => ({ appId: sim.app.id, privateKey: sim.app.privateKeyPem, baseUrl: sim.url });
const mints = () => sim.requests.filter((r) => r.path.endsWith('/access_tokens'));

test('installation tokens are scoped to the repository, reused while fresh and renewed before they expire', async () => {
  const tokens = new InstallationTokens(credentials(), sim.installationId, [repoId]);
  const before = mints().length;
  const a = await tokens.get();
  assert.match(a.token, /^ghs_/);
  assert.deepEqual(JSON.parse(mints().at(-1)?.body ?? '{}'), { repository_ids: [repoId] });
  const [b, c] = await Promise.all([tokens.get(), tokens.get()]);
  assert.equal(b.token, a.token);
  assert.equal(c.token, a.token);
  assert.equal(mints().length, before + 1, 'concurrent callers share one mint');
  // Within the last fifth of its life the token is replaced.
  const renewed = await tokens.get(a.expiresAt - 100);
  assert.notEqual(renewed.token, a.token);
  assert.deepEqual([...tokens.issued].sort(), [a.token, renewed.token].sort());
});

test('the client keeps authenticating past a token lifetime', async () => {
  const tokens = new InstallationTokens(credentials(), sim.installationId, [repoId]);
  const gh = installationClient(credentials(), tokens, pino({ level: 'silent' }));
  const first = await gh.rest.repos.get({ owner: 'acme', repo: 'calc' });
  assert.equal(first.data.default_branch, 'main');
  await delay(2200);
  const again = await gh.rest.repos.get({ owner: 'acme', repo: 'calc' });
  assert.equal(again.status, 200, 'a request after the first token expired still authenticates');
  assert.equal(tokens.issued.size, 2);
});

test('the client retries 5xx, waits out secondary rate limits, and finds the bot identity', async (t) => {
  // GitHub's token lifetime here: the waits below must not race a 2-second token.
  const sim = await startGitHubSimulator();
  t.after(() => sim.close());
  const repoId = (await sim.createRepo({ owner: 'acme', name: 'calc', sourceDir: fixture.dir })).id;
  const credentials = () => ({ appId: sim.app.id, privateKey: sim.app.privateKeyPem, baseUrl: sim.url });
  const tokens = new InstallationTokens(credentials(), sim.installationId, [repoId]);
  const gh = installationClient(credentials(), tokens, pino({ level: 'silent' }));
  sim.injectFault({ method: 'GET', path: '/repos/acme/calc', kind: 'status', status: 502, times: 1 });
  assert.equal((await gh.rest.repos.get({ owner: 'acme', repo: 'calc' })).status, 200, '5xx retried');
  sim.injectFault({
    method: 'GET',
    path: '/repos/acme/calc',
    kind: 'secondary-rate-limit',
    retryAfterSeconds: 1,
    times: 1,
  });
  assert.equal(
    (await gh.rest.repos.get({ owner: 'acme', repo: 'calc' })).status,
    200,
    'secondary limit waited out',
  );
  await assert.rejects(gh.rest.repos.get({ owner: 'acme', repo: 'nope' }), { status: 404 });
  const bot = await botIdentity(credentials(), gh);
  assert.equal(bot.login, sim.app.botLogin);
  assert.equal(bot.id, sim.app.botUserId);
  assert.equal(bot.email, `${sim.app.botUserId}+${sim.app.botLogin}@users.noreply.github.com`);
  assert.deepEqual(sim.violations, []);
});
