import { existsSync, lstatSync, readdirSync, realpathSync } from 'node:fs';
import { join, relative, resolve, sep } from 'node:path';

/**
 * Folders the file-system layout needs whatever else is hidden: covering one (a link's target, say)
 * would leave the sandbox without its tools or the host without its mounts. A path *inside* one of
 * them (a key file in /etc) is hidden as any other.
 */
const SYSTEM = new Set([
  '/',
  '/bin',
  '/boot',
  '/dev',
  '/etc',
  '/home',
  '/lib',
  '/lib32',
  '/lib64',
  '/libx32',
  '/media',
  '/mnt',
  '/nix',
  '/opt',
  '/proc',
  '/root',
  '/run',
  '/sbin',
  '/snap',
  '/srv',
  '/sys',
  '/tmp',
  '/usr',
  '/var',
]);

/** Where installed programs live: a link into one (`~/bin/node -> /usr/bin/node`) is left alone. */
const TOOL_TREES = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32', '/nix', '/snap'];

/**
 * Host paths an isolated local sandbox covers up (hide) around the folders it must still see
 * (`keep`: where its workspace lives, the folders of its PATH): for each root (a home folder, a
 * service's working folder), every entry except the paths down to the kept folders, and on those
 * paths every sibling too; a root that holds no kept folder is covered whole. Plus `extra` paths
 * (a key file), unless a kept folder is inside them.
 *
 * Symbolic links are followed, never mounted over (that would cover the link's target by another
 * name): a root, a kept folder or an extra path is taken as what it resolves to, and an entry that
 * is a link has its target hidden instead, unless that target is a system folder, lies where
 * programs are installed (/usr…), or holds a kept folder. So a key file that is a link into a secrets volume, or a `.env` that points elsewhere, is
 * hidden where its content is.
 */
export function hideAround(options: {
  readonly roots: readonly (string | null)[];
  readonly keep: readonly string[];
  readonly extra: readonly string[];
}): string[] {
  const keep = options.keep.map(real);
  const holdsKept = (p: string): boolean => keep.some((k) => isInside(k, p));
  const out = new Set<string>();
  const add = (p: string): void => {
    if (!existsSync(p)) return;
    if (lstatSync(p).isSymbolicLink()) {
      const target = real(p);
      const tool = TOOL_TREES.some((t) => isInside(target, t));
      if (!SYSTEM.has(target) && !tool && !holdsKept(target)) out.add(target);
      return;
    }
    if (!holdsKept(p)) out.add(p);
  };
  for (const r of options.roots) {
    if (r === null) continue;
    const root = real(r);
    if (SYSTEM.has(root)) continue;
    const inside = keep.filter((k) => isInside(k, root));
    if (inside.length === 0) {
      add(root);
      continue;
    }
    hideBeside(root, inside, add);
  }
  for (const p of options.extra) add(resolve(p));
  return [...out].sort();
}

/** Under `dir`, every entry that is not on the way to one of `kept` (all inside `dir`). */
function hideBeside(dir: string, kept: readonly string[], add: (p: string) => void): void {
  if (kept.some((k) => k === dir)) return;
  const next = new Map<string, string[]>();
  for (const k of kept) {
    const part = relative(dir, k).split(sep)[0] ?? '';
    next.set(part, [...(next.get(part) ?? []), k]);
  }
  for (const name of safeList(dir)) {
    const below = next.get(name);
    if (below === undefined) add(join(dir, name));
    else hideBeside(join(dir, name), below, add);
  }
}

/** What `p` resolves to (links on the way followed); `p` itself, made absolute, when it does not exist. */
function real(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return resolve(p);
  }
}

export function isInside(path: string, dir: string): boolean {
  const r = relative(dir, path);
  return r === '' || (!r.startsWith('..') && !r.startsWith(sep));
}

function safeList(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** The folders of a PATH value, absolute. */
export function pathFolders(path: string): string[] {
  return path
    .split(':')
    .filter((p) => p.startsWith('/'))
    .map((p) => resolve(p));
}
