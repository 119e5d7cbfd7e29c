import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { EnvironmentSettings } from '../../src/config/agent-env.js';
import { hostProbe } from '../../src/environment/host-probe.js';
import { planEnvironment } from '../../src/environment/plan.js';
import { prepareEnvironment } from '../../src/environment/prepare.js';
import { makeFixtureRepo } from '../support/fixture-repo.js';
import { buildWheels, startPackageIndex } from '../support/pypi-index.js';
import { dockerTest } from '../sandbox/docker/docker-test-support.js';

/**
 * A Python project that needs two third-party packages, with no config: the plan detects its
 * requirements files, picks the Python image, and setup installs both from the deployment's package
 * index (ISSUE_AGENT_PIP_INDEX_URL: here a PEP 503 index on the host's loopback, on a port that is
 * neither 80 nor 443) through the egress proxy. The tests then run and fail only where the bug is.
 */
dockerTest(
  'environment: a Python project gets its packages from the deployment’s index through the proxy; nothing else is reached',
  async (_docker, t) => {
    const wheels = await buildWheels(['plurals', 'frozenclock']);
    t.after(() => rm(join(wheels, '..'), { recursive: true, force: true }));
    const index = await startPackageIndex(wheels);
    t.after(() => index.close());
    const fixture = makeFixtureRepo('python-durations');
    t.after(() => {
      fixture.cleanup();
    });
    const cacheDir = await mkdtemp(join(tmpdir(), 'ia-env-cache-'));
    t.after(() => rm(cacheDir, { recursive: true, force: true }));

    const probe = hostProbe(fixture.dir);
    const plan = await planEnvironment(probe, {}, { kind: 'base', ref: 'main' });
    assert.match(plan.image, /^issue-agent\/python:/);
    assert.deepEqual(
      plan.setup.commands.map((c) => c.command),
      [
        'python3 -m venv --system-site-packages .venv',
        '.venv/bin/pip install -r requirements.txt -r requirements-dev.txt',
      ],
    );
    const settings: EnvironmentSettings = {
      setupEnabled: true,
      allowHosts: [],
      allowCidrs: ['127.0.0.1/32'],
      extraCaPem: null,
      npmRegistry: null,
      pipIndexUrl: index.url,
      setupSecrets: {},
      grants: null,
      cacheUnpinnedMs: 24 * 3_600_000,
      cacheDir,
      cacheMaxBytes: 1024 ** 3,
      setupTimeoutMs: 5 * 60_000,
    };
    const env = await prepareEnvironment({
      workspace: fixture.dir,
      probe,
      jobId: `py-${Math.random().toString(36).slice(2, 8)}`,
      repoKey: 'test:python-durations',
      plan,
      settings,
      mayStoreCache: false,
      scrub: (text) => text,
    });
    t.after(async () => {
      await env.sandbox.close();
      await env.close();
    });

    const install = env.record.setup.commands[1];
    assert.equal(install?.exitCode, 0, install?.output);
    assert.match(install.output, /Successfully installed frozenclock-0\.4\.0 plurals-1\.2\.0/);
    // pip asked the index for both projects and fetched both wheels.
    for (const p of ['/simple/plurals/', '/simple/frozenclock/']) assert.ok(index.requests.includes(p), p);
    assert.equal(index.requests.filter((p) => p.startsWith('/files/')).length, 2);
    // Every request setup made went to the index; pypi.org (in the plan's allowlist) was never needed.
    const port = Number(new URL(index.url).port);
    const egress = env.record.egress.setup;
    assert.ok(egress !== null);
    assert.ok(egress.requests.length > 0);
    for (const r of egress.requests) {
      assert.deepEqual([r.host, r.port, r.allowed], ['127.0.0.1', port, true], JSON.stringify(r));
    }

    // The test command the harness detects, in the environment setup made.
    const out = (await env.sandbox.exec('python3 -m pytest -rA 2>&1 | tail -12', { timeoutMs: 60_000 }))
      .output;
    assert.match(out, /FAILED tests\/test_ago\.py::test_one_hour/);
    assert.match(out, /1 failed, 6 passed/);
    // And the agent phase has no way out: the index is unreachable from the sandbox now.
    const reach = await env.sandbox.exec(
      `python3 -c "import urllib.request as u; u.urlopen('${index.url}', timeout=3)" >/dev/null 2>&1; echo "exit:$?"`,
      { timeoutMs: 30_000 },
    );
    assert.match(reach.output, /exit:1/);
  },
  { timeout: 300_000 },
);
