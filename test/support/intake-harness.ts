import type { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { Probot, ProbotOctokit } from 'probot';
import { processTrigger, type IntakeDeps, type IntakeResult, type Octokit } from '../../src/app/intake.js';
import { parseTrigger } from '../../src/app/triggers.js';
import { Redactor } from '../../src/publish/redact.js';
import { pendingJobSchema, type FixJob } from '../../src/queue/payloads.js';
import { openQueues, type QueueSettings } from '../../src/queue/queues.js';
import { makeFixtureRepo, type FixtureRepo } from './fixture-repo.js';
import {
  startGitHubSimulator,
  type GitHubSim,
  type RepoPermission,
  type Webhook,
  type WebhookEvent,
  type WebhookParams,
} from './github-sim/index.js';
import { startRedis, type TestRedis } from './redis-server.js';

/**
 * The App's intake without its processes: the real processTrigger on the real Probot Octokit,
 * against the GitHub simulator and a private Redis, with a fix queue no worker takes from. A test
 * builds deliveries with the simulator (which stores their comments), hands them to intake in the
 * order it chooses, and reads what would start: every job in the queue or waiting behind one.
 */
export interface IntakeHarness {
  readonly sim: GitHubSim;
  readonly redis: Redis;
  readonly deps: IntakeDeps;
  readonly owner: string;
  readonly repo: string;
  /** A delivery as GitHub would send it (its comment stored, dated now on the simulator's clock). */
  build(event: WebhookEvent, action: string, p: Omit<WebhookParams, 'owner' | 'repo'>): Webhook;
  /** Parses a delivery as the webhook handler does and runs intake on it. */
  process(webhook: Webhook): Promise<IntakeResult>;
  /** Every fix job that would start: queued, or waiting behind a running one. */
  jobs(): Promise<FixJob[]>;
  /** The App's comments on an issue or pull request, oldest first. */
  replies(issue: number): string[];
  close(): Promise<void>;
}

export async function startIntakeHarness(
  options: {
    readonly owner?: string;
    readonly repo?: string;
    readonly people?: Readonly<Record<string, RepoPermission>>;
  } = {},
): Promise<IntakeHarness> {
  const owner = options.owner ?? 'acme';
  const repo = options.repo ?? 'calc';
  const cleanups: (() => Promise<void> | void)[] = [];
  const close = async (): Promise<void> => {
    for (const c of cleanups.reverse()) await c();
  };
  try {
    const fixture: FixtureRepo = makeFixtureRepo('node-calc');
    cleanups.push(() => {
      fixture.cleanup();
    });
    const server: TestRedis = await startRedis();
    cleanups.push(() => server.stop());
    const sim = await startGitHubSimulator();
    cleanups.push(() => sim.close());
    await sim.createRepo({ owner, name: repo, sourceDir: fixture.dir });
    for (const [login, permission] of Object.entries(options.people ?? {})) {
      sim.addUser({ login });
      sim.setPermission(owner, repo, login, permission);
    }
    const redis = new Redis(server.url, { maxRetriesPerRequest: null });
    cleanups.push(() => {
      redis.disconnect();
    });
    const settings: QueueSettings = {
      redisUrl: server.url,
      prefix: `ih${Math.random().toString(36).slice(2, 8)}`,
      jobAttempts: 1,
      retryBackoffMs: 10,
    };
    const queues = openQueues(settings);
    cleanups.push(() => queues.close());
    const logger = pino({ level: 'silent' });
    const probot = new Probot({
      appId: sim.app.id,
      privateKey: sim.app.privateKeyPem,
      secret: sim.app.webhookSecret,
      baseUrl: sim.url,
      log: logger,
      // GitHub's pacing of writes (a second apart per installation) is not what these tests measure.
      Octokit: ProbotOctokit.defaults((o: { throttle?: object }) => ({
        ...o,
        throttle: { ...o.throttle, enabled: false },
      })),
    });
    const deps: IntakeDeps = {
      octokit: async (installationId: number): Promise<Octokit> => probot.auth(installationId),
      botUserId: () => Promise.resolve(sim.app.botUserId),
      fixQueue: queues.fix,
      redis,
      settings,
      defaults: { label: 'agent', handle: '@agent' },
      redactor: new Redactor([]),
      logger,
    };
    return {
      sim,
      redis,
      deps,
      owner,
      repo,
      build: (event, action, p) => sim.buildWebhook(event, action, { owner, repo, ...p }),
      process: async (webhook) => {
        const parsed = parseTrigger(webhook.name, webhook.id, webhook.payload, sim.app.id, new Date(), {
          plainComments: true,
        });
        if (!parsed.ok) throw new Error(`the delivery does not parse: ${parsed.reason}`);
        return processTrigger(parsed.trigger, deps);
      },
      jobs: () => allJobs(queues.fix, redis, settings.prefix),
      replies: (issue) =>
        sim
          .comments(owner, repo, issue)
          .filter((c) => c.user === sim.app.botLogin)
          .map((c) => c.body),
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}

async function allJobs(queue: Queue<FixJob>, redis: Redis, prefix: string): Promise<FixJob[]> {
  const queued = await queue.getJobs(['waiting', 'active', 'delayed', 'prioritized', 'completed']);
  const pending: FixJob[] = [];
  for (const key of await redis.keys(`${prefix}:pending:*`)) {
    for (const raw of await redis.lrange(key, 0, -1))
      pending.push(pendingJobSchema.parse(JSON.parse(raw)).job);
  }
  return [...queued.map((j) => j.data), ...pending];
}
