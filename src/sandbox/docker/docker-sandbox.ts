import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { lstat, mkdtemp, readdir, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { setTimeout as delay } from 'node:timers/promises';
import { join } from 'node:path';
import { PassThrough, type Duplex, type Readable, type Writable } from 'node:stream';
import Docker from 'dockerode';
import type { Logger } from 'pino';
import { DISK_FULL, fullMount } from '../disk-full.js';
import { harnessShell, type HarnessShell } from '../harness-shell.js';
import { SHELL_OWN } from '../shell-names.js';
import { ShellSession } from '../shell-session.js';
import { holdPath, releasePath } from '../held-paths.js';
import { SetupCommandQueue, type SetupFallbackRule } from '../setup-commands.js';
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
import { caMountFile, hostsMountFile } from './ca-file.js';
import { chooseImage } from './choose-image.js';
import { runOneOff } from './container-exec.js';
import {
  CA_INSTALL_SCRIPT,
  CHECKOUT_SCRIPT,
  isPlainPath,
  SetupPhase,
  type SetupCommandResult,
} from './setup-phase.js';
import {
  CONTAINER_HOME,
  RESTORE_MOUNT,
  CONTAINER_WORKDIR,
  DEFAULT_LIMITS,
  containerSpec,
  type SandboxLimits,
} from './container-spec.js';
import { DockerShellHost, errorMessage } from './docker-shell.js';
import { HostCgroup } from './host-cgroup.js';
import { LABEL_OWNER, ownerId } from './owner.js';
import { reapOrphans, type ReapOptions, type ReapResult } from './reap.js';
import { AGENT_GID, AGENT_UID, HARNESS_BASH, HARNESS_UID } from './agent-user.js';

export interface DockerSandboxOptions {
  /**
   * A host directory holding the job's copy of the repository, made before the sandbox exists. Its
   * content is copied into the container's workspace at start (a tar stream the sandbox user
   * unpacks); the directory itself is never mounted, and never read again.
   */
  readonly workspace: string;
  /**
   * The workspace directory holds only the repository's `.git` (HEAD at the commit to work on): the
   * files are checked out inside the container, by the sandbox user on its tmpfs, so the host never
   * writes them. Needs `image` (there are no files on the host to choose one from).
   */
  readonly checkout?: boolean | undefined;
  /** Job id, recorded as the container label issue-agent.job. */
  readonly jobId: string;
  /** Image to run. Default: chooseImage(workspace) (node, python or base). */
  readonly image?: string | undefined;
  /** Engine client. Default: `new Docker()` (DOCKER_HOST or /var/run/docker.sock). */
  readonly docker?: Docker | undefined;
  /** Resource limits; see DEFAULT_LIMITS. */
  readonly limits?: SandboxLimits | undefined;
  /** Extra variables for the shell. Never a secret: the model sees command output. */
  readonly env?: Readonly<Record<string, string>> | undefined;
  /**
   * A setup phase to run before the shells start (see setup-phase.ts). With it the container gets
   * one host path: the egress proxy's socket directory, read-only, when `egressDir` is set.
   */
  readonly setup?: DockerSetupSpec | undefined;
  /** In-memory capture per command, head and tail, bytes each. Default 256 KiB. */
  readonly captureBytes?: number | undefined;
  /** Owner label (for the reaper). Default: this process, `host:pid:starttime`. */
  readonly owner?: string | undefined;
  /** Bound on the shell saying it is ready. Default 15 s. */
  readonly startTimeoutMs?: number | undefined;
  /** Parent of the host scratch directory (spilled output). Default: os.tmpdir(). */
  readonly scratchParent?: string | undefined;
  /**
   * The agent's shell starts at its first command instead of with the sandbox, for a sandbox only the
   * harness uses (eval grading): one process start fewer. Commands behave the same either way.
   */
  readonly lazyAgentShell?: boolean | undefined;
  /**
   * Aborts the start: the step running (a setup command, the copy, the cache's capture) is dropped,
   * the container is removed with every process in it, and create throws SandboxCancelledError.
   * Once create has returned, the signal means nothing to the sandbox.
   */
  readonly signal?: AbortSignal | undefined;
  readonly logger?: Logger | undefined;
}

/**
 * Container creations this process has asked the engine for and not heard back about: a container
 * they make exists only once they settle, so removeOwned waits for them before it lists.
 */
const creating = new Set<Promise<unknown>>();

/** What a DockerSandbox needs once its container runs; shared by the cold path and the warm pool. */
export interface AdoptParams {
  readonly docker: Docker;
  readonly container: Docker.Container;
  readonly image: string;
  readonly jobId: string;
  readonly limits: Required<SandboxLimits>;
  readonly captureBytes?: number | undefined;
  readonly startTimeoutMs?: number | undefined;
  readonly scratchParent?: string | undefined;
  readonly logger?: Logger | undefined;
  /** Runs after the container is removed (e.g. the pool moves the workspace back). */
  readonly afterClose?: (() => Promise<void>) | undefined;
  /** See DockerSandboxOptions.lazyAgentShell. */
  readonly lazyAgentShell?: boolean | undefined;
}

const STATE_SETTLE_POLLS = 10;
const STATE_SETTLE_INTERVAL_MS = 200;
/**
 * Output that may mean a fork failed. Only a reason to look: whether the pids limit was hit is
 * decided by the kernel's own count (see pidsExhausted), so a broad pattern costs one helper exec at
 * most (bash's `fork: retry: Resource temporarily unavailable`, Python's `BlockingIOError: [Errno 11]
 * Resource temporarily unavailable`, Node's `spawn EAGAIN`, dash's `Cannot fork`, busybox's `can't fork`).
 */
const FORK_FAILURE = /Resource temporarily unavailable|Cannot fork|can't fork|fork failed|EAGAIN/i;
/**
 * The pids controller's event file: its `max` line counts forks refused because of the limit, for
 * the whole life of the container's cgroup (cgroup v2 path first, then v1). Read from the host's
 * cgroup file system where it shows the container (host-cgroup.ts); otherwise with `cat` as an
 * exec's own process, which fails on the path that does not exist and prints the other. That exec
 * must join the container's cgroup, so while the limit is hit it often cannot start at all.
 */
const PIDS_EVENTS_READ = ['cat', '/sys/fs/cgroup/pids.events', '/sys/fs/cgroup/pids/pids.events'];
const PIDS_READ_TRIES = 3;
const PIDS_READ_RETRY_MS = 300;

/**
 * One hardened container per job (see container-spec.ts): non-root, no network interface in any phase,
 * no capabilities, no-new-privileges, read-only root, the workspace, /tmp and HOME on sized tmpfs
 * mounts, memory (no swap), CPU and pids limits, no host path but the egress proxy's socket folder
 * (read-only, when there is a setup phase), no host environment.
 *
 * The agent's commands go through one persistent bash per container (ShellSession over
 * DockerShellHost) as the image's `agent`; the harness's through a second one as the image's
 * `harness` (agent-user.ts), which no process of the agent can trace, signal or read, started from a
 * bash it cannot read itself (so it is non-dumpable) and which kills whatever a harness command
 * left running before it reports back. A container that died (killed, OOM) or whose pids are
 * exhausted by a fork bomb turns into a SandboxError with a typed code; the sandbox stays broken
 * and close() still cleans up.
 */
export class DockerSandbox implements Sandbox {
  readonly kind = 'docker';
  readonly workdir = CONTAINER_WORKDIR;
  private closed = false;
  private closing: Promise<void> | null = null;
  private failure: SandboxError | null = null;
  private oomKills = 0;
  /** The cgroup's count of forks refused by the pids limit, as of the last reading. */
  private pidsMaxEvents = 0;
  /** The container's cgroup counters as the host sees them, when it does (host-cgroup.ts). */
  private readonly hostCgroup: HostCgroup;
  /** What the setup phase did, when the sandbox had one. */
  setupReport: SetupReport | null = null;
  /** The job's variables given after the container started (useEnvironment), for every new process. */
  private jobEnv: Readonly<Record<string, string>> = {};

  private constructor(
    private readonly docker: Docker,
    private readonly container: Docker.Container,
    readonly image: string,
    private job: string,
    private readonly limits: Required<SandboxLimits>,
    /** The agent's shells' host (the agent's user) and the harness's (the harness's user). */
    private readonly hosts: { readonly agent: DockerShellHost; readonly harness: DockerShellHost },
    private readonly session: ShellSession,
    private readonly harness: HarnessShell,
    /** The agent's shell starts with its first command (DockerSandboxOptions.lazyAgentShell). */
    private readonly lazyAgentShell: boolean,
    private readonly scratch: string,
    private logger: Logger | undefined,
    private afterClose: (() => Promise<void>) | undefined,
  ) {
    this.hostCgroup = new HostCgroup(container.id);
  }

  get jobId(): string {
    return this.job;
  }

  /**
   * Gives a warm sandbox (shell already running) to a job: used by the warm pool, whose sandboxes
   * are started before the job is known.
   */
  handOver(jobId: string, logger?: Logger): void {
    this.job = jobId;
    this.logger = logger?.child({ jobId, container: this.container.id.slice(0, 12) });
  }

  get containerId(): string {
    return this.container.id;
  }

  /** `uid:gid` the container's processes run as: the image's unprivileged `agent`. */
  get user(): string {
    return CONTAINER_USER;
  }

  /** Creates, starts and attaches a new container for the job. */
  static async create(options: DockerSandboxOptions): Promise<DockerSandbox> {
    const docker = options.docker ?? new Docker();
    let workspace: string;
    try {
      workspace = await realpath(options.workspace);
    } catch (error) {
      throw new SandboxError('start_failed', `workspace ${options.workspace} does not exist`, {
        cause: error,
      });
    }
    const signal = options.signal;
    await assertEngine(docker);
    const checkout = options.checkout === true;
    if (checkout && options.image === undefined)
      throw new SandboxError('start_failed', 'a workspace checked out in the container needs an image');
    const image = options.image ?? (await chooseImage(workspace));
    const limits = { ...DEFAULT_LIMITS, ...options.limits };
    const setup = options.setup;
    const caFile = setup?.caPem === undefined ? undefined : await caMountFile(setup.caPem);
    throwIfCancelled(signal);
    let container: Docker.Container;
    try {
      const created = docker.createContainer(
        containerSpec({
          name: containerName(options.jobId),
          image,
          uid: AGENT_UID,
          gid: AGENT_GID,
          limits,
          labels: { job: options.jobId, owner: options.owner ?? ownerId() },
          hostsFile: await hostsMountFile(),
          env: options.env,
          ...(setup?.egressDir === undefined ? {} : { egressDir: setup.egressDir }),
          ...(setup?.restoreFile === undefined ? {} : { restoreFile: setup.restoreFile }),
          ...(caFile === undefined ? {} : { caFile }),
        }),
      );
      creating.add(created);
      try {
        container = await created;
      } finally {
        creating.delete(created);
      }
    } catch (error) {
      throw new SandboxError(
        'start_failed',
        `could not create a container from ${image}: ${errorMessage(error)}`,
        {
          cause: error,
        },
      );
    }
    try {
      throwIfCancelled(signal);
      await container.start();
    } catch (error) {
      await container.remove({ force: true, v: true }).catch(() => undefined);
      if (error instanceof SandboxCancelledError) throw error;
      throw new SandboxError('start_failed', `could not start the container: ${errorMessage(error)}`, {
        cause: error,
      });
    }
    const attach = (): Promise<DockerSandbox> =>
      DockerSandbox.adopt({
        docker,
        container,
        image,
        jobId: options.jobId,
        limits,
        captureBytes: options.captureBytes,
        startTimeoutMs: options.startTimeoutMs,
        scratchParent: options.scratchParent,
        logger: options.logger,
        lazyAgentShell: options.lazyAgentShell,
      });
    if (
      setup !== undefined &&
      setup.commands.length === 0 &&
      (setup.restore === undefined || setup.restoreFile !== undefined)
    ) {
      // No command of the repository runs (a cache hit, or nothing to set up): nothing to sweep, so
      // the shells start first and the files arrive through a shell in one command (placeFiles).
      const sandbox = await attach();
      const placing = performance.now();
      try {
        throwIfCancelled(signal);
        const restore = setup.restoreFile !== undefined;
        await sandbox.placeFiles(workspace, {
          restore,
          // The workspace is the host's own pristine copy, which no sandbox has ever written.
          restoreAfterCopy: restore && (setup.outputsTracked ?? (await holdsAny(workspace, setup.outputs))),
          checkout,
          // The CA files are read only through the proxy's variables: without an agent proxy, nothing.
          ca: caFile !== undefined && setup.agentEgress === true,
          exclude: setup.outputs,
        });
        if (setup.agentEgress === true && setup.egressDir !== undefined) {
          await new SetupPhase(docker, container, CONTAINER_USER, signal).startForwarder();
        }
        throwIfCancelled(signal);
      } catch (error) {
        await sandbox.close();
        throw error;
      }
      sandbox.setupReport = {
        results: [],
        captureError: null,
        placeMs: Math.round(performance.now() - placing),
      };
      return sandbox;
    }
    let setupReport: SetupReport | null = null;
    if (setup !== undefined) {
      try {
        setupReport = await runSetupPhase(
          docker,
          container,
          workspace,
          checkout,
          setup,
          limits,
          options.logger,
          signal,
        );
      } catch (error) {
        await container.remove({ force: true, v: true }).catch(() => undefined);
        throw error;
      }
    }
    const sandbox = await attach();
    sandbox.setupReport = setupReport;
    try {
      throwIfCancelled(signal);
      if (setup === undefined) await sandbox.copyIn(workspace, { checkout });
      throwIfCancelled(signal);
    } catch (error) {
      await sandbox.close();
      throw error;
    }
    return sandbox;
  }

  /** Attaches the persistent shell to a running container. On failure the container is removed. */
  static async adopt(params: AdoptParams): Promise<DockerSandbox> {
    const { docker, container } = params;
    let scratch: string | null = null;
    try {
      scratch = holdPath(await mkdtemp(join(params.scratchParent ?? tmpdir(), 'issue-agent-docker-')));
      const hosts = {
        agent: new DockerShellHost(docker, container, { user: CONTAINER_USER, workdir: CONTAINER_WORKDIR }),
        // Another user than the agent's (agent-user.ts): nothing the agent runs can reach the
        // harness's processes. Its own name, so per-user paths (pytest's /tmp/pytest-of-<user>)
        // of its test runs and the agent's do not collide.
        harness: new DockerShellHost(docker, container, {
          user: HARNESS_USER,
          workdir: CONTAINER_WORKDIR,
          bash: HARNESS_BASH,
          env: { USER: 'harness', LOGNAME: 'harness' },
        }),
      };
      const captureBytes = params.captureBytes ?? 256 * 1024;
      const session = new ShellSession(hosts.agent, {
        workdir: CONTAINER_WORKDIR,
        // In the container's tmpfs: the host never reads it.
        stateFile: '/tmp/.issue-agent-shell-state.sh',
        capture: { headBytes: captureBytes, tailBytes: captureBytes, spillDir: scratch },
        ...(params.startTimeoutMs === undefined ? {} : { startTimeoutMs: params.startTimeoutMs }),
      });
      const harness = harnessShell(hosts.harness, {
        workdir: CONTAINER_WORKDIR,
        spillDir: scratch,
        startTimeoutMs: params.startTimeoutMs,
        // The harness's user has no process but the harness shell between commands.
        sweep: true,
      });
      const sandbox = new DockerSandbox(
        docker,
        container,
        params.image,
        params.jobId,
        params.limits,
        hosts,
        session,
        harness,
        params.lazyAgentShell === true,
        scratch,
        params.logger?.child({ jobId: params.jobId, container: container.id.slice(0, 12) }),
        params.afterClose,
      );
      try {
        // A lazy agent shell is started by its first command (ShellSession starts one when none runs).
        await Promise.all([params.lazyAgentShell === true ? undefined : session.start(), harness.start()]);
      } catch (error) {
        hosts.agent.dispose();
        hosts.harness.dispose();
        session.close();
        harness.close();
        throw error;
      }
      return sandbox;
    } catch (error) {
      await container.remove({ force: true, v: true }).catch(() => undefined);
      if (scratch !== null) {
        await rm(scratch, { recursive: true, force: true });
        releasePath(scratch);
      }
      if (params.afterClose !== undefined) await params.afterClose().catch(() => undefined);
      if (error instanceof SandboxError) throw error;
      throw new SandboxError('start_failed', `could not attach to the container: ${errorMessage(error)}`, {
        cause: error,
      });
    }
  }

  /** Removes labelled containers whose owner process is gone (see reap.ts). */
  static reapOrphans(docker: Docker, options?: ReapOptions): Promise<ReapResult> {
    return reapOrphans(docker, options);
  }

  /**
   * Removes every container this process made (its owner label), with every process in it, whoever
   * still uses it: for a process that must go now (the CLI's second Ctrl-C) while closes are under
   * way. Creations still in flight are waited for (at most `waitMs`), so a container the engine is
   * making right now is not left behind; so is a removal one of those closes already asked for (the
   * engine answers 409 "removal … already in progress" and goes on killing), so the caller may exit
   * once this returns (at most `goneMs`). Returns the ids removed.
   */
  static async removeOwned(docker: Docker, waitMs = 3_000, goneMs = 5_000): Promise<string[]> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled([...creating]),
      new Promise((resolve) => (timer = setTimeout(resolve, waitMs))),
    ]);
    clearTimeout(timer);
    const owned = await docker.listContainers({
      all: true,
      filters: { label: [`${LABEL_OWNER}=${ownerId()}`] },
    });
    const deadline = Date.now() + goneMs;
    const removed = await Promise.all(
      owned.map(async (c) => {
        try {
          await docker.getContainer(c.Id).remove({ force: true, v: true });
          return [c.Id];
        } catch (error) {
          const code = statusCode(error);
          if (code === 404) return [];
          if (code !== 409) throw error;
        }
        await waitUntilGone(docker.getContainer(c.Id), deadline);
        return [c.Id];
      }),
    );
    return removed.flat();
  }

  async exec(command: string, options: ExecOptions): Promise<ExecResult> {
    this.assertUsable();
    return this.execChecked(command, options);
  }

  async harnessExec(command: string, options: HarnessExecOptions): Promise<ExecResult> {
    this.assertUsable();
    let result: ExecResult;
    try {
      result = await this.harness.exec(command, options);
    } catch (error) {
      throw await this.fail(error);
    }
    return this.review(result);
  }

  /**
   * A process in the container as the sandbox user, in the workspace, with its stdin and stdout
   * attached (see Sandbox.openProcess). It lives in the container's limits and network (none), and
   * dies with the container at the latest.
   */
  async openProcess(argv: readonly string[], options: OpenProcessOptions): Promise<SandboxProcess> {
    this.assertUsable();
    let exec: Docker.Exec;
    let stream: Duplex;
    try {
      exec = await this.container.exec({
        Cmd: [...argv],
        AttachStdin: true,
        AttachStdout: true,
        AttachStderr: true,
        Tty: false,
        User: CONTAINER_USER,
        WorkingDir: CONTAINER_WORKDIR,
        Env: Object.entries({ ...this.jobEnv, ...options.env }).map(([k, v]) => `${k}=${v}`),
      });
      stream = await exec.start({ hijack: true, stdin: true });
    } catch (error) {
      throw new SandboxError(
        'start_failed',
        `could not start ${argv[0] ?? 'a process'}: ${errorMessage(error)}`,
        {
          cause: error,
        },
      );
    }
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    let tail = '';
    stderr.on('data', (c: Buffer) => {
      tail = (tail + c.toString('utf8')).slice(-4096);
    });
    this.docker.modem.demuxStream(stream, stdout, stderr);
    const closed = new Promise<void>((resolve) => {
      const done = (): void => {
        stdout.end();
        stderr.end();
        resolve();
      };
      stream.once('end', done);
      stream.once('close', done);
      stream.once('error', done);
    });
    const stdin = new PassThrough();
    stdin.pipe(stream);
    stream.on('error', () => undefined);
    return {
      stdin,
      stdout,
      stderrTail: () => tail,
      closed,
      close: () => {
        stdin.end();
        stream.destroy();
      },
    };
  }

  /**
   * Copies a host directory into the workspace: the host's `tar` reads the directory (made by the
   * host before any sandbox process existed) and the sandbox user unpacks the stream inside, so the
   * files belong to the sandbox from the start. Used once per sandbox, before the first command.
   * `source` is the host directory, or its archive when the caller packed it already (packWorkspace).
   */
  async copyIn(
    source: string | WorkspaceArchive,
    options: {
      readonly checkout?: boolean;
      readonly switchCheckout?: boolean;
      /** Workspace paths kept out of git snapshots (the environment's outputs). */
      readonly exclude?: readonly string[] | undefined;
      /**
       * A cached environment is at RESTORE_MOUNT (a warm container's entry folder): unpack it too,
       * after the repository's files when `afterCopy` (always after a switch), else beside them.
       */
      readonly restore?: { readonly afterCopy: boolean } | undefined;
    } = {},
  ): Promise<void> {
    await this.placeFiles(source, {
      restore: options.restore !== undefined,
      restoreAfterCopy:
        options.restore !== undefined && (options.restore.afterCopy || options.switchCheckout === true),
      ca: false,
      exclude: options.exclude ?? [],
      checkout: options.checkout === true,
      switchCheckout: options.switchCheckout === true,
    });
  }

  /**
   * Gives a started sandbox (the warm pool's, which had no job yet) the job's variables, as a new
   * container has them from its creation: both running shells export them (each `NAME=value` read
   * off the shell's input by `read`, never parsed as shell text; a new shell would cost an exec,
   * about 150 ms here), and a shell started later (one replaced after it died) or a process started
   * beside them gets them as the exec's environment. Names must be plain variable names.
   */
  async useEnvironment(env: Readonly<Record<string, string>>): Promise<void> {
    this.assertUsable();
    const names = Object.keys(env);
    if (names.length === 0) return;
    const bad = names.find((n) => !/^[A-Za-z_][A-Za-z0-9_]*$/.test(n) || SHELL_OWN.test(n));
    if (bad !== undefined) {
      throw new SandboxError(
        'start_failed',
        `not a variable a job may set in a running shell: ${bad.slice(0, 60)}`,
      );
    }
    if (Object.values(env).some((v) => v.includes('\0'))) {
      throw new SandboxError('start_failed', 'a variable holds a NUL byte');
    }
    this.hosts.agent.setEnv(env);
    this.hosts.harness.setEnv(env);
    this.jobEnv = { ...env };
    const stdin = Buffer.from(names.map((n) => `${n}=${env[n] ?? ''}\0`).join(''));
    const script = exportScript(stdin.length, names.length);
    const results = await Promise.all([
      this.session.exec(script, { timeoutMs: 30_000, stdin }),
      this.harness.exec(script, { timeoutMs: 30_000, stdin }),
    ]);
    const failed = results.find((r) => r.exitCode !== 0);
    if (failed !== undefined) {
      throw new SandboxError(
        'start_failed',
        `could not set the job's variables: ${failed.output.trim().slice(0, 300)}`,
      );
    }
  }

  /**
   * The files of a sandbox in which no setup command runs, placed by one command of a shell already
   * attached (an exec costs the engine a process start, about 35 ms of a 2-core machine, and they do
   * not overlap: the machine's CPU is the limit): the repository's copy, the cached environment
   * from its read-only mount (unpacked beside the copy unless the repository holds one of its
   * paths, when the entry must win and goes after), the CA certificates from their mount, and the
   * outputs' exclusion from git snapshots. The script is fixed text; the excluded paths are checked
   * to be plain relative paths before they are quoted into it.
   */
  async placeFiles(source: string | WorkspaceArchive, options: PlaceFilesOptions): Promise<void> {
    this.assertUsable();
    const bad = options.exclude.find((p) => !isPlainPath(p));
    if (bad !== undefined) throw new SandboxError('start_failed', `not a plain workspace path: ${bad}`);
    const switching = options.switchCheckout === true;
    if (
      switching &&
      (!options.checkout || (options.restore && !options.restoreAfterCopy) || typeof source === 'string')
    ) {
      throw new SandboxError(
        'start_failed',
        'switching a checkout needs a packed `.git`, and a cached environment unpacked after it',
      );
    }
    const archive =
      typeof source === 'string' ? await packSmall(source, SHELL_COPY_MAX_BYTES) : source.archive;
    // A large repository streams through an exec of its own first.
    if (archive === null && typeof source === 'string') {
      await this.settleCopy(await streamTree(this.docker, this.container, source));
    }
    const beside = options.restore && !options.restoreAfterCopy && archive !== null;
    const untar = (from: string): string =>
      `tar -x -f ${from} -C ${CONTAINER_WORKDIR} --no-same-owner --no-overwrite-dir`;
    // A step that fails before the archive is unpacked still reads it off stdin first: whatever the
    // shell leaves unread there, it would read next as commands.
    const bail = (code: number): string =>
      archive === null ? `exit ${code}` : `{ head -c ${archive.length} >/dev/null; exit ${code}; }`;
    const lines = [`cd ${CONTAINER_WORKDIR} || ${bail(PLACE_EXIT.copy)}`];
    if (options.ca) lines.push(`${CA_INSTALL_SCRIPT} || ${bail(PLACE_EXIT.ca)}`);
    if (beside) lines.push(`${untar(RESTORE_MOUNT)} </dev/null & __ia_r=$!`);
    // The `.git` of the last checkout goes, its index stays (in the container's /tmp meanwhile).
    if (switching) {
      lines.push(
        `__ia_was=$(${GIT_PINNED} rev-parse --verify HEAD) && mv .git/index ${KEPT_INDEX} && rm -rf .git || ${bail(PLACE_EXIT.checkout)}`,
      );
    }
    if (archive !== null) {
      // `cat` drains what tar left unread, so no archive byte is ever read as shell input.
      lines.push(
        `head -c ${archive.length} | { ${untar('-')}; __ia_s=$?; cat >/dev/null; exit $__ia_s; } || { ${beside ? 'wait $__ia_r; ' : ''}exit ${PLACE_EXIT.copy}; }`,
      );
    }
    if (switching) {
      // The same commit as the checkout's: its files are that commit's, as the checkout wrote them.
      lines.push(
        `${SWITCH_SCRIPT} || exit ${PLACE_EXIT.checkout}`,
        `if [ "$(${GIT_PINNED} rev-parse --verify HEAD)" != "$__ia_was" ]; then ${CHECKOUT_SCRIPT} || exit ${PLACE_EXIT.checkout}; fi`,
      );
    } else if (options.checkout) {
      lines.push(`${CHECKOUT_SCRIPT} || { ${beside ? 'wait $__ia_r; ' : ''}exit ${PLACE_EXIT.checkout}; }`);
    }
    if (beside) lines.push(`wait $__ia_r || exit ${PLACE_EXIT.restore}`);
    if (options.restore && !beside) lines.push(`${untar(RESTORE_MOUNT)} || exit ${PLACE_EXIT.restore}`);
    if (options.exclude.length > 0) {
      lines.push(
        `if [ -d .git ]; then mkdir -p .git/info && printf '/%s\\n' ${options.exclude.map((p) => `'${p}'`).join(' ')} >> .git/info/exclude || exit ${PLACE_EXIT.exclude}; fi`,
      );
    }
    // The agent's files are the agent's user's: placed by its shell, before any command of it ran
    // (it could chmod nothing the harness placed). Where that shell starts only with a first
    // command (a sandbox only the harness uses), the harness's shell places them instead.
    const placer = this.lazyAgentShell ? this.harness : this.session;
    const r = await placer.exec(`(\n${lines.join('\n')}\n)`, {
      timeoutMs: 10 * 60_000,
      ...(archive === null ? {} : { stdin: archive }),
    });
    if (r.exitCode === 0) return;
    const output = r.output.trim().slice(0, 500);
    if (r.exitCode === PLACE_EXIT.copy || r.exitCode === PLACE_EXIT.checkout) {
      await this.settleCopy({
        unpack: { exitCode: r.exitCode, stdout: '', stderr: output },
        packCode: 0,
        packError: '',
      });
    }
    if (r.exitCode === PLACE_EXIT.restore) {
      if ((await this.diskFull()) !== null) {
        throw await this.failDiskLimit(
          `the cached environment does not fit the workspace limit (${this.limits.workspaceBytes} bytes)`,
        );
      }
      throw new SandboxError('start_failed', `could not unpack the cached environment: ${output}`);
    }
    if (r.exitCode === PLACE_EXIT.ca) {
      throw new SandboxError('start_failed', `could not install the CA certificates: ${output}`);
    }
    throw new SandboxError(
      'start_failed',
      `could not prepare the workspace (exit ${String(r.exitCode)}): ${output}`,
    );
  }

  /** Turns a finished copy into success or the sandbox's typed failure. */
  private async settleCopy(copy: CopyResult): Promise<void> {
    if (copy.unpack.exitCode !== 0) {
      // tar says "Wrote only N of M bytes" rather than ENOSPC: ask the kernel whether it is full.
      if ((await this.diskFull()) !== null) {
        throw await this.failDiskLimit(
          `the repository does not fit the workspace limit (${this.limits.workspaceBytes} bytes)`,
        );
      }
      throw new SandboxError(
        'start_failed',
        `could not copy the repository into the sandbox: ${copy.unpack.stderr.trim().slice(0, 500)}`,
      );
    }
    if (copy.packCode !== 0)
      throw new SandboxError(
        'start_failed',
        `could not read the repository copy: ${copy.packError.trim().slice(0, 500)}`,
      );
  }

  /** Removes the container (and its anonymous volumes) and the host scratch directory. Safe twice. */
  close(): Promise<void> {
    this.closing ??= this.doClose();
    return this.closing;
  }

  private async doClose(): Promise<void> {
    this.closed = true;
    this.hosts.agent.dispose();
    this.hosts.harness.dispose();
    this.session.close();
    this.harness.close();
    try {
      await this.container.remove({ force: true, v: true });
    } catch (error) {
      if (statusCode(error) !== 404) {
        this.logger?.warn({ err: error }, 'could not remove the sandbox container');
      }
    }
    await rm(this.scratch, { recursive: true, force: true });
    releasePath(this.scratch);
    if (this.afterClose !== undefined) await this.afterClose();
  }

  private assertUsable(): void {
    if (this.closed) throw new SandboxError('closed', 'the sandbox is closed');
    if (this.failure !== null) throw this.failure;
  }

  private async execChecked(command: string, options: ExecOptions): Promise<ExecResult> {
    let result: ExecResult;
    try {
      result = await this.session.exec(command, options);
    } catch (error) {
      throw await this.fail(error);
    }
    return this.review(result);
  }

  /** Turns what the kernel did to a command (OOM kill, fork failures) into typed outcomes. */
  private async review(result: ExecResult): Promise<ExecResult> {
    const suspicious =
      result.shellRestarted ||
      result.killed !== null ||
      result.exitCode === 137 ||
      FORK_FAILURE.test(result.output) ||
      DISK_FULL.test(result.output);
    if (!suspicious) return result;
    const state = await this.containerState();
    if (state !== 'running') throw await this.fail(new SandboxError(state.code, state.message));
    const exhausted = await this.pidsExhausted();
    if (exhausted !== null) throw await this.failPidsExhausted(exhausted, null);
    if (DISK_FULL.test(result.output)) {
      const full = await this.diskFull();
      if (full !== null) throw await this.failDiskLimit(`${full} is full`);
    }
    if (result.exitCode === 137 || (result.killed !== null && result.killed !== 'cancelled')) {
      const kills = await this.readOomKills();
      if (kills !== null && kills > this.oomKills) {
        this.oomKills = kills;
        this.logger?.warn({ oomKills: kills }, 'a command was killed by the container memory limit');
        return { ...result, exitCode: null, killed: 'memory' };
      }
    }
    return result;
  }

  /** Records and returns the terminal error of the sandbox, diagnosed from the container's state. */
  private async fail(cause: unknown): Promise<SandboxError> {
    if (this.failure !== null) return this.failure;
    if (this.closed) return new SandboxError('closed', 'the sandbox is closed', { cause });
    // The engine reports a killed container as running for a short while after its shell's exec
    // already failed; without waiting that out, a dead container would be misreported as a failed
    // shell start.
    const state = await this.settledContainerState();
    if (state !== 'running') {
      const failure = new SandboxError(state.code, state.message, { cause });
      this.failure = failure;
      this.logger?.warn({ code: failure.code }, failure.message);
      return failure;
    }
    const exhausted = await this.pidsExhausted();
    if (exhausted !== null) return this.failPidsExhausted(exhausted, cause);
    if (cause instanceof SandboxError) return cause;
    return new SandboxError('shell_died', `the sandbox shell failed: ${errorMessage(cause)}`, { cause });
  }

  /** The pids limit was hit: the sandbox's terminal error. */
  private async failPidsExhausted(evidence: string, cause: unknown): Promise<SandboxError> {
    if (this.failure !== null) return this.failure;
    const failure = new SandboxError(
      'pids_exhausted',
      `the container reached its process limit (${this.limits.pids}; ${evidence}); a fork bomb or runaway process tree`,
      { cause },
    );
    this.failure = failure;
    this.logger?.warn({ code: failure.code }, failure.message);
    // Nothing can run in it any more: stop it so it costs nothing until close().
    await this.container.kill({ signal: 'SIGKILL' }).catch(() => undefined);
    return failure;
  }

  /** A full disk: the sandbox's terminal error (the job cannot be checkpointed or verified). */
  private async failDiskLimit(what: string): Promise<SandboxError> {
    if (this.failure !== null) return this.failure;
    const failure = new SandboxError(
      'disk_limit',
      `the sandbox ran out of space: ${what} (workspace limit ${this.limits.workspaceBytes} bytes, /tmp ${this.limits.tmpBytes}, home ${this.limits.homeBytes})`,
    );
    this.failure = failure;
    this.logger?.warn({ code: failure.code }, failure.message);
    await this.container.kill({ signal: 'SIGKILL' }).catch(() => undefined);
    return failure;
  }

  /**
   * Which of the sandbox's writable mounts is full, or null. Asked of the kernel (`df` as a fresh
   * exec from the read-only image), not of anything the agent could fake.
   */
  private async diskFull(): Promise<string | null> {
    try {
      const r = await runOneOff(
        this.docker,
        this.container,
        ['df', '-P', '-B1', CONTAINER_WORKDIR, '/tmp', CONTAINER_HOME],
        { timeoutMs: 5000 },
      );
      return fullMount(r.stdout);
    } catch {
      return null;
    }
  }

  private async settledContainerState(): Promise<Awaited<ReturnType<DockerSandbox['containerState']>>> {
    let state = await this.containerState();
    for (let i = 0; state === 'running' && i < STATE_SETTLE_POLLS; i++) {
      await delay(STATE_SETTLE_INTERVAL_MS);
      state = await this.containerState();
    }
    return state;
  }

  private async containerState(): Promise<
    'running' | { code: 'oom_killed' | 'container_died'; message: string }
  > {
    try {
      const info = await this.container.inspect();
      if (info.State.Running) return 'running';
      if (info.State.OOMKilled) {
        return { code: 'oom_killed', message: 'the container was killed for exceeding its memory limit' };
      }
      return {
        code: 'container_died',
        message: `the container exited (${info.State.Status}, code ${info.State.ExitCode})`,
      };
    } catch (error) {
      return { code: 'container_died', message: `the container is gone: ${errorMessage(error)}` };
    }
  }

  /**
   * Whether the pids limit refused a fork since the last reading. The kernel counts every refusal
   * (pids.events `max`), so the answer does not depend on when it is asked: a fork bomb's process
   * count churns (its processes exit and respawn, are killed with the command) and a sample of the
   * current count can land anywhere below the limit, while a command that merely ran many processes
   * below the limit never moves the counter. Only where the counter cannot be read does this fall
   * back to sampling the current count. The answer is the evidence (it ends the failure's message),
   * or null when the limit was not hit.
   */
  private async pidsExhausted(): Promise<string | null> {
    const events = await this.readPidsMaxEvents();
    if ('count' in events) {
      const hit = events.count > this.pidsMaxEvents;
      this.pidsMaxEvents = Math.max(events.count, this.pidsMaxEvents);
      return hit ? `the kernel refused a fork: the cgroup's pids.events, read ${events.from}` : null;
    }
    // The helper itself could not fork into the container: its process table is full.
    if (events.forkRefused) return 'a process could not be started in it';
    try {
      const stats = await this.container.stats({ stream: false, 'one-shot': true });
      const current = stats.pids_stats?.current ?? 0;
      return current >= this.limits.pids - 2 ? `${current} processes were running` : null;
    } catch {
      return null;
    }
  }

  /**
   * The cgroup's pids.events `max` counter, or why it could not be read. An exec that could not even
   * start (the engine reports that in the exec's output, or it times out) is tried again a little
   * later: a fork bomb's population comes and goes as its shells back off, and one failed start
   * whose message names no fork failure must not decide. `cat` that ran and found no counter file
   * (a kernel without it) is not tried again.
   */
  private async readPidsMaxEvents(): Promise<
    { count: number; from: 'from the host' | 'in the container' } | { forkRefused: boolean }
  > {
    // From the host first: no process has to start in a container whose process table is full.
    const host = await this.hostCgroup.counter('pids', 'pids.events', 'max');
    if (host !== null) return { count: host, from: 'from the host' };
    let forkRefused = false;
    for (let attempt = 1; attempt <= PIDS_READ_TRIES; attempt++) {
      let started = true;
      try {
        const r = await runOneOff(this.docker, this.container, PIDS_EVENTS_READ, { timeoutMs: 5000 });
        const m = /^max (\d+)$/m.exec(r.stdout);
        if (m?.[1] !== undefined) return { count: Number(m[1]), from: 'in the container' };
        forkRefused = FORK_FAILURE.test(r.stderr) || FORK_FAILURE.test(r.stdout);
        // 126/127 and above: the engine or runc could not start `cat` at all.
        started = r.exitCode !== null && r.exitCode < 126;
      } catch (error) {
        forkRefused = FORK_FAILURE.test(errorMessage(error));
        started = false;
      }
      if (forkRefused || started) break;
      if (attempt < PIDS_READ_TRIES) await delay(PIDS_READ_RETRY_MS);
    }
    return { forkRefused };
  }

  /** The cgroup's count of OOM kills (cgroup v1 memory.oom_control or v2 memory.events). */
  private async readOomKills(): Promise<number | null> {
    const host =
      (await this.hostCgroup.counter('memory', 'memory.events', 'oom_kill')) ??
      (await this.hostCgroup.counter('memory', 'memory.oom_control', 'oom_kill'));
    if (host !== null) return host;
    try {
      const r = await runOneOff(
        this.docker,
        this.container,
        [
          '/bin/sh',
          '-c',
          'cat /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null || cat /sys/fs/cgroup/memory.events',
        ],
        { timeoutMs: 5000 },
      );
      const m = /^oom_kill (\d+)$/m.exec(r.stdout);
      return m?.[1] === undefined ? null : Number(m[1]);
    } catch {
      return null;
    }
  }
}

