import { inSpan, traceCarrier } from '../telemetry/tracing.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Queue } from 'bullmq';
import type { Logger } from 'pino';
import type { ApplicationFunction, Probot } from 'probot';
import { intakeJobOptions } from '../queue/queues.js';
import type { Trigger } from '../queue/trigger.js';
import { parseTrigger } from './triggers.js';

export interface AppDeps {
  readonly appId: number;
  readonly intake: Queue<Trigger>;
  readonly logger: Logger;
  /** Hands the Probot instance out, for the intake processor's installation clients. */
  readonly onProbot?: (probot: Probot) => void;
  /**
   * Whether an issue waits for an answer to the agent's question (one Redis lookup): only then is a
   * comment there that mentions nobody queued, as a possible answer. Absent: such comments are dropped.
   */
  readonly awaitsAnswer?: (repoId: number, issue: number) => Promise<boolean>;
}

/**
 * The webhook side of the App. It only parses a delivery and, if it may concern the App, stores it in
 * the intake queue under its delivery id; everything that needs the network happens in the intake
 * processor. So a delivery is acknowledged in about one Redis round trip, a redelivery collapses into
 * the first, and a delivery is acknowledged (2xx) only once it is durable: if Redis is down the
 * handler throws, Probot answers 500 and GitHub can redeliver.
 */
export function issueAgentApp(deps: AppDeps): ApplicationFunction {
  return (app) => {
    deps.onProbot?.(app);
    app.on(
      [
        'issues.labeled',
        'issues.unlabeled',
        'issue_comment.created',
        'pull_request_review_comment.created',
        'pull_request_review.submitted',
        'check_run.completed',
      ],
      (context) =>
        inSpan('webhook', webhookAttributes(context.name, context.id, context.payload), async () => {
          const parsed = parseTrigger(context.name, context.id, context.payload, deps.appId, new Date(), {
            plainComments: deps.awaitsAnswer !== undefined,
          });
          if (
            parsed.ok &&
            parsed.trigger.kind === 'mention' &&
            !(parsed.trigger.comment?.body ?? '').includes('@') &&
            !((await deps.awaitsAnswer?.(parsed.trigger.repo.id, parsed.trigger.issue.number)) ?? false)
          ) {
            deps.logger.debug({ delivery: context.id }, 'delivery ignored: a comment that mentions nobody');
            return;
          }
          if (!parsed.ok) {
            deps.logger.info(
              { delivery: context.id, event: context.name, reason: parsed.reason },
              'delivery ignored',
            );
            return;
          }
          await deps.intake.add(
            'trigger',
            { ...parsed.trigger, trace: traceCarrier() },
            intakeJobOptions(parsed.trigger),
          );
        }),
    );
    app.on(
      ['issue_comment.edited', 'issue_comment.deleted', 'pull_request_review_comment.edited'],
      (context) => {
        // Editing a comment into a mention would let anyone replay an old approval; only new comments act.
        deps.logger.debug(
          { delivery: context.id, event: `${context.name}.${context.payload.action}` },
          'delivery ignored: edited or deleted comment',
        );
      },
    );
  };
}

/** Probot's webhook middleware, as Probot's Server calls it (request, response, and an unused next). */
type WebhookMiddleware = Awaited<ReturnType<Probot['getNodeMiddleware']>>;
type MiddlewareOptions = Parameters<Probot['getNodeMiddleware']>[0];

export interface WebhookBodyLimit {
  /** The webhook route (WEBHOOK_PATH); other routes are left to their own handlers. */
  readonly path: string;
  readonly maxBytes: number;
  readonly logger: Logger;
}

/**
 * Probot's Server with a bound on webhook bodies in front of its webhook middleware. A delivery is
 * unauthenticated until its signature is checked, and @octokit/webhooks buffers the whole body before
 * checking it, so without a bound anyone who can reach the port makes the App hold whatever they
 * send. Server takes a Probot class and asks it for the middleware (getNodeMiddleware) when it
 * starts, always in first place; overriding that one public method is the only way to be in front
 * of it without replacing Server.
 */
export function probotWithBodyLimit(base: typeof Probot, limit: WebhookBodyLimit): typeof Probot {
  return class extends base {
    override async getNodeMiddleware(options: MiddlewareOptions = {}): Promise<WebhookMiddleware> {
      // The inner middleware is given the same path, so the two can never disagree about which
      // requests are webhooks (and so which bodies are read unbounded).
      const path = options.path ?? limit.path;
      return limitWebhookBodies(await super.getNodeMiddleware({ ...options, path }), { ...limit, path });
    }
  };
}

/**
 * The route test of @octokit/webhooks' middleware, reproduced: a POST it would read the body of.
 * A URL it cannot parse it answers 422 without reading, so that is not a webhook here either.
 */
