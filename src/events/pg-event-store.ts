import { open, stat } from 'node:fs/promises';
import { setTimeout as delay } from 'node:timers/promises';
import pg from 'pg';
import { AppendQueue, attachmentName, EventStoreError, fencedRun, type EventStore } from './event-store.js';
import { MAX_ATTACHED_BYTES } from './file-event-store.js';
import {
  agentEvent,
  baseState,
  SCHEMA_VERSION,
  type AgentEvent,
  type BaseState,
  type NewEvent,
} from './schema.js';

/**
 * Versioned schema migrations, applied in order at connect (each once, in a transaction, under an
 * advisory lock so two processes starting together do not both apply one). A migration is never
 * edited once released: a change is a new version.
 */
export const MIGRATIONS: readonly { readonly version: number; readonly sql: string }[] = [
  {
    version: 1,
    sql: `
      CREATE TABLE ia_runs (
        run_id     text PRIMARY KEY,
        base       json NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      );
      -- One row per event; (run_id, id) is the claim: a second writer of event N of a run fails.
      CREATE TABLE ia_events (
        run_id text NOT NULL REFERENCES ia_runs (run_id) ON DELETE CASCADE,
        id     integer NOT NULL CHECK (id > 0),
        kind   text NOT NULL,
        body   json NOT NULL,
        PRIMARY KEY (run_id, id)
      );
      -- Large outputs (complete command output) beside a run's log.
      CREATE TABLE ia_files (
        run_id text NOT NULL REFERENCES ia_runs (run_id) ON DELETE CASCADE,
        name   text NOT NULL,
        bytes  bytea NOT NULL,
        PRIMARY KEY (run_id, name)
      );
      -- A job's record (the fields of job.json): what the run server and a resuming worker read.
      CREATE TABLE ia_jobs (
        job_id     text PRIMARY KEY,
        record     json NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now()
      );
    `,
  },
  {
    version: 2,
    sql: `
      -- Small per-job documents written whole (the best-of-N choice made before publishing).
      CREATE TABLE ia_documents (
        job_id text NOT NULL,
        name   text NOT NULL,
        body   json NOT NULL,
        PRIMARY KEY (job_id, name)
      );
    `,
  },
  {
    version: 3,
    sql: `
      -- The month's model spend (micro-dollars) per owner (repo '') and per repository (spend-ledger.ts).
      CREATE TABLE ia_spend (
        month  text NOT NULL,
        owner  text NOT NULL,
        repo   text NOT NULL,
        micros bigint NOT NULL DEFAULT 0,
        PRIMARY KEY (month, owner, repo)
      );
      -- What running model calls may still cost; a hold past expires_ms (its worker died) no longer counts.
      CREATE TABLE ia_spend_holds (
        hold_id    text PRIMARY KEY,
        month      text NOT NULL,
        owner      text NOT NULL,
        repo       text NOT NULL,
        micros     bigint NOT NULL,
        expires_ms bigint NOT NULL
      );
      CREATE INDEX ia_spend_holds_owner ON ia_spend_holds (month, owner);
      -- Holds already turned into spend: a settle retried after its commit is not counted twice.
      CREATE TABLE ia_spend_settled (hold_id text PRIMARY KEY);
    `,
  },
  {
    version: 4,
    sql: `
      -- When a hold was settled: a retry comes within minutes, so a week later its row only grows the
      -- table (pg-spend-ledger.ts deletes such rows as it settles).
      ALTER TABLE ia_spend_settled ADD COLUMN settled_at timestamptz NOT NULL DEFAULT now();
      CREATE INDEX ia_spend_settled_at ON ia_spend_settled (settled_at);
    `,
  },
];

/** The channel a NOTIFY with `<run id> <event id>` goes to after each append. */
export const EVENTS_CHANNEL = 'ia_events';

const MIGRATION_LOCK = 0x1a_6e_47; // pg_advisory_xact_lock key of the migrations
/** Connection failures an operation is retried through (a restart, a failover), with backoff. */
const RETRIES = 6;
const RETRY_BASE_MS = 200;

export interface PgStoreOptions {
  /** Pool size (default 4). */
  readonly maxConnections?: number;
  /** Bytes of attached files one run keeps at most (default as the file store). */
  readonly maxAttachedBytes?: number;
}

/**
 * The run store on PostgreSQL: every run's base state, events and large outputs in tables, so no
 * part of a run needs the disk of the worker that wrote it. `open` a run to continue or read it,
 * `create` one to start it. The App's processes reach it through PgRunStorage (run-storage.ts).
 */
