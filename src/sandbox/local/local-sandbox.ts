import { mkdtemp, realpath, rm, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { DISK_FULL, fullMount } from '../disk-full.js';
import { harnessShell, type HarnessShell } from '../harness-shell.js';
import { holdPath, releasePath } from '../held-paths.js';
import { SetupCommandQueue, type SetupFallbackRule } from '../setup-commands.js';
import { ShellSession, shellQuote, type ShellHost, type ShellTransport } from '../shell-session.js';
import {
  SandboxCancelledError,
  SandboxError,
  throwIfCancelled,
  type ExecOptions,
  type ExecResult,
  type HarnessExecOptions,
  type OpenProcessOptions,
  type Sandbox,
  type SandboxProcess,
} from '../sandbox.js';
import {
  isolationSupport,
  LOCAL_MQUEUE_DIRS,
  ShellLauncher,
  type LaunchedShell,
  type MechanismKind,
  type SandboxUser,
  type ShellRole,
} from './launch.js';
import { descendantsRss, killDescendants } from './proc-tree.js';
import { localCaEnv, LocalSetupPhase, type SetupCommandResult } from './setup-phase.js';
import { generatedFilesEnv } from '../generated-files.js';

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
   * Run the shells in a sandbox the shell cannot undo (see launch.ts for the mechanisms: root,
   * unprivileged user namespaces, or sudo): no host process visible, no network but `lo`, the host's
   * files read-only except the workspace, private /tmp and home, each `hide` path covered, an
   * unprivileged user with no capabilities, and (with `workspaceBytes`) a sized tmpfs workspace.
   * Docker remains the boundary for untrusted repositories when the host can run it.
   */
  readonly isolate?: {
    readonly hide: readonly string[];
    /** Folders whose whole content is out of sight, now and later, but the workspace (see Confinement.mask). */
    readonly mask?: readonly string[];
    /**
     * The workspace as a private tmpfs of this size inside the sandbox, filled from the host folder
     * at start (see Confinement.workspaceBytes): a job that fills it ends with `disk_limit`, and
     * the host folder is never written. Unset: the host folder itself, with no quota.
     */
    readonly workspaceBytes?: number;
  };
  /**
   * The agent's shell starts at its first command instead of with the sandbox, for a sandbox only the
   * harness uses (eval grading), as DockerSandboxOptions.lazyAgentShell: one process start fewer.
   * Commands behave the same either way.
   */
  readonly lazyAgentShell?: boolean | undefined;
  /**
   * A setup phase to run in the isolated sandbox before its shells start (see setup-phase.ts).
   * Needs `isolate`: an unconfined shell has no namespaces to confine setup to.
   */
  readonly setup?: LocalSetupSpec;
  /**
   * Aborts the start: the step running (a setup command, the forwarder's wait) is killed with what
   * it started, the sandbox ends with everything in it, its folders are removed, and create throws
   * SandboxCancelledError. Once create has returned, the signal means nothing to the sandbox.
   */
  readonly signal?: AbortSignal | undefined;
}

/** What to do between the sandbox's start and its shells; mirrors DockerSetupSpec. */
export interface LocalSetupSpec {
  /**
   * Host folder holding the egress proxy's socket (`proxy.sock`, see environment/egress.ts), bound
   * read-only into the sandbox; the forwarder on 127.0.0.1:3128 leads there. Unset: no way out.
   */
  readonly egressDir?: string | undefined;
  readonly commands: readonly string[];
  /**
   * The setup commands' environment on top of the sandbox's own: plain variables, the proxy's (see
   * localProxyEnv) and the setup secrets. Never given to a shell of the agent phase.
   */
  readonly env: Readonly<Record<string, string>>;
  /** Values that must not outlive setup: a file or a process still holding one fails the phase. */
  readonly secretValues: readonly string[];
  /**
   * Extra CA certificates (PEM), written with a combined bundle below the sandbox's HOME; the
   * variables that name them (localCaEnv) are added to `env`, and to the shells' with `agentEgress`.
   */
  readonly caPem?: Buffer | undefined;
  /** Per command. */
  readonly timeoutMs: number;
  /** Whether a failed command is worth running again (a network error); at most `retries` times. */
  readonly retryable?: ((r: SetupCommandResult) => boolean) | undefined;
  /** Default 0. */
  readonly retries?: number | undefined;
  /** What to run in place of a command that failed after its retries (see setup-commands.ts). */
  readonly fallback?: SetupFallbackRule | undefined;
  /** Workspace paths setup produces: excluded from git snapshots. */
  readonly outputs: readonly string[];
  /** Start a forwarder for the agent phase too (the agent has an allowlist on the same socket). */
  readonly agentEgress?: boolean | undefined;
  readonly onCommand?: ((r: SetupCommandResult, attempt: number) => void) | undefined;
}

