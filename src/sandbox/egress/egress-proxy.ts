import { lookup } from 'node:dns/promises';
import {
  STATUS_CODES,
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type Server,
  type ServerResponse,
} from 'node:http';
import { connect as netConnect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { AddressPolicy, type AddressVerdict } from './address-policy.js';
import { EgressLog, type EgressLogEntry } from './egress-log.js';
import { EgressProxyError } from './errors.js';
import {
  HostAllowlist,
  hostLabel,
  parseAuthority,
  parseTargetHost,
  type TargetHost,
} from './host-allowlist.js';
import { prepareSocketPath, secureSocket } from './socket-path.js';

export { EgressProxyError, type EgressProxyErrorCode } from './errors.js';
export type { DeniedHost, EgressLog, EgressLogEntry, EgressTotals } from './egress-log.js';

export interface ResolvedAddress {
  readonly address: string;
  readonly family?: number | undefined;
}

/** Every address a name resolves to. All of them are checked; any refused address refuses the name. */
export type Resolver = (hostname: string) => Promise<readonly ResolvedAddress[]>;

export interface ConnectTarget {
  /** A checked IP address (never a name: nothing is resolved again after the check). */
  readonly address: string;
  readonly family: 4 | 6;
  readonly port: number;
}

/** Opens the TCP connection to a checked address. Must not resolve names. */
export type Connector = (target: ConnectTarget) => Socket;

export interface EgressProxyOptions {
  /** Where to listen: an absolute path in a directory owned by this user and writable by no one else. */
  readonly socketPath: string;
  /**
   * 0o600 (default: only this user), 0o660 (also `socketGroup`, e.g. the container user's group),
   * or 0o666 (anyone who can reach the path: only in a directory under a private parent, bind-mounted
   * into the one sandbox it serves, when the container's uid is not the proxy's).
   */
  readonly socketMode?: 0o600 | 0o660 | 0o666 | undefined;
  /** A group id to give the socket (needs the privilege to chown to it). */
  readonly socketGroup?: number | undefined;
  /** Host patterns: `registry.npmjs.org`, `*.example.org` (subdomains only), or an IP literal. */
  readonly allowHosts: readonly string[];
  /** Destination ports (default 443 and 80). */
  readonly allowedPorts?: readonly number[] | undefined;
  /** CIDRs of otherwise refused addresses to allow (loopback in tests, a mirror on the LAN). */
  readonly allowPrivate?: readonly string[] | undefined;
  /** Default: the system resolver (`dns.promises.lookup`, all addresses, in its order). */
  readonly resolve?: Resolver | undefined;
  /** Default: `net.connect` to the address. */
  readonly connect?: Connector | undefined;
  /** Called once per request when it ends, allowed or not. Exceptions are logged and ignored. */
  readonly onRequest?: ((entry: EgressLogEntry) => void) | undefined;
  readonly logger?: Logger | undefined;
  /** Upstream connections (tunnels and forwarded requests, DNS included) at once (default 64). */
  readonly maxTunnels?: number | undefined;
  /** Client connections to the socket at once, idle ones included (default 256). */
  readonly maxClientConnections?: number | undefined;
  /** A tunnel or forwarded request with no bytes either way for this long is closed (default 120 s). */
  readonly idleTimeoutMs?: number | undefined;
  /** Per address tried (default 10 s). */
  readonly connectTimeoutMs?: number | undefined;
  readonly dnsTimeoutMs?: number | undefined;
  /** Time for a client to send a complete request head (default 30 s). */
  readonly headersTimeoutMs?: number | undefined;
  /** Request head size; past it the answer is 431 (default 16 KiB). */
  readonly maxHeaderBytes?: number | undefined;
  /** Bytes both ways over the proxy's lifetime; past it tunnels are cut and requests refused. */
  readonly maxTotalBytes?: number | undefined;
}

export interface EgressProxy {
  readonly socketPath: string;
  /** Totals and the refused hosts, as recorded so far. */
  readonly log: EgressLog;
  /**
   * Stops listening, destroys every tunnel and client connection, and resolves once every request
   * has been reported through onRequest. Safe to call twice.
   */
  close(): Promise<void>;
}

const DEFAULTS = {
  allowedPorts: [443, 80],
  maxTunnels: 64,
  maxClientConnections: 256,
  idleTimeoutMs: 120_000,
  connectTimeoutMs: 10_000,
  dnsTimeoutMs: 10_000,
  headersTimeoutMs: 30_000,
  maxHeaderBytes: 16_384,
} as const;

/** Addresses tried per request, in resolver order, before giving up with 502. */
const MAX_CONNECT_ATTEMPTS = 4;

/**
 * Headers that describe one hop, not the message (RFC 9110 §7.6.1), plus the proxy's own
 * credentials and the legacy Proxy-Connection. Never forwarded either way; neither is any header
 * that a Connection header names.
 */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'proxy-authenticate',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

const defaultResolver: Resolver = (hostname) => lookup(hostname, { all: true, order: 'verbatim' });

const defaultConnector: Connector = ({ address, family, port }) =>
  netConnect({ host: address, family, port, allowHalfOpen: true, noDelay: true });

type Target = Extract<AddressVerdict, { ok: true }>;

type Dialed =
  | { readonly ok: true; readonly socket: Socket }
  | { readonly ok: false; readonly status: number; readonly reason: string };

type Decision =
  | { readonly ok: true; readonly targets: readonly Target[] }
  | { readonly ok: false; readonly status: number; readonly reason: string; readonly allowed: boolean };

/** One request's state, from its head to its log entry. */
class Exchange {
  readonly time = new Date().toISOString();
  private readonly started = performance.now();
  host = '';
  port = 0;
  allowed = false;
  reason: string | undefined;
  status: number | undefined;
  address: string | undefined;
  bytesUp = 0;
  bytesDown = 0;
  upstream: Socket | undefined;
  /** A CONNECT tunnel owns its client socket; its close is handled by the tunnel once relaying. */
  relaying = false;
  holdsSlot = false;
  private finished = false;
  idle: NodeJS.Timeout | undefined;

  constructor(
    readonly method: string,
    /** Destroyed when the exchange is aborted (for a GET this ends the keep-alive connection too). */
    readonly client: Duplex,
  ) {}

  /** A method, not a field: it changes across awaits, where a narrowed field would read as stale. */
  isDone(): boolean {
    return this.finished;
  }

  markDone(): void {
    this.finished = true;
  }

  entry(): EgressLogEntry {
    return {
      time: this.time,
      method: this.method,
      host: this.host,
      port: this.port,
      allowed: this.allowed,
      ...(this.reason !== undefined ? { reason: this.reason } : {}),
      ...(this.status !== undefined ? { status: this.status } : {}),
      ...(this.address !== undefined ? { address: this.address } : {}),
      bytesUp: this.bytesUp,
      bytesDown: this.bytesDown,
      durationMs: Math.round(performance.now() - this.started),
    };
  }
}

function positiveInt(name: string, value: number | undefined, fallback: number): number {
  const v = value ?? fallback;
  if (!Number.isSafeInteger(v) || v <= 0) {
    throw new EgressProxyError('invalid_option', `${name} must be a positive integer, got ${String(value)}`);
  }
  return v;
}

function errorCode(error: unknown): string {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' && /^[A-Z0-9_]{1,40}$/.test(code) ? code : 'error';
}

function rawResponse(status: number, reason: string): string {
  const body = `issue-agent egress proxy: ${reason}\n`;
  return (
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\n` +
    `Content-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
    `Connection: close\r\n\r\n${body}`
  );
}

/** Hop-by-hop headers removed, and every header a Connection header names. */
function endToEndHeaders(raw: readonly string[], skip: ReadonlySet<string> = new Set()): OutgoingHttpHeaders {
  const drop = new Set(HOP_BY_HOP);
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (raw[i]?.toLowerCase() !== 'connection') continue;
    for (const token of (raw[i + 1] ?? '').split(',')) drop.add(token.trim().toLowerCase());
  }
  const out: Record<string, string | string[]> = {};
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i] ?? '';
    const lower = name.toLowerCase();
    if (drop.has(lower) || skip.has(lower)) continue;
    const value = raw[i + 1] ?? '';
    const prev = out[lower];
    if (prev === undefined) out[lower] = value;
    else if (Array.isArray(prev)) prev.push(value);
    else out[lower] = [prev, value];
  }
  return out;
}

