import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { DEFAULT_LIMITS } from '../../src/config/agent-env.js';
import { EventStoreError } from '../../src/events/event-store.js';
import { asFencedWriter, FileEventStore } from '../../src/events/file-event-store.js';
import { reduceState } from '../../src/events/reduce-state.js';
import { SCHEMA_VERSION, type BaseState } from '../../src/events/schema.js';

const base: BaseState = {
  schemaVersion: SCHEMA_VERSION,
  conversationId: 'c1',
  createdAt: new Date(0).toISOString(),
  task: { title: 't', body: 'b', instructions: [], source: 'test' },
  workspace: { path: '/w', baseCommit: 'a'.repeat(40), baseTree: 'b'.repeat(40) },
  model: 'claude-sonnet-4-6',
  sandbox: 'local',
  testCommand: 'npm test',
  testCommandSource: 'package.json scripts.test',
  limits: DEFAULT_LIMITS,
};

test('events are one file each, numbered, and reopen to the same state', () => {
  const dir = join(mkdtempSync(join(tmpdir(), 'ia-store-')), 'run');
  try {
    const store = FileEventStore.create(dir, base);
    store.appendSync({
      kind: 'model_response',
      model: 'm',
      requestId: null,
      content: [{ type: 'tool_use', id: 'u1', name: 'bash', input: { command: 'ls' } }],
      stopReason: 'tool_use',
      usage: { inputTokens: 10, outputTokens: 5, cacheReadTokens: 0, cacheWriteTokens: 0 },
      usd: 0.01,
      latencyMs: 3,
      attempts: 1,
      promptTokensEstimate: 12,
    });
    const state = reduceState(store.events);
    assert.equal(state.pendingToolUses.length, 1, 'a tool_use without observation is pending');
    store.appendSync({ kind: 'action', toolUseId: 'u1', tool: 'bash', input: { command: 'ls' } });
    store.appendSync({
      kind: 'observation',
      toolUseId: 'u1',
      tool: 'bash',
      isError: false,
      content: 'a\n',
      exitCode: 0,
      killed: null,
      durationMs: 1,
    });
    assert.deepEqual(readdirSync(join(dir, 'events')), [
      '000001-model_response.json',
      '000002-action.json',
      '000003-observation.json',
    ]);
    // A temp file left by a write that died before its rename is ignored.
    writeFileSync(join(dir, 'events', '000004-warning.json.tmp'), '{"half');
    const reopened = FileEventStore.open(dir);
    assert.deepEqual(reopened.events, store.events);
    assert.deepEqual(reduceState(reopened.events), reduceState(store.events));
    assert.equal(reduceState(reopened.events).pendingToolUses.length, 0);
    assert.equal(reduceState(reopened.events).usd, 0.01);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a corrupt event, a gap or an unknown schema version is refused with a typed error', () => {
  const dir = join(mkdtempSync(join(tmpdir(), 'ia-store-')), 'run');
  try {
    const store = FileEventStore.create(dir, base);
    store.appendSync({ kind: 'warning', code: 'no_tool_call', message: 'm' });
    writeFileSync(
      join(dir, 'events', '000003-warning.json'),
      JSON.stringify({ kind: 'warning', id: 3, ts: 'x', code: 'no_tool_call', message: 'm' }),
    );
    assert.throws(
      () => FileEventStore.open(dir),
      (e) => e instanceof EventStoreError && e.code === 'corrupt' && /expected event 2/.test(e.message),
    );
    writeFileSync(join(dir, 'base_state.json'), JSON.stringify({ ...base, schemaVersion: 99 }));
    assert.throws(
      () => FileEventStore.open(dir),
      (e) => e instanceof EventStoreError && e.code === 'unsupported_version',
    );
    assert.throws(
      () => FileEventStore.create(dir, base),
      (e) => e instanceof EventStoreError && e.code === 'exists',
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('two writers of one conversation never both write an event: the second gets a conflict, the log stays whole', () => {
  const dir = join(mkdtempSync(join(tmpdir(), 'ia-store-')), 'run');
  try {
    const frozen = FileEventStore.create(dir, base);
    frozen.appendSync({ kind: 'action', toolUseId: 'u1', tool: 'bash', input: { command: 'ls' } });
    // The worker that took the job over opens the log and goes on.
    const takeover = FileEventStore.open(dir);
    takeover.appendSync({ kind: 'warning', code: 'no_tool_call', message: 'resumed here' });
    // The frozen worker wakes and appends what it was about to: event 2 too, of another kind.
    assert.throws(
      () => frozen.appendSync({ kind: 'action', toolUseId: 'u2', tool: 'bash', input: { command: 'pwd' } }),
      (error: unknown) => error instanceof EventStoreError && error.code === 'conflict',
    );
    takeover.appendSync({ kind: 'warning', code: 'no_tool_call', message: 'still here' });
    const reopened = FileEventStore.open(dir);
    assert.deepEqual(
      reopened.events.map((e) => e.kind),
      ['action', 'warning', 'warning'],
    );
    assert.ok(!readdirSync(join(dir, 'events')).some((n) => n.endsWith('.tmp')), 'no temp file left');
  } finally {
    rmSync(dirname(dir), { recursive: true, force: true });
  }
});

test('a claim whose rename a crash prevented becomes the event on open; a run that lost its job appends nothing', async () => {
  const dir = join(mkdtempSync(join(tmpdir(), 'ia-store-')), 'run');
  try {
    const store = FileEventStore.create(dir, base);
    store.appendSync({ kind: 'warning', code: 'no_tool_call', message: 'one' });
    store.appendSync({ kind: 'warning', code: 'no_tool_call', message: 'two' });
    // The crash: event 2's claim exists, its readable name does not.
    rmSync(join(dir, 'events', '000002-warning.json'));
    assert.ok(readdirSync(join(dir, 'claims')).includes('000002'));
    const reopened = FileEventStore.open(dir);
    assert.deepEqual(
      reopened.events.map((e) => (e.kind === 'warning' ? e.message : e.kind)),
      ['one', 'two'],
    );
    // A run that lost its job appends nothing; another run in the same process still does.
    let lost = false;
    await asFencedWriter(
      () => lost,
      async () => {
        lost = true;
        await Promise.resolve();
        assert.throws(
          () => reopened.appendSync({ kind: 'warning', code: 'no_tool_call', message: 'three' }),
          (error: unknown) => error instanceof EventStoreError && error.code === 'fenced',
        );
      },
    );
    await asFencedWriter(
      () => false,
      () => {
        reopened.appendSync({ kind: 'warning', code: 'no_tool_call', message: 'three' });
        return Promise.resolve();
      },
    );
    assert.equal(FileEventStore.open(dir).events.length, 3);
  } finally {
    rmSync(dirname(dir), { recursive: true, force: true });
  }
});

test('createAsync (the worker’s, off the event loop) writes what create writes, and refuses a folder holding a conversation', async () => {
  const root = mkdtempSync(join(tmpdir(), 'ia-store-'));
  try {
    const a = FileEventStore.create(join(root, 'sync'), base);
    const b = await FileEventStore.createAsync(join(root, 'async'), base);
    for (const sub of ['', 'events', 'files', 'claims']) {
      assert.deepEqual(readdirSync(join(root, 'async', sub)), readdirSync(join(root, 'sync', sub)));
    }
    assert.equal(
      readFileSync(join(root, 'async', 'base_state.json'), 'utf8'),
      readFileSync(join(root, 'sync', 'base_state.json'), 'utf8'),
    );
    await b.append({ kind: 'warning', code: 'no_tool_call', message: 'm' });
    a.appendSync({ kind: 'warning', code: 'no_tool_call', message: 'm' });
    assert.deepEqual(
      FileEventStore.open(join(root, 'async')).events.map((e) => e.kind),
      FileEventStore.open(join(root, 'sync')).events.map((e) => e.kind),
    );
    await assert.rejects(
      FileEventStore.createAsync(join(root, 'async'), base),
      (e) => e instanceof EventStoreError && e.code === 'exists',
    );
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('attachments past the budget keep the first bytes and a note, and the budget holds over later ones', async () => {
  const root = mkdtempSync(join(tmpdir(), 'ia-store-'));
  try {
    const store = FileEventStore.create(join(root, 'run'), base).withAttachmentBudget(3 * 1024 * 1024);
    const big = join(root, 'big.log');
    writeFileSync(big, Buffer.alloc(5 * 1024 * 1024 + 7, 'x'));
    const rel = await store.attachFile(big, 'out-1.log');
    const kept = readFileSync(join(root, 'run', rel), 'utf8');
    assert.ok(kept.startsWith('x'.repeat(3 * 1024 * 1024)));
    assert.match(kept, /budget for attached output \(3145728 bytes\) is used up: 2097159 bytes/);
    const rel2 = await store.attachFile(big, 'out-2.log');
    assert.doesNotMatch(readFileSync(join(root, 'run', rel2), 'utf8'), /^x/);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
