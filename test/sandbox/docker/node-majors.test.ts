import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import type Docker from 'dockerode';
import type { WorkspaceProbe } from '../../../src/testing/detect-test-command.js';
import { detectRuntime, OFFERED } from '../../../src/environment/runtime.js';
import { DockerSandbox } from '../../../src/sandbox/docker/docker-sandbox.js';
import { dockerTest, tempWorkspace, testOwner } from './docker-test-support.js';

/** Set in CI: a missing image is a failure, not a skip. */
const required = process.env.ISSUE_AGENT_REQUIRE_DOCKER === '1';

/** False (and the test skipped with the reason, or failed in CI) when the image is not built. */
async function haveImage(docker: Docker, t: TestContext, image: string, build: string): Promise<boolean> {
  try {
    await docker.getImage(image).inspect();
    return true;
  } catch {
    const reason = `image ${image} is missing; run scripts/build-images.sh ${build}`;
    if (required) throw new Error(`ISSUE_AGENT_REQUIRE_DOCKER=1 but ${reason}`);
    t.skip(reason);
    return false;
  }
}

/** Runs commands in a hardened sandbox on `image` (no network), returning each one's output. */
async function runIn(
  docker: Docker,
  t: TestContext,
  image: string,
  commands: readonly string[],
): Promise<string[]> {
  const sandbox = await DockerSandbox.create({
    docker,
    workspace: await tempWorkspace(t),
    jobId: 'node-majors',
    image,
    owner: testOwner('node-majors'),
  });
  try {
    const out: string[] = [];
    for (const command of commands) {
      const r = await sandbox.exec(command, { timeoutMs: 20_000 });
      assert.equal(r.exitCode, 0, `${command} in ${image}: ${r.output}`);
      out.push(r.output.trim());
    }
    return out;
  } finally {
    await sandbox.close();
  }
}

for (const major of OFFERED.node) {
  const image = `issue-agent/node:${major}`;
  dockerTest(`${image}: node is ${major}.x and npm runs (read-only root, no network)`, async (docker, t) => {
    if (!(await haveImage(docker, t, image, `node:${major}`))) return;
    const [node, npm] = await runIn(docker, t, image, ['node --version', 'npm --version']);
    assert.match(node ?? '', new RegExp(`^v${major}\\.\\d+\\.\\d+$`));
    assert.match(npm ?? '', /^10\.\d+\.\d+$/);
    const labels = (await docker.getImage(image).inspect()).Config.Labels;
    assert.equal(labels['issue-agent.node-major'], major);
  });
}

dockerTest(
  'issue-agent/node:latest is the default major (22), so existing callers keep their Node',
  async (docker) => {
    const latest = await docker.getImage('issue-agent/node:latest').inspect();
    const dflt = await docker.getImage('issue-agent/node:22').inspect();
    assert.equal(latest.Id, dflt.Id);
  },
);

dockerTest('issue-agent/python:3.11 is the python image, with Python 3.11', async (docker, t) => {
  if (!(await haveImage(docker, t, 'issue-agent/python:3.11', 'python'))) return;
  assert.equal(
    (await docker.getImage('issue-agent/python:3.11').inspect()).Id,
    (await docker.getImage('issue-agent/python:latest').inspect()).Id,
  );
  const [version] = await runIn(docker, t, 'issue-agent/python:3.11', ['python3 --version']);
  assert.match(version ?? '', /^Python 3\.11\.\d+$/);
});

dockerTest('the base image has socat (the in-container forwarder to the egress proxy)', async (docker, t) => {
  const [version] = await runIn(docker, t, 'issue-agent/base:latest', ['socat -V | head -n 2']);
  assert.match(version ?? '', /socat version \d+\.\d+/);
});

dockerTest(
  'a repository asking for Node 20 (.nvmrc) runs in an image whose node is 20',
  async (docker, t) => {
    const files: Record<string, string> = { 'package.json': '{"name":"x"}', '.nvmrc': 'lts/iron\n' };
    const probe: WorkspaceProbe = {
      exists: (p) => Promise.resolve(p in files),
      readText: (p) => Promise.resolve(files[p] ?? null),
      listDir: (p) => Promise.resolve(p === '.' ? Object.keys(files) : null),
    };
    const choice = await detectRuntime(probe);
    assert.equal(choice.image, 'issue-agent/node:20');
    if (!(await haveImage(docker, t, choice.image, 'node:20'))) return;
    const [node] = await runIn(docker, t, choice.image, ['node --version']);
    assert.match(node ?? '', /^v20\./);
  },
);
