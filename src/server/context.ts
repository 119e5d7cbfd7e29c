import type { IncomingMessage } from 'node:http';
import type { Logger } from 'pino';
import { Redactor } from '../publish/redact.js';
import { Sessions, type Principal, type RepoAccess } from './auth.js';
import { repoAccess } from './github.js';
import { ApiError, jsonWriter, type JsonWriter } from './http.js';
import type { AgentServerOptions } from './options.js';
import { JOB_ID, type RunIndex, type RunSummary } from './runs.js';
import type { SseStream } from './stream.js';

/**
 * What every route module shares: the options, the run index, sessions and who may see what.
 * Access rules live here, once: a run a principal may not read is answered 404 everywhere (its
 * existence is not revealed), writes need write access to the run's repository.
 */
export interface ServerContext {
  readonly options: AgentServerOptions;
  readonly log: Logger;
  readonly redactor: Redactor;
  readonly sessions: Sessions;
  readonly index: RunIndex;
  readonly json: JsonWriter;
  /** Open SSE streams, closed with the server. */
  readonly streams: Set<SseStream>;
  /** Whether cookies get `Secure` (the public URL is https). */
  readonly secure: boolean;
  readonly pollMs: number;
  /** The server's origin as browsers see it. */
  origin(req: IncomingMessage): string;
  access(p: Principal, repo: string, repoId: number | null): Promise<RepoAccess>;
  repoIdOf(runId: string): number | null;
  /** The runs this principal may see, in the same order. */
  visible(p: Principal, runs: readonly RunSummary[]): Promise<RunSummary[]>;
  /** The run if this principal may see it (or change it, with `write`); ApiError otherwise. */
  runFor(p: Principal, id: string, need?: 'read' | 'write'): Promise<RunSummary>;
  requireAuth(req: IncomingMessage): Principal;
  requireAdmin(req: IncomingMessage): Principal;
  /** State-changing requests carried by a cookie must come from this origin (SameSite=Lax plus this). */
  checkSameOrigin(req: IncomingMessage, p: Principal): void;
}

export function serverContext(
  options: AgentServerOptions,
  index: RunIndex,
  redactor: Redactor,
): ServerContext {
  const log = options.logger;
  const sessions = new Sessions({ secret: options.sessionSecret, adminToken: options.adminToken });
  const accessCacheMs = options.accessCacheMs ?? 60_000;
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

  const requireAuth = (req: IncomingMessage): Principal => {
    const p = sessions.authenticate(req);
    if (p === null)
      throw new ApiError(401, 'unauthorized', 'sign in, or send Authorization: Bearer <admin token>');
    return p;
  };

  return {
    options,
    log,
    redactor,
    sessions,
    index,
    json: jsonWriter(redactor),
    streams: new Set(),
    secure: options.publicUrl?.startsWith('https:') === true,
    pollMs: options.pollMs ?? 500,
    origin,
    access,
    repoIdOf,
    visible: async (p, runs) => {
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
    },
    runFor: async (p, id, need = 'read') => {
      if (!JOB_ID.test(id)) throw new ApiError(404, 'not_found', 'no such run');
      const run = await index.current(id);
      if (run === undefined) throw new ApiError(404, 'not_found', 'no such run');
      const a = await access(p, run.repo, repoIdOf(run.id));
      if (a === 'none') throw new ApiError(404, 'not_found', 'no such run');
      if (need === 'write' && a !== 'write')
        throw new ApiError(403, 'forbidden', `cancelling or starting runs needs write access to ${run.repo}`);
      return run;
    },
    requireAuth,
    requireAdmin: (req) => {
      const p = requireAuth(req);
      if (p.kind !== 'admin') throw new ApiError(403, 'forbidden', 'only the admin may do this');
      return p;
    },
    checkSameOrigin: (req, p) => {
      if (p.sessionId === null) return;
      const site = req.headers['sec-fetch-site'];
      if (site !== undefined && site !== 'same-origin' && site !== 'none')
        throw new ApiError(403, 'cross_site', 'cross-site request refused');
      const from = req.headers.origin;
      if (from === undefined) return;
      if (from === 'null') throw new ApiError(403, 'cross_site', 'cross-site request refused');
      let fromHost: string;
      try {
        fromHost = new URL(from).host;
      } catch {
        throw new ApiError(403, 'cross_site', 'cross-site request refused');
      }
      const own = new URL(origin(req)).host;
      if (fromHost !== own && fromHost !== req.headers.host)
        throw new ApiError(403, 'cross_site', 'cross-site request refused');
    },
  };
}
