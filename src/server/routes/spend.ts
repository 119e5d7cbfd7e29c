import type { SpendLedger } from '../../events/spend-ledger.js';
import { monthOf } from '../../events/spend-ledger.js';
import type { ServerContext } from '../context.js';
import { ApiError, type Route, type RouteRequest } from '../http.js';

/**
 * The month's model spend (`GET /api/spend?month=YYYY-MM`, default the current UTC month), as every
 * worker records it (events/spend-ledger.ts): per repository the caller can read, and per owner
 * with the deployment's limit for the admin (an owner's total covers repositories a user may not see).
 */
export function spendRoutes(ctx: ServerContext, ledger: SpendLedger | null): Route[] {
  return [{ method: 'GET', path: '/api/spend', handle: (r) => monthSpend(ctx, ledger, r) }];
}

async function monthSpend(
  ctx: ServerContext,
  ledger: SpendLedger | null,
  { req, res, url }: RouteRequest,
): Promise<unknown> {
  const p = ctx.requireAuth(req);
  const month = url.searchParams.get('month') ?? monthOf(new Date());
  if (!/^\d{4}-(0[1-9]|1[0-2])$/.test(month))
    throw new ApiError(400, 'bad_request', 'month must be YYYY-MM (a UTC calendar month)');
  if (ledger === null)
    throw new ApiError(503, 'unavailable', 'no spend is kept here (no Redis or run store)');
  let spend;
  try {
    spend = await ledger.monthSpend(month);
  } catch (error) {
    ctx.log.warn({ err: error }, 'month spend could not be read');
    throw new ApiError(503, 'unavailable', 'the month spend could not be read (is the store up?)');
  }
  const repositories = [];
  for (const r of spend.repositories) {
    if ((await ctx.access(p, r.repo, null)) !== 'none') repositories.push(r);
  }
  const admin = p.kind === 'admin';
  return ctx.json(res, 200, {
    month,
    ownerLimitUsd: ctx.options.monthlyUsd ?? null,
    repositories,
    ...(admin ? { owners: spend.owners } : {}),
  });
}
