/**
 * `npm run bench -- --webhooks`: webhook acknowledgement latency and throughput of the GitHub App
 * (issue 4). The App runs as its own process (Probot server + in-process intake worker, no fix
 * workers) against the GitHub simulator and a private redis-server; signed deliveries are built
 * before the clock starts and sent open-loop at a fixed rate over keep-alive HTTP. Latency runs from
 * each delivery's scheduled send time to the end of its response, so a slow App cannot hide queueing
 * by slowing the sender (no coordinated omission). After each run every 2xx delivery is looked up in
 * Redis as an intake job: `lost` = accepted − found. One run, quantiles; no assertion on time.
 *
 * Also runnable alone: `node --import tsx bench/webhook-ack.ts`.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { loadavg } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { Worker, isMainThread, parentPort } from 'node:worker_threads';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { INTAKE_QUEUE, intakeJobId, redisOptions } from '../src/queue/queues.js';
import { makeFixtureRepo } from '../test/support/fixture-repo.js';
import { startGitHubSimulator, type GitHubSim } from '../test/support/github-sim/index.js';
import { reply, startModelSimulator } from '../src/model-sim/index.js';
import { startPipeline, type Pipeline } from '../test/support/pipeline.js';
import { startRedis } from '../test/support/redis-server.js';

const OWNER = 'acme';
const REPO = 'calc';
const MAINTAINER = 'maria';
const MODEL_KEY = 'sk-ant-bench-model-key-0123456789abcdef';
/** Issues the deliveries are spread over. */
const ISSUES = 200;
/** Labels that are not the App's (`agent`): every delivery is enqueued, then ignored by intake. */
const OTHER_LABELS = ['bug', 'triage', 'needs-info'];
const COMMENT_BODY = 'Thanks, this looks right to me. Merging after CI.';
const TARGET_P99_MS = 50;

/**
 * `paused`: issues.labeled with the intake queue paused during the send window, so only the ack path
 * (parse + one Redis add) runs; the backlog is processed afterwards. `labeled`: the same deliveries with
 * the intake processor running alongside, as in production. `comment`: issue_comment.created without
 * an '@', dropped by the webhook handler before Redis.
 */
export type Scenario = 'paused' | 'labeled' | 'comment';
export const SCENARIOS: readonly Scenario[] = ['paused', 'labeled', 'comment'];

/** One step of the rate ladder: deliveries per second for this many seconds. */
export interface Step {
  readonly rate: number;
  readonly seconds: number;
}

/** 200/s for 10 s is the target; the higher steps look for where p99 or throughput gives out. */
export const DEFAULT_STEPS: readonly Step[] = [
  { rate: 200, seconds: 10 },
  { rate: 400, seconds: 5 },
  { rate: 800, seconds: 5 },
  { rate: 1600, seconds: 3 },
  { rate: 3200, seconds: 2 },
];

export interface WebhookBenchOptions {
  readonly steps?: readonly Step[];
  readonly scenarios?: readonly Scenario[];
  /**
   * Extra environment for the App process, for side experiments (e.g. ISSUE_AGENT_INTAKE_CONCURRENCY).
   * Not LOG_LEVEL above info: startPipeline waits for an info line to know the App is up.
   */
  readonly appEnv?: Record<string, string>;
}

interface Prepared {
  readonly id: string;
  readonly headers: Record<string, string>;
  readonly body: string;
}

interface Sample {
  readonly status: number;
  /** ms since the sender's clock started (its own thread's clock). */
  readonly scheduled: number;
  readonly sent: number;
  readonly end: number;
}

/** Main thread → sender thread: one open-loop run. */
interface SendOrder {
  readonly url: string;
  readonly rate: number;
  readonly hooks: readonly Prepared[];
}

