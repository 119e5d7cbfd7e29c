import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { FixJob } from '../queue/payloads.js';
import type { QueueSettings } from '../queue/queues.js';
import type { Trigger } from '../queue/trigger.js';
import type { AppCredentials } from './github.js';

/** What the run server is given (createAgentServer, startAgentServer); routes read it from their ServerContext. */
export interface AgentServerOptions {
  /** Where workers keep job folders (`<workDir>/jobs/<id>/…`), read when there is no `storeUrl`. */
  readonly workDir: string;
  /** The PostgreSQL run store every worker writes (ISSUE_AGENT_STORE_URL): runs are read there. */
  readonly storeUrl?: string | null;
  /** The server's public base URL; OAuth redirects and cookie security follow it. */
  readonly publicUrl: string | null;
  readonly adminToken: string | null;
  readonly sessionSecret: string | null;
  readonly github: {
    /** REST base URL (user tokens are checked there). */
    readonly apiUrl: string;
    /** Web origin for the OAuth authorize and token endpoints. */
    readonly webUrl: string;
    readonly clientId: string | null;
    readonly clientSecret: string | null;
  };
  /** The App's credentials: needed to start runs (and to mark cancelled queued runs on GitHub). */
  readonly app: AppCredentials | null;
  readonly queues: { readonly intake: Queue<Trigger>; readonly fix: Queue<FixJob> } | null;
  readonly redis: Redis | null;
  readonly settings: QueueSettings;
  /** Secrets of this process, removed from everything served (the admin token, keys, …). */
  readonly secrets: readonly string[];
  /** The built browser client (index.html + assets/); default `<package>/dist/web`. */
  readonly webAssetsDir?: string;
  readonly logger: Logger;
  readonly pollMs?: number;
  /** How long POST /api/runs waits for the intake processor's answer (default 20 s). */
  readonly intakeTimeoutMs?: number;
  /** How long a user's repository access is trusted (default 60 s). */
  readonly accessCacheMs?: number;
  /** ISSUE_AGENT_MONTHLY_USD, shown beside the month's spend (`GET /api/spend`); null: none. */
  readonly monthlyUsd?: number | null;
}
