import { KEYRING_LIST_ARGS, keyringRemoveArgs } from '../../secrets/keyring-cleanup.js';
import { dirname } from 'node:path';
import type { SetupCommandResult } from '../docker/setup-phase.js';
import { SandboxCancelledError, SandboxError, throwIfCancelled } from '../sandbox.js';
import { shellQuote } from '../shell-session.js';
import { IPC_CLEANUP_SCRIPT } from '../../secrets/ipc-cleanup.js';
import { hideNeedles, scanHolders, scanNeedles, SCAN_FOUND, SECRET_SCAN_SCRIPT } from '../../secrets/scan.js';
import { LOCAL_EGRESS_MOUNT, LOCAL_MQUEUE_DIRS, type LaunchedShell } from './launch.js';
import { HeadTail } from '../head-tail.js';

export type { SetupCommandResult };

/**
 * The setup phase of an isolated local sandbox: everything that runs in it after its start and
 * before the agent's and the harness's shells exist. Each step is a one-off process entered into the
 * sandbox's namespaces as the sandbox user, like a shell, but with an environment of its own.
 *
 * The guarantees are Docker's (see docker/setup-phase.ts): setup runs the repository's code with the
 * setup secrets in its environment, and nothing of it may reach the agent phase. Hence:
 *  - the secrets never travel on a command line (the host's launcher has the environment on its
 *    argv): they are written to the process's standard input as `export` lines, then the command
 *    runs with /dev/null as input;
 *  - the only way out is the egress proxy's socket, bound read-only at LOCAL_EGRESS_MOUNT, reached
 *    by a forwarder (Node, which the Action always has) on the sandbox's own 127.0.0.1:3128; the
 *    network namespace has no interface but `lo`;
 *  - the phase ends with the sweep: every process in the sandbox's PID namespace but its init and
 *    the holder (which the shells enter) is stopped and killed, until none is left; the sandbox's
 *    own /proc lists exactly the sandbox's processes, so nothing setup started can hide from it;
 *  - then the writable areas (workspace, HOME, TMPDIR, /tmp, /var/tmp, /dev/shm, /run and the
 *    sandbox's own message queue folder) and the environment of every process left are searched
 *    for every form of the secret values (secrets/scan.ts): a hit fails setup;
 *  - the IPC objects setup left (System V shared memory, message queues, semaphores; POSIX message
 *    queues) are removed: the sandbox has an IPC namespace of its own, which outlives setup;
 *  - only then do the shells start, from the sandbox's plain environment.
 */

/** The in-sandbox forwarder listens here (the sandbox's loopback; it has no other interface). */
export const LOCAL_FORWARDER_PORT = 3128;
const SOCKET = `${LOCAL_EGRESS_MOUNT}/proxy.sock`;
const SYSTEM_PATH = '/usr/sbin:/usr/bin:/sbin:/bin';
const READY = 'ia-forwarder-ready';

/** Where the extra CA certificates and the combined bundle are written, below the sandbox's HOME. */
export function caPaths(home: string): {
  readonly dir: string;
  readonly extra: string;
  readonly bundle: string;
} {
  const dir = `${home}/.issue-agent`;
  return { dir, extra: `${dir}/extra-ca.pem`, bundle: `${dir}/ca-bundle.pem` };
}

/** The variables that point package managers at the forwarder. */
export function localProxyEnv(): Record<string, string> {
  const url = `http://127.0.0.1:${LOCAL_FORWARDER_PORT}`;
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
  };
}

/** The variables that point TLS clients at the extra CA certificates and the bundle (caPaths). */
export function localCaEnv(home: string): Record<string, string> {
  const ca = caPaths(home);
  return {
    NODE_EXTRA_CA_CERTS: ca.extra,
    SSL_CERT_FILE: ca.bundle,
    REQUESTS_CA_BUNDLE: ca.bundle,
    PIP_CERT: ca.bundle,
    CURL_CA_BUNDLE: ca.bundle,
    GIT_SSL_CAINFO: ca.bundle,
    npm_config_cafile: ca.bundle,
  };
}

