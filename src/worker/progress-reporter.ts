import type { Logger } from 'pino';
import type { AgentEvent } from '../events/schema.js';
import type { EventStore } from '../events/event-store.js';
import { reduceState, totalTokens } from '../events/reduce-state.js';
import type { GitHubClient } from '../github/app-client.js';
import {
  findProgressMarker,
  renderProgress,
  type AttemptProgress,
  type ProgressCommon,
  type ProgressState,
} from '../publish/progress.js';
import type { Redactor } from '../publish/redact.js';

type Where = { readonly owner: string; readonly repo: string };
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
export type ProgressUpdate = DistributiveOmit<ProgressState, 'jobId'>;

/** States after which the comment does not go back to showing steps. */
const FINAL_KINDS: ReadonlySet<ProgressUpdate['kind']> = new Set([
  'pr_opened',
  'ended',
  'refused',
  'cancelled',
]);

/**
 * The one progress comment on the issue, edited as the job moves.
 *
 * Progress never delays work. At most one edit is in flight and at most one state waits; a newer
 * state replaces the waiting one (latest wins), so a burst of steps costs as many edits as the REST
 * client's write pacing (GitHub asks for one write per second) lets through in that time, never
 * one per step, and a state change never queues behind stale step updates. `post` returns at once;
 * `update` also waits until that state (or a newer one) is on GitHub, for the states a job must not
 * end before (the final ones). Step updates are further throttled to one per `intervalMs`. After a
 * final state, step updates are ignored. A failed edit never fails the job: progress is
 * information, the event log is the truth.
 */
export class ProgressReporter {
  private lastStep = 0;
  private inFlight: Promise<void> | null = null;
  private waiting: ProgressUpdate | null = null;
  private final = false;
  private environment: string | null = null;
  /** Best-of-N: the latest state of each attempt that reported one. */
  private readonly attempts = new Map<
    number,
    { readonly progress: AttemptProgress; readonly tokens: number; readonly elapsedMs: number }
  >();
  /** Edits sent (created or updated), for tests and metrics. */
  writes = 0;

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
    /** An approved outsider's request: who asked and who approved, shown with every state. */
    private readonly approval?: ProgressCommon['approval'],
    /** An automatic CI fix round: which, of at most how many. */
    private readonly ciRound?: ProgressState['ciRound'],
    /** True once another worker runs the job: its comment is that worker's to write. */
    private readonly silenced: () => boolean = () => false,
    /** Commits go on a person's pull request: its author is told with every state. */
    private readonly pushTo?: ProgressCommon['pushTo'],
  ) {}

  /**
   * A step of the run (or of attempt `attempt.number` of a best-of-N job, whose comment lists every
   * attempt with the job's totals; an attempt's end is shown at once, not throttled).
   */
  onEvent(
    event: AgentEvent,
    store: EventStore,
    attempt?: { readonly number: number; readonly of: number },
  ): void {
    const ended = attempt !== undefined && attempt.of > 1 && event.kind === 'outcome';
    if (event.kind !== 'model_response' && event.kind !== 'test_run' && !ended) return;
    if (this.final) return;
    const state = reduceState(store.events);
    if (attempt !== undefined && attempt.of > 1) {
      this.attempts.set(attempt.number, {
        progress: {
          number: attempt.number,
          of: attempt.of,
          step: state.steps,
          costUsd: state.usd,
          outcome: state.outcome?.outcome ?? null,
        },
        tokens: totalTokens(state.usage),
        elapsedMs: state.elapsedMs,
      });
    }
    const now = Date.now();
    if (!ended && now - this.lastStep < this.intervalMs) return;
    this.lastStep = now;
    if (this.attempts.size === 0) {
      this.post({
        kind: 'working',
        step: state.steps,
        tokens: totalTokens(state.usage),
        costUsd: state.usd,
        elapsedMs: state.elapsedMs,
      });
      return;
    }
    const all = [...this.attempts.values()];
    this.post({
      kind: 'working',
      step: all.reduce((n, a) => n + a.progress.step, 0),
      tokens: all.reduce((n, a) => n + a.tokens, 0),
      costUsd: all.reduce((n, a) => n + a.progress.costUsd, 0),
      elapsedMs: Math.max(...all.map((a) => a.elapsedMs)),
      attempts: all.map((a) => a.progress),
    });
  }

  /** How the environment was made (describeEnvironment): shown under every later state. */
  setEnvironment(text: string | null): void {
    this.environment = text;
  }

  /** Shows a state as soon as the edit in flight (if any) is done; returns at once. */
  post(update: ProgressUpdate): void {
    if (FINAL_KINDS.has(update.kind)) this.final = true;
    else if (this.final) return;
    this.waiting = update;
    this.inFlight ??= this.pump();
  }

  /** Posts a state and waits until it (or a newer one) is written. */
  async update(update: ProgressUpdate): Promise<void> {
    this.post(update);
    await this.flush();
  }

  /** Waits until nothing is waiting or in flight. */
  async flush(): Promise<void> {
    while (this.inFlight !== null) await this.inFlight;
  }

  private async pump(): Promise<void> {
    try {
      for (let next = this.waiting; next !== null; next = this.waiting) {
        this.waiting = null;
        await this.write(next);
      }
    } finally {
      this.inFlight = null;
    }
  }

  private async write(update: ProgressUpdate): Promise<void> {
    const state = {
      ...update,
      jobId: this.jobId,
      ...(this.runLink === null ? {} : { runLink: this.runLink }),
      ...(this.environment === null ? {} : { environment: this.environment }),
      ...(this.approval === undefined ? {} : { approval: this.approval }),
      ...(this.ciRound === undefined ? {} : { ciRound: this.ciRound }),
      ...(this.pushTo === undefined ? {} : { pushTo: this.pushTo }),
    } as ProgressState;
    if (this.silenced()) return;
    const body = this.redactor().redact(renderProgress(state));
    try {
      this.writes += 1;
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
