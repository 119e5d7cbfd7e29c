import assert from 'node:assert/strict';
import { after } from 'node:test';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { hang, reply } from '../../src/model-sim/index.js';
import { filesUnder } from '../support/fixture-repo.js';
import { createConfiguredRepo, startStack, type Stack } from '../support/pipeline.js';
import { bashThenOracle, requestText } from '../support/pipeline-fixtures.js';
import { redisSkipReason } from '../support/redis-server.js';
import { containerRuns, dockerTest } from '../sandbox/docker/docker-test-support.js';

const MODEL_KEY = 'sk-ant-docker-canary-0123456789abcdef';

/**
 * The production configuration: the worker runs the agent in a Docker sandbox (network none). The
 * agent's first command lists the container's environment and the workspace's git config; the
 * canaries (installation tokens, model key, webhook secret) must appear in none of it, nor anywhere
 * the App wrote to.
 */
dockerTest(
  'App pipeline with the Docker sandbox: a label → a PR; no secret reaches the container or anything posted',
  async (docker, t) => {
    const skip = redisSkipReason();
    if (skip !== false) {
      t.skip(skip);
      return;
    }
    const stack = await startStack({
      owner: 'acme',
      repo: 'calc',
      maintainer: { login: 'maria', permission: 'maintain' },
      modelKey: MODEL_KEY,
      sandbox: 'docker',
      // The worker keeps a warm container of the image this repository needs (no setup: it has no
      // dependencies), so the job starts in one.
      env: { ISSUE_AGENT_WARM_POOL: 'issue-agent/node:22=1' },
      policy: (fixture) =>
        bashThenOracle(
          'id -u; env; cat /proc/1/environ | tr "\\0" "\\n"; cat .git/config; ls /sys/class/net',
          fixture.patch,
        ),
    });
    try {
      const { sim, model, pipeline } = stack;
      const n = sim.createIssue('acme', 'calc', {
        title: 'Average rounds wrong',
        body: '1.67 expected',
        author: 'maria',
      }).number;
      await sim.label('acme', 'calc', n, 'agent', 'maria');
      await sim.waitFor(
        () => sim.pulls('acme', 'calc').length > 0,
        240_000,
        () => `a PR\n${pipeline.logs()}`,
      );
      const pr = sim.pulls('acme', 'calc')[0];
      assert.ok(pr);
      assert.equal(pr.draft, false);

      const jobs = join(pipeline.workDir, 'work', 'jobs');
      const [job] = readdirSync(jobs);
      assert.ok(job);
      const base = JSON.parse(readFileSync(join(jobs, job, 'trajectory', 'base_state.json'), 'utf8')) as {
        sandbox: string;
      };
      assert.equal(base.sandbox, 'docker');
      assert.match(pipeline.logs(), /"msg":"sandbox from the warm pool"/);
      const trajectory = filesUnder(join(jobs, job, 'trajectory'))
        .map((f) => readFileSync(f, 'utf8'))
        .join('\n');
      assert.match(trajectory, /PATH=/, "the container's environment was listed");
      assert.doesNotMatch(trajectory, /\beth\d|\bens\d/, 'no network interface but lo');

      const tokens = new Set<string>();
      for (const r of sim.requests) {
        const m = /^(?:token|bearer) (ghs_\w+)$/i.exec(r.headers.authorization ?? '');
        if (m?.[1] !== undefined) tokens.add(m[1]);
      }
      assert.ok(tokens.size > 0);
      const posted = sim.requests.map((r) => r.body).join('\n');
      const modelSaw = model.requests.map((r) => requestText(r.body)).join('\n');
      for (const secret of [...tokens, MODEL_KEY, sim.app.webhookSecret]) {
        assert.ok(!trajectory.includes(secret), 'secret in the trajectory (container env or git config)');
        assert.ok(!posted.includes(secret), 'secret posted to GitHub');
        assert.ok(!modelSaw.includes(secret), 'secret sent to the model');
      }
      // No sandbox container outlives the job.
      const left = await docker.listContainers({ all: true, filters: { label: [`issue-agent.job=${job}`] } });
      assert.equal(left.length, 0);

      // The repository's next job starts in the container the pool prepared with its checkout.
      const n2 = sim.createIssue('acme', 'calc', {
        title: 'Average rounds wrong again',
        body: '1.67 expected',
        author: 'maria',
      }).number;
      await sim.label('acme', 'calc', n2, 'agent', 'maria');
      await sim.waitFor(
        () => sim.pulls('acme', 'calc').length > 1,
        240_000,
        () => `a second PR\n${pipeline.logs()}`,
      );
      assert.match(
        pipeline.logs(),
        /"repository":"installation-\d+\/repo-\d+","msg":"warm pool: prepared container"/,
      );
    } finally {
      await stack.stop();
    }
  },
  { timeout: 400_000 },
);

/**
 * The two `@agent stop` tests share one stack (nothing in either needs a fresh one): the model hangs
 * on its second turn (the first test's job); the second test's repository, calc-setup, has a setup
 * that hangs, so its job never reaches the model.
 */
