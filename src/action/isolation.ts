import { dirname } from 'node:path';
import { hideAround } from '../sandbox/local/host-view.js';

/**
 * What the isolated local sandbox covers up on a runner (the rest of the runner's tree it sees
 * read-only, and /tmp and /run are private to it: see Confinement in sandbox/local/launch.ts). The
 * runner keeps its secrets in its user's home: the runner's own credentials and diagnostics, the
 * workflow's checkout (whose `.git/config` holds the token when actions/checkout persisted it), the
 * step's file commands (GITHUB_ENV, GITHUB_OUTPUT…, which a later step would obey). Rather than list
 * those, every entry of the home folder is hidden except the path down to the job folder, and on
 * that path every sibling too (the whole home when the job folder is elsewhere); plus whatever
 * else is named (file-command folders outside home). See hideAround.
 */
export function runnerHidePaths(options: {
  readonly home: string | null;
  readonly jobsDir: string;
  readonly extra: readonly string[];
}): string[] {
  return hideAround({ roots: [options.home], keep: [options.jobsDir], extra: options.extra });
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
