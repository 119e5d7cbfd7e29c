import { readFileSync, readlinkSync, realpathSync, statSync } from 'node:fs';
import { basename, dirname, isAbsolute, resolve, sep } from 'node:path';
import { isInside } from '../sandbox/local/host-view.js';

/**
 * Where the Actions runner that runs this job keeps its files, as far as the Action could establish
 * it. The runner's install folder (`root`) holds its registration (`.runner`, `.credentials`,
 * `.credentials_rsaparams`: enough to impersonate it and take other workflows' jobs), its settings
 * (`.env`, `.path`) and its logs (`_diag`, with job details). The work folder (`work`) holds every
 * repository's checkout, downloaded actions, and RUNNER_TEMP (`temp`) with the step scripts, where
 * `${{ secrets.X }}` are expanded inline, and the file commands. The tool cache is where setup-*
 * actions install the toolchains the job runs with.
 */
export interface RunnerLayout {
  /** RUNNER_ENVIRONMENT=github-hosted: GitHub's own runner, whose files all lie in the home folder. */
  readonly hosted: boolean;
  /** The install folder; null only on a hosted runner whose files the home folder holds. */
  readonly root: string | null;
  readonly work: string;
  /** RUNNER_TEMP, inside `work`. */
  readonly temp: string;
  /** RUNNER_TOOL_CACHE, null when unset. Visible to the sandbox, read-only. */
  readonly toolCache: string | null;
  /** How each of the above was established, for the log. */
  readonly evidence: readonly string[];
}

/** What the Action's process tells about the runner that started it. */
export interface RunnerProcess {
  /** The Action's own node (process.execPath): the runner's `<root>/externals/node24/bin/node`. */
  readonly execPath: string;
  /** What the parent process runs (`/proc/<ppid>/exe`): the runner's `<root>/bin/Runner.Worker`. */
  readonly parentExe: string | null;
}

/**
 * The runner's layout could not be established, or is one the isolated sandbox cannot hide: the job
 * is refused rather than run with the runner's credentials in the agent's reach.
 */
export class RunnerLayoutError extends Error {
  override readonly name = 'RunnerLayoutError';
  constructor(readonly problems: readonly string[]) {
    // One line: the failure path shows the first line, and turns `; ` into a list on the issue.
    super(
      [
        "the isolated local sandbox (`sandbox: local`) would leave this runner's files in the agent's reach, so the job was not started",
        ...problems.map((p) => p.replace(/[\r\n]+/g, ' ').replace(/; /g, ', ')),
        "set the action's `sandbox: docker` input to run the agent in a container instead",
      ].join('; '),
    );
  }
}

/**
 * The runner's node and worker, when not moved by an update: `externals/node24/bin/node` and
 * `bin/Runner.Worker`. After a self-update `bin` and `externals` are links to `bin.<version>` and
 * `externals.<version>`, which is what a process's own path resolves to.
 */
const NODE_IN_RUNNER = /^(\/.+)\/externals(?:\.[0-9][^/]*)?\/node[0-9]+(?:_alpine)?\/bin\/node$/;
const WORKER_IN_RUNNER = /^(\/.+)\/bin(?:\.[0-9][^/]*)?\/Runner\.Worker$/;

/** The Action's own process and its parent, read from /proc (null where unreadable). */
export function runnerProcess(): RunnerProcess {
  let parentExe: string | null = null;
  try {
    parentExe = readlinkSync(`/proc/${String(process.ppid)}/exe`);
  } catch {
    parentExe = null;
  }
  return { execPath: process.execPath, parentExe };
}