export interface RunResult {
  readonly scenario: Scenario;
  readonly rate: number;
  readonly seconds: number;
  readonly sent: number;
  /** Sends per second between the first and the last send. */
  readonly sendRate: number;
  /** 2xx responses per second, from the first scheduled send to the last response. */
  readonly acceptedRate: number;
  readonly accepted: number;
  /** 202 "still processing": Probot's 9 s timeout; 2xx but not known to be durable. */
  readonly stillProcessing: number;
  readonly non2xx: number;
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly max: number;
  /** Actual send time − scheduled send time, p99: how late the sender itself was. */
  readonly sendLagP99: number;
  /** Sender thread event-loop delay p99 during the run. */
  readonly senderLoopP99: number;
  /** Main bench thread (GitHub simulator) event-loop delay p99 during the run. */
  readonly simLoopP99: number;
  /** 2xx deliveries whose intake job is in Redis. */
  readonly found: number;
  /** accepted − found (labeled); 0 for comments, whose `found` should be 0 (dropped before Redis). */
  readonly lost: number;
  /** App CPU (user + system) over the send window, in % of one core. */
  readonly appCpuPct: number;
  /** Bench process CPU (simulator + sender thread) over the send window, in % of one core. */
  readonly benchCpuPct: number;
  /** App CPU per delivery over the send window only, ms. */
  readonly appCpuPerAckMs: number;
  /** App CPU per delivery from the first send until intake drained, ms. */
  readonly appCpuPerDeliveryMs: number;
  /** redis-server CPU per delivery over the same span, ms. */
  readonly redisCpuPerDeliveryMs: number;
  /** From the last response until the intake queue had nothing waiting or active, ms. */
  readonly drainMs: number;
  /** Intake jobs completed per second: from the first send until the queue was idle; `paused`: over the drain only. */
  readonly intakeRate: number;
  /**
   * CPU of the git processes the simulator spawned per delivery (it runs git for every contents read),
   * until intake drained, ms: load on the same 2 cores that real GitHub would not add.
   */
  readonly simGitCpuPerDeliveryMs: number;
  /** Bytes the App wrote to its log per delivery over the send window (pino-http logs every request). */
  readonly logBytesPerDelivery: number;
  /** Requests the App made to the GitHub simulator per delivery. */
  readonly apiCallsPerDelivery: number;
  readonly intakeFailed: number;
}

function quantile(xs: readonly number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? NaN;
}

const CLK_TCK = ((): number => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/**
 * CPU of a process from /proc, ms: its own (utime + stime) or that of its reaped children (cutime +
 * cstime); NaN where /proc is not there.
 */
function processCpuMs(pid: number | 'self' | undefined, which: 'own' | 'children' = 'own'): number {
  if (pid === undefined) return NaN;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces) start after the last ')', at field 3.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const at = which === 'own' ? 11 : 13;
    return ((Number(fields[at]) + Number(fields[at + 1])) * 1000) / CLK_TCK;
  } catch {
    return NaN;
  }
}

async function redisCpuMs(redis: Redis): Promise<number> {
  const info = await redis.info('cpu');
  const get = (k: string): number => Number(new RegExp(`^${k}:([\\d.]+)`, 'm').exec(info)?.[1] ?? NaN);
  return (get('used_cpu_user') + get('used_cpu_sys')) * 1000;
}

function prepare(sim: GitHubSim, scenario: Scenario, n: number, offset: number): Prepared[] {
  const out: Prepared[] = [];
  for (let k = 0; k < n; k++) {
    const issue = 1 + ((offset + k) % ISSUES);
    const hook =
      scenario !== 'comment'
        ? sim.buildWebhook('issues', 'labeled', {
            owner: OWNER,
            repo: REPO,
            issue,
            sender: MAINTAINER,
            label: OTHER_LABELS[(offset + k) % OTHER_LABELS.length] ?? 'bug',
          })
        : sim.buildWebhook('issue_comment', 'created', {
            owner: OWNER,
            repo: REPO,
            issue,
            sender: MAINTAINER,
            comment: { body: COMMENT_BODY },
          });
    out.push({
      id: hook.id,
      headers: { ...hook.headers, 'content-length': String(Buffer.byteLength(hook.body)) },
      body: hook.body,
    });
  }
  return out;
}

