import type { Redis } from 'ioredis';

/**
 * Pre-flight triage: a job that ended `needs_info` asked a question on its issue. The worker marks
 * the issue as waiting (the job's id, for 30 days); the first comment there by the author or
 * someone who may start jobs is the answer, and starts a job that continues that conversation. Each
 * question is answered once: later comments are discussion again.
 */
export const QUESTION_TTL_SECONDS = 30 * 24 * 3600;

function questionKey(prefix: string, target: string): string {
  return `${prefix}:question:${target}`;
}

/** Which delivery answered the question of job `jobId` (single use; an intake retry gets it again). */
function answeredKey(prefix: string, target: string, jobId: string): string {
  return `${prefix}:question-answered:${target}:${jobId}`;
}

/** Marks `target` (an issue's key) as waiting for an answer to the question job `jobId` asked. */
export async function markQuestion(
  redis: Redis,
  prefix: string,
  target: string,
  jobId: string,
): Promise<void> {
  await redis.set(
    questionKey(prefix, target),
    JSON.stringify({ jobId, askedAt: new Date().toISOString() }),
    'EX',
    QUESTION_TTL_SECONDS,
  );
}

/** Whether `target` waits for an answer (the webhook's cheap check before queueing a plain comment). */
export async function awaitsAnswer(redis: Redis, prefix: string, target: string): Promise<boolean> {
  return (await redis.exists(questionKey(prefix, target))) === 1;
}

/** The job whose question `target` waits on, or null. */
export async function pendingQuestion(
  redis: Redis,
  prefix: string,
  target: string,
): Promise<{ readonly jobId: string } | null> {
  const raw = await redis.get(questionKey(prefix, target));
  if (raw === null) return null;
  try {
    const parsed = JSON.parse(raw) as unknown;
    if (
      typeof parsed === 'object' &&
      parsed !== null &&
      'jobId' in parsed &&
      typeof parsed.jobId === 'string' &&
      /^[A-Za-z0-9-]+$/.test(parsed.jobId)
    ) {
      return { jobId: parsed.jobId };
    }
  } catch {
    // A value this version did not write: nothing waits.
  }
  return null;
}

/**
 * Claims the question of `jobId` for the answer delivered as `deliveryId`: true for the first answer
 * (and for the same delivery again, an intake retry), false once another comment answered it.
 */
export async function claimAnswer(
  redis: Redis,
  prefix: string,
  target: string,
  jobId: string,
  deliveryId: string,
): Promise<boolean> {
  const key = answeredKey(prefix, target, jobId);
  const claimed = await redis.set(key, deliveryId, 'EX', QUESTION_TTL_SECONDS, 'NX');
  if (claimed === 'OK') return true;
  return (await redis.get(key)) === deliveryId;
}

/** Whether the question of `jobId` was answered already (by an answer that counted, or an approved one). */
export async function isAnswered(
  redis: Redis,
  prefix: string,
  target: string,
  jobId: string,
): Promise<boolean> {
  return (await redis.exists(answeredKey(prefix, target, jobId))) === 1;
}

/** Ends the wait for an answer on `target`: a stop, an unlabel, or a new request there came. */
export async function clearQuestion(redis: Redis, prefix: string, target: string): Promise<void> {
  await redis.del(questionKey(prefix, target));
}
