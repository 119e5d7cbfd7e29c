import assert from 'node:assert/strict';
import { DockerSandbox } from '../../../src/sandbox/docker/docker-sandbox.js';
import { dockerTest, tempWorkspace, testOwner } from './docker-test-support.js';

dockerTest(
  'setup phase: commands run before the agent phase, then the container has no network',
  async (docker, t) => {
    const workspace = await tempWorkspace(t);
    const sandbox = await DockerSandbox.create({
      docker,
      workspace,
      jobId: 'setup',
      image: 'issue-agent/node:latest',
      setupNetwork: 'none', // no container may get an address on these machines
      owner: testOwner('setup'),
    });
    t.after(() => sandbox.close());
    const results = await sandbox.runSetup(
      ['node --version > .node-version', 'npm --version', 'false', 'echo skipped'],
      {
        network: 'none',
      },
    );
    assert.deepEqual(
      results.map((r) => r.exitCode),
      [0, 0, 1],
      'stops at the first failing command',
    );
    const r = await sandbox.exec('cat .node-version; ls /sys/class/net', { timeoutMs: 10_000 });
    assert.match(r.output, /^v22\.\d+\.\d+\nlo\n$/);
    await assert.rejects(sandbox.runSetup(['true'], { network: 'bridge' }), { code: 'start_failed' });
  },
);
