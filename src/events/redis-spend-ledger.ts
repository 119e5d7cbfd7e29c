import type { Redis } from 'ioredis';
import type { HoldAnswer, HoldRequest, MonthSpend, SpendLedger, SpendScope } from './spend-ledger.js';
import { fromMicros } from './spend-ledger.js';

/** Spend keys are kept for a little over a year, so the run server can show earlier months. */
const KEEP_SECONDS = 400 * 24 * 3600;

/**
 * KEYS: the owner's month hash (`total` and `repo:<owner/name>`, micro-dollars), its holds hash
 * (hold id → `micros:expiresAtMs:repoField`). ARGV: repoField, micros, ownerCap, repoCap (-1: none),
 * nowMs, expiresAtMs, holdId, keepSeconds. Expired holds are dropped first; then the limits are
 * checked against the spend alone (`full`) and with the live holds (`busy`); else the hold is added.
 */
const HOLD_SCRIPT = `
local now = tonumber(ARGV[5])
local holds = redis.call('HGETALL', KEYS[2])
local heldOwner, heldRepo = 0, 0
for i = 1, #holds, 2 do
  local micros, expires, field = string.match(holds[i + 1], '^(%d+):(%d+):(.*)$')
  if micros == nil or tonumber(expires) <= now then
    redis.call('HDEL', KEYS[2], holds[i])
  else
    heldOwner = heldOwner + tonumber(micros)
    if field == ARGV[1] then heldRepo = heldRepo + tonumber(micros) end
  end
end
local spentOwner = tonumber(redis.call('HGET', KEYS[1], 'total') or '0')
local spentRepo = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
local amount = tonumber(ARGV[2])
local ownerCap, repoCap = tonumber(ARGV[3]), tonumber(ARGV[4])
if ownerCap >= 0 and spentOwner + amount > ownerCap then return {'full', 'owner', spentOwner, heldOwner} end
if repoCap >= 0 and spentRepo + amount > repoCap then return {'full', 'repository', spentRepo, heldRepo} end
if ownerCap >= 0 and spentOwner + heldOwner + amount > ownerCap then return {'busy', 'owner', spentOwner, heldOwner} end
if repoCap >= 0 and spentRepo + heldRepo + amount > repoCap then return {'busy', 'repository', spentRepo, heldRepo} end
redis.call('HSET', KEYS[2], ARGV[7], ARGV[2] .. ':' .. ARGV[6] .. ':' .. ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[8])
return {'held', '', spentOwner, heldOwner}
`;

/**
 * KEYS as HOLD_SCRIPT's, then the month's set of settled hold ids. ARGV: holdId, repoField, micros,
 * keepSeconds, settledExpiresAtMs. Idempotent, as PostgreSQL's settle: a settle sent again (its
 * reply lost after Redis applied it; ioredis resending it after a reconnect; the worker retrying)
 * finds its id in the set and adds nothing. The id is recorded with the spend, in this one script,
 * so no crash or connection drop can leave one without the other. A hold that expired and was
 * reaped before its settle (a call that outlived its hold) is still counted, once.
 */
const SETTLE_SCRIPT = `
redis.call('HDEL', KEYS[2], ARGV[1])
if tonumber(ARGV[3]) <= 0 then return 0 end
if redis.call('SADD', KEYS[3], ARGV[1]) == 0 then return 0 end
redis.call('PEXPIREAT', KEYS[3], ARGV[5])
redis.call('HINCRBY', KEYS[1], 'total', ARGV[3])
redis.call('HINCRBY', KEYS[1], ARGV[2], ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[4])
return 1
`;

/**
 * How long a month's settled hold ids outlive the later of the month's end and now. A settle is
 * retried within minutes of its call (a hold lives 15); a week past the month is far beyond that,
 * and the set does not grow for the year the spend itself is kept.
 */
const SETTLED_KEEP_MS = 7 * 24 * 3600_000;

/** The first instant after UTC month `YYYY-MM`. */
function monthEndMs(month: string): number {
  const [year, m] = month.split('-').map(Number);
  return Date.UTC(year ?? 1970, m ?? 1, 1);
}

/**
 * The ledger in Redis, beside the queue every worker already shares. One owner's month is one hash
 * (with a hash of holds and a set of settled hold ids), all under the owner's hash tag so a script
 * can touch them on a cluster; a set per month names the owners that spent, for the run server.
 */
export class RedisSpendLedger implements SpendLedger {
  readonly kind = 'redis';
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  /** The month's spend hash, its holds hash and its settled ids, under the owner's hash tag. */
  private keys(month: string, owner: string): [string, string, string] {
    const base = `${this.prefix}:spend:{${owner}}:${month}`;
    return [base, `${base}:holds`, `${base}:settled`];
  }

  private ownersKey(month: string): string {
    return `${this.prefix}:spend-owners:${month}`;
  }

  async hold(r: HoldRequest): Promise<HoldAnswer> {
    const [spend, holds] = this.keys(r.month, r.scope.owner);
    const reply = (await this.redis.eval(
      HOLD_SCRIPT,
      2,
      spend,
      holds,
      `repo:${r.scope.repo}`,
      String(r.micros),
      String(r.ownerCap ?? -1),
      String(r.repoCap ?? -1),
      String(r.nowMs),
      String(r.nowMs + r.ttlMs),
      r.holdId,
      String(KEEP_SECONDS),
    )) as [string, string, unknown, unknown];
    const [kind, scope, spentMicros, heldMicros] = reply;
    if (kind === 'held') return { kind: 'held' };
    return {
      kind: kind === 'full' ? 'full' : 'busy',
      scope: scope === 'owner' ? 'owner' : 'repository',
      spentMicros: Number(spentMicros),
      heldMicros: Number(heldMicros),
    };
  }

  async settle(month: string, scope: SpendScope, holdId: string, micros: number): Promise<void> {
    const [spend, holds, settled] = this.keys(month, scope.owner);
    await this.redis.eval(
      SETTLE_SCRIPT,
      3,
      spend,
      holds,
      settled,
      holdId,
      `repo:${scope.repo}`,
      String(micros),
      String(KEEP_SECONDS),
      String(Math.max(monthEndMs(month), Date.now()) + SETTLED_KEEP_MS),
    );
    if (micros > 0) {
      // Another slot on a cluster: not in the script. An owner named here with no spend is harmless.
      await this.redis.sadd(this.ownersKey(month), scope.owner);
      await this.redis.expire(this.ownersKey(month), KEEP_SECONDS);
    }
  }

  async monthSpend(month: string): Promise<MonthSpend> {
    const owners = (await this.redis.smembers(this.ownersKey(month))).sort();
    const out: { owners: { owner: string; usd: number }[]; repositories: { repo: string; usd: number }[] } = {
      owners: [],
      repositories: [],
    };
    for (const owner of owners) {
      const fields = await this.redis.hgetall(this.keys(month, owner)[0]);
      out.owners.push({ owner, usd: fromMicros(Number(fields.total ?? 0)) });
      for (const [field, value] of Object.entries(fields)) {
        if (field.startsWith('repo:'))
          out.repositories.push({ repo: field.slice(5), usd: fromMicros(Number(value)) });
      }
    }
    out.repositories.sort((a, b) => a.repo.localeCompare(b.repo));
    return { month, ...out };
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
