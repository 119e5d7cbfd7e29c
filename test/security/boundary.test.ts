import assert from 'node:assert/strict';
import { existsSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { newBaseState } from '../../src/agent/new-run.js';
import { DEFAULT_LIMITS } from '../../src/config/agent-env.js';
import { DockerSandbox } from '../../src/sandbox/docker/docker-sandbox.js';
import { LocalSandbox, canIsolate } from '../../src/sandbox/local/local-sandbox.js';
import type { Sandbox } from '../../src/sandbox/sandbox.js';
import { reply } from '../../src/model-sim/index.js';
import { dockerEngine, testOwner } from '../sandbox/docker/docker-test-support.js';
import { attack, gitWorkspace, hostCanary, runScripted } from './support.js';

const engine = dockerEngine();
const dockerSkip = 'reason' in engine && !engine.required ? engine.reason : false;
const isolation = await canIsolate();
const localSkip = isolation ? false : 'this host allows no namespaces for the isolated sandbox';

async function sandboxOf(kind: 'docker' | 'local', ws: string, hide: readonly string[]): Promise<Sandbox> {
  if (kind === 'local')
    return LocalSandbox.create({
      workspace: ws,
      path: process.env.PATH ?? '/usr/bin:/bin',
      isolate: { hide },
    });
  if (!('docker' in engine)) throw new Error(engine.reason);
  return DockerSandbox.create({
    docker: engine.docker,
    workspace: ws,
    jobId: 'attack-boundary',
    image: 'issue-agent/node:latest',
    owner: testOwner('attack-boundary'),
  });
}

for (const kind of ['docker', 'local'] as const) {
  attack(
    `test-command detection (${kind}): a package.json that is a link to a host file is not read on the host`,
    async (t) => {
      const canary = hostCanary();
      const ws = gitWorkspace({ 'README.md': 'hello\n' });
      // A follow-up round can commit exactly this: the manifest as a link to a host path.
      symlinkSync(canary.file, join(ws, 'package.json'));
      const sandbox = await sandboxOf(kind, ws, [canary.dir]);
      t.after(async () => {
        await sandbox.close();
        rmSync(ws, { recursive: true, force: true });
        rmSync(canary.dir, { recursive: true, force: true });
      });
      const base = await newBaseState({
        task: { title: 't', body: 'b', instructions: [], source: 'test' },
        sandbox,
        model: 'm',
        limits: DEFAULT_LIMITS,
      });
      assert.ok(!JSON.stringify(base).includes(canary.secret), 'the host file was read');
      assert.equal(base.testCommand, null);
    },
    { skip: kind === 'docker' ? dockerSkip : localSkip },
  );
}

attack(
  'the Docker sandbox names no host path: /proc/self/mountinfo holds no host folder of the job',
  async (t) => {
    const ws = gitWorkspace();
    const sandbox = await sandboxOf('docker', ws, []);
    t.after(async () => {
      await sandbox.close();
      rmSync(ws, { recursive: true, force: true });
    });
    const r = await sandbox.exec('cat /proc/self/mountinfo', { timeoutMs: 10_000 });
    assert.equal(r.exitCode, 0);
    assert.ok(!r.output.includes(ws), 'the host copy is named');
    assert.match(r.output, / \/workspace rw,[^ ]* - tmpfs /);
    for (const line of r.output.split('\n').filter((l) => l !== '')) {
      // Every mount is the image's read-only root, a tmpfs, or the engine's /proc, /sys, /dev and
      // /etc/{hosts,hostname,resolv.conf} files: no bind of a host folder of ours.
      assert.ok(!/ \/(tmp|var\/lib\/issue-agent|work|root|home)\/[^ ]* \/workspace/.test(line), line);
    }
  },
  { skip: dockerSkip },
);

for (const kind of ['docker', 'local'] as const) {
  attack(
    `a git config the agent writes in its workspace (${kind}) configures nothing on the host through checkpoints`,
    async (t) => {
      const canary = hostCanary();
      const marker = join(canary.dir, 'fsmonitor-ran');
      const ws = gitWorkspace();
      const sandbox = await sandboxOf(kind, ws, [canary.dir]);
      t.after(async () => {
        await sandbox.close();
        rmSync(ws, { recursive: true, force: true });
        rmSync(canary.dir, { recursive: true, force: true });
      });
      const run = await runScripted(sandbox, [
        reply().tool('bash', {
          command: `git config core.fsmonitor "touch ${marker}" && git config diff.external "touch ${marker}" && echo x >> README.md`,
        }),
        reply().tool('editor', { command: 'create', path: 'b.txt', file_text: 'b\n' }),
        reply().tool('finish', { summary: 'done' }),
      ]);
      t.after(() => run.close());
      assert.ok(run.store.events.some((e) => e.kind === 'checkpoint'));
      assert.equal(existsSync(marker), false, 'agent-written git config ran outside the sandbox');
    },
    { skip: kind === 'docker' ? dockerSkip : localSkip },
  );
}
