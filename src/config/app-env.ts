import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { backendKinds, isBackendKind } from '../sandbox/backends.js';
import { ConfigError, deepFreeze } from './agent-env.js';

/**
 * Settings of the GitHub App and its workers that come from the environment (Probot's names where
 * Probot has one: APP_ID, PRIVATE_KEY / PRIVATE_KEY_PATH, WEBHOOK_SECRET). The only reader of
 * process.env for them; parsed once, frozen.
 */
export interface AppEnv {
  readonly appId: number;
  readonly privateKey: string;
  readonly webhookSecret: string;
  /** REST base URL: https://api.github.com, a GHES https://host/api/v3, or the simulator. */
  readonly githubApiUrl: string;
  readonly redisUrl: string;
  /** Prefix of every BullMQ key, so several deployments can share one Redis. */
  readonly queuePrefix: string;
  readonly port: number;
  readonly host: string;
  readonly webhookPath: string;
  /** Largest webhook body read before its signature is checked; a larger one is refused with 413. */
  readonly webhookMaxBytes: number;
  readonly workerConcurrency: number;
  readonly intakeConcurrency: number;
  /** Where workers keep clones and trajectories (one folder per job). */
  readonly workDir: string;
  /**
   * `ISSUE_AGENT_STORE_URL`: runs (event logs, job records) in PostgreSQL, shared by every worker
   * host; null: in the job folders under `workDir`.
   */
  readonly storeUrl: string | null;
  /**
   * docker: the hardened container. local: the isolated local sandbox (namespaces on this host,
   * see sandbox/local/launch.ts). unconfined: a plain child process of the worker, which can read
   * the worker's environment and files (the App's private key): only where every issue author and
   * repository is trusted, e.g. tests. A name of the backends' table (sandbox/backends.ts).
   */
  readonly sandbox: string;
  /** PRIVATE_KEY_PATH when set (a key file, hidden from a local sandbox), else null. */
  readonly privateKeyPath: string | null;
  /** Started containers a Docker worker keeps ready per image (ISSUE_AGENT_WARM_POOL); empty: none. */
  readonly warmPool: Readonly<Record<string, number>>;
  /**
   * With a warm pool: how many repositories keep a prepared container, checked out at their last
   * job's commit (ISSUE_AGENT_WARM_REPOSITORIES, 0–32; 0: none).
   */
  readonly warmRepositories: number;
  /** Public base URL of the App's server; trajectory links in PRs point under it when set. */
  readonly publicUrl: string | null;
  /** BullMQ lock duration; a worker that stops renewing it for this long is considered dead. */
  readonly lockDurationMs: number;
  readonly stalledIntervalMs: number;
  /**
   * How many times a job's run may be interrupted (its worker killed, crashed or frozen past the
   * lock) and resumed; the next resume only ends the job with that said on the issue.
   */
  readonly maxInterruptions: number;
  /**
   * Where a worker serves its own Prometheus metrics (`GET /metrics`): the first free port of
   * `port`–`lastPort`; null: it does not.
   */
  readonly workerMetrics: { readonly port: number; readonly lastPort: number; readonly host: string } | null;
  readonly jobAttempts: number;
  readonly retryBackoffMs: number;
  /** Defaults for repos without `.github/issue-agent.yml`. */
  readonly defaultLabel: string;
  readonly defaultHandle: string;
  /** How often a running job may edit its progress comment. */
  readonly progressIntervalMs: number;
  readonly logLevel: string;
  /** Base of the REST client's backoff for 5xx and connection errors. */
  readonly githubRetryBaseMs: number;
  /** How long the App trusts a repo's `.github/issue-agent.yml` it has read (0: read it every time). */
  readonly configCacheMs: number;
  /** Bearer token for the run server (API, streams, metrics, bull-board); null: no admin access. */
  readonly adminToken: string | null;
  /** The run server's sign-in with GitHub (the App's OAuth client); null: no GitHub sign-in. */
  readonly githubClientId: string | null;
  readonly githubClientSecret: string | null;
  /** GitHub's web origin, where users authorize (GitHub Enterprise: https://host). */
  readonly githubWebUrl: string;
  /** Signs the run server's session cookies; null: a random secret per process (sessions end on restart anyway). */
  readonly sessionSecret: string | null;
  /** Folder of the built browser client (index.html + assets/); null: `<package>/dist/web`. */
  readonly webAssetsDir: string | null;
  /**
   * `ISSUE_AGENT_MONTHLY_USD`: the most all runs for one repository owner may spend on the model in
   * a calendar month (UTC), across every worker; null: no monthly limit. A repository's
   * `budgets.monthlyUsd` can only lower it for that repository.
   */
  readonly monthlyUsd: number | null;
}

