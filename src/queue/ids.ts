import { createHash } from 'node:crypto';

/*
 * Job and target ids, apart from the queues themselves so that code without a queue (the Action)
 * names jobs the same way without loading BullMQ.
 */

/** Keys may not contain ':' (BullMQ's separator); ids are stable per repo (renames keep the id). */
export function issueKey(repoId: number, issue: number): string {
  return `r${repoId}-i${issue}`;
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
