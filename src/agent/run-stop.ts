import type { AgentEvent, EventOf, NewEvent } from '../events/schema.js';
import { ModelError } from '../model/model.js';
import { SandboxError } from '../sandbox/sandbox.js';
import { WorkspaceGitError } from './workspace-git.js';

export type Outcome = EventOf<'outcome'>;

/** How a run ends, before the harness adds what the change is (summary, diff stat). */
export type Stop = Omit<EventOf<'outcome'>, 'id' | 'ts' | 'kind' | 'diffStat' | 'summary'>;

/** Ends the run with `stop` from wherever in the loop it is decided (a budget, a stuck run, a resume check). */
export class StopRun extends Error {
  constructor(readonly stop: Stop) {
    super(stop.reason);
  }
}

/**
 * The stop for an error the loop met, or null for one no run should hit (a bug, a log that cannot be
 * written): that one is thrown on. A cancelled run is `cancelled` whatever the error it caused.
 */
export function toStop(error: unknown, signal: AbortSignal | undefined): Stop | null {
  if (error instanceof StopRun) return error.stop;
  if (signal?.aborted === true) return { outcome: 'cancelled', reason: cancelReason(signal) };
  if (error instanceof ModelError) {
    return { outcome: 'failed', cause: `model_${error.code}`, reason: error.message };
  }
  if (error instanceof SandboxError)
    return { outcome: 'failed', cause: `sandbox_${error.code}`, reason: error.message };
  if (error instanceof WorkspaceGitError)
    return { outcome: 'failed', cause: 'workspace', reason: error.message };
  return null;
}

export function cancelReason(signal: AbortSignal): string {
  const r: unknown = signal.reason;
  if (typeof r === 'string') return r;
  if (r instanceof Error && r.name !== 'AbortError') return r.message;
  return 'the run was cancelled';
}

export function throwIfCancelled(signal: AbortSignal | undefined): void {
  if (signal?.aborted === true) throw new StopRun({ outcome: 'cancelled', reason: cancelReason(signal) });
}

/** Records the run's outcome event: the last event of a run (until an answer reopens it). */
export async function finishWith(
  append: (e: NewEvent) => Promise<AgentEvent>,
  stop: Stop,
  summary: string | null,
  diffStat: string,
): Promise<Outcome> {
  const event = await append({ kind: 'outcome', ...stop, summary, diffStat });
  return event as Outcome;
}
