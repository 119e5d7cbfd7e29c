import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { lstat, open, readFile, rename, writeFile } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { z } from 'zod';

/**
 * Where the host keeps its pristine clones, and the seal that says each one is still what the host
 * wrote. Invariants:
 * - the pristine root is a sibling of the jobs folder (`<workDir>/pristine/<jobId>` beside
 *   `<workDir>/jobs/<jobId>/workspace`), never inside a job folder: no path the sandbox is given
 *   (its workspace, or anything under the job folder) leads to it;
 * - the seal (`<clone>.seal.json`, beside the clone, not inside it) records the SHA-256 of every
 *   file in `.git` that can make git run a program or read another file, taken right after the clone;
 *   a clone whose files differ from the seal is refused, never repaired (it was written by something
 *   other than the host, so nothing in it is trusted any more).
 * Trade-off: the seal lives beside the clone, so it protects against a writer that can reach the
 * clone's `.git` (a shared object store, a followed symlink) but not against one that can write the
 * whole pristine root; and it is a check before each command, not a lock, so a writer racing the
 * check could still win. The location and the sandbox's isolation are what keep the clone out of
 * reach; the seal turns a breach of them into a refused job instead of a program run on the host.
 */

/** The folder holding every job's pristine clone: `<parent of jobsDir>/pristine`. */
export function pristineRoot(jobsDir: string): string {
  return join(dirname(resolve(jobsDir)), 'pristine');
}

/** The job's pristine clone. Job ids are [A-Za-z0-9-] (see queues.ts); anything else is refused. */
export function pristineDir(jobsDir: string, jobId: string): string {
  if (!/^[A-Za-z0-9-]+$/.test(jobId)) throw new Error(`unexpected job id ${JSON.stringify(jobId)}`);
  return join(pristineRoot(jobsDir), jobId);
}

/**
 * The folder of the repository mirrors (`<parent of jobsDir>/mirrors`), beside the pristine clones
 * and like them never inside a job folder nor given to a sandbox.
 */
export function mirrorRoot(jobsDir: string): string {
  return join(dirname(resolve(jobsDir)), 'mirrors');
}

/** A repository's mirror, per installation: one installation's mirror never serves another's jobs. */
export function mirrorDir(jobsDir: string, installationId: number, repoId: number): string {
  if (!Number.isSafeInteger(installationId) || !Number.isSafeInteger(repoId)) {
    throw new Error('unexpected installation or repository id');
  }
  return join(mirrorRoot(jobsDir), `installation-${installationId}`, `repo-${repoId}.git`);
}

export function sealPath(dir: string): string {
  const abs = resolve(dir);
  return join(dirname(abs), `${basename(abs)}.seal.json`);
}

/**
 * Files under `.git` whose content decides what git runs or reads besides the repository itself:
 * the config (drivers, includes, URLs, helpers), a per-worktree config, a redirect of the whole
 * repository (`commondir`), attributes that name drivers, and alternate object stores. Absent ones
 * are recorded as absent and must stay so. (`hooks/` needs no seal: `core.hooksPath` is pinned.)
 */
const SEALED_FILES = [
  'config',
  'config.worktree',
  'commondir',
  'info/attributes',
  'objects/info/alternates',
] as const;

const sealSchema = z.object({
  schemaVersion: z.literal(1),
  /** The URL cloned from, which every remote command of this clone uses. */
  url: z.string().min(1),
  files: z.record(
    z.string(),
    z
      .string()
      .regex(/^[0-9a-f]{64}$/)
      .nullable(),
  ),
});

export type Seal = z.infer<typeof sealSchema>;

type Fingerprint = { readonly ok: true; readonly files: Record<string, string | null> } | Problem;
type Problem = { readonly ok: false; readonly problem: string };

/**
 * The clone's current fingerprint, or what makes it unusable (a `.git` that is not a plain folder…).
 * `bare`: the repository is `dir` itself (a mirror), not `dir/.git`.
 */
