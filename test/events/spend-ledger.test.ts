import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import pg from 'pg';
import { PgRunStore } from '../../src/events/pg-event-store.js';
import { PgSpendLedger, SETTLED_KEPT_DAYS } from '../../src/events/pg-spend-ledger.js';
import { RedisSpendLedger } from '../../src/events/redis-spend-ledger.js';
import {
  monthlyBudget,
  monthOf,
  spendScope,
  startRefusal,
  toMicros,
  type MonthlyLimits,
  type SpendLedger,
} from '../../src/events/spend-ledger.js';
import { postgresSkipReason, startPostgres, type TestPostgres } from '../support/postgres-server.js';
import { redisSkipReason, startRedis, type TestRedis } from '../support/redis-server.js';

const NOW = new Date('2026-12-05T10:00:00Z');
const limits = (ownerUsd: number | null, repoUsd: number | null = null): MonthlyLimits => ({
  ownerUsd,
  repoUsd,
  ownerSource: 'ISSUE_AGENT_MONTHLY_USD',
  repoSource: 'budgets.monthlyUsd',
});

/**
 * The reservation logic, the same for both backends: what one ledger promises every worker. Each
 * `ledger()` is another connection (another worker) to the same store; each test has owners of its own.
 */
function ledgerContract(
  name: string,
  open: () => Promise<{ ledger: () => SpendLedger; close(): Promise<void> }>,
): void {
  describe(name, { timeout: 120_000 }, () => {
    let backend: Awaited<ReturnType<typeof open>>;
    let n = 0;
    const owner = (): string => `owner${++n}`;
    before(async () => {
      backend = await open();
    });
    after(async () => {
      await backend.close();
    });

    it('holds a call while spend and holds leave room, records what it cost, and refuses at the limit with the figures', async () => {
      const ledger = backend.ledger();
      const scope = spendScope(owner(), 'Calc');
      const budget = monthlyBudget(ledger, scope, limits(1), { now: () => NOW, maxWaitMs: 0 });
      const a = await budget.reserve(0.4);
      assert.ok(a.ok);
      const b = await budget.reserve(0.4);
      assert.ok(b.ok);
      // 0.8 held: 0.4 more would pass $1, and a hold that cannot wait is refused at once.
      const c = await budget.reserve(0.4);
      assert.ok(!c.ok);
      assert.equal(c.refusal.scope, 'owner');
      await a.settle(0.1);
      await b.settle(0.2);
      const spend = await ledger.monthSpend(monthOf(NOW));
      assert.deepEqual(spend.owners.find((o) => o.owner === scope.owner)?.usd, 0.3);
      assert.deepEqual(spend.repositories.find((r) => r.repo === scope.repo)?.usd, 0.3);
      const d = await budget.reserve(0.7);
      assert.ok(d.ok);
      await d.settle(0.69);
      const e = await budget.reserve(0.02);
      assert.ok(!e.ok);
      assert.deepEqual(
        { scope: e.refusal.scope, spent: e.refusal.spentUsd, cap: e.refusal.capUsd, month: e.refusal.month },
        { scope: 'owner', spent: 0.99, cap: 1, month: '2026-12' },
      );
      // Months are UTC calendar months: the next one starts empty.
      const next = monthlyBudget(ledger, scope, limits(1), { now: () => new Date('2027-01-01T00:00:00Z') });
      const f = await next.reserve(0.5);
      assert.ok(f.ok);
      await f.settle(0);
    });

    it('a run waits while other runs hold the room its spend leaves, and goes on when they settle', async () => {
      const ledger = backend.ledger();
      const scope = spendScope(owner(), 'calc');
      const budget = monthlyBudget(ledger, scope, limits(1), { now: () => NOW, pollMs: 20 });
      const first = await budget.reserve(0.6);
      assert.ok(first.ok);
      const waiting = budget.reserve(0.6);
      const state = { done: false };
      void waiting.then(() => {
        state.done = true;
      });
      // The second is 'busy' (0.6 held), not refused: it waits for the first to settle.
      for (let i = 0; i < 3; i++) await ledger.monthSpend(monthOf(NOW));
      assert.equal(state.done, false);
      await first.settle(0.1);
      const second = await waiting;
      assert.ok(second.ok, 'granted once the first hold became its real cost');
      await second.settle(0.5);
    });

    it('the repository limit binds below the owner limit, and a hold past its life no longer counts', async () => {
      const ledger = backend.ledger();
      const o = owner();
      const calc = spendScope(o, 'calc');
      const other = spendScope(o, 'other');
      let clock = NOW;
      const opts = { now: () => clock, maxWaitMs: 0, ttlMs: 60_000 };
      const small = monthlyBudget(ledger, calc, limits(10, 0.5), opts);
      const a = await small.reserve(0.4);
      assert.ok(a.ok);
      const b = await small.reserve(0.4);
      assert.ok(!b.ok);
      assert.equal(b.refusal.scope, 'repository');
      assert.equal(b.refusal.name, `${o}/calc`);
      // The other repository of the owner is held to the owner's limit only.
      const wide = monthlyBudget(ledger, other, limits(10), opts);
      const c = await wide.reserve(5);
      assert.ok(c.ok);
      await c.settle(5);
      // `a`'s worker died: after a minute its hold is gone and the room is back.
      clock = new Date(NOW.getTime() + 61_000);
      const d = await small.reserve(0.4);
      assert.ok(d.ok);
      await d.settle(0.4);
      assert.equal(await startRefusal(ledger, calc, limits(10, 0.5), 0.05, clock), null);
      const refused = await startRefusal(ledger, calc, limits(10, 0.5), 0.2, clock);
      assert.deepEqual(refused === null ? null : { scope: refused.scope, spent: refused.spentUsd }, {
        scope: 'repository',
        spent: 0.4,
      });
    });

    it('a settle retried (its reply lost, or resent after a connection drop) counts the spend once, also for a hold that expired and was reaped', async () => {
      const ledger = backend.ledger();
      const scope = spendScope(owner(), 'calc');
      let clock = NOW;
      const budget = monthlyBudget(ledger, scope, limits(1), {
        now: () => clock,
        maxWaitMs: 0,
        ttlMs: 60_000,
      });
      const spent = async (): Promise<number> =>
        toMicros(
          (await ledger.monthSpend(monthOf(NOW))).owners.find((o) => o.owner === scope.owner)?.usd ?? 0,
        );
      const a = await budget.reserve(0.3);
      assert.ok(a.ok);
      await a.settle(0.2);
      await a.settle(0.2);
      assert.equal(await spent(), toMicros(0.2));
      // A retry racing the first attempt, on another connection: still once.
      const month = monthOf(NOW);
      const holdId = `retried-${scope.owner}`;
      const hold = { month, scope, ownerCap: toMicros(1), repoCap: null, holdId, nowMs: NOW.getTime() };
      assert.equal((await ledger.hold({ ...hold, micros: toMicros(0.3), ttlMs: 60_000 })).kind, 'held');
      const other = backend.ledger();
      await Promise.all([
        ledger.settle(month, scope, holdId, toMicros(0.1)),
        other.settle(month, scope, holdId, toMicros(0.1)),
      ]);
      assert.equal(await spent(), toMicros(0.3));
      // A call that outlived its hold: the hold expired and another run's hold reaped it; the call's
      // cost is still counted, once, however often its settle is sent.
      const c = await budget.reserve(0.3);
      assert.ok(c.ok);
      clock = new Date(NOW.getTime() + 61_000);
      const d = await budget.reserve(0.6);
      assert.ok(d.ok, 'the expired hold no longer takes room');
      await c.settle(0.25);
      await c.settle(0.25);
      await d.settle(0.05);
      await d.settle(0.05);
      assert.equal(await spent(), toMicros(0.6));
      const spend = await ledger.monthSpend(monthOf(NOW));
      assert.equal(toMicros(spend.repositories.find((r) => r.repo === scope.repo)?.usd ?? 0), toMicros(0.6));
    });

    it('many holds at once from separate connections never take more than the limit', async () => {
      const o = owner();
      const ledgers: SpendLedger[] = [backend.ledger(), backend.ledger(), backend.ledger(), backend.ledger()];
      const scope = spendScope(o, 'calc');
      const results = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          monthlyBudget(ledgers[i % 4] ?? backend.ledger(), scope, limits(1), {
            now: () => NOW,
            maxWaitMs: 0,
          }).reserve(0.07),
        ),
      );
      const granted = results.filter((r) => r.ok);
      // 14 × 0.07 = 0.98 ≤ 1 < 15 × 0.07: exactly 14 are granted, whatever the interleaving.
      assert.equal(granted.length, 14);
      await Promise.all(granted.map((r) => r.settle(0.07)));
      const spend = await backend.ledger().monthSpend(monthOf(NOW));
      const total = spend.owners.find((x) => x.owner === o)?.usd ?? 0;
      assert.equal(toMicros(total), toMicros(0.98));
    });
  });
}