/** What the setup phase did. */
export interface LocalSetupReport {
  readonly results: readonly SetupCommandResult[];
}

/** A setup command failed (or setup left a secret behind): the sandbox is gone. */
export class LocalSetupFailedError extends SandboxError {
  constructor(
    message: string,
    readonly results: readonly SetupCommandResult[],
    /** The last failure looked like the network: a later retry may succeed. */
    readonly transient: boolean,
    /** Where setup left a setup secret, when that is why (untrusted text; the values hidden). */
    readonly holders: readonly string[] = [],
  ) {
    super('start_failed', message);
  }
}

/**
 * Whether the isolated local sandbox can run here (see isolationSupport in launch.ts for how, or
 * why not). Asked once per process.
 */
export async function canIsolate(): Promise<boolean> {
  return (await isolationSupport()).ok;
}

export class LocalSandbox implements Sandbox {
  readonly kind = 'local';
  /** What the setup phase did, when the sandbox had one. */
  setupReport: LocalSetupReport | null = null;
  private constructor(
    readonly workdir: string,
    private readonly session: ShellSession,
    private readonly harness: HarnessShell,
    private readonly host: LocalShellHost,
    private readonly scratch: string,
    private readonly spill: string,
    /** The workspace is a sized tmpfs: a full one ends the sandbox with `disk_limit`. */
    private readonly quota: boolean,
  ) {}

  private failure: SandboxError | null = null;