/**
 * The forwarder: TCP on 127.0.0.1:<port> to the proxy's unix socket, one connection each. It says
 * READY once it listens. Arguments: socket path, port.
 */
const FORWARDER = `
const net = require('node:net');
const [, sock, port] = process.argv;
const server = net.createServer((c) => {
  const u = net.connect(sock);
  const end = () => { c.destroy(); u.destroy(); };
  c.on('error', end); u.on('error', end); c.on('close', end); u.on('close', end);
  c.pipe(u); u.pipe(c);
});
server.on('error', (e) => { process.stderr.write(String(e) + '\\n'); process.exit(1); });
server.listen(Number(port), '127.0.0.1', () => process.stdout.write('${READY}\\n'));
`;

/**
 * The sweep, run as the sandbox user in the sandbox: SIGSTOP then SIGKILL every process of the
 * sandbox's /proc but its init (pid 1, which the kernel shields from its namespace's signals
 * anyway), the pids named as arguments (the holder) and itself, until a scan finds none; zombies
 * are dead and skipped (the init reaps them). A process it may not signal (the init's own short-lived
 * helpers when the init is real root) is gone by the next round. Only builtins in the loop but
 * `sleep`, which has ended before the next scan.
 */
const SWEEP = `
keep=" $* "
me=$$
others() {
  out=()
  local d p st rest
  for d in /proc/[0-9]*; do
    p=\${d#/proc/}
    if [ "$p" = 1 ] || [ "$p" = "$me" ]; then continue; fi
    case $keep in *" $p "*) continue ;; esac
    { IFS= read -r st <"$d/stat"; } 2>/dev/null || continue
    rest=\${st##*) }
    case \${rest%% *} in Z | X) continue ;; esac
    out+=("$p")
  done
}
for ((i = 0; i < 500; i++)); do
  others
  [ \${#out[@]} -eq 0 ] && break
  kill -STOP "\${out[@]}" 2>/dev/null
  kill -KILL "\${out[@]}" 2>/dev/null
  sleep 0.01
done
others
if [ \${#out[@]} -eq 0 ]; then
  # The killed are zombies until the init reaps them (once a second): wait, briefly, so that the
  # agent's first look finds none.
  for ((i = 0; i < 300; i++)); do
    z=0
    for d in /proc/[0-9]*; do
      { IFS= read -r st <"$d/stat"; } 2>/dev/null || continue
      rest=\${st##*) }
      case \${rest%% *} in Z) z=1 && break ;; esac
    done
    [ "$z" = 0 ] && break
    sleep 0.01
  done
  exit 0
fi
printf 'processes survived the sweep: %s\\n' "\${out[*]}" >&2
exit 3
`;

/** A one-off process's end. */
export interface OneOffResult {
  readonly exitCode: number | null;
  readonly timedOut: boolean;
  /** Head and tail of stdout and stderr together (untrusted). */
  readonly output: string;
  readonly outputBytes: number;
  readonly durationMs: number;
}

/** What the setup phase needs of the sandbox's host (see LocalShellHost). */
export interface OneOffHost {
  oneOff(env: Readonly<Record<string, string>>, bashArgs: readonly string[]): Promise<LaunchedShell>;
  readonly holderPid: number | null;
}

const KEEP_HEAD = 8 * 1024;
const KEEP_TAIL = 32 * 1024;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The steps of a local sandbox's setup phase; see the module comment. */
export class LocalSetupPhase {
  constructor(
    private readonly host: OneOffHost,
    /** The environment every one-off starts from: the shells' own (never a secret). */
    private readonly baseEnv: Readonly<Record<string, string>>,
    /**
     * Aborts the step running: its process and everything it started below it are killed, and the
     * step throws SandboxCancelledError (so does every later one). What it detached is left to the
     * caller, which ends the sandbox with everything in it.
     */
    private readonly signal?: AbortSignal | undefined,
  ) {}