function send(
  agent: Agent,
  url: URL,
  hook: { readonly headers: Record<string, string>; readonly body: Buffer },
  scheduled: number,
): Promise<Sample> {
  return new Promise((resolve) => {
    const sent = performance.now();
    let settled = false;
    const finish = (status: number): void => {
      if (settled) return;
      settled = true;
      resolve({ status, scheduled, sent, end: performance.now() });
    };
    const req = request(
      {
        agent,
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        headers: hook.headers,
      },
      (res) => {
        res.resume();
        res.once('end', () => {
          finish(res.statusCode ?? 0);
        });
        res.once('error', () => {
          finish(0);
        });
      },
    );
    req.setTimeout(30_000, () => req.destroy(new Error('timeout')));
    req.once('error', () => {
      finish(0);
    });
    req.end(hook.body);
  });
}

/**
 * Sends `hooks` at `rate` per second by the clock: delivery i is due at t0 + i/rate whether or not
 * earlier ones have been answered. Timers fire at ~1 ms granularity, so at high rates a wake-up sends
 * every delivery that is due; latency is measured from the due time, so this lateness counts against
 * the App's number, not for it.
 */
async function openLoop(order: SendOrder): Promise<{ samples: Sample[]; loopP99: number }> {
  const url = new URL(order.url);
  // Encoded before the clock starts.
  const hooks = order.hooks.map((h) => ({ headers: h.headers, body: Buffer.from(h.body) }));
  const agent = new Agent({ keepAlive: true });
  const loop = monitorEventLoopDelay({ resolution: 1 });
  const interval = 1000 / order.rate;
  const pending: Promise<Sample>[] = [];
  const t0 = performance.now() + 5;
  loop.enable();
  try {
    let i = 0;
    while (i < hooks.length) {
      const now = performance.now();
      while (i < hooks.length && t0 + i * interval <= now) {
        const hook = hooks[i];
        if (hook !== undefined) pending.push(send(agent, url, hook, t0 + i * interval));
        i++;
      }
      if (i < hooks.length) await delay(Math.max(0, t0 + i * interval - performance.now()));
    }
    const samples = (await Promise.all(pending)).map((x) => ({
      status: x.status,
      scheduled: x.scheduled - t0,
      sent: x.sent - t0,
      end: x.end - t0,
    }));
    return { samples, loopP99: loop.percentile(99) / 1e6 };
  } finally {
    loop.disable();
    agent.destroy();
  }
}

/**
 * The sender runs in its own thread so that its timers and response timestamps do not wait behind
 * the GitHub simulator, which shares this process and answers the App's intake API calls.
 */
class Sender {
  private readonly worker: Worker;

  constructor() {
    const api = import.meta.resolve('tsx/esm/api');
    // Worker threads do not inherit tsx's loader on Node 20; load this file through tsx's API.
    const code = `import(${JSON.stringify(api)}).then((t) => t.tsImport(${JSON.stringify(import.meta.url)}, ${JSON.stringify(import.meta.url)}))`;
    this.worker = new Worker(code, { eval: true });
  }

  run(order: SendOrder): Promise<{ samples: Sample[]; loopP99: number }> {
    return new Promise((resolve, reject) => {
      const onError = (error: Error): void => {
        this.worker.off('message', onMessage);
        reject(error);
      };
      const onMessage = (m: { samples: Sample[]; loopP99: number }): void => {
        this.worker.off('error', onError);
        resolve(m);
      };
      this.worker.once('message', onMessage);
      this.worker.once('error', onError);
      this.worker.postMessage(order);
    });
  }

  async close(): Promise<void> {
    await this.worker.terminate();
  }
}

if (!isMainThread && parentPort !== null) {
  const port = parentPort;
  port.on('message', (order: SendOrder) => {
    openLoop(order).then(
      (result) => {
        port.postMessage(result);
      },
      (error: unknown) => {
        throw error;
      },
    );
  });
}

async function waitForIntakeIdle(queue: Queue, timeoutMs = 180_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const c = await queue.getJobCounts('wait', 'active', 'delayed', 'prioritized');
    const busy = (c.wait ?? 0) + (c.active ?? 0) + (c.delayed ?? 0) + (c.prioritized ?? 0);
    if (busy === 0) return;
    if (Date.now() > deadline) throw new Error(`intake still has ${busy} jobs after ${timeoutMs} ms`);
    await delay(50);
  }
}