/** What to do between the container's start and its shells (see setup-phase.ts). */
export interface DockerSetupSpec {
  /** Host directory holding the egress proxy's socket (`proxy.sock`), mounted read-only. */
  readonly egressDir?: string | undefined;
  /** A cached environment (a tar stream) to unpack over the repository before the commands. */
  readonly restore?: (() => Readable) | undefined;
  /**
   * The same environment as a file the sandbox user may read: mounted read-only and extracted in
   * place (faster than the stream, which is then not read). Wins over `restore`.
   */
  readonly restoreFile?: string | undefined;
  /**
   * Whether the repository itself holds one of `outputs` (a committed `node_modules`): the cached
   * environment is then unpacked after the repository's files, so the entry wins. Undefined: looked
   * up in the workspace directory (which must then hold the files).
   */
  readonly outputsTracked?: boolean | undefined;
  readonly commands: readonly string[];
  /** The setup commands' environment: plain variables, the proxy's, and the setup secrets. */
  readonly env: Readonly<Record<string, string>>;
  /** Values that must not outlive setup: a file still holding one after the sweep fails the phase. */
  readonly secretValues: readonly string[];
  /** Extra CA certificates (PEM) for clients in the sandbox. */
  readonly caPem?: Buffer | undefined;
  /** Per command. */
  readonly timeoutMs: number;
  /** Whether a failed command is worth running again (a network error); at most `retries` times. */
  readonly retryable?: ((r: SetupCommandResult) => boolean) | undefined;
  readonly retries?: number | undefined;
  /** What to run in place of a command that failed after its retries (see setup-commands.ts). */
  readonly fallback?: SetupFallbackRule | undefined;
  /** Workspace paths setup produces: excluded from git snapshots, and what `capture` packs. */
  readonly outputs: readonly string[];
  /** After a successful setup: receives a packer of `outputs` (for the environment cache). */
  readonly capture?:
    ((pack: (sink: Writable, maxBytes: number) => Promise<boolean>) => Promise<void>) | undefined;
  /** Start a forwarder for the agent phase too (the agent has an allowlist). */
  readonly agentEgress?: boolean | undefined;
  readonly onCommand?: ((r: SetupCommandResult, attempt: number) => void) | undefined;
}

