import { execFile, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import type { GitHubSim } from './github-sim/index.js';
import { ROOT } from './pipeline.js';

/** What `uses:` runs: the bundled action. */
export const ACTION_ENTRY = join(ROOT, 'dist-action', 'index.mjs');

export interface ActionRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly outputs: Record<string, string>;
  readonly summary: string;
  readonly runnerTemp: string;
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
  readonly runId: number;
  /** Folders made here are added, for the caller to remove. */
  readonly temps: string[];
  readonly timeoutMs?: number;
  readonly onSpawn?: (child: ChildProcess) => void;
}

/**
 * The bundled action (dist-action/index.mjs) as the runner starts it: `node` with the event file,
 * INPUT_* variables for every input (action.yml's defaults filled in, as the runner does),
 * GITHUB_OUTPUT / GITHUB_STEP_SUMMARY files and the runner's context variables. The workflow's
 * checkout sits beside the runner's temp folder with the job's token in its git config, as
 * actions/checkout leaves it.
 */
export async function runBundledAction(o: RunActionOptions): Promise<ActionRun> {
  const temp = mkdtempSync(join(tmpdir(), 'ia-runner-'));
  o.temps.push(temp);
  const eventPath = join(temp, 'event.json');
  // A workflow's event has no `installation`: drop the one the webhook example carries.
  const workflowPayload = { ...o.payload };
  delete workflowPayload.installation;
  writeFileSync(eventPath, JSON.stringify(workflowPayload));
  mkdirSync(join(temp, 'file-commands'));
  const outputFile = join(temp, 'file-commands', 'output');
  const summaryFile = join(temp, 'file-commands', 'summary');
  writeFileSync(outputFile, '');
  writeFileSync(summaryFile, '');
  const token = o.sim.actionsToken(o.owner, o.repo);
  mkdirSync(join(temp, 'workspace', '.git'), { recursive: true });
  writeFileSync(
    join(temp, 'workspace', '.git', 'config'),
    `[http "${o.sim.url}/"]\n\textraheader = AUTHORIZATION: basic ${Buffer.from(`x-access-token:${token}`).toString('base64')}\n`,
  );
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
    GITHUB_WORKSPACE: join(temp, 'workspace'),
    RUNNER_TEMP: join(temp, 'runner-temp'),
    GITHUB_OUTPUT: outputFile,
    GITHUB_STEP_SUMMARY: summaryFile,
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
      process.execPath,
      [ACTION_ENTRY],
      { env, cwd: temp, maxBuffer: 64 * 1024 * 1024, timeout: o.timeoutMs ?? 300_000 },
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
    outputs: parseOutputs(readFileSync(outputFile, 'utf8')),
    summary: readFileSync(summaryFile, 'utf8'),
    runnerTemp: join(temp, 'runner-temp'),
  };
}
