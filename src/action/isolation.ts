import { existsSync, lstatSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';

/**
 * What the isolated local sandbox covers up on a runner (the rest of the runner's tree it sees
 * read-only, and /tmp and /run are private to it: see Confinement in sandbox/local/launch.ts). The
 * runner keeps its secrets in its user's home: the runner's own credentials and diagnostics, the
 * workflow's checkout (whose `.git/config` holds the token when actions/checkout persisted it), the
 * step's file commands (GITHUB_ENV, GITHUB_OUTPUT…, which a later step would obey). Rather than list
 * those, every entry of the home folder is hidden except the path down to the job folder, and on
 * that path every sibling too; plus whatever else is named (file-command folders outside home).
 * Symbolic links are left alone: mounting over one would cover its target.
 */
export function runnerHidePaths(options: {
  readonly home: string | null;
  readonly jobsDir: string;
  readonly extra: readonly string[];
}): string[] {
  const jobs = resolve(options.jobsDir);
  const out = new Set<string>();
  const home = options.home === null ? null : resolve(options.home);
  if (home !== null && isInside(jobs, home)) {
    let dir = home;
    for (const part of relative(home, jobs)
      .split(sep)
      .filter((p) => p !== '')) {
      for (const name of safeList(dir)) if (name !== part) out.add(join(dir, name));
      dir = join(dir, part);
    }
  }
  for (const p of options.extra) {
    const abs = resolve(p);
    // Never cover the job folder or anything on the way to it.
    if (!isInside(jobs, abs)) out.add(abs);
  }
  return [...out].filter((p) => existsSync(p) && !lstatSync(p).isSymbolicLink()).sort();
}

/**
 * The runner's file commands (GITHUB_ENV, GITHUB_OUTPUT, …) and their folders: a line the agent
 * wrote there would be obeyed by the runner after this step. The folder is hidden where it is not on
 * the way to the job folder, each file in any case.
 */
export function fileCommandPaths(env: NodeJS.ProcessEnv): string[] {
  const names = ['GITHUB_ENV', 'GITHUB_OUTPUT', 'GITHUB_STEP_SUMMARY', 'GITHUB_PATH', 'GITHUB_STATE'];
  const files = names.map((n) => env[n]).filter((v): v is string => v !== undefined && v.trim() !== '');
  return [...new Set([...files, ...files.map((f) => dirname(f))])];
}

function isInside(path: string, dir: string): boolean {
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