  /** The forwarder's host-side process; ended with the sweep (see sweep()). */
  private forwarder: LaunchedShell | null = null;

  private get home(): string {
    return this.baseEnv.HOME ?? '/tmp';
  }

  /** The extra CA certificates and a bundle of the system's CAs plus them, in the sandbox's HOME. */
  async installCaBundle(pem: Buffer): Promise<void> {
    const ca = caPaths(this.home);
    const r = await this.runScript(
      'umask 022; mkdir -p -- "$1" && cat > "$2" || exit 1\n' +
        'for f in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt /etc/ssl/cert.pem; do\n' +
        '  [ -r "$f" ] && { cat -- "$f" "$2" > "$3"; exit; }\n' +
        'done\ncat -- "$2" > "$3"',
      [ca.dir, ca.extra, ca.bundle],
      { input: pem, timeoutMs: 30_000 },
    );
    if (r.exitCode !== 0)
      throw new SandboxError(
        'start_failed',
        `could not install the CA certificates: ${r.output.trim().slice(0, 500)}`,
      );
  }

  /**
   * Starts the forwarder from the sandbox's 127.0.0.1:3128 to the proxy's socket and waits until it
   * listens. It is a process of the sandbox like any other: the sweep (or the sandbox's end) ends it.
   * `node` is looked up on the sandbox's PATH, then beside the Node running this process.
   */
  async startForwarder(): Promise<void> {
    throwIfCancelled(this.signal);
    const path = `${this.baseEnv.PATH ?? SYSTEM_PATH}:${dirname(process.execPath)}`;
    const shell = await this.host.oneOff({ ...this.baseEnv, PATH: path }, [
      '-c',
      'command -v node >/dev/null || { echo "node is not on the sandbox PATH" >&2; exit 127; }; exec node -e "$1" -- "$2" "$3" </dev/null',
      'ia-forwarder',
      FORWARDER,
      SOCKET,
      String(LOCAL_FORWARDER_PORT),
    ]);
    this.forwarder = shell;
    const { child } = shell;
    child.stdin.end();
    let err = '';
    child.stderr.on('data', (c: Buffer) => {
      if (err.length < 2048) err += c.toString('utf8');
    });
    const signal = this.signal;
    const ok = await new Promise<boolean | 'cancelled'>((resolve) => {
      let out = '';
      const settle = (value: boolean | 'cancelled'): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        resolve(value);
      };
      const timer = setTimeout(() => {
        settle(false);
      }, 15_000);
      const onAbort = (): void => {
        settle('cancelled');
      };
      if (signal?.aborted === true) onAbort();
      signal?.addEventListener('abort', onAbort, { once: true });
      child.stdout.on('data', (c: Buffer) => {
        out += c.toString('utf8');
        if (out.includes(READY)) settle(true);
      });
      child.once('exit', () => {
        setImmediate(() => {
          settle(false);
        });
      });
    });
    if (ok === 'cancelled') {
      shell.kill();
      throw new SandboxCancelledError(signal?.reason);
    }
    if (!ok) {
      shell.kill();
      throw new SandboxError(
        'start_failed',
        `the egress forwarder did not start: ${err.trim().slice(0, 300) || 'no answer'}`,
      );
    }
  }

  /**
   * Runs one setup command in the workspace with `env` (plain variables, the proxy's, the setup
   * secrets) on top of the sandbox's own, sent on standard input. A command stopped at its time
   * limit is killed with what it started below it; anything it detached is left to the sweep.
   */
  async run(
    command: string,
    env: Readonly<Record<string, string>>,
    timeoutMs: number,
  ): Promise<SetupCommandResult> {
    const lines: string[] = [];
    for (const [k, v] of Object.entries(env)) {
      if (!ENV_NAME.test(k)) throw new SandboxError('start_failed', `invalid environment variable name ${k}`);
      if (v.includes('\0')) throw new SandboxError('start_failed', `the value of ${k} contains a NUL byte`);
      lines.push(`export ${k}=${shellQuote(v)}`);
    }
    // One line, parsed whole before it runs: nothing the command does can read the rest of the input.
    lines.push(`exec "$BASH" --noprofile --norc -c ${shellQuote(command)} ia-setup </dev/null 2>&1`);
    const r = await this.oneOff(this.baseEnv, [], { input: `${lines.join('\n')}\n`, timeoutMs });
    return { command, ...r };
  }

  /** Kills every process in the sandbox but its init and the holder. Throws when some survive. */
  async sweep(): Promise<void> {
    const holder = this.host.holderPid;
    const r = await this.runScript(SWEEP, holder === null ? [] : [String(holder)], { timeoutMs: 60_000 });
    // The sweep stops the forwarder before killing it, and its host-side nsenter may have stopped
    // itself in turn (see LocalLauncher.entered): end that one from here rather than wait for it.
    this.forwarder?.kill();
    this.forwarder = null;
    if (r.exitCode !== 0)
      throw new SandboxError(
        'start_failed',
        `the setup phase could not end its processes: ${r.output.trim()}`,
      );
  }

  /**
   * The places under `dirs` (a file's content, a name, a link's target, a file the sandbox user
   * cannot read) and the processes whose environment hold one of `values` in any form
   * secrets/forms.ts lists (see secrets/scan.ts), after the sweep: the processes left are the init
   * and the holder. The values travel on stdin. Returns the places (untrusted text, the values
   * hidden in them); empty when none holds one.
   */
  async secretHolders(values: readonly string[], dirs: readonly string[]): Promise<string[]> {
    const needles = scanNeedles(values);
    if (needles.length === 0) return [];
    // `own`: a host folder (the workspace without a quota) may hold files of other users, which
    // the sandbox user cannot read either.
    const r = await this.runScript(SECRET_SCAN_SCRIPT, ['own', ...dirs], {
      input: `${needles.join('\n')}\n`,
      timeoutMs: 5 * 60_000,
    });
    if (r.exitCode === 0) return [];
    if (r.exitCode !== SCAN_FOUND)
      throw new SandboxError(
        'start_failed',
        `could not check the sandbox for setup secrets: ${hideNeedles(r.output, needles).slice(0, 300)}`,
      );
    const holders = scanHolders(r.output, needles);
    return holders.length > 0 ? holders : ['a place the scan could not name'];
  }

  /**
   * Removes every IPC object left in the sandbox's IPC namespace (see secrets/ipc-cleanup.ts), the
   * POSIX message queues from the namespace's own mqueue mount (LOCAL_MQUEUE_DIRS).
   */
  /** The kernel keys the sandbox user can see now (see secrets/keyring-cleanup.ts). */
  async visibleKeys(): Promise<string[]> {
    const r = await this.runScript('exec python3 "$@"', KEYRING_LIST_ARGS, { timeoutMs: 30_000 });
    if (r.exitCode !== 0)
      throw new SandboxError(
        'start_failed',
        `could not list the kernel keyrings: ${r.output.trim().slice(0, 300)}`,
      );
    return r.output
      .trim()
      .split(/\s+/)
      .filter((k) => /^[0-9a-f]+$/.test(k));
  }

  /** Invalidates the keys setup added to the kernel keyrings (any not in `before`); throws if one survives. */
  async removeNewKeys(before: readonly string[]): Promise<void> {
    const r = await this.runScript('exec python3 "$@"', keyringRemoveArgs(before), { timeoutMs: 30_000 });
    if (r.exitCode !== 0)
      throw new SandboxError(
        'start_failed',
        `could not remove what setup left in the kernel keyrings: ${r.output.trim().slice(0, 300)}`,
      );
  }

  async removeIpc(): Promise<void> {
    const r = await this.runScript(IPC_CLEANUP_SCRIPT, LOCAL_MQUEUE_DIRS, { timeoutMs: 30_000 });
    if (r.exitCode !== 0)
      throw new SandboxError(
        'start_failed',
        `could not remove what setup left in shared memory and message queues: ${r.output.trim().slice(0, 300)}`,
      );
  }

  /**
   * Adds the setup's outputs to the workspace's `.git/info/exclude` (the harness's snapshots never
   * take a dependency tree) and removes `remove` (the shell's state file: a setup that wrote one
   * would otherwise be sourced by the agent's shell).
   */
  async finish(outputs: readonly string[], remove: readonly string[]): Promise<void> {
    const r = await this.runScript(
      'n=$1; shift; rm -f -- "${@:1:n}"; shift "$n"; [ $# -gt 0 ] && [ -d .git ] || exit 0\n' +
        'mkdir -p .git/info && for p in "$@"; do printf "/%s\\n" "$p" >> .git/info/exclude; done',
      [String(remove.length), ...remove, ...outputs],
      { timeoutMs: 30_000 },
    );
    if (r.exitCode !== 0)
      throw new SandboxError(
        'start_failed',
        `could not record the setup's outputs: ${r.output.trim().slice(0, 300)}`,
      );
  }

  private runScript(
    script: string,
    args: readonly string[],
    options: { readonly input?: string | Buffer; readonly timeoutMs: number },
  ): Promise<OneOffResult> {
    return this.oneOff(
      { ...this.baseEnv, PATH: SYSTEM_PATH },
      ['-c', script, 'ia-setup-step', ...args],
      options,
    );
  }

  private async oneOff(
    env: Readonly<Record<string, string>>,
    bashArgs: readonly string[],
    options: { readonly input?: string | Buffer; readonly timeoutMs: number },
  ): Promise<OneOffResult> {
    const started = Date.now();
    const signal = this.signal;
    throwIfCancelled(signal);
    const shell = await this.host.oneOff(env, bashArgs);
    const { child } = shell;
    const keep = new HeadTail(KEEP_HEAD, KEEP_TAIL);
    child.stdout.on('data', (c: Buffer) => {
      keep.push(c);
    });
    child.stderr.on('data', (c: Buffer) => {
      keep.push(c);
    });
    child.stdin.on('error', () => undefined);
    child.stdin.end(options.input ?? '');
    const end = await new Promise<{ code: number | null; timedOut: boolean; cancelled: boolean }>(
      (resolve) => {
        const settle = (value: { code: number | null; timedOut: boolean; cancelled: boolean }): void => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          resolve(value);
        };
        const timer = setTimeout(() => {
          shell.kill();
          settle({ code: null, timedOut: true, cancelled: false });
        }, options.timeoutMs);
        // Killed as at its time limit, but not waited for: the caller ends the sandbox next.
        const onAbort = (): void => {
          shell.kill();
          settle({ code: null, timedOut: false, cancelled: true });
        };
        if (signal?.aborted === true) onAbort();
        signal?.addEventListener('abort', onAbort, { once: true });
        // The process's end, not its pipes': a process it left running may hold them open (the
        // sweep deals with it). What was written before the end is read for a moment longer.
        child.once('exit', (code, killedBy) => {
          settle({ code: code ?? (killedBy === null ? null : 128), timedOut: false, cancelled: false });
        });
      },
    );
    if (end.cancelled) {
      child.stdout.destroy();
      child.stderr.destroy();
      void shell.started.catch(() => undefined);
      throw new SandboxCancelledError(signal?.reason);
    }
    await new Promise<void>((resolve) => {
      if (child.stdout.closed && child.stderr.closed) {
        resolve();
        return;
      }
      const grace = setTimeout(resolve, 250);
      child.once('close', () => {
        clearTimeout(grace);
        resolve();
      });
    });
    child.stdout.destroy();
    child.stderr.destroy();
    await shell.started.catch(() => undefined);
    return {
      exitCode: end.code,
      timedOut: end.timedOut,
      output: keep.text(),
      outputBytes: keep.total,
      durationMs: Date.now() - started,
    };
  }
}
