import { execFile, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import type { GitHubSim, WorkflowPermissions } from './github-sim/index.js';
import { ROOT } from './pipeline.js';

/** What `uses:` runs: the bundled action. */
export const ACTION_ENTRY = join(ROOT, 'dist-action', 'index.mjs');

export interface ActionRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly outputs: Record<string, string>;
  readonly summary: string;
  readonly runnerTemp: string;
  readonly runner: EmulatedRunner;
}

/** GITHUB_OUTPUT's `name<<delimiter` blocks. */
function parseOutputs(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const m = /^([\w-]+)<<(.+)$/.exec(lines[i] ?? '');
    if (m === null) continue;
    const value: string[] = [];
    for (i++; i < lines.length && lines[i] !== m[2]; i++) value.push(lines[i] ?? '');
    out[m[1] ?? ''] = value.join('\n');
  }
  return out;
}

/** action.yml's defaults as the runner fills them in: INPUT_<NAME> for every input. */
function inputDefaults(): Record<string, string> {
  const spec = parseYaml(readFileSync(join(ROOT, 'action.yml'), 'utf8')) as {
    inputs: Record<string, { default?: string }>;
  };
  const env: Record<string, string> = {};
  for (const [name, input] of Object.entries(spec.inputs)) {
    env[`INPUT_${name.toUpperCase()}`] = input.default ?? '';
  }
  return env;
}

export interface RunActionOptions {
  readonly sim: GitHubSim;
  readonly owner: string;
  readonly repo: string;
  readonly modelUrl: string;
  readonly modelKey: string;
  readonly event: string;
  readonly payload: Record<string, unknown>;
  /** Inputs by their action.yml names (without INPUT_). */
  readonly inputs?: Record<string, string>;
  /** The step's `env:` (e.g. ISSUE_AGENT_* deployment settings). */
  readonly stepEnv?: Record<string, string>;
  /** What the workflow's `permissions:` grants its GITHUB_TOKEN beyond contents, issues and pull-requests. */
  readonly tokenPermissions?: WorkflowPermissions;
  readonly runId: number;
  /** Folders made here are added, for the caller to remove. */
  readonly temps: string[];
  readonly timeoutMs?: number;
  readonly onSpawn?: (child: ChildProcess) => void;
  /**
   * The runner: installed in a new folder under the system's temp folder by default, else under
   * `base` (which the caller removes); `recognisable: false` leaves out what marks a runner's
   * folder and runs the action's node directly (see emulateRunner).
   */
  readonly runner?: { readonly base?: string; readonly recognisable?: boolean };
}

/**
 * A self-hosted runner as `config.sh` and `run.sh` leave it in `<base>/actions-runner` during a job
 * of `owner/repo`: its registration (`.runner`, `.credentials`, `.credentials_rsaparams`),
 * settings (`.env`, `.path`), programs (`bin/`, `externals/node24/bin/node`), logs (`_diag/`),
 * and the work folder `_work` with the checkout (`_work/<repo>/<repo>`), RUNNER_TEMP (`_work/_temp`:
 * a step script with a secret expanded inline, the file commands, the event), the tool cache
 * (`_work/_tool`) and downloaded actions (`_work/_actions`). Every file that is not a program holds
 * `canary`. Everything readable by anyone (as a runner's files are to the sandbox's user when the
 * sandbox runs as the runner's user), so a file the sandbox does not hide can be read.
 *
 * The action is started as the runner's worker starts it: `bin/Runner.Worker` is a copy of
 * coreutils' `timeout`, which runs the action's node as its child (so `/proc/<ppid>/exe` names the
 * runner's folder, as on a runner) and passes SIGINT and SIGTERM on to it (`--foreground`: to it
 * alone). The node is `externals/node24/bin/node`, a hard link to this node where the file system
 * allows (then the node's own path names the runner too), else a symbolic link. With
 * `recognisable: false` there is no `bin/`, `.runner` or `config.sh`, and this node runs the action
 * directly: RUNNER_TEMP and the rest name a runner the action cannot find.
 */
export interface EmulatedRunner {
  readonly root: string;
  readonly work: string;
  readonly temp: string;
  readonly toolCache: string;
  readonly checkout: string;
  readonly outputFile: string;
  readonly summaryFile: string;
  /** The runner's files, outside the tool cache and the file commands: each holds the canary or is a program. */
  readonly files: readonly string[];
  /** How the runner starts the action's entry, and the environment it gives it. */
  readonly command: { readonly file: string; readonly args: readonly string[] };
  readonly env: Readonly<Record<string, string>>;
}

