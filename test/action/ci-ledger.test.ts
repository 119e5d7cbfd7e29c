import assert from 'node:assert/strict';
import { createAppAuth } from '@octokit/auth-app';
import { request } from '@octokit/request';
import { pino } from 'pino';
import { after, before, describe, it } from 'node:test';
import { commentCiLedger } from '../../src/action/ci-ledger.js';
import { botUser, tokenClient, type GitHubClient } from '../../src/github/app-client.js';
import { Redactor } from '../../src/publish/redact.js';
import { makeFixtureRepo } from '../support/fixture-repo.js';
import { startGitHubSimulator, type GitHubSim } from '../support/github-sim/index.js';

const OWNER = 'acme';
const REPO = 'calc';
const HEAD = 'c'.repeat(40);

/**
 * The Action's memory of CI rounds lives in its own marked comments on the PR (GitHub simulator,
 * real Octokit): two workflow runs racing for one head start one round; a re-run of the same
 * workflow run gets its round back; the count goes on across heads and stops at the maximum.
 */
describe('Action CI ledger (comments on the PR)', () => {
  let sim: GitHubSim;
  let pr: number;
  let bot: { id: number };
  const clients: GitHubClient[] = [];
  const audience = { redactor: new Redactor([]), trustedHosts: [] as string[] };

  before(async () => {
    const fixture = makeFixtureRepo('node-calc');
    sim = await startGitHubSimulator();
    await sim.createRepo({ owner: OWNER, name: REPO, sourceDir: fixture.dir });
    fixture.cleanup();
    pr = sim.createIssue(OWNER, REPO, { title: 'PR stand-in', body: 'x', author: OWNER }).number;
    const auth = createAppAuth({
      appId: sim.app.id,
      privateKey: sim.app.privateKeyPem,
      request: request.defaults({ baseUrl: sim.url }),
    });
    const { token } = await auth({ type: 'installation', installationId: sim.installationId });
    // One client per simulated workflow run: separate write lanes, so their writes really interleave.
    for (const lane of ['a', 'b', 'c']) {
      clients.push(tokenClient(sim.url, () => Promise.resolve(token), pino({ level: 'silent' }), { lane }));
    }
    bot = await botUser(clients[0] as GitHubClient, sim.app.botLogin);
  });
  after(async () => {
    await sim.close();
  });

  const ledger = (i: number, run: string) =>
    commentCiLedger(
      clients[i] as GitHubClient,
      { owner: OWNER, repo: REPO },
      pr,
      bot,
      { id: run, url: 'x' },
      audience,
    );
  const markers = () =>
    sim.comments(OWNER, REPO, pr).filter((c) => c.body.startsWith('<!-- issue-agent:ciround'));

  it('two runs racing for one head: one round, the loser’s comment deleted; a re-run reuses the round', async () => {
    const results = await Promise.all([
      ledger(0, '101').round(HEAD, 2, ['test']),
      ledger(1, '102').round(HEAD, 2, ['lint']),
    ]);
    const kinds = results.map((r) => r.kind).sort();
    assert.deepEqual(kinds, ['round', 'taken']);
    assert.equal(markers().length, 1, 'one claim left on the PR');
    const winner = results[0].kind === 'round' ? '101' : '102';
    const loser = winner === '101' ? '102' : '101';
    assert.equal(await ledger(2, loser).claimHead(HEAD), false, 'the head is decided for others');
    assert.equal(await ledger(2, winner).claimHead(HEAD), true, 'but not for a re-run of the winner');
    assert.deepEqual(await ledger(2, winner).round(HEAD, 2, ['test']), { kind: 'round', round: 1 });
    assert.equal(markers().length, 1, 'a re-run posts no second claim');
    // With one round allowed, a run that comes after the claim (it read the comments before) finds
    // the head taken, not the rounds used up: nothing is said.
    assert.deepEqual(await ledger(2, '103').round(HEAD, 1, ['lint']), { kind: 'taken' });
    assert.equal(markers().length, 1);
  });

  it('rounds count across heads up to the maximum; a kind of "no round" is unsaid until a marked comment says it', async () => {
    assert.deepEqual(await ledger(0, '201').round('d'.repeat(40), 2, ['test']), { kind: 'round', round: 2 });
    assert.deepEqual(await ledger(0, '301').round('e'.repeat(40), 2, ['test']), { kind: 'used' });
    const said = await ledger(0, '301').unsaid('rounds-used');
    assert.equal(said.say, true);
    await (clients[0] as GitHubClient).rest.issues.createComment({
      owner: OWNER,
      repo: REPO,
      issue_number: pr,
      body: `${said.marker}\nCI still fails.`,
    });
    assert.equal((await ledger(1, '401').unsaid('rounds-used')).say, false);
    assert.equal((await ledger(1, '401').unsaid('pre-existing:lint')).say, true);
  });
});
