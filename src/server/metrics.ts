import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { eventSchemas } from '../events/schema.js';
import { LATENCY_BUCKETS, START_BUCKETS, STEP_BUCKETS, WAIT_BUCKETS } from '../telemetry/metric-buckets.js';
import type { FinishedRun } from './runs.js';

export interface QueueSources {
  readonly queues: readonly Queue[];
  readonly redis: Redis | null;
  readonly prefix: string;
}

/**
 * The server's Prometheus registry. Run metrics are recorded once per run, when the run index sees it
 * finish (ids it has recorded are remembered, so a run is never counted twice); queue depth is read
 * at scrape time. Default process metrics are included.
 */
export class ServerMetrics {
  readonly registry = new Registry();
  private readonly recorded = new Set<string>();
  private readonly runs: Counter<'outcome'>;
  private readonly stepDuration: Histogram;
  private readonly modelLatency: Histogram;
  private readonly tokens: Counter<'kind'>;
  private readonly cost: Counter;
  private readonly sandboxStart: Histogram;
  private readonly queueWait: Histogram;

  constructor(sources: QueueSources) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    this.runs = new Counter({
      name: 'issue_agent_runs_total',
      help: 'Runs that finished, by outcome (failed also for jobs that failed without an outcome event).',
      labelNames: ['outcome'],
      registers,
    });
    this.stepDuration = new Histogram({
      name: 'issue_agent_step_duration_seconds',
      help: 'Wall time of one agent step: from a model response to the next one (or the outcome).',
      buckets: STEP_BUCKETS,
      registers,
    });
    this.modelLatency = new Histogram({
      name: 'issue_agent_model_latency_seconds',
      help: 'Latency of answered model calls (model_response.latencyMs).',
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.tokens = new Counter({
      name: 'issue_agent_tokens_total',
      help: 'Model tokens of finished runs, by kind (input, output, cache_read, cache_write).',
      labelNames: ['kind'],
      registers,
    });
    this.cost = new Counter({
      name: 'issue_agent_cost_usd_total',
      help: 'Model cost of finished runs in US dollars.',
      registers,
    });
    this.sandboxStart = new Histogram({
      name: 'issue_agent_sandbox_start_seconds',
      help:
        'From the worker starting the job to the trajectory base state (clone, sandbox copy and sandbox start); ' +
        'derived from run timing: the event log has no sandbox-start event.',
      buckets: START_BUCKETS,
      registers,
    });
    this.queueWait = new Histogram({
      name: 'issue_agent_queue_wait_seconds',
      help: 'From the request being queued to a worker starting the job.',
      buckets: WAIT_BUCKETS,
      registers,
    });
    const queueDepth = new Gauge({
      name: 'issue_agent_queue_depth',
      help: 'Jobs in each queue by state, read at scrape time (fix/pending: requests waiting behind a running job).',
      labelNames: ['queue', 'state'],
      registers,
      collect: async () => {
        queueDepth.reset();
        for (const q of sources.queues) {
          const counts = await q.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'failed');
          for (const [state, n] of Object.entries(counts)) queueDepth.set({ queue: q.name, state }, n);
        }
        if (sources.redis !== null) {
          let pending = 0;
          let cursor = '0';
          do {
            const [next, keys] = await sources.redis.scan(
              cursor,
              'MATCH',
              `${sources.prefix}:pending:*`,
              'COUNT',
              500,
            );
            cursor = next;
            for (const key of keys) pending += await sources.redis.llen(key);
          } while (cursor !== '0');
          queueDepth.set({ queue: 'fix', state: 'pending' }, pending);
        }
      },
    });
    // Every outcome starts at 0, so a rate over the series exists before the first run of a kind.
    for (const outcome of eventSchemas.outcome.shape.outcome.options) this.runs.inc({ outcome }, 0);
  }

  /** Records a finished run once. */
  recordRun(run: FinishedRun): void {
    if (this.recorded.has(run.summary.id)) return;
    this.recorded.add(run.summary.id);
    // A later attempt of a best-of-N job is part of its job's run (which has the job's outcome and
    // queue wait); its steps, model calls, tokens and cost are counted below all the same.
    if (run.attemptOf === null) this.runs.inc({ outcome: run.summary.outcome ?? 'unknown' });
    if (
      run.attemptOf === null &&
      run.queuedAt !== null &&
      run.startedAt !== null &&
      run.startedAt >= run.queuedAt
    ) {
      this.queueWait.observe((run.startedAt - run.queuedAt) / 1000);
    }
    const reader = run.reader;
    if (reader === null) return;
    const events = reader.events;
    const base = reader.base;
    if (base !== null && run.startedAt !== null && !events.some((e) => e.kind === 'run_resumed')) {
      const s = (Date.parse(base.createdAt) - run.startedAt) / 1000;
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
      // A model turn, or a summary call made to condense the context: both are billed.
      const billed = e.kind === 'model_response' ? e : e.kind === 'condensation' ? (e.call ?? null) : null;
      if (billed !== null) {
        this.tokens.inc({ kind: 'input' }, billed.usage.inputTokens);
        this.tokens.inc({ kind: 'output' }, billed.usage.outputTokens);
        this.tokens.inc({ kind: 'cache_read' }, billed.usage.cacheReadTokens);
        this.tokens.inc({ kind: 'cache_write' }, billed.usage.cacheWriteTokens);
        if (billed.usd > 0) this.cost.inc(billed.usd);
      }
    }
  }

  async text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
