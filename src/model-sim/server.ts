import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { newId } from './replies.js';
import {
  isReply,
  type ApiErrorStatus,
  type Fault,
  type MessagesRequest,
  type Policy,
  type RecordedRequest,
  type Reply,
} from './types.js';
import {
  bedrockErrorType,
  checkProviderRequest,
  eventStreamChunk,
  routeOf,
  stsTokenResponse,
  toMessagesBody,
  type ProviderAuth,
  type ProviderRoute,
} from './providers.js';
import { PromptCache } from './usage.js';
import {
  applyContextManagement,
  findContextManagementViolation,
  type ContextManagementResponse,
} from './context-management.js';
import { findThinkingViolation, withThinking } from './thinking.js';
import { findRequestViolation, forTools, isRecord } from './validate.js';
import { errorBody, formatSse, toMessage, toStreamEvents } from './wire.js';

export interface ModelSimulatorOptions {
  policy: Policy;
  /** Default 0: a free port. */
  port?: number;
  /** When set, the key presented (`x-api-key` or `Authorization: Bearer`) must equal it, else 401. Default: any. */
  apiKey?: string;
  /** Default and only choice: the simulator listens on loopback. */
  host?: '127.0.0.1';
  /**
   * Time each reply takes before its first byte, as a real model's does (default 0): benchmarks
   * whose cost is dominated by waiting on the model, e.g. parallel attempts, set it.
   */
  latencyMs?: number;
  /** What Bedrock's and Vertex's doors accept (see providers.ts); default: any well-formed credential. */
  providerAuth?: ProviderAuth;
}

export interface ModelSimulator {
  /** Base URL for the SDK, e.g. `http://127.0.0.1:40123`. */
  readonly url: string;
  /** Every request except `GET /health`, in arrival order, recorded before it is answered. */
  readonly requests: readonly RecordedRequest[];
  /** Queues faults; each valid `POST /v1/messages` consumes one, before the policy is asked. */
  injectFaults(...faults: Fault[]): void;
  /** Replaces the policy; its `requestIndex` count starts again at 0. */
  setPolicy(policy: Policy): void;
  /** Resolves once `count` requests have arrived (default timeout 5000 ms). */
  waitForRequests(count: number, timeoutMs?: number): Promise<void>;
  /** Ends hung requests and open connections, then stops listening. Idempotent. */
  close(): Promise<void>;
}

/**
 * A loopback HTTP server speaking the Anthropic Messages API wire format (`POST /v1/messages`,
 * JSON or server-sent events), and the same API as Amazon Bedrock and Google Vertex AI serve it
 * (providers.ts), answering from a Policy. Valid requests are answered in this order of
 * precedence: an injected fault, else the policy's step. Invalid ones get the API's 400/401.
 */
export async function startModelSimulator(options: ModelSimulatorOptions): Promise<ModelSimulator> {
  const simulator = new Simulator(options);
  await simulator.listen(options.port ?? 0, options.host ?? '127.0.0.1');
  return simulator;
}

interface Waiter {
  readonly count: number;
  readonly resolve: () => void;
  readonly reject: (error: Error) => void;
}

class Simulator implements ModelSimulator {
  readonly requests: RecordedRequest[] = [];
  private readonly server: Server;
  private readonly faults: Fault[] = [];
  private readonly cache = new PromptCache();
  private readonly hung = new Set<ServerResponse>();
  private waiters: Waiter[] = [];
  private policy: Policy;
  private policyCalls = 0;
  private address = '';
  private closing: Promise<void> | undefined;

  constructor(private readonly options: ModelSimulatorOptions) {
    this.policy = options.policy;
    this.server = createServer((req, res) => {
      this.handle(req, res).catch((error: unknown) => {
        if (res.headersSent) res.destroy();
        else sendError(res, 500, `model simulator failed: ${describe(error)}`);
      });
    });
  }

  get url(): string {
    return this.address;
  }

