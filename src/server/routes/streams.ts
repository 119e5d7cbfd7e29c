import type { ServerContext } from '../context.js';
import { decodeURIComponentSafe, intParam, SECURITY_HEADERS, type Route } from '../http.js';
import type { RunSummary } from '../runs.js';
import { SseStream } from '../stream.js';

const FIRST_RUNS = 500;
const EVENTS_PER_READ = 500;

/**
 * A run's events and the live views: pages of events (`after`, `limit`), a run's live stream
 * (resumable from `Last-Event-ID`, ends with `end` once the run is finished and every event was
 * sent), and the stream of run summaries for the list. A stream closes when its session ends. Access
 * is asked again as the other routes ask it (ServerContext.access, cached per session for
 * `accessCacheMs`): the list leaves out runs of repositories the reader lost, and a run's stream
 * closes before it sends anything more once its reader may no longer see the run.
 */
export function streamRoutes(ctx: ServerContext): Route[] {
  const { index, json, log, redactor, sessions, streams } = ctx;
  return [
    {
      method: 'GET',
      path: '/api/runs/stream',
      handle: async ({ req, res }) => {
        const p = ctx.requireAuth(req);
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
              if ((await ctx.access(p, run.repo, ctx.repoIdOf(run.id))) !== 'none')
                sse.send('run', redactor.redactDeep(run));
            })
            .catch(() => undefined);
        };
        for (const run of (await ctx.visible(p, index.list())).slice(0, FIRST_RUNS))
          sse.send('run', redactor.redactDeep(run));
        const off = index.onChange(sendIfVisible);
        sse.onClose(() => {
          off();
          streams.delete(sse);
        });
        return true;
      },
    },
    {
      method: 'GET',
      path: /^\/api\/runs\/([^/]+)\/events$/,
      handle: async ({ req, res, url, params }) => {
        const id = decodeURIComponentSafe(params[0] ?? '');
        await ctx.runFor(ctx.requireAuth(req), id);
        const after = intParam(url, 'after', 0, 0, Number.MAX_SAFE_INTEGER);
        const limit = intParam(url, 'limit', 200, 1, 1000);
        const reader = await index.reader(id);
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
      },
    },
    {
      method: 'GET',
      path: /^\/api\/runs\/([^/]+)\/stream$/,
      handle: async ({ req, res, url, params }) => {
        const id = decodeURIComponentSafe(params[0] ?? '');
        const p = ctx.requireAuth(req);
        await ctx.runFor(p, id);
        const header = req.headers['last-event-id'];
        const fromHeader =
          typeof header === 'string' && /^\d+$/.test(header.trim()) ? Number(header.trim()) : null;
        let sent = fromHeader ?? intParam(url, 'after', 0, 0, Number.MAX_SAFE_INTEGER);
        const sse = new SseStream(req, res, SECURITY_HEADERS);
        streams.add(sse);
        let lastRun = '';
        let busy = false;
        let again = false;
        const pumpOnce = async (): Promise<void> => {
          // Asked before anything is read, so nothing is sent past the reader's access.
          const known = index.get(id);
          const visible =
            known !== undefined &&
            sessions.isLive(p) &&
            (await ctx.access(p, known.repo, ctx.repoIdOf(id))) !== 'none';
          if (!visible) {
            sse.close();
            return;
          }
          const reader = await index.reader(id);
          if (sse.closed) return;
          {
            const run = index.get(id);
            if (reader !== null) {
              for (;;) {
                const batch = reader.eventsAfter(sent, EVENTS_PER_READ);
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
          }
        };
        // One read at a time; a wake-up during a read runs one more read after it.
        const pump = (): void => {
          if (sse.closed) return;
          if (busy) {
            again = true;
            return;
          }
          busy = true;
          pumpOnce()
            .catch((error: unknown) => {
              log.warn({ err: error, run: id }, 'stream read failed');
            })
            .finally(() => {
              busy = false;
              if (again) {
                again = false;
                pump();
              }
            });
        };
        const timer = setInterval(pump, Math.min(ctx.pollMs, 500));
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
      },
    },
  ];
}
