import type { Logger } from 'pino';
import type { AgentEvent } from '../events/schema.js';
import type { EventStore } from '../events/event-store.js';
import { reduceState, totalTokens } from '../events/reduce-state.js';
import type { GitHubClient } from '../github/app-client.js';
import { findProgressMarker, renderProgress, type ProgressState } from '../publish/progress.js';
import type { Redactor } from '../publish/redact.js';

type Where = { readonly owner: string; readonly repo: string };
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
export type ProgressUpdate = DistributiveOmit<ProgressState, 'jobId'>;

/**
 * The one progress comment on the issue, edited as the job moves. Step updates are throttled (a
 * long run would otherwise edit the comment hundreds of times and meet GitHub's secondary rate
 * limits); final states are always written. A failed edit never fails the job: progress is
 * information, the event log is the truth.
 */
export class ProgressReporter {
  private lastWrite = 0;
  private pending: Promise<void> = Promise.resolve();
  private environment: string | null = null;

  constructor(
    private readonly gh: GitHubClient,
    private readonly where: Where,
    private readonly issue: number,
    private commentId: number | null,
    private readonly jobId: string,
    private readonly redactor: () => Redactor,
    private readonly logger: Logger,
    private readonly runLink: string | null,
    /** Only the App's own comments are candidates: anyone can paste a marker into theirs. */
    private readonly botLogin: string,
    private readonly intervalMs = 5000,
  ) {}

  onEvent(event: AgentEvent, store: EventStore): void {
    if (event.kind !== 'model_response' && event.kind !== 'test_run') return;
    const now = Date.now();
    if (now - this.lastWrite < this.intervalMs) return;
    this.lastWrite = now;
    const state = reduceState(store.events);
    this.enqueue({
      kind: 'working',
      step: state.steps,
      tokens: totalTokens(state.usage),
      costUsd: state.usd,
      elapsedMs: state.elapsedMs,
    });
  }

  /** How the environment was made (describeEnvironment): shown under every later state. */
  setEnvironment(text: string | null): void {
    this.environment = text;
  }

  /** Writes a state now (after any write in flight) and waits for it. */
  async update(update: ProgressUpdate): Promise<void> {
    this.enqueue(update);
    await this.pending;
  }

  private enqueue(update: ProgressUpdate): void {
    this.pending = this.pending.then(() => this.write(update));
  }

  private async write(update: ProgressUpdate): Promise<void> {
    const state = {
      ...update,
      jobId: this.jobId,
      ...(this.runLink === null ? {} : { runLink: this.runLink }),
      ...(this.environment === null ? {} : { environment: this.environment }),
    } as ProgressState;
    const body = this.redactor().redact(renderProgress(state));
    try {
      const id = this.commentId ?? (await this.find());
      if (id === null) {
        const { data } = await this.gh.rest.issues.createComment({
          ...this.where,
          issue_number: this.issue,
          body,
        });
        this.commentId = data.id;
      } else {
        this.commentId = id;
        await this.gh.rest.issues.updateComment({ ...this.where, comment_id: id, body });
      }
    } catch (error) {
      this.logger.warn({ err: error, state: update.kind }, 'could not update the progress comment');
    }
  }

  private async find(): Promise<number | null> {
    for await (const page of this.gh.paginate.iterator(this.gh.rest.issues.listComments, {
      ...this.where,
      issue_number: this.issue,
      per_page: 100,
    })) {
      const found = page.data.find(
        (c) => c.user?.login === this.botLogin && findProgressMarker(c.body ?? '') === this.jobId,
      );
      if (found !== undefined) return found.id;
    }
    return null;
  }
}
