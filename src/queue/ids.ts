import { createHash } from 'node:crypto';

/*
 * Job and target ids, apart from the queues themselves so that code without a queue (the Action)
 * names jobs the same way without loading BullMQ.
 */

/** Keys may not contain ':' (BullMQ's separator); ids are stable per repo (renames keep the id). */
export function issueKey(repoId: number, issue: number): string {
  return `r${repoId}-i${issue}`;
}

/**
 * The queue target of an evaluation asked for in a conversation: its own, so that an evaluation and
 * fix requests there neither wait for, replace nor swallow each other as duplicates.
 */
export function evaluateKey(repoId: number, issue: number): string {
  return `${issueKey(repoId, issue)}-evaluate`;
}

/** The queue target of `@agent review` on a PR: its own, beside follow-ups on the same PR. */
export function reviewKey(repoId: number, pull: number): string {
  return `${issueKey(repoId, pull)}-review`;
}

/**
 * The queue target of a reproduction asked for on a pull request (`@agent verify`): its own, like an
 * evaluation's, so it neither waits for nor replaces a fix job there; a second one while it runs is
 * a duplicate.
 */
export function verifyKey(repoId: number, pull: number): string {
  return `${issueKey(repoId, pull)}-verify`;
}

/** The target a queued job holds (see fixJobOptions' deduplication). */
export function jobTarget(job: {
  readonly kind: string;
  readonly repo: { readonly id: number };
  readonly issue: { readonly number: number };
}): string {
  if (job.kind === 'evaluate') return evaluateKey(job.repo.id, job.issue.number);
  if (job.kind === 'review') return reviewKey(job.repo.id, job.issue.number);
  if (job.kind === 'verify') return verifyKey(job.repo.id, job.issue.number);
  return issueKey(job.repo.id, job.issue.number);
}

/** The intake job of a delivery: GitHub's delivery id, so redeliveries collapse into one. */
export function intakeJobId(deliveryId: string): string {
  return `d-${deliveryId.replace(/[^A-Za-z0-9-]/g, '')}`;
}

/** The fix job started by one trigger; deterministic so an intake retry finds its own job again. */
export function fixJobId(repoId: number, issue: number, deliveryId: string): string {
  const d = createHash('sha256').update(deliveryId).digest('hex').slice(0, 12);
  return `${issueKey(repoId, issue)}-${d}`;
}
