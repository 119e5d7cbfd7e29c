import { existsSync, lstatSync, readdirSync, realpathSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { hideAround, isInside, pathFolders } from '../sandbox/local/host-view.js';
import { RunnerLayoutError, type RunnerLayout } from './runner-layout.js';

/**
 * What the isolated local sandbox covers up on a runner (the rest of the runner's tree it sees
 * read-only, and /tmp and /run are private to it: see Confinement in sandbox/local/launch.ts).
 *
 * The runner's areas are hidden whole, except the paths down to the folders the sandbox needs, and
 * on those paths every sibling: the runner's install folder (registration, credentials, logs), its
 * work folder (other repositories' checkouts, downloaded actions), RUNNER_TEMP (step scripts with
 * secrets expanded, file commands) and the workflow's checkout (whose `.git/config` holds the
 * token when actions/checkout persisted it), wherever each lives (see runner-layout.ts). The home
 * folder too, as on a GitHub-hosted runner the runner lives there. Plus whatever else is named
 * (file-command files outside those, the job's pristine clones).
 *
 * What stays visible, read-only like the rest of the host: the jobs folder (the agent's workspace
 * is in it), the tool cache (the Node or Python that setup-* actions installed), and the sandbox's
 * PATH folders, unless one is inside a runner area outside the tool cache (any earlier step may add
 * a folder to PATH) or holds an area or the home folder: those are left hidden, with the commands
 * in them.
 *
 * Throws RunnerLayoutError when the jobs folder or the tool cache holds a runner area or the home
 * folder, or when anything of a runner area would still be seen (an area the sandbox does not
 * cover, such as a top-level folder): the job is not started.
 */
export function runnerHidePaths(options: {
  readonly home: string | null;
  readonly jobsDir: string;
  /** Null: not on a runner (the action started by hand); only the home folder is hidden. */
  readonly layout: RunnerLayout | null;
  /** GITHUB_WORKSPACE. */
  readonly checkout: string | null;
  /** The sandbox's PATH. */
  readonly path: string;
  readonly extra: readonly string[];
}): string[] {
  const { layout } = options;
  const areas = [layout?.root ?? null, layout?.work ?? null, layout?.temp ?? null, options.checkout]
    .filter((p): p is string => p !== null)
    .map(real);
  const home = options.home === null ? null : real(options.home);
  const toolCache = layout?.toolCache ?? null;
  const holdsPrivate = (p: string): boolean =>
    [...areas, ...(home === null ? [] : [home])].some((a) => isInside(a, p));
  const refused = [
    { what: 'the jobs folder (the `work-dir` input)', path: real(options.jobsDir) },
    ...(toolCache === null ? [] : [{ what: 'RUNNER_TOOL_CACHE', path: real(toolCache) }]),
  ].filter((k) => holdsPrivate(k.path));
  if (refused.length > 0) {
    throw new RunnerLayoutError(
      refused.map(
        (k) => `${k.what} (${k.path}) stays visible and holds the runner's or the home folder's files`,
      ),
    );
  }
  const inToolCache = (p: string): boolean => toolCache !== null && isInside(p, real(toolCache));
  const path = pathFolders(options.path)
    .map(real)
    .filter((p) => !holdsPrivate(p) && (inToolCache(p) || !areas.some((a) => isInside(p, a))));
  const keep = [options.jobsDir, ...(toolCache === null ? [] : [toolCache]), ...path];
  const hidden = hideAround({ roots: [options.home, ...areas], keep, extra: options.extra });
  const seen = stillVisible(areas, hidden, keep);
  if (seen.length > 0) {
    throw new RunnerLayoutError([`the sandbox could not cover ${seen.slice(0, 5).join(', ')}`]);
  }
  return hidden;
}

/**
 * Under each area, what the sandbox would still see: not hidden, not in a kept folder, not on the
 * way to one. A check of the hide list against the layout, not a second computation of it: it
 * catches what hideAround leaves alone by design (a top-level folder, where a mount would cover
 * the system). A symbolic link is not followed: hideAround hides where it leads, and a link into an
 * area is checked there.
 */
function stillVisible(
  areas: readonly string[],
  hidden: readonly string[],
  keep: readonly string[],
): string[] {
  const covered = hidden.map(real);
  const kept = keep.map(real);
  const out: string[] = [];
  const visit = (p: string): void => {
    if (covered.some((h) => isInside(p, h)) || kept.some((k) => isInside(p, k))) return;
    if (!kept.some((k) => isInside(k, p))) {
      out.push(p);
      return;
    }
    for (const name of safeList(p)) {
      const entry = join(p, name);
      if (!lstatSync(entry).isSymbolicLink()) visit(entry);
    }
  };
  for (const a of areas) if (existsSync(a)) visit(a);
  return [...new Set(out)].sort();
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

function real(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return resolve(p);
  }
}

function safeList(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}
