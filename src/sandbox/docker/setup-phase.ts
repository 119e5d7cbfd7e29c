import { once } from 'node:events';
import { PassThrough, Readable, type Writable } from 'node:stream';
import type Docker from 'dockerode';
import { SandboxCancelledError, SandboxError, throwIfCancelled } from '../sandbox.js';
import {
  CA_MOUNT,
  CONTAINER_HOME,
  CONTAINER_WORKDIR,
  EGRESS_MOUNT,
  RESTORE_MOUNT,
} from './container-spec.js';

export { EGRESS_MOUNT };
import { errorMessage } from './docker-shell.js';
import { IPC_CLEANUP_SCRIPT } from '../../secrets/ipc-cleanup.js';
import { hideNeedles, scanHolders, scanNeedles, SCAN_FOUND, SECRET_SCAN_SCRIPT } from '../../secrets/scan.js';
import { HeadTail } from '../head-tail.js';

/**
 * The setup phase of a Docker sandbox: everything that happens in the container after its start
 * and before the agent's and the harness's shells exist. Each step is a one-off exec as the sandbox
 * user; nothing here ever names a path of the workspace on the host.
 *
 * Why before the shells: setup runs code the repository chose (lifecycle scripts of its
 * dependencies, its own `setup:` commands) with the setup secrets in its environment. A process it
 * leaves behind runs as the same user as the shells, so it could read or trace them. The phase
 * therefore ends by killing every process in the container except its init and main process
 * (sweep), and the shells are started only afterwards, from the image, with the container's own
 * environment: no setup process, variable or shell state reaches the agent phase.
 */

/**
 * What setup writes in the workspace and HOME is group-writable: the harness's user, in the agent's
 * group (agent-user.ts), writes there too (its test runs, checkpoints, file operations).
 */
const GROUP_UMASK = 'umask 0002';

/**
 * Writes the files of HEAD into the workspace from the `.git` the host copied in (a workspace checked
 * out in the container, see DockerSandboxOptions.checkout). Run by the sandbox user in the workspace:
 * the repository's attributes are interpreted only where its code may run anyway. Untracked paths
 * (a cached environment unpacked beside it) are left alone. Group-writable (GROUP_UMASK).
 */
export const CHECKOUT_SCRIPT = `${GROUP_UMASK} && git -c core.hooksPath=/dev/null -c core.fsmonitor=false reset --quiet --hard HEAD`;

/** A workspace path safe to quote into a fixed script: relative, plain characters, no `..`. */
export function isPlainPath(p: string): boolean {
  return /^[A-Za-z0-9._@][A-Za-z0-9._@/-]*$/.test(p) && !p.split('/').includes('..');
}

/** The proxy's socket file name inside that directory. */
export const EGRESS_SOCKET_NAME = 'proxy.sock';
/** The in-container forwarder listens here (the container's own loopback; it has no other interface). */
export const FORWARDER_PORT = 3128;
/** Where a deployment's extra CA certificates and the combined bundle are written (the sandbox's HOME). */
export const CA_DIR = `${CONTAINER_HOME}/.issue-agent`;
export const CA_BUNDLE = `${CA_DIR}/ca-bundle.pem`;
export const CA_EXTRA = `${CA_DIR}/extra-ca.pem`;
/** Installs CA_EXTRA and CA_BUNDLE from the read-only mount; fixed text, no input. */
export const CA_INSTALL_SCRIPT = `(umask 022 && mkdir -p ${CA_DIR} && cp ${CA_MOUNT} ${CA_EXTRA} && cat /etc/ssl/certs/ca-certificates.crt ${CA_EXTRA} > ${CA_BUNDLE})`;
/** Defines ia_exclude: appends each path given (`/path`) to `.git/info/exclude`, when there is a `.git`. */
const EXCLUDE_FUNCTION =
  'ia_exclude() { [ -d .git ] || return 0; mkdir -p .git/info && for p in "$@"; do printf "/%s\\n" "$p" >> .git/info/exclude; done; }';
