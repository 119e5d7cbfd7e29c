import type { Limits } from '../events/schema.js';
import type { ModelPrice } from '../model/pricing.js';
import { StopRun, throwIfCancelled } from './run-stop.js';

/**
 * The month's spending limits a run shares with every other run of its repository's owner, on any
 * worker (the App's `ISSUE_AGENT_MONTHLY_USD` and the repository's `budgets.monthlyUsd`), as the
 * loop sees them: before each model call the run holds the most that call can cost, and after it
 * the hold becomes the call's real cost. A hold is granted only while the month's spend plus every
 * run's holds plus this one stays within the limits, so runs that call the model at the same time
 * can never together pass a limit by more than their estimates were short.
 *
 * Where the spend is kept (Redis, PostgreSQL) is the host's business: the agent core sees this port.
 */
export interface SpendBudget {
  /**
   * Holds `usd` for one model call; may wait while other runs' holds leave no room but the spend
   * itself does (they end within a call). A refusal says which limit and the month's figures.
   */
  reserve(usd: number, signal?: AbortSignal): Promise<SpendReservation>;
}

export type SpendReservation =
  | {
      readonly ok: true;
      /** Records what the call cost (0 when it failed before an answer) and ends the hold. */
      settle(usd: number): Promise<void>;
    }
  | { readonly ok: false; readonly refusal: SpendRefusal };

/** Why a run may not make its next model call: one month's limit, its figures, and what set it. */
export interface SpendRefusal {
  readonly scope: 'owner' | 'repository';
  /** The owner's login, or `owner/name`. */
  readonly name: string;
  /** UTC month, `YYYY-MM`. */
  readonly month: string;
  readonly spentUsd: number;
  readonly capUsd: number;
  /** Where the limit comes from, in words (`ISSUE_AGENT_MONTHLY_USD`, `budgets.monthlyUsd in …`). */
  readonly source: string;
}

/**
 * The most one model call can cost: a whole context window of input (at the dearer of the input
 * and cache-write prices) and the most output tokens. 0 for a model without a price (its calls are
 * counted as free, as the per-job `maxUsd` counts them).
 */
export function worstCallUsd(
  price: ModelPrice | null,
  limits: Pick<Limits, 'contextTokens' | 'maxOutputTokens'>,
): number {
  if (price === null) return 0;
  return (
    (limits.contextTokens * Math.max(price.input, price.cacheWrite) + limits.maxOutputTokens * price.output) /
    1_000_000
  );
}

/** The sentence a refused run (or job) gives: which limit, the month's spend and the limit. */
export function refusalReason(r: SpendRefusal, callUsd: number): string {
  const whose = r.scope === 'owner' ? `of ${r.name}` : `of the repository ${r.name}`;
  return (
    `the monthly spending limit ${whose} ($${r.capUsd.toFixed(2)}, ${r.source}) was reached: ` +
    `$${r.spentUsd.toFixed(2)} spent in ${r.month} (UTC), and one more model call may cost up to $${callUsd.toFixed(2)}`
  );
}

/** A granted hold, to settle after the call whatever happened; or why none was granted. */
export type CallHold =
  { readonly ok: true; settle(usd: number): Promise<void> } | { readonly ok: false; readonly reason: string };

/**
 * Holds a call's worst cost (`callUsd`), or says why the month's limits refuse it (refusalReason).
 * A hold that needs no budget settles to nothing. A stop that came while waiting for room wins over
 * the refusal or the hold: the hold is ended and the cancel thrown.
 */
export async function holdCall(
  budget: SpendBudget | undefined,
  callUsd: number,
  signal: AbortSignal | undefined,
): Promise<CallHold> {
  if (budget === undefined) return { ok: true, settle: () => Promise.resolve() };
  const r = await budget.reserve(callUsd, signal);
  if (signal?.aborted === true) {
    if (r.ok) await r.settle(0);
    throwIfCancelled(signal);
  }
  return r.ok ? r : { ok: false, reason: refusalReason(r.refusal, callUsd) };
}

/**
 * Holds the next call's worst cost, or stops the run (`budget_exhausted`, limit `monthly_usd`).
 * Null without a budget. The caller settles the hold after the call, whatever happened.
 */
export async function holdForCall(
  budget: SpendBudget | undefined,
  callUsd: number,
  signal: AbortSignal | undefined,
): Promise<{ settle(usd: number): Promise<void> } | null> {
  if (budget === undefined) return null;
  const r = await holdCall(budget, callUsd, signal);
  if (r.ok) return r;
  throw new StopRun({ outcome: 'budget_exhausted', limit: 'monthly_usd', reason: r.reason });
}