  async listen(port: number, host: string): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    const { port: bound } = this.server.address() as AddressInfo;
    this.address = `http://${host}:${bound}`;
  }

  injectFaults(...faults: Fault[]): void {
    this.faults.push(...faults);
  }

  setPolicy(policy: Policy): void {
    this.policy = policy;
    this.policyCalls = 0;
  }

  waitForRequests(count: number, timeoutMs = 5000): Promise<void> {
    if (this.requests.length >= count) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(
          new Error(
            `model simulator: expected ${count} requests within ${timeoutMs} ms, got ${this.requests.length}`,
          ),
        );
      }, timeoutMs);
      const waiter: Waiter = {
        count,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      };
      this.waiters.push(waiter);
    });
  }

  close(): Promise<void> {
    this.closing ??= this.shutDown();
    return this.closing;
  }

  private async shutDown(): Promise<void> {
    for (const res of this.hung) res.destroy();
    this.hung.clear();
    for (const waiter of this.waiters) waiter.reject(new Error('model simulator closed'));
    this.waiters = [];
    const closed = new Promise<void>((resolve, reject) => {
      this.server.close((error) => {
        if (error) reject(error);
        else resolve();
      });
    });
    this.server.closeAllConnections();
    await closed;
  }

  private record(entry: RecordedRequest): void {
    this.requests.push(entry);
    const ready = this.waiters.filter((w) => this.requests.length >= w.count);
    this.waiters = this.waiters.filter((w) => this.requests.length < w.count);
    for (const waiter of ready) waiter.resolve();
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const requestId = newId('req_');
    res.setHeader('request-id', requestId);
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    if (req.method === 'GET' && path === '/health') {
      sendJson(res, 200, { status: 'ok' });
      return;
    }
    const text = await readBody(req);
    if (req.method === 'POST' && path === '/v1/token') {
      sendJson(res, 200, stsTokenResponse(this.options.providerAuth?.googleAccessToken ?? 'ya29.simulated'));
      return;
    }
    const body = parseJson(text);
    const route = req.method === 'POST' ? routeOf(path) : null;
    const entry: RecordedRequest = {
      method: req.method ?? '',
      path,
      provider: route?.provider ?? null,
      headers: { ...req.headers },
      body: body ?? text,
      stream: route?.stream ?? isStreamRequest(body),
      status: null,
      outcome: 'pending',
      usage: null,
      errorMessage: null,
      contextManagement: null,
    };
    this.record(entry);
    const fail = (status: ApiErrorStatus | 404, message?: string): void => {
      entry.status = status;
      entry.outcome = 'error';
      entry.errorMessage = message ?? null;
      if (route?.provider === 'bedrock') sendBedrockError(res, status, message);
      else sendError(res, status, message);
    };

    const rejection = this.check(req, route, path, body);
    if (rejection !== null) {
      fail(...rejection);
      return;
    }
    const sent = (
      route === null ? body : toMessagesBody(route, body as Record<string, unknown>)
    ) as MessagesRequest;
    // The model (the policy) reads, and the usage counts, the prompt after its context edits.
    const { request, applied } = applyContextManagement(sent);
    entry.contextManagement = applied;

    const step = this.faults.shift() ?? this.ask(request);
    if (isReply(step)) {
      const latency = this.options.latencyMs ?? 0;
      if (latency > 0) await new Promise((resolve) => setTimeout(resolve, latency));
      this.answer(request, step, entry, res, route?.provider === 'bedrock', applied);
    } else if ('status' in step) {
      if (step.retryAfterSeconds !== undefined) res.setHeader('retry-after', String(step.retryAfterSeconds));
      fail(step.status, step.message);
    } else if ('hang' in step) {
      entry.outcome = 'hang';
      this.hung.add(res);
      res.once('close', () => this.hung.delete(res));
    } else {
      entry.outcome = 'dropped';
      req.socket.destroy();
    }
  }

  /** The API's answer to a request it refuses, in its order: route, credential, version, body. */
  private check(
    req: IncomingMessage,
    route: ProviderRoute | null,
    path: string,
    body: unknown,
  ): [ApiErrorStatus | 404, string] | null {
    if (route === null) return [404, `${req.method ?? ''} ${path} not found`];
    if (route.provider === 'anthropic') {
      const key = presentedKey(req);
      if (this.options.apiKey !== undefined && key !== this.options.apiKey) {
        return [401, key === undefined ? 'x-api-key header is required' : 'invalid x-api-key'];
      }
      if (req.headers['anthropic-version'] === undefined)
        return [400, 'anthropic-version: header is required'];
    }
    if (body === undefined) return [400, 'There was an error parsing the body: invalid JSON'];
    const refusal = checkProviderRequest(route, req, body, this.options.providerAuth ?? {});
    if (refusal !== null) return [...refusal];
    const messagesBody = isRecord(body) ? toMessagesBody(route, body) : body;
    const violation =
      findRequestViolation(messagesBody) ??
      findThinkingViolation(messagesBody as Record<string, unknown>, req.headers) ??
      findContextManagementViolation(messagesBody as Record<string, unknown>, req.headers);
    return violation === null ? null : [400, violation];
  }

  private ask(request: MessagesRequest): Reply | Fault {
    try {
      return this.policy(request, { requestIndex: this.policyCalls++ });
    } catch (error) {
      // A policy that cannot answer (the oracle's patch does not apply, a script bug) is a test
      // failure: answered as an API error the client sees, and said on stderr for whoever reads the log.
      const message = `model simulator policy threw: ${describe(error)}`;
      process.stderr.write(`${message}\n`);
      return { status: 500, message };
    }
  }

  private answer(
    request: MessagesRequest,
    policyReply: Reply,
    entry: RecordedRequest,
    res: ServerResponse,
    bedrock: boolean,
    contextManagement: ContextManagementResponse | null,
  ): void {
    const reply = withThinking(forTools(policyReply, request), request);
    const message = toMessage(reply, request.model, this.cache.account(request), contextManagement);
    entry.status = 200;
    entry.outcome = 'reply';
    entry.usage = message.usage;
    if (!request.stream) {
      sendJson(res, 200, message);
      return;
    }
    if (bedrock) {
      res.writeHead(200, { 'content-type': 'application/vnd.amazon.eventstream' });
      for (const { data } of toStreamEvents(message)) res.write(eventStreamChunk(data));
      res.end();
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
    for (const { event, data } of toStreamEvents(message)) res.write(formatSse(event, data));
    res.end();
  }
}

