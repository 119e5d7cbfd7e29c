import type pg from 'pg';
import { retrying, withClient } from './pg-event-store.js';
import type { HoldAnswer, HoldRequest, MonthSpend, SpendLedger, SpendScope } from './spend-ledger.js';
import { fromMicros } from './spend-ledger.js';

/** How long a settled hold's id is kept against a retried settle (retries come within minutes). */
export const SETTLED_KEPT_DAYS = 7;

/** The owner's total row of a month has this as its repository. */
const OWNER_ROW = '';

/**
 * The ledger in the PostgreSQL run store (tables `ia_spend` and `ia_spend_holds`, migration 3 in
 * pg-event-store.ts). A hold runs in one transaction that first locks the owner's row of the month
 * (then the repository's, always in that order): holds of one owner are serialized, so the check
 * and the insert of a hold are one step for every worker.
 */
export class PgSpendLedger implements SpendLedger {
  readonly kind = 'postgres';
  constructor(
    private readonly pool: pg.Pool,
    /** Ends the pool on close (a ledger that opened its own). */
    private readonly ownsPool = false,
  ) {}

  hold(r: HoldRequest): Promise<HoldAnswer> {
    return retrying(() => this.holdOnce(r));
  }

  private async holdOnce(r: HoldRequest): Promise<HoldAnswer> {
    return withClient(this.pool, async (client) => {
      try {
        await client.query('BEGIN');
        await client.query(
          `INSERT INTO ia_spend (month, owner, repo) VALUES ($1, $2, $3), ($1, $2, $4)
         ON CONFLICT DO NOTHING`,
          [r.month, r.scope.owner, OWNER_ROW, r.scope.repo],
        );
        const rows = await client.query<{ repo: string; micros: string }>(
          `SELECT repo, micros FROM ia_spend WHERE month = $1 AND owner = $2 AND repo IN ($3, $4)
         ORDER BY repo FOR UPDATE`,
          [r.month, r.scope.owner, OWNER_ROW, r.scope.repo],
        );
        await client.query(
          'DELETE FROM ia_spend_holds WHERE month = $1 AND owner = $2 AND expires_ms <= $3',
          [r.month, r.scope.owner, r.nowMs],
        );
        const held = await client.query<{ owner: string; repo: string }>(
          `SELECT coalesce(sum(micros), 0)::text AS owner,
                coalesce(sum(micros) FILTER (WHERE repo = $3), 0)::text AS repo
         FROM ia_spend_holds WHERE month = $1 AND owner = $2`,
          [r.month, r.scope.owner, r.scope.repo],
        );
        const spentOwner = Number(rows.rows.find((x) => x.repo === OWNER_ROW)?.micros ?? 0);
        const spentRepo = Number(rows.rows.find((x) => x.repo === r.scope.repo)?.micros ?? 0);
        const heldOwner = Number(held.rows[0]?.owner ?? 0);
        const heldRepo = Number(held.rows[0]?.repo ?? 0);
        const answer = decide(r, { spentOwner, spentRepo, heldOwner, heldRepo });
        if (answer.kind === 'held') {
          await client.query(
            `INSERT INTO ia_spend_holds (hold_id, month, owner, repo, micros, expires_ms)
           VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (hold_id) DO NOTHING`,
            [r.holdId, r.month, r.scope.owner, r.scope.repo, r.micros, r.nowMs + r.ttlMs],
          );
        }
        await client.query('COMMIT');
        return answer;
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw error;
      }
    });
  }

  settle(month: string, scope: SpendScope, holdId: string, micros: number): Promise<void> {
    return retrying(async () => {
      return withClient(this.pool, async (client) => {
        try {
          await client.query('BEGIN');
          const gone = await client.query('DELETE FROM ia_spend_holds WHERE hold_id = $1', [holdId]);
          // A settle retried after its commit finds no hold: it was counted already.
          const counted = gone.rowCount === 0 && micros > 0 && (await this.wasSettled(client, holdId));
          if (micros > 0 && !counted) {
            await client.query(
              `INSERT INTO ia_spend (month, owner, repo, micros) VALUES ($1, $2, $3, $5), ($1, $2, $4, $5)
             ON CONFLICT (month, owner, repo) DO UPDATE SET micros = ia_spend.micros + EXCLUDED.micros`,
              [month, scope.owner, OWNER_ROW, scope.repo, micros],
            );
            await client.query(
              'INSERT INTO ia_spend_settled (hold_id) VALUES ($1) ON CONFLICT (hold_id) DO NOTHING',
              [holdId],
            );
          }
          await client.query(
            `DELETE FROM ia_spend_settled WHERE settled_at < now() - interval '${SETTLED_KEPT_DAYS} days'`,
          );
          await client.query('COMMIT');
        } catch (error) {
          await client.query('ROLLBACK').catch(() => undefined);
          throw error;
        }
      });
    });
  }

  private async wasSettled(client: pg.PoolClient, holdId: string): Promise<boolean> {
    const r = await client.query('SELECT 1 FROM ia_spend_settled WHERE hold_id = $1', [holdId]);
    return r.rowCount !== 0;
  }

  async monthSpend(month: string): Promise<MonthSpend> {
    const r = await retrying(() =>
      this.pool.query<{ owner: string; repo: string; micros: string }>(
        'SELECT owner, repo, micros::text AS micros FROM ia_spend WHERE month = $1 AND micros > 0 ORDER BY owner, repo',
        [month],
      ),
    );
    return {
      month,
      owners: r.rows
        .filter((x) => x.repo === OWNER_ROW)
        .map((x) => ({ owner: x.owner, usd: fromMicros(Number(x.micros)) })),
      repositories: r.rows
        .filter((x) => x.repo !== OWNER_ROW)
        .map((x) => ({ repo: x.repo, usd: fromMicros(Number(x.micros)) })),
    };
  }

  async close(): Promise<void> {
    if (this.ownsPool) await this.pool.end();
  }
}

/** The same decision as the Redis script's: the spend alone (`full`), then with live holds (`busy`). */
function decide(
  r: HoldRequest,
  n: { spentOwner: number; spentRepo: number; heldOwner: number; heldRepo: number },
): HoldAnswer {
  const over = (cap: number | null, x: number): boolean => cap !== null && x + r.micros > cap;
  if (over(r.ownerCap, n.spentOwner))
    return { kind: 'full', scope: 'owner', spentMicros: n.spentOwner, heldMicros: n.heldOwner };
  if (over(r.repoCap, n.spentRepo))
    return { kind: 'full', scope: 'repository', spentMicros: n.spentRepo, heldMicros: n.heldRepo };
  if (over(r.ownerCap, n.spentOwner + n.heldOwner))
    return { kind: 'busy', scope: 'owner', spentMicros: n.spentOwner, heldMicros: n.heldOwner };
  if (over(r.repoCap, n.spentRepo + n.heldRepo))
    return { kind: 'busy', scope: 'repository', spentMicros: n.spentRepo, heldMicros: n.heldRepo };
  return { kind: 'held' };
}