/**
 * Where the runner keeps its files, from what it says (RUNNER_TEMP, RUNNER_WORKSPACE,
 * RUNNER_TOOL_CACHE, RUNNER_ENVIRONMENT) and what it runs (the Action's node, its parent process);
 * null when nothing says this is an Actions runner at all (the Action started by hand: only HOME is
 * hidden then). Throws RunnerLayoutError when the layout cannot be established:
 *  - the work folder is RUNNER_TEMP's parent, and RUNNER_TEMP must be named `_temp` (the runner's
 *    own name for it); RUNNER_WORKSPACE, when set, must be in that same folder;
 *  - the root is a folder with `bin/Runner.Worker` and `.runner` or `config.sh` (a configured
 *    runner, or an unpacked one), named by the Action's node, by its parent process, or as the
 *    parent of a work folder named `_work` (the default). Every way that names one must name the
 *    same; a process path shaped like a runner's in a folder without those files is not trusted,
 *    and refused when a root is found elsewhere (on a hosted runner: outside the home folder);
 *  - `.runner`'s `workFolder`, when it can be read, must be the work folder found (a work folder
 *    configured elsewhere, `config.sh --work`, is fine when it says so);
 *  - the tool cache must not hold the root or the work folder (it stays visible);
 *  - a self-hosted runner with no root found is refused. A GitHub-hosted runner may have none found
 *    (its layout moves between images): there the work folder, and any runner folder its processes
 *    name, must lie in a home folder at least two levels deep (e.g. /home/runner), which is hidden.
 */
export function detectRunnerLayout(env: NodeJS.ProcessEnv, proc: RunnerProcess): RunnerLayout | null {
  const temp = nonEmpty(env.RUNNER_TEMP);
  const runnerWorkspace = nonEmpty(env.RUNNER_WORKSPACE);
  const toolCacheVar = nonEmpty(env.RUNNER_TOOL_CACHE);
  const hosted = nonEmpty(env.RUNNER_ENVIRONMENT) === 'github-hosted';
  const named = [
    { what: `the action's node (${proc.execPath})`, dir: NODE_IN_RUNNER.exec(proc.execPath)?.[1] },
    {
      what: `its parent process (${proc.parentExe ?? ''})`,
      dir: proc.parentExe === null ? undefined : WORKER_IN_RUNNER.exec(proc.parentExe)?.[1],
    },
  ].flatMap((c) => (c.dir === undefined ? [] : [{ what: c.what, dir: real(c.dir) }]));
  const onRunner =
    temp !== null ||
    runnerWorkspace !== null ||
    toolCacheVar !== null ||
    nonEmpty(env.GITHUB_ACTIONS) === 'true' ||
    named.length > 0;
  if (!onRunner) return null;

  const problems: string[] = [];
  const evidence: string[] = [];
  let work: string | null = null;
  let tempDir: string | null = null;
  if (temp === null) {
    problems.push('RUNNER_TEMP is not set');
  } else if (!isAbsolute(temp) || basename(temp) !== '_temp') {
    problems.push(`RUNNER_TEMP (${temp}) is not the \`_temp\` folder of a runner's work folder`);
  } else {
    tempDir = real(temp);
    work = dirname(tempDir);
    evidence.push(`work folder ${work}: the parent of RUNNER_TEMP`);
  }
  if (work !== null && runnerWorkspace !== null && dirname(real(runnerWorkspace)) !== work) {
    problems.push(
      `RUNNER_WORKSPACE (${runnerWorkspace}) is not in the work folder ${work} that RUNNER_TEMP names`,
    );
  }

  const roots = new Map<string, string[]>();
  const unmarked: { what: string; dir: string }[] = [];
  for (const c of named) {
    if (isRunnerRoot(c.dir)) roots.set(c.dir, [...(roots.get(c.dir) ?? []), c.what]);
    else unmarked.push(c);
  }
  if (work !== null && basename(work) === '_work' && isRunnerRoot(dirname(work))) {
    const dir = dirname(work);
    roots.set(dir, [...(roots.get(dir) ?? []), 'the work folder, its `_work`']);
  }
  if (roots.size > 1) {
    problems.push(
      `the runner's folder is named differently by ${[...roots].map(([dir, by]) => `${by.join(' and ')} (${dir})`).join(' and by ')}`,
    );
  }
  const [found] = roots;
  const root = roots.size === 1 && found !== undefined ? found[0] : null;
  if (root !== null && found !== undefined)
    evidence.push(`runner folder ${root}: named by ${found[1].join(' and ')}`);

  const home = nonEmpty(env.HOME);
  const homeDir = home === null ? null : real(home);
  // A home folder one level deep (/root) is left alone by the sandbox's hiding (see host-view.ts).
  const hiddenHome =
    homeDir !== null && homeDir.split(sep).filter((s) => s !== '').length >= 2 ? homeDir : null;
  const inHome = (p: string): boolean => hiddenHome !== null && isInside(p, hiddenHome);
  if (root === null && problems.length === 0) {
    if (hosted && work !== null && inHome(work) && unmarked.every((c) => inHome(c.dir))) {
      evidence.push(
        `GitHub-hosted: the work folder and the runner's files are in the home folder ${homeDir ?? ''}`,
      );
    } else {
      for (const c of unmarked) {
        problems.push(
          `${c.what} runs from ${c.dir}, which holds no \`bin/Runner.Worker\` with \`.runner\` or \`config.sh\``,
        );
      }
      problems.push(
        hosted
          ? `no runner folder was found and the work folder ${work ?? '?'} is not in the home folder ${homeDir ?? '(HOME is not set)'}, where a GitHub-hosted runner keeps it`
          : `no runner folder was found (a folder with \`bin/Runner.Worker\` and \`.runner\` or \`config.sh\`, named by the action's node ${proc.execPath}, by its parent process ${proc.parentExe ?? '(unknown)'}, or as the parent of the work folder ${work ?? '?'})`,
      );
    }
  }
  if (root !== null) {
    // A runner process elsewhere than the root found: another runner, or a copy of one.
    for (const c of unmarked) {
      if (!(hosted && inHome(c.dir))) {
        problems.push(`${c.what} runs from ${c.dir}, which is not the runner folder ${root}`);
      }
    }
  }
  if (root !== null && work !== null) {
    const configured = configuredWorkFolder(root);
    if (configured !== null && configured !== work) {
      problems.push(`the runner's \`.runner\` names the work folder ${configured}, RUNNER_TEMP says ${work}`);
    } else if (configured !== null) {
      evidence.push(`work folder ${work}: the runner's \`.runner\` says so`);
    }
  }

  const toolCache = toolCacheVar === null ? null : real(toolCacheVar);
  if (toolCache !== null) {
    const held = [root, work].filter((p): p is string => p !== null && isInside(p, toolCache));
    if (held.length > 0) {
      problems.push(
        `RUNNER_TOOL_CACHE (${toolCacheVar ?? ''}), which stays visible, holds the runner's files (${held.join(', ')})`,
      );
    }
  }
  if (problems.length > 0 || work === null || tempDir === null) throw new RunnerLayoutError(problems);
  return { hosted, root, work, temp: tempDir, toolCache, evidence };
}