export class PgRunStore {
  private constructor(
    readonly pool: pg.Pool,
    private readonly maxAttachedBytes: number,
  ) {}

  static async connect(url: string, options: PgStoreOptions = {}): Promise<PgRunStore> {
    const pool = new pg.Pool({ connectionString: url, max: options.maxConnections ?? 4 });
    // An idle client's connection dropping (a server restart) is not this process's failure.
    pool.on('error', () => undefined);
    try {
      await retrying(() => migrate(pool));
    } catch (error) {
      await pool.end();
      throw error;
    }
    return new PgRunStore(pool, options.maxAttachedBytes ?? MAX_ATTACHED_BYTES);
  }

  async create(runId: string, base: BaseState): Promise<PgEventStore> {
    const parsed = baseState.parse(base);
    const inserted = await retrying(() =>
      this.pool.query(
        'INSERT INTO ia_runs (run_id, base) VALUES ($1, $2) ON CONFLICT (run_id) DO NOTHING RETURNING run_id',
        [runId, JSON.stringify(parsed)],
      ),
    );
    if (inserted.rowCount === 0) {
      // A retried insert that had committed is this create, not a second one.
      const existing = await retrying(() =>
        this.pool.query<{ base: unknown }>('SELECT base FROM ia_runs WHERE run_id = $1', [runId]),
      );
      const events = await retrying(() =>
        this.pool.query('SELECT 1 FROM ia_events WHERE run_id = $1 LIMIT 1', [runId]),
      );
      if (JSON.stringify(existing.rows[0]?.base) !== JSON.stringify(parsed) || events.rowCount !== 0)
        throw new EventStoreError('exists', `run ${runId} already holds a conversation; use resume`);
    }
    return new PgEventStore(this, runId, parsed, [], 0, this.maxAttachedBytes);
  }

  /** A run to continue or read; a connection lost while reading is retried (the read is repeatable). */
  open(runId: string): Promise<PgEventStore> {
    return retrying(() => this.openOnce(runId));
  }

  private async openOnce(runId: string): Promise<PgEventStore> {
    return withClient(this.pool, async (client) => {
      try {
        // One snapshot for the base, the events and the attachment total.
        await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
        const run = await client.query<{ base: unknown }>('SELECT base FROM ia_runs WHERE run_id = $1', [
          runId,
        ]);
        const raw = run.rows[0]?.base;
        if (raw === undefined) throw new EventStoreError('not_found', `no run ${runId} in the store`);
        const version = (raw as { schemaVersion?: unknown }).schemaVersion;
        if (version !== SCHEMA_VERSION) {
          throw new EventStoreError(
            'unsupported_version',
            `run ${runId} has schema version ${String(version)}; this build reads ${SCHEMA_VERSION}`,
          );
        }
        const base = baseState.safeParse(raw);
        if (!base.success) throw new EventStoreError('corrupt', `run ${runId}: ${base.error.message}`);
        const rows = await client.query<{ body: unknown }>(
          'SELECT body FROM ia_events WHERE run_id = $1 ORDER BY id',
          [runId],
        );
        const events: AgentEvent[] = [];
        for (const [i, row] of rows.rows.entries()) {
          const parsed = agentEvent.safeParse(row.body);
          if (!parsed.success)
            throw new EventStoreError('corrupt', `run ${runId} event ${i + 1}: ${parsed.error.message}`);
          if (parsed.data.id !== i + 1)
            throw new EventStoreError(
              'corrupt',
              `run ${runId}: expected event ${i + 1}, found ${parsed.data.id}`,
            );
          events.push(parsed.data);
        }
        const size = await client.query<{ total: string | null }>(
          'SELECT sum(octet_length(bytes))::text AS total FROM ia_files WHERE run_id = $1',
          [runId],
        );
        await client.query('COMMIT');
        return new PgEventStore(
          this,
          runId,
          base.data,
          events,
          Number(size.rows[0]?.total ?? 0),
          this.maxAttachedBytes,
        );
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw error;
      }
    });
  }

