import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, before, describe, it } from 'node:test';
import { Queue, Worker } from 'bullmq';
import type { Trigger } from '../../src/queue/trigger.js';
import { submitTrigger } from '../../src/server/github.js';
import { startRedis, redisSkipReason, type TestRedis } from '../support/redis-server.js';

const skip = redisSkipReason();

const trigger = (deliveryId: string): Trigger => ({
  v: 1,
  kind: 'manual',
  deliveryId,
  installationId: 5,
  repo: { id: 7, owner: 'acme', name: 'calc', private: false },
  issue: { number: 3, title: 'Bug', state: 'open', isPullRequest: false, body: 'Fix it.' },
  sender: { login: 'maria', id: 11, type: 'User' },
  manual: { instructions: '', admin: false },
  receivedAt: new Date().toISOString(),
});

/**
 * `POST /api/runs` waits for intake's answer by polling the intake queue. The intake job can finish
 * between any two of those reads; whichever read it finishes after, the answer is the job's return
 * value, never "no answer yet" (which the API turns into `{ id: null, status: 'pending' }`).
 */
describe('submitTrigger: the answer of an intake job that finishes mid-poll', { skip }, () => {
  let redis: TestRedis;
  before(async () => {
    redis = await startRedis();
  });
  after(async () => {
    await redis.stop();
  });

  for (const finishAfterRead of [1, 2, 3]) {
    it(`the job finishes right after the poll's read number ${finishAfterRead}`, async () => {
      const connection = { url: redis.url, maxRetriesPerRequest: null };
      const name = `intake-${finishAfterRead}`;
      const queue = new Queue<Trigger>(name, { connection });
      let release: () => void = () => undefined;
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      const worker = new Worker<Trigger>(
        name,
        async () => {
          await gate;
          return { status: 'queued', jobId: 'fix-42' };
        },
        { connection },
      );
      try {
        // Every read the poll makes of the queue is counted; after the chosen one the job is let
        // finish, and the read's (now stale) answer is returned only once it has.
        let reads = 0;
        const watched = new Proxy(queue, {
          get(target, prop, receiver) {
            const value: unknown = Reflect.get(target, prop, receiver);
            if (typeof value !== 'function' || prop === 'add') return value;
            return async (...args: unknown[]) => {
              const result: unknown = await (value as (...a: unknown[]) => Promise<unknown>).apply(
                target,
                args,
              );
              reads += 1;
              if (reads === finishAfterRead) {
                const done = once(worker, 'completed');
                release();
                await done;
              }
              return result;
            };
          },
        });
        const answer = await submitTrigger(watched, trigger(`d-${finishAfterRead}`), 10_000);
        assert.deepEqual(answer, { status: 'queued', jobId: 'fix-42' });
        assert.ok(reads >= finishAfterRead, `the poll made ${reads} reads`);
      } finally {
        release();
        await worker.close();
        await queue.obliterate({ force: true });
        await queue.close();
      }
    });
  }
});
