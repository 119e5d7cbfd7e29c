import type { AgentEvent, BaseState, NewEvent } from './schema.js';

/**
 * An append-only log of one conversation. `append` returns only after the event is durable, so a
 * process killed right after it returns loses nothing.
 */
export interface EventStore {
  readonly base: BaseState;
  readonly events: readonly AgentEvent[];
  append(event: NewEvent): Promise<AgentEvent>;
  /** Stores a large blob (e.g. full command output) beside the log; returns its relative name. */
  attachFile(sourcePath: string, name: string): Promise<string>;
  /** A location people can open (a folder path for the file store). */
  readonly location: string;
}

export class EventStoreError extends Error {
  override readonly name = 'EventStoreError';
  constructor(
    /**
     * conflict: another writer appended the event this one meant to (two runs of one conversation:
     * a worker that lost its job's lock, and the worker that took the job over); fenced: this
     * process gave the conversation up (see fenceRuns) and appends nothing more to it.
     */
    readonly code: 'not_found' | 'corrupt' | 'unsupported_version' | 'exists' | 'conflict' | 'fenced',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