  /**
   * Copies run `from` (base state, events, attached files) to the new run `to`, in one transaction:
   * a conversation that goes on in a later job. False when `from` does not exist; EventStoreError
   * ('exists') when `to` does.
   */
  async copyRun(from: string, to: string): Promise<boolean> {
    return retrying(async () => {
      return withClient(this.pool, async (client) => {
        try {
          await client.query('BEGIN');
          const run = await client.query(
            `INSERT INTO ia_runs (run_id, base) SELECT $2, base FROM ia_runs WHERE run_id = $1
           ON CONFLICT (run_id) DO NOTHING RETURNING run_id`,
            [from, to],
          );
          if (run.rowCount === 0) {
            await client.query('ROLLBACK');
            // `to` exists, or `from` does not. A retry of a copy whose COMMIT went through (its reply
            // lost) finds `to` equal to `from`: that is this copy, done.
            const same = await client.query<{ from_base: unknown; to_base: unknown; same: boolean }>(
              `SELECT (SELECT base::text FROM ia_runs WHERE run_id = $1) AS from_base,
                    (SELECT base::text FROM ia_runs WHERE run_id = $2) AS to_base,
                    (SELECT count(*) FROM ia_events WHERE run_id = $1) =
                    (SELECT count(*) FROM ia_events WHERE run_id = $2) AS same`,
              [from, to],
            );
            const row = same.rows[0];
            if (row === undefined || row.from_base === null) return false;
            if (row.from_base === row.to_base && row.same) return true;
            throw new EventStoreError('exists', `run ${to} already holds a conversation`);
          }
          await client.query(
            'INSERT INTO ia_events (run_id, id, kind, body) SELECT $2, id, kind, body FROM ia_events WHERE run_id = $1',
            [from, to],
          );
          await client.query(
            'INSERT INTO ia_files (run_id, name, bytes) SELECT $2, name, bytes FROM ia_files WHERE run_id = $1',
            [from, to],
          );
          await client.query('COMMIT');
          return true;
        } catch (error) {
          await client.query('ROLLBACK').catch(() => undefined);
          throw error;
        }
      });
    });
  }

  /** Whether the store holds this run. */
  async has(runId: string): Promise<boolean> {
    const r = await retrying(() => this.pool.query('SELECT 1 FROM ia_runs WHERE run_id = $1', [runId]));
    return r.rowCount !== 0;
  }

  /** An attached file's bytes, or null. */
  async file(runId: string, name: string): Promise<Buffer | null> {
    const r = await retrying(() =>
      this.pool.query<{ bytes: Buffer }>('SELECT bytes FROM ia_files WHERE run_id = $1 AND name = $2', [
        runId,
        name,
      ]),
    );
    return r.rows[0]?.bytes ?? null;
  }

  close(): Promise<void> {
    return this.pool.end();
  }
}

/**
 * One run's log in PostgreSQL. An append is one statement: the row is the claim (the primary key
 * (run, id) refuses a second writer of event N, whatever its kind) and the NOTIFY to readers is sent
 * only if the row went in, at commit. It returns after the commit, which is durable under the
 * server's default `synchronous_commit`.
 */
export class PgEventStore implements EventStore {
  readonly location: string;
  private readonly list: AgentEvent[];
  private readonly appends = new AppendQueue();

  constructor(
    private readonly store: PgRunStore,
    readonly runId: string,
    readonly base: BaseState,
    events: AgentEvent[],
    private attached: number,
    private readonly maxAttachedBytes: number,
  ) {
    this.location = `postgres run ${runId}`;
    this.list = events;
  }

  get events(): readonly AgentEvent[] {
    return this.list;
  }

  /** Appends of one store in order: each takes the next id. */
  append(event: NewEvent): Promise<AgentEvent> {
    return this.appends.run(() => this.appendNow(event));
  }

  private async appendNow(event: NewEvent): Promise<AgentEvent> {
    if (fencedRun()) {
      throw new EventStoreError('fenced', `this run lost its job: another worker continues ${this.location}`);
    }
    const full: AgentEvent = { ...event, id: this.list.length + 1, ts: new Date().toISOString() };
    const body = JSON.stringify(full);
    const inserted = await retrying(() =>
      this.store.pool.query(
        `WITH ins AS (
           INSERT INTO ia_events (run_id, id, kind, body) VALUES ($1, $2, $3, $4)
           ON CONFLICT (run_id, id) DO NOTHING RETURNING id
         )
         SELECT id, pg_notify('${EVENTS_CHANNEL}', $1 || ' ' || id) FROM ins`,
        [this.runId, full.id, full.kind, body],
      ),
    );
    if (inserted.rowCount === 0) {
      // A retry of an insert that had committed finds its own row: that is this append.
      const row = await retrying(() =>
        this.store.pool.query<{ body: unknown }>(
          'SELECT body::text AS body FROM ia_events WHERE run_id = $1 AND id = $2',
          [this.runId, full.id],
        ),
      );
      if (row.rows[0]?.body !== body) {
        throw new EventStoreError(
          'conflict',
          `event ${full.id} of ${this.location} was written by another run of this conversation: this run stops`,
        );
      }
    }
    this.list.push(full);
    return full;
  }

