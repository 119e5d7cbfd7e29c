import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { createAppAuth } from '@octokit/auth-app';
import { RequestError } from '@octokit/request-error';
import { Octokit } from '@octokit/rest';
import type { GitHubSim } from '../support/github-sim/index.js';

const run = promisify(execFile);

/** Octokit's log, silenced: the tests assert on outcomes, not on its warnings. */
export const quietLog = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};

export interface TempDir {
  readonly dir: string;
  cleanup(): void;
}

/** A git work tree with one commit holding `files`, on branch `main`. */
export async function makeSourceRepo(files: Record<string, string>): Promise<TempDir> {
  const root = mkdtempSync(join(tmpdir(), 'github-sim-src-'));
  const dir = join(root, 'repo');
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  await git(dir, ['init', '-q', '-b', 'main']);
  await git(dir, ['add', '-A']);
  await git(dir, ['commit', '-q', '-m', 'initial']);
  return {
    dir,
    cleanup: () => {
      rmSync(root, { recursive: true, force: true });
    },
  };
}

export function tempDir(prefix: string): TempDir {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return {
    dir,
    cleanup: () => {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface GitResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs git with no host configuration (no credential store, no prompts), a fixed identity and `env`
 * added: a token reaches git only through the config or environment a test passes.
 */
export async function gitResult(
  cwd: string,
  args: readonly string[],
  env: Record<string, string> = {},
): Promise<GitResult> {
  try {
    const { stdout, stderr } = await run('git', args, {
      cwd,
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOME: tmpdir(),
        GIT_CONFIG_NOSYSTEM: '1',
        GIT_CONFIG_GLOBAL: '/dev/null',
        GIT_TERMINAL_PROMPT: '0',
        GIT_AUTHOR_NAME: 'Sim Test',
        GIT_AUTHOR_EMAIL: 'sim@example.invalid',
        GIT_COMMITTER_NAME: 'Sim Test',
        GIT_COMMITTER_EMAIL: 'sim@example.invalid',
        ...env,
      },
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return {
      code: typeof failed.code === 'number' ? failed.code : 1,
      stdout: failed.stdout ?? '',
      stderr: failed.stderr ?? '',
    };
  }
}

export async function git(
  cwd: string,
  args: readonly string[],
  env: Record<string, string> = {},
): Promise<string> {
  const result = await gitResult(cwd, args, env);
  if (result.code !== 0) throw new Error(`git ${args.join(' ')} failed (${result.code}): ${result.stderr}`);
  return result.stdout;
}

/**
 * Git options that answer credential requests with the token in $SIM_TOKEN, as a worker's credential
 * helper would: the token is in neither the URL nor the command line.
 */
export const CREDENTIAL_HELPER = [
  '-c',
  'credential.helper=',
  '-c',
  'credential.helper=!f() { test "$1" = get && echo username=x-access-token && echo "password=$SIM_TOKEN"; }; f',
];

/** An Octokit authenticated as the simulator's app installation through @octokit/auth-app. */
export function installationOctokit(
  sim: GitHubSim,
  options: ConstructorParameters<typeof Octokit>[0] = {},
): Octokit {
  return new Octokit({
    baseUrl: sim.url,
    log: quietLog,
    authStrategy: createAppAuth,
    auth: { appId: sim.app.id, privateKey: sim.app.privateKeyPem, installationId: sim.installationId },
    ...options,
  });
}

/** An installation token from the simulator, fetched with @octokit/auth-app. */
export async function installationToken(sim: GitHubSim): Promise<{ token: string; expiresAt: string }> {
  const auth = createAppAuth({
    appId: sim.app.id,
    privateKey: sim.app.privateKeyPem,
    request: appRequest(sim),
  });
  const { token, expiresAt } = await auth({ type: 'installation', installationId: sim.installationId });
  return { token, expiresAt };
}

function appRequest(sim: GitHubSim) {
  return new Octokit({ baseUrl: sim.url, log: quietLog }).request;
}

/** The HTTP status a request failed with, or 0 when it succeeded: for asserting on refusals. */
export async function status(p: Promise<unknown>): Promise<number> {
  try {
    await p;
    return 0;
  } catch (error) {
    if (error instanceof RequestError) return error.status;
    throw error;
  }
}