/** startForwarder's exit when the CA install it was asked to do first failed. */
const CA_FAILED = 9;

/** The variables that point package managers at the forwarder (and at the CA bundle, when one is set). */
export function proxyEnv(withCa: boolean): Record<string, string> {
  const url = `http://127.0.0.1:${FORWARDER_PORT}`;
  return {
    HTTPS_PROXY: url,
    HTTP_PROXY: url,
    https_proxy: url,
    http_proxy: url,
    npm_config_proxy: url,
    npm_config_https_proxy: url,
    PIP_PROXY: url,
    // yarn berry reads no standard proxy variable, only its own settings.
    YARN_HTTP_PROXY: url,
    YARN_HTTPS_PROXY: url,
    NO_PROXY: '',
    no_proxy: '',
    ...(withCa
      ? {
          NODE_EXTRA_CA_CERTS: CA_EXTRA,
          SSL_CERT_FILE: CA_BUNDLE,
          REQUESTS_CA_BUNDLE: CA_BUNDLE,
          PIP_CERT: CA_BUNDLE,
          CURL_CA_BUNDLE: CA_BUNDLE,
          GIT_SSL_CAINFO: CA_BUNDLE,
          npm_config_cafile: CA_BUNDLE,
        }
      : {}),
  };
}

/** One finished setup command. */
export interface SetupCommandResult {
  readonly command: string;
  readonly exitCode: number | null;
  /** Set when the command was stopped at its time limit. */
  readonly timedOut: boolean;
  readonly durationMs: number;
  /** Head and tail of the combined output (untrusted; the caller scrubs secrets before keeping it). */
  readonly output: string;
  readonly outputBytes: number;
}

/** Output kept per setup command: the head and the tail, this many bytes each. */
const KEEP_HEAD = 8 * 1024;
const KEEP_TAIL = 32 * 1024;

/**
 * The sweep: SIGSTOP then SIGKILL every process but PID 1 (the engine's init, which the kernel
 * protects from signals sent inside its namespace anyway), the container's main process (named by
 * pid and start time, so a process that reused its pid is not spared) and the sweeper itself, until
 * none is left. Zombies are skipped: they are dead and their parent (init) reaps them. Python
 * because it is in the base image and reads /proc without forking per process.
 */
const SWEEP_SCRIPT = String.raw`
import os, signal, sys, time
keep = set(sys.argv[1:])
me = os.getpid()
def others():
    out = []
    for d in os.listdir('/proc'):
        if not d.isdigit():
            continue
        pid = int(d)
        if pid == 1 or pid == me:
            continue
        try:
            with open('/proc/%d/stat' % pid, 'rb') as f:
                s = f.read()
        except OSError:
            continue
        rest = s[s.rfind(b')') + 2:].split()
        if rest[0] in (b'Z', b'X'):
            continue
        if ('%d:%s' % (pid, rest[19].decode())) in keep:
            continue
        out.append(pid)
    return out
mode = os.environ.get('IA_SWEEP_MODE', 'kill')
if mode == 'list':
    for d in os.listdir('/proc'):
        if d.isdigit() and int(d) not in (1, me):
            try:
                with open('/proc/%s/stat' % d, 'rb') as f:
                    s = f.read()
            except OSError:
                continue
            rest = s[s.rfind(b')') + 2:].split()
            if rest[0] not in (b'Z', b'X'):
                print('%s:%s' % (d, rest[19].decode()))
    sys.exit(0)
for _ in range(500):
    ps = others()
    if not ps:
        sys.exit(0)
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        for p in ps:
            try:
                os.kill(p, sig)
            except OSError:
                pass
    time.sleep(0.01)
sys.stderr.write('processes survived the sweep: %s\n' % ' '.join(map(str, others())))
sys.exit(3)
`;

