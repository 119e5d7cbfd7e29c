import type { EventOf } from '../../events/schema.js';

/**
 * What a tool may ask of the agent loop that runs it, beside the sandbox (ToolContext). Only the
 * tools that act on the run itself use it: `delegate` (a sub-agent on the run's model, budget and
 * log), `ask_for_clarification` (refused once files changed) and `run_tests` (answered with the
 * baseline while nothing changed). The loop makes one per call; outside a loop (the explorer, a
 * test calling a tool directly) there is `outsideLoop`.
 */
export interface RunControl {
  /** Whether the workspace differs from the base: its last checkpoint is not the base tree. */
  readonly changedFiles: boolean;
  /**
   * The baseline test run while no action since it can have changed anything (baseline-answer.ts),
   * else null. Read from the log when asked, so a call that does not need it costs nothing.
   */
  reusableBaseline(): EventOf<'test_run'> | null;
  /**
   * Runs the read-only sub-agent (explore.ts) on `question` for at most `maxSteps` turns, within a
   * share of the run's remaining budget; its turns are nested under this call in the log. The
   * answer is its summary, or what it had found when its budget ran out. A failure of the run
   * itself (the model's, the log's) is thrown as a RunFailure, which `runToolCall` passes on.
   */
  delegate(question: string, maxSteps: number): Promise<string>;
}

/**
 * A failure of the run met inside a RunControl call (the sub-agent's model call was refused, the
 * run was cancelled, the log could not be written): not the model's to handle, so `runToolCall`
 * throws `error`, as it was thrown, to the loop, which ends the run as it would for its own call.
 */
export class RunFailure extends Error {
  override readonly name = 'RunFailure';
  constructor(readonly error: unknown) {
    super(error instanceof Error ? error.message : String(error));
  }
}

/** Runs `fn`, any failure of it wrapped as a RunFailure (for RunControl implementations). */
export async function asRunFailure<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    throw new RunFailure(error);
  }
}

/** The control of a call with no agent loop around it: nothing changed, nothing to reuse, no sub-agent. */
export const outsideLoop: RunControl = {
  changedFiles: false,
  reusableBaseline: () => null,
  delegate: () => Promise.reject(new Error('delegate runs only inside the agent loop.')),
};