const int = (min: number) => z.coerce.number().int().min(min);

const schema = z.object({
  APP_ID: int(1),
  WEBHOOK_SECRET: z.string().min(1),
  ISSUE_AGENT_GITHUB_API_URL: z.url().default('https://api.github.com'),
  REDIS_URL: z.string().default('redis://127.0.0.1:6379'),
  ISSUE_AGENT_QUEUE_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_-]+$/)
    .default('issue-agent'),
  PORT: int(0).max(65535).default(3000),
  HOST: z.string().default('0.0.0.0'),
  WEBHOOK_PATH: z.string().startsWith('/').default('/api/github/webhooks'),
  /** GitHub's own cap on a payload is 25 MiB, so the default refuses nothing GitHub sends. */
  ISSUE_AGENT_WEBHOOK_MAX_BYTES: int(1).default(25 * 1024 * 1024),
  ISSUE_AGENT_WORKER_CONCURRENCY: int(1).default(1),
  ISSUE_AGENT_INTAKE_CONCURRENCY: int(1).default(8),
  ISSUE_AGENT_WORK_DIR: z.string().min(1).optional(),
  /** The shared run store (PostgreSQL); unset: the job folders under the work directory. */
  ISSUE_AGENT_STORE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// (or postgresql://) URL')
    .optional(),
  ISSUE_AGENT_SANDBOX: z
    .string()
    .default('docker')
    .refine(isBackendKind, { error: `must be one of ${backendKinds().join(', ')}` }),
  ISSUE_AGENT_WARM_POOL: z
    .string()
    .transform((text, ctx) => {
      const pool: Record<string, number> = {};
      for (const item of text.split(/[\s,]+/).filter((x) => x !== '')) {
        const m = /^([a-z0-9][a-z0-9._/-]*(?::[\w.-]+)?)=([1-9])$/.exec(item);
        if (m === null) {
          ctx.addIssue({ code: 'custom', message: `"${item}" is not image=count (a count of 1 to 9)` });
          return z.NEVER;
        }
        pool[m[1] ?? ''] = Number(m[2]);
      }
      return pool;
    })
    .optional(),
  ISSUE_AGENT_WARM_REPOSITORIES: int(0).max(32).default(2),
  ISSUE_AGENT_PUBLIC_URL: z.url().optional(),
  ISSUE_AGENT_LOCK_DURATION_MS: int(1000).default(60_000),
  ISSUE_AGENT_STALLED_INTERVAL_MS: int(500).default(30_000),
  ISSUE_AGENT_MAX_INTERRUPTIONS: int(0).default(2),
  /** A port, or a range `first-last` for workers sharing a host's network (compose --scale). */
  ISSUE_AGENT_WORKER_METRICS_PORT: z
    .string()
    .regex(/^\d{1,5}(-\d{1,5})?$/, 'a port (9464) or a range of ports (9464-9471)')
    .transform((text) => {
      const [first = 0, last = first] = text.split('-').map(Number);
      return { first, last };
    })
    .refine((r) => r.first <= r.last && r.last <= 65535, 'a range first-last with first ≤ last ≤ 65535')
    .optional(),
  ISSUE_AGENT_WORKER_METRICS_HOST: z.string().min(1).default('127.0.0.1'),
  ISSUE_AGENT_JOB_ATTEMPTS: int(1).default(3),
  ISSUE_AGENT_RETRY_BACKOFF_MS: int(0).default(10_000),
  ISSUE_AGENT_LABEL: z.string().min(1).default('agent'),
  ISSUE_AGENT_HANDLE: z
    .string()
    .regex(/^@[A-Za-z0-9][A-Za-z0-9-]*(\[bot\])?$/)
    .default('@agent'),
  ISSUE_AGENT_PROGRESS_INTERVAL_MS: int(0).default(5000),
  ISSUE_AGENT_ADMIN_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  ISSUE_AGENT_GITHUB_RETRY_BASE_MS: int(1).default(1000),
  ISSUE_AGENT_CONFIG_CACHE_MS: int(0).default(60_000),
  ISSUE_AGENT_GITHUB_CLIENT_ID: z.string().min(1).optional(),
  ISSUE_AGENT_GITHUB_CLIENT_SECRET: z.string().min(1).optional(),
  ISSUE_AGENT_GITHUB_WEB_URL: z.url().default('https://github.com'),
  ISSUE_AGENT_SESSION_SECRET: z.string().min(32, 'must be at least 32 characters').optional(),
  ISSUE_AGENT_WEB_DIR: z.string().min(1).optional(),
  ISSUE_AGENT_MONTHLY_USD: z.coerce.number().positive().max(1_000_000).optional(),
  LOG_LEVEL: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'),
});

