import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAppAuth } from '@octokit/auth-app';
import { Octokit } from '@octokit/rest';
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Trigger } from '../app/triggers.js';
import { renderProgress } from '../publish/progress.js';
import { Redactor } from '../publish/redact.js';
import { handOffLocked, lockKey, pendingKey, requestCancel } from '../queue/control.js';
import { withIssueLock } from '../queue/issue-lock.js';
import type { FixJob } from '../queue/payloads.js';
import { jobTarget, type QueueSettings } from '../queue/queues.js';
import {
  cookieHeader,
  safeNext,
  SESSION_COOKIE,
  Sessions,
  STATE_COOKIE,
  type Principal,
  type RepoAccess,
} from './auth.js';
import { BULL_BOARD_PATH, bullBoardHandler } from './bull-board.js';
import {
  exchangeCode,
  fetchUser,
  manualTrigger,
  repoAccess,
  StartRunError,
  submitTrigger,
  type AppCredentials,
} from './github.js';
import { ServerMetrics } from './metrics.js';
import { compareRuns, JOB_ID, RunIndex, sortKey, type RunPosition, type RunSummary } from './runs.js';
import { SseStream } from './stream.js';
import { defaultWebAssetsDir, serveWeb } from './web-assets.js';

export interface AgentServerOptions {
  /** Where workers keep job folders (`<workDir>/jobs/<id>/…`). */
  readonly workDir: string;
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
}

/** The run server's settings as the App and `npm run server` both read them from the environment. */
export interface RunServerEnv {
  readonly workDir: string;
  readonly publicUrl: string | null;
  readonly adminToken: string | null;
  readonly sessionSecret: string | null;
  readonly githubApiUrl: string;
  readonly githubWebUrl: string;
  readonly githubClientId: string | null;
  readonly githubClientSecret: string | null;
  readonly webAssetsDir: string | null;
}

/** The options that come from the environment alone; the caller adds queues, Redis, App and logger. */
export function serverOptionsFromEnv(
  env: RunServerEnv,
): Pick<
  AgentServerOptions,
  'workDir' | 'publicUrl' | 'adminToken' | 'sessionSecret' | 'github' | 'webAssetsDir'
