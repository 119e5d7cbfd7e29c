import { createHash, randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { mkdir, open, readdir, readFile, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { z } from 'zod';

/**
 * The sandbox's `.git` (HEAD detached at a commit, a given depth of history, origin the public URL)
 * kept per repository mirror (`<mirror>.histories/<commit>-<depth>-<url hash>`), so a second job on the same base commit copies a few files instead of
 * packing tens of thousands of objects again. Invariants:
 * - it lives beside the mirror, under the mirror root that no sandbox is given, per installation like
 *   the mirror itself, and is dropped with the mirror when that is made again;
 * - an entry is written whole or not at all (built under a temporary name, then renamed) and holds a
 *   manifest with the SHA-256 of every file: a copy is checked against it file by file, and any
 *   difference (a missing, extra, changed or non-regular file) discards the entry, so a damaged
 *   entry costs one rebuild, never a broken workspace;
 * - the host runs no git in an entry: it only reads bytes that it wrote itself. It may run git in a
 *   copy, once the copy was checked against the manifest and before any sandbox has it (fetching a
 *   newer commit onto an older entry's copy, see historyBases);
 * - at most KEEP entries per repository: a new one removes the least recently used.
 */
const KEEP = 4;

const manifestSchema = z.object({
  schemaVersion: z.literal(1),
  url: z.string().min(1),
  /** Path relative to the entry's `.git` (forward slashes) → [mode bits, SHA-256]. */
  files: z.record(z.string(), z.tuple([z.number().int(), z.string().regex(/^[0-9a-f]{64}$/)])),
  /** Every folder, empty ones included. */
  dirs: z.array(z.string()),
});

/** Where a mirror's cached histories live. */
export function historyCacheDir(mirror: string): string {
  return `${mirror.replace(/[\\/]+$/, '')}.histories`;
}

/**
 * The entry name for `commit` at `depth` with origin `url` (a renamed repository keeps its mirror
 * but gets other entries). Only bounded histories are kept: a whole history is a copy of the packs,
 * which a local clone already makes cheaply.
 */
export function historyKey(commit: string, depth: number, url: string): string {
  if (!/^[0-9a-f]{40,64}$/.test(commit)) throw new Error(`unexpected commit id ${JSON.stringify(commit)}`);
  return `${commit}-${String(depth)}-${createHash('sha256').update(url).digest('hex').slice(0, 12)}`;
}

/**
 * The kept entries of `depth` and `url` but `except`, most recently used first: the commits a new
 * `.git` may be fetched onto (HostGit.historyForSandbox), so only what is new is packed.
 */
export async function historyBases(
  cacheDir: string,
  depth: number,
  url: string,
  except: string,
): Promise<{ readonly key: string; readonly commit: string; readonly packs: number }[]> {
  const suffix = historyKey('0'.repeat(40), depth, url).slice(40);
  let names: string[];
  try {
    names = await readdir(cacheDir);
  } catch {
    return [];
  }
  const found: {
    readonly key: string;
    readonly commit: string;
    readonly packs: number;
    readonly at: number;
  }[] = [];
  for (const name of names) {
    const commit = name.slice(0, name.length - suffix.length);
    if (name === except || !name.endsWith(suffix) || !/^[0-9a-f]{40,64}$/.test(commit)) continue;
    try {
      const at = (await stat(join(cacheDir, name))).mtimeMs;
      // The packs the manifest lists (each fetch onto an entry adds one); an unreadable manifest is
      // dealt with when the entry is copied.
      const manifest = manifestSchema.safeParse(
        JSON.parse(await readFile(join(cacheDir, name, 'manifest.json'), 'utf8')),
      );
      const packs = manifest.success
        ? Object.keys(manifest.data.files).filter((f) => /^objects\/pack\/[^/]+\.pack$/.test(f)).length
        : 0;
      found.push({ key: name, commit, packs, at });
    } catch {
      // removed meanwhile, or no readable manifest
    }
  }
  return found.sort((a, b) => b.at - a.at).map(({ key, commit, packs }) => ({ key, commit, packs }));
}

/**
 * Every regular file and every folder under `root` (relative, `/`-separated, sorted); anything else
 * (a link, a socket…) is refused. Folders count: git needs its empty ones (`refs/heads`…).
 */
async function listTree(root: string): Promise<{ readonly files: string[]; readonly dirs: string[] }> {
  const files: string[] = [];
  const dirs: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      const rel = relative(root, path).split(sep).join('/');
      if (entry.isDirectory()) {
        dirs.push(rel);
        await walk(path);
      } else if (entry.isFile()) files.push(rel);
      else throw new Error(`${rel} is neither a file nor a folder`);
    }
  };
  await walk(root);
  return { files: files.sort(), dirs: dirs.sort() };
}

const same = (a: readonly string[], b: readonly string[]): boolean =>
  a.length === b.length && a.every((x, i) => x === b[i]);

/**
 * Streams the regular file `from` (never through a link) to a new file `to` (`wx`: never over an
 * existing one) with `mode`, and returns the SHA-256 of what was written. Read errors are tagged
 * `source`, write errors `dest`, so a failure on the destination's disk is not taken for damage.
 */