  /**
   * Only when isolated: a process entered into the sandbox as the shells are (same user, namespaces,
   * confinement), in the workspace. An unconfined sandbox has none: its process would be the host's.
   */
  openProcess?: (argv: readonly string[], options: OpenProcessOptions) => Promise<SandboxProcess>;

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
    const scratch = holdPath(await mkdtemp(join(tmpdir(), 'issue-agent-sandbox-')));
    const spill = holdPath(await mkdtemp(join(tmpdir(), 'issue-agent-spill-')));
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
      PYTHONUNBUFFERED: '1',
      ...generatedFilesEnv(tmp),
      ...options.env,
      ...(options.setup?.caPem !== undefined && options.setup.agentEgress === true ? localCaEnv(home) : {}),
    };
    const cleanup = async (): Promise<void> => {
      await rm(scratch, { recursive: true, force: true });
      await rm(spill, { recursive: true, force: true });
      releasePath(scratch);
      releasePath(spill);
    };
    const signal = options.signal;
    if (options.setup !== undefined && options.isolate === undefined) {
      await cleanup();
      throw new SandboxError('start_failed', 'a setup phase needs the isolated local sandbox');
    }
    if (options.isolate !== undefined) {
      const support = await isolationSupport();
      if (!support.ok) {
        await cleanup();
        throw new SandboxError(
          'start_failed',
          `the isolated local sandbox cannot run here: ${support.reason}`,
        );
      }
    }
    const isolate =
      options.isolate === undefined
        ? undefined
        : { hide: [...options.isolate.hide, spill], mask: options.isolate.mask ?? [] };
    // One host, so both shells share one sandbox (its files: workspace, /tmp, HOME): the agent's
    // shell and the harness's, for file operations and checkpoints; not its processes (launch.ts,
    // ShellRole). keepAlive: a shell replaced after a kill finds the sandbox (and its state file)
    // as it was; close() ends it.
    const workspaceBytes = options.isolate?.workspaceBytes;
    const egressDir = options.setup?.egressDir;
    const host = localShellHost(workspace, env, isolate, {
      keepAlive: true,
      ...(workspaceBytes === undefined ? {} : { workspaceBytes }),
      ...(egressDir === undefined ? {} : { egressDir }),
    });
    const stateFile = join(tmp, '.issue-agent-shell-state.sh');
    let setupReport: LocalSetupReport | null = null;
    if (options.setup !== undefined) {
      try {
        const setup = options.setup;
        setupReport = await runLocalSetup(
          host,
          env,
          workspace,
          stateFile,
          {
            ...setup,
            env: { ...setup.env, ...(setup.caPem === undefined ? {} : localCaEnv(home)) },
          },
          signal,
        );
      } catch (error) {
        await host.close();
        await cleanup();
        throw error;
      }
    }
    const captureBytes = options.captureBytes ?? 256 * 1024;
    const session = new ShellSession(host, {
      workdir: workspace,
      // In TMPDIR, which an isolated sandbox makes private: the host never reads it.
      stateFile,
      capture: { headBytes: captureBytes, tailBytes: captureBytes, spillDir: spill },
    });
    // Isolated, the harness's shells live in a process namespace of their side's, out of the
    // agent's sight (launch.ts, ShellRole), and sweep it. Unconfined, there is no such place: the
    // harness's shell is one more process of the host's user, and sweeping would reach the host's.
    const harness = harnessShell(host.harness, {
      workdir: workspace,
      spillDir: spill,
      sweep: isolate !== undefined,
    });
    try {
      // A lazy agent shell is started by its first command (ShellSession starts one when none runs).
      throwIfCancelled(signal);
      if (options.lazyAgentShell !== true) await session.start();
      await harness.start();
      throwIfCancelled(signal);
    } catch (error) {
      session.close();
      harness.close();
      await host.close();
      await cleanup();
      throw error;
    }
    const sandbox = new LocalSandbox(
      workspace,
      session,
      harness,
      host,
      scratch,
      spill,
      workspaceBytes !== undefined,
    );
    sandbox.setupReport = setupReport;
    if (isolate !== undefined) {
      sandbox.openProcess = (argv, o) => sandbox.enterProcess(argv, { ...env, ...o.env });
    }
    return sandbox;
  }

  private async enterProcess(
    argv: readonly string[],
    env: Readonly<Record<string, string>>,
  ): Promise<SandboxProcess> {
    if (this.failure !== null) throw this.failure;
    // The argv goes to bash as positional parameters, never parsed as shell text.
    const launched = await this.host.oneOff(env, [
      '-c',
      'cd -- "$1" && shift && exec -- "$@"',
      'issue-agent-process',
      this.workdir,
      ...argv,
    ]);
    await launched.started;
    const { child } = launched;
    child.stdin.on('error', () => undefined);
    let tail = '';
    child.stderr.on('data', (c: Buffer) => {
      tail = (tail + c.toString('utf8')).slice(-4096);
    });
    const closed = new Promise<void>((resolve) => {
      child.once('close', () => {
        resolve();
      });
    });
    return {
      stdin: child.stdin,
      stdout: child.stdout,
      stderrTail: () => tail,
      closed,
      close: () => {
        launched.kill();
      },
    };
  }

  async exec(command: string, options: ExecOptions): Promise<ExecResult> {
    if (this.failure !== null) throw this.failure;
    return this.review(await this.session.exec(command, options));
  }

  async harnessExec(command: string, options: HarnessExecOptions): Promise<ExecResult> {
    if (this.failure !== null) throw this.failure;
    return this.review(await this.harness.exec(command, options));
  }

  /** A full workspace (with a quota) is the sandbox's terminal error, as in Docker. */
  private async review(result: ExecResult): Promise<ExecResult> {
    if (!this.quota || !DISK_FULL.test(result.output)) return result;
    const df = await this.harness.exec(`df -P -B1 -- ${shellQuote(this.workdir)}`, { timeoutMs: 10_000 });
    if (fullMount(df.output) === null) return result;
    this.failure = new SandboxError(
      'disk_limit',
      `the sandbox ran out of space: the workspace ${this.workdir} is full`,
    );
    throw this.failure;
  }

  async close(): Promise<void> {
    const pid = this.session.pid;
    // Through the host, which maps a namespaced shell's `$$` to its host pid.
    if (pid > 0) await this.host.killDescendants(pid).catch(() => undefined);
    this.session.close();
    this.harness.close();
    // An isolated sandbox ends with everything in it (detached daemons too).
    await this.host.close().catch(() => undefined);
    await rm(this.scratch, { recursive: true, force: true });
    await rm(this.spill, { recursive: true, force: true });
    releasePath(this.scratch);
    releasePath(this.spill);
  }
}

export interface LocalShellHost extends ShellHost {
  /**
   * The same sandbox's harness shells (see ShellRole in launch.ts): isolated, in a process
   * namespace of their own that no shell of this host (the agent's side) can see.
   */
  readonly harness: ShellHost;
  /** How the shells are confined, for logs: null until an isolated sandbox has started. */
  readonly mechanism: string | null;
  /** Ends every shell of this host and, when isolated, its sandbox with everything in it. */
  close(): Promise<void>;
  /** Starts the isolated sandbox without a shell (needs `keepAlive`). */
  startSandbox(): Promise<void>;
  /** One process in the isolated sandbox with its own environment (see ShellLauncher.oneOff). */
  oneOff(env: Readonly<Record<string, string>>, bashArgs: readonly string[]): Promise<LaunchedShell>;
  /** The holder's pid inside the sandbox, once it started. */
  readonly holderPid: number | null;
}

