import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Queue, Worker, type Job } from 'bullmq';
import { connectionOptions } from '../../src/queue/queues.js';
import { LockKeeper } from '../../src/worker/lock-keeper.js';
import { redisSkipReason, startRedis, type TestRedis } from '../support/redis-server.js';

const skip = redisSkipReason();
let redis: TestRedis | null = null;
before(async () => {
  if (skip === false) redis = await startRedis();
});
after(async () => {
  await redis?.stop();
});

/** Keeps this thread's event loop busy, as a job's synchronous work on a starved host does. */
function blockLoop(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // busy
  }
}

/**
 * One job whose processor blocks the event loop for `blockMs` against a `lockMs` lock, with or
 * without a keeper. BullMQ completes a job only with its lock: a lock that lapsed while the loop was
 * blocked fails the completion ("Missing lock").
 */
async function runBlockedJob(options: {
  readonly lockMs: number;
  readonly blockMs: number;
  readonly keeper?: { readonly maxLoopSilenceMs?: number };
}): Promise<{ completed: boolean; failure: string | null; renewals: number; refused: boolean }> {
  assert.ok(redis !== null);
  const name = `lock-keeper-${Math.random().toString(36).slice(2, 8)}`;
  const prefix = 't';
  const connection = connectionOptions(redis.url, 'lock-keeper-test');
  const queue = new Queue(name, { connection, prefix });
  const keeper =
    options.keeper === undefined
      ? null
      : await LockKeeper.start({
          queue: name,
          prefix,
          redisUrl: redis.url,
          lockDurationMs: options.lockMs,
          ...(options.keeper.maxLoopSilenceMs === undefined
            ? {}
            : { maxLoopSilenceMs: options.keeper.maxLoopSilenceMs }),
        });
  let refused = false;
  const worker = new Worker(
    name,
    async (job: Job, token?: string) => {
      const release =
        keeper === null || token === undefined
          ? () => undefined
          : keeper.hold(job.id ?? '', token, {
              refused: () => {
                refused = true;
              },
            });
      try {
        // Let the keeper's hold reach its thread before the loop stops turning.
        await new Promise((resolve) => setTimeout(resolve, 50));
        blockLoop(options.blockMs);
        return 'done';
      } finally {
        release();
      }
    },
    { connection, prefix, lockDuration: options.lockMs, stalledInterval: 60_000 },
  );
  const ended = new Promise<{ completed: boolean; failure: string | null }>((resolve) => {
    worker.on('completed', () => {
      resolve({ completed: true, failure: null });
    });
    worker.on('failed', (_job, error) => {
      resolve({ completed: false, failure: error.message });
    });
    worker.on('error', (error) => {
      resolve({ completed: false, failure: error.message });
    });
  });
  try {
    await queue.add('block', {});
    const result = await ended;
    const stats = keeper === null ? { renewals: 0 } : await keeper.measure();
    return { ...result, renewals: stats.renewals, refused };
  } finally {
    await worker.close(true);
    await keeper?.close();
    await queue.obliterate({ force: true }).catch(() => undefined);
    await queue.close();
  }
}

test(
  'a job that blocks its event loop past its lock loses the lock without a keeper, and keeps it with one',
  { skip, timeout: 60_000 },
  async () => {
    const without = await runBlockedJob({ lockMs: 1500, blockMs: 4000 });
    assert.equal(without.completed, false, 'without a keeper the lock lapses while the loop is blocked');
    assert.match(without.failure ?? '', /lock/i);

    const kept = await runBlockedJob({ lockMs: 1500, blockMs: 4000, keeper: {} });
    assert.equal(kept.failure, null);
    assert.equal(kept.completed, true);
    assert.ok(kept.renewals >= 4, `the keeper renewed while the loop was blocked (${kept.renewals})`);
    assert.equal(kept.refused, false);
  },
);

test(
  'a keeper lets the locks lapse once the main loop has been silent past its bound (a hang, not a slow moment)',
  { skip, timeout: 60_000 },
  async () => {
    const hung = await runBlockedJob({ lockMs: 1500, blockMs: 5000, keeper: { maxLoopSilenceMs: 1000 } });
    assert.equal(hung.completed, false);
    assert.match(hung.failure ?? '', /lock/i);
  },
);

test(
  "a renewal with a token that is not the lock holder's is refused",
  { skip, timeout: 30_000 },
  async () => {
    assert.ok(redis !== null);
    const name = `lock-keeper-${Math.random().toString(36).slice(2, 8)}`;
    const connection = connectionOptions(redis.url, 'lock-keeper-test');
    const queue = new Queue(name, { connection, prefix: 't' });
    const keeper = await LockKeeper.start({
      queue: name,
      prefix: 't',
      redisUrl: redis.url,
      lockDurationMs: 600,
    });
    try {
      const job = await queue.add('x', {});
      const refused = await new Promise<boolean>((resolve) => {
        keeper.hold(job.id ?? '', 'not-the-token', {
          renewed: () => {
            resolve(false);
          },
          refused: () => {
            resolve(true);
          },
        });
      });
      assert.equal(refused, true);
    } finally {
      await keeper.close();
      await queue.obliterate({ force: true }).catch(() => undefined);
      await queue.close();
    }
  },
);
