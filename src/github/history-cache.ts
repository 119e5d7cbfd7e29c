import { createHash, randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { mkdir, open, readdir, readFile, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { z } from 'zod';

/**
 * The sandbox's `.git` (HEAD detached at a commit, a given depth of history, origin the public URL)
 * kept per repository mirror, so a second job on the same base commit copies a few files instead of
 * packing tens of thousands of objects again. Invariants:
 * - it lives beside the mirror (`<mirror>.histories/<commit>-<depth>`), under the mirror root that no
 *   sandbox is given, per installation like the mirror itself;
 * - an entry is written whole or not at all (built under a temporary name, then renamed) and holds a
 *   manifest with the SHA-256 of every file: a copy is checked against it file by file, and any
 *   difference (a missing, extra, changed or non-regular file) discards the entry, so a damaged
 *   entry costs one rebuild, never a broken workspace;
 * - the host runs no git in an entry: it only reads bytes that it wrote itself, and the container's
 *   git is the only one that interprets them;
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

/** The entry name for `commit` at `depth` (null: the whole history). */
export function historyKey(commit: string, depth: number | null): string {
  if (!/^[0-9a-f]{40,64}$/.test(commit)) throw new Error(`unexpected commit id ${JSON.stringify(commit)}`);
  return `${commit}-${depth === null ? 'full' : String(depth)}`;
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

async function readRegular(path: string): Promise<{ readonly bytes: Buffer; readonly mode: number }> {
  const handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    const st = await handle.stat();
    if (!st.isFile()) throw new Error(`${path} is not a regular file`);
    return { bytes: await handle.readFile(), mode: st.mode & 0o777 };
  } finally {
    await handle.close();
  }
}

const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');

/**
 * Copies the cached `.git` of `key` to `destDir/.git` (destDir is made), checked file by file against
 * its manifest. False, with nothing left in destDir, when there is no usable entry (none, another URL,
 * or damaged: a damaged entry is removed).
 */
export async function copyCachedHistory(
  cacheDir: string,
  key: string,
  url: string,
  destDir: string,
): Promise<boolean> {
  const entry = join(cacheDir, key);
  let manifest: z.infer<typeof manifestSchema>;
  try {
    const parsed = manifestSchema.safeParse(JSON.parse(await readFile(join(entry, 'manifest.json'), 'utf8')));
    if (!parsed.success) throw new Error('not a valid manifest');
    manifest = parsed.data;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
    await rm(entry, { recursive: true, force: true });
    return false;
  }
  if (manifest.url !== url) return false;
  const gitDir = join(entry, '.git');
  try {
    const { files, dirs } = await listTree(gitDir);
    if (!same(files, Object.keys(manifest.files).sort()) || !same(dirs, [...manifest.dirs].sort())) {
      throw new Error('its files differ from its manifest');
    }
    await rm(destDir, { recursive: true, force: true });
    for (const dir of ['', ...dirs]) await mkdir(join(destDir, '.git', dir), { recursive: true });
    for (const name of files) {
      const { bytes } = await readRegular(join(gitDir, name));
      const [mode, hash] = manifest.files[name] ?? [0, ''];
      if (sha256(bytes) !== hash) throw new Error(`${name} changed`);
      await writeFile(join(destDir, '.git', name), bytes, { mode, flag: 'wx' });
    }
    // Used now: eviction keeps the most recently used entries.
    const now = new Date();
    await utimes(entry, now, now).catch(() => undefined);
    return true;
  } catch (error) {
    await rm(destDir, { recursive: true, force: true });
    // Gone between the manifest and the files (evicted by another job): not damage.
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') await rm(entry, { recursive: true, force: true });
    return false;
  }
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
      const { bytes, mode } = await readRegular(join(src, name));
      files[name] = [mode, sha256(bytes)];
      await writeFile(join(tmp, '.git', name), bytes, { mode });
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