async function countFound(queue: Queue, ids: readonly string[]): Promise<number> {
  let found = 0;
  for (let i = 0; i < ids.length; i += 250) {
    const jobs = await Promise.all(ids.slice(i, i + 250).map((id) => queue.getJob(intakeJobId(id))));
    found += jobs.filter((j) => j !== undefined).length;
  }
  return found;
}

interface Env {
  readonly sender: Sender;
  readonly sim: GitHubSim;
  readonly pipeline: Pipeline;
  readonly queue: Queue;
  readonly redis: Redis;
}

let prepared = 0;

async function runOnce(env: Env, scenario: Scenario, step: Step): Promise<RunResult> {
  const n = Math.round(step.rate * step.seconds);
  const hooks = prepare(env.sim, scenario, n, prepared);
  prepared += n;
  await waitForIntakeIdle(env.queue);
  const failedBefore = await env.queue.getFailedCount();
  const pid = env.pipeline.app.child.pid;
  const simLoop = monitorEventLoopDelay({ resolution: 1 });
  const apiCalls0 = env.sim.requests.length;
  const appCpu0 = processCpuMs(pid);
  const gitCpu0 = processCpuMs('self', 'children');
  const log0 = statSync(env.pipeline.app.log).size;
  const redisCpu0 = await redisCpuMs(env.redis);
  const benchCpu0 = process.cpuUsage();
  if (scenario === 'paused') await env.queue.pause();
  const windowStart = performance.now();
  simLoop.enable();
  const { samples, loopP99 } = await env.sender.run({ url: env.pipeline.webhookUrl, rate: step.rate, hooks });
  simLoop.disable();
  const appCpu1 = processCpuMs(pid);
  const log1 = statSync(env.pipeline.app.log).size;
  const windowEnd = performance.now();
  const benchCpu = process.cpuUsage(benchCpu0);
  if (scenario === 'paused') await env.queue.resume();
  await waitForIntakeIdle(env.queue);
  const drainMs = performance.now() - windowEnd;
  const appCpu2 = processCpuMs(pid);
  const gitCpu2 = processCpuMs('self', 'children');
  const redisCpu2 = await redisCpuMs(env.redis);
  const apiCalls = env.sim.requests.length - apiCalls0;

  const firstScheduled = Math.min(...samples.map((s) => s.scheduled));
  const lastEnd = Math.max(...samples.map((s) => s.end));
  const sends = samples.map((s) => s.sent);
  const sendSpan = Math.max(...sends) - Math.min(...sends);
  const ok = samples
    .map((s, i) => ({ s, id: hooks[i]?.id ?? '' }))
    .filter(({ s }) => s.status >= 200 && s.status < 300);
  const latencies = samples.map((s) => s.end - s.scheduled);
  const found = await countFound(
    env.queue,
    scenario === 'comment' ? hooks.map((h) => h.id) : ok.map((o) => o.id),
  );
  return {
    scenario,
    rate: step.rate,
    seconds: step.seconds,
    sent: n,
    sendRate: sendSpan > 0 ? ((n - 1) * 1000) / sendSpan : NaN,
    acceptedRate: (ok.length * 1000) / (lastEnd - firstScheduled),
    accepted: ok.length,
    stillProcessing: ok.filter(({ s }) => s.status === 202).length,
    non2xx: n - ok.length,
    p50: quantile(latencies, 0.5),
    p90: quantile(latencies, 0.9),
    p99: quantile(latencies, 0.99),
    max: Math.max(...latencies),
    sendLagP99: quantile(
      samples.map((s) => s.sent - s.scheduled),
      0.99,
    ),
    senderLoopP99: loopP99,
    simLoopP99: simLoop.percentile(99) / 1e6,
    found,
    lost: scenario === 'comment' ? 0 : ok.length - found,
    appCpuPct: ((appCpu1 - appCpu0) * 100) / (windowEnd - windowStart),
    benchCpuPct: (benchCpu.user + benchCpu.system) / 10 / (windowEnd - windowStart),
    appCpuPerAckMs: (appCpu1 - appCpu0) / n,
    appCpuPerDeliveryMs: (appCpu2 - appCpu0) / n,
    redisCpuPerDeliveryMs: (redisCpu2 - redisCpu0) / n,
    drainMs,
    intakeRate:
      scenario === 'comment'
        ? NaN
        : (found * 1000) / (scenario === 'paused' ? drainMs : windowEnd - windowStart + drainMs),
    simGitCpuPerDeliveryMs: (gitCpu2 - gitCpu0) / n,
    logBytesPerDelivery: (log1 - log0) / n,
    apiCallsPerDelivery: apiCalls / n,
    intakeFailed: (await env.queue.getFailedCount()) - failedBefore,
  };
}

