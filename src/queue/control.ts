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

const LIVE_STATES = new Set(['waiting', 'active', 'delayed', 'prioritized', 'waiting-children', 'paused']);

/** The job that holds the target now (waiting or running), or null. */
export async function liveJobFor(queue: Queue<FixJob>, target: string): Promise<string | null> {
  const id = await queue.getDeduplicationJobId(target);
  if (id === null) return null;
  const state = await queue.getJobState(id);
  return LIVE_STATES.has(state) ? id : null;
}

export async function pendingCount(redis: Redis, prefix: string, target: string): Promise<number> {
  return redis.llen(pendingKey(prefix, target));
}

/**
 * Starts the oldest waiting request of a target if no job holds it. Called with the target's lock
 * held: by a worker once its job is marked finished (completed, or failed for good, also when BullMQ
 * failed it for stalling), and by intake when it adds a request while nothing runs. Idempotent across
 * a crash in the middle: the job id is the request's own, so adding it twice is a no-op, and the
 * request leaves the list only after it is in the queue.
 */
export async function handOffLocked(
  redis: Redis,
  queue: Queue<FixJob>,
  settings: QueueSettings,
  target: string,
): Promise<string | null> {
  if ((await liveJobFor(queue, target)) !== null) return null;
  const key = pendingKey(settings.prefix, target);
  const head = await redis.lindex(key, 0);
  if (head === null) return null;
  const parsed = pendingJobSchema.safeParse(JSON.parse(head));
  if (!parsed.success) {
    await redis.lpop(key);
    return null;
  }
  // A finished job's key may linger (BullMQ clears it only if it still names that job).
  await queue.removeDeduplicationKey(target);
  await queue.add(parsed.data.job.kind, parsed.data.job, fixJobOptions(settings, target, parsed.data.jobId));
  await redis.lpop(key);
  return parsed.data.jobId;
}

export async function handOff(
  redis: Redis,
  queue: Queue<FixJob>,
  settings: QueueSettings,
  target: string,
): Promise<string | null> {
  return withIssueLock(redis, lockKey(settings.prefix, target), () =>
    handOffLocked(redis, queue, settings, target),
  );
}
