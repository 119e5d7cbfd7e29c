import { chmod, lchown, lstat, opendir } from 'node:fs/promises';
import { join } from 'node:path';

/** The image's non-root user. */
export const AGENT_UID = 1000;
export const AGENT_GID = 1000;

export interface ContainerIdentity {
  readonly uid: number;
  readonly gid: number;
  /** The workspace was opened to the group (root-owned workspace). */
  readonly sharedGroup: boolean;
}

/**
 * File ownership both ways between the host workspace and the container.
 *
 * - Workspace owned by a non-root user (a worker running unprivileged): the container runs as that
 *   uid:gid. Everything it creates belongs to the worker, which can commit and delete it as usual.
 * - Workspace owned by root (a worker running as root, as on these machines): running the
 *   container as root is not an option, so it runs as the image's `agent` (1000:1000) and the
 *   workspace is opened to group 1000 (group-owned, group-writable, setgid directories so new
 *   entries inherit the group; the shell runs with umask 002). The top directory stays owned by
 *   root, so git on the host does not see "dubious ownership", and root needs no permission to
 *   commit or delete what the container created.
 *
 * The first is exact; the second keeps the non-root boundary without giving the host a foreign
 * owner on the repository root.
 */
export async function prepareWorkspaceOwnership(hostWorkspace: string): Promise<ContainerIdentity> {
  const st = await lstat(hostWorkspace);
  if (st.uid !== 0) return { uid: st.uid, gid: st.gid, sharedGroup: false };
  await openToGroup(hostWorkspace, AGENT_GID);
  return { uid: AGENT_UID, gid: AGENT_GID, sharedGroup: true };
}

/** chgrp -R gid, g+rwX, g+s on directories; never follows a symbolic link. */
export async function openToGroup(root: string, gid: number): Promise<void> {
  const stack = [root];
  while (stack.length > 0) {
    const path = stack.pop();
    if (path === undefined) break;
    const st = await lstat(path);
    if (st.isSymbolicLink()) {
      if (st.gid !== gid) await lchown(path, st.uid, gid);
      continue;
    }
    if (st.gid !== gid) await lchown(path, st.uid, gid);
    const mode = st.mode & 0o7777;
    if (st.isDirectory()) {
      const want = mode | 0o2070;
      if (want !== mode) await chmod(path, want);
      const dir = await opendir(path);
      for await (const entry of dir) stack.push(join(path, entry.name));
    } else if (st.isFile()) {
      const want = mode | 0o060 | (mode & 0o100 ? 0o010 : 0);
      if (want !== mode) await chmod(path, want);
    }
  }
}
