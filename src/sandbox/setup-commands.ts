import type { SetupCommandResult } from './docker/setup-phase.js';

/** What to run in place of a setup command that failed (DockerSetupSpec.fallback, LocalSetupSpec.fallback). */
export interface SetupFallback {
  /** Why the failure does not end setup, for the message when the fallback fails too. */
  readonly why: string;
  /** Run in its place, in order. */
  readonly commands: readonly string[];
}

/** Given a command that failed after its retries: its fallback, or null (the failure ends setup). */
export type SetupFallbackRule = (failed: SetupCommandResult) => SetupFallback | null;

/**
 * The order of a setup phase's commands, for both sandboxes' setup loops: the planned ones, and
 * right after one that failed, its fallback's commands when the rule gives one. At most one
 * fallback per setup, and its commands have none of their own: a failure among them, or of any
 * command after a fallback was taken, ends setup.
 */
export class SetupCommandQueue {
  private readonly commands: string[];
  private index = 0;
  private taken: { readonly failure: string; readonly why: string; readonly end: number } | null = null;

  constructor(
    commands: readonly string[],
    private readonly rule: SetupFallbackRule | undefined,
  ) {
    this.commands = [...commands];
  }

  /** The next command to run, or undefined when setup's commands are done. */
  next(): string | undefined {
    return this.commands[this.index++];
  }

  /**
   * The command next() returned last failed (after its retries), `how` says how ("exited with 1").
   * Null when setup goes on with its fallback; otherwise the message setup fails with, naming the
   * replaced command's failure too when the fallback's own command failed.
   */
  failed(r: SetupCommandResult, how: string): string | null {
    const failure = `the setup command \`${r.command}\` ${how}`;
    if (this.taken !== null) {
      return this.index <= this.taken.end
        ? `${this.taken.failure} (${this.taken.why}), and \`${r.command}\`, run in its place, ${how}`
        : failure;
    }
    const fallback = this.rule?.(r) ?? null;
    if (fallback === null || fallback.commands.length === 0) return failure;
    this.commands.splice(this.index, 0, ...fallback.commands);
    this.taken = { failure, why: fallback.why, end: this.index + fallback.commands.length };
    return null;
  }
}