let hung = false;
let stopStack: Promise<Stack> | undefined;
function stopTestsStack(): Promise<Stack> {
  stopStack ??= startStack({
    owner: 'acme',
    repo: 'calc',
    maintainer: { login: 'maria', permission: 'write' },
    modelKey: MODEL_KEY,
    sandbox: 'docker',
    policy: () => (request) => {
      const assistants = request.messages.filter((m) => m.role === 'assistant').length;
      if (assistants === 0) {
        return reply().text('Looking.').tool('bash', { command: 'ls' }, { id: 'toolu_docker_stop_0001' });
      }
      hung = true;
      return hang();
    },
  });
  return stopStack;
}
after(async () => {
  if (stopStack !== undefined) await (await stopStack.catch(() => null))?.stop();
});

dockerTest(
  '`@agent stop` while the model hangs, Docker sandbox: cancelled within seconds, the container is gone, no PR',
  async (docker, t) => {
    const skip = redisSkipReason();
    if (skip !== false) {
      t.skip(skip);
      return;
    }
    const stack = await stopTestsStack();
    const { sim, pipeline } = stack;
    const n = sim.createIssue('acme', 'calc', { title: 'Stop me', body: 'x', author: 'maria' }).number;
    await sim.label('acme', 'calc', n, 'agent', 'maria');
    await sim.waitFor(
      () => hung,
      120_000,
      () => `the model to hang\n${pipeline.logs()}`,
    );
    const [job] = readdirSync(join(pipeline.workDir, 'work', 'jobs'));
    assert.ok(job);
    const running = await docker.listContainers({
      all: true,
      filters: { label: [`issue-agent.job=${job}`] },
    });
    assert.equal(running.length, 1, 'the job runs in a container');
    const t0 = Date.now();
    await sim.comment('acme', 'calc', n, 'maria', '@agent stop');
    const progress = () =>
      sim.comments('acme', 'calc', n).find((c) => c.user === sim.app.botLogin)?.body ?? '';
    await sim.waitFor(
      () => /cancel/i.test(progress()) && progress().includes('maria'),
      30_000,
      () => `the cancel\n${pipeline.logs()}`,
    );
    assert.ok(Date.now() - t0 < 15_000);
    await sim.waitFor(
      async () =>
        (await docker.listContainers({ all: true, filters: { label: [`issue-agent.job=${job}`] } }))
          .length === 0,
      15_000,
      'the container to be removed',
    );
    assert.equal(sim.pulls('acme', 'calc').length, 0);
  },
  { timeout: 300_000 },
);

dockerTest(
  '`@agent stop` during a setup that hangs, Docker sandbox: setup ends within seconds, the container is gone, no model call',
  async (docker, t) => {
    const skip = redisSkipReason();
    if (skip !== false) {
      t.skip(skip);
      return;
    }
    const sleep = `sleep ${String(600 + Math.floor(Math.random() * 99_000))}`;
    const stack = await stopTestsStack();
    const { sim, model, pipeline } = stack;
    await createConfiguredRepo(
      sim,
      { owner: 'acme', name: 'calc-setup', writer: 'maria' },
      `setup:\n  - ${sleep}\n`,
    );
    const jobs = join(pipeline.workDir, 'work', 'jobs');
    // The first test's job (the stack is shared) is not this one's; nor are its model calls.
    const earlier = new Set(existsSync(jobs) ? readdirSync(jobs) : []);
    const modelCalls = model.requests.length;
    const n = sim.createIssue('acme', 'calc-setup', {
      title: 'Stop its setup',
      body: 'x',
      author: 'maria',
    }).number;
    await sim.label('acme', 'calc-setup', n, 'agent', 'maria');
    const containers = async () => {
      const [job] = readdirSync(jobs).filter((name) => !name.includes('-verify') && !earlier.has(name));
      return job === undefined
        ? []
        : docker.listContainers({ all: true, filters: { label: [`issue-agent.job=${job}`] } });
    };
    // Ready: the setup command runs in the job's container.
    await sim.waitFor(
      async () => {
        const [c] = await containers().catch(() => []);
        if (c === undefined) return false;
        return containerRuns(docker, c.Id, sleep);
      },
      180_000,
      () => `the setup command to run\n${pipeline.logs()}`,
    );
    const t0 = Date.now();
    await sim.comment('acme', 'calc-setup', n, 'maria', '@agent stop');
    const progress = () =>
      sim.comments('acme', 'calc-setup', n).find((c) => c.user === sim.app.botLogin)?.body ?? '';
    await sim.waitFor(
      async () => progress().includes('**Cancelled** by `maria`') && (await containers()).length === 0,
      30_000,
      () => `the cancel\n${progress()}\n${pipeline.logs()}`,
    );
    const ms = Date.now() - t0;
    console.log(`# @agent stop during setup: cancelled and removed in ${ms} ms`);
    // The stop is polled (500 ms) after the comment's round trip through intake.
    assert.ok(ms < 10_000, `${ms} ms`);
    assert.equal(model.requests.length - modelCalls, 0, 'the agent never started');
    assert.doesNotMatch(progress(), /fail/i, progress());
    assert.equal(sim.pulls('acme', 'calc-setup').length, 0);
  },
  { timeout: 300_000 },
);
