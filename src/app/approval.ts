import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import { triggerSchema, type Trigger } from '../queue/trigger.js';

/**
 * `@agent approve`: a request by someone who may not start jobs (an outsider) waits, for
 * `approvalDays` (default a week), for someone who may. Each such request is kept in Redis with the
 * digest of its text as delivered (several per issue or PR, newest last); an approval covers one of
 * them, the newest posted before the approve comment, and only as it read then: see
 * approve-request.ts for how that is established and what is refused. Each request is approved once.
 */

/** The instruction approves the waiting request (`approve` first; anything after it is for people). */
export const APPROVE = /^approve\b/i;

/** The default wait (`approvalDays: 7`). */
export const APPROVAL_TTL_SECONDS = 7 * 24 * 3600;

/** Requests kept per conversation: older ones could only be approved by an approval older than them. */
const MAX_WAITING = 20;

/** sha256 of a request's text, in hex: what an approval names, with the comment's id. */
export function bodyDigest(body: string): string {
  return createHash('sha256').update(body, 'utf8').digest('hex');
}

export const waitingRequestSchema = z.object({
  /** The trigger as delivered: its comment's body is the text the requester posted. */
  trigger: triggerSchema,
  /** bodyDigest of that body. */
  digest: z.string().regex(/^[0-9a-f]{64}$/),
  /** The job whose question this request answers (the issue author's answer), or null. */
  answers: z.string().nullable(),
  /** When it stops waiting (epoch ms). */
  expiresAt: z.number(),
});
export type WaitingRequest = z.infer<typeof waitingRequestSchema>;

function requestsKey(prefix: string, target: string): string {
  return `${prefix}:approvals:${target}`;
}

/** Which approval used a request (its delivery id, and the text it approved), so each is approved once. */
function usedKey(prefix: string, target: string, commentId: number): string {
  return `${prefix}:approval-used:${target}:${commentId}`;
}

/**
 * Keeps an outsider's request (or answer) as waiting in `target` for `ttlSeconds`; after that an
 * approval no longer finds it. A request needs its comment (its id and body).
 */
export async function storeRequest(
  redis: Redis,
  prefix: string,
  target: string,
  request: { readonly trigger: Trigger; readonly answers: string | null },
  ttlSeconds: number = APPROVAL_TTL_SECONDS,
  now = Date.now(),
): Promise<void> {
  const body = request.trigger.comment?.body;
  if (body === undefined) throw new Error('a request waiting for approval needs its comment');
  const entry: WaitingRequest = {
    trigger: request.trigger,
    digest: bodyDigest(body),
    answers: request.answers,
    expiresAt: now + ttlSeconds * 1000,
  };
  const key = requestsKey(prefix, target);
  const left = await redis.pttl(key);
  await redis
    .multi()
    .rpush(key, JSON.stringify(entry))
    .ltrim(key, -MAX_WAITING, -1)
    .pexpire(key, Math.max(left, ttlSeconds * 1000))
    .exec();
}

/**
 * The requests waiting in `target`, one per comment (an intake retry stores one twice), in the order
 * they were stored; expired ones and values this version cannot read are left out.
 */
export async function waitingRequests(
  redis: Redis,
  prefix: string,
  target: string,
  now = Date.now(),
): Promise<WaitingRequest[]> {
  const out = new Map<number, WaitingRequest>();
  for (const raw of await redis.lrange(requestsKey(prefix, target), 0, -1)) {
    let parsed: ReturnType<typeof waitingRequestSchema.safeParse>;
    try {
      parsed = waitingRequestSchema.safeParse(JSON.parse(raw));
    } catch {
      continue;
    }
    const id = parsed.data?.trigger.comment?.id;
    if (!parsed.success || id === undefined || parsed.data.expiresAt <= now) continue;
    out.delete(id);
    out.set(id, parsed.data);
  }
  return [...out.values()];
}

/** The text an approval took for a request, as the used mark keeps it (an intake retry reuses it). */
export interface ApprovedText {
  readonly deliveryId: string;
  readonly body: string;
  readonly digest: string;
}

const usedSchema = z.object({ deliveryId: z.string(), body: z.string(), digest: z.string() });

/** The approval that used this request, or null. */
export async function usedBy(
  redis: Redis,
  prefix: string,
  target: string,
  commentId: number,
): Promise<ApprovedText | null> {
  const raw = await redis.get(usedKey(prefix, target, commentId));
  if (raw === null) return null;
  try {
    const parsed = usedSchema.safeParse(JSON.parse(raw));
    // A mark this version cannot read still marks the request used.
    return parsed.success ? parsed.data : { deliveryId: '', body: '', digest: '' };
  } catch {
    return { deliveryId: '', body: '', digest: '' };
  }
}

/**
 * Marks a request used by the approval delivered as `approved.deliveryId`, with the text it approved:
 * true for the first approval (and the same delivery again, an intake retry), false once another one
 * used it. The mark outlives the request (the whole list's time, and a second more), so a used request
 * never looks unused again.
 */
export async function claimRequest(
  redis: Redis,
  prefix: string,
  target: string,
  commentId: number,
  approved: ApprovedText,
): Promise<boolean> {
  const left = await redis.pttl(requestsKey(prefix, target));
  const keepMs = (left > 0 ? left : APPROVAL_TTL_SECONDS * 1000) + 1000;
  const key = usedKey(prefix, target, commentId);
  const claimed = await redis.set(key, JSON.stringify(approved), 'PX', keepMs, 'NX');
  if (claimed === 'OK') return true;
  return (await usedBy(redis, prefix, target, commentId))?.deliveryId === approved.deliveryId;
}