const redisSkip = redisSkipReason();
if (redisSkip === false) {
  ledgerContract('month spend ledger on Redis', async () => {
    const server: TestRedis = await startRedis();
    const clients: Redis[] = [];
    return {
      ledger: () => {
        const c = new Redis(server.url, { maxRetriesPerRequest: 3 });
        clients.push(c);
        // One prefix: every ledger of the test is another worker of the same deployment.
        return new RedisSpendLedger(c, 'spend-test');
      },
      close: async () => {
        for (const c of clients) c.disconnect();
        await server.stop();
      },
    };
  });
  it("on Redis, the settled hold ids are in the month's key space and expire a week after the month ends", async () => {
    const server = await startRedis();
    const client = new Redis(server.url);
    try {
      const ledger = new RedisSpendLedger(client, 'spend-expiry');
      const scope = spendScope('acme', 'calc');
      const base = { scope, ownerCap: null, repoCap: null, micros: 1000, ttlMs: 60_000 };
      for (const [month, nowMs] of [
        ['2026-12', NOW.getTime()],
        ['2026-02', Date.now()],
      ] as const) {
        const holdId = `h-${month}`;
        assert.equal((await ledger.hold({ ...base, month, holdId, nowMs })).kind, 'held');
        await ledger.settle(month, scope, holdId, 1000);
        const key = `spend-expiry:spend:{acme}:${month}:settled`;
        assert.deepEqual(await client.smembers(key), [holdId]);
        // PTTL, not PEXPIRETIME: that needs Redis 7, and CI's may be older.
        const expiresAt = Date.now() + (await client.pttl(key));
        // A month already over (or a clock behind) keeps them a week from now.
        const from = Math.max(Date.UTC(Number(month.slice(0, 4)), Number(month.slice(5)), 1), Date.now());
        assert.ok(Math.abs(expiresAt - (from + 7 * 24 * 3600_000)) < 60_000, `${month}: ${expiresAt}`);
      }
    } finally {
      client.disconnect();
      await server.stop();
    }
  });
} else {
  void it.skip(`month spend ledger on Redis: ${redisSkip}`);
}