/**
 * The API key a request presents: SDK 1.x sends it as `Authorization: Bearer <key>`, older clients
 * and curl as `x-api-key`; the API accepts either.
 */
function presentedKey(req: IncomingMessage): string | undefined {
  const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? '');
  const header = req.headers['x-api-key'];
  return bearer?.[1] ?? (typeof header === 'string' ? header : undefined);
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** Sends the API's error envelope; the body's request_id repeats the `request-id` header. */
function sendError(res: ServerResponse, status: ApiErrorStatus | 404, message?: string): void {
  const requestId = res.getHeader('request-id');
  sendJson(
    res,
    status,
    errorBody(status, typeof requestId === 'string' ? requestId : newId('req_'), message),
  );
}

/** Bedrock's error shape: `{"message": …}` and the exception's name in `x-amzn-errortype`. */
function sendBedrockError(res: ServerResponse, status: number, message?: string): void {
  res.setHeader(
    'x-amzn-errortype',
    `${bedrockErrorType(status)}:http://internal.amazon.com/coral/com.amazon.bedrock/`,
  );
  sendJson(res, status === 529 ? 503 : status, { message: message ?? bedrockErrorType(status) });
}

async function readBody(req: IncomingMessage): Promise<string> {
  const parts: Buffer[] = [];
  for await (const part of req) parts.push(part as Buffer);
  return Buffer.concat(parts).toString('utf8');
}

/** The parsed body, or undefined when the text is not JSON. */
function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function isStreamRequest(body: unknown): boolean {
  return typeof body === 'object' && body !== null && 'stream' in body && body.stream === true;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
