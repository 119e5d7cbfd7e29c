import { randomBytes } from 'node:crypto';
import { OutputCapture, type CaptureLimits } from './output-capture.js';
import { SandboxError, type ExecResult, type HarnessExecOptions, type KillReason } from './sandbox.js';

/** A running `bash` whose stdin we write and whose stdout (and stderr) we read. */
export interface ShellTransport {
  write(data: string | Buffer): void;
  onData(listener: (chunk: Buffer) => void): void;
  onExit(listener: (code: number | null) => void): void;
  /** Ends the shell and everything it started. */
  kill(): void;
}

/** What a backend (child process, container) provides to host a persistent shell. */
export interface ShellHost {
  spawn(): Promise<ShellTransport>;
  /** Kills every process the shell's commands started, leaving the shell itself alive. */
  killDescendants(shellPid: number): Promise<void>;
  /** Resident memory of the shell's descendants, when the backend can measure it. */
  descendantsRssBytes?(shellPid: number): Promise<number>;
  /**
   * A standing measurement of the same, for backends where each descendantsRssBytes call is dear
   * (Docker's is an exec): `onBytes` gets a reading about every `intervalMs` until `stop()`. The
   * watchdog prefers it to polling descendantsRssBytes.
   */
  watchDescendantsRss?(shellPid: number, intervalMs: number, onBytes: (bytes: number) => void): RssWatch;
  /**
   * How often the memory watchdog measures, when the backend wants it less often than the default
   * (200 ms) because a measurement is costly.
   */
  readonly memoryPollMs?: number;
}

/** A running memory measurement (ShellHost.watchDescendantsRss). */
export interface RssWatch {
  stop(): void;
}

export interface ShellSessionOptions {
  /** Where the shell starts, as the sandbox sees it. */
  readonly workdir: string;
  /** A file inside the sandbox where the shell saves its exported variables after every command. */
  readonly stateFile: string;
  readonly capture: CaptureLimits;
  /** After a kill, how long to wait for the shell to report back before replacing it. */
  readonly killGraceMs?: number;
  /** Bound on waiting for a new shell to say it is ready. */
  readonly startTimeoutMs?: number;
  /** Poll interval of the memory watchdog. */
  readonly memoryPollMs?: number;
  /**
   * When the shell starts and after every command, before it reports back, kill every other
   * process it may signal (`kill -KILL -1`, one system call, so no process forks its way out): only
   * for a shell that is alone as its user or the init of a process namespace of its own (the
   * harness's, see Sandbox.harnessExec), where that is exactly what its last command left running.
   */
  readonly sweep?: boolean;
}

/**
 * The sweep (ShellSessionOptions.sweep), after every command: `kill -KILL -1` signals every process
 * the shell may signal but itself and its namespace's init in one system call, so none forks its way
 * out. A killed process is gone only once it has exited, though: until the kernel has torn it down
 * (a large address space takes a while on a loaded machine) it still holds its port, its locks and
 * its memory, and the next command could trip over them. So the shell then waits (SWEEP_WAIT).
 * `kill -0 -1` fails only when the namespace holds no other process at all, whoever's: there (the
 * isolated local sandbox's harness side, after a command that left nothing) there is nothing to
 * wait for. The kill stays in the line itself; the wait is a function the shell defines once, as
 * bash reads a pipe's commands a byte at a time (each byte of this line is a system call, every
 * command).
 */
const SWEEP = 'kill -KILL -1 2>/dev/null; kill -0 -1 2>/dev/null && __ia_swept; ';

/**
 * Defines `__ia_swept`: waits, busily and for at most about two seconds (or 20000 passes, should
 * SECONDS be unset by something a command sourced), until no process the shell may signal is left
 * but the dead (zombies, which hold nothing and which their parent, this shell or the namespace's
 * init, reaps), as the setup phases' sweeps do. Quiet as a whole: a process may end between any two
 * looks at it. In Docker, where the agent's processes share the namespace, one pass over /proc.
 */
const SWEEP_WAIT =
  '__ia_swept() { { local until=$((SECONDS + 2)) n=0 p s left; while :; do left=; ' +
  'for p in /proc/[1-9]*; do p=${p#/proc/}; case $p in 1 | "$$") continue ;; esac; ' +
  'kill -0 "$p" && IFS= read -r s <"/proc/$p/stat" || continue; ' +
  's=${s##*) }; case ${s%% *} in Z | X) ;; *) left=$p && break ;; esac; done; ' +
  'n=$((n + 1)); [ -z "$left" ] || [ "$SECONDS" -ge "$until" ] || [ "$n" -ge 20000 ] && break; done; } 2>/dev/null; }\n';

