import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { Redactor } from '../publish/redact.js';
import type { RunStorage } from '../events/run-storage.js';
import type { AgentEvent, BaseState } from '../events/schema.js';
import { TrajectoryReader } from '../events/trajectory-reader.js';
import { LATENCY_BUCKETS, START_BUCKETS, STEP_BUCKETS, WAIT_BUCKETS } from '../telemetry/metric-buckets.js';

/** A job as the metrics see it (BullMQ's timestamps, in ms). */
export interface JobTiming {
  readonly id: string;
  /** When the job was queued. */
  readonly queuedAt: number;
  /** When this worker started it. */
  readonly startedAt: number | null;
  /** Whether this start resumes an earlier run (a retry or a stall): its wait is not a queue wait. */
  readonly resumed: boolean;
}

const BLOCK_BUCKETS = [0.25, 0.5, 1, 2, 4, 8, 16, 32];

/**
 * The worker's own Prometheus metrics (`ISSUE_AGENT_WORKER_METRICS_PORT`): what this process saw,
 * so each worker host can be watched without the run server reading its job folders. Queue wait is
 * observed when a job starts; sandbox start, step and model latencies from a finished job's event
 * log; lost locks and event-loop blocks as they happen.
 */
export class WorkerMetrics {
  readonly registry = new Registry();
  private readonly queueWait: Histogram;
  private readonly sandboxStart: Histogram;
  private readonly stepDuration: Histogram;
  private readonly modelLatency: Histogram;
  private readonly jobs: Counter<'result'>;
  private readonly lostLocks: Counter;
  private readonly loopBlocks: Histogram;
  private readonly running = new Set<string>();

  constructor() {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    this.queueWait = new Histogram({
      name: 'issue_agent_worker_queue_wait_seconds',
      help: 'From a job being queued to this worker starting it (first starts only).',
      buckets: WAIT_BUCKETS,
      registers,
    });
    this.sandboxStart = new Histogram({
      name: 'issue_agent_worker_sandbox_start_seconds',
      help: 'From this worker starting a job to its trajectory base state: clone, workspace, sandbox and environment.',
      buckets: START_BUCKETS,
      registers,
    });
    this.stepDuration = new Histogram({
      name: 'issue_agent_worker_step_duration_seconds',
      help: 'Wall time of one agent step of jobs this worker ran: from a model response to the next one (or the outcome).',
      buckets: STEP_BUCKETS,
      registers,
    });
    this.modelLatency = new Histogram({
      name: 'issue_agent_worker_model_latency_seconds',
      help: 'Latency of answered model calls of jobs this worker ran.',
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.jobs = new Counter({
      name: 'issue_agent_worker_jobs_total',
      help: 'Job runs this worker ended: completed, failed, or lost (another worker holds the job now).',
      labelNames: ['result'],
      registers,
    });
    for (const result of ['completed', 'failed', 'lost']) this.jobs.inc({ result }, 0);
    this.lostLocks = new Counter({
      name: 'issue_agent_worker_lost_locks_total',
      help: 'Job locks this worker found taken over (it was frozen, or out of Redis reach, past the lock).',
      registers,
    });
    this.loopBlocks = new Histogram({
      name: 'issue_agent_worker_event_loop_blocked_seconds',
      help: 'Blocks of this process event loop long enough to delay lock renewals.',
      buckets: BLOCK_BUCKETS,
      registers,
    });
    const running = this.running;
    new Gauge({
      name: 'issue_agent_worker_jobs_active',
      help: 'Jobs this worker is running now.',
      registers,
      collect() {
        this.set(running.size);
      },
    });
  }

  jobStarted(job: JobTiming): void {
    this.running.add(job.id);
    if (!job.resumed && job.startedAt !== null && job.startedAt >= job.queuedAt)
      this.queueWait.observe((job.startedAt - job.queuedAt) / 1000);
  }

  /**
   * A run ended; `finished` says where its event log is, read for its timings when given. A log in
   * job folders is read read-only (opening it as a store would recover the folder: delete temp
   * files, name claims); one in PostgreSQL is read after this returns. Never a reason for the job to
   * count as failed.
   */
  jobEnded(
    job: JobTiming,
    result: 'completed' | 'failed' | 'lost',
    finished: { readonly storage: RunStorage; readonly runId: string; readonly location: string } | null,
  ): void {
    this.running.delete(job.id);
    this.jobs.inc({ result });
    if (finished === null) return;
    if (finished.storage.kind === 'file') {
      const reader = new TrajectoryReader(finished.location, new Redactor([]));
      try {
        reader.refreshSync();
      } catch {
        return;
      }
      if (reader.base !== null) this.observeRun(job, reader.base, reader.events);
      return;
    }
    finished.storage
      .open(finished.runId)
      .then((store) => {
        if (store !== null) this.observeRun(job, store.base, store.events);
      })
      .catch(() => undefined);
  }

  private observeRun(job: JobTiming, base: BaseState, events: readonly AgentEvent[]): void {
    if (!job.resumed && job.startedAt !== null && !events.some((e) => e.kind === 'run_resumed')) {
      const s = (Date.parse(base.createdAt) - job.startedAt) / 1000;
      if (Number.isFinite(s) && s >= 0) this.sandboxStart.observe(s);
    }
    let stepStart: number | null = null;
    for (const e of events) {
      const t = Date.parse(e.ts);
      if (e.kind === 'model_response' || e.kind === 'outcome') {
        if (stepStart !== null && t >= stepStart) this.stepDuration.observe((t - stepStart) / 1000);
        stepStart = e.kind === 'model_response' ? t : null;
      }
      if (e.kind === 'run_resumed') stepStart = null;
      if (e.kind === 'model_response') this.modelLatency.observe(e.latencyMs / 1000);
    }
  }

  lockLost(): void {
    this.lostLocks.inc();
  }

  eventLoopBlocked(ms: number): void {
    this.loopBlocks.observe(ms / 1000);
  }

  /** Serves `GET /metrics` on host:port; everything else is 404. */
  /**
   * Serves on the first port of `port`–`lastPort` that is free: workers that share a host's network
   * (compose's `--scale worker=N`) are given one range and take a port each. A port taken by
   * something else is skipped like one taken by a worker; any other failure, or no free port, throws.
   */
  async serveInRange(
    port: number,
    lastPort: number,
    host: string,
  ): Promise<{ readonly port: number; close(): Promise<void> }> {
    for (let p = port; ; p++) {
      try {
        return await this.serve(p, host);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE' || p >= lastPort) throw error;
      }
    }
  }

  async serve(port: number, host: string): Promise<{ readonly port: number; close(): Promise<void> }> {
    const server: Server = createServer((req, res) => {
      if ((req.method === 'GET' || req.method === 'HEAD') && (req.url ?? '').split('?')[0] === '/metrics') {
        this.registry.metrics().then(
          (text) => {
            res.writeHead(200, { 'content-type': this.registry.contentType, 'cache-control': 'no-store' });
            res.end(text);
          },
          () => {
            res.writeHead(500).end();
          },
        );
        return;
      }
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    return {
      port: (server.address() as AddressInfo).port,
      close: () =>
        new Promise<void>((resolve) => {
          server.close(() => {
            resolve();
          });
        }),
    };
  }
}
