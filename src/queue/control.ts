import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { withIssueLock } from './issue-lock.js';
import { pendingJobSchema, type FixJob, type PendingJob } from './payloads.js';
import { fixJobOptions, type QueueSettings } from './queues.js';

/**
 * Cross-process control of jobs, in Redis next to the queue: a cancel request a worker polls for
 * (BullMQ's own cancellation only reaches a job in the process that runs it), and the per-target
 * list of requests that arrived while a job was running, run one after another so none is lost.
 */
export const cancelKey = (prefix: string, jobId: string): string => `${prefix}:cancel:${jobId}`;
export const pendingKey = (prefix: string, target: string): string => `${prefix}:pending:${target}`;
export const lockKey = (prefix: string, target: string): string => `${prefix}:lock:${target}`;

const DAY = 24 * 3600;

export async function requestCancel(redis: Redis, prefix: string, jobId: string, by: string): Promise<void> {
  await redis.set(cancelKey(prefix, jobId), by, 'EX', DAY);
}

/** Who asked to cancel the job, or null. */
export async function cancelRequest(redis: Redis, prefix: string, jobId: string): Promise<string | null> {
  return redis.get(cancelKey(prefix, jobId));
}

export async function addPending(
  redis: Redis,
  prefix: string,
  target: string,
  pending: PendingJob,
): Promise<number> {
  return redis.rpush(pendingKey(prefix, target), JSON.stringify(pending));
}

/** Drops every waiting request of a target (on stop); returns them so their comments can say so. */
export async function dropPending(redis: Redis, prefix: string, target: string): Promise<PendingJob[]> {
  const key = pendingKey(prefix, target);
  const raw = await redis.lrange(key, 0, -1);
  await redis.del(key);
  return raw.flatMap((r) => {
    const parsed = pendingJobSchema.safeParse(JSON.parse(r));
    return parsed.success ? [parsed.data] : [];
  });
}

/**
 * Called by a worker when its job for `target` has ended: the oldest waiting request becomes the
 * target's job. Idempotent across a crash in the middle: the job id is the request's own, so adding
 * it twice is a no-op, and the request leaves the list only after it is in the queue.
 */
export async function handOff(
  redis: Redis,
  queue: Queue<FixJob>,
  settings: QueueSettings,
  target: string,
): Promise<string | null> {
  return withIssueLock(redis, lockKey(settings.prefix, target), async () => {
    const key = pendingKey(settings.prefix, target);
    const head = await redis.lindex(key, 0);
    if (head === null) return null;
    const parsed = pendingJobSchema.safeParse(JSON.parse(head));
    if (!parsed.success) {
      await redis.lpop(key);
      return null;
    }
    // The running job still holds the target's deduplication key until it is marked finished;
    // hand the key to the next job now (BullMQ only clears a key that still names the finished job).
    await queue.removeDeduplicationKey(target);
    await queue.add(
      parsed.data.job.kind,
      parsed.data.job,
      fixJobOptions(settings, target, parsed.data.jobId),
    );
    await redis.lpop(key);
    return parsed.data.jobId;
  });
}