export function meets(r: RunResult): boolean {
  return (
    r.p99 <= TARGET_P99_MS &&
    r.lost === 0 &&
    (r.scenario !== 'comment' || r.found === 0) &&
    r.non2xx === 0 &&
    r.acceptedRate >= 0.95 * r.rate
  );
}

/** Runs each scenario up the ladder; after the target step, stops at the first step that misses. */
export async function runWebhookBench(options: WebhookBenchOptions = {}): Promise<RunResult[]> {
  const steps = options.steps ?? DEFAULT_STEPS;
  const cleanups: (() => Promise<void> | void)[] = [];
  const results: RunResult[] = [];
  try {
    const fixture = makeFixtureRepo('node-calc');
    cleanups.push(() => {
      fixture.cleanup();
    });
    const redisServer = await startRedis();
    cleanups.push(() => redisServer.stop());
    // Response checking off: the simulator shares this process with the sender; keep it light.
    const sim = await startGitHubSimulator({ checkResponses: false });
    cleanups.push(() => sim.close());
    await sim.createRepo({ owner: OWNER, name: REPO, sourceDir: fixture.dir });
    sim.addUser({ login: MAINTAINER });
    sim.setPermission(OWNER, REPO, MAINTAINER, 'write');
    for (let i = 0; i < ISSUES; i++) {
      sim.createIssue(OWNER, REPO, { title: `Bench issue ${i + 1}`, body: 'Bench.', author: MAINTAINER });
    }
    const model = await startModelSimulator({
      apiKey: MODEL_KEY,
      policy: () => reply().text('not used: no fix worker runs in this benchmark'),
    });
    cleanups.push(() => model.close());
    const pipeline = await startPipeline({
      sim,
      modelUrl: model.url,
      modelKey: MODEL_KEY,
      redisUrl: redisServer.url,
      workers: 0,
      ...(options.appEnv === undefined ? {} : { env: options.appEnv }),
    });
    cleanups.push(() => pipeline.stop());
    const queue = new Queue(INTAKE_QUEUE, {
      connection: redisOptions(redisServer.url, 'bench-intake-check'),
      prefix: pipeline.prefix,
    });
    cleanups.push(() => queue.close());
    const redis = new Redis(redisOptions(redisServer.url, 'bench-info'));
    cleanups.push(() => {
      redis.disconnect();
    });
    const sender = new Sender();
    cleanups.push(() => sender.close());
    const env: Env = { sender, sim, pipeline, queue, redis };

    // Warm-up, not reported: JIT, zod schemas, the installation token, Redis connections.
    for (const scenario of ['labeled', 'comment'] as const) {
      const warm = await runOnce(env, scenario, { rate: 100, seconds: 2 });
      // Correctness only: a cold App is slow by design, its latency is not judged here.
      if (warm.non2xx > 0 || warm.lost > 0 || (scenario === 'comment' && warm.found > 0)) {
        throw new Error(
          `warm-up ${scenario}: ${warm.non2xx} non-2xx, ${warm.lost} lost, ${warm.found} found\n` +
            pipeline.logs().slice(-4000),
        );
      }
    }

    for (const scenario of options.scenarios ?? SCENARIOS) {
      for (const [i, step] of steps.entries()) {
        const r = await runOnce(env, scenario, step);
        results.push(r);
        if (i > 0 && !meets(r)) break;
        await delay(1000);
      }
    }
    return results;
  } finally {
    for (const stop of cleanups.reverse()) await stop();
  }
}

