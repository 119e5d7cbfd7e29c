import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Redactor } from '../publish/redact.js';

/** An answer to the client with a status and a stable code (API.md lists them). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
};

export const CONTENT_SECURITY_POLICY =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const MAX_BODY = 64 * 1024;

/** Writes JSON bodies, every one redacted on the way out. */
export interface JsonWriter {
  /**
   * `redacted: true` is for bodies made only of what the trajectory reader already redacted (events
   * are redacted once, when first read), which saves a second pass over every page of a long run.
   */
  (
    res: ServerResponse,
    status: number,
    body: unknown,
    headers?: Record<string, string>,
    redacted?: boolean,
  ): true;
}

export function jsonWriter(redactor: Redactor): JsonWriter {
  return (res, status, body, headers = {}, redacted = false) => {
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
}

export function writeError(json: JsonWriter, res: ServerResponse, error: ApiError): true {
  const headers: Record<string, string> =
    error.status === 401 ? { 'www-authenticate': 'Bearer realm="issue-agent"' } : {};
  return json(res, error.status, { error: { code: error.code, message: error.message } }, headers);
}

export function intParam(url: URL, name: string, fallback: number, min: number, max: number): number {
  const raw = url.searchParams.get(name);
  if (raw === null || raw === '') return fallback;
  if (!/^\d+$/.test(raw)) throw new ApiError(400, 'bad_request', `${name} must be a non-negative integer`);
  return Math.min(Math.max(Number(raw), min), max);
}

/** A JSON request body of at most 64 KiB; an empty body is `{}`. */
export async function readJson(req: IncomingMessage): Promise<unknown> {
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

export function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** One request as a route sees it: `params` are the path pattern's groups. */
export interface RouteRequest {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly url: URL;
  readonly params: readonly string[];
}

/**
 * A route: a method (GET also answers HEAD), a path (exact, a pattern whose groups become
 * `params`, or a prefix) and its handler.
 */
export interface Route {
  readonly method: 'GET' | 'POST' | 'ANY';
  readonly path: string | RegExp | { readonly prefix: string };
  /** Answers the request (every route answers the requests it matches). */
  readonly handle: (r: RouteRequest) => unknown;
}

/** The path's parameters if the route's path matches, else null. */
export function matchPath(route: Route, path: string): string[] | null {
  const p = route.path;
  if (typeof p === 'string') return p === path ? [] : null;
  if (p instanceof RegExp) {
    const m = p.exec(path);
    return m === null ? null : m.slice(1).map((g: string | undefined) => g ?? '');
  }
  return path === p.prefix || path.startsWith(`${p.prefix}/`) ? [] : null;
}

export function methodMatches(route: Route, method: string): boolean {
  if (route.method === 'ANY') return true;
  if (route.method === 'GET') return method === 'GET' || method === 'HEAD';
  return method === route.method;
}
