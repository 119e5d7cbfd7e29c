import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { LocalSandbox } from '../../src/sandbox/local/local-sandbox.js';

let dir: string;
let sandbox: LocalSandbox;
const opts = { timeoutMs: 10_000 };

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ia-local-'));
  mkdirSync(join(dir, 'sub'));
  sandbox = await LocalSandbox.create({ workspace: dir, path: process.env.PATH ?? '/usr/bin:/bin' });
});
after(async () => {
  await sandbox.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Whether the process runs: a zombie (killed, not yet reaped by whoever adopted it) does not. */
function alive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

test('cd and export persist between calls', async () => {
  const first = await sandbox.exec('cd sub && export X=1', opts);
  assert.equal(first.exitCode, 0);
  const second = await sandbox.exec('pwd; echo $X', opts);
  assert.equal(second.output, `${join(dir, 'sub')}\n1\n`);
  assert.equal(second.cwd, join(dir, 'sub'));
  await sandbox.exec(`cd ${dir}`, opts);
});

test('exit codes, stderr interleaved, output without a trailing newline', async () => {
  const r = await sandbox.exec(
    'echo out; echo err >&2; printf tail; exit_code() { return 7; }; exit_code',
    opts,
  );
  assert.equal(r.exitCode, 7);
  assert.equal(r.output, 'out\nerr\ntail');
});

test('a command past its timeout is killed with its children; the next command works', async () => {
  const r = await sandbox.exec('sleep 300 & echo $! > bg.pid; sleep 300', { timeoutMs: 500 });
  assert.equal(r.killed, 'timeout');
  assert.equal(r.exitCode, null);
  const bg = Number(readFileSync(join(dir, 'bg.pid'), 'utf8'));
  // SIGKILL is delivered when the process is next scheduled: on a busy machine, a moment later.
  for (let i = 0; i < 50 && alive(bg); i++) await delay(100);
  assert.equal(alive(bg), false, 'the background child was killed too');
  const next = await sandbox.exec('echo alive; echo $X', opts);
  assert.equal(next.output, 'alive\n1\n');
});

test('a busy shell builtin past its timeout replaces the shell, keeping cwd and exports', async () => {
  await sandbox.exec('cd sub && export Y=2', opts);
  const r = await sandbox.exec('while :; do :; done', { timeoutMs: 300 });
  assert.equal(r.killed, 'timeout');
  assert.equal(r.shellRestarted, true);
  const next = await sandbox.exec('pwd; echo $X $Y', opts);
  assert.equal(next.output, `${join(dir, 'sub')}\n1 2\n`);
  await sandbox.exec(`cd ${dir}`, opts);
});

test('`exit` in a command restarts the shell and reports its code', async () => {
  const r = await sandbox.exec('exit 5', opts);
  assert.equal(r.exitCode, 5);
  assert.equal(r.shellRestarted, true);
  assert.equal((await sandbox.exec('echo $X', opts)).output, '1\n');
});

test('the memory watchdog kills a command that grows past its limit', async () => {
  const r = await sandbox.exec('python3 -c "b = bytearray(400 * 1024 * 1024); import time; time.sleep(30)"', {
    timeoutMs: 20_000,
    memoryLimitBytes: 150 * 1024 * 1024,
  });
  assert.equal(r.killed, 'memory');
});

test('host secrets do not reach the shell environment', async () => {
  const r = await sandbox.exec('env', opts);
  assert.doesNotMatch(r.output, /ANTHROPIC|GITHUB_TOKEN|npm_config/);
  assert.match(r.output, /^HOME=/m);
  // Tests see what their CI would see: the sandbox sets nothing that changes colour detection.
  assert.doesNotMatch(r.output, /^(NO_COLOR|FORCE_COLOR|CLICOLOR|CLICOLOR_FORCE)=/m);
});

test('huge output is capped in memory and spilled to a file', async () => {
  const r = await sandbox.exec("head -c 20000000 /dev/zero | tr '\\0' y", opts);
  assert.equal(r.outputBytes, 20_000_000);
  assert.equal(r.truncated, true);
  assert.ok(r.output.length < 600_000);
  assert.ok(r.fullOutputPath !== undefined);
  assert.equal(readFileSync(r.fullOutputPath).length, 20_000_000);
});
