import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { copyPlace, git } from '../execution/checkout-copy.js';
import { holdPath, releasePath } from '../sandbox/held-paths.js';

/**
 * Host checkouts of a task's repository at its base commit, in private temp folders: what the agent
 * starts from, and what grading applies the patches to. Only this process writes them (no sandbox
 * ever sees these folders: the sandbox gets a copy, see execution/provision.ts).
 */

export interface Checkout {
  readonly dir: string;
  cleanup(): Promise<void>;
}

/**
 * A checkout of `repo` (a local repository) at `commit`, holding nothing later (with `key`: at the
 * place the CLI's workspace copy for that key goes, so the sandbox can use it as is), so `git log
 * --all` in the agent's copy cannot show the fix (or the tests that prove it) from the repository's
 * future. The base commit is on a branch of its own, `eval-base`; the checkout has its own object
 * store (the sandbox may write this .git, never the source repository's objects).
 *
 * A new repository fetches just that commit and its history (git's protocol v2 serves any commit),
 * so nothing later is ever copied: four git commands. Where that fails (a git without v2), a full
 * clone is pruned instead: every branch, tag and remote ref deleted, the reflogs expired and
 * unreachable objects collected: nine commands, and gc's own.
 */
export async function checkoutAt(repo: string, commit: string, key?: string): Promise<Checkout> {
  let dir: string;
  let cleanup: () => Promise<void>;
  if (key === undefined) {
    const parent = holdPath(await mkdtemp(join(tmpdir(), 'ia-eval-')));
    dir = join(parent, 'repo');
    cleanup = async () => {
      await rm(parent, { recursive: true, force: true });
      releasePath(parent);
    };
  } else {
    const place = await copyPlace(key);
    dir = place.dir;
    cleanup = () => place.cleanup();
  }
  try {
    try {
      await fetchCommit(repo, commit, dir);
    } catch {
      await rm(dir, { recursive: true, force: true });
      await cloneAndPrune(repo, commit, dir);
    }
    return { dir, cleanup };
  } catch (error) {
    await cleanup();
    throw error;
  }
}

async function fetchCommit(repo: string, commit: string, dir: string): Promise<void> {
  await git(['init', '--quiet', '--', dir]);
  await git([
    '-C',
    dir,
    '-c',
    'protocol.file.allow=always',
    '-c',
    'protocol.version=2',
    '-c',
    'maintenance.auto=false',
    'fetch',
    '--quiet',
    '--no-tags',
    '--no-write-fetch-head',
    '--',
    repo,
    `+${commit}:refs/heads/eval-base`,
  ]);
  await git(['-C', dir, 'checkout', '--quiet', 'eval-base']);
  // Made by this process and read by no one else yet: the one ref is the only one there is.
  const refs = (await git(['-C', dir, 'for-each-ref', '--format=%(refname)'])).split('\n').filter(Boolean);
  if (refs.length !== 1 || refs[0] !== 'refs/heads/eval-base')
    throw new Error(`unexpected refs after the fetch: ${refs.join(', ')}`);
}

async function cloneAndPrune(repo: string, commit: string, dir: string): Promise<void> {
  await git([
    '-c',
    'protocol.file.allow=always',
    'clone',
    '--quiet',
    '--no-hardlinks',
    '--no-checkout',
    '--',
    repo,
    dir,
  ]);
  await git(['-C', dir, 'checkout', '--quiet', '-B', 'eval-base', `${commit}^{commit}`]);
  const refs = (await git(['-C', dir, 'for-each-ref', '--format=%(refname)']))
    .split('\n')
    .filter((r) => r !== '' && r !== 'refs/heads/eval-base');
  for (const ref of refs) await git(['-C', dir, 'update-ref', '-d', ref]);
  await git(['-C', dir, 'remote', 'remove', 'origin']).catch(() => undefined);
  await git(['-C', dir, 'reflog', 'expire', '--expire=now', '--all']);
  await git(['-C', dir, 'gc', '--quiet', '--prune=now']);
}

/**
 * A second checkout like `from` at the place the CLI's workspace copy for `key` goes, copied in this
 * process: `from` must be one checkoutAt just made, which no sandbox has seen yet (so nothing in it
 * is a sandbox's link). Links are copied as links. One clone per task instead of two.
 */
export async function secondCheckout(from: Checkout, key: string): Promise<Checkout> {
  const place = await copyPlace(key);
  try {
    await cp(from.dir, place.dir, { recursive: true, verbatimSymlinks: true, preserveTimestamps: true });
    return { dir: place.dir, cleanup: () => place.cleanup() };
  } catch (error) {
    await place.cleanup();
    throw error;
  }
}

/** The paths a unified diff touches (both sides of a rename), without the a/ b/ prefixes. */
export function patchPaths(patch: string): string[] {
  const paths = new Set<string>();
  // Only in a file's header (between `diff --git` and its first hunk): a removed line `-- x` or an
  // added `++ y` inside a hunk is content.
  let header = false;
  for (const line of patch.split('\n')) {
    if (line.startsWith('diff --git ')) header = true;
    else if (line.startsWith('@@')) header = false;
    if (!header) continue;
    const m = /^(?:---|\+\+\+) (?:[ab]\/)?(.+?)\t?$/.exec(line);
    if (m?.[1] !== undefined && m[1] !== '/dev/null') paths.add(m[1]);
  }
  return [...paths];
}