export interface LocalShellHostOptions {
  /** Mechanisms to try, in order (see MechanismKind); the default suits the host. */
  readonly mechanisms?: readonly MechanismKind[];
  /** Whom an isolated shell runs as when the host is root (default nobody, 65534). */
  readonly sandboxUser?: SandboxUser;
  /** Host folders besides `cwd` that an isolated shell may write. */
  readonly writable?: readonly string[];
  /**
   * Keep the sandbox when its last shell ends (a shell replaced after a kill then finds its /tmp,
   * HOME and state file), until close(), which the caller must then call.
   */
  readonly keepAlive?: boolean;
  /** With `isolate`: the workspace as a private tmpfs of this size (see Confinement). */
  readonly workspaceBytes?: number;
  /** With `isolate`: the egress proxy's socket folder, bound read-only inside (see Confinement). */
  readonly egressDir?: string;
}

/**
 * The shells of one local sandbox. With `isolate`, every shell of this host runs in one sandbox
 * (see Confinement in launch.ts), made on the first spawn and ended with the last shell (or, with
 * `keepAlive`, by close()); a second host, even on the same workspace, has a sandbox of its own,
 * whose processes this one cannot see.
 */
export function localShellHost(
  cwd: string,
  env: Record<string, string>,
  isolate?: { readonly hide: readonly string[]; readonly mask?: readonly string[] },
  options: LocalShellHostOptions = {},
): LocalShellHost {
  const launcher = new ShellLauncher({
    cwd,
    env,
    confinement:
      isolate === undefined
        ? { kind: 'none' }
        : {
            kind: 'isolated',
            hide: isolate.hide,
            ...(isolate.mask === undefined ? {} : { mask: isolate.mask }),
            writable: options.writable ?? [],
            ...(options.workspaceBytes === undefined ? {} : { workspaceBytes: options.workspaceBytes }),
            ...(options.egressDir === undefined ? {} : { egressDir: options.egressDir }),
          },
    ...(options.mechanisms === undefined ? {} : { mechanisms: options.mechanisms }),
    ...(options.sandboxUser === undefined ? {} : { sandboxUser: options.sandboxUser }),
    ...(options.keepAlive === undefined ? {} : { keepAlive: options.keepAlive }),
  });
  const shells = new Map<LaunchedShell, ShellRole>();
  // A shell reports its `$$`, which in a sandbox names it in its side's PID namespace (the agent's
  // or the harness's: the same number may name a shell of each). Kills and memory readings go by
  // the host pid of that shell, looked up among the live shells of its side, newest first (a shell
  // being replaced may still be ending); a pid that names none of them is never taken for a host pid.
  const hostPid = async (reported: number, role: ShellRole): Promise<number | null> => {
    if (isolate === undefined) return reported;
    for (const [shell, r] of [...shells].reverse()) {
      if (r !== role) continue;
      const inner = await shell.namespacePid().catch(() => null);
      if (inner === reported) return shell.hostPid();
    }
    return null;
  };
  const spawnAs = async (role: ShellRole): Promise<ShellTransport> => {
    const shell = await launcher.launch(role);
    const { child } = shell;
    await shell.started;
    shells.set(shell, role);
    child.once('exit', () => shells.delete(shell));
    const { stdin, stdout, stderr } = child;
    // A write after the shell died must not crash the host process.
    stdin.on('error', () => undefined);
    return {
      write: (data) => {
        if (stdin.writable) stdin.write(data);
      },
      onData: (listener) => {
        // The frame sends the shell's stderr to stdout (`exec 2>&1`): one ordered stream.
        stdout.on('data', listener);
        stderr.resume();
      },
      onExit: (listener) => {
        child.once('exit', (code, signal) => {
          listener(code ?? (signal === null ? null : 128 + signalNumber(signal)));
        });
      },
      kill: () => {
        shell.kill();
      },
    };
  };
  const procTree = (role: ShellRole) => ({
    killDescendants: async (pid: number) => {
      const host = await hostPid(pid, role);
      if (host !== null) await killDescendants(host);
    },
    descendantsRssBytes: async (pid: number) => {
      const host = await hostPid(pid, role);
      return host === null ? 0 : descendantsRss(host);
    },
  });
  return {
    get mechanism() {
      return launcher.mechanism;
    },
    close: () => launcher.close(),
    startSandbox: () => launcher.startSandbox(),
    oneOff: (e, args) => launcher.oneOff(e, args),
    get holderPid() {
      return launcher.holderPid;
    },
    spawn: () => spawnAs('agent'),
    ...procTree('agent'),
    harness: { spawn: () => spawnAs('harness'), ...procTree('harness') },
  };
}

