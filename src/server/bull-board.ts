import type { IncomingMessage, ServerResponse } from 'node:http';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import type { Queue } from 'bullmq';
import express from 'express';

export const BULL_BOARD_PATH = '/admin/queues';

/**
 * bull-board for the intake and fix queues, as a plain (req, res) handler for paths under
 * /admin/queues. The caller authenticates first: bull-board itself has no access control.
 */
export function bullBoardHandler(
  queues: readonly Queue[],
): (req: IncomingMessage, res: ServerResponse) => void {
  const serverAdapter = new ExpressAdapter();
  serverAdapter.setBasePath(BULL_BOARD_PATH);
  createBullBoard({
    queues: queues.map((q) => new BullMQAdapter(q, { readOnlyMode: false })),
    // @bull-board/express brings its own patch release of @bull-board/api; the adapter interface is the same.
    serverAdapter: serverAdapter as unknown as Parameters<typeof createBullBoard>[0]['serverAdapter'],
  });
  const app = express();
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