const pgSkip = postgresSkipReason();
if (pgSkip === false) {
  ledgerContract('month spend ledger on PostgreSQL', async () => {
    const server: TestPostgres = await startPostgres();
    // Applies the migrations (the spend tables among them) as any process of the App does.
    const store = await PgRunStore.connect(server.url);
    const pools: pg.Pool[] = [];
    return {
      ledger: () => {
        const pool = new pg.Pool({ connectionString: server.url, max: 4 });
        // As the run store's pool: an idle client dropped by the server stopping is not a failure.
        pool.on('error', () => undefined);
        pools.push(pool);
        return new PgSpendLedger(pool);
      },
      close: async () => {
        for (const p of pools) await p.end();
        await store.close();
        await server.stop();
      },
    };
  });
  it('on PostgreSQL, a settled hold id is kept a week against a retried settle, then deleted as others settle', async () => {
    const server = await startPostgres();
    const store = await PgRunStore.connect(server.url);
    try {
      const ledger = new PgSpendLedger(store.pool);
      const scope = spendScope('acme', 'calc');
      const base = { scope, ownerCap: null, repoCap: null, micros: 1000, ttlMs: 60_000, month: '2026-12' };
      const settled = async (id: string): Promise<boolean> =>
        (await store.pool.query('SELECT 1 FROM ia_spend_settled WHERE hold_id = $1', [id])).rowCount === 1;
      for (const id of ['old', 'recent']) {
        assert.equal((await ledger.hold({ ...base, holdId: id, nowMs: NOW.getTime() })).kind, 'held');
        await ledger.settle('2026-12', scope, id, 1000);
      }
      await store.pool.query(
        `UPDATE ia_spend_settled SET settled_at = now() - interval '${SETTLED_KEPT_DAYS + 1} days' WHERE hold_id = 'old'`,
      );
      await store.pool.query(
        `UPDATE ia_spend_settled SET settled_at = now() - interval '${SETTLED_KEPT_DAYS - 1} days' WHERE hold_id = 'recent'`,
      );
      assert.equal((await ledger.hold({ ...base, holdId: 'next', nowMs: NOW.getTime() })).kind, 'held');
      await ledger.settle('2026-12', scope, 'next', 1000);
      assert.equal(await settled('old'), false, 'past the week: deleted');
      assert.equal(await settled('recent'), true, 'within the week: kept');
      assert.equal(await settled('next'), true);
      // A retry of the recent settle still counts nothing more.
      await ledger.settle('2026-12', scope, 'recent', 1000);
      const spend = await ledger.monthSpend('2026-12');
      assert.equal(toMicros(spend.owners.find((o) => o.owner === 'acme')?.usd ?? 0), 3000);
    } finally {
      await store.close();
      await server.stop();
    }
  });
} else {
  void it.skip(`month spend ledger on PostgreSQL: ${pgSkip}`);
}