async function copyHashed(
  from: string,
  to: string,
  mode: number | null,
): Promise<{ readonly sha256: string; readonly mode: number }> {
  let handle;
  try {
    handle = await open(from, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    throw new CopyError('source', error);
  }
  try {
    const st = await handle.stat();
    if (!st.isFile()) throw new CopyError('source', new Error(`${from} is not a regular file`));
    const fileMode = mode ?? st.mode & 0o777;
    const hash = createHash('sha256');
    let out;
    try {
      out = await open(to, 'wx', fileMode);
    } catch (error) {
      throw new CopyError('dest', error);
    }
    try {
      const buffer = Buffer.allocUnsafe(1024 * 1024);
      for (;;) {
        let n: number;
        try {
          ({ bytesRead: n } = await handle.read(buffer, 0, buffer.length, null));
        } catch (error) {
          throw new CopyError('source', error);
        }
        if (n === 0) break;
        hash.update(buffer.subarray(0, n));
        try {
          let done = 0;
          while (done < n) done += (await out.write(buffer, done, n - done)).bytesWritten;
        } catch (error) {
          throw new CopyError('dest', error);
        }
      }
    } finally {
      await out.close();
    }
    return { sha256: hash.digest('hex'), mode: fileMode };
  } finally {
    await handle.close();
  }
}

class CopyError extends Error {
  constructor(
    readonly side: 'source' | 'dest',
    cause: unknown,
  ) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
  }
  get code(): string | undefined {
    return (this.cause as NodeJS.ErrnoException | undefined)?.code;
  }
}

/**
 * Copies the cached `.git` of `key` to `destDir/.git` (destDir is made), checked file by file against
 * its manifest. False, with nothing left in destDir, when there is no usable entry: none, or damaged
 * (anything that differs from the manifest: the entry is removed). An error writing destDir is
 * thrown, and the entry kept.
 */
export async function copyCachedHistory(
  cacheDir: string,
  key: string,
  url: string,
  destDir: string,
): Promise<boolean> {
  const entry = join(cacheDir, key);
  const damaged = async (): Promise<false> => {
    await rm(destDir, { recursive: true, force: true });
    await rm(entry, { recursive: true, force: true });
    return false;
  };
  let manifest: z.infer<typeof manifestSchema>;
  try {
    const parsed = manifestSchema.safeParse(JSON.parse(await readFile(join(entry, 'manifest.json'), 'utf8')));
    if (!parsed.success) return await damaged();
    manifest = parsed.data;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
    return await damaged();
  }
  if (manifest.url !== url) return await damaged();
  const gitDir = join(entry, '.git');
  let tree: { readonly files: string[]; readonly dirs: string[] };
  try {
    tree = await listTree(gitDir);
  } catch (error) {
    // Gone between the manifest and the files (evicted by another job): not damage.
    return (error as NodeJS.ErrnoException).code === 'ENOENT' ? false : await damaged();
  }
  if (!same(tree.files, Object.keys(manifest.files).sort()) || !same(tree.dirs, [...manifest.dirs].sort())) {
    return await damaged();
  }
  await rm(destDir, { recursive: true, force: true });
  try {
    for (const dir of ['', ...tree.dirs]) await mkdir(join(destDir, '.git', dir), { recursive: true });
    for (const name of tree.files) {
      const [mode, hash] = manifest.files[name] ?? [0, ''];
      const copied = await copyHashed(join(gitDir, name), join(destDir, '.git', name), mode);
      if (copied.sha256 !== hash) return await damaged();
    }
  } catch (error) {
    await rm(destDir, { recursive: true, force: true });
    if (error instanceof CopyError && error.side === 'source') {
      return error.code === 'ENOENT' ? false : await damaged();
    }
    throw error;
  }
  // Used now: eviction keeps the most recently used entries.
  const now = new Date();
  await utimes(entry, now, now).catch(() => undefined);
  return true;
}

/**
 * Keeps a copy of `srcDir/.git` (just made by the host, before any sandbox saw it) as `key`. Losing
 * a race with another job storing the same key is fine: theirs is the same content. Failures are the
 * caller's to log; the job does not depend on the cache.
 */
export async function storeHistory(
  cacheDir: string,
  key: string,
  url: string,
  srcDir: string,
): Promise<void> {
  await mkdir(cacheDir, { recursive: true, mode: 0o700 });
  const tmp = join(cacheDir, `.tmp-${process.pid}-${randomBytes(4).toString('hex')}`);
  try {
    const src = join(srcDir, '.git');
    const files: Record<string, [number, string]> = {};
    const tree = await listTree(src);
    for (const dir of ['', ...tree.dirs]) await mkdir(join(tmp, '.git', dir), { recursive: true });
    for (const name of tree.files) {
      const copied = await copyHashed(join(src, name), join(tmp, '.git', name), null);
      files[name] = [copied.mode, copied.sha256];
    }
    const manifest: z.infer<typeof manifestSchema> = { schemaVersion: 1, url, files, dirs: tree.dirs };
    await writeFile(join(tmp, 'manifest.json'), `${JSON.stringify(manifest)}\n`, { mode: 0o600 });
    try {
      await rename(tmp, join(cacheDir, key));
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw error;
    }
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
  await evict(cacheDir);
}

/** Drops every entry (the mirror was made again: nothing made from the old one is kept). */
export async function clearHistories(cacheDir: string): Promise<void> {
  await rm(cacheDir, { recursive: true, force: true });
}

async function evict(cacheDir: string): Promise<void> {
  const entries: { readonly name: string; readonly at: number }[] = [];
  for (const name of await readdir(cacheDir)) {
    let at: number;
    try {
      at = (await stat(join(cacheDir, name))).mtimeMs;
    } catch {
      continue; // removed by another job meanwhile
    }
    // Another job's entry in the making, unless its process died an hour ago.
    if (name.startsWith('.')) {
      if (Date.now() - at > 3_600_000) await rm(join(cacheDir, name), { recursive: true, force: true });
      continue;
    }
    entries.push({ name, at });
  }
  entries.sort((a, b) => b.at - a.at);
  for (const old of entries.slice(KEEP)) await rm(join(cacheDir, old.name), { recursive: true, force: true });
}