function isWebhookRequest(req: IncomingMessage, path: string): boolean {
  if (req.method !== 'POST') return false;
  try {
    return (
      new URL(trimTrailingSlashes(req.url ?? ''), 'http://localhost').pathname === trimTrailingSlashes(path)
    );
  } catch {
    return false;
  }
}

function trimTrailingSlashes(path: string): string {
  const trimmed = path.replace(/\/+$/, '');
  return trimmed === '' ? '/' : trimmed;
}

/** The decoder @octokit/webhooks uses, so the signed text is the same as if it had read the body. */
const utf8 = new TextDecoder('utf-8', { fatal: false });

type BodyRead =
  | { readonly kind: 'complete'; readonly body: Buffer }
  | { readonly kind: 'too_large'; readonly received: number }
  | { readonly kind: 'aborted' };

/**
 * Reads the request body, keeping at most maxBytes. The moment the count passes maxBytes the chunks
 * kept so far are dropped and the request is paused: nothing more is read from the socket, so memory
 * stays at most maxBytes plus one chunk however much the client sends.
 */
function readBounded(req: IncomingMessage, maxBytes: number): Promise<BodyRead> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let received = 0;
    const settle = (result: BodyRead): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('close', onClose);
      resolve(result);
    };
    const onData = (chunk: Buffer): void => {
      received += chunk.length;
      if (received > maxBytes) {
        req.pause();
        chunks.length = 0;
        settle({ kind: 'too_large', received });
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      settle({ kind: 'complete', body: Buffer.concat(chunks, received) });
    };
    const onClose = (): void => {
      if (!req.complete) settle({ kind: 'aborted' });
    };
    // A reset connection emits 'error' then 'close'; the listener stays so a late error is not thrown.
    req.on('error', () => undefined);
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('close', onClose);
  });
}

/**
 * Refuses with 413 and `Connection: close`: Node closes the socket as soon as the response is
 * flushed, so the rest of the body is never read. The trade-off of closing over draining: a client
 * that stops to read gets the 413; one still sending may get a reset before it reads the 413. GitHub
 * never sends a body over 25 MiB, so only a misconfigured or hostile sender meets either.
 */
function refuseTooLarge(res: ServerResponse, maxBytes: number): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(413, { 'content-type': 'application/json', connection: 'close' });
  res.end(JSON.stringify({ error: `the request body is larger than ${maxBytes} bytes` }));
}

/**
 * Wraps the webhook middleware: on the webhook route the body is read here, bounded, and handed on
 * as a string (`request.body`, which @octokit/webhooks takes instead of reading the stream). A
 * Content-Length over the limit is refused before any of the body is read; a chunked body is
 * counted as it streams and refused the moment it passes the limit. Other routes pass untouched.
 * The bound is per request: N concurrent deliveries can still hold N × maxBytes until verified.
 */
export function limitWebhookBodies(inner: WebhookMiddleware, limit: WebhookBodyLimit): WebhookMiddleware {
  const pass = async (
    req: IncomingMessage,
    res: ServerResponse,
    next: Parameters<WebhookMiddleware>[2],
  ): Promise<boolean> => {
    // True when it answered the request (Server stops there), as the middleware's own result says.
    const handled: unknown = await inner(req, res, next);
    return handled === true;
  };
  return async (req: IncomingMessage, res: ServerResponse, next?: Parameters<WebhookMiddleware>[2]) => {
    if (!isWebhookRequest(req, limit.path)) return pass(req, res, next);
    const declared = Number(req.headers['content-length'] ?? 0);
    if (declared > limit.maxBytes) {
      limit.logger.warn(
        { remote: req.socket.remoteAddress, contentLength: declared, maxBytes: limit.maxBytes },
        'webhook refused: Content-Length over the limit',
      );
      refuseTooLarge(res, limit.maxBytes);
      return true;
    }
    const read = await readBounded(req, limit.maxBytes);
    if (read.kind === 'aborted') {
      res.destroy();
      return true;
    }
    if (read.kind === 'too_large') {
      limit.logger.warn(
        { remote: req.socket.remoteAddress, received: read.received, maxBytes: limit.maxBytes },
        'webhook refused: body over the limit',
      );
      refuseTooLarge(res, limit.maxBytes);
      return true;
    }
    Object.assign(req, { body: utf8.decode(read.body) });
    return pass(req, res, next);
  };
}

/**
 * A delivery's span attributes, read defensively: a signed delivery may still lack fields (it is
 * parsed and refused later, with a reason, never a 500).
 */
function webhookAttributes(name: string, id: string, payload: unknown): Record<string, string> {
  const p = (typeof payload === 'object' && payload !== null ? payload : {}) as {
    action?: unknown;
    repository?: { full_name?: unknown } | null;
  };
  return {
    'github.event': typeof p.action === 'string' ? `${name}.${p.action}` : name,
    'github.delivery': id,
    'github.repository': typeof p.repository?.full_name === 'string' ? p.repository.full_name : '',
  };
}
