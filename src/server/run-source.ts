import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { EVENTS_CHANNEL, PgRunStore, retrying } from '../events/pg-event-store.js';
import { agentEvent, baseState } from '../events/schema.js';
import type { Redactor } from '../publish/redact.js';
import { RunLogReader, TrajectoryReader } from '../events/trajectory-reader.js';

/** A run's log as the server reads it while a worker may still append: incremental, redacted. */
export type RunReader = RunLogReader;

/**
 * Where the run server finds runs: the job folders of a work directory (one host), or the PostgreSQL
 * run store every worker writes (ISSUE_AGENT_STORE_URL), which needs no job folder at all.
 */
export interface RunSource {
  /** The ids of every job record and run the source holds. */
  ids(): Promise<string[]>;
  /** A job's record (`job.json`'s fields), unparsed, or null. */
  jobRecord(id: string): Promise<unknown>;
  /** A reader of the run's log, or null when the run has no log (yet). */
  reader(id: string): Promise<RunReader | null>;
  /**
   * Starts telling `listener` of runs that got new events as they are appended (PostgreSQL's
   * LISTEN/NOTIFY); a source without such news (folders) never calls it, and is polled.
   */
  watch(listener: (runId: string) => void): Promise<void>;
  close(): Promise<void>;
}

const JOB_ID = /^[A-Za-z0-9-]+$/;

/** The job folders under `<workDir>/jobs`. */
export class FolderRunSource implements RunSource {
  constructor(
    private readonly jobsDir: string,
    private readonly redactor: Redactor,
  ) {}

  ids(): Promise<string[]> {
    try {
      return Promise.resolve(
        readdirSync(this.jobsDir, { withFileTypes: true })
          .filter((d) => d.isDirectory() && JOB_ID.test(d.name))
          .map((d) => d.name),
      );
    } catch {
      return Promise.resolve([]);
    }
  }

  jobRecord(id: string): Promise<unknown> {
    try {
      return Promise.resolve(JSON.parse(readFileSync(join(this.jobsDir, id, 'job.json'), 'utf8')) as unknown);
    } catch {
      return Promise.resolve(null);
    }
  }

  reader(id: string): Promise<RunReader | null> {
    const dir = join(this.jobsDir, id, 'trajectory');
    if (!existsSync(join(dir, 'base_state.json'))) return Promise.resolve(null);
    return Promise.resolve(new TrajectoryReader(dir, this.redactor));
  }

  watch(): Promise<void> {
    return Promise.resolve();
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

/**
 * The PostgreSQL run store, read-only: runs and job records from its tables, new events by id, and
 * `LISTEN ia_events` on a connection of its own (re-established after the server restarts) for
 * news of appends, so a live stream hears of an event as it is committed.
 */
export class PgRunSource implements RunSource {
  private store: Promise<PgRunStore> | null = null;
  private listener: pg.Client | null = null;
  private closed = false;

  constructor(
    private readonly url: string,
    private readonly redactor: Redactor,
    private readonly onError: (error: unknown) => void = () => undefined,
  ) {}

  /** Connects (and applies migrations, as any process of the App does) on first use. */
  private pool(): Promise<pg.Pool> {
    this.store ??= PgRunStore.connect(this.url).catch((error: unknown) => {
      this.store = null;
      throw error;
    });
    return this.store.then((s) => s.pool);
  }

  async ids(): Promise<string[]> {
    const pool = await this.pool();
    const r = await retrying(() =>
      pool.query<{ id: string }>('SELECT run_id AS id FROM ia_runs UNION SELECT job_id FROM ia_jobs'),
    );
    return r.rows.map((row) => row.id).filter((id) => JOB_ID.test(id));
  }

  async jobRecord(id: string): Promise<unknown> {
    const pool = await this.pool();
    const r = await retrying(() =>
      pool.query<{ record: unknown }>('SELECT record FROM ia_jobs WHERE job_id = $1', [id]),
    );
    return r.rows[0]?.record ?? null;
  }

  async reader(id: string): Promise<RunReader | null> {
    const pool = await this.pool();
    const r = await retrying(() => pool.query('SELECT 1 FROM ia_runs WHERE run_id = $1', [id]));
    return r.rowCount === 0 ? null : new PgRunReader(pool, id, this.redactor);
  }

  /**
   * Listens on a connection of its own, and connects again a second after it fails or drops (also
   * when the server is down at the start): each connection is given up once, and a closed source
   * keeps none. Notifications sent while no one listened are not lost to readers: the index polls.
   */
  watch(listener: (runId: string) => void): Promise<void> {
    const retryLater = (): void => {
      if (this.closed) return;
      setTimeout(() => {
        void connect();
      }, 1000).unref();
    };
    const connect = async (): Promise<void> => {
      if (this.closed) return;
      const client = new pg.Client({ connectionString: this.url, keepAlive: true });
      let given = false;
      const giveUp = (error: unknown): void => {
        if (given) return;
        given = true;
        this.onError(error);
        if (this.listener === client) this.listener = null;
        client.end().catch(() => undefined);
        retryLater();
      };
      client.on('notification', (n) => {
        const runId = n.payload?.split(' ')[0];
        if (n.channel === EVENTS_CHANNEL && runId !== undefined && JOB_ID.test(runId)) listener(runId);
      });
      client.on('error', giveUp);
      client.on('end', () => {
        giveUp(new Error('the LISTEN connection ended'));
      });
      try {
        await client.connect();
        await client.query(`LISTEN ${EVENTS_CHANNEL}`);
        // Closed while this connected: keep nothing open.
        if (this.isClosed()) {
          given = true;
          await client.end();
          return;
        }
        this.listener = client;
      } catch (error) {
        giveUp(error);
      }
    };
    return connect();
  }

  private isClosed(): boolean {
    return this.closed;
  }

  async close(): Promise<void> {
    this.closed = true;
    const listener = this.listener;
    this.listener = null;
    await listener?.end().catch(() => undefined);
    const store = await this.store?.catch(() => null);
    await store?.close();
  }
}

/** One run of the PostgreSQL store, read by event id from the last one read. */
class PgRunReader extends RunLogReader {
  constructor(
    private readonly pool: pg.Pool,
    readonly runId: string,
    redactor: Redactor,
  ) {
    super(redactor);
  }

  async refresh(): Promise<boolean> {
    let changed = false;
    if (this.baseState === null) {
      const r = await this.pool.query<{ base: unknown }>('SELECT base FROM ia_runs WHERE run_id = $1', [
        this.runId,
      ]);
      const parsed = baseState.safeParse(r.rows[0]?.base);
      if (!parsed.success) return false;
      this.baseState = parsed.data;
      changed = true;
    }
    const rows = await this.pool.query<{ body: unknown }>(
      'SELECT body FROM ia_events WHERE run_id = $1 AND id > $2 ORDER BY id',
      [this.runId, this.list.length],
    );
    for (const row of rows.rows) {
      const parsed = agentEvent.safeParse(row.body);
      // Ids are contiguous in the table (each append claims the next); a row that does not parse
      // stops the read here rather than skip an event.
      if (!parsed.success || parsed.data.id !== this.list.length + 1) break;
      this.list.push(parsed.data);
      changed = true;
    }
    if (changed) this.reduced = null;
    return changed;
  }
}
