import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { connect as netConnect, isIP, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable, Transform } from 'node:stream';
import * as tls from 'node:tls';
import type { Logger } from 'pino';
import { holdPath, releasePath } from '../held-paths.js';
import type { EgressLog, EgressLogEntry } from './egress-log.js';
import { startEgressProxy, type EgressProxy } from './egress-proxy.js';

/** The shape of `fetch` that the MCP SDK (and most HTTP clients) accept. */
export type FetchLike = (url: string | URL, init?: RequestInit) => Promise<Response>;

/**
 * Egress for the worker's own connections that a repository's config names (a remote MCP server):
 * the same proxy as the sandbox's, so the same allowlist, address policy (no loopback, private,
 * link-local or metadata address unless the deployment allows its range), DNS pinning and log. The
 * proxy listens on a socket in a fresh 0700 directory, 0600: only this process reaches it.
 */
export interface HostEgress {
  /** A fetch whose every request is a CONNECT tunnel through the proxy. Redirects are not followed. */
  readonly fetch: FetchLike;
  readonly log: EgressLog;
  close(): Promise<void>;
}

export interface HostEgressOptions {
  readonly allowHosts: readonly string[];
  readonly allowedPorts: readonly number[];
  /** Otherwise refused address ranges (a server on the LAN; loopback in tests). */
  readonly allowCidrs: readonly string[];
  /** PEM of extra CA certificates for TLS, beside the defaults (a corporate proxy's CA). */
  readonly extraCaPem?: string | null | undefined;
  readonly logger?: Logger | undefined;
  readonly onRequest?: ((entry: EgressLogEntry) => void) | undefined;
  /** Bound on opening a tunnel and receiving the response head (default 30 s). */
  readonly connectTimeoutMs?: number | undefined;
  /** Bytes of one response body (default 16 MiB): a longer one ends in an error. */
  readonly maxResponseBytes?: number | undefined;
  /** Bytes through the proxy in all, both ways (default 256 MiB): then it refuses. */
  readonly maxTotalBytes?: number | undefined;
}

export async function startHostEgress(options: HostEgressOptions): Promise<HostEgress> {
  const dir = holdPath(await mkdtemp(join(tmpdir(), 'ia-hostegress-')));
  await chmod(dir, 0o700);
  let proxy: EgressProxy;
  try {
    proxy = await startEgressProxy({
      socketPath: join(dir, 'p.sock'),
      socketMode: 0o600,
      allowHosts: options.allowHosts,
      allowedPorts: options.allowedPorts,
      allowPrivate: options.allowCidrs,
      logger: options.logger,
      onRequest: options.onRequest,
      maxTotalBytes: options.maxTotalBytes ?? 256 * 1024 * 1024,
    });
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    releasePath(dir);
    throw error;
  }
  const ca =
    options.extraCaPem === undefined || options.extraCaPem === null
      ? undefined
      : [...defaultCas(), options.extraCaPem];
  let closing: Promise<void> | null = null;
  return {
    fetch: tunnelFetch(proxy.socketPath, {
      ca,
      connectTimeoutMs: options.connectTimeoutMs ?? 30_000,
      maxResponseBytes: options.maxResponseBytes ?? 16 * 1024 * 1024,
      logger: options.logger,
    }),
    log: proxy.log,
    close: () => {
      closing ??= (async () => {
        await proxy.close();
        await rm(dir, { recursive: true, force: true });
        releasePath(dir);
      })();
      return closing;
    },
  };
}

/** The CAs TLS trusts by default, NODE_EXTRA_CA_CERTS included where Node can say (22.15+). */
function defaultCas(): string[] {
  const get = (tls as { getCACertificates?: (type: 'default') => string[] }).getCACertificates;
  return get === undefined ? [...tls.rootCertificates] : get('default');
}

interface TunnelOptions {
  readonly ca: readonly string[] | undefined;
  readonly connectTimeoutMs: number;
  readonly maxResponseBytes: number;
  readonly logger: Logger | undefined;
}

