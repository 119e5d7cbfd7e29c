import { createHash } from 'node:crypto';
import { readdir, readFile, rm, stat, writeFile, rename } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * What a mirror looked like when its objects were last read in full (a connectivity fsck of the
 * history and every file of the tip): the tip checked and a fingerprint of its object files (path,
 * inode, size, modification time to the nanosecond). A pristine clone of the same tip from object
 * files with the same fingerprint skips the full read: every object file is the one that passed.
 * Anything that rewrites, replaces, adds or removes an object file through the file system (a repack,
 * a writer damaging a pack) changes the fingerprint, and the next clone reads everything again. The
 * one exception is the host's own fetch into a mirror whose record held just before it: git hashes
 * every object it receives and checks that the new tip's history connects to what was there, so
 * when every object file of before the fetch is still there unchanged (the fetch only added files),
 * the fetch records the new tip and fingerprint itself (HostGit.updateMirror). Trade-offs: the change time is not part of it, because every pristine
 * clone hardlinks the object files (a link changes their change time); so damage that keeps a file's
 * inode, size and modification time (the disk going bad under the file system, or a writer who puts
 * the time back, e.g. through a pristine clone's hardlink to the same file) is seen only when git
 * reads the damaged object, as in any git repository. The full read would not have caught a
 * well-formed substitution either; what keeps writers out is where the mirror and the pristine
 * clones live (never given to a sandbox), not this check.
 */
export function checkedPath(mirror: string): string {
  return `${mirror.replace(/[\\/]+$/, '')}.checked.json`;
}

/** The fingerprint of the mirror's object files. */
export async function objectsFingerprint(mirror: string): Promise<string> {
  return fingerprintOf(await objectFiles(mirror));
}

/** What the fingerprint is made of: each object file's path → its inode, size, mtime and mode. */
export async function objectFiles(mirror: string): Promise<Map<string, string>> {
  const files = new Map<string, string>();
  const walk = async (dir: string, rel: string): Promise<void> => {
    const entries = await readdir(dir, { withFileTypes: true });
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const entry of entries) {
      const path = join(dir, entry.name);
      const name = rel === '' ? entry.name : `${rel}/${entry.name}`;
      if (entry.isDirectory()) {
        await walk(path, name);
        continue;
      }
      const st = await stat(path, { bigint: true });
      files.set(name, `${st.ino}\0${st.size}\0${st.mtimeNs}\0${st.mode}`);
    }
  };
  await walk(join(mirror, 'objects'), '');
  return files;
}

export function fingerprintOf(files: ReadonlyMap<string, string>): string {
  const hash = createHash('sha256');
  for (const [name, facts] of files) hash.update(`${name}\0${facts}\n`);
  return hash.digest('hex');
}

/** Whether every file of `before` is in `after`, unchanged (files may have been added). */
export function onlyAdded(before: ReadonlyMap<string, string>, after: ReadonlyMap<string, string>): boolean {
  for (const [name, facts] of before) if (after.get(name) !== facts) return false;
  return true;
}

/**
 * Whether the mirror's objects are as they were when `tip` was last checked in full (any doubt: no).
 * `objects`: their fingerprint, when the caller took it already.
 */
export async function alreadyChecked(mirror: string, tip: string, objects?: string): Promise<boolean> {
  try {
    const record = JSON.parse(await readFile(checkedPath(mirror), 'utf8')) as unknown;
    if (typeof record !== 'object' || record === null) return false;
    const { tip: was, objects: recorded } = record as { tip?: unknown; objects?: unknown };
    if (was !== tip || typeof recorded !== 'string') return false;
    return recorded === (objects ?? (await objectsFingerprint(mirror)));
  } catch {
    return false;
  }
}

/**
 * Records a full check of `tip`. `objects` is the fingerprint taken before the check began: a file
 * that changed during the check makes the record stale, never wrongly current.
 */
export async function recordChecked(mirror: string, tip: string, objects: string): Promise<void> {
  const path = checkedPath(mirror);
  const tmp = `${path}.tmp-${process.pid}`;
  try {
    await writeFile(tmp, `${JSON.stringify({ tip, objects })}\n`, { mode: 0o600 });
    await rename(tmp, path);
  } finally {
    await rm(tmp, { force: true });
  }
}

export async function forgetChecked(mirror: string): Promise<void> {
  await rm(checkedPath(mirror), { force: true });
}
