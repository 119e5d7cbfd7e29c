import { timingSafeEqual, createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join } from 'node:path';
import { FileEventStore } from '../events/file-event-store.js';
import { reduceState } from '../events/reduce-state.js';
import type { Redactor } from '../publish/redact.js';

export const TRAJECTORY_ROUTE = /^\/issue-agent\/runs\/([A-Za-z0-9-]+)\/trajectory\.json$/;

export function trajectoryUrl(publicUrl: string, jobId: string): string {
  return `${publicUrl}/issue-agent/runs/${jobId}/trajectory.json`;
}

/**
 * Serves a run's full event log as JSON, so the "full trajectory" a PR points to can be fetched from
 * the App. Readable only with the admin token (compared in constant time); every string is redacted
 * before it leaves, although the log holds no token by construction. Disabled (404) without a token.
 */
export function trajectoryHandler(options: {
  readonly workDir: string;
  readonly adminToken: string | null;
  readonly redactor: Redactor;
}): (req: IncomingMessage, res: ServerResponse) => boolean {
  const expected = options.adminToken === null ? null : digest(options.adminToken);
  return (req, res) => {
    const path = (req.url ?? '').split('?')[0] ?? '';
    const m = TRAJECTORY_ROUTE.exec(path);
    if (m === null || expected === null) return false;
    if (req.method !== 'GET') return reply(res, 405, { message: 'only GET' });
    const header = req.headers.authorization ?? '';
    const token = /^Bearer (.+)$/i.exec(header)?.[1];
    if (token === undefined || !timingSafeEqual(digest(token), expected)) {
      res.setHeader('www-authenticate', 'Bearer realm="issue-agent"');
      return reply(res, 401, { message: 'a valid admin token is required' });
    }
    const dir = join(options.workDir, 'jobs', m[1] ?? '', 'trajectory');
    if (!existsSync(join(dir, 'base_state.json'))) return reply(res, 404, { message: 'no such run' });
    const store = FileEventStore.open(dir);
    return reply(
      res,
      200,
      options.redactor.redactDeep({
        base: store.base,
        events: store.events,
        state: reduceState(store.events),
      }),
    );
  };
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

function reply(res: ServerResponse, status: number, body: unknown): true {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
  res.end(JSON.stringify(body));
  return true;
}
