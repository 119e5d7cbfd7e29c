import { EventStoreError, type EventStore } from '../events/event-store.js';
import type { RunStorage } from '../events/run-storage.js';
import type {
  BaseState,
  ContentBlock,
  EventOf,
  Limits,
  NewEvent,
  OutcomeKind,
  RepoInstruction,
} from '../events/schema.js';
import { SCHEMA_VERSION } from '../events/schema.js';
import { modelResponseEvent } from '../agent/model-response-event.js';
import type { ModelResponse } from '../model/model.js';
import type { Redactor } from '../publish/redact.js';
import type { FixJob } from '../queue/payloads.js';
import { recordJob } from './stages/prepare.js';

/**
 * A review's trajectory (`@agent review`, review-job.ts): a run in the run store under the job's
 * id, as a fix job's, so the run server lists it (its kind, `review`, is the job record's) and shows
 * its steps: the clone, each sandbox and its tests with their command and results, each model call
 * with its tokens and cost and the review tools it called, and the review posted or why not, ending
 * in an outcome. Every event is redacted before it is written (the installation token and the
 * worker's secrets never enter it). A retry of the job appends to the same log after `run_resumed`.
 *
 * Writing the trajectory never stops a review: an append that fails is logged once and the rest of
 * the trajectory is dropped (`broken`), as a review is worth more than its record.
 */
export class ReviewTrajectory {
  private broken = false;

  private constructor(
    private readonly store: EventStore | null,
    private readonly redactor: () => Redactor,
    private readonly onError: (error: unknown) => void,
  ) {}

  /** Opens the job's run (or continues it, for a retry), recording the job first. */
  static async open(input: {
    readonly storage: RunStorage;
    readonly jobId: string;
    readonly job: FixJob;
    readonly pull: {
      readonly number: number;
      readonly title: string;
      readonly body: string;
      readonly baseSha: string;
    };
    readonly model: string;
    readonly sandbox: string;
    readonly limits: Limits;
    readonly redactor: () => Redactor;
    readonly onError: (error: unknown) => void;
  }): Promise<ReviewTrajectory> {
    const { storage, jobId, job, redactor, onError } = input;
    try {
      await recordJob(storage, jobId, job);
      const existing = await storage.open(jobId);
      if (existing !== null) {
        const t = new ReviewTrajectory(existing, redactor, onError);
        await t.append({ kind: 'run_resumed', pid: process.pid });
        return t;
      }
      const base: BaseState = {
        schemaVersion: SCHEMA_VERSION,
        conversationId: jobId,
        createdAt: new Date().toISOString(),
        task: redactor().redactDeep({
          title: `Review of ${job.repo.owner}/${job.repo.name}#${input.pull.number}: ${input.pull.title}`,
          body: input.pull.body,
          instructions: job.instructions,
          source: `${job.repo.owner}/${job.repo.name}#${input.pull.number}`,
        }),
        // A review has no workspace: the base branch's tip (the merge base is in the `fetched` note).
        workspace: { path: '', baseCommit: input.pull.baseSha, baseTree: '' },
        model: input.model,
        sandbox: input.sandbox,
        testCommand: null,
        testCommandSource: null,
        limits: input.limits,
      };
      return new ReviewTrajectory(await storage.create(jobId, base), redactor, onError);
    } catch (error) {
      onError(error);
      return new ReviewTrajectory(null, redactor, onError);
    }
  }

  /** Whether events are being written (the run exists and no append failed). */
  get recording(): boolean {
    return this.store !== null && !this.broken;
  }

  async note(topic: EventOf<'note'>['topic'], text: string): Promise<void> {
    await this.append({ kind: 'note', topic, text });
  }

  async testRun(event: EventOf<'test_run'>): Promise<void> {
    const rest: Partial<EventOf<'test_run'>> = { ...event };
    delete rest.id;
    delete rest.ts;
    await this.append(rest as NewEvent);
  }

  /**
   * One model call: its answer with its tokens and cost, then each review tool it called with the
   * result the model was given (the same `tool_use_id` pairs them, as in a fix run).
   */
  async modelCall(
    response: ModelResponse,
    usd: number,
    latencyMs: number,
    promptTokensEstimate: number,
    results: readonly { readonly call: ToolUse; readonly content: string; readonly isError: boolean }[],
  ): Promise<void> {
    await this.append(modelResponseEvent(response, { usd, latencyMs, promptTokensEstimate }));
    for (const r of results) {
      await this.append({ kind: 'action', toolUseId: r.call.id, tool: r.call.name, input: r.call.input });
      await this.append({
        kind: 'observation',
        toolUseId: r.call.id,
        tool: r.call.name,
        isError: r.isError,
        content: r.content,
        durationMs: 0,
      });
    }
  }

  async instructions(ref: string, commit: string, files: readonly RepoInstruction[]): Promise<void> {
    if (files.length === 0) return;
    await this.note(
      'fetched',
      `The base branch's instructions for agents (${ref} at ${commit.slice(0, 12)}): ${files
        .map((f) => f.path)
        .join(', ')}.`,
    );
  }

  async outcome(
    outcome: OutcomeKind,
    reason: string,
    summary: string | null,
    limit?: 'monthly_usd',
  ): Promise<void> {
    await this.append({
      kind: 'outcome',
      outcome,
      reason,
      summary,
      diffStat: '',
      ...(limit === undefined ? {} : { limit }),
    });
  }

  private async append(event: NewEvent): Promise<void> {
    if (this.store === null || this.broken) return;
    try {
      await this.store.append(this.redactor().redactDeep(event));
    } catch (error) {
      this.broken = true;
      // A run that lost its job writes nothing more; anything else is said once.
      if (!(error instanceof EventStoreError && error.code === 'fenced')) this.onError(error);
    }
  }
}

export type ToolUse = Extract<ContentBlock, { type: 'tool_use' }>;