/** Quotes a string as one bash word. */
export function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

interface Pending {
  readonly doneMarker: Buffer;
  readonly endMarker: Buffer;
  readonly capture: OutputCapture;
  /** Bytes not yet known to be output (they may be the start of the done marker). */
  carry: Buffer;
  /** Set once the done marker was seen: what follows is the exit code and cwd. */
  trailer: Buffer | null;
  resolve: (r: { exitCode: number; cwd: string } | { shellExit: number | null }) => void;
}

/**
 * One long-lived bash per sandbox, so `cd` and `export` persist between commands and a command costs
 * one round trip instead of a process start.
 *
 * Framing: each command is sent as a quoted here-document read by the `read` builtin into a variable
 * (no fork, no quoting of the command needed; the delimiter is a fresh random nonce), then `eval`ed
 * with stdin from /dev/null and stderr merged into stdout. The shell then saves `export -p` to the
 * state file and prints a done marker carrying the exit status and cwd, framed by the nonce. The
 * command cannot forge the marker because it never sees the nonce.
 *
 * A command past its deadline has its descendants killed; if the shell itself is stuck (a builtin
 * loop) or exits, it is replaced by a new one that restores the last cwd and exported variables.
 */
export class ShellSession {
  private transport: ShellTransport | null = null;
  private shellPid = 0;
  private cwd: string;
  private pending: Pending | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;
  private generation = 0;
  private readonly killGraceMs: number;
  private readonly startTimeoutMs: number;
  private readonly memoryPollMs: number;
  private killing: Promise<void> | null = null;

  constructor(
    private readonly host: ShellHost,
    private readonly options: ShellSessionOptions,
  ) {
    this.cwd = options.workdir;
    this.killGraceMs = options.killGraceMs ?? 2000;
    this.startTimeoutMs = options.startTimeoutMs ?? 15_000;
    this.memoryPollMs = options.memoryPollMs ?? host.memoryPollMs ?? 200;
  }

  get pid(): number {
    return this.shellPid;
  }

  private get sweepLine(): string {
    return this.options.sweep === true ? SWEEP : '';
  }

  async start(): Promise<void> {
    await this.spawnShell(false);
  }