  async readAttachment(rel: string): Promise<Buffer | null> {
    const name = attachmentName(rel);
    return name === null ? null : this.store.file(this.runId, name);
  }

  async attachFile(sourcePath: string, name: string): Promise<string> {
    const size = (await stat(sourcePath)).size;
    const room = Math.max(0, this.maxAttachedBytes - this.attached);
    // Only what is kept is read: an output of gigabytes costs no more memory than the budget.
    let bytes = await readHead(sourcePath, Math.min(size, room));
    if (size > room) {
      bytes = Buffer.concat([
        bytes,
        Buffer.from(
          `\n[... the trajectory's budget for attached output (${this.maxAttachedBytes} bytes) is used up: ${size - room} bytes of this output were not kept ...]\n`,
        ),
      ]);
    }
    await retrying(() =>
      this.store.pool.query(
        `INSERT INTO ia_files (run_id, name, bytes) VALUES ($1, $2, $3)
         ON CONFLICT (run_id, name) DO UPDATE SET bytes = excluded.bytes`,
        [this.runId, name, bytes],
      ),
    );
    this.attached += bytes.length;
    return `files/${name}`;
  }
}

async function migrate(pool: pg.Pool): Promise<void> {
  return withClient(pool, async (client) => {
    try {
      await client.query('BEGIN');
      await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
      await client.query(
        'CREATE TABLE IF NOT EXISTS ia_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
      );
      const done = new Set(
        (await client.query<{ version: number }>('SELECT version FROM ia_migrations')).rows.map(
          (r) => r.version,
        ),
      );
      const newest = Math.max(0, ...done);
      const known = Math.max(...MIGRATIONS.map((m) => m.version));
      if (newest > known) {
        throw new EventStoreError(
          'unsupported_version',
          `the store's schema is at version ${newest}; this build knows up to ${known}: upgrade this process`,
        );
      }
      for (const m of MIGRATIONS) {
        if (done.has(m.version)) continue;
        await client.query(m.sql);
        await client.query('INSERT INTO ia_migrations (version) VALUES ($1)', [m.version]);
      }
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    }
  });
}

/**
 * Runs `use` with a client of the pool. While a client is checked out the pool does not listen for
 * its 'error', and pg emits one when the server goes away (a restart), even after the running query
 * failed with it: unheard, that event would end the process. A client that saw it is released with
 * the error, so the pool drops it instead of handing it out again.
 */
export async function withClient<T>(pool: pg.Pool, use: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  // eslint-disable-next-line no-restricted-syntax -- the one checkout that listens for 'error'
  const client = await pool.connect();
  let broken: Error | undefined;
  const heard = (error: Error): void => {
    broken = error;
  };
  client.on('error', heard);
  try {
    return await use(client);
  } finally {
    client.off('error', heard);
    client.release(broken);
  }
}

/** A failure that says the server could not be reached or went away (worth a retry). */
export function isConnectionError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string') {
    // Node's socket errors, and PostgreSQL's admin shutdown / cannot connect now / connection failures.
    if (['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN'].includes(code))
      return true;
    if (code === '57P01' || code === '57P02' || code === '57P03' || code.startsWith('08')) return true;
  }
  return /Connection terminated|connection timeout|Client has encountered a connection error/i.test(
    error.message,
  );
}

/** Runs `op`, retrying connection failures with backoff (about 12 s in all); other errors at once. */
export async function retrying<T>(op: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await op();
    } catch (error) {
      if (attempt >= RETRIES || !isConnectionError(error)) throw error;
      await delay(RETRY_BASE_MS * 2 ** attempt);
    }
  }
}

/** The first `length` bytes of a file (fewer if it is shorter). */
async function readHead(path: string, length: number): Promise<Buffer> {
  const handle = await open(path, 'r');
  try {
    const buffer = Buffer.alloc(length);
    let filled = 0;
    while (filled < length) {
      const { bytesRead } = await handle.read(buffer, filled, length - filled, filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
    }
    return buffer.subarray(0, filled);
  } finally {
    await handle.close();
  }
}
