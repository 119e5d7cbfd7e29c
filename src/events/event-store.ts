import { AsyncLocalStorage } from 'node:async_hooks';
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
  /** An attached file's bytes by the name attachFile returned, or null when it is not there. */
  readAttachment(rel: string): Promise<Buffer | null>;
  /** A location people can open (a folder path for the file store). */
  readonly location: string;
}

/** The run an append happens in: whether it lost its job (see asFencedWriter). */
const writer = new AsyncLocalStorage<() => boolean>();

/**
 * Runs `fn` as one run of a job that another worker can take over (the App's workers): once
 * `lost()` is true, every event append made within it, at any depth, throws
 * EventStoreError('fenced'), whatever the store. A worker that lost a job's lock must not write
 * another event into the log the worker that holds the job continues, not even its own `cancelled`
 * outcome. Scoped to the run, not the log: the same worker process may be the one running the job
 * again.
 */
export function asFencedWriter<T>(lost: () => boolean, fn: () => Promise<T>): Promise<T> {
  return writer.run(lost, fn);
}

/** Whether the current run lost its job (stores refuse its appends). */
export function fencedRun(): boolean {
  return writer.getStore()?.() === true;
}

/**
 * A log's appends in call order, one at a time: each takes the next event id, so the next may not
 * start before the last is durable (or failed; a failure does not stop the appends after it).
 */
export class AppendQueue {
  private tail: Promise<void> = Promise.resolve();

  run<T>(append: () => Promise<T>): Promise<T> {
    const next = this.tail.then(append);
    this.tail = next.then(
      () => undefined,
      () => undefined,
    );
    return next;
  }
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

/** The file name inside `files/` that attachFile's answer names, or null for any other path. */
export function attachmentName(rel: string): string | null {
  const m = /^files\/([^/\\]+)$/.exec(rel);
  return m === null || m[1] === '.' || m[1] === '..' ? null : (m[1] ?? null);
}