function signalNumber(signal: NodeJS.Signals): number {
  const table: Partial<Record<NodeJS.Signals, number>> = { SIGKILL: 9, SIGTERM: 15, SIGINT: 2, SIGSEGV: 11 };
  return table[signal] ?? 0;
}

/** Network failures are retried after this long, doubling, at most 8 s. */
const RETRY_BASE_MS = 1000;

/**
 * The setup phase in a started sandbox, before any shell (see setup-phase.ts): the CA bundle, the
 * forwarder, the commands (retried when `retryable` says so), then the sweep, the search for secret
 * values left behind, the outputs excluded from snapshots, and the agent phase's forwarder if any.
 */
async function runLocalSetup(
  host: LocalShellHost,
  env: Readonly<Record<string, string>>,
  workspace: string,
  stateFile: string,
  spec: LocalSetupSpec,
  signal: AbortSignal | undefined,
): Promise<LocalSetupReport> {
  // Every step stops at the signal; the caller ends the sandbox (and what runs in it).
  const phase = new LocalSetupPhase(host, env, signal);
  throwIfCancelled(signal);
  await host.startSandbox();
  if (spec.caPem !== undefined) await phase.installCaBundle(spec.caPem);
  const results: SetupCommandResult[] = [];
  if (spec.commands.length > 0 && spec.egressDir !== undefined) await phase.startForwarder();
  // The keys in the kernel's keyrings before setup: any other after it is setup's (and removed).
  const keysBefore = spec.commands.length > 0 ? await phase.visibleKeys() : null;
  const queue = new SetupCommandQueue(spec.commands, spec.fallback);
  for (let command = queue.next(); command !== undefined; command = queue.next()) {
    let r: SetupCommandResult;
    let attempt = 0;
    for (;;) {
      attempt += 1;
      r = await phase.run(command, spec.env, spec.timeoutMs);
      spec.onCommand?.(r, attempt);
      if (r.exitCode === 0 || attempt > (spec.retries ?? 0) || spec.retryable?.(r) !== true) break;
      await delay(Math.min(8000, RETRY_BASE_MS * 2 ** (attempt - 1)), undefined, { signal }).catch(() => {
        throw new SandboxCancelledError(signal?.reason);
      });
    }
    results.push(r);
    if (r.exitCode !== 0) {
      const why = r.timedOut
        ? `timed out after ${Math.round(spec.timeoutMs / 1000)} s`
        : `exited with ${String(r.exitCode)}`;
      const failure = queue.failed(r, why);
      if (failure === null) continue;
      throw new LocalSetupFailedError(failure, results, spec.retryable?.(r) === true);
    }
  }
  // Nothing setup started survives into the agent phase: not the forwarder, not a daemon, not a
  // process holding a setup secret in its environment, not a shared memory segment or a message
  // queue (which outlive their processes); and no setup secret is left in a file.
  await phase.sweep();
  if (spec.secretValues.length > 0) {
    // Every place the sandbox user can write (launch.ts): the rest of the host's tree is read-only.
    const dirs = [
      workspace,
      env.HOME,
      env.TMPDIR,
      '/tmp',
      '/var/tmp',
      '/dev/shm',
      '/run',
      ...LOCAL_MQUEUE_DIRS,
    ];
    const holders = await phase.secretHolders(
      spec.secretValues,
      dirs.filter((d): d is string => d !== undefined),
    );
    if (holders.length > 0) {
      throw new LocalSetupFailedError(
        `setup left a setup secret in ${holders.length} place(s) (${holders.slice(0, 3).join(', ')}); a setup secret must not outlive setup`,
        results,
        false,
        holders,
      );
    }
  }
  await phase.removeIpc();
  if (keysBefore !== null) await phase.removeNewKeys(keysBefore);
  await phase.finish(spec.outputs, [stateFile]);
  if (spec.agentEgress === true && spec.egressDir !== undefined) await phase.startForwarder();
  return { results };
}
