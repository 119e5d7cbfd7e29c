import { randomBytes } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type { SpendBudget, SpendRefusal, SpendReservation } from '../agent/spend-budget.js';

/**
 * The month's model spend per repository owner and per repository, kept where every worker of a
 * deployment reads and writes it (Redis beside the queue, or the PostgreSQL run store), in whole
 * micro-dollars so that adding never drifts. A month is a UTC calendar month, `YYYY-MM`.
 *
 * Holds make the limits safe for concurrent runs: `hold` grants an amount only when the month's
 * spend plus every live hold plus the amount stays within each limit, in one atomic step (a Lua
 * script; a row lock); `settle` turns a hold into spend. A hold whose worker died expires after its
 * time to live, so a crash never lowers a limit for longer than that.
 */
export interface SpendLedger {
  readonly kind: 'redis' | 'postgres';
  hold(request: HoldRequest): Promise<HoldAnswer>;
  /**
   * Ends hold `holdId` (if still there: one that expired was reaped) and adds `micros` to the
   * owner's and the repository's month. Idempotent per hold id: a settle sent again (its reply lost
   * after the store applied it, a retry after a dropped connection) counts the spend once.
   */
  settle(month: string, scope: SpendScope, holdId: string, micros: number): Promise<void>;
  /** Every owner's and repository's spend in `month` (the run server's view). */
  monthSpend(month: string): Promise<MonthSpend>;
  close(): Promise<void>;
}

/** Whose spend: the owner's login and `owner/name`, both lower-cased (GitHub names ignore case). */
export interface SpendScope {
  readonly owner: string;
  readonly repo: string;
}

export interface HoldRequest {
  readonly month: string;
  readonly scope: SpendScope;
  /** Limits in micro-dollars; null: none at that level. */
  readonly ownerCap: number | null;
  readonly repoCap: number | null;
  readonly holdId: string;
  readonly micros: number;
  readonly nowMs: number;
  readonly ttlMs: number;
}

/**
 * `held`: granted. `full`: the spend alone leaves no room at `scope`'s limit. `busy`: the spend
 * leaves room, but other runs' holds take it now (they end within a model call).
 */
export type HoldAnswer =
  | { readonly kind: 'held' }
  | {
      readonly kind: 'full' | 'busy';
      readonly scope: 'owner' | 'repository';
      readonly spentMicros: number;
      readonly heldMicros: number;
    };

export interface MonthSpend {
  readonly month: string;
  readonly owners: readonly { readonly owner: string; readonly usd: number }[];
  readonly repositories: readonly { readonly repo: string; readonly usd: number }[];
}

/** How long a hold lives when its worker never settles it (it died mid-call). */
export const HOLD_TTL_MS = 15 * 60_000;

export function toMicros(usd: number): number {
  return Math.max(0, Math.ceil(usd * 1_000_000 - 1e-6));
}

export function fromMicros(micros: number): number {
  return micros / 1_000_000;
}

/** The UTC month of `at`, `YYYY-MM`. */
export function monthOf(at: Date): string {
  return at.toISOString().slice(0, 7);
}

export function spendScope(owner: string, name: string): SpendScope {
  return { owner: owner.toLowerCase(), repo: `${owner}/${name}`.toLowerCase() };
}

/** The limits one job's runs are held to, with where each comes from (for the refusal's words). */
export interface MonthlyLimits {
  readonly ownerUsd: number | null;
  readonly repoUsd: number | null;
  readonly ownerSource: string;
  readonly repoSource: string;
}

export interface MonthlyBudgetOptions {
  readonly now?: () => Date;
  /** How often a run waiting for other runs' holds asks again (default 250 ms). */
  readonly pollMs?: number;
  /** The longest a run waits for room held by others before it is refused (default a hold's life). */
  readonly maxWaitMs?: number;
  readonly ttlMs?: number;
}

/**
 * The agent core's SpendBudget over a ledger, for one job's repository: a call waits while other
 * runs' holds take the room its spend leaves (they settle within a call, or expire), and is refused
 * once the spend itself leaves none.
 */
export function monthlyBudget(
  ledger: SpendLedger,
  scope: SpendScope,
  limits: MonthlyLimits,
  options: MonthlyBudgetOptions = {},
): SpendBudget {
  const now = options.now ?? (() => new Date());
  const pollMs = options.pollMs ?? 250;
  const ttlMs = options.ttlMs ?? HOLD_TTL_MS;
  const maxWaitMs = options.maxWaitMs ?? ttlMs;
  return {
    reserve: async (usd: number, signal?: AbortSignal): Promise<SpendReservation> => {
      const holdId = randomBytes(8).toString('hex');
      const started = Date.now();
      for (;;) {
        const month = monthOf(now());
        const answer = await ledger.hold({
          month,
          scope,
          ownerCap: limits.ownerUsd === null ? null : toMicros(limits.ownerUsd),
          repoCap: limits.repoUsd === null ? null : toMicros(limits.repoUsd),
          holdId,
          micros: toMicros(usd),
          nowMs: now().getTime(),
          ttlMs,
        });
        if (answer.kind === 'held') {
          return { ok: true, settle: (cost) => ledger.settle(month, scope, holdId, toMicros(cost)) };
        }
        const waitable = answer.kind === 'busy' && Date.now() - started < maxWaitMs;
        if (!waitable || signal?.aborted === true) {
          return { ok: false, refusal: refusalOf(answer, scope, limits, month) };
        }
        await delay(pollMs, undefined, signal === undefined ? {} : { signal }).catch(() => undefined);
      }
    },
  };
}

function refusalOf(
  answer: Exclude<HoldAnswer, { kind: 'held' }>,
  scope: SpendScope,
  limits: MonthlyLimits,
  month: string,
): SpendRefusal {
  const owner = answer.scope === 'owner';
  return {
    scope: answer.scope,
    name: owner ? scope.owner : scope.repo,
    month,
    // Others' holds count as spent to a run refused while they last: that is the room it lacked.
    spentUsd: fromMicros(answer.spentMicros + (answer.kind === 'busy' ? answer.heldMicros : 0)),
    capUsd: (owner ? limits.ownerUsd : limits.repoUsd) ?? 0,
    source: owner ? limits.ownerSource : limits.repoSource,
  };
}

/**
 * Whether a job may start: the month's spend (without other runs' holds, which end soon) leaves room
 * for one model call at its most (`callUsd`) under every limit. The refusal otherwise.
 */
export async function startRefusal(
  ledger: SpendLedger,
  scope: SpendScope,
  limits: MonthlyLimits,
  callUsd: number,
  now: Date = new Date(),
): Promise<SpendRefusal | null> {
  if (limits.ownerUsd === null && limits.repoUsd === null) return null;
  const month = monthOf(now);
  const holdId = `start-${randomBytes(8).toString('hex')}`;
  const answer = await ledger.hold({
    month,
    scope,
    ownerCap: limits.ownerUsd === null ? null : toMicros(limits.ownerUsd),
    repoCap: limits.repoUsd === null ? null : toMicros(limits.repoUsd),
    holdId,
    micros: toMicros(callUsd),
    nowMs: now.getTime(),
    ttlMs: 60_000,
  });
  if (answer.kind === 'held') {
    await ledger.settle(month, scope, holdId, 0);
    return null;
  }
  return answer.kind === 'full' ? refusalOf(answer, scope, limits, month) : null;
}
