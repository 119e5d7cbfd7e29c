import type { EventStore } from '../../events/event-store.js';
import type { RunStorage } from '../../events/run-storage.js';

/** The rounds a PR already holds, by job folder id, from the hidden marker in its body. */
const ROUNDS_MARKER = /<!-- issue-agent:rounds ([A-Za-z0-9,-]+) -->/;

/** The hidden marker naming a PR's rounds by job folder (read back by `priorRounds`). */
export function roundsMarker(jobIds: readonly string[]): string {
  return `<!-- issue-agent:rounds ${jobIds.join(',')} -->`;
}

function roundIds(body: string): string[] {
  return (
    ROUNDS_MARKER.exec(body)?.[1]
      ?.split(',')
      .filter((id) => /^[A-Za-z0-9-]+$/.test(id)) ?? []
  );
}

/** The logs of the PR's earlier rounds that the run storage holds. */
export async function priorRounds(
  storage: RunStorage,
  body: string,
  repoId: number,
  pull: number,
): Promise<EventStore[]> {
  return (await priorRoundsById(storage, body, repoId, pull)).map((r) => r.store);
}

/**
 * The PR's earlier rounds with the job each lives in. The marker names jobs, not conversations: a
 * conversation continued after a question lives on in a later job.
 */
export async function priorRoundsById(
  storage: RunStorage,
  body: string,
  repoId: number,
  pull: number,
): Promise<{ readonly id: string; readonly store: EventStore }[]> {
  // Only rounds of this PR (follow-ups) or of the issue it fixes (the first round): a marker edited
  // to name another repository's job must not pull that job's trajectory in.
  const issue = /^Fixes #(\d+)$/m.exec(body)?.[1];
  const allowed = [`r${repoId}-i${pull}-`, ...(issue === undefined ? [] : [`r${repoId}-i${issue}-`])];
  const rounds = await Promise.all(
    roundIds(body)
      .filter((id) => allowed.some((prefix) => id.startsWith(prefix)))
      .map(async (id) => {
        const store = await storage.open(id);
        return store === null ? [] : [{ id, store }];
      }),
  );
  return rounds.flat();
}

/** The issue a PR fixes, from its body's `Fixes #n` line (the PR's own number if none). */
export function issueNumberOf(body: string, fallback: number): number {
  const m = /^Fixes #(\d+)$/m.exec(body);
  return m?.[1] === undefined ? fallback : Number(m[1]);
}
