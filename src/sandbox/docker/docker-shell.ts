import { randomBytes } from 'node:crypto';
import { PassThrough, type Duplex } from 'node:stream';
import type Docker from 'dockerode';
import type { RssWatch, ShellHost, ShellTransport } from '../shell-session.js';
import { SandboxError } from '../sandbox.js';
import { runOneOff } from './container-exec.js';

/**
 * Process-tree helper run inside the container by a one-off exec (`bash -c SCRIPT _ MODE TARGET`).
 * Inside the container we only see its own PID namespace, so the walk is over `ps` of the container.
 *   kill  PID     SIGSTOP then SIGKILL every descendant of PID, repeated until none is left
 *   shell MARKER  the same for the shell whose argv0 is MARKER, then the shell itself
 * The helper's own processes are not descendants of the shell (an exec's parent is outside the
 * namespace), so it never kills itself.
 */
const PROC_TREE_SCRIPT = String.raw`
mode=$1; target=$2
tree() {
  ps -e -o pid=,ppid= | awk -v roots="$*" '
    BEGIN { n = split(roots, r, " "); for (i = 1; i <= n; i++) want[r[i]] = 1 }
    { parent[$1] = $2 }
    END {
      changed = 1
      while (changed) {
        changed = 0
        for (p in parent) if (!(p in want) && (parent[p] in want)) { want[p] = 1; out[p] = 1; changed = 1 }
      }
      for (p in out) print p
    }'
}
case "$mode" in
  shell) roots=$(ps -e -o pid=,args= | awk -v m="$target" '$2 == m { print $1 }') ;;
  *) roots=$target ;;
esac
[ -n "$roots" ] || exit 0
for round in 1 2 3 4 5 6 7 8 9 10; do
  pids=$(tree $roots)
  [ "$mode" = shell ] && pids="$pids $roots"
  pids=$(echo $pids)
  [ -n "$pids" ] || exit 0
  kill -STOP $pids 2>/dev/null
  kill -KILL $pids 2>/dev/null
  [ "$mode" = shell ] && exit 0
done
`;

/**
 * The memory watchdog's standing measurement, one exec per watched command
 * (`bash -c SCRIPT _ PID SECONDS`): prints `R` once it reads its stdin, then every SECONDS the
 * resident bytes of PID's descendants, one number per line, until its stdin ends or PID is gone.
 * Only bash builtins run in the loop (the tree is read from /proc/<pid>/stat), so a reading costs
 * no process, where an exec per reading cost the engine, the shim and runc 0.1–0.2 CPU-s each.
 * The watcher is no descendant of the shell (its parent is outside the namespace), so it never
 * counts itself. A process of the watched user can kill it (it is then started again) or write to
 * its output; the container's memory limit, not this watchdog, is the hard bound.
 */
// A cooked template: the script's own `${` and backslashes are escaped.
const RSS_WATCH_SCRIPT = `
target=$1; interval=$2
page=$(getconf PAGESIZE 2>/dev/null) || page=4096
printf 'R'
while [ -d "/proc/$target" ]; do
  unset kids rss; declare -A kids=() rss=()
  for d in /proc/[0-9]*; do
    IFS= read -r line 2>/dev/null <"$d/stat" || continue
    # Fields after the command name (which may hold spaces and parentheses): $2 ppid, $22 rss pages.
    set -- \${line##*) }
    p=\${d#/proc/}
    kids[$2]+=" $p"
    rss[$p]=\${22}
  done
  total=0; todo=\${kids[$target]}
  while [ -n "\${todo// /}" ]; do
    next=
    for p in $todo; do
      total=$((total + \${rss[$p]:-0}))
      next+=\${kids[$p]}
    done
    todo=$next
  done
  printf '%s\\n' "$((total * page))"
  read -r -t "$interval" _
  [ $? -gt 128 ] || exit 0
done
`;

export interface DockerShellHostOptions {
  /** `uid:gid` the shell (and the helpers that kill or measure its commands) run as. */
  readonly user: string;
  /** Where the shell starts. */
  readonly workdir: string;
  /** The bash to run (the shell and the helpers). Default /bin/bash. */
  readonly bash?: string;
  /** Variables of this host's shells on top of the container's and the job's (setEnv). */
  readonly env?: Readonly<Record<string, string>>;
  /** Bound on each helper exec (kill). */
  readonly helperTimeoutMs?: number;
}

/**
 * Hosts the persistent shell in a running container: ONE `docker exec` of bash per shell, attached
 * once over a hijacked connection (stdout and stderr demultiplexed), written to for every command.
 * A new exec is made only when the shell must be replaced (it exited or was killed).
 */
