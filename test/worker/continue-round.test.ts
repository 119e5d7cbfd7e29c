import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { pino } from 'pino';
import { FileEventStore } from '../../src/events/file-event-store.js';
import { reduceState } from '../../src/events/reduce-state.js';
import { continueConversation } from '../../src/worker/stages/continue-round.js';
import type { JobContext } from '../../src/worker/stages/types.js';
import { makeBase } from '../publish/event-log.js';

const ASKING = 'r7-i3-aaaaaaaaaaaa';
const ANSWERING = 'r7-i3-bbbbbbbbbbbb';

async function setup(t: {
  after: (fn: () => void) => void;
}): Promise<{ jobsDir: string; ctx: (jobId: string) => JobContext }> {
  const jobsDir = mkdtempSync(join(tmpdir(), 'ia-continue-'));
  t.after(() => {
    rmSync(jobsDir, { recursive: true, force: true });
  });
  const asking = FileEventStore.create(
    join(jobsDir, ASKING, 'trajectory'),
    makeBase({ conversationId: ASKING }),
  );
  await asking.append({
    kind: 'outcome',
    outcome: 'needs_info',
    reason: 'unclear',
    summary: '1. which?',
    diffStat: '',
  });
  const ctx = (jobId: string): JobContext =>
    ({
      p: {
        repo: { id: 7 },
        issue: { number: 3 },
        continues: { jobId, answer: { by: 'otto', text: 'this one' } },
      },
      jobsDir,
      paths: { trajectory: join(jobsDir, ANSWERING, 'trajectory') },
      log: pino({ level: 'silent' }),
    }) as unknown as JobContext;
  return { jobsDir, ctx };
}

test('an answer is appended once to a copy of the asking run, also across retries and a second question', async (t) => {
  const { jobsDir, ctx } = await setup(t);
  assert.equal(await continueConversation(ctx(ASKING)), true);
  const own = (): FileEventStore => FileEventStore.open(join(jobsDir, ANSWERING, 'trajectory'));
  assert.equal(reduceState(own().events).rounds, 1);
  assert.equal(own().base.conversationId, ASKING, 'the same conversation');
  // A retry before the round did anything: still one answer.
  assert.equal(await continueConversation(ctx(ASKING)), true);
  assert.equal(reduceState(own().events).rounds, 1);
  // The round asks again, then its job is retried: the old answer is not appended to the new question.
  await own().append({
    kind: 'outcome',
    outcome: 'needs_info',
    reason: 'still unclear',
    summary: '1. and?',
    diffStat: '',
  });
  assert.equal(await continueConversation(ctx(ASKING)), true);
  assert.equal(reduceState(own().events).rounds, 1);
  assert.equal(reduceState(own().events).outcome?.outcome, 'needs_info');
});

test('a job of another issue or repository is never continued', async (t) => {
  const { ctx } = await setup(t);
  assert.equal(await continueConversation(ctx('r8-i3-aaaaaaaaaaaa')), false);
  assert.equal(await continueConversation(ctx('r7-i30-aaaaaaaaaaaa')), false);
});