/** No request body is more than this (an MCP message; the SDK sends strings). */
const MAX_BODY_BYTES = 16 * 1024 * 1024;

function tunnelFetch(socketPath: string, options: TunnelOptions): FetchLike {
  return async (input, init) => {
    const url = new URL(input);
    if (url.protocol !== 'https:' && url.protocol !== 'http:') {
      throw new TypeError(`only http and https URLs are fetched, not ${url.protocol}`);
    }
    const signal = init?.signal ?? undefined;
    signal?.throwIfAborted();
    const body = requestBody(init?.body);
    const headers = new Headers(init?.headers);
    headers.set('host', url.host);
    if (body !== undefined) headers.set('content-length', String(body.byteLength));
    const port = url.port !== '' ? Number(url.port) : url.protocol === 'https:' ? 443 : 80;
    const hostname = url.hostname.replace(/^\[(.*)\]$/, '$1');
    const socket = await openTunnel(socketPath, {
      hostname,
      port,
      secure: url.protocol === 'https:',
      ca: options.ca,
      signal,
      timeoutMs: options.connectTimeoutMs,
      logger: options.logger,
    });
    const headerObject: Record<string, string> = {};
    headers.forEach((v, k) => {
      headerObject[k] = v;
    });
    const res = await new Promise<IncomingMessage>((resolve, reject) => {
      const req = httpRequest({
        method: init?.method ?? 'GET',
        path: `${url.pathname}${url.search}`,
        headers: headerObject,
        createConnection: () => socket,
      });
      const onAbort = (): void => {
        req.destroy(signal?.reason instanceof Error ? signal.reason : new Error('aborted'));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      if (signal?.aborted === true) onAbort();
      req.once('response', (r) => {
        // The body is read as a stream (an SSE stream lasts); abort ends it too.
        r.once('close', () => signal?.removeEventListener('abort', onAbort));
        resolve(r);
      });
      req.once('error', (error) => {
        signal?.removeEventListener('abort', onAbort);
        socket.destroy();
        reject(error);
      });
      req.setTimeout(options.connectTimeoutMs, () => {
        req.destroy(
          new Error(`${url.host} sent no response in ${Math.round(options.connectTimeoutMs / 1000)} s`),
        );
      });
      req.end(body === undefined ? undefined : Buffer.from(body));
    });
    res.socket.setTimeout(0);
    const responseHeaders = new Headers();
    for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) {
      responseHeaders.append(res.rawHeaders[i] ?? '', res.rawHeaders[i + 1] ?? '');
    }
    const status = res.statusCode ?? 502;
    const empty = [204, 205, 304].includes(status) || init?.method === 'HEAD';
    if (empty) res.resume();
    // A server that streams without end (one endless SSE event, a huge body) is cut off, not buffered.
    let seen = 0;
    const capped = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        seen += chunk.length;
        if (seen > options.maxResponseBytes) {
          done(new Error(`the response passed ${options.maxResponseBytes} bytes`));
          return;
        }
        done(null, chunk);
      },
    });
    res.on('error', (error) => capped.destroy(error));
    capped.on('close', () => {
      if (!res.destroyed) res.destroy();
    });
    try {
      return new Response(empty ? null : (Readable.toWeb(res.pipe(capped)) as ReadableStream<Uint8Array>), {
        status: status >= 200 && status <= 599 ? status : 502,
        statusText: (res.statusMessage ?? '').replace(/[^\t\x20-\x7e]/g, ''),
        headers: responseHeaders,
      });
    } catch (error) {
      res.destroy();
      throw error;
    }
  };
}

function requestBody(body: RequestInit['body']): Uint8Array | undefined {
  if (body === undefined || body === null) return undefined;
  let bytes: Uint8Array;
  if (typeof body === 'string') bytes = Buffer.from(body);
  else if (body instanceof Uint8Array) bytes = body;
  else if (body instanceof ArrayBuffer) bytes = new Uint8Array(body);
  else throw new TypeError('only string and byte request bodies are sent');
  if (bytes.byteLength > MAX_BODY_BYTES) throw new TypeError('the request body is too large');
  return bytes;
}

