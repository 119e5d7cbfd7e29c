import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';

import type { WorkspaceProbe } from './detect-test-command.js';

/** Files larger than this are treated as unreadable: detection only needs small manifests. */
const MAX_READ_BYTES = 1024 * 1024;

/**
 * A WorkspaceProbe over a directory on the host. Paths that would resolve outside `root` (absolute
 * paths, `..` segments) are answered as missing, so a hostile relative path cannot probe the host.
 * Every error is folded into "missing": detection must never throw because a file is odd.
 */
export function nodeFsProbe(root: string): WorkspaceProbe {
  const base = path.resolve(root);
  const resolve = (relPath: string): string | null => {
    const full = path.resolve(base, relPath);
    return full === base || full.startsWith(base + path.sep) ? full : null;
  };

  return {
    async exists(relPath) {
      const full = resolve(relPath);
      if (full === null) return false;
      try {
        await stat(full);
        return true;
      } catch {
        return false;
      }
    },
    async readText(relPath) {
      const full = resolve(relPath);
      if (full === null) return null;
      try {
        const info = await stat(full);
        if (!info.isFile() || info.size > MAX_READ_BYTES) return null;
        return await readFile(full, 'utf8');
      } catch {
        return null;
      }
    },
    async listDir(relPath) {
      const full = resolve(relPath);
      if (full === null) return null;
      try {
        return await readdir(full);
      } catch {
        return null;
      }
    },
  };
}
