import { spawn } from 'node:child_process';
import { mkdtemp, realpath, rm, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ShellSession, type ShellHost, type ShellTransport } from '../shell-session.js';
import { SandboxError, type ExecOptions, type ExecResult, type Sandbox } from '../sandbox.js';
import { descendantsRss, killDescendants } from './proc-tree.js';

export interface LocalSandboxOptions {
  /** The repository on the host; commands start here. */
  readonly workspace: string;
  /** PATH for the shell (the only value taken from the host environment). */
  readonly path: string;
  /** Extra variables for the shell. Never put a secret here: the model sees command output. */
  readonly env?: Readonly<Record<string, string>>;
  /** In-memory capture per command before spilling to a file: head and tail, bytes each. */
  readonly captureBytes?: number;
}

/**
 * A child-process bash confined to the workspace by convention, not by the kernel: it starts there,
 * gets a scrubbed environment (no token or key from the host process reaches it) and a private
 * HOME and TMPDIR. It is the sandbox for the CLI, the Action runner and tests; the Docker sandbox is
 * the security boundary for untrusted repositories.
 */
export class LocalSandbox implements Sandbox {
  readonly kind = 'local';
  private constructor(
    readonly workdir: string,
    readonly hostWorkspace: string,
    private readonly session: ShellSession,
    private readonly scratch: string,
  ) {}

  static async create(options: LocalSandboxOptions): Promise<LocalSandbox> {
    let workspace: string;
    try {
      workspace = await realpath(options.workspace);
    } catch (error) {
      throw new SandboxError('start_failed', `workspace ${options.workspace} does not exist`, {
        cause: error,
      });
    }
    const scratch = await mkdtemp(join(tmpdir(), 'issue-agent-sandbox-'));
    const home = join(scratch, 'home');
    const tmp = join(scratch, 'tmp');
    await Promise.all([mkdir(home), mkdir(tmp)]);
    const env: Record<string, string> = {
      PATH: options.path,
      HOME: home,
      TMPDIR: tmp,
      LANG: 'C.UTF-8',
      TERM: 'dumb',
      PAGER: 'cat',
      GIT_PAGER: 'cat',
      GIT_TERMINAL_PROMPT: '0',
      CI: 'true',
      NO_COLOR: '1',
      FORCE_COLOR: '0',
      PYTHONDONTWRITEBYTECODE: '1',
      PYTHONUNBUFFERED: '1',
      ...options.env,
    };
    const host = localShellHost(workspace, env);
    const captureBytes = options.captureBytes ?? 256 * 1024;
    const session = new ShellSession(host, {
      workdir: workspace,
      stateFile: join(scratch, 'shell-state.sh'),
      capture: { headBytes: captureBytes, tailBytes: captureBytes, spillDir: scratch },
    });
    try {
      await session.start();
    } catch (error) {
      await rm(scratch, { recursive: true, force: true });
      throw error;
    }
    return new LocalSandbox(workspace, workspace, session, scratch);
  }

  exec(command: string, options: ExecOptions): Promise<ExecResult> {
    return this.session.exec(command, options);
  }

  async close(): Promise<void> {
    const pid = this.session.pid;
    if (pid > 0) await killDescendants(pid).catch(() => undefined);
    this.session.close();
    await rm(this.scratch, { recursive: true, force: true });
  }
}

export function localShellHost(cwd: string, env: Record<string, string>): ShellHost {
  return {
    spawn(): Promise<ShellTransport> {
      return new Promise((resolve, reject) => {
        const child = spawn('bash', ['--noprofile', '--norc'], {
          cwd,
          env,
          stdio: ['pipe', 'pipe', 'pipe'],
        });
        child.once('error', (error) => {
          reject(
            new SandboxError('start_failed', `could not start bash: ${error.message}`, { cause: error }),
          );
        });
        child.once('spawn', () => {
          // A write after the shell died must not crash the host process.
          child.stdin.on('error', () => undefined);
          resolve({
            write: (data) => {
              if (child.stdin.writable) child.stdin.write(data);
            },
            onData: (listener) => {
              // The frame sends the shell's stderr to stdout (`exec 2>&1`): one ordered stream.
              child.stdout.on('data', listener);
              child.stderr.resume();
            },
            onExit: (listener) => {
              child.once('exit', (code, signal) => {
                listener(code ?? (signal === null ? null : 128 + signalNumber(signal)));
              });
            },
            kill: () => {
              if (child.pid !== undefined) void killDescendants(child.pid).catch(() => undefined);
              child.kill('SIGKILL');
            },
          });
        });
      });
    },
    killDescendants: (pid) => killDescendants(pid),
    descendantsRssBytes: (pid) => descendantsRss(pid),
  };
}

function signalNumber(signal: NodeJS.Signals): number {
  const table: Partial<Record<NodeJS.Signals, number>> = { SIGKILL: 9, SIGTERM: 15, SIGINT: 2, SIGSEGV: 11 };
  return table[signal] ?? 0;
}
