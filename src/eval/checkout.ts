import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { git } from '../cli/workspace-copy.js';

/**
 * Host checkouts of a task's repository at its base commit, in private temp folders: what the agent
 * starts from, and what grading applies the patches to. Only this process writes them (no sandbox
 * ever sees these folders: the sandbox gets a copy, see cli/workspace.ts).
 */

export interface Checkout {
  readonly dir: string;
  cleanup(): Promise<void>;
}

const IDENTITY = ['-c', 'user.name=issue-agent eval', '-c', 'user.email=eval@issue-agent.invalid'];

/** A clone of `repo` (a local repository) with `commit` checked out, detached. */
export async function checkoutAt(repo: string, commit: string): Promise<Checkout> {
  const parent = await mkdtemp(join(tmpdir(), 'ia-eval-'));
  const dir = join(parent, 'repo');
  const cleanup = (): Promise<void> => rm(parent, { recursive: true, force: true });
  try {
    await git(['-c', 'protocol.file.allow=always', 'clone', '--quiet', '--no-checkout', '--', repo, dir]);
    await git(['-C', dir, 'checkout', '--quiet', '--detach', `${commit}^{commit}`]);
    return { dir, cleanup };
  } catch (error) {
    await cleanup();
    throw error;
  }
}

export type ApplyOutcome = { readonly ok: true } | { readonly ok: false; readonly reason: string };

/** `git apply` of a patch to the checkout's working tree (never above it: git refuses such paths). */
export async function applyPatch(dir: string, patch: string): Promise<ApplyOutcome> {
  if (patch.trim() === '') return { ok: true };
  try {
    await git(['-C', dir, 'apply', '--whitespace=nowarn', '-'], { input: Buffer.from(patch) });
    return { ok: true };
  } catch (error) {
    return { ok: false, reason: error instanceof Error ? error.message : String(error) };
  }
}

/** The paths a unified diff touches (both sides of a rename), without the a/ b/ prefixes. */
export function patchPaths(patch: string): string[] {
  const paths = new Set<string>();
  for (const line of patch.split('\n')) {
    const m = /^(?:---|\+\+\+) (?:[ab]\/)?(.+?)\t?$/.exec(line);
    if (m?.[1] !== undefined && m[1] !== '/dev/null') paths.add(m[1]);
  }
  return [...paths];
}

/**
 * As SWE-bench does before its test patch: the files the test patch touches go back to their state
 * at the base commit (whatever the model did to them), then the test patch is applied.
 */
export async function applyTestPatch(dir: string, base: string, testPatch: string): Promise<ApplyOutcome> {
  const atBase = new Set(
    (await git(['-C', dir, 'ls-tree', '-r', '-z', '--name-only', base])).split('\0').filter((p) => p !== ''),
  );
  for (const path of patchPaths(testPatch)) {
    if (path.startsWith('/') || path.split('/').includes('..')) {
      return { ok: false, reason: `the test patch names a path outside the repository: ${path}` };
    }
    if (atBase.has(path)) await git(['-C', dir, 'checkout', '--quiet', base, '--', path]);
    else await rm(join(dir, path), { force: true });
  }
  return applyPatch(dir, testPatch);
}

/** Commits the working tree (the sandbox's copy takes the committed state and untracked files). */
export async function commitAll(dir: string, message: string): Promise<void> {
  await git(['-C', dir, 'add', '-A']);
  await git(['-C', dir, ...IDENTITY, 'commit', '--quiet', '--allow-empty', '--no-verify', '-m', message]);
}
