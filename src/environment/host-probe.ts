import { lstat, readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { WorkspaceProbe } from '../testing/detect-test-command.js';

/** Files larger than this are not read (a manifest or lockfile past it is treated as absent). */
const MAX_FILE_BYTES = 8 * 1024 * 1024;

/**
 * A WorkspaceProbe over a host copy of the repository, for the decisions made before a sandbox
 * exists (image, runtime, setup, cache key). Only valid while no sandbox process has ever run on
 * that directory: then nothing can swap a path between a check and a read. Every component of a
 * path is checked with lstat and a link anywhere is treated as absent, so a repository's symlink
 * (`package.json -> /etc/shadow`) never makes the host read a file outside the repository.
 */
export function hostProbe(root: string): WorkspaceProbe {
  const safe = async (rel: string): Promise<string | null> => {
    const parts = rel.split('/').filter((p) => p !== '' && p !== '.');
    if (parts.some((p) => p === '..')) return null;
    let path = root;
    for (const part of parts) {
      path = join(path, part);
      try {
        if ((await lstat(path)).isSymbolicLink()) return null;
      } catch {
        return null;
      }
    }
    return path;
  };
  return {
    async exists(rel) {
      return (await safe(rel)) !== null;
    },
    async readText(rel) {
      const path = await safe(rel);
      if (path === null) return null;
      try {
        const st = await lstat(path);
        if (!st.isFile() || st.size > MAX_FILE_BYTES) return null;
        return await readFile(path, 'utf8');
      } catch {
        return null;
      }
    },
    async listDir(rel) {
      const path = await safe(rel);
      if (path === null) return null;
      try {
        return await readdir(path);
      } catch {
        return null;
      }
    },
  };
}
