import assert from 'node:assert/strict';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import type { BaseState } from '../../src/events/schema.js';
import { ACTION_ENTRY, runBundledAction } from '../support/action-runner.js';
import { registryDeploymentEnv } from '../support/egress-env.js';
import { makeFixtureRepo, type FixtureRepo } from '../support/fixture-repo.js';
import { startGitHubSimulator, type GitHubSim } from '../support/github-sim/index.js';
import { startModelSimulator, type ModelSimulator } from '../../src/model-sim/index.js';
import { bashThenOracle, requestText } from '../support/pipeline-fixtures.js';

const OWNER = 'acme';
const REPO = 'slugs';
const MAINTAINER = 'maria';
const MODEL_KEY = 'sk-ant-action-real-repo-0123456789abcdef';

/**
 * The Action's default sandbox (local, isolated in namespaces) on a repository shaped like a real
 * one: jest and its ~300 packages from the npm registry (package-lock.json, no config). The setup
 * phase runs `npm ci` inside the sandbox through the egress proxy; the agent phase that follows has
 * no network, and the tests run with the installed jest.
 */
describe('GitHub Action, local sandbox, a real JavaScript repository', { timeout: 600_000 }, () => {
  let fixture: FixtureRepo;
  let sim: GitHubSim;
  let model: ModelSimulator;
  const temps: string[] = [];

  before(async () => {
    assert.ok(existsSync(ACTION_ENTRY), `${ACTION_ENTRY} is missing: run npm run build:action`);
    fixture = makeFixtureRepo('node-slug');
    sim = await startGitHubSimulator();
    await sim.createRepo({ owner: OWNER, name: REPO, sourceDir: fixture.dir });
    sim.addUser({ login: MAINTAINER });
    sim.setPermission(OWNER, REPO, MAINTAINER, 'write');
    // The agent first tries the network itself: the registry through the setup's proxy variables,
    // and directly.
    model = await startModelSimulator({
      apiKey: MODEL_KEY,
      policy: bashThenOracle(
        [
          // Results are computed, so that the command's own text never matches what is asserted.
          'test -x node_modules/.bin/jest && echo "jest:$((2+3))"',
          'echo "proxyvars:$(env | grep -ci proxy)"',
          'npm view is-number version --fetch-retries=0 --fetch-timeout=3000 >/dev/null 2>&1 && echo "net:$((6*7))" || echo "net:$((6*6))"',
        ].join('; '),
        fixture.patch,
      ),
    });
  });

  after(async () => {
    await model.close();
    await sim.close();
    fixture.cleanup();
    for (const t of temps) rmSync(t, { recursive: true, force: true });
  });

  it('npm ci through the proxy in the sandbox, then resolved with no network for the agent', async () => {
    const n = sim.createIssue(OWNER, REPO, {
      title: 'Runs of dashes',
      body: 'slugify("a -- b") gives "a----b"; runs of dashes should collapse to one.',
      author: MAINTAINER,
    }).number;
    const run = await runBundledAction({
      sim,
      owner: OWNER,
      repo: REPO,
      modelUrl: model.url,
      modelKey: MODEL_KEY,
      event: 'issues',
      payload: sim.buildWebhook('issues', 'labeled', {
        owner: OWNER,
        repo: REPO,
        issue: n,
        label: 'issue-agent',
        sender: MAINTAINER,
      }).payload,
      // What a workflow on this network sets in the step's env (see test/support/egress-env.ts).
      stepEnv: await registryDeploymentEnv(),
      runId: 1,
      temps,
      timeoutMs: 480_000,
    });
    assert.equal(run.code, 0, run.stdout);
    assert.equal(run.outputs.outcome, 'resolved', run.stdout);
    const [pr] = sim.pulls(OWNER, REPO);
    assert.ok(pr !== undefined, run.stdout);
    assert.match(pr.body, /### Environment/);
    assert.match(pr.body, /npm ci/);

    const trajectory = JSON.parse(readFileSync(run.outputs.trajectory ?? '', 'utf8')) as { base: BaseState };
    const env = trajectory.base.environment;
    assert.ok(env !== undefined, 'the environment is recorded');
    assert.equal(env.setup.source, 'detected');
    assert.equal(env.setup.commands[0]?.exitCode, 0, env.setup.commands[0]?.output);
    const setupEgress = env.egress.setup;
    assert.ok(setupEgress !== null);
    assert.ok(setupEgress.requests.some((r) => r.allowed && r.host === 'registry.npmjs.org'));
    assert.deepEqual(
      setupEgress.requests.filter((r) => r.host !== 'registry.npmjs.org'),
      [],
      'the registry is the only host setup reached',
    );

    // In the agent phase, jest is installed, no proxy variable is set, and the registry is unreachable.
    const observed = model.requests.map((r) => requestText(r.body)).join('\n');
    assert.match(observed, /jest:5/, 'jest was installed by setup');
    assert.match(observed, /proxyvars:0/, 'no proxy variables in the agent phase');
    assert.match(observed, /net:36/, 'the registry is unreachable');
    assert.doesNotMatch(observed, /net:42/);
  });
});