export interface ExecStreamOptions {
  readonly user: string;
  readonly env?: Readonly<Record<string, string>> | undefined;
  readonly workdir?: string | undefined;
  readonly timeoutMs: number;
  /** Receives stdout (binary). When absent stdout and stderr are collected together as text. */
  readonly stdout?: Writable | undefined;
  /** Piped to stdin once the command printed one byte (see runOneOff); the byte is dropped. */
  readonly input?: Readable | undefined;
  /** Stop reading (and fail) once stdout passed this many bytes. */
  readonly maxStdoutBytes?: number | undefined;
  /**
   * Aborting drops the stream at once and throws SandboxCancelledError. The process keeps running
   * in the container until the caller removes it (a cancelled setup always does: see
   * DockerSandbox.create), which kills every process in it.
   */
  readonly signal?: AbortSignal | undefined;
}

export interface ExecStreamResult {
  readonly exitCode: number | null;
  readonly timedOut: boolean;
  /** Combined output when no stdout sink was given (head and tail), else stderr. */
  readonly output: string;
  readonly outputBytes: number;
  readonly durationMs: number;
}

/**
 * A one-off exec with its own environment (the setup secrets travel here, in the exec's
 * environment, never in the container's), bounded in time, with bounded output. On timeout the
 * stream is dropped and the result says so; the process itself is left to the sweep. On abort
 * (options.signal) it throws SandboxCancelledError.
 */
export async function execStream(
  docker: Docker,
  container: Docker.Container,
  cmd: readonly string[],
  options: ExecStreamOptions,
): Promise<ExecStreamResult> {
  const started = Date.now();
  const signal = options.signal;
  throwIfCancelled(signal);
  const exec = await container.exec({
    Cmd: [...cmd],
    User: options.user,
    WorkingDir: options.workdir ?? CONTAINER_WORKDIR,
    Env: Object.entries(options.env ?? {}).map(([k, v]) => `${k}=${v}`),
    AttachStdin: options.input !== undefined,
    AttachStdout: true,
    AttachStderr: true,
    Tty: false,
  });
  const stream = await exec.start({ hijack: true, stdin: options.input !== undefined });
  const keep = new HeadTail(KEEP_HEAD, KEEP_TAIL);
  const out = new PassThrough();
  const err = new PassThrough();
  let stdoutBytes = 0;
  const state = { overflow: false };
  let waitingForReady = options.input !== undefined;
  out.on('data', (chunk: Buffer) => {
    let c = chunk;
    if (waitingForReady && options.input !== undefined && c.length > 0) {
      waitingForReady = false;
      options.input.pipe(stream);
      options.input.once('error', () => stream.end());
      c = c.subarray(1);
    }
    if (options.stdout === undefined) {
      keep.push(c);
      return;
    }
    stdoutBytes += c.length;
    if (options.maxStdoutBytes !== undefined && stdoutBytes > options.maxStdoutBytes) {
      state.overflow = true;
      stream.destroy();
      return;
    }
    if (!options.stdout.write(c)) {
      out.pause();
      options.stdout.once('drain', () => out.resume());
    }
  });
  err.on('data', (c: Buffer) => {
    keep.push(c);
  });
  docker.modem.demuxStream(stream, out, err);
  const ended = await new Promise<'exited' | 'timeout' | 'cancelled'>((resolve, reject) => {
    const settle = (how: 'exited' | 'timeout' | 'cancelled'): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      resolve(how);
    };
    const timer = setTimeout(() => {
      stream.destroy();
      settle('timeout');
    }, options.timeoutMs);
    const onAbort = (): void => {
      stream.destroy();
      settle('cancelled');
    };
    if (signal?.aborted === true) onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
    stream.once('end', () => {
      settle('exited');
    });
    stream.once('close', () => {
      settle('exited');
    });
    stream.once('error', (error) => {
      if (state.overflow) settle('exited');
      else {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        reject(error instanceof Error ? error : new Error(String(error)));
      }
    });
  });
  if (ended === 'cancelled') throw new SandboxCancelledError(signal?.reason);
  const timedOut = ended === 'timeout';
  if (options.stdout !== undefined && !state.overflow && !timedOut) {
    // The exec's stream has ended, but output held back by a slow sink (backpressure pauses `out`)
    // is still buffered: the result is complete only once `out` has handed over its last byte.
    const drained = once(out, 'end');
    out.end();
    await drained;
  }
  if (state.overflow) {
    throw new SandboxError('start_failed', `the output passed its limit of ${options.maxStdoutBytes} bytes`);
  }
  const info = timedOut ? null : await exec.inspect();
  return {
    exitCode: info?.ExitCode ?? null,
    timedOut,
    output: keep.text(),
    outputBytes: keep.total,
    durationMs: Date.now() - started,
  };
}

