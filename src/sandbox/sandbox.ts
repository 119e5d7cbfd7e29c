/**
 * The seam between the agent loop and wherever commands run. The loop cannot tell a local child
 * process from a Docker container: both run one persistent bash per sandbox and expose the workspace
 * through the same confined file API.
 */

export interface ExecOptions {
  /** The command and every process it started are killed after this long. */
  readonly timeoutMs: number;
  /** Aborting kills the command the same way a timeout does (cancel at a step boundary or mid-command). */
  readonly signal?: AbortSignal | undefined;
  /** Kill the command when the resident memory of its process tree passes this many bytes. */
  readonly memoryLimitBytes?: number | undefined;
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

export interface Sandbox {
  /** 'local' or 'docker'; recorded in the trajectory. */
  readonly kind: string;
  /** The workspace root as commands inside the sandbox see it (e.g. /workspace). */
  readonly workdir: string;
  /** The workspace root on the host, where file tools and checkpoints operate. */
  readonly hostWorkspace: string;
  exec(command: string, options: ExecOptions): Promise<ExecResult>;
  /** Releases every resource (processes, containers, temp files). Safe to call twice. */
  close(): Promise<void>;
}