> & { readonly serverSecrets: readonly string[] } {
  return {
    workDir: env.workDir,
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

class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
};
export const CONTENT_SECURITY_POLICY =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const RUN_PATH = /^\/api\/runs\/([^/]+)(\/events|\/stream|\/cancel)?$/;
const LEGACY_TRAJECTORY = /^\/issue-agent\/runs\/([A-Za-z0-9-]+)\/trajectory\.json$/;
const MAX_BODY = 64 * 1024;

/**
 * The run server: a JSON API over the event store and the queue, live streams (SSE), sign-in (admin
 * token or GitHub), Prometheus metrics, bull-board and the browser client, as one request handler that
 * can be mounted in the App's Probot server or served on its own (`startAgentServer`). API.md is the
 * contract.
 */
export function createAgentServer(options: AgentServerOptions): AgentServer {
  const log = options.logger;
  const redactor = new Redactor(options.secrets.filter((s) => s !== ''));
  const sessions = new Sessions({ secret: options.sessionSecret, adminToken: options.adminToken });
  const index = new RunIndex({
    workDir: options.workDir,
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
  const board =
    options.queues === null ? null : bullBoardHandler([options.queues.intake, options.queues.fix]);
  const webDir = options.webAssetsDir ?? defaultWebAssetsDir();
  const secure = options.publicUrl?.startsWith('https:') === true;
  const accessCacheMs = options.accessCacheMs ?? 60_000;
  const pollMs = options.pollMs ?? 500;
  const streams = new Set<SseStream>();

  const origin = (req: IncomingMessage): string =>
    options.publicUrl ?? `http://${req.headers.host ?? 'localhost'}`;

  const access = async (p: Principal, repo: string, repoId: number | null): Promise<RepoAccess> => {
    if (p.kind === 'admin') return 'write';
    if (repo === '') return 'none';
    const key = repoId === null ? repo : `${repo}#${repoId}`;
    const cached = sessions.cachedAccess(p.sessionId, key, accessCacheMs);
    if (cached !== null) return cached;
    let answer: RepoAccess | 'unauthorized';
    try {
      answer = await repoAccess(options.github.apiUrl, p.token, repo, repoId);
    } catch (error) {
      log.warn({ err: error, repo }, 'repository access check failed');
      return 'none';
    }
    if (answer === 'unauthorized') {
      sessions.end(p.sessionId);
      return 'none';
    }
    sessions.rememberAccess(p.sessionId, key, answer);
    return answer;
  };
  const repoIdOf = (runId: string): number | null => index.payload(runId)?.repo.id ?? null;

  const visible = async (p: Principal, runs: readonly RunSummary[]): Promise<RunSummary[]> => {
    if (p.kind === 'admin') return [...runs];
    const keyOf = (r: RunSummary): string => `${r.repo}#${repoIdOf(r.id) ?? ''}`;
    const repos = new Map(runs.map((r) => [keyOf(r), { repo: r.repo, id: repoIdOf(r.id) }]));
    const allowed = new Set<string>();
    await Promise.all(
      [...repos].map(async ([key, r]) => {
        if ((await access(p, r.repo, r.id)) !== 'none') allowed.add(key);
      }),
    );
    return runs.filter((r) => allowed.has(keyOf(r)));
  };

  /** The run if this principal may see it; 404 otherwise (never 403: its existence is not revealed). */
  const runFor = async (p: Principal, id: string, need: 'read' | 'write' = 'read'): Promise<RunSummary> => {
    if (!JOB_ID.test(id)) throw new ApiError(404, 'not_found', 'no such run');
    await index.fresh();
    const run = index.get(id);
    if (run === undefined) throw new ApiError(404, 'not_found', 'no such run');
    const a = await access(p, run.repo, repoIdOf(run.id));
    if (a === 'none') throw new ApiError(404, 'not_found', 'no such run');
    if (need === 'write' && a !== 'write')
      throw new ApiError(403, 'forbidden', `cancelling or starting runs needs write access to ${run.repo}`);
    return run;
  };

  /**
   * Every body is redacted on the way out; `redacted: true` is for bodies made only of what the
   * trajectory reader already redacted (events are redacted once, when first read), which saves a
   * second pass over every page of a long run.
   */
  const json = (
    res: ServerResponse,
    status: number,
    body: unknown,
    headers: Record<string, string> = {},
    redacted = false,
  ): true => {
    const text = JSON.stringify(redacted ? body : redactor.redactDeep(body));
    res.writeHead(status, {
      ...SECURITY_HEADERS,
      ...headers,
      'content-type': 'application/json; charset=utf-8',
      'cache-control': 'no-store',
      'content-length': String(Buffer.byteLength(text)),
    });
    res.end(text);
    return true;
  };

  const fail = (res: ServerResponse, error: ApiError): true => {
    const headers: Record<string, string> =
      error.status === 401 ? { 'www-authenticate': 'Bearer realm="issue-agent"' } : {};
    return json(res, error.status, { error: { code: error.code, message: error.message } }, headers);
  };

  const requireAuth = (req: IncomingMessage): Principal => {
    const p = sessions.authenticate(req);
    if (p === null)
      throw new ApiError(401, 'unauthorized', 'sign in, or send Authorization: Bearer <admin token>');
    return p;
  };

  const requireAdmin = (req: IncomingMessage): Principal => {
    const p = requireAuth(req);
    if (p.kind !== 'admin') throw new ApiError(403, 'forbidden', 'only the admin may do this');
    return p;
  };

  /** State-changing requests carried by a cookie must come from this origin (SameSite=Lax plus this). */
  const checkSameOrigin = (req: IncomingMessage, p: Principal): void => {
    if (p.sessionId === null) return;
    const site = req.headers['sec-fetch-site'];
    if (site !== undefined && site !== 'same-origin' && site !== 'none')
      throw new ApiError(403, 'cross_site', 'cross-site request refused');
    const from = req.headers.origin;
    if (from === undefined || from === 'null') {
      if (from === 'null') throw new ApiError(403, 'cross_site', 'cross-site request refused');
      return;
    }
    let fromHost: string;
    try {
      fromHost = new URL(from).host;
    } catch {
      throw new ApiError(403, 'cross_site', 'cross-site request refused');
    }
    const own = new URL(origin(req)).host;
    if (fromHost !== own && fromHost !== req.headers.host)
      throw new ApiError(403, 'cross_site', 'cross-site request refused');
  };

  // ---- routes -----------------------------------------------------------------------------------

  const healthz = async (res: ServerResponse): Promise<true> => {
    let redis: 'up' | 'down' = 'down';
    if (options.redis !== null) {
      try {
        await Promise.race([
          options.redis.ping(),
          new Promise((_, reject) => {
            setTimeout(() => {
              reject(new Error('timeout'));
            }, 1000).unref();
          }),
        ]);
        redis = 'up';
      } catch {
        redis = 'down';
      }
    }
    return json(res, 200, { ok: true, redis });
  };

  const me = (req: IncomingMessage, res: ServerResponse): true => {
    const p = sessions.authenticate(req);
    // The sign-in screen needs to know which ways of signing in exist, before anyone is signed in.
    if (p === null)
      return json(res, 401, {
        error: { code: 'unauthorized', message: 'not signed in' },
        githubSignIn: options.github.clientId !== null,
      });
    return json(res, 200, {
      login: p.kind === 'user' ? p.login : null,
      admin: p.kind === 'admin',
      githubSignIn: options.github.clientId !== null,
    });
  };

  const tokenLogin = async (req: IncomingMessage, res: ServerResponse): Promise<true> => {
    const body = await readJson(req);
    const token = typeof body === 'object' && body !== null && 'token' in body ? body.token : undefined;
    if (typeof token !== 'string' || !sessions.isAdminToken(token))
      throw new ApiError(401, 'unauthorized', 'wrong token');
    const cookie = sessions.create({ kind: 'admin' });
    return json(
      res,
      200,
      { login: null, admin: true },
      {
        'set-cookie': cookieHeader(SESSION_COOKIE, cookie, { secure, maxAgeS: 8 * 3600 }),
      },
    );
  };

  const logout = (req: IncomingMessage, res: ServerResponse): true => {
    sessions.destroy(req);
    return json(
      res,
      200,
      { ok: true },
      { 'set-cookie': cookieHeader(SESSION_COOKIE, '', { secure, maxAgeS: 0 }) },
    );
  };

  const githubLogin = (req: IncomingMessage, res: ServerResponse, url: URL): true => {
    const clientId = options.github.clientId;
    if (clientId === null)
      throw new ApiError(404, 'github_sign_in_disabled', 'sign-in with GitHub is not configured');
    const next = safeNext(url.searchParams.get('next'));
    const { state, cookie } = sessions.beginLogin(next);
    const authorize = new URL(`${options.github.webUrl}/login/oauth/authorize`);
    authorize.searchParams.set('client_id', clientId);
    authorize.searchParams.set('redirect_uri', `${origin(req)}/auth/github/callback`);
    authorize.searchParams.set('state', state);
    res.writeHead(302, {
      ...SECURITY_HEADERS,
      location: authorize.toString(),
      'cache-control': 'no-store',
      'set-cookie': cookieHeader(STATE_COOKIE, cookie, { secure, maxAgeS: 600, path: '/auth/github' }),
    });
    res.end();
    return true;
  };

  const githubCallback = async (req: IncomingMessage, res: ServerResponse, url: URL): Promise<true> => {
    const { clientId, clientSecret } = options.github;
    if (clientId === null || clientSecret === null)
      throw new ApiError(404, 'github_sign_in_disabled', 'sign-in with GitHub is not configured');
    const state = url.searchParams.get('state') ?? '';
    const code = url.searchParams.get('code') ?? '';
    const next = sessions.finishLogin(req, state);
    const clearState = cookieHeader(STATE_COOKIE, '', { secure, maxAgeS: 0, path: '/auth/github' });
    if (next === null)
      throw new ApiError(400, 'bad_state', 'the sign-in could not be matched to this browser; start again');
    if (code === '') throw new ApiError(400, 'no_code', 'GitHub did not authorize the sign-in');
    const token = await exchangeCode({
      webUrl: options.github.webUrl,
      clientId,
      clientSecret,
      code,
      redirectUri: `${origin(req)}/auth/github/callback`,
    });
    const user = await fetchUser(options.github.apiUrl, token);
    const cookie = sessions.create({ kind: 'user', login: user.login, id: user.id, token });
    log.info({ login: user.login }, 'signed in with GitHub');
    res.writeHead(302, {
      ...SECURITY_HEADERS,
      location: next,
      'cache-control': 'no-store',
      'set-cookie': [cookieHeader(SESSION_COOKIE, cookie, { secure, maxAgeS: 8 * 3600 }), clearState],
    });
    res.end();
    return true;
  };

  const listRuns = async (req: IncomingMessage, res: ServerResponse, url: URL): Promise<true> => {
    const p = requireAuth(req);
    const state = url.searchParams.get('state');
    if (state !== null && state !== 'queued' && state !== 'active' && state !== 'finished')
      throw new ApiError(400, 'bad_request', 'state must be queued, active or finished');
    const limit = intParam(url, 'limit', 50, 1, 500);
    const before = decodeCursor(url.searchParams.get('before'));
    await index.fresh();
    let runs = index.list().filter((r) => state === null || r.state === state);
    if (before !== null) runs = runs.filter((r) => compareRuns(r, before) > 0);
    runs = await visible(p, runs);
    const page = runs.slice(0, limit);
    const last = page.at(-1);
    return json(res, 200, {
      runs: page,
      next: runs.length > limit && last !== undefined ? encodeCursor(last) : null,
    });
  };

  const runsStream = async (req: IncomingMessage, res: ServerResponse): Promise<true> => {
    const p = requireAuth(req);
    await index.fresh();
    const sse = new SseStream(req, res, SECURITY_HEADERS);
    streams.add(sse);
    let chain = Promise.resolve();
    const sendIfVisible = (run: RunSummary): void => {
      if (!sessions.isLive(p)) {
        sse.close();
        return;
      }
      chain = chain
        .then(async () => {
          if ((await access(p, run.repo, repoIdOf(run.id))) !== 'none')
            sse.send('run', redactor.redactDeep(run));
        })
        .catch(() => undefined);
    };
    for (const run of (await visible(p, index.list())).slice(0, 500))
      sse.send('run', redactor.redactDeep(run));
    const off = index.onChange(sendIfVisible);
    sse.onClose(() => {
      off();
      streams.delete(sse);
    });
    return true;
  };

  const getRun = async (req: IncomingMessage, res: ServerResponse, id: string): Promise<true> => {
    const run = await runFor(requireAuth(req), id);
    const reader = index.reader(id);
    return json(res, 200, { run, base: reader?.base ?? null, state: reader?.state ?? null });
  };

  const runEvents = async (
    req: IncomingMessage,
    res: ServerResponse,
    id: string,
    url: URL,
  ): Promise<true> => {
    await runFor(requireAuth(req), id);
    const after = intParam(url, 'after', 0, 0, Number.MAX_SAFE_INTEGER);
    const limit = intParam(url, 'limit', 200, 1, 1000);
    const reader = index.reader(id);
    const events = reader?.eventsAfter(after, limit) ?? [];
    const last = events.at(-1);
    return json(
      res,
      200,
      {
        events,
        next: last !== undefined && reader !== null && last.id < reader.lastEventId ? last.id : null,
      },
      {},
      true,
    );
  };

  const runStream = async (
    req: IncomingMessage,
    res: ServerResponse,
    id: string,
    url: URL,
  ): Promise<true> => {
    const p = requireAuth(req);
    await runFor(p, id);
    const header = req.headers['last-event-id'];
    const fromHeader =
      typeof header === 'string' && /^\d+$/.test(header.trim()) ? Number(header.trim()) : null;
    let sent = fromHeader ?? intParam(url, 'after', 0, 0, Number.MAX_SAFE_INTEGER);
    const sse = new SseStream(req, res, SECURITY_HEADERS);
    streams.add(sse);
    let lastRun = '';
    let busy = false;
    const pump = (): void => {
      if (busy || sse.closed) return;
      if (!sessions.isLive(p)) {
        sse.close();
        return;
      }
      busy = true;
      try {
        const run = index.get(id);
        const reader = index.reader(id);
        if (reader !== null) {
          for (;;) {
            const batch = reader.eventsAfter(sent, 500);
            if (batch.length === 0) break;
            for (const e of batch) {
              sse.send('agent-event', e, e.id);
              sent = e.id;
            }
          }
        }
        if (run !== undefined) {
          const text = JSON.stringify(run);
          if (text !== lastRun) {
            lastRun = text;
            sse.send('run', redactor.redactDeep(run));
          }
          if (run.state === 'finished' && (reader === null || sent >= reader.lastEventId)) {
            sse.send('end', { id, lastEventId: reader?.lastEventId ?? 0 });
            sse.close();
          }
        }
      } finally {
        busy = false;
      }
    };
    const timer = setInterval(pump, Math.min(pollMs, 500));
    const off = index.onChange((s) => {
      if (s.id === id) pump();
    });
    sse.onClose(() => {
      clearInterval(timer);
      off();
      streams.delete(sse);
    });
    pump();
    return true;
  };

  const cancelRun = async (req: IncomingMessage, res: ServerResponse, id: string): Promise<true> => {
    const p = requireAuth(req);
    checkSameOrigin(req, p);
    const run = await runFor(p, id, 'write');
    if (run.state === 'finished') throw new ApiError(409, 'finished', `run ${id} already finished`);
    const { queues, redis } = options;
    if (queues === null || redis === null)
      throw new ApiError(503, 'unavailable', 'the queue is not reachable');
    const by = p.kind === 'user' ? p.login : 'admin';
    const payload = index.payload(id);
    const prefix = options.settings.prefix;
    const cancelLocked = async (): Promise<'removed' | 'flagged' | 'finished'> => {
      if (payload !== null) {
        const key = pendingKey(prefix, jobTarget(payload));
        for (const raw of await redis.lrange(key, 0, -1)) {
          if (raw.includes(`"jobId":"${id}"`) && (await redis.lrem(key, 1, raw)) > 0) return 'removed';
        }
      }
      const job = await queues.fix.getJob(id);
      const state = job === undefined ? 'unknown' : await job.getState();
      if (state === 'completed' || state === 'failed') return 'finished';
      // The flag first: a worker that takes the job in the meantime stops at once.
      await requestCancel(redis, prefix, id, by);
      if (state === 'active' || job === undefined) return 'flagged';
      try {
        await job.remove();
      } catch {
        return 'flagged';
      }
      if (payload !== null) {
        await handOffLocked(redis, queues.fix, options.settings, jobTarget(payload));
      }
      return 'removed';
    };
    const outcome =
      payload === null
        ? await cancelLocked()
        : await withIssueLock(redis, lockKey(prefix, jobTarget(payload)), cancelLocked);
    if (outcome === 'finished') throw new ApiError(409, 'finished', `run ${id} already finished`);
    if (outcome === 'removed') {
      await index.recordCancelled(id, { at: new Date().toISOString(), by, payload, queuedAt: run.queuedAt });
      await markCancelledOnGitHub(id, payload, by);
    }
    log.info({ job: id, by, how: outcome }, 'run cancel requested');
    await index.refresh();
    return json(res, 202, { run: index.get(id) ?? run });
  };

  const markCancelledOnGitHub = async (id: string, payload: FixJob | null, by: string): Promise<void> => {
    const app = options.app;
    if (app === null || payload?.progressCommentId == null) return;
    try {
      const octokit = new Octokit({
        authStrategy: createAppAuth,
        auth: { appId: app.appId, privateKey: app.privateKey, installationId: payload.installationId },
        baseUrl: app.apiUrl,
      });
      await octokit.rest.issues.updateComment({
        owner: payload.repo.owner,
        repo: payload.repo.name,
        comment_id: payload.progressCommentId,
        body: redactor.redact(renderProgress({ kind: 'cancelled', jobId: id, by }, redactor)),
      });
    } catch (error) {
      log.warn({ err: error, job: id }, 'could not mark the progress comment cancelled');
    }
  };

  const startRun = async (req: IncomingMessage, res: ServerResponse): Promise<true> => {
    const p = requireAuth(req);
    checkSameOrigin(req, p);
    const body = await readJson(req);
    const fields = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {};
    const repo = fields.repo;
    const issue = fields.issue;
    const instructions = fields.instructions ?? '';
    if (typeof repo !== 'string' || !/^[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+$/.test(repo))
      throw new ApiError(400, 'bad_request', 'repo must be "owner/name"');
    if (typeof issue !== 'number' || !Number.isInteger(issue) || issue <= 0)
      throw new ApiError(400, 'bad_request', 'issue must be a positive integer');
    if (typeof instructions !== 'string' || instructions.length > 20_000)
      throw new ApiError(400, 'bad_request', 'instructions must be a string (at most 20,000 characters)');
    const a = await access(p, repo, null);
    if (a === 'none') throw new ApiError(404, 'not_found', `no repository ${repo}`);
    if (a !== 'write') throw new ApiError(403, 'forbidden', `starting runs needs write access to ${repo}`);
    if (options.app === null || options.queues === null)
      throw new ApiError(
        503,
        'unavailable',
        "starting runs needs the App's credentials (APP_ID, PRIVATE_KEY, WEBHOOK_SECRET) and Redis; this server runs without them",
      );
    const [owner = '', name = ''] = repo.split('/');
    let result;
    try {
      const trigger = await manualTrigger(options.app, {
        owner,
        name,
        issue,
        instructions,
        sender: p.kind === 'user' ? { login: p.login, id: p.id } : 'admin',
      });
      result = await submitTrigger(options.queues.intake, trigger, options.intakeTimeoutMs ?? 20_000);
    } catch (error) {
      if (error instanceof StartRunError) throw new ApiError(error.status, error.code, error.message);
      throw error;
    }
    if (result === null) return json(res, 202, { id: null, status: 'pending' });
    switch (result.status) {
      case 'queued':
      case 'queued_after':
      case 'duplicate':
        await index.refresh();
        return json(res, 202, { id: result.jobId, status: result.status });
      case 'refused':
        throw new ApiError(403, 'refused', result.reason);
      case 'ignored':
        throw new ApiError(409, 'ignored', result.reason);
      case 'config_error':
        throw new ApiError(422, 'config_error', result.problems.join('; '));
      case 'cancelled':
        throw new ApiError(409, 'ignored', 'the request was read as a cancel');
    }
  };

  const legacyTrajectory = async (req: IncomingMessage, res: ServerResponse, id: string): Promise<true> => {
    await runFor(requireAuth(req), id);
    const reader = index.reader(id);
    if (reader === null) throw new ApiError(404, 'not_found', 'no trajectory for this run on this host');
    return json(res, 200, {
      base: reader.base,
      events: reader.eventsAfter(0, Number.MAX_SAFE_INTEGER),
      state: reader.state,
    });
  };

  const metricsRoute = async (req: IncomingMessage, res: ServerResponse): Promise<true> => {
    const header = req.headers.authorization ?? '';
    const token = /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1];
    if (token === undefined || !sessions.isAdminToken(token)) {
      // Scrapers use the token; a signed-in admin's browser may look too.
      const p = sessions.authenticate(req);
      if (p?.kind !== 'admin')
        throw new ApiError(401, 'unauthorized', 'send Authorization: Bearer <admin token>');
    }
    await index.fresh();
    let text: string;
    try {
      text = await metrics.text();
    } catch (error) {
      log.warn({ err: error }, 'metrics collection failed');
      throw new ApiError(503, 'unavailable', 'metrics could not be collected (is Redis up?)');
    }
    res.writeHead(200, {
      ...SECURITY_HEADERS,
      'content-type': metrics.contentType,
      'cache-control': 'no-store',
    });
    res.end(text);
    return true;
  };

  const route = async (req: IncomingMessage, res: ServerResponse): Promise<boolean> => {
    const url = new URL(req.url ?? '/', 'http://server.invalid');
    const path = url.pathname;
    const method = req.method ?? 'GET';
    const get = method === 'GET' || method === 'HEAD';
    if (path === '/healthz' && get) return healthz(res);
    if (path === '/metrics' && get) return metricsRoute(req, res);
    if (path === '/auth/token' && method === 'POST') return tokenLogin(req, res);
    if (path === '/auth/logout' && method === 'POST') return logout(req, res);
    if (path === '/auth/github/login' && get) return githubLogin(req, res, url);
    if (path === '/auth/github/callback' && get) return githubCallback(req, res, url);
    if (path === BULL_BOARD_PATH || path.startsWith(`${BULL_BOARD_PATH}/`)) {
      const admin = requireAdmin(req);
      // bull-board's own writes (retry, clean, obliterate…) get the same cross-site check as ours.
      if (!get) checkSameOrigin(req, admin);
      if (board === null) throw new ApiError(503, 'unavailable', 'the queue is not configured');
      board(req, res);
      return true;
    }
    const legacy = LEGACY_TRAJECTORY.exec(path);
    if (legacy !== null && get) return legacyTrajectory(req, res, legacy[1] ?? '');
    if (path === '/api/me' && get) return me(req, res);
    if (path === '/api/runs') {
      if (get) return listRuns(req, res, url);
      if (method === 'POST') return startRun(req, res);
      requireAuth(req);
      throw new ApiError(405, 'method_not_allowed', `${method} is not allowed here`);
    }
    if (path === '/api/runs/stream' && get) return runsStream(req, res);
    const m = RUN_PATH.exec(path);
    if (m !== null) {
      const id = decodeURIComponentSafe(m[1] ?? '');
      const sub = m[2];
      if (sub === undefined && get) return getRun(req, res, id);
      if (sub === '/events' && get) return runEvents(req, res, id, url);
      if (sub === '/stream' && get) return runStream(req, res, id, url);
      if (sub === '/cancel' && method === 'POST') return cancelRun(req, res, id);
      requireAuth(req);
      throw new ApiError(405, 'method_not_allowed', `${method} is not allowed here`);
    }
    if (path === '/api' || path.startsWith('/api/')) {
      // Probot's own webhook path is answered before this handler runs.
      requireAuth(req);
      throw new ApiError(404, 'not_found', 'no such route');
    }
    if (get)
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
      if (error instanceof ApiError) return fail(res, error);
      // The path only: a query can hold an OAuth code and state.
      log.error({ err: error, path: (req.url ?? '').split('?')[0] }, 'run server request failed');
      return fail(res, new ApiError(500, 'internal', 'internal error'));
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
      for (const s of streams) s.close();
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

function intParam(url: URL, name: string, fallback: number, min: number, max: number): number {
  const raw = url.searchParams.get(name);
  if (raw === null || raw === '') return fallback;
  if (!/^\d+$/.test(raw)) throw new ApiError(400, 'bad_request', `${name} must be a non-negative integer`);
  return Math.min(Math.max(Number(raw), min), max);
}

/** Cursors are opaque: base64url of [sortKey, id] of the last run of the previous page. */
function encodeCursor(run: RunSummary): string {
  return Buffer.from(JSON.stringify([sortKey(run), run.id])).toString('base64url');
}

function decodeCursor(raw: string | null): RunPosition | null {
  if (raw === null || raw === '') return null;
  try {
    const value = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as unknown;
    if (Array.isArray(value) && typeof value[0] === 'string' && typeof value[1] === 'string') {
      return { queuedAt: value[0] === '' ? null : value[0], startedAt: null, id: value[1] };
    }
  } catch {
    // fall through
  }
  throw new ApiError(400, 'bad_request', 'before is not a cursor this server issued');
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const b = chunk as Buffer;
    size += b.length;
    if (size > MAX_BODY) throw new ApiError(413, 'too_large', 'request body too large');
    parts.push(b);
  }
  const text = Buffer.concat(parts).toString('utf8');
  if (text.trim() === '') return {};
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new ApiError(400, 'bad_request', 'the body must be JSON');
  }
}

function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