/** A CONNECT tunnel through the proxy's socket, wrapped in TLS for https. */
async function openTunnel(
  socketPath: string,
  target: {
    readonly hostname: string;
    readonly port: number;
    readonly secure: boolean;
    readonly ca: readonly string[] | undefined;
    readonly signal: AbortSignal | undefined;
    readonly timeoutMs: number;
    readonly logger: Logger | undefined;
  },
): Promise<Socket> {
  const { hostname, port, secure, ca, signal } = target;
  const authority = isIP(hostname) === 6 ? `[${hostname}]:${port}` : `${hostname}:${port}`;
  const raw = netConnect({ path: socketPath });
  // Bounds the tunnel and the TLS handshake; destroying the socket fails whichever is pending.
  const timer = setTimeout(() => {
    raw.destroy(
      new Error(`connecting to ${authority} took longer than ${Math.round(target.timeoutMs / 1000)} s`),
    );
  }, target.timeoutMs);
  const onAbort = (): void => {
    raw.destroy(signal?.reason instanceof Error ? signal.reason : new Error('aborted'));
  };
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    await new Promise<void>((resolve, reject) => {
      let head = Buffer.alloc(0);
      const onData = (chunk: Buffer): void => {
        head = Buffer.concat([head, chunk]);
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) {
          if (head.length > 16 * 1024) fail(new Error('the egress proxy sent an oversized response head'));
          return;
        }
        // Not paused: a paused socket would stay paused under the HTTP client. Nothing is lost, as
        // neither an HTTP server nor a TLS server speaks before the client on a fresh tunnel.
        raw.off('data', onData);
        const statusLine = head.subarray(0, head.indexOf('\r\n')).toString('latin1');
        const rest = head.subarray(end + 4);
        if (!/^HTTP\/1\.[01] 200 /.test(`${statusLine} `)) {
          const reason = rest
            .toString('utf8')
            .replace(/^issue-agent egress proxy: /, '')
            .trim()
            .slice(0, 300);
          // The proxy's reason (what a name resolves to) is for the operator's log, not for a
          // repository's config to probe the worker's network with.
          target.logger?.warn(
            { authority, reason: reason === '' ? statusLine : reason },
            'host egress refused',
          );
          fail(
            new Error(
              `the egress policy refused ${authority} (not allowed, or a loopback, private, link-local or reserved address)`,
            ),
          );
          return;
        }
        if (rest.length > 0) raw.unshift(rest);
        cleanup();
        resolve();
      };
      const onError = (error: Error): void => {
        fail(error);
      };
      const onClose = (): void => {
        fail(new Error(`the egress proxy closed the connection to ${authority}`));
      };
      const cleanup = (): void => {
        raw.off('data', onData);
        raw.off('error', onError);
        raw.off('close', onClose);
      };
      const fail = (error: Error): void => {
        cleanup();
        raw.destroy();
        reject(error);
      };
      raw.on('data', onData);
      raw.once('error', onError);
      raw.once('close', onClose);
      raw.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
    });
    if (!secure) return raw;
    return await new Promise<Socket>((resolve, reject) => {
      const secured = tls.connect({
        socket: raw,
        // The name (or IP) the certificate must match; SNI only for names.
        host: hostname,
        ...(isIP(hostname) === 0 ? { servername: hostname } : {}),
        ...(ca === undefined ? {} : { ca: [...ca] }),
        ALPNProtocols: ['http/1.1'],
      });
      secured.once('secureConnect', () => {
        secured.off('error', reject);
        resolve(secured);
      });
      secured.once('error', reject);
    });
  } catch (error) {
    raw.destroy();
    throw error;
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
  }
}
