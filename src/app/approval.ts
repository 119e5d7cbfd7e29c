import type { Redis } from 'ioredis';
import { triggerSchema, type Trigger } from './triggers.js';

/**
 * `@agent approve`: a request by someone who may not start jobs (an outsider) waits, for
 * `approvalDays` (default a week), for someone who may. The App keeps the latest such request of each issue or PR in Redis (its trigger,
 * with the comment's id); a writer's `@agent approve` there starts it once, working from the
 * request's comment as it reads at that moment, which the job's payload then carries: an edit after
 * the approval never reaches the model.
 */

/** The instruction approves the waiting request (`approve` first; anything after it is for people). */
export const APPROVE = /^approve\b/i;

/** The default wait (`approvalDays: 7`). */
export const APPROVAL_TTL_SECONDS = 7 * 24 * 3600;

function requestKey(prefix: string, target: string): string {
  return `${prefix}:approval:${target}`;
}

/** Which approval used the waiting request (its delivery id), so an approval is single-use. */
function usedKey(prefix: string, target: string): string {
  return `${prefix}:approval-used:${target}`;
}

/**
 * Keeps an outsider's request as the one waiting in `target` (replacing an older one) for
 * `ttlSeconds`; after that it is gone and an approval finds nothing.
 */
export async function storeRequest(
  redis: Redis,
  prefix: string,
  target: string,
  trigger: Trigger,
  ttlSeconds: number = APPROVAL_TTL_SECONDS,
): Promise<void> {
  await redis
    .multi()
    .set(requestKey(prefix, target), JSON.stringify(trigger), 'EX', ttlSeconds)
    .del(usedKey(prefix, target))
    .exec();
}

export type Approved =
  | { readonly kind: 'approved'; readonly request: Trigger }
  | { readonly kind: 'none' }
  | { readonly kind: 'used' };

/**
 * Takes the waiting request for the approval delivered as `deliveryId`: the first approval gets it,
 * a later one (another person, or the same person again) gets `used`; the same delivery again (an
 * intake retry) gets it again.
 */
export async function takeRequest(
  redis: Redis,
  prefix: string,
  target: string,
  deliveryId: string,
): Promise<Approved> {
  const raw = await redis.get(requestKey(prefix, target));
  if (raw === null) return { kind: 'none' };
  const parsed = triggerSchema.safeParse(JSON.parse(raw));
  if (!parsed.success) return { kind: 'none' };
  // Kept at least as long as the request (a second behind it): an approval never finds a used request
  // unused again. A mark that outlives its request does no harm: storeRequest removes it.
  const left = await redis.pttl(requestKey(prefix, target));
  const keepMs = (left > 0 ? left : APPROVAL_TTL_SECONDS * 1000) + 1000;
  const claimed = await redis.set(usedKey(prefix, target), deliveryId, 'PX', keepMs, 'NX');
  if (claimed === null && (await redis.get(usedKey(prefix, target))) !== deliveryId) return { kind: 'used' };
  return { kind: 'approved', request: parsed.data };
}
