import { rm } from 'node:fs/promises';

/**
 * Host paths this process made for its sandboxes and removes itself when it closes them (a
 * sandbox's scratch folder, an egress socket folder, a checkout's copy, a cache entry being
 * written). Each is listed from its creation until its owner removed it, so a process that must go
 * at once (the CLI's second Ctrl-C) can remove what the closes still under way have not reached:
 * removeHeldPaths. Owners release what they removed; a path listed here is never one of the user's.
 */
const held = new Set<string>();

/** Lists `path` (just made by the caller, who removes it later); returns it. */
export function holdPath(path: string): string {
  held.add(path);
  return path;
}

/** The owner removed `path` (or handed it to no one): it is no longer listed. */
export function releasePath(path: string): void {
  held.delete(path);
}

/** Removes every listed path now, whatever still uses it. */
export async function removeHeldPaths(): Promise<void> {
  const paths = [...held];
  await Promise.all(paths.map((p) => rm(p, { recursive: true, force: true }).catch(() => undefined)));
  for (const p of paths) held.delete(p);
}
