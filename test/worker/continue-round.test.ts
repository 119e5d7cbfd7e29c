import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { pino } from 'pino';
import { reduceState } from '../../src/events/reduce-state.js';
import { FileRunStorage, PgRunStorage, type RunStorage } from '../../src/events/run-storage.js';
import { continueConversation } from '../../src/worker/stages/continue-round.js';
import type { JobContext } from '../../src/worker/stages/types.js';
import { makeBase } from '../publish/event-log.js';
import { postgresSkipReason, startPostgres, type TestPostgres } from '../support/postgres-server.js';

const ASKING = 'r7-i3-aaaaaaaaaaaa';
const ANSWERING = 'r7-i3-bbbbbbbbbbbb';

/** A storage holding one run that asked a question (ASKING), and job contexts answering it. */
async function setup(storage: RunStorage): Promise<(continues: string) => JobContext> {
  const asking = await storage.create(ASKING, makeBase({ conversationId: ASKING }));
  await asking.append({
    kind: 'outcome',
    outcome: 'needs_info',
    reason: 'unclear',
    summary: '1. which?',
    diffStat: '',
  });
  await asking.attachFile(join(import.meta.dirname, 'continue-round.test.ts'), 'output-1.txt');
  return (continues: string): JobContext =>
    ({
      p: {
        repo: { id: 7 },
        issue: { number: 3 },
        continues: { jobId: continues, answer: { by: 'otto', text: 'this one' } },
      },
      jobId: ANSWERING,
      storage,
      log: pino({ level: 'silent' }),
    }) as unknown as JobContext;
}

function storageTests(name: string, make: () => Promise<{ storage: RunStorage; done: () => Promise<void> }>) {
  void describe(name, () => {
    test('an answer is appended once to a copy of the asking run, also across retries and a second question', async () => {
      const { storage, done } = await make();
      try {
        const ctx = await setup(storage);
        assert.equal(await continueConversation(ctx(ASKING)), true);
        const own = async () => {
          const s = await storage.open(ANSWERING);
          assert.ok(s);
          return s;
        };
        assert.equal(reduceState((await own()).events).rounds, 1);
        assert.equal((await own()).base.conversationId, ASKING, 'the same conversation');
        // The asking run is untouched: the copy goes on, not the original.
        assert.equal(reduceState((await storage.open(ASKING))?.events ?? []).rounds, 0);
        // A retry before the round did anything: still one answer.
        assert.equal(await continueConversation(ctx(ASKING)), true);
        assert.equal(reduceState((await own()).events).rounds, 1);
        // The round asks again, then its job is retried: the old answer is not appended to the new question.
        await (
          await own()
        ).append({
          kind: 'outcome',
          outcome: 'needs_info',
          reason: 'still unclear',
          summary: '1. and?',
          diffStat: '',
        });
        assert.equal(await continueConversation(ctx(ASKING)), true);
        assert.equal(reduceState((await own()).events).rounds, 1);
        assert.equal(reduceState((await own()).events).outcome?.outcome, 'needs_info');
      } finally {
        await done();
      }
    });

    test('a job of another issue or repository is never continued', async () => {
      const { storage, done } = await make();
      try {
        const ctx = await setup(storage);
        assert.equal(await continueConversation(ctx('r8-i3-aaaaaaaaaaaa')), false);
        assert.equal(await continueConversation(ctx('r7-i30-aaaaaaaaaaaa')), false);
        assert.equal(await storage.open(ANSWERING), null);
      } finally {
        await done();
      }
    });
  });
}

storageTests('job folders', () => {
  const jobsDir = mkdtempSync(join(tmpdir(), 'ia-continue-'));
  return Promise.resolve({
    storage: new FileRunStorage(jobsDir),
    done: () => {
      rmSync(jobsDir, { recursive: true, force: true });
      return Promise.resolve();
    },
  });
});

void describe('PostgreSQL', { skip: postgresSkipReason() }, () => {
  let pg: TestPostgres | undefined;
  let n = 0;
  before(async () => {
    pg = await startPostgres();
  });
  after(async () => {
    await pg?.stop();
  });
  storageTests('run storage', async () => {
    assert.ok(pg);
    // A database per test: the same run ids in each.
    const admin = await PgRunStorage.connect(pg.url);
    const db = `continue_${++n}`;
    await admin.store.pool.query(`CREATE DATABASE ${db}`);
    await admin.close();
    const storage = await PgRunStorage.connect(pg.url.replace(/\/[^/?]+(\?|$)/, `/${db}$1`));
    return { storage, done: () => storage.close() };
  });
});
