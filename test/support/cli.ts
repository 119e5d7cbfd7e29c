import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { entryArgs } from './entry.js';

export const ROOT = join(import.meta.dirname, '..', '..');

export interface CliResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** The env a CLI run gets in tests: nothing from the developer's shell but PATH and HOME. */
export function cliEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    ISSUE_AGENT_MODEL_RETRY_BASE_MS: '20',
    // Never the developer's state folder; a test that wants the cache gives it a folder of its own.
    ISSUE_AGENT_ENV_CACHE: 'off',
    // For profiling the CLI (e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`), as the pipeline's processes.
    ...(process.env.ISSUE_AGENT_TEST_CHILD_NODE_OPTIONS === undefined
      ? {}
      : { NODE_OPTIONS: process.env.ISSUE_AGENT_TEST_CHILD_NODE_OPTIONS }),
    ...extra,
  };
}

export function startCli(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  /** Modules preloaded after tsx (a test's hook, e.g. recording-backend.ts's). */
  imports: readonly string[] = [],
): ChildProcess & { result: Promise<CliResult> } {
  const child = spawn(process.execPath, [...entryArgs('src/cli/main.ts', imports), ...args], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const result = new Promise<CliResult>((resolve) => {
    child.once('close', (code, signal) => {
      resolve({ code, signal, stdout, stderr });
    });
  });
  return Object.assign(child, { result });
}

export function runCli(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  imports: readonly string[] = [],
): Promise<CliResult> {
  return startCli(args, env, imports).result;
}

/** The JSON object a `--json` run prints as its last stdout line. */
export function lastJson(stdout: string): Record<string, unknown> {
  const lines = stdout.trim().split('\n');
  return JSON.parse(lines[lines.length - 1] ?? '{}') as Record<string, unknown>;
}
