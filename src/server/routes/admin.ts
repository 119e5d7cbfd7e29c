import type { ServerContext } from '../context.js';
import { BULL_BOARD_PATH, bullBoardHandler } from '../bull-board.js';
import { ApiError, SECURITY_HEADERS, type Route } from '../http.js';
import type { ServerMetrics } from '../metrics.js';

const PING_TIMEOUT_MS = 1000;

/**
 * What operators use: `/healthz` (open; says whether Redis answers), `/metrics` (Prometheus text,
 * the admin token as a bearer or an admin's session) and bull-board (admin only, its writes
 * checked for cross-site origin like ours).
 */
export function adminRoutes(ctx: ServerContext, metrics: ServerMetrics): Route[] {
  const { options, json } = ctx;
  const board =
    options.queues === null ? null : bullBoardHandler([options.queues.intake, options.queues.fix]);
  return [
    {
      method: 'GET',
      path: '/healthz',
      handle: async ({ res }) => {
        let redis: 'up' | 'down' = 'down';
        if (options.redis !== null) {
          try {
            await Promise.race([
              options.redis.ping(),
              new Promise((_, reject) => {
                setTimeout(() => {
                  reject(new Error('timeout'));
                }, PING_TIMEOUT_MS).unref();
              }),
            ]);
            redis = 'up';
          } catch {
            redis = 'down';
          }
        }
        return json(res, 200, { ok: true, redis });
      },
    },
    {
      method: 'GET',
      path: '/metrics',
      handle: async ({ req, res }) => {
        const header = req.headers.authorization ?? '';
        const token = /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1];
        if (token === undefined || !ctx.sessions.isAdminToken(token)) {
          // Scrapers use the token; a signed-in admin's browser may look too.
          const p = ctx.sessions.authenticate(req);
          if (p?.kind !== 'admin')
            throw new ApiError(401, 'unauthorized', 'send Authorization: Bearer <admin token>');
        }
        await ctx.index.fresh();
        let text: string;
        try {
          text = await metrics.text();
        } catch (error) {
          ctx.log.warn({ err: error }, 'metrics collection failed');
          throw new ApiError(503, 'unavailable', 'metrics could not be collected (is Redis up?)');
        }
        res.writeHead(200, {
          ...SECURITY_HEADERS,
          'content-type': metrics.contentType,
          'cache-control': 'no-store',
        });
        res.end(text);
        return true;
      },
    },
    {
      method: 'ANY',
      path: { prefix: BULL_BOARD_PATH },
      handle: async ({ req, res }) => {
        const admin = ctx.requireAdmin(req);
        // bull-board's own writes (retry, clean, obliterate…) get the same cross-site check as ours.
        if (req.method !== 'GET' && req.method !== 'HEAD') ctx.checkSameOrigin(req, admin);
        if (board === null) throw new ApiError(503, 'unavailable', 'the queue is not configured');
        await board(req, res);
        return true;
      },
    },
  ];
}
