import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * A container's cgroup files, read by the worker from the host's cgroup file system instead of from
 * a process started in the container. A fork bomb fills the container's process table, and then no
 * process can join it: an exec fails to start (`read init-p: connection reset by peer`), so the very
 * counter that says "the pids limit was hit" could not be read exactly when it matters. The host
 * reads it without entering the container.
 *
 * These are kernel files under /sys/fs/cgroup: nothing in the container can write them or put
 * anything at these paths (the container has no capabilities and sees its cgroups read-only), and
 * the container id comes from the engine. Where the worker cannot see the engine's cgroups (a worker
 * in a container of its own, a remote engine, a custom cgroup parent) no path exists and the caller
 * reads through the container as before.
 */

export type CgroupController = 'pids' | 'memory';

/**
 * Where the engine puts a container's cgroup: the systemd and cgroupfs drivers, cgroup v2 (one
 * hierarchy) and v1 (one per controller). Empty for an id that is not the engine's full id.
 */
export function hostCgroupPaths(
  containerId: string,
  controller: CgroupController,
  file: string,
  root = '/sys/fs/cgroup',
): string[] {
  if (!/^[0-9a-f]{64}$/.test(containerId) || !/^[a-z_.]+$/.test(file)) return [];
  const scope = `docker-${containerId}.scope`;
  return [
    join(root, 'system.slice', scope, file),
    join(root, 'docker', containerId, file),
    join(root, controller, 'docker', containerId, file),
    join(root, controller, 'system.slice', scope, file),
  ];
}

/**
 * Reads a container's cgroup files from the host. The first candidate that exists is remembered per
 * container, so later reads are one file read.
 */
export class HostCgroup {
  private readonly found = new Map<string, string | null>();

  constructor(
    private readonly containerId: string,
    private readonly root = '/sys/fs/cgroup',
  ) {}

  /** The file's text, or null when the host does not show this container's cgroup. */
  async read(controller: CgroupController, file: string): Promise<string | null> {
    const key = `${controller}/${file}`;
    const known = this.found.get(key);
    if (known === null) return null;
    const candidates =
      known === undefined ? hostCgroupPaths(this.containerId, controller, file, this.root) : [known];
    for (const path of candidates) {
      try {
        const text = await readFile(path, 'utf8');
        this.found.set(key, path);
        return text;
      } catch {
        // Not this layout.
      }
    }
    // Absent everywhere: the layout is not one of these (or the container's cgroup is gone).
    if (known === undefined) this.found.set(key, null);
    return null;
  }

  /** A counter line (`max 3`, `oom_kill 1`) of a cgroup file, or null when it cannot be read. */
  async counter(controller: CgroupController, file: string, name: string): Promise<number | null> {
    const text = await this.read(controller, file);
    const m = text === null ? null : new RegExp(`^${name} (\\d+)$`, 'm').exec(text);
    return m?.[1] === undefined ? null : Number(m[1]);
  }
}
