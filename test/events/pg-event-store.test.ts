import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { DEFAULT_LIMITS } from '../../src/config/agent-env.js';
import { asFencedWriter, EventStoreError } from '../../src/events/event-store.js';
import { EVENTS_CHANNEL, MIGRATIONS, PgRunStore, withClient } from '../../src/events/pg-event-store.js';
import { PgSpendLedger } from '../../src/events/pg-spend-ledger.js';
import { spendScope } from '../../src/events/spend-ledger.js';
import { reduceState } from '../../src/events/reduce-state.js';
import { SCHEMA_VERSION, type BaseState } from '../../src/events/schema.js';
import { postgresSkipReason, startPostgres, type TestPostgres } from '../support/postgres-server.js';

const ROOT = join(import.meta.dirname, '..', '..');
const TSX = join(ROOT, 'node_modules', 'tsx', 'dist', 'esm', 'index.mjs');

const base = (id: string): BaseState => ({
  schemaVersion: SCHEMA_VERSION,
  conversationId: id,
  createdAt: new Date(0).toISOString(),
  task: { title: 't', body: 'b', instructions: [], source: 'test' },
  workspace: { path: '/w', baseCommit: 'a'.repeat(40), baseTree: 'b'.repeat(40) },
  model: 'claude-sonnet-4-6',
  sandbox: 'local',
  testCommand: 'npm test',
  testCommandSource: 'package.json scripts.test',
  limits: DEFAULT_LIMITS,
});

const warning = (message: string) => ({ kind: 'warning' as const, code: 'no_tool_call' as const, message });

