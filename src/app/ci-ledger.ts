import type { Redis } from 'ioredis';
import { firstTime } from '../queue/issue-lock.js';
import type { CiLedger } from './ci-round.js';

/** The App's ledger: per-head claims by delivery id, and round counts, in Redis. */
export function redisCiLedger(redis: Redis, prefix: string, target: string, deliveryId: string): CiLedger {
  const headKey = (sha: string) => `${prefix}:ci-head:${target}:${sha}`;
  const ttl = 30 * 24 * 3600;
  return {
    // The first failing check's delivery speaks for every check of that commit (the same delivery
    // again, an intake retry, goes on with the same decision).
    async claimHead(sha) {
      const claimed = await redis.set(headKey(sha), deliveryId, 'EX', ttl, 'NX');
      return claimed === 'OK' || (await redis.get(headKey(sha))) === deliveryId;
    },
    async unsaid(kind) {
      return { say: await firstTime(redis, `${prefix}:ci-said:${target}:${kind}`, ttl), marker: '' };
    },
    // The round's number is kept per head, so an intake retry of this delivery reuses it.
    async round(sha, max) {
      const roundsKey = `${prefix}:ci-rounds:${target}`;
      const roundKey = `${headKey(sha)}:round`;
      const decided = await redis.get(roundKey);
      if (decided !== null) return { kind: 'round', round: Number(decided) };
      const used = Number((await redis.get(roundsKey)) ?? '0');
      if (used >= max) return { kind: 'used' };
      const round = await redis.incr(roundsKey);
      await redis.expire(roundsKey, 90 * 24 * 3600);
      await redis.set(roundKey, String(round), 'EX', ttl);
      return { kind: 'round', round };
    },
  };
}
