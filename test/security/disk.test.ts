import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DockerSandbox } from '../../src/sandbox/docker/docker-sandbox.js';
import { createSandbox } from '../../src/sandbox/create-sandbox.js';
import { LocalSandbox, canIsolate } from '../../src/sandbox/local/local-sandbox.js';
import { DEFAULT_SPILL_LIMIT } from '../../src/sandbox/output-capture.js';
import { reply } from '../../src/model-sim/index.js';
import { dockerEngine, dockerTest, testOwner } from '../sandbox/docker/docker-test-support.js';
import { SandboxError } from '../../src/sandbox/sandbox.js';
import { attack, gitWorkspace, runScripted } from './support.js';

const engine = dockerEngine();
const dockerSkip = 'reason' in engine && !engine.required ? engine.reason : false;
const MiB = 1024 * 1024;
const isolation = await canIsolate();

const workspace = (): string => gitWorkspace();

async function dockerSandbox(ws: string, limits: { workspaceBytes?: number; tmpBytes?: number }) {
  if (!('docker' in engine)) throw new Error(engine.reason);
  return DockerSandbox.create({
    docker: engine.docker,
    workspace: ws,
    jobId: 'attack-disk',
    image: 'issue-agent/base:latest',
    owner: testOwner('attack-disk'),
    limits,
  });
}

for (const [where, target] of [
  ['the workspace', 'big'],
  ['/tmp', '/tmp/big'],
] as const) {
  attack(
    `fill ${where} of the Docker sandbox: the job ends failed/sandbox_disk_limit, the host's disk is not used`,
    async (t) => {
      const ws = workspace();
      const sandbox = await dockerSandbox(ws, { workspaceBytes: 64 * MiB, tmpBytes: 64 * MiB });
      t.after(async () => {
        await sandbox.close();
        rmSync(ws, { recursive: true, force: true });
      });
      const run = await runScripted(sandbox, [
        reply().tool('bash', { command: `dd if=/dev/zero of=${target} bs=1M count=200` }),
        reply().tool('bash', { command: 'echo still running' }),
        reply().tool('finish', { summary: 'done' }),
      ]);
      t.after(() => run.close());
      assert.equal(run.outcome.outcome, 'failed', run.outcome.reason);
      assert.equal(run.outcome.cause, 'sandbox_disk_limit', run.outcome.reason);
      if ('docker' in engine) {
        const info = await engine.docker
          .getContainer(sandbox.containerId)
          .inspect()
          .catch(() => null);
        // Writable places are tmpfs; the one host file is the hosts table, read-only.
        assert.ok(
          info === null ||
            info.Mounts.every((m) => m.Type === 'tmpfs' || (m.Destination === '/etc/hosts' && !m.RW)),
          'no host storage',
        );
      }
      assert.deepEqual(
        readdirSync(ws).sort(),
        ['.git', 'README.md'],
        'the host copy of the workspace was not written',
      );
    },
    { skip: dockerSkip, timeout: 120_000 },
  );
}

attack(
  'an endless stream of output: the host keeps at most the spill cap per command, and counts the rest',
  async (t) => {
    const ws = workspace();
    const sandbox = await LocalSandbox.create({ workspace: ws, path: process.env.PATH ?? '/usr/bin:/bin' });
    t.after(async () => {
      await sandbox.close();
      rmSync(ws, { recursive: true, force: true });
    });
    const flood = DEFAULT_SPILL_LIMIT + 32 * MiB;
    const run = await runScripted(sandbox, [
      reply().tool('bash', { command: `head -c ${flood} /dev/zero | tr '\\0' a` }),
      reply().tool('finish', { summary: 'done' }),
    ]);
    t.after(() => run.close());
    const obs = run.store.events.find((e) => e.kind === 'observation');
    assert.ok(obs?.kind === 'observation');
    assert.ok(obs.fullContentFile !== undefined, 'the output was spilled');
    const kept = statSync(join(run.store.location, obs.fullContentFile)).size;
    assert.ok(kept <= DEFAULT_SPILL_LIMIT + 4096, `kept ${kept} bytes`);
    assert.ok(kept >= DEFAULT_SPILL_LIMIT, `kept ${kept} bytes`);
  },
  { timeout: 120_000 },
);

attack(
  'a repository larger than the workspace limit: the sandbox refuses to start with disk_limit',
  async (t) => {
    const ws = gitWorkspace();
    writeFileSync(join(ws, 'big.bin'), randomBytes(20 * MiB));
    t.after(() => {
      rmSync(ws, { recursive: true, force: true });
    });
    await assert.rejects(dockerSandbox(ws, { workspaceBytes: 16 * MiB }), (error: unknown) => {
      assert.ok(error instanceof SandboxError);
      assert.equal(error.code, 'disk_limit', error.message);
      return true;
    });
  },
  { skip: dockerSkip, timeout: 120_000 },
);

dockerTest(
  'a repository past the shell copy size streams in through its own exec, whole',
  async (_docker, t) => {
    const ws = gitWorkspace();
    const data = randomBytes(40 * MiB);
    writeFileSync(join(ws, 'big.bin'), data);
    const sandbox = await dockerSandbox(ws, {});
    t.after(async () => {
      await sandbox.close();
      rmSync(ws, { recursive: true, force: true });
    });
    const r = await sandbox.exec('stat -c %s big.bin && sha256sum big.bin | cut -c1-64', {
      timeoutMs: 30_000,
    });
    assert.equal(r.output, `${data.length}\n${createHash('sha256').update(data).digest('hex')}\n`);
  },
);

attack(
  'fill the workspace of the isolated local sandbox: failed/sandbox_disk_limit, the host folder untouched',
  async (t) => {
    const ws = gitWorkspace();
    const sandbox = await createSandbox({
      kind: 'local',
      workspace: ws,
      path: process.env.PATH ?? '/usr/bin:/bin',
      jobId: 'attack-local-disk',
      isolate: { hide: [] },
      limits: { workspaceBytes: 32 * MiB },
    });
    t.after(async () => {
      await sandbox.close();
      rmSync(ws, { recursive: true, force: true });
    });
    const run = await runScripted(sandbox, [
      reply().tool('bash', { command: 'dd if=/dev/zero of=big bs=1M count=100' }),
      reply().tool('bash', { command: 'echo still running' }),
      reply().tool('finish', { summary: 'done' }),
    ]);
    t.after(() => run.close());
    assert.equal(run.outcome.outcome, 'failed', run.outcome.reason);
    assert.equal(run.outcome.cause, 'sandbox_disk_limit', run.outcome.reason);
    assert.deepEqual(readdirSync(ws).sort(), ['.git', 'README.md'], 'the host folder was written');
  },
  { skip: isolation ? false : 'this host allows no namespaces for the isolated sandbox', timeout: 120_000 },
);
