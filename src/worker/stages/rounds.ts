import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { FileEventStore } from '../../events/file-event-store.js';

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

/** The stores of the PR's earlier rounds that this host still has (trajectories live with the workers). */
export function priorRounds(jobsDir: string, body: string, repoId: number, pull: number): FileEventStore[] {
  return priorRoundsById(jobsDir, body, repoId, pull).map((r) => r.store);
}

/**
 * The PR's earlier rounds with the job folder each lives in. The marker names job folders, not
 * conversations: a conversation continued after a question lives on in a later job's folder.
 */
export function priorRoundsById(
  jobsDir: string,
  body: string,
  repoId: number,
  pull: number,
): { readonly id: string; readonly store: FileEventStore }[] {
  // Only rounds of this PR (follow-ups) or of the issue it fixes (the first round): a marker edited
  // to name another repository's job must not pull that job's trajectory in.
  const issue = /^Fixes #(\d+)$/m.exec(body)?.[1];
  const allowed = [`r${repoId}-i${pull}-`, ...(issue === undefined ? [] : [`r${repoId}-i${issue}-`])];
  return roundIds(body)
    .filter((id) => allowed.some((prefix) => id.startsWith(prefix)))
    .flatMap((id) => {
      const store = openStore(join(jobsDir, id, 'trajectory'));
      return store === null ? [] : [{ id, store }];
    });
}

/** The issue a PR fixes, from its body's `Fixes #n` line (the PR's own number if none). */
export function issueNumberOf(body: string, fallback: number): number {
  const m = /^Fixes #(\d+)$/m.exec(body);
  return m?.[1] === undefined ? fallback : Number(m[1]);
}

/** The trajectory in `dir`, or null when none was started (no base_state.json yet). */
export function openStore(dir: string): FileEventStore | null {
  if (!existsSync(join(dir, 'base_state.json'))) return null;
  return FileEventStore.open(dir);
}
