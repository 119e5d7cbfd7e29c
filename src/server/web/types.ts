/**
 * The shapes the server's JSON API sends (src/server/API.md). Event and base-state types come from
 * the event schemas themselves (type-only imports: nothing of zod reaches the bundle).
 */
import type { AgentEvent, BaseState, EventOf } from '../../events/schema.js';
import type { RunState } from '../../events/reduce-state.js';

export type { AgentEvent, BaseState, EventOf, RunState };

export type RunStateName = 'queued' | 'active' | 'finished';

export interface RunSummary {
  readonly id: string;
  /** owner/name */
  readonly repo: string;
  readonly issue: number;
  readonly pull: number | null;
  readonly kind: 'fix-issue' | 'follow-up';
  readonly title: string;
  readonly state: RunStateName;
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
}

export interface Me {
  readonly login: string | null;
  readonly admin: boolean;
  /** Whether "Sign in with GitHub" is configured on the server. */
  readonly githubSignIn?: boolean;
}

export interface RunsPage {
  readonly runs: readonly RunSummary[];
  readonly next: string | null;
}

export interface RunDetail {
  readonly run: RunSummary;
  readonly base: BaseState | null;
  readonly state: RunState | null;
}

export interface EventsPage {
  readonly events: readonly AgentEvent[];
  readonly next: number | null;
}
