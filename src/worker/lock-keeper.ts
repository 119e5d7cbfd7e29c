import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import { redisOptions } from '../queue/queues.js';

/**
 * Renews the worker's job locks from a thread of its own, so that a job's work cannot starve them.
 *
 * BullMQ renews locks on the event loop that also runs the jobs: the harness, git on the host, the
 * redactor, the event store, every sandbox's output. On a loaded 2-core host (the repositories'
 * tests run there) that loop was seen blocked 5–19 s at a time, past 15–60 s locks, and the job ran
 * again from its log on another worker: correct, twice the work. This thread does nothing but a
 * timer and one Redis call per held lock, so it is runnable again within milliseconds of its timer
 * whatever the main loop is doing (measured in docs/benchmarks.md, "Lock renewal under load").
 *
 * Why not BullMQ's sandboxed processors (the processor in a child process or worker thread, the
 * locks renewed by the parent): a fix job is not a self-contained function of its JSON data. It uses
 * the process's run store, warm container pool, metrics and model factory, and its lost-lock
 * handling needs the job's own `extendLock` and the BullMQ cancellation signal; a SandboxedJob has
 * neither, so all of it would cross a message boundary. Moving the renewals instead of the job keeps
 * everything else as it is.
 *
 * BullMQ's own renewals go on as before (they are harmless duplicates); what this adds is a renewal
 * that does not wait for the main loop. A thread must not keep a job that its process can no longer
 * run, though: SIGSTOP, a crash or an OOM kill stop the thread with the process, and a main loop that
 * has not turned for MAX_LOOP_SILENCE_MS (a hang, not a slow moment) is taken as dead too: the thread
 * stops renewing and the lock lapses, so the job is handed over as it always was.
 */
export const MAX_LOOP_SILENCE_MS = 5 * 60_000;

export interface LockKeeperOptions {
  /** The BullMQ queue and key prefix of the jobs. */
  readonly queue: string;
  readonly prefix: string;
  readonly redisUrl: string;
  /** The lock duration each renewal sets; renewals come every third of it. */
  readonly lockDurationMs: number;
  /** How long the main loop may not turn before the thread lets its locks lapse. */
  readonly maxLoopSilenceMs?: number;
}

export interface HoldCallbacks {
  /** The lock was renewed (the thread's wall-clock time of the answer). */
  readonly renewed?: (atMs: number) => void;
  /** The lock is not this token's any more: another run has the job. */
  readonly refused: () => void;
}

/** How the renewing thread kept up: its own event-loop delay beside the main loop's. */
export interface KeeperStats {
  readonly renewals: number;
  /** The worst lateness of the thread's renewal timer, ms. */
  readonly keeperMaxDelayMs: number;
  /** The worst event-loop delay of the main thread over the same time, ms. */
  readonly mainMaxDelayMs: number;
}

type FromThread =
  | { readonly kind: 'ready' }
  | { readonly kind: 'renewed'; readonly token: string; readonly at: number }
  | { readonly kind: 'refused'; readonly token: string }
  | { readonly kind: 'error'; readonly token: string; readonly message: string }
  | { readonly kind: 'silent'; readonly silentMs: number }
  | { readonly kind: 'stats'; readonly seq: number; readonly renewals: number; readonly maxDelayMs: number }
  | { readonly kind: 'closed' };

// Plain CommonJS evaluated as the thread's code (no file to ship beside the build, as append-thread.ts),
// with no loader hooks (execArgv: []): bullmq is imported by the URL the main thread resolved.
const CODE = `
const { parentPort, workerData } = require('node:worker_threads');
const { monitorEventLoopDelay } = require('node:perf_hooks');
const w = workerData;
const held = new Map();
const beat = new BigInt64Array(w.beat);
const delay = monitorEventLoopDelay({ resolution: 10 });
delay.enable();
let renewals = 0;
let queue = null;
let silentSaid = false;
parentPort.on('message', (m) => {
  if (m.kind === 'hold') held.set(m.token, { id: m.id, job: null });
  else if (m.kind === 'release') held.delete(m.token);
  else if (m.kind === 'stats') {
    parentPort.postMessage({ kind: 'stats', seq: m.seq, renewals, maxDelayMs: delay.max / 1e6 });
    if (m.reset) { delay.reset(); renewals = 0; }
  } else if (m.kind === 'close') {
    clearInterval(timer);
    held.clear();
    const q = queue;
    queue = null;
    Promise.resolve(q === null ? undefined : q.close()).catch(() => undefined)
      .then(() => parentPort.postMessage({ kind: 'closed' }));
  }
});
const renew = (bullmq, token, h) => {
  h.job = h.job || new bullmq.Job(queue, 'lock', {}, {}, h.id);
  h.job.extendLock(token, w.duration).then(
    (r) => {
      if (!held.has(token)) return;
      renewals += 1;
      parentPort.postMessage(r === 1 ? { kind: 'renewed', token, at: Date.now() } : { kind: 'refused', token });
    },
    (e) => parentPort.postMessage({ kind: 'error', token, message: String(e && e.message || e) }),
  );
};
let timer = null;
import(w.bullmq).then((bullmq) => {
  queue = new bullmq.Queue(w.queue, {
    prefix: w.prefix,
    connection: { ...w.connection, retryStrategy: (n) => Math.min(200 * n, 2000) },
  });
  queue.on('error', () => undefined);
  timer = setInterval(() => {
    const silentMs = Date.now() - Number(Atomics.load(beat, 0));
    if (silentMs > w.maxSilence) {
      if (!silentSaid) parentPort.postMessage({ kind: 'silent', silentMs });
      silentSaid = true;
      return;
    }
    silentSaid = false;
    if (queue === null) return;
    for (const [token, h] of held) renew(bullmq, token, h);
  }, w.every);
  parentPort.postMessage({ kind: 'ready' });
});
`;

