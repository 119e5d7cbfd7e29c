import { execFile } from 'node:child_process';
import { mkdir, rm } from 'node:fs/promises';
import { dirname } from 'node:path';

export class HostGitError extends Error {
  override readonly name = 'HostGitError';
  constructor(
    message: string,
    readonly transient: boolean,
  ) {
    super(message);
  }
}

/**
 * Git on the host, for clone, commit and push: the only place a token meets git. Invariants:
 * - never a shell: argv only, so no repository or issue text is ever parsed by a shell;
 * - the token travels in the environment of one git process as an `http.extraHeader` (git's
 *   GIT_CONFIG_COUNT mechanism), so it is written to no file and shown in no process list;
 * - no user or system git config, no hooks, no fsmonitor: the repository's content can configure
 *   nothing that runs here. Only the pristine clone, which no sandbox ever sees, is used here; the
 *   agent's workspace is a separate copy whose changes come back as a diff (data), never as a .git.
 */
const SAFE = [
  '-c',
  'core.hooksPath=/dev/null',
  '-c',
  'core.fsmonitor=false',
  '-c',
  'protocol.file.allow=never',
];

export interface GitRun {
  readonly stdout: string;
  readonly stderr: string;
}

export function baseGitEnv(path: string): NodeJS.ProcessEnv {
  return {
    PATH: path,
    HOME: '/nonexistent',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_TERMINAL_PROMPT: '0',
    GIT_ASKPASS: '/bin/false',
    SSH_ASKPASS: '/bin/false',
    LC_ALL: 'C',
  };
}

function authEnv(token: string): NodeJS.ProcessEnv {
  const basic = Buffer.from(`x-access-token:${token}`).toString('base64');
  return {
    GIT_CONFIG_COUNT: '1',
    GIT_CONFIG_KEY_0: 'http.extraHeader',
    GIT_CONFIG_VALUE_0: `Authorization: Basic ${basic}`,
  };
}

export class HostGit {
  constructor(
    private readonly path: string,
    private readonly redact: (text: string) => string,
  ) {}

  run(
    args: readonly string[],
    options: {
      cwd?: string;
      token?: string;
      input?: string;
      env?: NodeJS.ProcessEnv;
      timeoutMs?: number;
    } = {},
  ): Promise<GitRun> {
    const env = {
      ...baseGitEnv(this.path),
      ...(options.token === undefined ? {} : authEnv(options.token)),
      ...options.env,
    };
    return new Promise((resolve, reject) => {
      const child = execFile(
        'git',
        [...SAFE, ...args],
        {
          cwd: options.cwd,
          env,
          encoding: 'utf8',
          maxBuffer: 256 * 1024 * 1024,
          timeout: options.timeoutMs ?? 10 * 60_000,
          killSignal: 'SIGKILL',
        },
        (error, stdout, stderr) => {
          if (error === null) {
            resolve({ stdout, stderr });
            return;
          }
          const detail = this.redact(stderr.trim().split('\n').slice(-5).join(' | '));
          const transient =
            /Could not resolve host|Connection refused|timed out|HTTP 5\d\d|The requested URL returned error: 5\d\d|RPC failed|early EOF|Connection reset/i.test(
              stderr,
            );
          reject(new HostGitError(`git ${args[0] ?? ''} failed: ${detail || error.message}`, transient));
        },
      );
      if (options.input !== undefined) child.stdin?.end(options.input);
    });
  }

  /** Clones `url` into `dir` (replacing whatever is there) without writing the token anywhere. */
  async clone(url: string, dir: string, token: string, branch: string): Promise<void> {
    await rm(dir, { recursive: true, force: true });
    await mkdir(dirname(dir), { recursive: true });
    await this.run(['clone', '--quiet', '--no-tags', '--single-branch', '--branch', branch, '--', url, dir], {
      token,
    });
  }

  /** A copy for the sandbox: its own object store (no hardlinks into the pristine clone). */
  async copyForSandbox(pristine: string, dir: string, commit: string, publicUrl: string): Promise<void> {
    await rm(dir, { recursive: true, force: true });
    // The one clone from a local path: allowed for this command only (submodules stay refused).
    await this.run([
      '-c',
      'protocol.file.allow=always',
      'clone',
      '--quiet',
      '--no-hardlinks',
      '--',
      pristine,
      dir,
    ]);
    await this.run(['-C', dir, 'checkout', '--quiet', '--detach', commit]);
    await this.run(['-C', dir, 'remote', 'set-url', 'origin', publicUrl]);
  }

  async revParse(dir: string, rev: string): Promise<string> {
    return (await this.run(['-C', dir, 'rev-parse', '--verify', `${rev}^{commit}`])).stdout.trim();
  }

  /** The tip of a remote branch, or null if the branch does not exist. */
  async remoteBranch(dir: string, branch: string, token: string): Promise<string | null> {
    const r = await this.run(['-C', dir, 'ls-remote', '--heads', 'origin', `refs/heads/${branch}`], {
      token,
    });
    const line = r.stdout.trim().split('\n')[0] ?? '';
    return line === '' ? null : (line.split('\t')[0] ?? null);
  }
}