export interface SetupReport {
  readonly results: readonly SetupCommandResult[];
  /** Set when the capture callback failed (the job goes on without caching). */
  readonly captureError: string | null;
  /** With no setup command: how long placing the files took (placeFiles). */
  readonly placeMs?: number;
}

/** A setup command failed: the sandbox is gone, the results say how far setup came. */
export class SetupFailedError extends SandboxError {
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

async function runSetupPhase(
  docker: Docker,
  container: Docker.Container,
  workspace: string,
  checkout: boolean,
  spec: DockerSetupSpec,
  limits: Required<SandboxLimits>,
  logger: Logger | undefined,
  signal: AbortSignal | undefined,
): Promise<SetupReport> {
  // Every step stops at the signal; the caller removes the container (and what runs in it).
  const phase = new SetupPhase(docker, container, CONTAINER_USER, signal);
  // Only setup commands run the repository's code; without them (a cache hit restored from a
  // stream) no process but ours ever ran here, and there is nothing to sweep.
  const runsCode = spec.commands.length > 0;
  if (runsCode) await phase.recordMainProcesses();
  const copy = await streamTree(docker, container, workspace, signal);
  if (copy.unpack.exitCode !== 0 || copy.packCode !== 0) {
    throw new SandboxError(
      'start_failed',
      `could not copy the repository into the sandbox: ${(copy.unpack.stderr + copy.packError).trim().slice(0, 500)} (workspace limit ${limits.workspaceBytes} bytes)`,
    );
  }
  if (checkout) await phase.checkout();
  if (spec.restoreFile !== undefined) await phase.unpackMounted();
  else if (spec.restore !== undefined) await phase.unpack(spec.restore());
  // The CA bundle is installed by the forwarder's exec when there is a forwarder to start.
  const needsCa = spec.caPem !== undefined && (runsCode || spec.agentEgress === true);
  const forwarder = spec.egressDir !== undefined && (runsCode || spec.agentEgress === true);
  if (needsCa && !forwarder) await phase.installCaBundle();
  if (!runsCode) {
    await phase.exclude(spec.outputs);
    if (forwarder) await phase.startForwarder({ installCa: needsCa });
    return { results: [], captureError: null };
  }
  const results: SetupCommandResult[] = [];
  if (forwarder) await phase.startForwarder({ installCa: needsCa });
  const queue = new SetupCommandQueue(spec.commands, spec.fallback);
  for (let command = queue.next(); command !== undefined; command = queue.next()) {
    let r: SetupCommandResult;
    let attempt = 0;
    for (;;) {
      attempt += 1;
      r = await phase.run(command, spec.env, spec.timeoutMs);
      spec.onCommand?.(r, attempt);
      logger?.info({ command, exitCode: r.exitCode, durationMs: r.durationMs, attempt }, 'setup command');
      const failed = r.exitCode !== 0;
      if (!failed || attempt > (spec.retries ?? 0) || spec.retryable?.(r) !== true) break;
      await delay(Math.min(8000, 1000 * 2 ** (attempt - 1)), undefined, { signal }).catch(() => {
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
      await phase.sweep().catch(() => undefined);
      throw new SetupFailedError(failure, results, spec.retryable?.(r) === true);
    }
  }
  // Nothing setup started survives into the agent phase: not a forwarder, not a daemon, not a
  // process holding a setup secret in its environment, not a shared memory segment or a message
  // queue (which outlive their processes); and no setup secret is left in a file.
  await phase.sweep();
  if (spec.secretValues.length > 0) {
    const holders = await phase.filesContaining(spec.secretValues);
    if (holders.length > 0) {
      throw new SetupFailedError(
        `setup left a setup secret in ${holders.length} place(s) (${holders.slice(0, 3).join(', ')}); a setup secret must not outlive setup`,
        results,
        false,
        holders,
      );
    }
  }
  await phase.removeIpc({ exclude: spec.outputs });
  let captureError: string | null = null;
  if (spec.capture !== undefined && results.length > 0) {
    try {
      await spec.capture((sink, maxBytes) => phase.pack(spec.outputs, sink, maxBytes));
    } catch (error) {
      // A cancelled capture wrote nothing (the cache keeps only whole entries): the start ends here.
      if (error instanceof SandboxCancelledError) throw error;
      captureError = errorMessage(error);
      logger?.warn({ err: error }, 'could not keep the environment for later jobs');
    }
  }
  if (spec.agentEgress === true && spec.egressDir !== undefined) await phase.startForwarder();
  return { results, captureError };
}

export interface PlaceFilesOptions {
  /** Unpack the cached environment mounted at RESTORE_MOUNT. */
  readonly restore: boolean;
  /** The repository holds one of the entry's paths: unpack the entry after the copy, not beside it. */
  readonly restoreAfterCopy: boolean;
  /** Install the CA certificates mounted at CA_MOUNT. */
  readonly ca: boolean;
  /** Workspace paths to exclude from git snapshots (plain relative paths). */
  readonly exclude: readonly string[];
  /** The copy is a `.git` only: check out HEAD after it (see DockerSandboxOptions.checkout). */
  readonly checkout: boolean;
  /**
   * The workspace holds a checkout this container made and nothing else (a prepared container of
   * the warm pool, in which no command of a job ever ran): the archive's `.git` replaces its `.git`,
   * its index is kept, and the checkout then writes only the files that differ. Needs `checkout`
   * and an archive, and no restore.
   */
  readonly switchCheckout?: boolean | undefined;
}

/** A workspace packed once (packWorkspace), for callers that copy it into more than one container. */
export interface WorkspaceArchive {
  readonly archive: Buffer;
}

/**
 * The host directory as an archive for placeFiles, or null when it is too large to pass through the
 * shells (the caller then gives the directory, which streams).
 */
export async function packWorkspace(hostDir: string): Promise<WorkspaceArchive | null> {
  const archive = await packSmall(hostDir, SHELL_COPY_MAX_BYTES);
  return archive === null ? null : { archive };
}

/** Git as the switch runs it: no hooks, no file-system monitor, whatever the image's config says. */
const GIT_PINNED = 'git -c core.hooksPath=/dev/null -c core.fsmonitor=false';

/**
 * Refreshes a prepared container's index (WarmPool): stat data only, after the checkout is older
 * than timestamps tell apart. One self-contained file (no split index, whatever the image's config
 * says), since a switch keeps the index and removes the rest of `.git`. Fixed text, no input.
 */
export const REFRESH_INDEX_SCRIPT = `cd ${CONTAINER_WORKDIR} && ${GIT_PINNED} -c core.splitIndex=false update-index -q --no-split-index --refresh`;

/** Where a switched checkout's index waits while the `.git` is replaced (the container's own /tmp). */
const KEPT_INDEX = '/tmp/.issue-agent-kept-index';

/**
 * The second half of a switch (PlaceFilesOptions.switchCheckout), after the new `.git` is in place:
 * the kept index comes back, so the checkout that follows compares it with the new HEAD and writes
 * only what differs. Attributes decide how a file is written (line endings, `ident`), so when any
 * `.gitattributes` differs between the two, a file whose content is unchanged could still need
 * writing anew: then every file goes and the checkout writes them all, as in a new container.
 * Expects `$__ia_was`, the checkout's commit; clears it when the files went, so the checkout runs.
 * Fixed text, no input.
 */
const SWITCH_SCRIPT = [
  `mv ${KEPT_INDEX} .git/index`,
  `{ [ "$(${GIT_PINNED} rev-parse --verify HEAD)" = "$__ia_was" ] || { __ia_a=$(${GIT_PINNED} diff-index --cached --name-only HEAD -- ':(glob)**/.gitattributes') && [ -z "$__ia_a" ]; } || { rm -f .git/index && find . -mindepth 1 -maxdepth 1 ! -name .git -exec rm -rf {} + && __ia_was=; }; }`,
].join(' && ');

/**
 * Exports the `count` variables of the next `bytes` bytes of the shell's input, each `NAME=value`
 * ended by a NUL. `head -c` takes exactly those bytes before anything is exported, so no variable
 * can change how much is read (and no byte of the input is left for the shell to run); `mapfile`
 * and `export` take each record as one word, so no value is ever parsed as shell text. `command`
 * keeps a refused export (a name bash keeps read-only, which it also skips in the environment it
 * starts with) from ending the shell.
 */
function exportScript(bytes: number, count: number): string {
  return `mapfile -d '' -t __ia_kvs < <(head -c ${String(bytes)}); for __ia_kv in "\${__ia_kvs[@]}"; do command export -- "$__ia_kv" 2>/dev/null; done; __ia_n=\${#__ia_kvs[@]}; unset __ia_kvs __ia_kv; [ "$__ia_n" -eq ${String(count)} ]`;
}

/** How the script of placeFiles says which step failed. */
const PLACE_EXIT = { copy: 10, restore: 11, ca: 12, exclude: 13, checkout: 14 } as const;

/** Whether the host directory holds any of the relative paths (as a file, folder or link). */
async function holdsAny(hostDir: string, paths: readonly string[]): Promise<boolean> {
  for (const p of paths) {
    try {
      await lstat(join(hostDir, p));
      return true;
    } catch {
      // absent
    }
  }
  return false;
}

async function assertEngine(docker: Docker): Promise<void> {
  try {
    await docker.ping();
  } catch (error) {
    throw new SandboxError('engine_unavailable', `no Docker engine answers: ${errorMessage(error)}`, {
      cause: error,
    });
  }
}

/**
 * `tar` on the host, packing a directory the host made before any sandbox existed, to stdout. Its
 * entries are the directory's entries, not the directory itself (`.`): unpacking `.` would set the
 * mode of the workspace's root, which only its owner may do, and the harness's user unpacks too (a
 * sandbox whose agent shell is lazy). Their group may do what their owner may (unpacked under umask
 * 0002): the harness's user (agent-user.ts) shares the workspace through the agent's group. The
 * names travel on tar's stdin (GNU tar), never on a command line.
 */
async function hostTar(hostDir: string): Promise<ChildProcessWithoutNullStreams> {
  const names = await readdir(hostDir);
  const tar = spawn('tar', [
    '-c',
    '-f',
    '-',
    '--mode=g=u',
    '-C',
    hostDir,
    '--null',
    '--verbatim-files-from',
    '-T',
    '-',
  ]);
  tar.stdin.on('error', () => undefined);
  tar.stdin.end(names.map((n) => `${n}\0`).join(''));
  return tar;
}

/** Repositories whose archive is at most this big are copied over a shell already attached. */
const SHELL_COPY_MAX_BYTES = 32 * 1024 * 1024;

/** The tar archive of a directory, or null when it is larger than `max` (or tar failed). */
async function packSmall(hostDir: string, max: number): Promise<Buffer | null> {
  const tar = await hostTar(hostDir);
  tar.stderr.resume();
  const chunks: Buffer[] = [];
  const state = { size: 0, tooBig: false };
  tar.stdout.on('data', (c: Buffer) => {
    state.size += c.length;
    if (state.size > max) {
      state.tooBig = true;
      tar.kill('SIGKILL');
      return;
    }
    chunks.push(c);
  });
  const code = await new Promise<number | null>((resolve) => {
    tar.once('error', () => {
      resolve(null);
    });
    tar.once('close', (c) => {
      resolve(c);
    });
  });
  return state.tooBig || code !== 0 ? null : Buffer.concat(chunks);
}

interface CopyResult {
  readonly unpack: Awaited<ReturnType<typeof runOneOff>>;
  readonly packCode: number | null;
  readonly packError: string;
}

/**
 * Streams a host directory into the container's workspace: the host's `tar` reads the directory
 * (made by the host before any sandbox process existed) and the sandbox user unpacks the stream
 * inside, so the files belong to the sandbox from the start.
 */
async function streamTree(
  docker: Docker,
  container: Docker.Container,
  hostDir: string,
  signal?: AbortSignal,
): Promise<CopyResult> {
  const tar = await hostTar(hostDir);
  // Read at once into a buffer stream (backpressure still holds tar back): a child's stdout left
  // unread while the exec starts was seen to lose its data.
  const body = new PassThrough();
  tar.stdout.pipe(body);
  const packError: Buffer[] = [];
  tar.stderr.on('data', (c: Buffer) => packError.push(c));
  const packed = new Promise<number | null>((resolve) => {
    tar.once('error', () => {
      resolve(null);
    });
    tar.once('close', (code) => {
      resolve(code);
    });
  });
  try {
    const unpack = await runOneOff(
      docker,
      container,
      [
        '/bin/sh',
        '-c',
        'printf R; umask 0002; exec tar -x -f - -C "$1" --no-same-owner --no-overwrite-dir',
        'ia-copy-in',
        CONTAINER_WORKDIR,
      ],
      { user: CONTAINER_USER, timeoutMs: 30 * 60_000, input: body, signal },
    );
    return { unpack, packCode: await packed, packError: Buffer.concat(packError).toString('utf8') };
  } finally {
    if (tar.exitCode === null) tar.kill('SIGKILL');
  }
}

/** The image's non-root `agent`, owner of the workspace tmpfs. */
const CONTAINER_USER = `${AGENT_UID}:${AGENT_GID}`;
/** The image's `harness`, in the agent's group (agent-user.ts). */
const HARNESS_USER = `${HARNESS_UID}:${AGENT_GID}`;

export function containerName(jobId: string): string {
  const slug = jobId
    .toLowerCase()
    .replace(/[^a-z0-9_.-]+/g, '-')
    .slice(0, 40);
  return `issue-agent-${slug}-${randomBytes(4).toString('hex')}`;
}

export function statusCode(error: unknown): number | undefined {
  if (typeof error === 'object' && error !== null && 'statusCode' in error) {
    const code = error.statusCode;
    return typeof code === 'number' ? code : undefined;
  }
  return undefined;
}

const GONE_POLL_MS = 100;

/** Resolves once the engine no longer knows `container`; throws at `deadline` if it still does. */
async function waitUntilGone(container: Docker.Container, deadline: number): Promise<void> {
  for (;;) {
    try {
      await container.inspect();
    } catch (error) {
      if (statusCode(error) === 404) return;
      throw error;
    }
    if (Date.now() >= deadline) {
      throw new Error(`container ${container.id.slice(0, 12)} is still being removed; giving up waiting`);
    }
    await delay(GONE_POLL_MS);
  }
}
