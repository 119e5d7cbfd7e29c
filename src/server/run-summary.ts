/*
 * The run summary the API sends, shared by the server and the browser client (type-only, no
 * imports: the client's project has no Node types).
 */

export type RunPhase = 'queued' | 'active' | 'finished';

/** One run (one fix job) as the API lists it. See API.md. */
export interface RunSummary {
  readonly id: string;
  readonly repo: string;
  readonly issue: number;
  readonly pull: number | null;
  readonly kind: 'fix-issue' | 'follow-up' | 'evaluate' | 'review' | 'verify';
  readonly title: string;
  readonly state: RunPhase;
  readonly outcome: string | null;
  readonly steps: number;
  readonly tokens: number;
  readonly costUsd: number;
  readonly durationMs: number | null;
  readonly queuedAt: string | null;
  readonly startedAt: string | null;
  readonly finishedAt: string | null;
  readonly lastEventId: number;
  readonly prUrl: string | null;
  /** An outsider's request a maintainer approved (`@agent approve`): who approved it, else null. */
  readonly approvedBy: string | null;
  /** Attempt `number` of `of` of the best-of-N job `jobId`; null for a job of one attempt. */
  readonly attempt: { readonly number: number; readonly of: number; readonly jobId: string } | null;
  /**
   * An automatic round fixing the App's PR's red CI: round `round` of at most `of`, the failing
   * checks it fixes, and those that fail on the base branch too (pre-existing, not fixed); else null.
   */
  readonly ciRound: {
    readonly round: number;
    readonly of: number;
    readonly checks: readonly string[];
    readonly preExisting: readonly string[];
  } | null;
}