interface Held {
  readonly callbacks: HoldCallbacks;
}

/** One thread per worker process, renewing the lock of every job this process runs. */
export class LockKeeper {
  private readonly held = new Map<string, Held>();
  private readonly stats = new Map<number, (s: { renewals: number; maxDelayMs: number }) => void>();
  private readonly mainDelay: IntervalHistogram;
  private readonly beatTimer: NodeJS.Timeout;
  private seq = 0;
  private closed: Promise<void> | null = null;

  private constructor(
    private readonly thread: Worker,
    private readonly beat: BigInt64Array,
    private readonly onError: (message: string) => void,
  ) {
    this.mainDelay = monitorEventLoopDelay({ resolution: 10 });
    this.mainDelay.enable();
    // The main loop's heartbeat: the thread renews only while this moves (MAX_LOOP_SILENCE_MS).
    this.beatTimer = setInterval(() => {
      Atomics.store(this.beat, 0, BigInt(Date.now()));
    }, 500);
    this.beatTimer.unref();
    thread.on('message', (m: FromThread) => {
      this.receive(m);
    });
  }

  /** Starts the thread; resolves once it has its Redis client and its timer. */
  static async start(
    options: LockKeeperOptions,
    onError: (message: string) => void = () => undefined,
  ): Promise<LockKeeper> {
    const beat = new BigInt64Array(new SharedArrayBuffer(8));
    Atomics.store(beat, 0, BigInt(Date.now()));
    // A function (retryStrategy) cannot cross to the thread; it sets the same one there.
    const connection = Object.fromEntries(
      Object.entries(redisOptions(options.redisUrl, 'issue-agent-lock-keeper')).filter(
        ([key]) => key !== 'retryStrategy',
      ),
    );
    const thread = new Worker(CODE, {
      eval: true,
      execArgv: [],
      workerData: {
        bullmq: import.meta.resolve('bullmq'),
        queue: options.queue,
        prefix: options.prefix,
        connection,
        duration: options.lockDurationMs,
        every: Math.max(200, Math.floor(options.lockDurationMs / 3)),
        maxSilence: options.maxLoopSilenceMs ?? MAX_LOOP_SILENCE_MS,
        beat: beat.buffer,
      },
    });
    const keeper = new LockKeeper(thread, beat, onError);
    await new Promise<void>((resolve, reject) => {
      const onMessage = (m: FromThread): void => {
        if (m.kind !== 'ready') return;
        thread.off('message', onMessage);
        thread.off('error', reject);
        resolve();
      };
      thread.on('message', onMessage);
      thread.once('error', reject);
    });
    thread.on('error', (error) => {
      onError(`the lock renewal thread failed: ${error.message}`);
    });
    return keeper;
  }

  /** Renews the lock of a job with this run's token until the returned release is called. */
  hold(jobId: string, token: string, callbacks: HoldCallbacks): () => void {
    this.held.set(token, { callbacks });
    this.thread.postMessage({ kind: 'hold', id: jobId, token });
    return () => {
      if (!this.held.delete(token)) return;
      this.thread.postMessage({ kind: 'release', token });
    };
  }

  /** Delays of both loops since the last reset (with `reset`, starting a new period). */
  async measure(reset = false): Promise<KeeperStats> {
    this.seq += 1;
    const seq = this.seq;
    const mainMaxDelayMs = this.mainDelay.max / 1e6;
    if (reset) this.mainDelay.reset();
    const thread = await new Promise<{ renewals: number; maxDelayMs: number }>((resolve) => {
      this.stats.set(seq, resolve);
      this.thread.postMessage({ kind: 'stats', seq, reset });
    });
    return {
      renewals: thread.renewals,
      keeperMaxDelayMs: Math.round(thread.maxDelayMs),
      mainMaxDelayMs: Math.round(mainMaxDelayMs),
    };
  }

  /** Stops renewing (the locks lapse unless BullMQ renews them) and ends the thread. */
  async close(): Promise<void> {
    this.closed ??= (async () => {
      clearInterval(this.beatTimer);
      this.mainDelay.disable();
      this.held.clear();
      await new Promise<void>((resolve) => {
        const done = (m: FromThread): void => {
          if (m.kind === 'closed') resolve();
        };
        this.thread.on('message', done);
        this.thread.once('exit', () => {
          resolve();
        });
        this.thread.postMessage({ kind: 'close' });
      });
      await this.thread.terminate();
    })();
    return this.closed;
  }

  private receive(m: FromThread): void {
    switch (m.kind) {
      case 'renewed':
        this.held.get(m.token)?.callbacks.renewed?.(m.at);
        return;
      case 'refused':
        this.held.get(m.token)?.callbacks.refused();
        return;
      case 'error':
        // A Redis error is not a refusal: the lock may well still be ours.
        if (this.held.has(m.token)) this.onError(`a lock renewal failed: ${m.message}`);
        return;
      case 'silent':
        this.onError(
          `the event loop has not turned for ${Math.round(m.silentMs / 1000)} s: job locks are no longer renewed, so another worker can take the jobs`,
        );
        return;
      case 'stats': {
        const resolve = this.stats.get(m.seq);
        this.stats.delete(m.seq);
        resolve?.({ renewals: m.renewals, maxDelayMs: m.maxDelayMs });
        return;
      }
      case 'ready':
      case 'closed':
        return;
    }
  }
}
