import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { ownerId, ownerState } from '../../../src/sandbox/docker/owner.js';
import { startReap } from '../../../src/sandbox/docker/reap.js';

const OWNER_MODULE = join(import.meta.dirname, '..', '..', '..', 'src', 'sandbox', 'docker', 'owner.ts');
const canUnshare =
  process.getuid?.() === 0 && spawnSync('unshare', ['--pid', '--fork', '--mount-proc', 'true']).status === 0;

test('a worker of this process namespace is alive while it runs and gone after; an owner label without a namespace is unknown', () => {
  assert.equal(ownerState(ownerId()), 'alive');
  const exited = spawnSync('true').pid;
  assert.equal(ownerState(ownerId(exited)), 'gone');
  // The start time tells PID reuse apart.
  assert.equal(ownerState(ownerId().replace(/:\d+$/, ':1')), 'gone');
  // Labels written before the namespace was part of the id, and other hosts.
  assert.equal(ownerState(`${ownerId().split('/')[0] ?? ''}:${process.pid}:1`), 'unknown');
  assert.equal(ownerState('elsewhere/4026531836:1:1'), 'unknown');
});

test(
  'a worker in another PID namespace (a worker container on this host) and the host worker never take each other for gone, though their PIDs name other processes on each side',
  { skip: canUnshare ? false : 'needs root and unshare(1) for a PID namespace' },
  () => {
    const script = `import(${JSON.stringify(OWNER_MODULE)}).then((m) => console.log(JSON.stringify({ id: m.ownerId(), host: m.ownerState(process.argv[1]) })))`;
    const out = execFileSync(
      'unshare',
      ['--pid', '--fork', '--mount-proc', process.execPath, '--import', 'tsx', '-e', script, ownerId()],
      { encoding: 'utf8' },
    );
    const inside = JSON.parse(out.trim().split('\n').at(-1) ?? '{}') as { id: string; host: string };
    // Inside, this process's PID is absent or another process: without the namespace it would be gone.
    assert.equal(inside.host, 'unknown');
    // Here, the child's small PID is some other process of the host (PID 1 at least).
    assert.match(inside.id, /:[1-9]\d?:\d+$/);
    assert.equal(ownerState(inside.id), 'unknown');
    assert.notEqual(inside.id.split(':')[0], ownerId().split(':')[0]);
  },
);

test('a worker reaps the sandboxes of unseen workers only past a day, or twice the longest agent run', () => {
  assert.equal(startReap(45 * 60_000).olderThanMs, 24 * 60 * 60_000);
  assert.equal(startReap(20 * 60 * 60_000).olderThanMs, 40 * 60 * 60_000);
});
