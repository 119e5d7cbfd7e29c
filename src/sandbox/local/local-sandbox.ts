import { spawn } from 'node:child_process';
import { mkdtemp, realpath, rm, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HARNESS_CAPTURE, HarnessShell } from '../harness-shell.js';
import { ShellSession, type ShellHost, type ShellTransport } from '../shell-session.js';
import {
  SandboxError,
  type ExecOptions,
  type ExecResult,
  type HarnessExecOptions,
  type Sandbox,
} from '../sandbox.js';
import { childrenOf, descendantsRss, killDescendants } from './proc-tree.js';

export interface LocalSandboxOptions {
  /** The repository on the host; commands start here. */
  readonly workspace: string;
  /** PATH for the shell (the only value taken from the host environment). */
  readonly path: string;
  /** Extra variables for the shell. Never put a secret here: the model sees command output. */
  readonly env?: Readonly<Record<string, string>>;
  /** In-memory capture per command before spilling to a file: head and tail, bytes each. */
  readonly captureBytes?: number;
  /**
   * Run the shell in its own user, PID, mount and network namespaces (`unshare`, no privileges
   * needed where the kernel allows unprivileged user namespaces): it sees no host process (so no
   * other process's environment or memory), has no network, and finds each `hide` path covered by an
   * empty read-only tmpfs. Files stay those of the host user otherwise; Docker remains the boundary
   * for untrusted repositories when the host can run it.
   */
  readonly isolate?: { readonly hide: readonly string[] };
}

/**
 * Whether `unshare` can give an unprivileged process the namespaces `isolate` needs here (it fails
 * where user namespaces are disabled or restricted). Asked once per process.
 */
export function canIsolate(): Promise<boolean> {
  isolationProbe ??= new Promise((resolve) => {
    const child = spawn('unshare', [...UNSHARE_ARGS, 'true'], { stdio: 'ignore' });
    child.once('error', () => {
      resolve(false);
    });
    child.once('exit', (code) => {
      resolve(code === 0);
    });
  });
  return isolationProbe;
}
let isolationProbe: Promise<boolean> | undefined;

const UNSHARE_ARGS = [
  '--user',
  '--map-root-user',
  '--net',
  '--pid',
  '--fork',
  '--mount-proc',
  '--kill-child',
  '--',
];

/**
 * Run as the namespaced child before the session's shell: covers each hidden path that exists (a
 * folder with an empty read-only tmpfs, a file with /dev/null; symbolic links are skipped, since a
 * mount would cover their target), then becomes the shell. A path that cannot be covered ends the
 * start: the sandbox never runs with a secret it was meant to hide.
 */
const ISOLATED_SHELL = [
  'for d in "$@"; do',
  '  if [ -L "$d" ] || [ ! -e "$d" ]; then continue; fi',
  '  if [ -d "$d" ]; then mount -t tmpfs -o ro,size=4k,mode=0555 ia-hidden "$d" || exit 97;',
  '  else mount --bind /dev/null "$d" || exit 97; fi',
  'done',
  'exec bash --noprofile --norc',
].join('\n');

