import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import Docker from 'dockerode';
import { oracle, startModelSimulator } from '../../src/model-sim/index.js';
import { LABEL_JOB, LABEL_SANDBOX } from '../../src/sandbox/docker/owner.js';
import { COMPOSE_IMAGES, composeMissing, startComposeStack } from '../support/compose.js';
import { makeFixtureRepo } from '../support/fixture-repo.js';
import { startGitHubSimulator } from '../support/github-sim/index.js';
import { ROOT } from '../support/pipeline.js';
import { dockerEngine, labelledContainers } from '../sandbox/docker/docker-test-support.js';

/** Set in CI: a missing engine, docker-compose or image is a failure, not a skip. */
const required = process.env.ISSUE_AGENT_REQUIRE_DOCKER === '1';
const engine = dockerEngine();
const missing = 'reason' in engine ? engine.reason : await composeMissing();

function composeContainers(project: string): string[] {
  return execFileSync(
    'docker',
    ['ps', '--all', '--quiet', '--filter', `label=com.docker.compose.project=${project}`],
    { encoding: 'utf8' },
  )
    .split('\n')
    .filter((l) => l !== '');
}

test(
  "the README's demo flow against compose.yaml: the production image (App and a worker, as its non-root user), Redis and PostgreSQL built offline, brought up, a labelled issue becomes a pull request, the run served from PostgreSQL; everything taken down after",
  { timeout: 900_000, skip: missing !== null && !required ? missing : false },
  async () => {
    assert.equal(missing, null, `ISSUE_AGENT_REQUIRE_DOCKER=1 but ${missing ?? ''}`);
    const user = execFileSync(
      'docker',
      ['image', 'inspect', '--format', '{{.Config.User}}', COMPOSE_IMAGES.app],
      {
        encoding: 'utf8',
      },
    );
    assert.equal(user.trim(), 'issue-agent');
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', join(ROOT, 'scripts', 'demo.ts'), '--compose'],
      {
        cwd: ROOT,
        env: { ...process.env, ANTHROPIC_API_KEY: '' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    assert.equal(code, 0, out);
    assert.match(out, /pull request #\d+: "Fix #1: average\(\) rounds/);
    assert.match(out, /run r\d+-i1-\w+: \w+, outcome resolved, \d+ steps \(from PostgreSQL\)/);
    const project = /compose: project (\w+) up/.exec(out)?.[1];
    assert.ok(project, out);
    // Taken down: no container of the project is left, nor a volume.
    assert.deepEqual(composeContainers(project), []);
    const volumes = execFileSync('docker', ['volume', 'ls', '--quiet', '--filter', `name=${project}_`], {
      encoding: 'utf8',
    });
    assert.equal(volumes.trim(), '');
  },
);

test(
  'compose, a second worker container started while the first runs a job: it does not take the running sandbox for an orphan (both have the same hostname, and their PIDs mean nothing outside their containers), and the job ends in its pull request',
  { timeout: 900_000, skip: missing !== null && !required ? missing : false },
  async (t) => {
    assert.equal(missing, null, `ISSUE_AGENT_REQUIRE_DOCKER=1 but ${missing ?? ''}`);
    const fixture = makeFixtureRepo('node-calc');
    const sim = await startGitHubSimulator();
    const key = 'sk-ant-compose-test-0000';
    // Slow enough answers that the job is still running when the second worker starts.
    const model = await startModelSimulator({ policy: oracle(fixture.patch), apiKey: key, latencyMs: 2500 });
    t.after(async () => {
      await model.close();
      await sim.close();
      fixture.cleanup();
    });
    await sim.createRepo({ owner: 'octo-org', name: 'calc', sourceDir: fixture.dir });
    sim.addUser({ login: 'maintainer' });
    sim.setPermission('octo-org', 'calc', 'maintainer', 'maintain');
    const stack = await startComposeStack({ sim, modelUrl: model.url, modelKey: key, workers: 1 });
    t.after(() => stack.stop());
    const docker = new Docker();
    const before = new Set(await labelledContainers(docker));
    const issue = sim.createIssue('octo-org', 'calc', {
      title: 'average() rounds 1.666 down to 1.66',
      body: 'average([1, 2, 2]) returns 1.66; it should round to the nearest hundredth: 1.67.',
      author: 'maintainer',
    });
    await sim.label('octo-org', 'calc', issue.number, 'agent', 'maintainer');
    // The first worker's sandbox: the container labelled with the job the stack's run server lists.
    let sandbox: string | undefined;
    await sim.waitFor(
      async () => {
        type Listed = { runs?: { id: string }[] };
        const runs = await fetch(`${stack.appUrl}/api/runs`, {
          headers: { authorization: `Bearer ${stack.adminToken}` },
        })
          .then((r) => r.json() as Promise<Listed>)
          .catch((): Listed => ({ runs: [] }));
        const job = runs.runs?.[0]?.id;
        if (job === undefined) return false;
        const list = await docker.listContainers({
          filters: { label: [`${LABEL_SANDBOX}=1`, `${LABEL_JOB}=${job}`] },
        });
        sandbox = list.find((c) => !before.has(c.Id))?.Id;
        return sandbox !== undefined;
      },
      120_000,
      "the worker's sandbox",
    );
    assert.ok(sandbox);
    await stack.compose(['up', '--detach', '--no-recreate', '--scale', 'worker=2']);
    await sim.waitFor(async () => (await stack.workersReady()) >= 2, 120_000, 'the second worker');
    // It started, reaped what it judged orphaned, and the first worker's sandbox is still there.
    assert.equal(sim.pulls('octo-org', 'calc').length, 0, 'the job was still running when it started');
    const running = await docker.getContainer(sandbox).inspect();
    assert.equal(running.State.Running, true);
    await sim.waitFor(() => sim.pulls('octo-org', 'calc').length === 1, 300_000, 'the pull request');
    assert.doesNotMatch(await stack.logs(), new RegExp(`reaped sandboxes[^\\n]*${sandbox}`));
  },
);
