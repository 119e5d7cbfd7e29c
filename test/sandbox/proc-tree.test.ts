import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import {
  descendantsOf,
  descendantsRss,
  killDescendants,
  scannedDescendants,
} from '../../src/sandbox/local/proc-tree.js';

const alive = (pid: number): boolean => existsSync(`/proc/${pid}`);

async function until(check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await delay(20);
  }
}

test('the whole tree below a process, nested shells included, and killing it leaves none', async () => {
  const root = spawn('bash', ['-c', 'sleep 61 & bash -c "sleep 62 & sleep 63 & wait" & wait'], {
    stdio: 'ignore',
  });
  const pid = root.pid ?? 0;
  try {
    // bash, its sleep and its inner bash; the inner bash and its two sleeps.
    await until(async () => (await descendantsOf(pid)).length === 4);
    const tree = await descendantsOf(pid);
    assert.equal(new Set(tree).size, 4);
    assert.ok(!tree.includes(pid));
    // The scan of /proc, for kernels that keep no children lists, finds the same.
    assert.deepEqual([...(await scannedDescendants(pid))].sort(), [...tree].sort());
    assert.ok((await descendantsRss(pid)) > 0);
    await killDescendants(pid);
    await until(() => Promise.resolve(tree.every((p) => !alive(p) || isZombie(p))));
  } finally {
    root.kill('SIGKILL');
  }
});

test("a child started by another thread of the process is in its tree (every thread's list is read)", async () => {
  const worker = new Worker(
    "const { spawn } = require('node:child_process'); const { parentPort } = require('node:worker_threads');" +
      "const c = spawn('sleep', ['64'], { stdio: 'ignore' }); parentPort.postMessage(c.pid);" +
      "parentPort.on('message', () => { c.kill('SIGKILL'); process.exit(0); });",
    { eval: true },
  );
  try {
    const child = await new Promise<number>((resolve) => worker.once('message', resolve));
    assert.ok((await descendantsOf(process.pid)).includes(child));
  } finally {
    worker.postMessage('stop');
    await new Promise((resolve) => worker.once('exit', resolve));
  }
});

/** Killed but not yet reaped by its parent (the shell that is being killed too). */
function isZombie(pid: number): boolean {
  try {
    return /\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return true;
  }
}