/** The container's steps before its shells exist; see the module comment. */
export class SetupPhase {
  private keep: string[] = [];

  constructor(
    private readonly docker: Docker,
    private readonly container: Docker.Container,
    private readonly user: string,
    /** Aborts the step running (see ExecStreamOptions.signal); every later step throws at once. */
    private readonly signal?: AbortSignal | undefined,
  ) {}

  /** Every step's exec goes through here: the phase's user and signal. */
  private exec(
    cmd: readonly string[],
    options: Omit<ExecStreamOptions, 'user' | 'signal'>,
  ): Promise<ExecStreamResult> {
    return execStream(this.docker, this.container, cmd, { ...options, user: this.user, signal: this.signal });
  }

  /** Names the processes that exist right after start (the main process), which the sweep spares. */
  async recordMainProcesses(): Promise<void> {
    const listed = await this.exec(['python3', '-c', SWEEP_SCRIPT], {
      env: { IA_SWEEP_MODE: 'list' },
      timeoutMs: 10_000,
    });
    if (listed.exitCode !== 0) {
      throw new SandboxError('start_failed', `could not list the container's processes: ${listed.output}`);
    }
    this.keep = listed.output.split('\n').filter((l) => /^\d+:\d+$/.test(l));
  }

  /** Kills every process but init and the main process. Throws when some survive. */
  async sweep(): Promise<void> {
    const r = await this.exec(['python3', '-c', SWEEP_SCRIPT, ...this.keep], {
      timeoutMs: 30_000,
    });
    if (r.exitCode !== 0) {
      throw new SandboxError(
        'start_failed',
        `the setup phase could not end its processes: ${r.output.trim()}`,
      );
    }
  }

  /** Checks out HEAD in the workspace from the `.git` copied in (see CHECKOUT_SCRIPT). */
  async checkout(): Promise<void> {
    const r = await this.exec(['/bin/sh', '-c', CHECKOUT_SCRIPT], {
      timeoutMs: 10 * 60_000,
      workdir: CONTAINER_WORKDIR,
    });
    if (r.exitCode !== 0) {
      throw new SandboxError(
        'start_failed',
        `could not check out the repository: ${r.output.trim().slice(0, 500)}`,
      );
    }
  }

  /** Extracts the cached environment mounted at RESTORE_MOUNT (see ContainerSpecInput.restoreFile). */
  async unpackMounted(): Promise<void> {
    const r = await this.exec(
      [
        '/bin/sh',
        '-c',
        `${GROUP_UMASK}; exec tar -x -f ${RESTORE_MOUNT} -C ${CONTAINER_WORKDIR} --no-same-owner --no-overwrite-dir`,
      ],
      { timeoutMs: 10 * 60_000 },
    );
    if (r.exitCode !== 0) {
      throw new SandboxError(
        'start_failed',
        `could not unpack the cached environment: ${r.output.trim().slice(0, 500)}`,
      );
    }
  }

  /** Unpacks a tar stream (a cached environment) into the workspace, as the sandbox user. */
  async unpack(archive: Readable): Promise<void> {
    const r = await this.exec(
      [
        '/bin/sh',
        '-c',
        `printf R; ${GROUP_UMASK}; exec tar -x -f - -C ${CONTAINER_WORKDIR} --no-same-owner --no-overwrite-dir`,
      ],
      { timeoutMs: 10 * 60_000, input: archive },
    );
    if (r.exitCode !== 0) {
      throw new SandboxError(
        'start_failed',
        `could not unpack the cached environment: ${r.output.trim().slice(0, 500)}`,
      );
    }
  }