/** Empty variables count as unset, as a `.env` with `KEY=` means. */
function withoutEmpty(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined && v.trim() !== '') out[k] = v;
  return out;
}

/** The environment through `schema`, or a ConfigError that names every variable that is wrong. */
function parseSettings<T>(schema: z.ZodType<T>, e: Record<string, string>, what: string): T {
  const parsed = schema.safeParse(e);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new ConfigError(`invalid ${what}: ${issues}`);
  }
  return parsed.data;
}

export function hasAppCredentials(env: NodeJS.ProcessEnv = process.env): boolean {
  const e = withoutEmpty(env);
  return e.APP_ID !== undefined && (e.PRIVATE_KEY !== undefined || e.PRIVATE_KEY_PATH !== undefined);
}

export function readAppEnv(
  env: NodeJS.ProcessEnv = process.env,
  workDirDefault = '/var/lib/issue-agent',
): AppEnv {
  const e = withoutEmpty(env);
  const v = parseSettings(schema, e, 'App settings');
  let privateKey = e.PRIVATE_KEY;
  if (privateKey === undefined && e.PRIVATE_KEY_PATH !== undefined) {
    try {
      privateKey = readFileSync(e.PRIVATE_KEY_PATH, 'utf8');
    } catch {
      throw new ConfigError(`PRIVATE_KEY_PATH ${e.PRIVATE_KEY_PATH} cannot be read`);
    }
  }
  if (privateKey === undefined) throw new ConfigError('PRIVATE_KEY or PRIVATE_KEY_PATH is required');
  // .env files often hold the PEM on one line with literal \n.
  privateKey = privateKey.replace(/\\n/g, '\n');
  if (!/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(privateKey)) {
    throw new ConfigError('PRIVATE_KEY is not a PEM private key');
  }
  return deepFreeze({
    appId: v.APP_ID,
    privateKey,
    webhookSecret: v.WEBHOOK_SECRET,
    githubApiUrl: v.ISSUE_AGENT_GITHUB_API_URL.replace(/\/+$/, ''),
    redisUrl: v.REDIS_URL,
    queuePrefix: v.ISSUE_AGENT_QUEUE_PREFIX,
    port: v.PORT,
    host: v.HOST,
    webhookPath: v.WEBHOOK_PATH,
    webhookMaxBytes: v.ISSUE_AGENT_WEBHOOK_MAX_BYTES,
    workerConcurrency: v.ISSUE_AGENT_WORKER_CONCURRENCY,
    intakeConcurrency: v.ISSUE_AGENT_INTAKE_CONCURRENCY,
    workDir: v.ISSUE_AGENT_WORK_DIR ?? workDirDefault,
    storeUrl: v.ISSUE_AGENT_STORE_URL ?? null,
    sandbox: v.ISSUE_AGENT_SANDBOX,
    privateKeyPath: e.PRIVATE_KEY_PATH ?? null,
    warmPool: v.ISSUE_AGENT_WARM_POOL ?? {},
    warmRepositories: v.ISSUE_AGENT_WARM_REPOSITORIES,
    publicUrl: v.ISSUE_AGENT_PUBLIC_URL?.replace(/\/+$/, '') ?? null,
    lockDurationMs: v.ISSUE_AGENT_LOCK_DURATION_MS,
    stalledIntervalMs: v.ISSUE_AGENT_STALLED_INTERVAL_MS,
    maxInterruptions: v.ISSUE_AGENT_MAX_INTERRUPTIONS,
    workerMetrics:
      v.ISSUE_AGENT_WORKER_METRICS_PORT === undefined
        ? null
        : {
            port: v.ISSUE_AGENT_WORKER_METRICS_PORT.first,
            lastPort: v.ISSUE_AGENT_WORKER_METRICS_PORT.last,
            host: v.ISSUE_AGENT_WORKER_METRICS_HOST,
          },
    jobAttempts: v.ISSUE_AGENT_JOB_ATTEMPTS,
    retryBackoffMs: v.ISSUE_AGENT_RETRY_BACKOFF_MS,
    defaultLabel: v.ISSUE_AGENT_LABEL,
    defaultHandle: v.ISSUE_AGENT_HANDLE,
    progressIntervalMs: v.ISSUE_AGENT_PROGRESS_INTERVAL_MS,
    logLevel: v.LOG_LEVEL,
    githubRetryBaseMs: v.ISSUE_AGENT_GITHUB_RETRY_BASE_MS,
    configCacheMs: v.ISSUE_AGENT_CONFIG_CACHE_MS,
    ...serverSettings(v),
  });
}

