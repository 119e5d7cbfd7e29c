import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Queue } from 'bullmq';
import type express from 'express';

export const BULL_BOARD_PATH = '/admin/queues';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * bull-board for the intake and fix queues, as a (req, res) handler for paths under /admin/queues.
 * The caller authenticates first: bull-board itself has no access control. Its modules are loaded
 * on the first request (about 0.2 s of CPU that every App start would otherwise pay for a page
 * few open).
 */
export function bullBoardHandler(
  queues: readonly Queue[],
): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  let board: Promise<Handler> | undefined;
  return async (req, res) => {
    // A failed load is tried again on the next request rather than kept.
    board ??= makeBoard(queues).catch((error: unknown) => {
      board = undefined;
      throw error;
    });
    (await board)(req, res);
  };
}

async function makeBoard(queues: readonly Queue[]): Promise<Handler> {
  const [{ createBullBoard }, { BullMQAdapter }, { ExpressAdapter }, { default: makeExpress }] =
    await Promise.all([
      import('@bull-board/api'),
      import('@bull-board/api/bullMQAdapter'),
      import('@bull-board/express'),
      import('express'),
    ]);
  const serverAdapter = new ExpressAdapter();
  serverAdapter.setBasePath(BULL_BOARD_PATH);
  createBullBoard({
    queues: queues.map((q) => new BullMQAdapter(q, { readOnlyMode: false })),
    // @bull-board/express brings its own patch release of @bull-board/api; the adapter interface is the same.
    serverAdapter: serverAdapter as unknown as Parameters<typeof createBullBoard>[0]['serverAdapter'],
  });
  const app = makeExpress();
  app.disable('x-powered-by');
  app.use(BULL_BOARD_PATH, serverAdapter.getRouter() as express.Router);
  return (req, res) => {
    app(req as express.Request, res as express.Response, () => {
      if (!res.headersSent) {
        res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' });
        res.end('not found');
      }
    });
  };
}
