import type { Readable, Writable } from 'node:stream';

/**
 * The seam between the agent loop and wherever commands run. The loop cannot tell a local child
 * process from a Docker container: both run one persistent bash per sandbox for the agent's
 * commands and a second one for the harness (file tools, checkpoints, detection, the verdict's
 * test runs).
 *
 * The boundary this seam keeps: the workspace belongs to the sandbox. Nothing outside it is given a
 * host path of the workspace, so no host process can open, stat, create or remove a file in it by
 * name (a process left running in the sandbox could swap any component for a link between a check
 * and a use). Every file operation runs inside, as a sandbox user (see SandboxFiles), and
 * everything that comes out — command output, file content, diffs — is untrusted data.
 *
 * And inside, the harness runs where the agent cannot reach: no process of the agent's (its shell,
 * anything it left running) can write to, trace, read (`/proc/<pid>/fd`, `environ`, `mem`) or
 * signal a process of the harness's (see harnessExec).
 */

export interface ExecOptions {
  /** The command and every process it started are killed after this long. */
  readonly timeoutMs: number;
  /** Aborting kills the command the same way a timeout does (cancel at a step boundary or mid-command). */
  readonly signal?: AbortSignal | undefined;
  /** Kill the command when the resident memory of its process tree passes this many bytes. */
  readonly memoryLimitBytes?: number | undefined;
}

export interface HarnessExecOptions extends ExecOptions {
  /** Bytes the script reads from its standard input. */
  readonly stdin?: Buffer | undefined;
}

/** Why a command did not end on its own. */
export type KillReason = 'timeout' | 'memory' | 'cancelled';

/**
 * A finished command. A failing command is data, not an exception: exceptions are reserved for the
 * sandbox itself breaking (see SandboxError).
 */
export interface ExecResult {
  /** Exit status of the command; null when it was killed (see killed). */
  readonly exitCode: number | null;
  readonly killed: KillReason | null;
  /**
   * stdout and stderr interleaved as the command wrote them. When the output passed the capture cap
   * this holds the head and the tail around an omission marker, and fullOutputPath holds every byte.
   */
  readonly output: string;
  readonly outputBytes: number;
  readonly truncated: boolean;
  /** A host file with the complete output, present only when truncated. The caller owns it. */
  readonly fullOutputPath?: string | undefined;
  readonly durationMs: number;
  /** Working directory of the shell after the command, as the sandbox sees it. */
  readonly cwd: string;
  /** The shell itself exited (e.g. the command ran `exit`); it was restarted with the last cwd and env. */
  readonly shellRestarted: boolean;
}

export type SandboxErrorCode =
  | 'start_failed'
  | 'shell_died'
  | 'container_died'
  | 'oom_killed'
  | 'pids_exhausted'
  /** The workspace (or the sandbox's tmp or home) reached its size limit. */
  | 'disk_limit'
  | 'closed'
  | 'engine_unavailable';

/** The sandbox itself is broken (not a command inside it). Carries a typed code for the outcome. */
export class SandboxError extends Error {
  override readonly name = 'SandboxError';
  constructor(
    readonly code: SandboxErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * The caller's signal aborted while a sandbox was being made (its setup phase, the environment
 * around it): the step running was stopped, and what was made for the sandbox (its container or
 * namespaces, its processes, its host folders) is removed before this is thrown. Not a SandboxError:
 * nothing is broken, and no outcome is recorded for it.
 */
export class SandboxCancelledError extends Error {
  override readonly name = 'SandboxCancelledError';
  constructor(
    /** The signal's reason (who or what cancelled). */
    readonly reason?: unknown,
  ) {
    super('cancelled during setup');
  }
}

/** Throws SandboxCancelledError when `signal` has aborted: between the steps of a setup. */
export function throwIfCancelled(signal: AbortSignal | undefined): void {
  if (signal?.aborted === true) throw new SandboxCancelledError(signal.reason);
}

export interface Sandbox {
  /** 'local' or 'docker'; recorded in the trajectory. */
  readonly kind: string;
  /** The workspace root as commands inside the sandbox see it (e.g. /workspace). */
  readonly workdir: string;
  /** Runs a command of the agent in its persistent shell. */
  exec(command: string, options: ExecOptions): Promise<ExecResult>;
  /**
   * Runs a harness command (constant script text; untrusted data only on `stdin`, which the script
   * must consume exactly) in the harness's own shell: same files, limits and network as the
   * agent's shell, but never shared with the agent's commands, so `cd`, `exit`, functions or traps
   * the agent set cannot change what a file operation does. It starts in `workdir`.
   *
   * Where the sandbox isolates (Docker, the isolated local sandbox), the harness's processes are
   * out of the agent's reach: another user (Docker) or another process namespace (local), so no
   * process of the agent can type into the harness's shell, trace it, read its /proc entries or
   * signal it. The command itself may run code the agent wrote (its tests, a git filter): the shell
   * is non-dumpable (out of reach of its own commands too) and kills whatever a command left
   * running before it reports back (ShellSessionOptions.sweep), so no command reaches the next.
   */
  harnessExec(command: string, options: HarnessExecOptions): Promise<ExecResult>;
  /**
   * Starts a long-running process inside the sandbox (same user, limits and network as the agent's
   * commands) whose stdin and stdout the host speaks to: an MCP server over stdio. Absent where the
   * sandbox cannot keep such a process off the host (the unconfined local sandbox).
   */
  openProcess?(argv: readonly string[], options: OpenProcessOptions): Promise<SandboxProcess>;
  /** Releases every resource (processes, containers, temp files). Safe to call twice. */
  close(): Promise<void>;
}

export interface OpenProcessOptions {
  /** Variables of this process only (never a deployment secret: the sandbox is untrusted). */
  readonly env?: Readonly<Record<string, string>> | undefined;
}

/** A process inside the sandbox with its standard streams. */
export interface SandboxProcess {
  readonly stdin: Writable;
  readonly stdout: Readable;
  /** The last few KiB of its stderr, for messages. */
  stderrTail(): string;
  /** Resolves when the process's streams have closed (it exited, or the sandbox went away). */
  readonly closed: Promise<void>;
  /** Ends it (its stdin is closed and the stream dropped; the sandbox's teardown kills the rest). */
  close(): void;
}