const f1 = (x: number): string => (Number.isFinite(x) ? x.toFixed(1) : '–');
const f2 = (x: number): string => (Number.isFinite(x) ? x.toFixed(2) : '–');

function printTable(
  rows: readonly RunResult[],
  columns: readonly [string, (r: RunResult) => string][],
): void {
  console.log(`| ${columns.map(([h]) => h).join(' | ')} |`);
  console.log(`| ${columns.map(() => '---').join(' | ')} |`);
  for (const r of rows) console.log(`| ${columns.map(([, cell]) => cell(r)).join(' | ')} |`);
}

export function printWebhookResults(results: readonly RunResult[]): void {
  const label: Record<Scenario, string> = {
    paused: '`issues.labeled`, intake paused (ack path only)',
    labeled: '`issues.labeled`, intake running',
    comment: '`issue_comment.created`, no @ (dropped)',
  };
  printTable(results, [
    ['deliveries', (r) => label[r.scenario]],
    ['rate × s', (r) => `${r.rate} × ${r.seconds}`],
    ['p50 ms', (r) => f1(r.p50)],
    ['p90 ms', (r) => f1(r.p90)],
    ['p99 ms', (r) => f1(r.p99)],
    ['max ms', (r) => f1(r.max)],
    ['sent/s', (r) => f1(r.sendRate)],
    ['accepted/s', (r) => f1(r.acceptedRate)],
    ['non-2xx', (r) => String(r.non2xx)],
    ['lost', (r) => (r.scenario === 'comment' ? 'n/a' : String(r.lost))],
    ['App CPU %', (r) => f1(r.appCpuPct)],
    ['meets', (r) => (meets(r) ? 'yes' : 'no')],
  ]);
  console.log('\nPer run, details:\n');
  printTable(results, [
    ['deliveries', (r) => r.scenario],
    ['rate', (r) => String(r.rate)],
    ['accepted (202)', (r) => `${r.accepted} (${r.stillProcessing})`],
    ['intake jobs found', (r) => String(r.found)],
    ['intake jobs/s', (r) => f1(r.intakeRate)],
    ['intake drain ms', (r) => String(Math.round(r.drainMs))],
    ['intake failed', (r) => String(r.intakeFailed)],
    ['API calls / delivery', (r) => f2(r.apiCallsPerDelivery)],
    ['App CPU ms / delivery, window', (r) => f2(r.appCpuPerAckMs)],
    ['App CPU ms / delivery, until drained', (r) => f2(r.appCpuPerDeliveryMs)],
    ['Redis CPU ms / delivery', (r) => f2(r.redisCpuPerDeliveryMs)],
    ['sim git CPU ms / delivery', (r) => f2(r.simGitCpuPerDeliveryMs)],
    ['App log bytes / delivery', (r) => String(Math.round(r.logBytesPerDelivery))],
    ['bench CPU %', (r) => f1(r.benchCpuPct)],
    ['send lag p99 ms', (r) => f1(r.sendLagP99)],
    ['sender loop p99 ms', (r) => f1(r.senderLoopP99)],
    ['sim loop p99 ms', (r) => f1(r.simLoopP99)],
  ]);
}

/** Runs the ladder and prints the tables (`npm run bench -- --webhooks`). */
export async function webhookBench(): Promise<void> {
  const load = (): string =>
    loadavg()
      .map((x) => x.toFixed(2))
      .join(' ');
  const before = load();
  const results = await runWebhookBench();
  console.log(`\nGitHub App webhooks (issue 4), load average before: ${before}, after: ${load()}:\n`);
  printWebhookResults(results);
}

if (
  isMainThread &&
  process.argv[1] !== undefined &&
  import.meta.url === pathToFileURL(process.argv[1]).href
) {
  await webhookBench();
}