  /**
   * Copies the deployment's extra CA certificates (mounted at CA_MOUNT) into the sandbox's HOME
   * and writes a bundle of the image's system CAs plus them, for the clients that replace rather
   * than extend their trust store.
   */
  async installCaBundle(): Promise<void> {
    const r = await this.exec(['/bin/sh', '-c', CA_INSTALL_SCRIPT], {
      timeoutMs: 30_000,
    });
    if (r.exitCode !== 0) {
      throw new SandboxError(
        'start_failed',
        `could not install the CA certificates: ${r.output.trim().slice(0, 500)}`,
      );
    }
  }

  /**
   * Starts the forwarder from the container's loopback to the proxy socket and waits until it
   * listens. It is a process of the sandbox like any other: the sweep ends it. With `installCa`,
   * the same exec installs the CA bundle first (installCaBundle's step): an exec costs the engine a
   * process start, and the two always run together when the phase has both.
   */
  async startForwarder(options: { readonly installCa?: boolean } = {}): Promise<void> {
    // LISTEN (0A) on 127.0.0.1:3128 in the container's own /proc/net/tcp; no connection is made.
    const port = FORWARDER_PORT.toString(16).toUpperCase().padStart(4, '0');
    // socat outlives this exec's shell (an exec's leftover processes are not killed with it); its
    // output goes nowhere, so the exec's stream ends with the shell.
    const r = await this.exec(
      [
        '/bin/sh',
        '-c',
        [
          options.installCa === true ? `${CA_INSTALL_SCRIPT} || exit ${CA_FAILED}` : ':',
          `socat TCP-LISTEN:${FORWARDER_PORT},bind=127.0.0.1,reuseaddr,fork UNIX-CONNECT:${EGRESS_MOUNT}/${EGRESS_SOCKET_NAME} </dev/null >/dev/null 2>&1 &`,
          `for i in $(seq 200); do grep -q ' 0100007F:${port} 00000000:0000 0A ' /proc/net/tcp && exit 0; sleep 0.025; done; exit 1`,
        ].join('\n'),
      ],
      { timeoutMs: 30_000 },
    );
    if (r.exitCode === CA_FAILED) {
      throw new SandboxError(
        'start_failed',
        `could not install the CA certificates: ${r.output.trim().slice(0, 500)}`,
      );
    }
    if (r.exitCode !== 0) {
      throw new SandboxError('start_failed', 'the egress forwarder did not start (is socat in the image?)');
    }
  }

  /** Runs one setup command in the workspace, with its own environment. */
  async run(
    command: string,
    env: Readonly<Record<string, string>>,
    timeoutMs: number,
  ): Promise<SetupCommandResult> {
    try {
      const r = await this.exec(['/bin/bash', '-c', `${GROUP_UMASK}\n${command}`], {
        env,
        timeoutMs,
      });
      return {
        command,
        exitCode: r.exitCode,
        timedOut: r.timedOut,
        durationMs: r.durationMs,
        output: r.output,
        outputBytes: r.outputBytes,
      };
    } catch (error) {
      if (error instanceof SandboxCancelledError) throw error;
      throw new SandboxError('start_failed', `could not run a setup command: ${errorMessage(error)}`, {
        cause: error,
      });
    }
  }

  /**
   * The places a setup process could leave data that outlives it, where the scan looks: the
   * sandbox user can write nowhere else (the root file system is read-only; checked with the
   * container spec). System V IPC and the queues' contents are not files: removeIpc deals with them.
   */
  static readonly SCANNED = [CONTAINER_WORKDIR, CONTAINER_HOME, '/tmp', '/dev/shm', '/dev/mqueue'];

