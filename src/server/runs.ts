import { join } from 'node:path';
import type { Job, Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { totalTokens } from '../events/reduce-state.js';
import type { Redactor } from '../publish/redact.js';
import { pendingJobSchema, fixJobSchema, type FixJob } from '../queue/payloads.js';
import { FolderRunSource, type RunReader, type RunSource } from './run-source.js';

import type { RunPhase, RunSummary } from './run-summary.js';

export type { RunPhase, RunSummary };

/** What the queue says about a job. */
interface QueueInfo {
  readonly phase: RunPhase;
  readonly payload: FixJob | null;
  readonly queuedAt: string | null;
  readonly startedAt: string | null;
  readonly finishedAt: string | null;
  /** The job's own end: its result's outcome, `failed` for a failed job. */
  readonly outcome: string | null;
  readonly prUrl: string | null;
}

/** A job's record (`job.json`, or its row in the store), written by the worker when it starts a job. */
interface JobFile {
  readonly payload: FixJob | null;
  readonly startedAt: string | null;
  /** Set on a later attempt of a best-of-N job: the job it belongs to. */
  readonly attemptOf: string | null;
}

/** A run cancelled through the API before it started (its queue entry is gone). */
export interface CancelledRecord {
  readonly at: string;
  readonly by: string;
  readonly payload: FixJob | null;
  readonly queuedAt: string | null;
}

interface Entry {
  readonly id: string;
  reader: RunReader | null;
  jobFile: JobFile | null;
  queue: QueueInfo | null;
  cancelled: CancelledRecord | null;
  summary: RunSummary;
  /** Finished and read to the end: nothing about it changes any more. */
  final: boolean;
  /** Seen unfinished by this process (or first seen after the initial scan). */
  seenLive: boolean;
  /** What the last refresh knew of it from the queue (see update). */
  knowledge: 'known' | 'gone' | 'unknown';
}

export const JOB_ID = /^[A-Za-z0-9-]+$/;

export const cancelledKey = (prefix: string): string => `${prefix}:server:cancelled`;

export interface RunIndexOptions {
  readonly workDir: string;
  /** Where runs are read: default the job folders under `workDir`. */
  readonly source?: RunSource;
  readonly queue: Queue<FixJob> | null;
  readonly redis: Redis | null;
  readonly prefix: string;
  readonly redactor: Redactor;
  readonly logger: Logger;
  /** How often the store and the queue are looked at while the index runs (default 500). */
  readonly pollMs?: number;
  /** Trajectories kept in memory beyond the live runs (default 64). */
  readonly cachedTrajectories?: number;
}

export interface FinishedRun {
  readonly summary: RunSummary;
  /** A later attempt of a best-of-N job: the job it belongs to (not a run of its own). */
  readonly attemptOf: string | null;
  readonly reader: RunReader | null;
  readonly queuedAt: number | null;
  readonly startedAt: number | null;
}

const LIVE_STATES = ['waiting', 'delayed', 'prioritized', 'waiting-children'] as const;

/**
 * Every run the server can see, from two sources: the job folders (`job.json`, the trajectory) and the
 * queue (BullMQ job data and state, the per-target lists of waiting requests). Refreshed by polling:
 * the queue's live sets and the folder list every `pollMs`, a finished run's files never again.
 * Listeners hear of every change of a summary and, once, of every run that finished while watched.
 */
export class RunIndex {
  private readonly entries = new Map<string, Entry>();
  private readonly changeListeners = new Set<(s: RunSummary) => void>();
  private readonly finishListeners = new Set<(r: FinishedRun) => void>();
  private readonly readerOrder: string[] = [];
  private timer: NodeJS.Timeout | null = null;
  private inFlight: Promise<void> | null = null;
  private lastRefresh = 0;
  private refreshes = 0;
  private lastFinishedScan = 0;
  private redisUp = true;
  /** A refresh is due after the one in flight (news of an append came during it). */
  private again = false;
  private readonly source: RunSource;

  constructor(private readonly options: RunIndexOptions) {
    this.source = options.source ?? new FolderRunSource(join(options.workDir, 'jobs'), options.redactor);
  }

  get redisHealthy(): boolean {
    return this.redisUp;
  }

  start(): void {
    if (this.timer !== null) return;
    const tick = (): void => {
      this.refresh().catch((error: unknown) => {
        this.options.logger.warn({ err: error }, 'run index refresh failed');
      });
    };
    tick();
    this.timer = setInterval(tick, this.options.pollMs ?? 500);
    this.timer.unref();
    // News of an append (PostgreSQL) refreshes at once: streams do not wait for the next poll. News
    // that comes during a refresh (which may have read that run already) gets one more after it.
    this.source
      .watch(() => {
        if (this.inFlight === null) tick();
        else this.again = true;
      })
      .catch((error: unknown) => {
        this.options.logger.warn({ err: error }, 'cannot listen for new events; polling only');
      });
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    this.source.close().catch((error: unknown) => {
      this.options.logger.warn({ err: error }, 'closing the run source');
    });
  }

  onChange(listener: (s: RunSummary) => void): () => void {
    this.changeListeners.add(listener);
    return () => this.changeListeners.delete(listener);
  }

  onFinish(listener: (r: FinishedRun) => void): () => void {
    this.finishListeners.add(listener);
    return () => this.finishListeners.delete(listener);
  }

  /** Refreshes unless a refresh finished within `maxAgeMs`; concurrent callers share one. */
  async fresh(maxAgeMs = 250): Promise<void> {
    if (this.refreshes > 0 && Date.now() - this.lastRefresh < maxAgeMs) return;
    await this.refresh();
  }

  refresh(): Promise<void> {
    this.inFlight ??= this.doRefresh().finally(() => {
      this.inFlight = null;
      this.lastRefresh = Date.now();
      this.refreshes += 1;
      if (this.again) {
        this.again = false;
        this.refresh().catch((error: unknown) => {
          this.options.logger.warn({ err: error }, 'run index refresh failed');
        });
      }
    });
    return this.inFlight;
  }

  get(id: string): RunSummary | undefined {
    return this.entries.get(id)?.summary;
  }

  /**
   * The run's summary with its trajectory read up to now: a client that read the run's events and
   * then asks for its summary sees counts at least as new (the queue's side is as of the last
   * refresh, at most `fresh`'s age old).
   */
  async current(id: string): Promise<RunSummary | undefined> {
    await this.fresh();
    const e = this.entries.get(id);
    if (e === undefined) return undefined;
    if (!e.final && e.reader !== null) {
      await e.reader.refresh();
      this.update(e, e.knowledge);
    }
    return e.summary;
  }

  /** Newest first (by queued time, then id). */
  list(): RunSummary[] {
    return [...this.entries.values()].map((e) => e.summary).sort(compareRuns);
  }

  /** The payload the run was queued with, if known. */
  payload(id: string): FixJob | null {
    const e = this.entries.get(id);
    if (e === undefined) return null;
    return e.jobFile?.payload ?? e.queue?.payload ?? e.cancelled?.payload ?? null;
  }

  /** The run's trajectory, read up to now (null when it has none in the store). */
  async reader(id: string): Promise<RunReader | null> {
    const e = this.entries.get(id);
    if (e === undefined) return null;
    e.reader ??= await this.source.reader(id);
    if (e.reader === null) return null;
    await e.reader.refresh();
    this.touchReader(id);
    return e.reader;
  }

  /** Records a run cancelled before it started, so it stays listed as finished/cancelled. */
  async recordCancelled(id: string, record: CancelledRecord): Promise<void> {
    if (this.options.redis !== null) {
      await this.options.redis.hset(cancelledKey(this.options.prefix), id, JSON.stringify(record));
    }
    const e = this.entries.get(id);
    if (e !== undefined) {
      e.cancelled = record;
      e.queue = null;
      this.update(e, 'gone');
    }
  }

  private async doRefresh(): Promise<void> {
    const first = this.refreshes === 0;
    // The queue first, the files second: a job is marked finished only after its last event was
    // written, so files read after seeing "finished" hold every event.
    const queueView = await this.readQueue(first);
    const ids = new Set<string>(this.entries.keys());
    for (const id of await this.source.ids()) ids.add(id);
    for (const id of queueView.live.keys()) ids.add(id);
    for (const id of queueView.extra.keys()) ids.add(id);
    for (const id of queueView.cancelled.keys()) ids.add(id);
    for (const id of ids) {
      let e = this.entries.get(id);
      if (e?.final === true) continue;
      const isNew = e === undefined;
      if (e === undefined) {
        e = {
          id,
          reader: null,
          jobFile: null,
          queue: null,
          cancelled: null,
          summary: emptySummary(id),
          final: false,
          seenLive: !first,
          knowledge: 'unknown',
        };
        this.entries.set(id, e);
      }
      const live = queueView.live.get(id) ?? queueView.extra.get(id);
      let gone = false;
      if (live !== undefined) {
        e.queue = live;
      } else if (queueView.ok && this.options.queue !== null) {
        const info = await this.jobInfo(id);
        if (info === null) {
          gone = true;
          e.queue = null;
        } else {
          e.queue = info;
        }
      }
      e.cancelled = queueView.cancelled.get(id) ?? e.cancelled;
      e.jobFile ??= parseJobRecord(await this.source.jobRecord(id));
      if (e.reader === null && (e.queue?.phase !== 'queued' || isNew)) {
        e.reader = await this.source.reader(id);
        if (e.reader !== null) this.touchReader(id);
      }
      await e.reader?.refresh();
      if (gone && e.cancelled === null && e.reader === null && e.jobFile === null) {
        // Removed from the queue before it ever ran (cancelled by `@agent stop`, or expired): nothing
        // to show.
        this.entries.delete(id);
        continue;
      }
      // A later attempt of a best-of-N job has no queue entry of its own: it lives as long as its job.
      const attemptOf = e.jobFile?.attemptOf ?? null;
      if (attemptOf !== null) {
        const job = this.entries.get(attemptOf);
        // Not finalised while its job is unknown (an attempt listed before its job on a first pass).
        this.update(e, job !== undefined && job.summary.state === 'finished' ? 'gone' : 'known');
        continue;
      }
      this.update(e, gone ? 'gone' : queueView.ok ? 'known' : 'unknown');
    }
    this.evictReaders();
  }

  /** Recomputes a summary; tells listeners if it changed, and about a run that just finished. */
  private update(e: Entry, queueKnowledge: 'known' | 'gone' | 'unknown'): void {
    e.knowledge = queueKnowledge;
    const next = summarize(e, queueKnowledge);
    const changed = JSON.stringify(next) !== JSON.stringify(e.summary);
    const wasFinished = e.summary.state === 'finished';
    e.summary = next;
    if (next.state !== 'finished') e.seenLive = true;
    if (next.state === 'finished') e.final = true;
    if (changed) for (const l of this.changeListeners) l(next);
    if (next.state === 'finished' && !wasFinished && e.seenLive) {
      const finished: FinishedRun = {
        summary: next,
        attemptOf: e.jobFile?.attemptOf ?? null,
        reader: e.reader,
        queuedAt: next.queuedAt === null ? null : Date.parse(next.queuedAt),
        startedAt: next.startedAt === null ? null : Date.parse(next.startedAt),
      };
      for (const l of this.finishListeners) l(finished);
    }
  }

  private async readQueue(first: boolean): Promise<{
    ok: boolean;
    live: Map<string, QueueInfo>;
    extra: Map<string, QueueInfo>;
    cancelled: Map<string, CancelledRecord>;
  }> {
    const live = new Map<string, QueueInfo>();
    const extra = new Map<string, QueueInfo>();
    const cancelled = new Map<string, CancelledRecord>();
    const { queue, redis, prefix } = this.options;
    if (queue === null) return { ok: false, live, extra, cancelled };
    try {
      for (const job of await queue.getJobs(['active'])) addJob(live, job, 'active');
      for (const job of await queue.getJobs([...LIVE_STATES])) addJob(live, job, 'queued');
      if (redis !== null) {
        for (const key of await scanKeys(redis, `${prefix}:pending:*`)) {
          for (const raw of await redis.lrange(key, 0, -1)) {
            const p = pendingJobSchema.safeParse(parseJson(raw));
            if (p.success && !live.has(p.data.jobId)) {
              live.set(p.data.jobId, {
                phase: 'queued',
                payload: p.data.job,
                queuedAt: p.data.job.requestedAt,
                startedAt: null,
                finishedAt: null,
                outcome: null,
                prUrl: null,
              });
            }
          }
        }
        const records = await redis.hgetall(cancelledKey(prefix));
        for (const [id, raw] of Object.entries(records)) {
          const r = parseCancelled(raw);
          if (r !== null) cancelled.set(id, r);
        }
      }
      // Finished jobs without a folder on this host (workers elsewhere): all of them once, then the
      // newest every few seconds.
      if (first || Date.now() - this.lastFinishedScan > 5000) {
        this.lastFinishedScan = Date.now();
        const end = first ? 4999 : 49;
        for (const job of await queue.getJobs(['completed'], 0, end)) addJob(extra, job, 'finished');
        for (const job of await queue.getJobs(['failed'], 0, end)) addJob(extra, job, 'finished', true);
        for (const id of extra.keys()) if (this.entries.get(id)?.final === true) extra.delete(id);
      }
      this.redisUp = true;
      return { ok: true, live, extra, cancelled };
    } catch (error) {
      if (this.redisUp) this.options.logger.warn({ err: error }, 'the queue cannot be read');
      this.redisUp = false;
      return { ok: false, live, extra, cancelled };
    }
  }

  private async jobInfo(id: string): Promise<QueueInfo | null> {
    const queue = this.options.queue;
    if (queue === null) return null;
    const job = await queue.getJob(id);
    if (job === undefined) return null;
    const state = await job.getState();
    const phase: RunPhase =
      state === 'active' ? 'active' : state === 'completed' || state === 'failed' ? 'finished' : 'queued';
    return queueInfo(job, phase, state === 'failed');
  }

  private touchReader(id: string): void {
    const i = this.readerOrder.indexOf(id);
    if (i !== -1) this.readerOrder.splice(i, 1);
    this.readerOrder.push(id);
  }

  /** Drops the trajectories of finished runs nobody looked at recently (their summaries stay). */
  private evictReaders(): void {
    const keep = this.options.cachedTrajectories ?? 64;
    let excess = this.readerOrder.length - keep;
    for (let i = 0; i < this.readerOrder.length && excess > 0;) {
      const id = this.readerOrder[i] ?? '';
      const e = this.entries.get(id);
      if (e === undefined || e.final) {
        if (e !== undefined) e.reader = null;
        this.readerOrder.splice(i, 1);
        excess -= 1;
      } else {
        i += 1;
      }
    }
  }
}

function addJob(
  into: Map<string, QueueInfo>,
  job: Job<FixJob> | undefined,
  phase: RunPhase,
  failed = false,
): void {
  if (job?.id === undefined || !JOB_ID.test(job.id)) return;
  into.set(job.id, queueInfo(job, phase, failed));
}

function queueInfo(job: Job<FixJob>, phase: RunPhase, failed: boolean): QueueInfo {
  const parsed = fixJobSchema.safeParse(job.data);
  const result = job.returnvalue as unknown;
  const resultOutcome =
    typeof result === 'object' && result !== null && 'outcome' in result && typeof result.outcome === 'string'
      ? result.outcome
      : null;
  const pr =
    typeof result === 'object' && result !== null && 'pullRequest' in result ? result.pullRequest : null;
  const prUrl =
    typeof pr === 'object' && pr !== null && 'url' in pr && typeof pr.url === 'string' ? pr.url : null;
  return {
    phase,
    payload: parsed.success ? parsed.data : null,
    queuedAt: parsed.success ? parsed.data.requestedAt : iso(job.timestamp),
    startedAt: iso(job.processedOn),
    finishedAt: phase === 'finished' ? iso(job.finishedOn) : null,
    outcome: phase !== 'finished' ? null : failed ? 'failed' : resultOutcome,
    prUrl,
  };
}

function summarize(e: Entry, queueKnowledge: 'known' | 'gone' | 'unknown'): RunSummary {
  const payload = e.jobFile?.payload ?? e.queue?.payload ?? e.cancelled?.payload ?? null;
  const base = e.reader?.base ?? null;
  const source = parseSource(base?.task.source);
  const state = e.reader?.state ?? null;
  const outcomeEvent = state?.outcome ?? null;
  let phase: RunPhase;
  if (e.cancelled !== null && (e.queue === null || e.queue.phase !== 'active')) phase = 'finished';
  else if (e.queue !== null) phase = e.queue.phase;
  else if (outcomeEvent !== null) phase = 'finished';
  // Known to the files only: gone from a queue we can read means it ended (or was lost) long ago.
  else if (queueKnowledge === 'gone') phase = 'finished';
  else phase = e.reader === null ? 'queued' : 'active';
  const outcome =
    outcomeEvent?.outcome ??
    (e.cancelled !== null && phase === 'finished' ? 'cancelled' : null) ??
    e.queue?.outcome ??
    null;
  const startedAt = e.jobFile?.startedAt ?? e.queue?.startedAt ?? base?.createdAt ?? null;
  const finishedAt =
    phase !== 'finished'
      ? null
      : (e.queue?.finishedAt ?? outcomeEvent?.ts ?? e.cancelled?.at ?? e.reader?.events.at(-1)?.ts ?? null);
  const durationMs =
    phase === 'finished' && startedAt !== null && finishedAt !== null
      ? Math.max(0, Date.parse(finishedAt) - Date.parse(startedAt))
      : state !== null && state.elapsedMs > 0
        ? state.elapsedMs
        : null;
  return {
    id: e.id,
    repo: payload === null ? (source?.repo ?? '') : `${payload.repo.owner}/${payload.repo.name}`,
    issue: payload?.issue.number ?? source?.issue ?? 0,
    pull: payload?.pull?.number ?? null,
    kind: payload?.kind ?? 'fix-issue',
    title: payload?.issue.title ?? base?.task.title ?? '',
    state: phase,
    outcome: phase === 'finished' ? outcome : (outcomeEvent?.outcome ?? null),
    steps: state?.steps ?? 0,
    tokens: state === null ? 0 : totalTokens(state.usage),
    costUsd: state === null ? 0 : Math.round(state.usd * 1e6) / 1e6,
    durationMs,
    queuedAt: payload?.requestedAt ?? e.queue?.queuedAt ?? e.cancelled?.queuedAt ?? null,
    startedAt: phase === 'queued' ? null : startedAt,
    finishedAt,
    lastEventId: e.reader?.lastEventId ?? 0,
    prUrl: e.queue?.prUrl ?? null,
    attempt: base?.attempt ?? null,
    approvedBy: payload?.trigger.approvedBy?.login ?? null,
    ciRound:
      payload?.ci == null
        ? null
        : {
            round: payload.ci.round,
            of: payload.ci.of,
            checks: payload.ci.checks.map((c) => c.name),
            preExisting: payload.ci.preExisting ?? [],
          },
  };
}

function emptySummary(id: string): RunSummary {
  return {
    id,
    repo: '',
    issue: 0,
    pull: null,
    kind: 'fix-issue',
    title: '',
    state: 'queued',
    outcome: null,
    steps: 0,
    tokens: 0,
    costUsd: 0,
    durationMs: null,
    queuedAt: null,
    startedAt: null,
    finishedAt: null,
    lastEventId: 0,
    prUrl: null,
    attempt: null,
    approvedBy: null,
    ciRound: null,
  };
}

/** Newest first: by the time the request was queued (or the run started), then by id. */
export type RunPosition = Pick<RunSummary, 'queuedAt' | 'startedAt' | 'id'>;

export function compareRuns(a: RunPosition, b: RunPosition): number {
  const ka = sortKey(a);
  const kb = sortKey(b);
  if (ka !== kb) return ka < kb ? 1 : -1;
  return a.id < b.id ? 1 : a.id > b.id ? -1 : 0;
}

export function sortKey(s: RunPosition): string {
  return s.queuedAt ?? s.startedAt ?? '';
}

/** `owner/repo#12` → repo and issue (trajectories name their source so). */
function parseSource(source: string | undefined): { repo: string; issue: number } | null {
  const m = /^([\w.-]+\/[\w.-]+)#(\d+)$/.exec(source ?? '');
  return m === null ? null : { repo: m[1] ?? '', issue: Number(m[2]) };
}

function parseJobRecord(json: unknown): JobFile | null {
  if (typeof json !== 'object' || json === null) return null;
  const payload = 'payload' in json ? fixJobSchema.safeParse(json.payload) : null;
  const startedAt = 'startedAt' in json && typeof json.startedAt === 'string' ? json.startedAt : null;
  const attemptOf =
    'attemptOf' in json && typeof json.attemptOf === 'string' && JOB_ID.test(json.attemptOf)
      ? json.attemptOf
      : null;
  return { payload: payload?.success === true ? payload.data : null, startedAt, attemptOf };
}

function parseCancelled(raw: string): CancelledRecord | null {
  const json = parseJson(raw);
  if (typeof json !== 'object' || json === null) return null;
  const at = 'at' in json && typeof json.at === 'string' ? json.at : null;
  const by = 'by' in json && typeof json.by === 'string' ? json.by : 'someone';
  if (at === null) return null;
  const payload = 'payload' in json ? fixJobSchema.safeParse(json.payload) : null;
  const queuedAt = 'queuedAt' in json && typeof json.queuedAt === 'string' ? json.queuedAt : null;
  return { at, by, payload: payload?.success === true ? payload.data : null, queuedAt };
}

function parseJson(raw: string): unknown {
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    return null;
  }
}

async function scanKeys(redis: Redis, pattern: string): Promise<string[]> {
  const out: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 500);
    cursor = next;
    out.push(...keys);
  } while (cursor !== '0');
  return out;
}

function iso(ms: number | undefined): string | null {
  return ms === undefined || !Number.isFinite(ms) || ms <= 0 ? null : new Date(ms).toISOString();
}