export class DockerShellHost implements ShellHost {
  /**
   * The watchdog reads through one standing exec per command (watchDescendantsRss), whose readings
   * cost no process. The container's own memory limit stays the hard bound (its OOM kill is
   * reported as `memory` too); the watchdog only gives a test run above the test limit a clear stop.
   */
  readonly memoryPollMs = 500;
  private readonly transports = new Set<DockerShellTransport>();
  private readonly watches = new Set<DockerRssWatch>();
  private disposed = false;
  private env: readonly string[] = [];

  constructor(
    private readonly docker: Docker,
    private readonly container: Docker.Container,
    private readonly options: DockerShellHostOptions,
  ) {
    this.setEnv({});
  }

  /**
   * Variables every shell spawned from now on starts with (on top of the container's), as the
   * exec's environment: given to the engine as data, never parsed by a shell.
   */
  setEnv(env: Readonly<Record<string, string>>): void {
    this.env = Object.entries({ ...env, ...this.options.env }).map(([k, v]) => `${k}=${v}`);
  }

  async spawn(): Promise<ShellTransport> {
    if (this.disposed) throw new SandboxError('closed', 'the sandbox is closed');
    // argv0 names this shell so it can be found and killed from a helper exec without trusting a
    // pid the shell reported.
    const marker = `ia-shell-${randomBytes(6).toString('hex')}`;
    const bash = this.options.bash ?? '/bin/bash';
    let exec: Docker.Exec;
    let stream: Duplex;
    try {
      exec = await this.container.exec({
        // umask 0002: the agent's and the harness's users share the workspace through their group.
        Cmd: [bash, '-c', `umask 0002; exec -a ${marker} ${bash} --noprofile --norc`],
        AttachStdin: true,
        AttachStdout: true,
        AttachStderr: true,
        Tty: false,
        User: this.options.user,
        WorkingDir: this.options.workdir,
        Env: [...this.env],
      });
      stream = await exec.start({ hijack: true, stdin: true });
    } catch (error) {
      throw new SandboxError('start_failed', `could not start the shell: ${errorMessage(error)}`, {
        cause: error,
      });
    }
    const transport = new DockerShellTransport(this.docker, exec, stream, marker, (t) => {
      void this.killShell(t);
    });
    this.transports.add(transport);
    transport.onExit(() => this.transports.delete(transport));
    return transport;
  }

  async killDescendants(shellPid: number): Promise<void> {
    const r = await this.helper('kill', String(shellPid));
    if (r.exitCode !== 0) throw new SandboxError('shell_died', `kill helper failed: ${r.stderr.trim()}`);
  }

  watchDescendantsRss(shellPid: number, intervalMs: number, onBytes: (bytes: number) => void): RssWatch {
    const watch = new DockerRssWatch(
      this.docker,
      () =>
        this.disposed
          ? Promise.reject(new SandboxError('closed', 'the sandbox is closed'))
          : this.container.exec({
              Cmd: [
                this.options.bash ?? '/bin/bash',
                '-c',
                RSS_WATCH_SCRIPT,
                'ia-rss-watch',
                String(shellPid),
                (intervalMs / 1000).toFixed(3),
              ],
              AttachStdin: true,
              AttachStdout: true,
              AttachStderr: true,
              Tty: false,
              User: this.options.user,
            }),
      intervalMs,
      onBytes,
      () => this.watches.delete(watch),
    );
    this.watches.add(watch);
    watch.start();
    return watch;
  }

  /** The container is about to be removed: ending shells needs no helper exec any more. */
  dispose(): void {
    this.disposed = true;
    for (const t of this.transports) t.detach();
    this.transports.clear();
    for (const w of this.watches) w.stop();
    this.watches.clear();
  }

  private helper(mode: 'kill' | 'shell', target: string): ReturnType<typeof runOneOff> {
    return runOneOff(
      this.docker,
      this.container,
      [this.options.bash ?? '/bin/bash', '-c', PROC_TREE_SCRIPT, 'ia-proc', mode, target],
      {
        user: this.options.user,
        timeoutMs: this.options.helperTimeoutMs ?? 10_000,
      },
    );
  }

  private async killShell(transport: DockerShellTransport): Promise<void> {
    if (!this.disposed) await this.helper('shell', transport.marker).catch(() => undefined);
    // The exec ends when bash dies; if the helper could not run (container gone, pids exhausted),
    // stop waiting for it after a short grace.
    await transport.waitForExit(2000);
    transport.detach();
  }
}

/**
 * One watchDescendantsRss: the exec of RSS_WATCH_SCRIPT, started again (at most once a second)
 * when it ends before stop(), e.g. killed by the command it measures. stop() ends the exec through
 * its stdin; until the script said `R` the engine may not have attached that stdin yet (an end sent
 * before would be lost and the script would run on), so a stop that comes earlier waits for it.
 */
