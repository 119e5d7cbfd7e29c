import { createHash } from 'node:crypto';
import { chmod, lstat, mkdir, mkdtemp, rename, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { holdPath } from '../held-paths.js';

/**
 * Host files for read-only bind mounts into sandboxes (ContainerSpecInput.caFile, .hostsFile):
 * mounting a file costs nothing at start, where writing it through an exec costs one more process
 * in the container.
 *
 * Each file is the worker's own: written once per content into a private directory of this process
 * (0700, made by mkdtemp), named by its hash, renamed into place whole, and never written again; no
 * sandbox can change it (the mount is read-only). They hold public content only (certificates, the
 * hosts table). Rewritten when something (a tmp cleaner) removed it or its folder.
 */
let dir: Promise<string> | null = null;

/** The deployment's extra CA certificates. */
export function caMountFile(pem: Buffer): Promise<string> {
  return mountFile(pem, '.pem');
}

/**
 * The hosts table the engine writes for a container on network "none". Sandbox containers run with
 * networking disabled, so the engine writes none (their /etc/hosts would be empty and `localhost`
 * would not resolve): this one is mounted in its place.
 */
export const HOSTS_TABLE =
  '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nff00::0\tip6-mcastprefix\nff02::1\tip6-allnodes\nff02::2\tip6-allrouters\n';

export function hostsMountFile(): Promise<string> {
  return mountFile(Buffer.from(HOSTS_TABLE), '.hosts');
}

async function mountFile(content: Buffer, suffix: string): Promise<string> {
  // Listed for the whole life of the process: removed only by a process that goes (removeHeldPaths).
  dir ??= mkdtemp(join(tmpdir(), 'issue-agent-ca-')).then(holdPath);
  const parent = await dir;
  const path = join(parent, `${createHash('sha256').update(content).digest('hex').slice(0, 32)}${suffix}`);
  try {
    const st = await lstat(path);
    if (st.isFile() && st.size === content.length) return path;
  } catch {
    // not written yet, or removed
  }
  const temp = `${path}.${process.pid}.${Math.random().toString(36).slice(2)}`;
  // The folder itself may be gone too; made again as mkdtemp made it.
  await mkdir(parent, { recursive: true, mode: 0o700 });
  await writeFile(temp, content, { mode: 0o644, flag: 'wx' });
  await chmod(temp, 0o644);
  await rename(temp, path);
  return path;
}
