import { createHash } from 'node:crypto';
import { chmod, lstat, mkdir, mkdtemp, rename, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * The deployment's extra CA certificates as a host file, for a read-only bind mount into sandboxes
 * (see ContainerSpecInput.caFile): mounting a file costs nothing at start, where writing it through
 * an exec costs one more process in the container.
 *
 * The file is the worker's own: written once per content into a private directory of this process
 * (0700, made by mkdtemp), named by its hash, renamed into place whole, and never written again; no
 * sandbox can change it (the mount is read-only). It holds public certificates only. Rewritten when
 * something (a tmp cleaner) removed it or its folder.
 */
let dir: Promise<string> | null = null;

export async function caMountFile(pem: Buffer): Promise<string> {
  dir ??= mkdtemp(join(tmpdir(), 'issue-agent-ca-'));
  const parent = await dir;
  const path = join(parent, `${createHash('sha256').update(pem).digest('hex').slice(0, 32)}.pem`);
  try {
    const st = await lstat(path);
    if (st.isFile() && st.size === pem.length) return path;
  } catch {
    // not written yet, or removed
  }
  const temp = `${path}.${process.pid}.${Math.random().toString(36).slice(2)}`;
  // The folder itself may be gone too; made again as mkdtemp made it.
  await mkdir(parent, { recursive: true, mode: 0o700 });
  await writeFile(temp, pem, { mode: 0o644, flag: 'wx' });
  await chmod(temp, 0o644);
  await rename(temp, path);
  return path;
}
