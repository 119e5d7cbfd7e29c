import { SandboxFiles } from '../sandbox/sandbox-files.js';
import type { WorkspaceProbe } from './workspace-probe.js';

/** Manifests larger than this are treated as unreadable: detection only needs small files. */
const MAX_READ_BYTES = 1024 * 1024;

/**
 * A WorkspaceProbe that asks the sandbox (see SandboxFiles): the host never reads a workspace file
 * by name, so a manifest that is a link (to /proc/self/pagemap, to a host secret) is followed, if at
 * all, inside the sandbox. Paths that resolve outside the workspace and every error are answered as
 * missing: detection must never throw because a file is odd.
 */
export function sandboxProbe(files: SandboxFiles): WorkspaceProbe {
  return {
    async exists(relPath) {
      try {
        return (await files.stat(relPath)).kind !== 'missing';
      } catch {
        return false;
      }
    },
    async readText(relPath) {
      try {
        const { stat, data } = await files.read(relPath);
        return stat.kind === 'file' && stat.size <= MAX_READ_BYTES ? data.toString('utf8') : null;
      } catch {
        return null;
      }
    },
    async listDir(relPath) {
      try {
        const { stat, entries } = await files.list(relPath, 2000);
        if (stat.kind !== 'directory') return null;
        const prefix = stat.rel === '.' ? '' : `${stat.rel}/`;
        // Direct entries only (list() goes two levels deep): names, without a trailing slash.
        return entries
          .map((e) => e.slice(prefix.length).replace(/\/$/, ''))
          .filter((e) => e !== '' && !e.includes('/'));
      } catch {
        return null;
      }
    },
  };
}
