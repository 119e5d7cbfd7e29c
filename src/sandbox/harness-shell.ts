import { ShellSession, type ShellHost } from './shell-session.js';
import type { ExecResult, HarnessExecOptions } from './sandbox.js';

/** Capture of a harness command: enough for a whole file the editor accepts plus its status line. */
export const HARNESS_CAPTURE = { headBytes: 6 * 1024 * 1024, tailBytes: 1024 * 1024 } as const;

/**
 * The harness's own persistent shell in a sandbox (see Sandbox.harnessExec). A harness command that
 * had to be killed may have left bytes of its stdin unread, which the shell would go on to read as
 * commands: such a shell is replaced before the next harness command.
 *
 * Where the backend runs it out of the agent's reach (another user in Docker, a process namespace of
 * its own in the isolated local sandbox), the shell also sweeps (ShellSessionOptions.sweep): a
 * harness command runs code the agent wrote (its tests, a git filter it configured), and nothing
 * that code starts may outlive the command to meddle with the next one.
 */
export class HarnessShell {
  private session: ShellSession;
  private replacing: Promise<void> | null = null;

  constructor(private readonly make: () => ShellSession) {
    this.session = make();
  }

  start(): Promise<void> {
    return this.session.start();
  }

  async exec(command: string, options: HarnessExecOptions): Promise<ExecResult> {
    if (this.replacing !== null) await this.replacing;
    const r = await this.session.exec(command, options);
    if (r.killed !== null && options.stdin !== undefined) {
      this.session.close();
      this.session = this.make();
      this.replacing = this.session.start().finally(() => {
        this.replacing = null;
      });
      await this.replacing;
    }
    return r;
  }

  close(): void {
    this.session.close();
  }
}

/**
 * A harness shell on a backend's shell host: its output captured for whole files, spilled to the
 * host-only `spillDir`, and no state kept across a restart (`/dev/null` as the state file).
 */
export function harnessShell(
  host: ShellHost,
  options: {
    readonly workdir: string;
    readonly spillDir: string;
    readonly startTimeoutMs?: number | undefined;
    /** See ShellSessionOptions.sweep: only where the shell is alone as its user or in its namespace. */
    readonly sweep: boolean;
  },
): HarnessShell {
  return new HarnessShell(
    () =>
      new ShellSession(host, {
        workdir: options.workdir,
        stateFile: '/dev/null',
        capture: { ...HARNESS_CAPTURE, spillDir: options.spillDir },
        sweep: options.sweep,
        ...(options.startTimeoutMs === undefined ? {} : { startTimeoutMs: options.startTimeoutMs }),
      }),
  );
}
