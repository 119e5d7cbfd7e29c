import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { baselineKey } from '../../src/agent/baseline-cache.js';
import type { BaseState, EventOf } from '../../src/events/schema.js';
import { renderVerification } from '../../src/publish/verification.js';
import { FileBaselineStore } from '../../src/worker/baseline-store.js';
import { reply } from '../../src/model-sim/index.js';
import { startHarness } from '../support/agent-harness.js';

const baselineOf = (events: readonly { kind: string }[]): EventOf<'test_run'> => {
  const b = events.find(
    (e): e is EventOf<'test_run'> => e.kind === 'test_run' && (e as EventOf<'test_run'>).phase === 'baseline',
  );
  assert.ok(b, 'a baseline event');
  return b;
};

test('a second run on the same base tree, environment and test command reuses the baseline, and says from which run; another test command does not', async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'ia-baselines-'));
  t.after(() => {
    rmSync(root, { recursive: true, force: true });
  });
  const baselines = new FileBaselineStore(root, 'github:1');
  const quit = (): ReturnType<typeof reply> => reply().text('Nothing to change.');
  const runOnce = async (testCommand: string): Promise<EventOf<'test_run'>> => {
    const h = await startHarness({ policy: quit, testCommand, baselines });
    try {
      await h.run();
      return baselineOf(h.store.events);
    } finally {
      await h.close();
    }
  };
  const first = await runOnce('npm test');
  assert.equal(first.reusedFrom, undefined, 'the first run ran it');
  assert.equal(first.summary.failed, 1);
  const second = await runOnce('npm test');
  assert.ok(second.reusedFrom !== undefined, 'the second run reused it');
  assert.equal(second.reusedFrom.ts, first.ts);
  assert.match(second.reusedFrom.conversationId, /\S/);
  assert.deepEqual(
    { ...second, id: 0, ts: '', reusedFrom: undefined },
    { ...first, id: 0, ts: '', reusedFrom: undefined },
    'the same result, recorded again',
  );
  // The PR's verification section says so.
  assert.match(renderVerification(second, null), /The baseline was not run again: run `[^`]+` ran it at/);
  const other = await runOnce('node --test');
  assert.equal(other.reusedFrom, undefined, 'another test command runs its own baseline');
  // Another repository's store never finds this one's entries.
  const key = readdirSync(readdirSync(root).map((d) => join(root, d))[0] ?? '')[0]?.replace(/\.json$/, '');
  assert.ok(key !== undefined);
  assert.equal(await new FileBaselineStore(root, 'github:2').get(key), null);
  assert.notEqual(await baselines.get(key), null);
});

test('a baseline file that does not read back is a miss, not a crash', async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'ia-baselines-'));
  t.after(() => {
    rmSync(root, { recursive: true, force: true });
  });
  const store = new FileBaselineStore(root, 'github:1');
  const key = 'a'.repeat(64);
  await store.put(key, {
    run: {
      command: 'npm test',
      exitCode: 0,
      killed: null,
      durationMs: 1,
      summary: { runner: 'node-test', passed: 1, failed: 0, skipped: 0, failedNames: [], passedNames: [] },
      output: '',
      outputBytes: 0,
    },
    conversationId: 'c',
    ts: 't',
  });
  assert.notEqual(await store.get(key), null);
  const dir = join(root, readdirSync(root)[0] ?? '');
  writeFileSync(join(dir, `${key}.json`), '{"run": 1');
  assert.equal(await store.get(key), null);
});

test('the baseline key: the base tree (a changed lockfile), the test command and the environment change it', () => {
  const base = {
    workspace: { path: '/w', baseCommit: 'c1', baseTree: 't1' },
    testCommand: 'npm test',
    sandbox: 'docker',
    limits: { maxSteps: 10 },
    environment: {
      image: 'issue-agent/node:22',
      runtimes: [{ language: 'node', version: '22', requested: null, source: 'default' }],
      setup: {
        commands: [{ command: 'npm ci' }],
        testEnv: {},
      },
    },
  } as unknown as BaseState;
  const key = baselineKey(base);
  assert.match(key ?? '', /^[0-9a-f]{64}$/);
  assert.equal(baselineKey({ ...base, conversationId: 'other', createdAt: 'later' }), key, 'not the run');
  assert.equal(
    baselineKey({ ...base, workspace: { ...base.workspace, baseCommit: 'c2' } }),
    key,
    'not the commit',
  );
  const env = base.environment;
  assert.ok(env !== undefined);
  for (const changed of [
    { ...base, workspace: { ...base.workspace, baseTree: 't2' } },
    { ...base, testCommand: 'npm run test:ci' },
    { ...base, environment: { ...env, image: 'issue-agent/node:20' } },
    { ...base, environment: { ...env, setup: { ...env.setup, commands: [{ command: 'npm install' }] } } },
    { ...base, environment: { ...env, setup: { ...env.setup, testEnv: { PATH: '/x' } } } },
  ] as BaseState[]) {
    assert.notEqual(baselineKey(changed), key);
  }
  assert.equal(baselineKey({ ...base, testCommand: null }), null);
});
