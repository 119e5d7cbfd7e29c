import { Queue, type ConnectionOptions, type JobsOptions } from 'bullmq';
import { Redis } from 'ioredis';
import type { Trigger } from './trigger.js';
import type { FixJob } from './payloads.js';

export const INTAKE_QUEUE = 'intake';
export const FIX_QUEUE = 'fix';

/**
 * Connection settings from a redis:// URL. BullMQ gets options, not a client, so every Queue and
 * Worker owns (and closes) its connections. `maxRetriesPerRequest: null` makes commands wait through
 * a Redis restart instead of failing, which BullMQ workers need; RESP2 keeps BullMQ's reply-shape
 * assumptions whatever the client's default protocol.
 */
export function redisOptions(url: string, name: string) {
  const u = new URL(url);
  if (u.protocol !== 'redis:' && u.protocol !== 'rediss:') {
    throw new Error(`REDIS_URL must be redis:// or rediss://, got ${u.protocol}`);
  }
  const db = u.pathname.length > 1 ? Number(u.pathname.slice(1)) : 0;
  return {
    host: u.hostname,
    port: u.port === '' ? 6379 : Number(u.port),
    ...(u.username === '' ? {} : { username: decodeURIComponent(u.username) }),
    ...(u.password === '' ? {} : { password: decodeURIComponent(u.password) }),
    ...(u.protocol === 'rediss:' ? { tls: {} } : {}),
    db: Number.isInteger(db) ? db : 0,
    maxRetriesPerRequest: null,
    enableReadyCheck: true,
    protocol: 2 as const,
    connectionName: name,
    retryStrategy: (times: number) => Math.min(200 * times, 2000),
  };
}

/** A plain client (locks, markers) with the same settings. */
export function redisClient(url: string, name: string): Redis {
  return new Redis(redisOptions(url, name));
}

export function connectionOptions(url: string, name: string): ConnectionOptions {
  return redisOptions(url, name);
}

export { evaluateKey, fixJobId, intakeJobId, issueKey, jobTarget } from './ids.js';
import { intakeJobId } from './ids.js';

export interface Queues {
  readonly intake: Queue<Trigger>;
  readonly fix: Queue<FixJob>;
  close(): Promise<void>;
}

export interface QueueSettings {
  readonly redisUrl: string;
  readonly prefix: string;
  readonly jobAttempts: number;
  readonly retryBackoffMs: number;
}

export function intakeJobOptions(trigger: Trigger): JobsOptions {
  return {
    jobId: intakeJobId(trigger.deliveryId),
    attempts: 5,
    backoff: { type: 'exponential', delay: 1000 },
    // Kept a day so a redelivery of the same delivery id within it is recognised and dropped.
    removeOnComplete: { age: 24 * 3600, count: 100_000 },
    removeOnFail: { age: 7 * 24 * 3600 },
  };
}

/**
 * `target` is the issue or PR a job works on (issueKey): at most one job per target exists until it
 * ends, so duplicate deliveries and double labels collapse here.
 */
export function fixJobOptions(settings: QueueSettings, target: string, jobId: string): JobsOptions {
  return {
    jobId,
    attempts: settings.jobAttempts,
    backoff: { type: 'exponential', delay: settings.retryBackoffMs },
    deduplication: { id: target },
    removeOnComplete: { age: 30 * 24 * 3600 },
    removeOnFail: { age: 30 * 24 * 3600 },
  };
}

export function openQueues(settings: QueueSettings): Queues {
  const intake = new Queue<Trigger>(INTAKE_QUEUE, {
    connection: connectionOptions(settings.redisUrl, 'issue-agent-intake-queue'),
    prefix: settings.prefix,
  });
  const fix = new Queue<FixJob>(FIX_QUEUE, {
    connection: connectionOptions(settings.redisUrl, 'issue-agent-fix-queue'),
    prefix: settings.prefix,
  });
  return {
    intake,
    fix,
    close: async () => {
      await Promise.all([intake.close(), fix.close()]);
    },
  };
}
