import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { canIsolate, LocalSandbox } from '../../src/sandbox/local/local-sandbox.js';

const opts = { timeoutMs: 10_000 };
// Where unprivileged user namespaces are off, the isolated sandbox refuses to start (tested below);
// CI (ISSUE_AGENT_REQUIRE_DOCKER) runs where they work, so a missing feature fails there.
const available = await canIsolate();
const skip =
  !available && process.env.ISSUE_AGENT_REQUIRE_DOCKER !== '1'
    ? 'unprivileged user namespaces are off here'
    : false;

/**
 * The isolated local sandbox (the Action's default): a prompt-injected agent on the runner must not
 * reach the action's own process (whose environment holds the token and the model key), the network,
 * or the folders the host keeps its secrets and its pristine clone in.
 */
describe('local sandbox with namespaces', { skip }, () => {
  let root: string;
  let sandbox: LocalSandbox;
  let secretDir: string;
  let server: ReturnType<typeof createServer>;
  let port: number;
  let canary: ReturnType<typeof spawn>;

  before(async () => {
    root = mkdtempSync(join(tmpdir(), 'ia-isolated-'));
    mkdirSync(join(root, 'workspace'));
    secretDir = join(root, 'origin');
    mkdirSync(secretDir);
    writeFileSync(join(secretDir, 'config'), 'extraheader = AUTHORIZATION: basic c2VjcmV0\n');
    writeFileSync(join(root, 'workspace', 'a.txt'), 'hello\n');
    writeFileSync(join(root, 'set_env_1'), 'NODE_OPTIONS=--require=/x\n');
    server = createServer((_req, res) => res.end('reached'));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
    // A host process holding a secret in its environment, like the action's own node process.
    canary = spawn('sleep', ['300'], {
      env: { PATH: '/usr/bin:/bin', GITHUB_TOKEN: 'ghs_canaryCANARYcanary0123456789' },
    });
    sandbox = await LocalSandbox.create({
      workspace: join(root, 'workspace'),
      path: process.env.PATH ?? '/usr/bin:/bin',
      isolate: { hide: [secretDir, join(root, 'set_env_1')] },
    });
  });

  after(async () => {
    await sandbox.close();
    canary.kill('SIGKILL');
    server.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('sees no host process: not the action, not another holder of a secret', async () => {
    const r = await sandbox.exec(
      `ls /proc | grep -c '^[0-9]'; [ -e /proc/${process.pid} ] && echo host-visible; cat /proc/${canary.pid ?? 0}/environ 2>&1; grep -ao 'ghs_[A-Za-z0-9]*' /proc/*/environ 2>/dev/null; echo done`,
      opts,
    );
    assert.ok(!r.output.includes('host-visible'), r.output);
    assert.ok(!r.output.includes('ghs_canary'), r.output);
    assert.ok(Number(r.output.split('\n')[0]) < 10, `only the sandbox's own processes: ${r.output}`);
  });

  it('has no network, not even the host loopback', async () => {
    const r = await sandbox.exec(
      `exec 3<>/dev/tcp/127.0.0.1/${port} && echo connected || echo refused`,
      opts,
    );
    assert.match(r.output, /refused/);
    assert.doesNotMatch(r.output, /connected/);
  });

  it('finds the hidden folders empty and read-only; the workspace works as usual', async () => {
    const r = await sandbox.exec(
      `ls -A ${secretDir} | wc -l; (echo x > ${secretDir}/planted) 2>/dev/null || echo no-write; wc -c < ${join(root, 'set_env_1')}; cat a.txt; echo y > b.txt && cat b.txt`,
      opts,
    );
    assert.equal(r.output, '0\nno-write\n0\nhello\ny\n');
  });

  it('kills a timed-out command inside the namespace and nothing on the host', async () => {
    const r = await sandbox.exec('sleep 300', { timeoutMs: 500 });
    assert.equal(r.killed, 'timeout');
    assert.ok(canary.exitCode === null && canary.signalCode === null, 'the host process lives');
    const next = await sandbox.exec('echo still here', opts);
    assert.equal(next.output, 'still here\n');
  });
});

describe('local sandbox with namespaces where they are unavailable', () => {
  it(
    'refuses to start rather than run without isolation',
    { skip: available ? 'namespaces work here' : false },
    async () => {
      await assert.rejects(
        LocalSandbox.create({ workspace: tmpdir(), path: '/usr/bin:/bin', isolate: { hide: [] } }),
        { code: 'start_failed' },
      );
    },
  );
});
