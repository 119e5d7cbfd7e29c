import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { test } from 'node:test';
import type { SandboxBackend } from '../../src/sandbox/backend.js';
import { addBackendForTests, backendKinds, isBackendKind, loadBackend } from '../../src/sandbox/backends.js';

const ROOT = join(import.meta.dirname, '..', '..');

/**
 * In a fresh process: the entry points' modules (the CLI's commands, the Action's run, the worker's
 * job) imported, then each of `kinds` chosen in turn through the CLI's choice; whether any module
 * of dockerode had been resolved before the first, and after each.
 */
function probe(kinds: readonly string[]): {
  readonly before: boolean;
  readonly after: Record<string, boolean>;
} {
  const url = (path: string): string => pathToFileURL(join(ROOT, path)).href;
  const script = `
import { registerHooks } from 'node:module';
const seen = [];
registerHooks({ resolve(spec, ctx, next) { const r = next(spec, ctx); seen.push(r.url); return r; } });
const docker = () => seen.some((u) => u.includes('/node_modules/dockerode/'));
await import(${JSON.stringify(url('src/cli/eval-command.ts'))});
await import(${JSON.stringify(url('src/action/run-action.ts'))});
await import(${JSON.stringify(url('src/worker/fix-job.ts'))});
const { chooseSandbox } = await import(${JSON.stringify(url('src/cli/workspace.ts'))});
const { readAgentEnv } = await import(${JSON.stringify(url('src/config/agent-env.ts'))});
const before = docker();
const after = {};
for (const kind of ${JSON.stringify(kinds)}) {
  const choice = await chooseSandbox(kind, readAgentEnv({ PATH: process.env.PATH }));
  after[choice.backend.kind] = docker();
}
console.log(JSON.stringify({ before, after }));
`;
  const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout.trim().split('\n').pop() ?? '{}') as ReturnType<typeof probe>;
}

test('dockerode is loaded only when Docker is the backend chosen', () => {
  assert.deepEqual(probe(['local', 'unconfined', 'docker']), {
    before: false,
    after: { local: false, unconfined: false, docker: true },
  });
});

test('the table: its backends, their capabilities, and a test hook that adds one and takes it away', async () => {
  assert.deepEqual(backendKinds(), ['local', 'docker', 'unconfined']);
  const caps = async (kind: string): Promise<readonly boolean[]> => {
    const b = await loadBackend(kind);
    return [b.isolated, b.hostDiskSealed, b.checksOutInside, b.needsHostSupport, b.removeOwned !== undefined];
  };
  assert.deepEqual(await caps('docker'), [true, true, true, false, true]);
  assert.deepEqual(await caps('local'), [true, false, false, true, false]);
  assert.deepEqual(await caps('unconfined'), [false, false, false, false, false]);
  await assert.rejects(loadBackend('vm'), /no sandbox backend "vm" \(there are local, docker, unconfined\)/);

  const local = await loadBackend('local');
  const other: SandboxBackend = { ...local, kind: 'other' };
  const remove = addBackendForTests('other', () => Promise.resolve(other));
  try {
    assert.equal(isBackendKind('other'), true);
    assert.equal(await loadBackend('other'), other);
    assert.throws(() => addBackendForTests('local', () => Promise.resolve(local)), /already listed/);
    const misnamed = addBackendForTests('misnamed', () => Promise.resolve(other));
    await assert.rejects(loadBackend('misnamed'), /listed as "misnamed" calls itself "other"/);
    misnamed();
  } finally {
    remove();
  }
  assert.equal(isBackendKind('other'), false);
});