class DockerRssWatch implements RssWatch {
  private stopped = false;
  private stream: Duplex | null = null;
  private ready = false;
  private retry: NodeJS.Timeout | null = null;

  constructor(
    private readonly docker: Docker,
    private readonly createExec: () => Promise<Docker.Exec>,
    private readonly intervalMs: number,
    private readonly onBytes: (bytes: number) => void,
    private readonly onStopped: () => void,
  ) {}

  start(): void {
    this.retry = null;
    if (this.stopped) return;
    this.ready = false;
    this.createExec()
      .then((exec) => exec.start({ hijack: true, stdin: true }))
      .then(
        (stream) => {
          this.attach(stream);
        },
        () => {
          this.again();
        },
      );
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    if (this.retry !== null) clearTimeout(this.retry);
    if (this.ready) this.stream?.destroy();
    this.onStopped();
  }

  private attach(stream: Duplex): void {
    this.stream = stream;
    const out = new PassThrough();
    let line = '';
    out.on('data', (chunk: Buffer) => {
      let text = chunk.toString('latin1');
      if (!this.ready) {
        if (!text.startsWith('R')) return;
        this.ready = true;
        text = text.slice(1);
        if (this.stopped) {
          stream.destroy();
          return;
        }
      }
      line += text;
      const lines = line.split('\n');
      line = lines.pop() ?? '';
      // A reading is a number: a longer run without a newline is not one (a process of the watched
      // user may write to this output), and must not grow here.
      if (line.length > 32) line = '';
      for (const l of lines) {
        const bytes = Number(l);
        if (l !== '' && Number.isFinite(bytes) && !this.stopped) this.onBytes(bytes);
      }
    });
    this.docker.modem.demuxStream(stream, out, new PassThrough().resume());
    let ended = false;
    const end = (): void => {
      if (ended) return;
      ended = true;
      if (this.stream === stream) this.stream = null;
      this.again();
    };
    stream.on('error', end);
    stream.once('end', end);
    stream.once('close', end);
  }

  private again(): void {
    if (this.stopped || this.retry !== null) return;
    // At most one exec a second however often the command kills it: what polling cost at worst.
    this.retry = setTimeout(
      () => {
        this.start();
      },
      Math.max(this.intervalMs, 1000),
    );
  }
}

type ExitListener = (code: number | null) => void;

class DockerShellTransport implements ShellTransport {
  private readonly dataListeners: ((chunk: Buffer) => void)[] = [];
  private readonly exitListeners: ExitListener[] = [];
  private exitCode: number | null | undefined = undefined;
  private ended = false;

  constructor(
    docker: Docker,
    private readonly exec: Docker.Exec,
    private readonly stream: Duplex,
    readonly marker: string,
    private readonly killer: (t: DockerShellTransport) => void,
  ) {
    const out = new PassThrough();
    const err = new PassThrough();
    const forward = (chunk: Buffer): void => {
      for (const l of this.dataListeners) l(chunk);
    };
    // The session merges stderr into stdout inside the shell; stderr carries only bash's own early
    // complaints, passed on so nothing is lost.
    out.on('data', forward);
    err.on('data', forward);
    docker.modem.demuxStream(stream, out, err);
    // A write after the shell died must not crash the host process.
    stream.on('error', () => {
      this.finish();
    });
    stream.once('end', () => {
      this.finish();
    });
    stream.once('close', () => {
      this.finish();
    });
  }

  write(data: string | Buffer): void {
    if (!this.ended && this.stream.writable) this.stream.write(data);
  }

  onData(listener: (chunk: Buffer) => void): void {
    this.dataListeners.push(listener);
  }

  onExit(listener: ExitListener): void {
    if (this.exitCode !== undefined) {
      listener(this.exitCode);
      return;
    }
    this.exitListeners.push(listener);
  }

  kill(): void {
    this.killer(this);
  }

  /** Resolves when the shell's exec has ended, or after timeoutMs. */
  waitForExit(timeoutMs: number): Promise<void> {
    if (this.ended) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      this.stream.once('close', () => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** Drops the connection and reports the shell as gone. */
  detach(): void {
    this.stream.destroy();
    this.finish();
  }

  private finish(): void {
    if (this.ended) return;
    this.ended = true;
    const report = (code: number | null): void => {
      if (this.exitCode !== undefined) return;
      this.exitCode = code;
      for (const l of this.exitListeners.splice(0)) l(code);
    };
    this.exec
      .inspect()
      .then((info) => {
        report(info.Running ? null : info.ExitCode);
      })
      .catch(() => {
        report(null);
      });
  }
}

export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