/** A runner's install folder: its worker program, and its registration or its configuration script. */
function isRunnerRoot(dir: string): boolean {
  return isFile(`${dir}/bin/Runner.Worker`) && (isFile(`${dir}/.runner`) || isFile(`${dir}/config.sh`));
}

/**
 * The work folder `.runner` names (`workFolder`, relative to the root unless absolute), or null when
 * the file is missing or not the JSON the runner writes (UTF-8 with a byte-order mark).
 */
function configuredWorkFolder(root: string): string | null {
  let settings: unknown;
  try {
    settings = JSON.parse(readFileSync(`${root}/.runner`, 'utf8').replace(/^\uFEFF/, '')) as unknown;
  } catch {
    return null;
  }
  if (typeof settings !== 'object' || settings === null) return null;
  const entry = Object.entries(settings).find(([k]) => k.toLowerCase() === 'workfolder');
  const value: unknown = entry?.[1];
  return typeof value === 'string' && value.trim() !== '' ? real(resolve(root, value.trim())) : null;
}

function isFile(p: string): boolean {
  try {
    return statSync(p).isFile();
  } catch {
    return false;
  }
}

/** What `p` resolves to; `p` made absolute when it does not exist. */
function real(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return resolve(p);
  }
}

function nonEmpty(v: string | undefined): string | null {
  return v === undefined || v.trim() === '' ? null : v.trim();
}