function serverSettings(v: z.infer<typeof serverSchema>) {
  if ((v.ISSUE_AGENT_GITHUB_CLIENT_ID === undefined) !== (v.ISSUE_AGENT_GITHUB_CLIENT_SECRET === undefined)) {
    throw new ConfigError(
      'ISSUE_AGENT_GITHUB_CLIENT_ID and ISSUE_AGENT_GITHUB_CLIENT_SECRET go together (set both or neither)',
    );
  }
  return {
    adminToken: v.ISSUE_AGENT_ADMIN_TOKEN ?? null,
    githubClientId: v.ISSUE_AGENT_GITHUB_CLIENT_ID ?? null,
    githubClientSecret: v.ISSUE_AGENT_GITHUB_CLIENT_SECRET ?? null,
    githubWebUrl: v.ISSUE_AGENT_GITHUB_WEB_URL.replace(/\/+$/, ''),
    sessionSecret: v.ISSUE_AGENT_SESSION_SECRET ?? null,
    webAssetsDir: v.ISSUE_AGENT_WEB_DIR ?? null,
    monthlyUsd: v.ISSUE_AGENT_MONTHLY_USD ?? null,
  };
}

/** The settings the run server needs; the App's credentials are optional (without them it cannot start runs). */
export interface ServerEnv {
  readonly app: AppEnv | null;
  readonly githubApiUrl: string;
  readonly redisUrl: string;
  readonly queuePrefix: string;
  readonly port: number;
  readonly host: string;
  readonly workDir: string;
  /** ISSUE_AGENT_STORE_URL: runs are read from PostgreSQL (no job folder needed); null: from `workDir`. */
  readonly storeUrl: string | null;
  readonly publicUrl: string | null;
  readonly logLevel: string;
  readonly adminToken: string | null;
  readonly githubClientId: string | null;
  readonly githubClientSecret: string | null;
  readonly githubWebUrl: string;
  readonly sessionSecret: string | null;
  readonly webAssetsDir: string | null;
  /**
   * `ISSUE_AGENT_MONTHLY_USD`: the most all runs for one repository owner may spend on the model in
   * a calendar month (UTC), across every worker; null: no monthly limit. A repository's
   * `budgets.monthlyUsd` can only lower it for that repository.
   */
  readonly monthlyUsd: number | null;
}

const serverSchema = schema.pick({
  ISSUE_AGENT_GITHUB_API_URL: true,
  REDIS_URL: true,
  ISSUE_AGENT_QUEUE_PREFIX: true,
  PORT: true,
  HOST: true,
  ISSUE_AGENT_WORK_DIR: true,
  ISSUE_AGENT_STORE_URL: true,
  ISSUE_AGENT_PUBLIC_URL: true,
  ISSUE_AGENT_ADMIN_TOKEN: true,
  ISSUE_AGENT_GITHUB_CLIENT_ID: true,
  ISSUE_AGENT_GITHUB_CLIENT_SECRET: true,
  ISSUE_AGENT_GITHUB_WEB_URL: true,
  ISSUE_AGENT_SESSION_SECRET: true,
  ISSUE_AGENT_WEB_DIR: true,
  ISSUE_AGENT_MONTHLY_USD: true,
  LOG_LEVEL: true,
});

/**
 * `npm run server` on its own: the run server's settings, with the App's (APP_ID, key, secret) only
 * when they are all there.
 */
export function readServerEnv(
  env: NodeJS.ProcessEnv = process.env,
  workDirDefault = '/var/lib/issue-agent',
): ServerEnv {
  const e = withoutEmpty(env);
  const v = parseSettings(serverSchema, e, 'server settings');
  const app =
    hasAppCredentials(env) && e.WEBHOOK_SECRET !== undefined ? readAppEnv(env, workDirDefault) : null;
  return deepFreeze({
    app,
    githubApiUrl: v.ISSUE_AGENT_GITHUB_API_URL.replace(/\/+$/, ''),
    redisUrl: v.REDIS_URL,
    queuePrefix: v.ISSUE_AGENT_QUEUE_PREFIX,
    port: v.PORT,
    host: v.HOST,
    workDir: v.ISSUE_AGENT_WORK_DIR ?? workDirDefault,
    storeUrl: v.ISSUE_AGENT_STORE_URL ?? null,
    publicUrl: v.ISSUE_AGENT_PUBLIC_URL?.replace(/\/+$/, '') ?? null,
    logLevel: v.LOG_LEVEL,
    ...serverSettings(v),
  });
}
