import assert from 'node:assert/strict';
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { oracle } from '../../src/model-sim/index.js';
import { readJobRun, startStack } from '../support/pipeline.js';
import { buildWheels, startPackageIndex } from '../support/pypi-index.js';
import { redisSkipReason } from '../support/redis-server.js';
import { dockerTest } from '../sandbox/docker/docker-test-support.js';

/**
 * Must-show 2 of the environments issue, through the App: a Python repository with no config whose
 * code needs one third-party package and whose tests need another (requirements.txt,
 * requirements-dev.txt) resolves. The deployment points pip at its own package index
 * (ISSUE_AGENT_PIP_INDEX_URL, a PEP 503 index of wheels this test builds, on the host's loopback:
 * allowed by ISSUE_AGENT_EGRESS_ALLOW_CIDRS, on its own port). The model applies the known fix.
 */
dockerTest(
  'App pipeline, Docker, a Python repository with no config: the Python image, a virtualenv, its packages from the deployment’s index, resolved',
  async (_docker, t) => {
    const skip = redisSkipReason();
    if (skip !== false) {
      t.skip(skip);
      return;
    }
    const wheels = await buildWheels(['plurals', 'frozenclock']);
    t.after(() => {
      rmSync(join(wheels, '..'), { recursive: true, force: true });
    });
    const index = await startPackageIndex(wheels);
    t.after(() => index.close());
    const stack = await startStack({
      owner: 'acme',
      repo: 'feed',
      fixture: 'python-durations',
      maintainer: { login: 'maria', permission: 'maintain' },
      modelKey: 'sk-ant-real-python-canary-0123456789abcdef',
      sandbox: 'docker',
      env: { ISSUE_AGENT_PIP_INDEX_URL: index.url, ISSUE_AGENT_EGRESS_ALLOW_CIDRS: '127.0.0.1/32' },
      policy: (fixture) => oracle(fixture.patch),
    });
    try {
      const { sim, pipeline } = stack;
      const n = sim.createIssue('acme', 'feed', {
        title: '"1 hours ago" in the activity feed',
        body: 'An event an hour old shows as "1 hours ago"; it should say "1 hour ago".',
        author: 'maria',
      }).number;
      await sim.label('acme', 'feed', n, 'agent', 'maria');
      await sim.waitFor(
        () => sim.pulls('acme', 'feed').length > 0,
        360_000,
        () => `a PR\n${pipeline.logs()}`,
      );
      const pr = sim.pulls('acme', 'feed')[0];
      assert.ok(pr);

      const [job] = readdirSync(join(pipeline.workDir, 'work', 'jobs'));
      assert.ok(job);
      const { base, events } = readJobRun(stack, job);
      const env = base.environment;
      assert.ok(env !== undefined);
      assert.match(env.image, /^issue-agent\/python:/);
      assert.equal(env.setup.source, 'detected');
      assert.deepEqual(
        env.setup.commands.map((c) => [c.command, c.exitCode]),
        [
          ['python3 -m venv --system-site-packages .venv', 0],
          ['.venv/bin/pip install -r requirements.txt -r requirements-dev.txt', 0],
        ],
      );
      // Both packages came from the deployment's index, through the proxy, and nothing else did.
      assert.ok(index.requests.includes('/simple/plurals/'));
      assert.ok(index.requests.includes('/simple/frozenclock/'));
      const egress = env.egress.setup;
      assert.ok(egress !== null);
      assert.deepEqual([...new Set(egress.requests.map((r) => r.host))], ['127.0.0.1']);
      assert.deepEqual(egress.denied, []);

      const runs = events.filter((e) => e.kind === 'test_run');
      const baseline = runs.find((e) => e.phase === 'baseline');
      const final = runs.find((e) => e.phase === 'final');
      assert.ok(baseline !== undefined && final !== undefined);
      assert.deepEqual(baseline.summary.failedNames, ['tests/test_ago.py::test_one_hour']);
      assert.equal(baseline.summary.passed, 6);
      assert.deepEqual(final.summary.failedNames, []);
      assert.equal(final.summary.passed, 7);

      const end = events.find((e) => e.kind === 'outcome');
      assert.ok(end?.kind === 'outcome');
      assert.equal(end.outcome, 'resolved', end.reason);
      assert.equal(pr.draft, false);
      assert.match(pr.body, /### Environment/);
      assert.match(pr.body, /pip install -r requirements\.txt -r requirements-dev\.txt/);
      assert.match(
        pr.body,
        /to `127\.0\.0\.1` \(allowlist: `pypi\.org`, `files\.pythonhosted\.org`, `127\.0\.0\.1`\); 0 refused/,
      );
      // The change is the fix alone: the virtualenv setup made is not in it.
      assert.match(
        pr.body,
        /durations\/ago\.py +\| +\d+ [+-]+\n durations\/units\.py +\| +4 \+{4}\n 2 files changed/,
      );
    } finally {
      await stack.stop();
    }
  },
  { timeout: 600_000 },
);