export function emulateRunner(o: {
  readonly base: string;
  readonly repo: string;
  readonly canary: string;
  /** The checkout's `.git/config` (actions/checkout persists the job's token there). */
  readonly checkoutConfig?: string;
  readonly recognisable?: boolean;
}): EmulatedRunner {
  const root = join(o.base, 'actions-runner');
  const work = join(root, '_work');
  const temp = join(work, '_temp');
  const checkout = join(work, o.repo, o.repo);
  const commands = join(temp, '_runner_file_commands');
  const id = randomUUID();
  const files: string[] = [];
  const put = (path: string, content: string): void => {
    mkdirSync(dirname(path), { recursive: true, mode: 0o755 });
    writeFileSync(path, content, { mode: 0o644 });
    files.push(path);
  };
  const recognisable = o.recognisable ?? true;
  mkdirSync(root, { recursive: true, mode: 0o755 });
  if (recognisable) {
    put(
      join(root, '.runner'),
      `\uFEFF${JSON.stringify({ agentId: 7, agentName: 'build-1', poolId: 1, workFolder: '_work', canary: o.canary })}`,
    );
    put(join(root, 'config.sh'), `#!/bin/bash\n# ${o.canary}\n`);
  }
  put(join(root, '.credentials'), JSON.stringify({ scheme: 'OAuthAccessToken', data: { token: o.canary } }));
  put(join(root, '.credentials_rsaparams'), JSON.stringify({ d: o.canary, modulus: o.canary }));
  put(join(root, '.env'), `LANG=C.UTF-8\nDEPLOY_KEY=${o.canary}\n`);
  put(join(root, '.path'), `/usr/bin:/bin # ${o.canary}\n`);
  put(join(root, 'run.sh'), `#!/bin/bash\n# ${o.canary}\n`);
  put(join(root, '_diag', 'Runner_20261204-080000-utc.log'), `[INFO] session ${o.canary}\n`);
  put(join(root, '_diag', 'Worker_20261204-080001-utc.log'), `[INFO] job message ${o.canary}\n`);
  const node = join(root, 'externals', 'node24', 'bin', 'node');
  mkdirSync(dirname(node), { recursive: true, mode: 0o755 });
  try {
    linkSync(realpathSync(process.execPath), node);
  } catch {
    symlinkSync(realpathSync(process.execPath), node);
  }
  files.push(node);
  let start: EmulatedRunner['command'] = { file: process.execPath, args: [ACTION_ENTRY] };
  if (recognisable) {
    const worker = join(root, 'bin', 'Runner.Worker');
    mkdirSync(dirname(worker), { recursive: true, mode: 0o755 });
    const timeout = ['/usr/bin/timeout', '/bin/timeout'].find((p) => existsSync(p));
    if (timeout === undefined) throw new Error('the emulated runner needs coreutils timeout');
    copyFileSync(timeout, worker);
    chmodSync(worker, 0o755);
    files.push(worker);
    put(join(root, 'bin', 'Runner.Listener.deps.json'), `{"canary":"${o.canary}"}`);
    start = { file: worker, args: ['--foreground', '0', node, ACTION_ENTRY] };
  }
  // A step before this one: its script, with a secret expanded inline, stays in RUNNER_TEMP.
  put(
    join(temp, `${randomUUID()}.sh`),
    `curl -H "Authorization: Bearer ${o.canary}" https://deploy.example\n`,
  );
  // The step's file commands, empty until the step writes them.
  const command = (kind: string): string => {
    const file = join(commands, `${kind}_${id}`);
    mkdirSync(commands, { recursive: true, mode: 0o755 });
    writeFileSync(file, '', { mode: 0o644 });
    return file;
  };
  const [outputFile, summaryFile, envFile, pathFile, stateFile] = [
    'set_output',
    'step_summary',
    'set_env',
    'add_path',
    'save_state',
  ].map(command) as [string, string, string, string, string];
  put(join(work, '_actions', 'actions', 'checkout', 'v4', 'action.yml'), `name: checkout # ${o.canary}\n`);
  put(join(checkout, 'README.md'), `the workflow's checkout ${o.canary}\n`);
  put(
    join(checkout, '.git', 'config'),
    o.checkoutConfig ?? `[http "https://github.com/"]\n\textraheader = AUTHORIZATION: basic ${o.canary}\n`,
  );
  const toolCache = join(work, '_tool');
  mkdirSync(toolCache, { recursive: true, mode: 0o755 });
  // For tests that name the file commands by RUNNER_TEMP: `<RUNNER_TEMP>/../file-commands/output`.
  mkdirSync(join(work, 'file-commands'), { mode: 0o755 });
  symlinkSync(outputFile, join(work, 'file-commands', 'output'));
  symlinkSync(summaryFile, join(work, 'file-commands', 'summary'));
  return {
    root,
    work,
    temp,
    toolCache,
    checkout,
    outputFile,
    summaryFile,
    files,
    command: start,
    env: {
      RUNNER_ENVIRONMENT: 'self-hosted',
      RUNNER_OS: 'Linux',
      RUNNER_NAME: 'build-1',
      RUNNER_TEMP: temp,
      RUNNER_WORKSPACE: join(work, o.repo),
      RUNNER_TOOL_CACHE: toolCache,
      GITHUB_WORKSPACE: checkout,
      GITHUB_OUTPUT: outputFile,
      GITHUB_STEP_SUMMARY: summaryFile,
      GITHUB_ENV: envFile,
      GITHUB_PATH: pathFile,
      GITHUB_STATE: stateFile,
    },
  };
}

