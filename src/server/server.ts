import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redactor } from '../publish/redact.js';
import { serverContext } from './context.js';
import type { AgentServerOptions } from './options.js';
import {
  ApiError,
  CONTENT_SECURITY_POLICY,
  matchPath,
  methodMatches,
  SECURITY_HEADERS,
  writeError,
  type Route,
} from './http.js';
import { ServerMetrics } from './metrics.js';
import { adminRoutes } from './routes/admin.js';
import { authRoutes } from './routes/auth.js';
import { runRoutes } from './routes/runs.js';
import { streamRoutes } from './routes/streams.js';
import { spendRoutes } from './routes/spend.js';
import { PgSpendLedger } from '../events/pg-spend-ledger.js';
import { RedisSpendLedger } from '../events/redis-spend-ledger.js';
import type { SpendLedger } from '../events/spend-ledger.js';
import pg from 'pg';
import { PgRunSource } from './run-source.js';
import { RunIndex } from './runs.js';
import { defaultWebAssetsDir, serveWeb } from './web-assets.js';

export { CONTENT_SECURITY_POLICY } from './http.js';

/** The run server's settings as the App and `npm run server` both read them from the environment. */
export interface RunServerEnv {
  readonly workDir: string;
  readonly storeUrl: string | null;
  readonly publicUrl: string | null;
  readonly adminToken: string | null;
  readonly sessionSecret: string | null;
  readonly githubApiUrl: string;
  readonly githubWebUrl: string;
  readonly githubClientId: string | null;
  readonly githubClientSecret: string | null;
  readonly webAssetsDir: string | null;
  readonly monthlyUsd?: number | null;
}

/** The options that come from the environment alone; the caller adds queues, Redis, App and logger. */
export function serverOptionsFromEnv(
  env: RunServerEnv,
): Pick<
  AgentServerOptions,
  | 'workDir'
  | 'storeUrl'
  | 'publicUrl'
  | 'adminToken'
  | 'sessionSecret'
  | 'github'
  | 'webAssetsDir'
  | 'monthlyUsd'
> & { readonly serverSecrets: readonly string[] } {
  return {
    workDir: env.workDir,
    storeUrl: env.storeUrl,
    publicUrl: env.publicUrl,
    adminToken: env.adminToken,
    sessionSecret: env.sessionSecret,
    github: {
      apiUrl: env.githubApiUrl,
      webUrl: env.githubWebUrl,
      clientId: env.githubClientId,
      clientSecret: env.githubClientSecret,
    },
    ...(env.webAssetsDir === null ? {} : { webAssetsDir: env.webAssetsDir }),
    monthlyUsd: env.monthlyUsd ?? null,
    serverSecrets: [env.adminToken, env.sessionSecret, env.githubClientSecret].filter(
      (x): x is string => x !== null,
    ),
  };
}

export interface AgentServer {
  /** A Probot-style handler: true when it answered the request. */
  readonly handler: (req: IncomingMessage, res: ServerResponse) => Promise<boolean>;
  readonly index: RunIndex;
  readonly metrics: ServerMetrics;
  /** Starts polling the store and queue. */
  start(): void;
  close(): void;
}

/**
 * The run server: a JSON API over the event store and the queue, live streams (SSE), sign-in (admin
 * token or GitHub), Prometheus metrics, bull-board and the browser client, as one request handler that
 * can be mounted in the App's Probot server or served on its own (`startAgentServer`). API.md is the
 * contract. The routes live by resource in `routes/`; this file only orders them (first match wins,
 * so `/api/runs/stream` comes before `/api/runs/:id`) and turns errors into answers.
 */
