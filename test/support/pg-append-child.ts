/**
 * A second writer of one run, in a process of its own (test/events/pg-event-store.test.ts): opens
 * the run, says `ready`, waits for a line on stdin, appends one warning event and prints what
 * happened as JSON (`{"ok":true,"id":N}` or `{"ok":false,"code":"conflict"}`).
 */
import { createInterface } from 'node:readline';
import { EventStoreError } from '../../src/events/event-store.js';
import { PgRunStore } from '../../src/events/pg-event-store.js';

const [url = '', runId = '', marker = ''] = process.argv.slice(2);
const store = await PgRunStore.connect(url);
const run = await store.open(runId);
process.stdout.write('ready\n');
await new Promise<void>((resolve) => {
  createInterface({ input: process.stdin }).once('line', () => {
    resolve();
  });
});
try {
  const e = await run.append({ kind: 'warning', code: 'no_tool_call', message: marker });
  process.stdout.write(`${JSON.stringify({ ok: true, id: e.id })}\n`);
} catch (error) {
  process.stdout.write(
    `${JSON.stringify({ ok: false, code: error instanceof EventStoreError ? error.code : String(error) })}\n`,
  );
}
await store.close();
process.exit(0);