/**
 * The bundled action (dist-action/index.mjs) as a self-hosted runner starts it (see emulateRunner):
 * the event file in RUNNER_TEMP, INPUT_* variables for every input (action.yml's defaults filled
 * in, as the runner does), the file commands and the runner's context variables. The workflow's
 * checkout has the job's token in its git config, as actions/checkout leaves it.
 */
export async function runBundledAction(o: RunActionOptions): Promise<ActionRun> {
  let base = o.runner?.base;
  if (base === undefined) {
    base = mkdtempSync(join(tmpdir(), 'ia-runner-'));
    o.temps.push(base);
  }
  const token = o.sim.actionsToken(o.owner, o.repo, o.tokenPermissions);
  const runner = emulateRunner({
    base,
    repo: o.repo,
    canary: `runner-canary-${randomUUID()}`,
    checkoutConfig: `[http "${o.sim.url}/"]\n\textraheader = AUTHORIZATION: basic ${Buffer.from(`x-access-token:${token}`).toString('base64')}\n`,
    ...(o.runner?.recognisable === undefined ? {} : { recognisable: o.runner.recognisable }),
  });
  const eventPath = join(runner.temp, '_github_workflow', 'event.json');
  mkdirSync(dirname(eventPath), { recursive: true, mode: 0o755 });
  // A workflow's event has no `installation`: drop the one the webhook example carries.
  const workflowPayload = { ...o.payload };
  delete workflowPayload.installation;
  writeFileSync(eventPath, JSON.stringify(workflowPayload), { mode: 0o644 });
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    CI: 'true',
    GITHUB_ACTIONS: 'true',
    GITHUB_EVENT_NAME: o.event,
    GITHUB_EVENT_PATH: eventPath,
    GITHUB_REPOSITORY: `${o.owner}/${o.repo}`,
    GITHUB_API_URL: o.sim.url,
    GITHUB_SERVER_URL: o.sim.url,
    GITHUB_RUN_ID: String(o.runId),
    GITHUB_RUN_ATTEMPT: '1',
    ...runner.env,
    ...o.stepEnv,
    ...inputDefaults(),
    'INPUT_GITHUB-TOKEN': token,
    'INPUT_ANTHROPIC-API-KEY': o.modelKey,
    'INPUT_ANTHROPIC-BASE-URL': o.modelUrl,
    'INPUT_LOG-LEVEL': 'info',
    ...Object.fromEntries(Object.entries(o.inputs ?? {}).map(([k, v]) => [`INPUT_${k.toUpperCase()}`, v])),
  };
  const { code, stdout } = await new Promise<{ code: number | null; stdout: string }>((resolve) => {
    const child = execFile(
      runner.command.file,
      [...runner.command.args],
      { env, cwd: runner.checkout, maxBuffer: 64 * 1024 * 1024, timeout: o.timeoutMs ?? 300_000 },
      (error, out, err) => {
        const exit = error === null ? 0 : typeof error.code === 'number' ? error.code : null;
        resolve({ code: exit, stdout: `${out}${err}` });
      },
    );
    o.onSpawn?.(child);
  });
  return {
    code,
    stdout,
    outputs: parseOutputs(readFileSync(runner.outputFile, 'utf8')),
    summary: readFileSync(runner.summaryFile, 'utf8'),
    runnerTemp: runner.temp,
    runner,
  };
}
