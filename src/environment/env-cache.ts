import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream, type ReadStream } from 'node:fs';
import { lstat, mkdir, readdir, rename, rm, stat, utimes } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { holdPath, releasePath } from '../sandbox/held-paths.js';

/**
 * Prepared environments (what setup produced: `node_modules`, `.venv`), kept per repository as tar
 * archives on the host and reused by later jobs whose inputs hash the same.
 *
 * - An entry is bytes to the host: it is written from a sandbox's tar stream and only ever unpacked
 *   inside another sandbox, as the sandbox user. Each job unpacks its own copy, so no job can change
 *   what another job gets (no shared files, no hardlinks).
 * - Entries live under a directory named by a hash of the repository key, and the key of an entry
 *   is a hash that includes that repository key too: another repository never finds an entry.
 * - Total size is capped; the least recently used entries go first (a hit refreshes the mtime).
 * - The directory is the worker's own (0700); no sandbox ever sees it.
 */
export class EnvironmentCache {
  private readonly root: string;

  constructor(
    root: string,
    private readonly maxBytes: number,
  ) {
    // Absolute: an entry's path is also a bind mount's source, which the engine needs absolute.
    this.root = resolve(root);
  }

  /** The key of an entry: every input that changes what setup produces, and the repository. */
  static key(repoKey: string, inputs: unknown): string {
    return createHash('sha256')
      .update(JSON.stringify({ v: 1, repo: repoKey, inputs }))
      .digest('hex');
  }

  private dirOf(repoKey: string): string {
    return join(this.root, createHash('sha256').update(repoKey).digest('hex').slice(0, 32));
  }

  private pathOf(repoKey: string, key: string): string {
    if (!/^[0-9a-f]{64}$/.test(key)) throw new Error(`not a cache key: ${key}`);
    return join(this.dirOf(repoKey), `${key}.tar`);
  }

  /**
   * An open stream of the entry (opened now, so a concurrent eviction cannot take it away), or null.
   * `path` is for a read-only bind mount into the sandbox (faster than the stream), given only when
   * the sandbox user can read the file; an eviction between now and the mount makes the container
   * fail to start, and the stream is the fallback.
   */
  async open(
    repoKey: string,
    key: string,
  ): Promise<{ stream: () => ReadStream; bytes: number; path: string | null } | null> {
    const path = this.pathOf(repoKey, key);
    let size: number;
    let mountable: boolean;
    try {
      const st = await lstat(path);
      if (!st.isFile()) return null;
      size = st.size;
      mountable = (st.mode & 0o004) !== 0;
    } catch {
      return null;
    }
    const now = new Date();
    await utimes(path, now, now).catch(() => undefined);
    const stream = createReadStream(path);
    await new Promise<void>((resolve, reject) => {
      stream.once('open', () => {
        resolve();
      });
      stream.once('error', reject);
    }).catch(() => undefined);
    if (stream.destroyed) return null;
    return { stream: () => stream, bytes: size, path: mountable ? path : null };
  }

  /**
   * Stores an entry written by `write` (false: nothing to store). Written to a temporary file and
   * renamed into place, so a reader never sees half an entry. Evicts afterwards.
   */
  async store(
    repoKey: string,
    key: string,
    write: (sink: Writable, maxBytes: number) => Promise<boolean>,
  ): Promise<number | null> {
    const dir = this.dirOf(repoKey);
    await mkdir(this.root, { recursive: true, mode: 0o700 });
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const final = this.pathOf(repoKey, key);
    const tmp = `${final}.${randomBytes(6).toString('hex')}.tmp`;
    // Readable by all: the folders above are this process's alone (0700), so the only other reader
    // is the sandbox of a later job of the same repository, through a read-only bind mount.
    const sink = createWriteStream(holdPath(tmp), { flags: 'wx', mode: 0o644 });
    let stored = false;
    try {
      const wrote = await write(sink, this.maxBytes);
      sink.end();
      await finished(sink);
      if (!wrote) return null;
      await rename(tmp, final);
      stored = true;
      const size = (await stat(final)).size;
      await this.evict();
      return size;
    } finally {
      if (!stored) {
        sink.destroy();
        await rm(tmp, { force: true });
      }
      releasePath(tmp);
    }
  }

  /** Removes least recently used entries until the total fits the cap. */
  async evict(): Promise<void> {
    const entries: { path: string; size: number; used: number }[] = [];
    let repos: string[];
    try {
      repos = await readdir(this.root);
    } catch {
      return;
    }
    for (const repo of repos) {
      let names: string[];
      try {
        names = await readdir(join(this.root, repo));
      } catch {
        continue;
      }
      for (const name of names) {
        if (!name.endsWith('.tar')) continue;
        const path = join(this.root, repo, name);
        try {
          const st = await lstat(path);
          if (st.isFile()) entries.push({ path, size: st.size, used: st.mtimeMs });
        } catch {
          // Removed meanwhile.
        }
      }
    }
    let total = entries.reduce((n, e) => n + e.size, 0);
    entries.sort((a, b) => a.used - b.used);
    for (const e of entries) {
      if (total <= this.maxBytes) break;
      await rm(e.path, { force: true });
      total -= e.size;
    }
  }
}
