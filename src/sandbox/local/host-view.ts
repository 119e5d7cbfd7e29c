import { existsSync, lstatSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';

/**
 * Host paths an isolated local sandbox covers up (hide) around the folder its workspace lives in
 * (`keep`): for each root (a home folder, a service's working folder), every entry except the path
 * down to `keep`, and on that path every sibling too; a root that does not hold `keep` is covered
 * whole. Plus `extra` paths (a key file), unless they are on the way to `keep`. The file system root
 * is never a root here (covering it would leave the sandbox nothing to run). Symbolic links are
 * left alone: mounting over one would cover its target.
 */
export function hideAround(options: {
  readonly roots: readonly (string | null)[];
  readonly keep: string;
  readonly extra: readonly string[];
}): string[] {
  const keep = resolve(options.keep);
  const out = new Set<string>();
  for (const r of options.roots) {
    if (r === null) continue;
    const root = resolve(r);
    if (dirname(root) === root) continue;
    if (!isInside(keep, root)) {
      // The root is an ancestor of nothing the sandbox needs; unless it holds `keep` it goes whole.
      if (!isInside(root, keep)) out.add(root);
      continue;
    }
    let dir = root;
    for (const part of relative(root, keep)
      .split(sep)
      .filter((p) => p !== '')) {
      for (const name of safeList(dir)) if (name !== part) out.add(join(dir, name));
      dir = join(dir, part);
    }
  }
  for (const p of options.extra) {
    const abs = resolve(p);
    // Never cover the kept folder or anything on the way to it.
    if (!isInside(keep, abs)) out.add(abs);
  }
  return [...out].filter((p) => existsSync(p) && !lstatSync(p).isSymbolicLink()).sort();
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
