import { execFile, spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { lstat, mkdir, rm, unlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join, relative, resolve, sep } from 'node:path';
import { holdPath, releasePath } from '../sandbox/held-paths.js';

/**
 * A local checkout (the CLI's, an eval task's) is never handed to the sandbox: the agent works on a
 * copy (like the worker does), and its change comes back as a diff (data from the event log), which
 * the CLI applies to the user's working tree by host git, refusing anything under `.git`
 * (cli/apply-change.ts). So nothing the agent writes can configure the user's git (a
 * `core.fsmonitor` in `.git/config` would run on their next `git status`) or reach past the
 * working tree.
 */

/** What host git on a checkout may not take from any config: run nothing, ask nothing, fetch nothing. */
const PINS = [
  '-c',
  'core.fsmonitor=false',
  '-c',
  'core.hooksPath=/dev/null',
  '-c',
  'core.sshCommand=/bin/false',
  '-c',
  'diff.external=',
  '-c',
  'commit.gpgSign=false',
  '-c',
  'gpg.program=/bin/false',
  '-c',
  'protocol.allow=never',
  '-c',
  'protocol.file.allow=never',
  '-c',
  'core.quotepath=off',
];

function gitEnv(): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: '/nonexistent',
    XDG_CONFIG_HOME: '/nonexistent',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_TERMINAL_PROMPT: '0',
    LC_ALL: 'C',
  };
}

export class WorkspaceCopyError extends Error {
  override readonly name = 'WorkspaceCopyError';
}

/** git on the host with the pinned, hardened configuration (no hooks, no user config, no remotes). */
export function git(args: readonly string[], options: { input?: Buffer } = {}): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    const child = execFile(
      'git',
      [...PINS, ...args],
      { env: gitEnv(), encoding: 'buffer', maxBuffer: 512 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error === null) {
          resolvePromise(stdout.toString('utf8'));
          return;
        }
        reject(
          new WorkspaceCopyError(
            `git ${args.find((a) => !a.startsWith('-')) ?? ''} failed: ${stderr.toString('utf8').trim().split('\n').slice(-3).join(' | ') || error.message}`,
          ),
        );
      },
    );
    if (options.input !== undefined) child.stdin?.end(options.input);
  });
}

export interface CheckoutCopy {
  /** The copy's root: a fresh clone with the user's working tree laid over it. */
  readonly dir: string;
  /** Removes the copy (after the sandbox is closed). */
  cleanup(): Promise<void>;
}

/**
 * A private parent for the copies: `<tmp>/issue-agent-<uid>`, created 0700 and checked to be
 * a real directory of ours (a predictable name in a shared /tmp could be someone else's link).
 */
async function privateRoot(): Promise<string> {
  const root = join(tmpdir(), `issue-agent-${String(process.getuid?.() ?? 'user')}`);
  await mkdir(root, { mode: 0o700 }).catch((error: unknown) => {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  });
  const st = await lstat(root);
  if (
    !st.isDirectory() ||
    (process.getuid !== undefined && st.uid !== process.getuid()) ||
    (st.mode & 0o077) !== 0
  )
    throw new WorkspaceCopyError(`${root} is not a private directory of this user; remove it and try again`);
  return root;
}

/**
 * A copy of the checkout at `repo` for the sandbox: a `--no-hardlinks` clone at the checkout's HEAD
 * (its own object store and a config the host wrote), then the user's working tree as it is now —
 * tracked files with their uncommitted changes, untracked files that are not ignored, deletions —
 * so uncommitted changes the user allowed in are part of the base, as before. Ignored files
 * (`node_modules`, `.env`) are not copied: a secret in an ignored file stays with the user.
 *
 * The copy's path depends only on `key` (the conversation), so a resumed run sees the workspace at
 * the same path as before and its prompt stays the same; a copy left by a killed run is replaced.
 */
export async function copyCheckout(repo: string, key: string): Promise<CheckoutCopy> {
  const place = await copyPlace(key);
  const { dir } = place;
  const cleanup = (): Promise<void> => place.cleanup();
  try {
    const head = (await git(['-C', repo, 'rev-parse', '--verify', 'HEAD^{commit}'])).trim();
    await git(['-c', 'protocol.file.allow=always', 'clone', '--quiet', '--no-hardlinks', '--', repo, dir]);
    await git(['-C', dir, 'checkout', '--quiet', '--detach', head]);
    const dirty = (await git(['-C', repo, 'status', '--porcelain', '-z'])) !== '';
    if (dirty) {
      const present = (
        await git(['-C', repo, 'ls-files', '-z', '--cached', '--others', '--exclude-standard'])
      )
        .split('\0')
        .filter((p) => p !== '');
      const deleted = new Set(
        (await git(['-C', repo, 'ls-files', '-z', '--deleted'])).split('\0').filter((p) => p !== ''),
      );
      await tarCopy(
        repo,
        dir,
        present.filter((p) => !deleted.has(p)),
      );
      for (const p of deleted) await unlink(join(dir, p)).catch(() => undefined);
    }
    return { dir, cleanup };
  } catch (error) {
    await cleanup();
    throw error;
  }
}

