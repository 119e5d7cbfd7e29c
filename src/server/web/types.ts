/**
 * The shapes the server's JSON API sends (src/server/API.md). Event and base-state types come from
 * the event schemas themselves (type-only imports: nothing of zod reaches the bundle).
 */
import type { AgentEvent, BaseState, EventOf } from '../../events/schema.js';
import type { RunState } from '../../events/reduce-state.js';

export type { AgentEvent, BaseState, EventOf, RunState };

import type { RunPhase, RunSummary } from '../run-summary.js';

export type { RunSummary };
export type RunStateName = RunPhase;

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
