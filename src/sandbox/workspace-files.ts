import { constants } from 'node:fs';
import { lstat, mkdir, open, readdir, realpath, stat, chown, unlink } from 'node:fs/promises';
import { dirname, isAbsolute, join, normalize, relative, resolve, sep } from 'node:path';

/** A path the file tools refused, with a message written for the model. */
export class PathRefused extends Error {
  override readonly name = 'PathRefused';
}

export interface ResolvedPath {
  /** Absolute path on the host. */
  readonly host: string;
  /** Path relative to the workspace root, with forward slashes ('.' for the root). */
  readonly rel: string;
}

/**
 * File access confined to one workspace directory on the host. Every path is resolved against the
 * workspace root; `..`, absolute paths elsewhere and symbolic links whose target lies outside are
 * refused, and the final component is opened with O_NOFOLLOW so a link swapped in after the check is
 * not followed either. Paths may also be given as the sandbox sees them (e.g. /workspace/src/a.ts).
 */
export class WorkspaceFiles {
  private constructor(
    readonly root: string,
    private readonly sandboxRoot: string,
    private readonly owner: { uid: number; gid: number },
  ) {}

  static async open(hostRoot: string, sandboxRoot: string): Promise<WorkspaceFiles> {
    const root = await realpath(hostRoot);
    const s = await stat(root);
    return new WorkspaceFiles(root, sandboxRoot, { uid: s.uid, gid: s.gid });
  }

  async resolve(path: string): Promise<ResolvedPath> {
    if (path.includes('\0')) throw new PathRefused('the path contains a NUL byte');
    let candidate: string;
    if (isAbsolute(path)) {
      const n = normalize(path);
      if (n === this.sandboxRoot || n.startsWith(this.sandboxRoot + sep)) {
        candidate = join(this.root, n.slice(this.sandboxRoot.length));
      } else if (n === this.root || n.startsWith(this.root + sep)) {
        candidate = n;
      } else {
        throw new PathRefused(
          `${path} is outside the workspace; use a path relative to the workspace root (${this.sandboxRoot})`,
        );
      }
    } else {
      candidate = resolve(this.root, path);
    }
    if (!this.inside(candidate)) {
      throw new PathRefused(`${path} points outside the workspace; only files inside it can be used`);
    }
    // Resolve links on the longest existing prefix; a link anywhere on the way that leads out is refused.
    let existing = candidate;
    let rest = '';
    for (;;) {
      try {
        const real = await realpath(existing);
        if (!this.inside(real)) {
          throw new PathRefused(
            `${path} is a symbolic link (or inside one) that leads outside the workspace`,
          );
        }
        const host = rest === '' ? real : join(real, rest);
        return { host, rel: relative(this.root, host).split(sep).join('/') || '.' };
      } catch (error) {
        if (error instanceof PathRefused) throw error;
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
        const parent = dirname(existing);
        if (parent === existing) throw error;
        rest = rest === '' ? relative(parent, existing) : join(relative(parent, existing), rest);
        existing = parent;
      }
    }
  }

  /** Reads a regular file, refusing links at the last component. */
  async readFile(path: ResolvedPath): Promise<Buffer> {
    const handle = await open(path.host, constants.O_RDONLY | constants.O_NOFOLLOW);
    try {
      return await handle.readFile();
    } finally {
      await handle.close();
    }
  }

  /** Writes a file (creating parent directories inside the workspace), refusing links at the last component. */
  async writeFile(path: ResolvedPath, data: string): Promise<void> {
    const dir = dirname(path.host);
    await this.mkdirs(dir);
    const existed = await lstat(path.host).then(
      () => true,
      () => false,
    );
    const handle = await open(
      path.host,
      constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW,
      0o644,
    );
    try {
      await handle.writeFile(data);
    } finally {
      await handle.close();
    }
    if (!existed) await this.giveToOwner(path.host);
  }

  /** Removes a file (a link is removed itself, never its target). */
  async remove(path: ResolvedPath): Promise<void> {
    await unlink(path.host);
  }

  async kind(path: ResolvedPath): Promise<'file' | 'directory' | 'other' | 'missing'> {
    try {
      const s = await lstat(path.host);
      if (s.isFile()) return 'file';
      if (s.isDirectory()) return 'directory';
      return 'other';
    } catch {
      return 'missing';
    }
  }

  /** Up to `limit` entries below a directory, two levels deep, skipping VCS and dependency folders. */
  async list(path: ResolvedPath, limit = 400): Promise<string[]> {
    const out: string[] = [];
    const skip = new Set(['.git', 'node_modules', '__pycache__', '.venv', 'target', 'dist']);
    const walk = async (dir: string, depth: number): Promise<void> => {
      const entries = await readdir(dir, { withFileTypes: true });
      entries.sort((a, b) => a.name.localeCompare(b.name));
      for (const e of entries) {
        if (out.length >= limit) return;
        const full = join(dir, e.name);
        const rel = relative(this.root, full).split(sep).join('/');
        out.push(e.isDirectory() ? `${rel}/` : rel);
        if (e.isDirectory() && depth < 2 && !skip.has(e.name)) await walk(full, depth + 1);
      }
    };
    await walk(path.host, 1);
    return out;
  }

  private inside(p: string): boolean {
    return p === this.root || p.startsWith(this.root + sep);
  }

  private async mkdirs(dir: string): Promise<void> {
    if (!this.inside(dir)) throw new PathRefused('the directory is outside the workspace');
    const missing: string[] = [];
    let d = dir;
    while (this.inside(d)) {
      const exists = await lstat(d).then(
        (s) => {
          if (!s.isDirectory())
            throw new PathRefused(`${relative(this.root, d)} exists and is not a directory`);
          return true;
        },
        () => false,
      );
      if (exists) break;
      missing.push(d);
      d = dirname(d);
    }
    for (const m of missing.reverse()) {
      await mkdir(m);
      await this.giveToOwner(m);
    }
  }

  /**
   * New files and directories get the workspace owner, so a sandbox running as that user (the Docker
   * sandbox runs as the workspace's uid) can change what the host created for it.
   */
  private async giveToOwner(p: string): Promise<void> {
    if (process.getuid?.() !== 0) return;
    await chown(p, this.owner.uid, this.owner.gid).catch(() => undefined);
  }
}