  /**
   * Commands run one at a time, in call order. With `stdin`, the command reads those bytes from the
   * shell's own input, which it must consume exactly (e.g. `head -c N`): bash reads a script from a
   * pipe one byte at a time, so whatever the command leaves unread would be parsed as shell input.
   * This is how untrusted data (file content, paths) reaches a command without ever being quoted
   * into it.
   */
  exec(command: string, options: HarnessExecOptions): Promise<ExecResult> {
    const run = this.queue.then(() => this.execNow(command, options));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private isClosed(): boolean {
    return this.closed;
  }

  close(): void {
    this.closed = true;
    this.transport?.kill();
    this.transport = null;
  }

  private async spawnShell(restore: boolean): Promise<void> {
    const generation = ++this.generation;
    const transport = await this.host.spawn();
    const nonce = randomBytes(12).toString('hex');
    const ready = Buffer.from(`__IA_READY_${nonce}_`);
    let buffered = Buffer.alloc(0);
    let onReady: ((pid: number) => void) | null = null;
    let onEarlyExit: ((code: number | null) => void) | null = null;

    transport.onData((chunk) => {
      if (generation !== this.generation) return;
      if (onReady !== null) {
        buffered = Buffer.concat([buffered, chunk]);
        const at = buffered.indexOf(ready);
        const nl = at >= 0 ? buffered.indexOf(0x0a, at) : -1;
        if (nl >= 0) {
          const pid = Number(buffered.subarray(at + ready.length, nl).toString());
          const cb = onReady;
          onReady = null;
          cb(pid);
        }
        return;
      }
      this.onData(chunk);
    });
    transport.onExit((code) => {
      if (generation !== this.generation) return;
      if (onEarlyExit !== null) {
        onEarlyExit(code);
        return;
      }
      this.transport = null;
      const p = this.pending;
      if (p !== null) {
        this.pending = null;
        p.capture.push(p.carry);
        p.resolve({ shellExit: code });
      }
    });

    const state = shellQuote(this.options.stateFile);
    const restoreLines = restore
      ? `[ -r ${state} ] && . ${state} >/dev/null 2>&1\ncd -- ${shellQuote(this.cwd)} 2>/dev/null || cd -- ${shellQuote(this.options.workdir)}\n`
      : `cd -- ${shellQuote(this.options.workdir)}\n`;
    transport.write(
      `exec 2>&1; set +o history +o errexit +o nounset 2>/dev/null; PS1=''; PS2=''; PROMPT_COMMAND=''\n${restoreLines}` +
        `${this.options.sweep === true ? SWEEP_WAIT : ''}${this.sweepLine}printf '\\n__IA_READY_${nonce}_%d\\n' "$$"\n`,
    );

    const pid = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new SandboxError('start_failed', `the shell did not start within ${this.startTimeoutMs} ms`));
      }, this.startTimeoutMs);
      onReady = (p) => {
        clearTimeout(timer);
        resolve(p);
      };
      onEarlyExit = (code) => {
        clearTimeout(timer);
        reject(new SandboxError('start_failed', `the shell exited while starting (code ${String(code)})`));
      };
    }).catch((error: unknown) => {
      transport.kill();
      throw error;
    });
    onEarlyExit = null;
    this.transport = transport;
    this.shellPid = pid;
  }

  private onData(chunk: Buffer): void {
    const p = this.pending;
    if (p === null) return; // output of a background process between commands: nobody asked for it
    if (p.trailer !== null) {
      p.trailer = Buffer.concat([p.trailer, chunk]);
      this.tryFinish(p);
      return;
    }
    const data = p.carry.length > 0 ? Buffer.concat([p.carry, chunk]) : chunk;
    const at = data.indexOf(p.doneMarker);
    if (at >= 0) {
      p.capture.push(data.subarray(0, at));
      p.carry = Buffer.alloc(0);
      p.trailer = data.subarray(at + p.doneMarker.length);
      this.tryFinish(p);
      return;
    }
    // Keep back as many bytes as could be the start of the marker split across chunks.
    const keep = Math.min(p.doneMarker.length - 1, data.length);
    p.capture.push(data.subarray(0, data.length - keep));
    p.carry = Buffer.from(data.subarray(data.length - keep));
  }

  private tryFinish(p: Pending): void {
    const trailer = p.trailer;
    if (trailer === null) return;
    const end = trailer.indexOf(p.endMarker);
    if (end < 0) return;
    const body = trailer.subarray(0, end).toString('utf8');
    const sep = body.indexOf('_');
    const exitCode = Number(body.slice(0, sep));
    const cwd = body.slice(sep + 1);
    this.pending = null;
    p.resolve({ exitCode, cwd });
  }

  private async execNow(command: string, options: HarnessExecOptions): Promise<ExecResult> {
    // A kill of the previous command still in flight must land before the next command starts.
    if (this.killing !== null) await this.killing;
    if (this.closed) throw new SandboxError('closed', 'the sandbox is closed');
    if (this.transport === null) await this.spawnShell(true);
    const transport = this.transport;
    if (transport === null) throw new SandboxError('shell_died', 'the shell is not running');

    const started = performance.now();
    const nonce = randomBytes(12).toString('hex');
    const capture = new OutputCapture(this.options.capture);
    const kill_ = { reason: null as KillReason | null };

    const outcome = new Promise<{ exitCode: number; cwd: string } | { shellExit: number | null }>(
      (resolve) => {
        this.pending = {
          // The leading newline separates the marker from output that did not end with one.
          doneMarker: Buffer.from(`\n__IA_DONE_${nonce}_`),
          endMarker: Buffer.from(`__IA_END_${nonce}\n`),
          capture,
          carry: Buffer.alloc(0),
          trailer: null,
          resolve,
        };
      },
    );

    const delimiter = `__IA_EOF_${nonce}`;
    const stdin = options.stdin;
    transport.write(
      `IFS= read -r -d '' __ia_cmd <<'${delimiter}'\n${command}\n${delimiter}\n` +
        // `jobs` consumes the shell's pending notices about earlier background jobs (e.g. "Killed"
        // after a timeout), which would otherwise be printed into this command's output.
        `jobs >/dev/null 2>&1\n` +
        (stdin === undefined ? `eval "$__ia_cmd" </dev/null 2>&1\n` : `eval "$__ia_cmd" 2>&1\n`),
    );
    if (stdin !== undefined && stdin.length > 0) transport.write(stdin);
    transport.write(
      // `disown -a`: background jobs the command left are forgotten by the shell (they keep running,
      // and are still killed with the sandbox), so no "Killed" notice about them can land in a later
      // command's output, whenever bash gets round to reaping them.
      `__ia_ec=$?; ${this.sweepLine}disown -a 2>/dev/null; export -p >${shellQuote(this.options.stateFile)} 2>/dev/null; ` +
        `printf '\\n__IA_DONE_${nonce}_%d_%s__IA_END_${nonce}\\n' "$__ia_ec" "$PWD"\n`,
    );

    // Bound to this command: a watchdog reading or a timer that lands after the command ended (the
    // next command may already run) must not kill anything.
    const mine = this.pending;
    const kill = (reason: KillReason): void => {
      if (kill_.reason !== null || this.pending === null || this.pending !== mine) return;
      kill_.reason = reason;
      this.killing = this.killCommand().finally(() => {
        this.killing = null;
      });
    };
    const timer = setTimeout(() => {
      kill('timeout');
    }, options.timeoutMs);
    const onAbort = (): void => {
      kill('cancelled');
    };
    if (options.signal?.aborted === true) onAbort();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    const watchdog = this.startMemoryWatchdog(options.memoryLimitBytes, () => {
      kill('memory');
    });

    let result: { exitCode: number; cwd: string } | { shellExit: number | null };
    try {
      result = await outcome;
    } finally {
      clearTimeout(timer);
      watchdog?.stop();
      options.signal?.removeEventListener('abort', onAbort);
    }

    const captured = capture.finish();
    const killed = kill_.reason;
    const durationMs = performance.now() - started;
    if ('shellExit' in result) {
      // The command ended the shell (`exit`, `exec`, a killed shell). Replace it for the next command.
      if (!this.isClosed()) await this.spawnShell(true);
      return {
        exitCode: killed === null ? result.shellExit : null,
        killed,
        output: captured.text,
        outputBytes: captured.bytes,
        truncated: captured.truncated,
        fullOutputPath: captured.fullOutputPath,
        durationMs,
        cwd: this.cwd,
        shellRestarted: true,
      };
    }
    this.cwd = result.cwd;
    return {
      exitCode: killed === null ? result.exitCode : null,
      killed,
      output: captured.text,
      outputBytes: captured.bytes,
      truncated: captured.truncated,
      fullOutputPath: captured.fullOutputPath,
      durationMs,
      cwd: result.cwd,
      shellRestarted: false,
    };
  }

  /** Kills the running command's processes; replaces the shell if it does not report back in time. */
  private async killCommand(): Promise<void> {
    const pending = this.pending;
    const transport = this.transport;
    // The shell goes on with the rest of the command line after a child dies, so keep killing what it
    // starts until it reports back, or until the grace period ends. Each round re-checks that the
    // same command still runs, so a kill never reaches the command after it.
    const deadline = performance.now() + this.killGraceMs;
    while (this.pending === pending && performance.now() < deadline) {
      try {
        await this.host.killDescendants(this.shellPid);
      } catch {
        // A shell that does not answer is replaced below.
      }
      if (this.pending !== pending) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    if (this.pending === pending && pending !== null && this.transport === transport) {
      // The shell itself is busy (e.g. a `while :; do :; done` builtin loop): end it; onExit resolves.
      transport?.kill();
    }
  }

  private startMemoryWatchdog(limit: number | undefined, onExceeded: () => void): RssWatch | null {
    if (limit === undefined) return null;
    const pid = this.shellPid;
    const onBytes = (rss: number): void => {
      if (rss > limit) onExceeded();
    };
    if (this.host.watchDescendantsRss !== undefined) {
      return this.host.watchDescendantsRss(pid, this.memoryPollMs, onBytes);
    }
    const measure = this.host.descendantsRssBytes?.bind(this.host);
    if (measure === undefined) return null;
    let busy = false;
    const timer = setInterval(() => {
      if (busy) return;
      busy = true;
      measure(pid)
        .then(onBytes)
        .catch(() => undefined)
        .finally(() => {
          busy = false;
        });
    }, this.memoryPollMs);
    return {
      stop: () => {
        clearInterval(timer);
      },
    };
  }
}
