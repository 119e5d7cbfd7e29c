import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type { Redis } from 'ioredis';

const RELEASE = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`;

export class LockTimeout extends Error {
  override readonly name = 'LockTimeout';
}

/**
 * A short Redis lock around "is a job running for this issue? if not, announce and enqueue one", so
 * two triggers for one issue processed at the same moment cannot both enqueue. It expires on its own
 * (ttl) if its holder dies; released only by its holder.
 */
export async function withIssueLock<T>(
  redis: Redis,
  key: string,
  fn: () => Promise<T>,
  options: { ttlMs?: number; waitMs?: number } = {},
): Promise<T> {
  const ttl = options.ttlMs ?? 30_000;
  const deadline = Date.now() + (options.waitMs ?? 30_000);
  const token = randomUUID();
  for (;;) {
    const ok = await redis.set(key, token, 'PX', ttl, 'NX');
    if (ok === 'OK') break;
    if (Date.now() > deadline)
      throw new LockTimeout(`${key} is still locked after ${options.waitMs ?? 30_000} ms`);
    await delay(50 + Math.random() * 100);
  }
  try {
    return await fn();
  } finally {
    await redis.eval(RELEASE, 1, key, token).catch(() => undefined);
  }
}

/** True the first time it is called for `key` within `ttlSeconds` (used to reply only once). */
export async function firstTime(redis: Redis, key: string, ttlSeconds: number): Promise<boolean> {
  return (await redis.set(key, '1', 'EX', ttlSeconds, 'NX')) === 'OK';
}