export function createAgentServer(options: AgentServerOptions): AgentServer {
  const log = options.logger;
  const redactor = new Redactor(options.secrets.filter((s) => s !== ''));
  const storeUrl = options.storeUrl ?? null;
  const index = new RunIndex({
    workDir: options.workDir,
    ...(storeUrl === null
      ? {}
      : {
          source: new PgRunSource(storeUrl, redactor, (error) => {
            log.warn({ err: error }, 'run store');
          }),
        }),
    queue: options.queues?.fix ?? null,
    redis: options.redis,
    prefix: options.settings.prefix,
    redactor,
    logger: log.child({ name: 'run-index' }),
    ...(options.pollMs === undefined ? {} : { pollMs: options.pollMs }),
  });
  const metrics = new ServerMetrics({
    queues: options.queues === null ? [] : [options.queues.intake, options.queues.fix],
    redis: options.redis,
    prefix: options.settings.prefix,
  });
  index.onFinish((run) => {
    metrics.recordRun(run);
  });
  const ctx = serverContext(options, index, redactor);
  // Where the workers keep the month's spend: beside the runs in the database, else beside the queue.
  const ledger: SpendLedger | null =
    storeUrl !== null
      ? new PgSpendLedger(
          new pg.Pool({ connectionString: storeUrl, max: 2 }).on('error', () => undefined),
          true,
        )
      : options.redis === null
        ? null
        : new RedisSpendLedger(options.redis, options.settings.prefix);
  const webDir = options.webAssetsDir ?? defaultWebAssetsDir();
  const routes: readonly Route[] = [
    ...adminRoutes(ctx, metrics),
    ...authRoutes(ctx),
    ...streamRoutes(ctx),
    ...runRoutes(ctx),
    ...spendRoutes(ctx, ledger),
  ];

  const route = async (req: IncomingMessage, res: ServerResponse): Promise<boolean> => {
    const url = new URL(req.url ?? '/', 'http://server.invalid');
    const path = url.pathname;
    const method = req.method ?? 'GET';
    let pathKnown = false;
    for (const r of routes) {
      const params = matchPath(r, path);
      if (params === null) continue;
      pathKnown = true;
      if (!methodMatches(r, method)) continue;
      await r.handle({ req, res, url, params });
      return true;
    }
    const api = path === '/api' || path.startsWith('/api/');
    if (api) {
      // Probot's own webhook path is answered before this handler runs.
      ctx.requireAuth(req);
      if (pathKnown) throw new ApiError(405, 'method_not_allowed', `${method} is not allowed here`);
      throw new ApiError(404, 'not_found', 'no such route');
    }
    if (method === 'GET' || method === 'HEAD')
      return serveWeb(req, res, path, webDir, {
        ...SECURITY_HEADERS,
        'content-security-policy': CONTENT_SECURITY_POLICY,
      });
    return false;
  };

  const handler = async (req: IncomingMessage, res: ServerResponse): Promise<boolean> => {
    try {
      return await route(req, res);
    } catch (error) {
      if (res.headersSent) {
        res.destroy();
        return true;
      }
      if (error instanceof ApiError) return writeError(ctx.json, res, error);
      // The path only: a query can hold an OAuth code and state.
      log.error({ err: error, path: (req.url ?? '').split('?')[0] }, 'run server request failed');
      return writeError(ctx.json, res, new ApiError(500, 'internal', 'internal error'));
    }
  };

  return {
    handler,
    index,
    metrics,
    start: () => {
      index.start();
    },
    close: () => {
      index.stop();
      for (const s of ctx.streams) s.close();
      void ledger?.close().catch(() => undefined);
    },
  };
}

/** The run server on its own HTTP server (`npm run server`, tests). */
export async function startAgentServer(
  options: AgentServerOptions & { readonly port: number; readonly host: string },
): Promise<{
  readonly url: string;
  readonly server: AgentServer;
  readonly http: Server;
  close(): Promise<void>;
}> {
  const agent = createAgentServer(options);
  const http = createServer((req, res) => {
    void agent.handler(req, res).then((handled) => {
      if (!handled && !res.headersSent) {
        res.writeHead(404, { ...SECURITY_HEADERS, 'content-type': 'application/json; charset=utf-8' });
        res.end(JSON.stringify({ error: { code: 'not_found', message: 'no such route' } }));
      }
    });
  });
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(options.port, options.host, () => {
      http.off('error', reject);
      resolve();
    });
  });
  agent.start();
  const { port } = http.address() as AddressInfo;
  const host = options.host.includes(':')
    ? `[${options.host}]`
    : options.host === '0.0.0.0'
      ? '127.0.0.1'
      : options.host;
  return {
    url: `http://${host}:${port}`,
    server: agent,
    http,
    close: async () => {
      agent.close();
      await new Promise<void>((resolve) => {
        http.close(() => {
          resolve();
        });
        http.closeAllConnections();
      });
    },
  };
}