  /**
   * The places that hold one of the values in any form secrets/forms.ts lists: a file's content, a
   * file or folder name, a link's target, and files the sandbox user cannot read (see
   * secrets/scan.ts), under SCANNED. The values travel on stdin, never on a command line. Returns
   * the places (untrusted text, the values hidden in them); empty when none holds one. Throws when
   * a file could not be read: the scan fails closed.
   */
  async filesContaining(values: readonly string[]): Promise<string[]> {
    const needles = scanNeedles(values);
    if (needles.length === 0) return [];
    const input = new PassThrough();
    input.end(`${needles.join('\n')}\n`);
    const r = await this.exec(
      ['/bin/bash', '-c', `printf R; ${SECRET_SCAN_SCRIPT}`, 'ia-scan', 'strict', ...SetupPhase.SCANNED],
      { timeoutMs: 5 * 60_000, input },
    );
    if (r.exitCode === 0) return [];
    if (r.exitCode !== SCAN_FOUND) {
      throw new SandboxError(
        'start_failed',
        `could not check the sandbox for setup secrets: ${hideNeedles(r.output, needles).slice(0, 300)}`,
      );
    }
    const holders = scanHolders(r.output, needles);
    return holders.length > 0 ? holders : ['a place the scan could not name'];
  }

  /**
   * Removes every IPC object left in the container's IPC namespace (see secrets/ipc-cleanup.ts):
   * after the sweep, so nothing setup made in shared memory or a message queue reaches the agent.
   */
  async removeIpc(options: { readonly exclude?: readonly string[] } = {}): Promise<void> {
    // With `exclude`, the same exec first does exclude()'s step (whose failure, as there, is not
    // checked): an exec costs the engine a process start. The paths travel as arguments, counted.
    const paths = options.exclude ?? [];
    const r = await this.exec(
      [
        '/bin/bash',
        '-c',
        `${EXCLUDE_FUNCTION}\nn=$1; shift; [ "$n" -eq 0 ] || ia_exclude "\${@:1:n}" >/dev/null 2>&1; shift "$n"\n${IPC_CLEANUP_SCRIPT}`,
        'ia-ipc-cleanup',
        String(paths.length),
        ...paths,
        '/dev/mqueue',
      ],
      { timeoutMs: 30_000 },
    );
    if (r.exitCode !== 0) {
      throw new SandboxError(
        'start_failed',
        `could not remove what setup left in shared memory and message queues: ${r.output.trim().slice(0, 300)}`,
      );
    }
  }

  /**
   * Adds the setup's outputs to the workspace's `.git/info/exclude`, so the harness's snapshots
   * (which `git add -A`) never take a dependency tree into the base or the agent's change.
   */
  async exclude(paths: readonly string[]): Promise<void> {
    if (paths.length === 0) return;
    await this.exec(['/bin/sh', '-c', `${EXCLUDE_FUNCTION}; ia_exclude "$@"`, 'ia-exclude', ...paths], {
      timeoutMs: 30_000,
    });
  }

  /** Streams a tar of the listed workspace paths that exist into `sink`; false when none exists. */
  async pack(paths: readonly string[], sink: Writable, maxBytes: number): Promise<boolean> {
    // The list travels as one variable split on spaces: only plain relative paths are accepted.
    const bad = paths.find((p) => !isPlainPath(p));
    if (bad !== undefined) throw new SandboxError('start_failed', `not a plain workspace path: ${bad}`);
    const r = await this.exec(
      [
        '/bin/sh',
        '-c',
        'set --; for p in $IA_PATHS; do [ -e "$p" ] && set -- "$@" "$p"; done; [ $# -gt 0 ] || exit 10; exec tar -c -f - -- "$@"',
      ],
      {
        env: { IA_PATHS: paths.join(' ') },
        timeoutMs: 10 * 60_000,
        stdout: sink,
        maxStdoutBytes: maxBytes,
      },
    );
    if (r.exitCode === 10) return false;
    if (r.exitCode !== 0) {
      throw new SandboxError(
        'start_failed',
        `could not pack the environment: ${r.output.trim().slice(0, 300)}`,
      );
    }
    return true;
  }
}