async function fingerprint(dir: string, bare = false): Promise<Fingerprint> {
  const gitDir = bare ? dir : join(dir, '.git');
  for (const [path, what] of [
    [dir, 'the clone'],
    [gitDir, 'its .git'],
  ] as const) {
    let st;
    try {
      st = await lstat(path);
    } catch {
      return { ok: false, problem: `${what} is missing` };
    }
    if (!st.isDirectory()) return { ok: false, problem: `${what} is not a plain folder` };
  }
  const files: Record<string, string | null> = {};
  for (const name of SEALED_FILES) {
    const r = await hashFile(join(gitDir, name));
    if (!r.ok) return { ok: false, problem: `.git/${name} ${r.problem}` };
    files[name] = r.sha256;
  }
  return { ok: true, files };
}

/** SHA-256 of a regular file, null if there is none; a symbolic link or anything else is refused. */
async function hashFile(
  path: string,
): Promise<{ readonly ok: true; readonly sha256: string | null } | Problem> {
  let handle;
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return { ok: true, sha256: null };
    return { ok: false, problem: code === 'ELOOP' ? 'is a symbolic link' : `cannot be read (${code})` };
  }
  try {
    if (!(await handle.stat()).isFile()) return { ok: false, problem: 'is not a regular file' };
    return {
      ok: true,
      sha256: createHash('sha256')
        .update(await handle.readFile())
        .digest('hex'),
    };
  } finally {
    await handle.close();
  }
}

/**
 * Records the clone as the host wrote it. Called right after `git clone` and before anything else
 * runs there; written to a temporary name and renamed, so a crash leaves a whole seal or none.
 */
export async function sealClone(dir: string, url: string, bare = false): Promise<Seal> {
  const now = await fingerprint(dir, bare);
  if (!now.ok) throw new Error(`cannot seal the clone at ${dir}: ${now.problem}`);
  const seal: Seal = { schemaVersion: 1, url, files: now.files };
  const path = sealPath(dir);
  const tmp = `${path}.tmp`;
  await writeFile(tmp, `${JSON.stringify(seal, null, 2)}\n`, { mode: 0o600 });
  await rename(tmp, path);
  return seal;
}

/** The seal, or null when there is none (never sealed, or a crash before the seal was written). */
export async function readSeal(dir: string): Promise<Seal | null> {
  let text: string;
  try {
    text = await readFile(sealPath(dir), 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  let json: unknown;
  try {
    json = JSON.parse(text) as unknown;
  } catch {
    json = null;
  }
  const parsed = sealSchema.safeParse(json);
  if (!parsed.success) throw new Error(`the seal of the clone at ${dir} is not a valid seal`);
  return parsed.data;
}

/**
 * Whether the clone is exactly as sealed: `{ ok: true, seal }`, or which file changed. A missing
 * seal is a problem too (a clone the host did not seal is not one it wrote).
 */
export async function checkSeal(
  dir: string,
  bare = false,
): Promise<{ readonly ok: true; readonly seal: Seal } | Problem> {
  let seal: Seal | null;
  try {
    seal = await readSeal(dir);
  } catch (error) {
    return { ok: false, problem: error instanceof Error ? error.message : String(error) };
  }
  if (seal === null)
    return { ok: false, problem: 'it has no seal (the host did not record it after cloning)' };
  const now = await fingerprint(dir, bare);
  if (!now.ok) return now;
  const changed = SEALED_FILES.filter((name) => (seal.files[name] ?? null) !== now.files[name]);
  if (changed.length > 0) {
    const what = changed.map(
      (name) => `.git/${name} ${describe(seal.files[name] ?? null, now.files[name] ?? null)}`,
    );
    return { ok: false, problem: what.join(', ') };
  }
  return { ok: true, seal };
}

function describe(was: string | null, is: string | null): string {
  if (was === null) return 'appeared';
  if (is === null) return 'was removed';
  return 'was changed';
}
