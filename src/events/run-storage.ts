import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { cp, mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { EventStore } from './event-store.js';
import { EventStoreError, fencedRun } from './event-store.js';
import { FileEventStore } from './file-event-store.js';
import { PgRunStore, retrying } from './pg-event-store.js';
import type { BaseState } from './schema.js';

/**
 * Where a worker keeps what a job writes that must outlive the worker: each run's event log (with
 * its large outputs), the job's record (`job.json`'s fields) and small per-job documents (the
 * best-of-N choice). The file storage keeps them in the job folders under the work directory (one
 * host); the PostgreSQL storage in the database, so that any worker on any host can continue a job
 * or read an earlier round, and no part of a run needs the disk of the worker that wrote it.
 *
 * A run id is a job id, or `<job>-a<k>` for attempt k of a best-of-N job.
 */
export interface RunStorage {
  readonly kind: 'file' | 'postgres';
  /** A run's log to continue or read, or null when it was never started (no base state). */
  open(runId: string): Promise<EventStore | null>;
  /** Starts a run's log; EventStoreError('exists') when it holds one already. */
  create(runId: string, base: BaseState): Promise<EventStore>;
  /** Removes whatever a run left that holds no conversation (a start cut off before its base state). */
  discard(runId: string): Promise<void>;
  /**
   * Copies run `from`'s whole log (and outputs) to run `to`, which must not hold one: a conversation
   * that goes on in a later job (an answer to the agent's question). False when `from` has none.
   */
  copy(from: string, to: string): Promise<boolean>;
  /** Records a job once (a retry keeps the first record: its start time). */
  recordJob(jobId: string, record: Record<string, unknown>): Promise<void>;
  /** A small JSON document of a job, written whole (a reader sees the old or the new one). */
  putDocument(jobId: string, name: string, value: unknown): Promise<void>;
  getDocument(jobId: string, name: string): Promise<unknown>;
  /** Where people find a run's log when there is no run view (a folder, or the database's run id). */
  locationOf(runId: string): string;
  close(): Promise<void>;
}

/** A job's (or run's) folder under the jobs directory. */
export function runFolder(jobsDir: string, runId: string): string {
  return join(jobsDir, runId);
}

/** The single-host storage: job folders under the worker's jobs directory. */
export class FileRunStorage implements RunStorage {
  readonly kind = 'file';
  constructor(readonly jobsDir: string) {}

  private trajectory(runId: string): string {
    return join(runFolder(this.jobsDir, runId), 'trajectory');
  }

  // Through a promise: a corrupt log rejects like the database's, it never throws synchronously.
  open(runId: string): Promise<EventStore | null> {
    const dir = this.trajectory(runId);
    return Promise.resolve().then(() =>
      existsSync(join(dir, 'base_state.json')) ? FileEventStore.open(dir) : null,
    );
  }

  create(runId: string, base: BaseState): Promise<EventStore> {
    return FileEventStore.createAsync(this.trajectory(runId), base);
  }

  async discard(runId: string): Promise<void> {
    await rm(this.trajectory(runId), { recursive: true, force: true });
  }

  async copy(from: string, to: string): Promise<boolean> {
    const src = this.trajectory(from);
    if (!existsSync(join(src, 'base_state.json'))) return false;
    const dest = this.trajectory(to);
    if (existsSync(join(dest, 'base_state.json')))
      throw new EventStoreError('exists', `run ${to} already holds a conversation`);
    // Copied aside and renamed in: a crash mid-copy leaves no half log under the run's name.
    const tmp = `${dest}.copy`;
    await rm(tmp, { recursive: true, force: true });
    await cp(src, tmp, { recursive: true, verbatimSymlinks: true });
    await rm(dest, { recursive: true, force: true });
    await mkdir(runFolder(this.jobsDir, to), { recursive: true });
    await rename(tmp, dest);
    return true;
  }

  async recordJob(jobId: string, record: Record<string, unknown>): Promise<void> {
    refuseIfFenced(jobId);
    const dir = runFolder(this.jobsDir, jobId);
    await mkdir(dir, { recursive: true });
    if (existsSync(join(dir, 'job.json'))) return;
    await writeWhole(join(dir, 'job.json'), record);
  }

  async putDocument(jobId: string, name: string, value: unknown): Promise<void> {
    refuseIfFenced(jobId);
    const dir = runFolder(this.jobsDir, jobId);
    await mkdir(dir, { recursive: true });
    await writeWhole(join(dir, `${documentName(name)}.json`), value);
  }

  getDocument(jobId: string, name: string): Promise<unknown> {
    return Promise.resolve().then(() => {
      const file = join(runFolder(this.jobsDir, jobId), `${documentName(name)}.json`);
      return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as unknown) : null;
    });
  }

  locationOf(runId: string): string {
    return this.trajectory(runId);
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

async function writeWhole(file: string, value: unknown): Promise<void> {
  // A temp name of this write's own: two writers never mix their bytes; the last rename wins whole.
  const tmp = `${file}.${process.pid}-${randomBytes(4).toString('hex')}.tmp`;
  await writeFile(tmp, `${JSON.stringify(value, null, 2)}\n`);
  await rename(tmp, file);
}

/** A run that lost its job (asFencedWriter) writes nothing more for it, records and documents included. */
function refuseIfFenced(jobId: string): void {
  if (fencedRun())
    throw new EventStoreError('fenced', `this run lost job ${jobId}: another worker continues it`);
}

function documentName(name: string): string {
  if (!/^[a-z][a-z0-9-]*$/.test(name)) throw new Error(`not a document name: ${name}`);
  return name;
}

/** The storage on PostgreSQL (`ISSUE_AGENT_STORE_URL=postgres://…`); see PgRunStore. */
export class PgRunStorage implements RunStorage {
  readonly kind = 'postgres';
  constructor(readonly store: PgRunStore) {}

  static async connect(url: string): Promise<PgRunStorage> {
    return new PgRunStorage(await PgRunStore.connect(url));
  }

  async open(runId: string): Promise<EventStore | null> {
    if (!(await this.store.has(runId))) return null;
    return this.store.open(runId);
  }

  create(runId: string, base: BaseState): Promise<EventStore> {
    return this.store.create(runId, base);
  }

  // A run's row is written with its base state, in one statement: there is no half-started run.
  discard(): Promise<void> {
    return Promise.resolve();
  }

  copy(from: string, to: string): Promise<boolean> {
    return this.store.copyRun(from, to);
  }

  async recordJob(jobId: string, record: Record<string, unknown>): Promise<void> {
    refuseIfFenced(jobId);
    await retrying(() =>
      this.store.pool.query(
        'INSERT INTO ia_jobs (job_id, record) VALUES ($1, $2) ON CONFLICT (job_id) DO NOTHING',
        [jobId, JSON.stringify(record)],
      ),
    );
  }

  async putDocument(jobId: string, name: string, value: unknown): Promise<void> {
    refuseIfFenced(jobId);
    await retrying(() =>
      this.store.pool.query(
        `INSERT INTO ia_documents (job_id, name, body) VALUES ($1, $2, $3)
         ON CONFLICT (job_id, name) DO UPDATE SET body = EXCLUDED.body`,
        [jobId, documentName(name), JSON.stringify(value)],
      ),
    );
  }

  async getDocument(jobId: string, name: string): Promise<unknown> {
    const r = await retrying(() =>
      this.store.pool.query<{ body: unknown }>(
        'SELECT body FROM ia_documents WHERE job_id = $1 AND name = $2',
        [jobId, documentName(name)],
      ),
    );
    return r.rows[0]?.body ?? null;
  }

  locationOf(runId: string): string {
    return `postgres run ${runId}`;
  }

  close(): Promise<void> {
    return this.store.close();
  }
}

/**
 * The storage a process uses: PostgreSQL when `ISSUE_AGENT_STORE_URL` names a database, the job
 * folders under `jobsDir` otherwise.
 */
export async function openRunStorage(url: string | undefined, jobsDir: string): Promise<RunStorage> {
  if (url === undefined || url === '') return new FileRunStorage(jobsDir);
  if (!/^postgres(ql)?:\/\//.test(url))
    throw new Error('ISSUE_AGENT_STORE_URL must be a postgres:// (or postgresql://) URL');
  return PgRunStorage.connect(url);
}