export class LocalSandbox implements Sandbox {
  readonly kind = 'local';
  private constructor(
    readonly workdir: string,
    private readonly session: ShellSession,
    private readonly harness: HarnessShell,
    private readonly hosts: readonly ShellHost[],
    private readonly scratch: string,
    private readonly spill: string,
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
    // `scratch` holds the shell's HOME and TMPDIR (the sandbox writes there); `spill` holds what the
    // host writes by name (spilled output), so it is a separate folder, hidden from an isolated shell.
    const scratch = await mkdtemp(join(tmpdir(), 'issue-agent-sandbox-'));
    const spill = await mkdtemp(join(tmpdir(), 'issue-agent-spill-'));
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
    const cleanup = async (): Promise<void> => {
      await rm(scratch, { recursive: true, force: true });
      await rm(spill, { recursive: true, force: true });
    };
    if (options.isolate !== undefined && !(await canIsolate())) {
      await cleanup();
      throw new SandboxError(
        'start_failed',
        'this host does not allow unprivileged user namespaces (unshare), which the isolated local sandbox needs',
      );
    }
    const isolate = options.isolate === undefined ? undefined : { hide: [...options.isolate.hide, spill] };
    // Two shells, each from its own launcher (a namespaced shell's host pid is tracked per launcher):
    // the agent's, and the harness's for file operations and checkpoints.
    const host = localShellHost(workspace, env, isolate);
    const harnessHost = localShellHost(workspace, env, isolate);
    const captureBytes = options.captureBytes ?? 256 * 1024;
    const session = new ShellSession(host, {
      workdir: workspace,
      stateFile: join(scratch, 'shell-state.sh'),
      capture: { headBytes: captureBytes, tailBytes: captureBytes, spillDir: spill },
    });
    const harness = new HarnessShell(
      () =>
        new ShellSession(harnessHost, {
          workdir: workspace,
          stateFile: '/dev/null',
          capture: { ...HARNESS_CAPTURE, spillDir: spill },
        }),
    );
    try {
      await session.start();
      await harness.start();
    } catch (error) {
      session.close();
      harness.close();
      await cleanup();
      throw error;
    }
    return new LocalSandbox(workspace, session, harness, [host, harnessHost], scratch, spill);
  }

  exec(command: string, options: ExecOptions): Promise<ExecResult> {
    return this.session.exec(command, options);
  }

  harnessExec(command: string, options: HarnessExecOptions): Promise<ExecResult> {
    return this.harness.exec(command, options);
  }

  async close(): Promise<void> {
    const pid = this.session.pid;
    // Through the host, which maps a namespaced shell's `$$` to its host pid.
    const [host] = this.hosts;
    if (pid > 0 && host !== undefined) await host.killDescendants(pid).catch(() => undefined);
    this.session.close();
    this.harness.close();
    await rm(this.scratch, { recursive: true, force: true });
    await rm(this.spill, { recursive: true, force: true });
  }
}

export function localShellHost(
  cwd: string,
  env: Record<string, string>,
  isolate?: { readonly hide: readonly string[] },
): ShellHost {
  // In a PID namespace the shell's `$$` is 1; the host knows the shell as unshare's child. Kills and
  // memory readings go by that host pid (`$$` = 1 would name the host's init).
  let namespacedShell: Promise<number> | null = null;
  const hostPid = (reported: number): Promise<number> => namespacedShell ?? Promise.resolve(reported);
  return {
    spawn(): Promise<ShellTransport> {
      return new Promise((resolve, reject) => {
        const child =
          isolate === undefined
            ? spawn('bash', ['--noprofile', '--norc'], { cwd, env, stdio: ['pipe', 'pipe', 'pipe'] })
            : spawn(
                'unshare',
                [
                  ...UNSHARE_ARGS,
                  'bash',
                  '--noprofile',
                  '--norc',
                  '-c',
                  ISOLATED_SHELL,
                  'ia-sandbox',
                  ...isolate.hide,
                ],
                { cwd, env, stdio: ['pipe', 'pipe', 'pipe'] },
              );
        if (isolate !== undefined) namespacedShell = shellUnder(child.pid);
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
    killDescendants: async (pid) => killDescendants(await hostPid(pid)),
    descendantsRssBytes: async (pid) => descendantsRss(await hostPid(pid)),
  };
}

/** The host pid of the shell that `unshare --fork` started (its only child), once it exists. */
async function shellUnder(unsharePid: number | undefined): Promise<number> {
  if (unsharePid === undefined) throw new Error('unshare did not start');
  for (let i = 0; i < 200; i++) {
    const [first] = await childrenOf(unsharePid);
    if (first !== undefined) return first;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('the namespaced shell did not appear');
}

function signalNumber(signal: NodeJS.Signals): number {
  const table: Partial<Record<NodeJS.Signals, number>> = { SIGKILL: 9, SIGTERM: 15, SIGINT: 2, SIGSEGV: 11 };
  return table[signal] ?? 0;
}