describe('PostgreSQL run store', { skip: postgresSkipReason(), timeout: 120_000 }, () => {
  let server: TestPostgres;
  let store: PgRunStore;

  before(async () => {
    server = await startPostgres();
    store = await PgRunStore.connect(server.url);
  });
  after(async () => {
    await store.close();
    await server.stop();
  });

  it("an output past the run's budget for attachments keeps its head and says how much was left out", async () => {
    const small = await PgRunStore.connect(server.url, { maxAttachedBytes: 1000 });
    const dir = mkdtempSync(join(tmpdir(), 'ia-pg-file-'));
    try {
      const run = await small.create('run-budget', base('run-budget'));
      writeFileSync(join(dir, 'a.txt'), 'a'.repeat(600));
      writeFileSync(join(dir, 'b.txt'), `${'b'.repeat(400)}${'c'.repeat(5_000_000)}`);
      await run.attachFile(join(dir, 'a.txt'), 'a.txt');
      await run.attachFile(join(dir, 'b.txt'), 'b.txt');
      const kept = (await small.file('run-budget', 'b.txt'))?.toString('utf8') ?? '';
      assert.ok(kept.startsWith('b'.repeat(400)), kept.slice(0, 50));
      assert.doesNotMatch(kept, /ccc/);
      assert.match(kept, /budget for attached output \(1000 bytes\) is used up: 5000000 bytes/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
      await small.close();
    }
  });

  it('a run reopens to the same base, events and state; attachments are kept within the budget', async () => {
    const run = await store.create('run-roundtrip', base('run-roundtrip'));
    await run.append({
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
    await run.append({ kind: 'action', toolUseId: 'u1', tool: 'bash', input: { command: 'ls' } });
    const dir = mkdtempSync(join(tmpdir(), 'ia-pg-file-'));
    try {
      writeFileSync(join(dir, 'out.txt'), 'x'.repeat(100));
      assert.equal(await run.attachFile(join(dir, 'out.txt'), 'out-1.txt'), 'files/out-1.txt');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const again = await store.open('run-roundtrip');
    assert.deepEqual(again.base, base('run-roundtrip'));
    assert.deepEqual(again.events, run.events);
    assert.deepEqual(reduceState(again.events), reduceState(run.events));
    assert.equal((await store.file('run-roundtrip', 'out-1.txt'))?.toString('utf8'), 'x'.repeat(100));
    await assert.rejects(store.create('run-roundtrip', base('run-roundtrip')), (e: unknown) => {
      return e instanceof EventStoreError && e.code === 'exists';
    });
    await assert.rejects(
      store.open('no-such-run'),
      (e: unknown) => e instanceof EventStoreError && e.code === 'not_found',
    );
  });

  it('two processes append the same event number: one succeeds, the other gets a typed conflict; the log stays whole', async () => {
    const runId = 'run-race';
    const run = await store.create(runId, base(runId));
    await run.append(warning('first'));
    const writers = ['left', 'right'].map((marker) => {
      const child = spawn(
        process.execPath,
        ['--import', TSX, join(ROOT, 'test', 'support', 'pg-append-child.ts'), server.url, runId, marker],
        {
          stdio: ['pipe', 'pipe', 'inherit'],
        },
      );
      const lines = createInterface({ input: child.stdout });
      const out: string[] = [];
      const ready = new Promise<void>((resolve) => {
        lines.on('line', (l) => {
          out.push(l);
          if (l === 'ready') resolve();
        });
      });
      const done = new Promise<void>((resolve) => {
        child.once('exit', () => {
          resolve();
        });
      });
      return { marker, child, ready, done, out };
    });
    await Promise.all(writers.map((w) => w.ready));
    for (const w of writers) w.child.stdin.end('go\n');
    await Promise.all(writers.map((w) => w.done));
    const results = writers.map((w) => ({
      marker: w.marker,
      ...(JSON.parse(w.out.at(-1) ?? '{}') as { ok: boolean; id?: number; code?: string }),
    }));
    const won = results.filter((r) => r.ok);
    const lost = results.filter((r) => !r.ok);
    assert.equal(won.length, 1, JSON.stringify(results));
    assert.equal(won[0]?.id, 2);
    assert.deepEqual(
      lost.map((r) => r.code),
      ['conflict'],
    );
    // This process's view is stale too: its next append conflicts instead of writing event 2 again.
    await assert.rejects(
      run.append(warning('stale')),
      (e: unknown) => e instanceof EventStoreError && e.code === 'conflict',
    );
    const log = await store.open(runId);
    assert.deepEqual(
      log.events.map((e) => (e.kind === 'warning' ? e.message : e.kind)),
      ['first', ...won.map((w) => w.marker)],
    );
    // The reopened log continues.
    assert.equal((await log.append(warning('third'))).id, 3);
  });

  it('a run that lost its job appends nothing (fenced), whatever the store', async () => {
    const run = await store.create('run-fenced', base('run-fenced'));
    await assert.rejects(
      asFencedWriter(
        () => true,
        () => run.append(warning('late')),
      ),
      (e: unknown) => e instanceof EventStoreError && e.code === 'fenced',
    );
    assert.equal((await store.open('run-fenced')).events.length, 0);
  });

  it('each append is announced on the events channel at commit', async () => {
    const listener = new pg.Client({ connectionString: server.url });
    await listener.connect();
    try {
      await listener.query(`LISTEN ${EVENTS_CHANNEL}`);
      const heard: string[] = [];
      listener.on('notification', (n) => {
        heard.push(n.payload ?? '');
      });
      const run = await store.create('run-notify', base('run-notify'));
      await run.append(warning('a'));
      await run.append(warning('b'));
      const deadline = Date.now() + 5000;
      while (heard.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      assert.deepEqual(heard, ['run-notify 1', 'run-notify 2']);
    } finally {
      await listener.end();
    }
  });

  it('migrations: two processes starting at once apply each once; a store newer than this build is refused', async () => {
    const [a, b] = await Promise.all([PgRunStore.connect(server.url), PgRunStore.connect(server.url)]);
    await a.close();
    await b.close();
    const c = new pg.Client({ connectionString: server.url });
    await c.connect();
    try {
      const versions = (
        await c.query<{ version: number }>('SELECT version FROM ia_migrations ORDER BY version')
      ).rows;
      assert.deepEqual(
        versions.map((v) => v.version),
        MIGRATIONS.map((m) => m.version),
      );
      const newer = Math.max(...MIGRATIONS.map((m) => m.version)) + 1;
      await c.query('INSERT INTO ia_migrations (version) VALUES ($1)', [newer]);
      await assert.rejects(
        PgRunStore.connect(server.url),
        (e: unknown) =>
          e instanceof EventStoreError &&
          e.code === 'unsupported_version' &&
          e.message.includes(`version ${newer}`),
      );
      await c.query('DELETE FROM ia_migrations WHERE version = $1', [newer]);
    } finally {
      await c.end();
    }
  });

  // pg emits 'error' on a client whose server goes away even after failing its query with it; a
  // client checked out of a pool has no listener of the pool's, so unheard it ends the process (a
  // worker died this way in the multi-host test).
  it('a restart while clients are checked out (opens, copies, holds, settles) ends no process; the calls go on after it', async () => {
    const lost = await withClient(store.pool, async (client) => {
      await client.query('SELECT 1');
      await server.restart(1000);
      return client.query('SELECT 1').then(
        () => 'still connected',
        () => 'lost',
      );
    });
    assert.equal(lost, 'lost');
    const one = await store.pool.query<{ one: number }>('SELECT 1 AS one');
    assert.equal(one.rows[0]?.one, 1, 'the pool dropped the broken client and connects anew');

    // Under load: every kind of checkout in flight when the server goes down.
    await store.create('run-checkout', base('run-checkout'));
    const ledger = new PgSpendLedger(store.pool);
    const scope = spendScope('restart-owner', 'calc');
    let stop = false;
    let rounds = 0;
    const load = async (lane: number): Promise<void> => {
      for (let i = 0; !stop; i++) {
        const holdId = `h-${lane}-${i}`;
        await store.open('run-checkout');
        await store.copyRun('run-checkout', `run-checkout-${lane}-${i}`);
        await ledger.hold({
          month: '2026-12',
          scope,
          ownerCap: null,
          repoCap: null,
          holdId,
          micros: 10,
          nowMs: Date.now(),
          ttlMs: 60_000,
        });
        await ledger.settle('2026-12', scope, holdId, 10);
        rounds++;
      }
    };
    const lanes = [load(1), load(2), load(3)];
    while (rounds < 6) await new Promise((r) => setTimeout(r, 20));
    await server.restart(1000);
    const after = rounds;
    while (rounds < after + 6) await new Promise((r) => setTimeout(r, 20));
    stop = true;
    await Promise.all(lanes);
    // Each settle counted once, across the restart too.
    const spent = await ledger.monthSpend('2026-12');
    const usd = spent.owners.find((o) => o.owner === 'restart-owner')?.usd ?? 0;
    assert.equal(Math.round(usd * 1_000_000), rounds * 10);
  });

  it('the server restarted while a run appends: every append lands once, in order', async () => {
    const run = await store.create('run-restart', base('run-restart'));
    let fifth = (): void => undefined;
    const underWay = new Promise<void>((resolve) => {
      fifth = resolve;
    });
    const appends = (async () => {
      for (let i = 1; i <= 40; i++) {
        await run.append(warning(`m${i}`));
        if (i === 5) fifth();
        await new Promise((r) => setTimeout(r, 25));
      }
    })();
    // The restart lands mid-run: some appends before it, most after.
    await Promise.race([underWay, appends]);
    await server.restart(1500);
    await appends;
    const log = await store.open('run-restart');
    assert.deepEqual(
      log.events.map((e) => (e.kind === 'warning' ? e.message : '')),
      Array.from({ length: 40 }, (_, i) => `m${i + 1}`),
    );
  });
});