class ProxyCore {
  readonly log = new EgressLog();
  readonly server: Server;
  private readonly allowlist: HostAllowlist;
  private readonly policy: AddressPolicy;
  private readonly ports: ReadonlySet<number>;
  private readonly resolver: Resolver;
  private readonly connector: Connector;
  private readonly maxTunnels: number;
  private readonly idleTimeoutMs: number;
  private readonly connectTimeoutMs: number;
  private readonly dnsTimeoutMs: number;
  private readonly maxTotalBytes: number | undefined;
  private readonly logger: Logger | undefined;
  private readonly active = new Set<Exchange>();
  private readonly sockets = new Set<Duplex>();
  private slots = 0;
  private totalBytes = 0;
  private capReached = false;
  private ready = false;
  private closing: Promise<void> | undefined;

  constructor(private readonly options: EgressProxyOptions) {
    this.allowlist = new HostAllowlist(options.allowHosts);
    this.policy = new AddressPolicy(options.allowPrivate ?? []);
    const ports = options.allowedPorts ?? DEFAULTS.allowedPorts;
    for (const p of ports) {
      if (!Number.isInteger(p) || p < 1 || p > 65535) {
        throw new EgressProxyError('invalid_option', `allowedPorts: ${String(p)} is not a TCP port`);
      }
    }
    this.ports = new Set(ports);
    this.resolver = options.resolve ?? defaultResolver;
    this.connector = options.connect ?? defaultConnector;
    this.maxTunnels = positiveInt('maxTunnels', options.maxTunnels, DEFAULTS.maxTunnels);
    this.idleTimeoutMs = positiveInt('idleTimeoutMs', options.idleTimeoutMs, DEFAULTS.idleTimeoutMs);
    this.connectTimeoutMs = positiveInt(
      'connectTimeoutMs',
      options.connectTimeoutMs,
      DEFAULTS.connectTimeoutMs,
    );
    this.dnsTimeoutMs = positiveInt('dnsTimeoutMs', options.dnsTimeoutMs, DEFAULTS.dnsTimeoutMs);
    this.maxTotalBytes =
      options.maxTotalBytes === undefined
        ? undefined
        : positiveInt('maxTotalBytes', options.maxTotalBytes, 1);
    this.logger = options.logger;
    const headersTimeout = positiveInt(
      'headersTimeoutMs',
      options.headersTimeoutMs,
      DEFAULTS.headersTimeoutMs,
    );
    const maxHeaderSize = positiveInt('maxHeaderBytes', options.maxHeaderBytes, DEFAULTS.maxHeaderBytes);
    const mode: number = options.socketMode ?? 0o600;
    if (mode !== 0o600 && mode !== 0o660 && mode !== 0o666) {
      throw new EgressProxyError('invalid_option', `socketMode must be 0o600, 0o660 or 0o666`);
    }

    this.server = createServer({
      maxHeaderSize,
      insecureHTTPParser: false,
      // The request-target names the destination; a Host header adds nothing and some clients omit it.
      requireHostHeader: false,
      headersTimeout: headersTimeout,
      // No request bodies are accepted, so a complete request is its head.
      requestTimeout: headersTimeout,
      connectionsCheckingInterval: Math.max(100, Math.min(5_000, Math.floor(headersTimeout / 2))),
    });
    this.server.maxConnections = positiveInt(
      'maxClientConnections',
      options.maxClientConnections,
      DEFAULTS.maxClientConnections,
    );
    this.server.on('connection', (socket: Socket) => {
      // Until the socket has its final mode, and once closing, nobody is served.
      if (!this.ready || this.closing !== undefined) {
        socket.destroy();
        return;
      }
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
    });
    let drops = 0;
    this.server.on('drop', () => {
      // Once at warn: the sandbox decides how often this happens.
      if (drops++ === 0) this.logger?.warn('egress proxy: client connection dropped, too many open');
    });
    this.server.on('connect', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      const ex = this.begin('CONNECT', socket);
      this.handleConnect(ex, req, socket, head).catch((error: unknown) => {
        this.logger?.error({ err: error }, 'egress proxy: CONNECT handler failed');
        this.abort(ex, 'internal error');
      });
    });
    this.server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      const ex = this.begin(req.method ?? '', req.socket);
      this.handleRequest(ex, req, res).catch((error: unknown) => {
        this.logger?.error({ err: error }, 'egress proxy: request handler failed');
        this.abort(ex, 'internal error');
      });
    });
    this.server.on('upgrade', (req: IncomingMessage, socket: Duplex) => {
      const ex = this.begin(req.method ?? '', socket);
      this.refuseRaw(ex, 400, 'protocol upgrades are not supported', false);
    });
    this.server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
      this.onClientError(error, socket);
    });
    this.server.on('error', (error: Error) => {
      this.logger?.error({ err: error }, 'egress proxy: server error');
    });
  }

  async listen(path: string): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      const onError = (error: Error): void => {
        reject(
          new EgressProxyError('listen_failed', `cannot listen on ${path}: ${error.message}`, {
            cause: error,
          }),
        );
      };
      this.server.once('error', onError);
      this.server.listen({ path }, () => {
        this.server.off('error', onError);
        resolve();
      });
    });
    try {
      await secureSocket(path, this.options.socketMode ?? 0o600, this.options.socketGroup);
    } catch (error) {
      await this.close();
      if (error instanceof EgressProxyError) throw error;
      throw new EgressProxyError('listen_failed', `cannot set the mode of ${path}`, { cause: error });
    }
    this.ready = true;
  }

  close(): Promise<void> {
    this.closing ??= new Promise<void>((resolve) => {
      this.server.close(() => {
        resolve();
      });
      for (const ex of [...this.active]) this.abort(ex, 'proxy closed');
      for (const socket of [...this.sockets]) socket.destroy();
    });
    return this.closing;
  }

  // --- requests ------------------------------------------------------------------------------

  private begin(method: string, client: Duplex): Exchange {
    const ex = new Exchange(method.slice(0, 32), client);
    this.active.add(ex);
    return ex;
  }

  private async handleConnect(
    ex: Exchange,
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
  ): Promise<void> {
    socket.on('error', (error: Error) => {
      ex.reason ??= `client error (${errorCode(error)})`;
    });
    socket.once('close', () => {
      if (!ex.relaying) this.abort(ex, 'client closed');
    });
    const authority = parseAuthority(req.url ?? '');
    if (authority === null) {
      this.refuseRaw(ex, 400, 'CONNECT needs host:port', false);
      return;
    }
    ex.host = hostLabel(authority.host);
    ex.port = authority.port;
    const decision = await this.authorize(ex, authority.host, authority.port);
    if (ex.isDone()) return;
    if (!decision.ok) {
      this.refuseRaw(ex, decision.status, decision.reason, decision.allowed);
      return;
    }
    ex.allowed = true;
    const dialed = await this.dial(ex, decision.targets, authority.port);
    if (ex.isDone()) {
      if (dialed.ok) dialed.socket.destroy();
      return;
    }
    if (!dialed.ok) {
      this.refuseRaw(ex, dialed.status, dialed.reason, true);
      return;
    }
    this.tunnel(ex, socket, dialed.socket, head);
  }

  private tunnel(ex: Exchange, client: Duplex, upstream: Socket, head: Buffer): void {
    ex.relaying = true;
    ex.status = 200;
    this.startIdle(ex);
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head.length > 0) {
      if (!this.charge(head.length)) {
        this.abort(ex, 'egress byte cap reached');
        return;
      }
      ex.bytesUp += head.length;
      upstream.write(head);
    }
    interface Side {
      readonly stream: Duplex;
      ended: boolean;
      closed: boolean;
    }
    const c: Side = { stream: client, ended: false, closed: false };
    const u: Side = { stream: upstream, ended: false, closed: false };
    this.pump(ex, client, upstream, 'up');
    this.pump(ex, upstream, client, 'down');
    for (const [self, other] of [
      [c, u],
      [u, c],
    ] as const) {
      self.stream.once('end', () => {
        self.ended = true;
      });
      self.stream.once('close', (hadError: boolean) => {
        self.closed = true;
        // A side that closed without ending its stream cleanly (reset, error) takes the tunnel down.
        // A clean close means both halves of it ended, so the other side only has to flush and close.
        if (hadError || !self.ended) {
          ex.reason ??=
            self === c ? 'client closed the tunnel abruptly' : 'origin closed the tunnel abruptly';
          other.stream.destroy();
        }
        if (c.closed && u.closed) this.finish(ex);
      });
    }
  }

  /** Relays `from` → `to` with backpressure, counting and charging every chunk, and forwards EOF. */
  private pump(ex: Exchange, from: Duplex, to: Duplex, direction: 'up' | 'down'): void {
    from.on('data', (chunk: Buffer) => {
      if (ex.isDone() || to.destroyed) return;
      if (!this.charge(chunk.length)) {
        this.abort(ex, 'egress byte cap reached');
        return;
      }
      if (direction === 'up') ex.bytesUp += chunk.length;
      else ex.bytesDown += chunk.length;
      ex.idle?.refresh();
      if (!to.write(chunk)) from.pause();
    });
    to.on('drain', () => {
      ex.idle?.refresh();
      from.resume();
    });
    from.once('end', () => {
      if (!to.destroyed) to.end();
    });
  }

  private async handleRequest(ex: Exchange, req: IncomingMessage, res: ServerResponse): Promise<void> {
    res.once('close', () => {
      if (res.writableFinished) this.finish(ex);
      else this.abort(ex, 'client closed');
    });
    const target = req.url ?? '';
    if (!/^http:\/\//i.test(target)) {
      const reason = /^https:\/\//i.test(target)
        ? 'https goes through CONNECT'
        : 'not a proxy request (absolute-form http URL or CONNECT expected)';
      this.refuse(ex, res, 400, reason, false);
      return;
    }
    let url: URL;
    try {
      url = new URL(target);
    } catch {
      this.refuse(ex, res, 400, 'malformed URL', false);
      return;
    }
    const host = parseTargetHost(url.hostname.replace(/^\[(.*)\]$/, '$1'));
    const port = url.port === '' ? 80 : Number(url.port);
    if (host === null) {
      this.refuse(ex, res, 400, 'malformed host', false);
      return;
    }
    ex.host = hostLabel(host);
    ex.port = port;
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      this.refuse(ex, res, 405, `method ${ex.method} is not supported`, false, {
        allow: 'GET, HEAD, CONNECT',
      });
      return;
    }
    if (req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0) {
      this.refuse(ex, res, 400, 'request bodies are not supported', false);
      return;
    }
    const decision = await this.authorize(ex, host, port);
    if (ex.isDone()) return;
    if (!decision.ok) {
      this.refuse(ex, res, decision.status, decision.reason, decision.allowed);
      return;
    }
    ex.allowed = true;
    const dialed = await this.dial(ex, decision.targets, port);
    if (ex.isDone()) {
      if (dialed.ok) dialed.socket.destroy();
      return;
    }
    if (!dialed.ok) {
      this.refuse(ex, res, dialed.status, dialed.reason, true);
      return;
    }
    this.forward(ex, req, res, url, dialed.socket);
  }

  private forward(ex: Exchange, req: IncomingMessage, res: ServerResponse, url: URL, upstream: Socket): void {
    this.startIdle(ex);
    upstream.on('data', (chunk: Buffer) => {
      if (ex.isDone()) return;
      ex.bytesDown += chunk.length;
      ex.idle?.refresh();
      if (!this.charge(chunk.length)) this.abort(ex, 'egress byte cap reached');
    });
    const headers = endToEndHeaders(req.rawHeaders, new Set(['host']));
    // The origin sees the URL's authority as Host, whatever Host the client sent.
    headers.host = url.host;
    const outgoing = httpRequest({
      method: req.method ?? 'GET',
      path: `${url.pathname}${url.search}`,
      headers,
      createConnection: () => upstream,
    });
    outgoing.on('response', (incoming: IncomingMessage) => {
      if (ex.isDone()) return;
      ex.status = incoming.statusCode ?? 502;
      try {
        res.writeHead(ex.status, incoming.statusMessage, endToEndHeaders(incoming.rawHeaders));
      } catch (error) {
        this.logger?.warn({ err: error, host: ex.host }, 'egress proxy: unusable response head from origin');
        this.respond(ex, res, 502, 'unusable response from origin');
        return;
      }
      incoming.on('data', (chunk: Buffer) => {
        if (!res.write(chunk)) incoming.pause();
      });
      res.on('drain', () => {
        ex.idle?.refresh();
        incoming.resume();
      });
      incoming.once('end', () => {
        res.end();
      });
      incoming.once('error', () => {
        this.abort(ex, 'origin closed mid-response');
      });
    });
    outgoing.on('error', (error: Error) => {
      if (ex.isDone()) return;
      if (res.headersSent) this.abort(ex, `origin error (${errorCode(error)})`);
      else this.respond(ex, res, 502, `origin error (${errorCode(error)})`);
    });
    outgoing.end();
  }

  // --- policy ---------------------------------------------------------------------------------

  /**
   * The whole policy, in an order that leaks nothing: port and allowlist first (a name that is not
   * allowed is never resolved, so lookups cannot carry data out), then limits, then every resolved
   * address. On success the caller holds a tunnel slot.
   */
  private async authorize(ex: Exchange, host: TargetHost, port: number): Promise<Decision> {
    const deny = (status: number, reason: string): Decision => ({
      ok: false,
      status,
      reason,
      allowed: false,
    });
    const fail = (status: number, reason: string): Decision => ({ ok: false, status, reason, allowed: true });
    if (!this.ports.has(port)) return deny(403, `port ${port} is not allowed`);
    let literal: Target | undefined;
    if (host.kind === 'ip') {
      const verdict = this.policy.check(host.address);
      if (!verdict.ok) return deny(403, `address ${verdict.address} is refused (${verdict.category})`);
      literal = verdict;
    }
    if (!this.allowlist.allows(host)) return deny(403, 'host is not in the allowlist');
    if (this.capReached) return deny(403, 'egress byte cap reached');
    if (this.slots >= this.maxTunnels) return deny(503, 'too many concurrent connections');
    this.slots++;
    ex.holdsSlot = true;
    if (literal !== undefined) return { ok: true, targets: [literal] };
    if (host.kind !== 'name') return deny(400, 'malformed host');

    const TIMEOUT = Symbol('timeout');
    let timer: NodeJS.Timeout | undefined;
    let resolved: readonly ResolvedAddress[] | typeof TIMEOUT;
    try {
      resolved = await Promise.race([
        Promise.resolve().then(() => this.resolver(host.name)),
        new Promise<typeof TIMEOUT>((resolve) => {
          timer = setTimeout(() => {
            resolve(TIMEOUT);
          }, this.dnsTimeoutMs);
        }),
      ]);
    } catch (error) {
      return fail(502, `DNS lookup failed (${errorCode(error)})`);
    } finally {
      clearTimeout(timer);
    }
    if (resolved === TIMEOUT) return fail(504, 'DNS lookup timed out');
    if (resolved.length === 0) return fail(502, 'DNS lookup returned no address');
    const targets: Target[] = [];
    for (const entry of resolved) {
      const verdict = this.policy.check(typeof entry.address === 'string' ? entry.address : '');
      if (!verdict.ok) {
        return deny(403, `${host.name} resolves to ${verdict.address}, refused (${verdict.category})`);
      }
      if (!targets.some((t) => t.address === verdict.address)) targets.push(verdict);
    }
    return { ok: true, targets };
  }

  /** Connects to the checked addresses in order; the first that answers wins. */
  private async dial(ex: Exchange, targets: readonly Target[], port: number): Promise<Dialed> {
    let failure: Dialed = { ok: false, status: 502, reason: 'connect failed' };
    for (const target of targets.slice(0, MAX_CONNECT_ATTEMPTS)) {
      if (ex.isDone()) break;
      let socket: Socket;
      try {
        socket = this.connector({ address: target.address, family: target.family, port });
      } catch (error) {
        failure = { ok: false, status: 502, reason: `connect failed (${errorCode(error)})` };
        continue;
      }
      ex.upstream = socket;
      // Errors after the connect are reported through 'close' and the exchange's reason.
      socket.on('error', (error: Error) => {
        if (ex.relaying) ex.reason ??= `origin error (${errorCode(error)})`;
      });
      const outcome = await new Promise<string>((resolve) => {
        const timer = setTimeout(() => {
          resolve('timeout');
        }, this.connectTimeoutMs);
        const settle = (value: string): void => {
          clearTimeout(timer);
          socket.off('connect', onConnect);
          socket.off('error', onError);
          socket.off('close', onClose);
          resolve(value);
        };
        const onConnect = (): void => {
          settle('ok');
        };
        const onError = (error: Error): void => {
          settle(errorCode(error));
        };
        const onClose = (): void => {
          settle('closed');
        };
        socket.once('connect', onConnect);
        socket.once('error', onError);
        socket.once('close', onClose);
      });
      if (outcome === 'ok') {
        ex.address = target.address;
        return { ok: true, socket };
      }
      socket.destroy();
      ex.upstream = undefined;
      failure =
        outcome === 'timeout'
          ? { ok: false, status: 504, reason: 'connect timed out' }
          : { ok: false, status: 502, reason: `connect failed (${outcome})` };
    }
    return failure;
  }

  /** Charges bytes to the lifetime cap; false once the cap would be passed (the chunk is not relayed). */
  private charge(bytes: number): boolean {
    if (this.maxTotalBytes === undefined) return true;
    if (this.totalBytes + bytes > this.maxTotalBytes) {
      this.capReached = true;
      return false;
    }
    this.totalBytes += bytes;
    return true;
  }

  private startIdle(ex: Exchange): void {
    ex.idle = setTimeout(() => {
      this.abort(ex, 'idle timeout');
    }, this.idleTimeoutMs);
    ex.idle.unref();
  }

  // --- answers and endings -------------------------------------------------------------------

  /** A refusal on a raw socket (CONNECT, upgrade): answer, then close the connection. */
  private refuseRaw(ex: Exchange, status: number, reason: string, allowed: boolean): void {
    ex.allowed = allowed;
    ex.status = status;
    ex.reason ??= reason;
    const socket = ex.client;
    if (socket.destroyed || !socket.writable) {
      this.abort(ex, reason);
      return;
    }
    socket.once('close', () => {
      this.finish(ex);
    });
    // On a unix socket written bytes are in the peer's queue once write completes: destroying right
    // after cannot lose the answer, and a client that never closes cannot hold the connection.
    socket.end(rawResponse(status, reason), () => {
      socket.destroy();
    });
  }

  /** A refusal of an absolute-form request: answer on the keep-alive connection. */
  private refuse(
    ex: Exchange,
    res: ServerResponse,
    status: number,
    reason: string,
    allowed: boolean,
    headers: OutgoingHttpHeaders = {},
  ): void {
    ex.allowed = allowed;
    this.respond(ex, res, status, reason, headers);
  }

  private respond(
    ex: Exchange,
    res: ServerResponse,
    status: number,
    reason: string,
    headers: OutgoingHttpHeaders = {},
  ): void {
    ex.status = status;
    ex.reason ??= reason;
    ex.upstream?.destroy();
    if (res.headersSent) {
      this.abort(ex, reason);
      return;
    }
    const body = `issue-agent egress proxy: ${reason}\n`;
    res.writeHead(status, {
      ...headers,
      'content-type': 'text/plain; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      // A malformed request says the client and the proxy disagree about framing: start over.
      ...(status === 400 ? { connection: 'close' } : {}),
    });
    res.end(body);
  }

  private onClientError(error: NodeJS.ErrnoException, socket: Duplex): void {
    const code = error.code ?? '';
    let status: number;
    let reason: string;
    if (code === 'HPE_HEADER_OVERFLOW') {
      status = 431;
      reason = 'request head too large';
    } else if (code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      status = 408;
      reason = 'request head not received in time';
    } else if (code.startsWith('HPE_')) {
      status = 400;
      reason = 'malformed request';
    } else {
      socket.destroy();
      return;
    }
    this.refuseRaw(this.begin('', socket), status, reason, false);
  }

  private abort(ex: Exchange, reason: string): void {
    if (ex.isDone()) return;
    ex.reason ??= reason;
    ex.upstream?.destroy();
    ex.client.destroy();
    this.finish(ex);
  }

  /** Reports an exchange exactly once and releases what it holds. */
  private finish(ex: Exchange): void {
    if (ex.isDone()) return;
    ex.markDone();
    clearTimeout(ex.idle);
    this.active.delete(ex);
    if (ex.holdsSlot) {
      ex.holdsSlot = false;
      this.slots--;
    }
    const upstream = ex.upstream;
    if (upstream !== undefined) {
      if (!ex.relaying) {
        // A forwarded request: what went up is the request head the client's request became.
        ex.bytesUp = upstream.bytesWritten;
        // Already sent: past the cap this only marks the cap reached for the next request.
        this.charge(ex.bytesUp);
      }
      upstream.destroy();
    }
    const entry = ex.entry();
    const firstRefusal = this.log.record(entry);
    const fields = {
      method: entry.method,
      host: entry.host,
      port: entry.port,
      status: entry.status,
      reason: entry.reason,
    };
    // A sandbox can repeat a refused request at will: warn once per host, the rest at debug (every
    // request still reaches onRequest and the totals).
    if (entry.allowed) this.logger?.debug({ ...fields, up: entry.bytesUp, down: entry.bytesDown }, 'egress');
    else if (firstRefusal) this.logger?.warn(fields, 'egress refused');
    else this.logger?.debug(fields, 'egress refused');
    try {
      this.options.onRequest?.(entry);
    } catch (error) {
      this.logger?.error({ err: error }, 'egress proxy: onRequest callback failed');
    }
  }
}

/**
 * Starts the host-side egress proxy for a sandbox's setup phase, listening on a unix socket.
 *
 * It speaks HTTP/1.1 proxy requests only: `CONNECT host:port` becomes a byte tunnel (TLS passes
 * through untouched), and absolute-form `GET`/`HEAD http://…` is forwarded with hop-by-hop and proxy
 * headers removed. A request passes when its port is allowed, its host matches the allowlist, and
 * every address the host resolves to (or the literal it is) is global unicast or inside
 * `allowPrivate`; the connection then goes to that checked address, never to a fresh lookup.
 */
export async function startEgressProxy(options: EgressProxyOptions): Promise<EgressProxy> {
  const core = new ProxyCore(options);
  await prepareSocketPath(options.socketPath);
  await core.listen(options.socketPath);
  return {
    socketPath: options.socketPath,
    log: core.log,
    close: () => core.close(),
  };
}