/**
 * Where the copy for `key` goes: `<private root>/cli-<key>/repo`, not created yet, its parent made
 * fresh (whatever a killed run left there is removed). Stable per key (see copyCheckout).
 */
export async function copyPlace(key: string): Promise<CheckoutCopy> {
  if (!/^[A-Za-z0-9-]+$/.test(key)) throw new WorkspaceCopyError(`unexpected run id ${key}`);
  const parent = join(await privateRoot(), `cli-${key}`);
  await rm(parent, { recursive: true, force: true });
  await mkdir(parent, { mode: 0o700 });
  holdPath(parent);
  return {
    dir: join(parent, 'repo'),
    cleanup: async () => {
      await rm(parent, { recursive: true, force: true });
      releasePath(parent);
    },
  };
}

/** `tar` from one tree into another for a list of paths; links are copied as links. */
async function tarCopy(from: string, to: string, paths: readonly string[]): Promise<void> {
  if (paths.length === 0) return;
  const pack = spawn('tar', ['-c', '-f', '-', '--null', '--no-recursion', '-T', '-'], {
    stdio: ['pipe', 'pipe', 'pipe'],
    cwd: from,
  });
  const unpack = spawn('tar', ['-x', '-f', '-', '-C', to], { stdio: ['pipe', 'ignore', 'pipe'] });
  pack.stdout.pipe(unpack.stdin);
  pack.stdin.end(Buffer.from(paths.map((p) => `${p}\0`).join(''), 'utf8'));
  const errors: string[] = [];
  pack.stderr.on('data', (c: Buffer) => errors.push(c.toString('utf8')));
  unpack.stderr.on('data', (c: Buffer) => errors.push(c.toString('utf8')));
  const codes = await Promise.all(
    [pack, unpack].map(
      (child) =>
        new Promise<number | null>((r) => {
          child.once('error', () => {
            r(null);
          });
          child.once('close', r);
        }),
    ),
  );
  if (codes.some((c) => c !== 0))
    throw new WorkspaceCopyError(`could not copy the working tree: ${errors.join(' ').trim().slice(0, 500)}`);
}

/**
 * What an isolated local sandbox over a checkout's copy hides: the user's checkout (the sandbox has its own
 * copy), the trajectory and runs folders, and every entry of the home folder except those holding a
 * PATH directory (toolchains such as ~/.nvm stay usable; ~/.ssh, ~/.aws, ~/.config, credentials do
 * not). Paths on the way to the copy are never hidden.
 */
export function hostPathsToHide(options: {
  readonly repo: string;
  readonly copy: string;
  readonly trajectory: string;
  readonly runsDir: string;
  readonly home: string | undefined;
  readonly path: string;
  readonly extra?: readonly string[];
}): string[] {
  const copy = resolve(options.copy);
  const out = new Set<string>([
    resolve(options.repo),
    resolve(options.trajectory),
    resolve(options.runsDir),
    ...(options.extra ?? []).filter((p) => existsSync(p)).map((p) => resolve(p)),
  ]);
  if (options.home !== undefined && options.home !== '' && options.home !== '/') {
    const home = resolve(options.home);
    const keep = options.path
      .split(delimiter)
      .filter((p) => p !== '')
      .map((p) => resolve(p))
      .filter((p) => inside(p, home))
      .map((p) => relative(home, p).split(sep)[0] ?? '');
    let names: string[] = [];
    try {
      names = readdirSync(home);
    } catch {
      names = [];
    }
    for (const name of names) if (!keep.includes(name)) out.add(join(home, name));
  }
  // Never hide the copy or a folder that contains it.
  return [...out].filter((p) => !inside(copy, p)).sort();
}

function inside(path: string, dir: string): boolean {
  const r = relative(dir, path);
  return r === '' || (!r.startsWith('..') && !r.startsWith(sep) && r !== '..');
}
