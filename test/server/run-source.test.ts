import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { PgRunStore } from '../../src/events/pg-event-store.js';
import { PgRunStorage } from '../../src/events/run-storage.js';
import { Redactor } from '../../src/publish/redact.js';
import { PgRunSource } from '../../src/server/run-source.js';
import { makeBase } from '../publish/event-log.js';
import { postgresSkipReason, startPostgres, type TestPostgres } from '../support/postgres-server.js';

async function until(what: string, check: () => boolean, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await delay(20);
  }
}

void describe('the run server reading the PostgreSQL run store', { skip: postgresSkipReason() }, () => {
  let pg: TestPostgres | undefined;
  before(async () => {
    pg = await startPostgres();
  });
  after(async () => {
    await pg?.stop();
  });

  test('runs and job records are listed; a reader reads new events only; NOTIFY names the run at each append, also after a restart', async () => {
    assert.ok(pg);
    const store = await PgRunStore.connect(pg.url);
    const storage = new PgRunStorage(store);
    const source = new PgRunSource(pg.url, new Redactor(['sk-secret-value-123']));
    try {
      await storage.recordJob('job-1', { schemaVersion: 1, id: 'job-1', startedAt: '2026-12-02T00:00:00Z' });
      const run = await store.create('job-1', makeBase({ conversationId: 'job-1' }));
      await storage.recordJob('job-2', { schemaVersion: 1, id: 'job-2' });
      assert.deepEqual((await source.ids()).sort(), ['job-1', 'job-2']);
      assert.deepEqual(await source.jobRecord('job-1'), {
        schemaVersion: 1,
        id: 'job-1',
        startedAt: '2026-12-02T00:00:00Z',
      });
      assert.equal(await source.reader('job-2'), null, 'a job with no run yet has no reader');

      const heard: string[] = [];
      await source.watch((id) => heard.push(id));
      await run.append({
        kind: 'warning',
        code: 'mcp_unavailable',
        message: 'first, with sk-secret-value-123',
      });
      await until('the first notification', () => heard.includes('job-1'));
      const reader = await source.reader('job-1');
      assert.ok(reader);
      assert.equal(await reader.refresh(), true);
      assert.equal(reader.lastEventId, 1);
      assert.match(JSON.stringify(reader.eventsAfter(0, 10)), /\[REDACTED\]/);
      assert.equal(await reader.refresh(), false, 'nothing new');

      // The server restarts: the listener connects again and hears the next append.
      await pg.restart(500);
      heard.length = 0;
      await until('a notification after the restart', () => {
        void run
          .append({ kind: 'warning', code: 'mcp_unavailable', message: 'after the restart' })
          .catch(() => undefined);
        return heard.includes('job-1');
      });
      await reader.refresh();
      assert.ok(reader.events.length >= 2);
      assert.deepEqual(
        reader.events.map((e) => e.id),
        Array.from({ length: reader.lastEventId }, (_, i) => i + 1),
      );
    } finally {
      await source.close();
      await store.close();
    }
  });
});
