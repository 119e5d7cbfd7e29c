import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  lchownSync,
  lstatSync,
  mkdtempSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import {
  createServer as createHttpServer,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server as HttpServer,
} from 'node:http';
import { createServer as createTcpServer, connect, Socket, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, test, type TestContext } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { AddressPolicy } from '../../../src/sandbox/egress/address-policy.js';
import {
  EgressProxyError,
  startEgressProxy,
  type ConnectTarget,
  type Connector,
  type EgressLogEntry,
  type EgressProxy,
  type EgressProxyOptions,
  type ResolvedAddress,
} from '../../../src/sandbox/egress/egress-proxy.js';
import {
  HostAllowlist,
  parseAuthority,
  parseTargetHost,
} from '../../../src/sandbox/egress/host-allowlist.js';

// Every socket here is a unix socket or 127.0.0.1. Names resolve through a fake resolver, and the
// connector refuses (without any packet) every address that is not loopback, so a proxy bug can
// at worst fail a test, never reach another machine.

const LOOPBACK = new Set(['127.0.0.1', '::1']);

interface Fixture {
  echoPort: number;
  echoConnections: number;
  httpPort: number;
  httpRequests: { url: string; headers: IncomingHttpHeaders; method: string }[];
}

const servers: (Server | HttpServer)[] = [];
const fx: Fixture = { echoPort: 0, echoConnections: 0, httpPort: 0, httpRequests: [] };

function listen(server: Server | HttpServer): Promise<number> {
  servers.push(server);
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      resolve((server.address() as AddressInfo).port);
    });
  });
}

before(async () => {
  // TCP echo: each connection echoes and half-closes when the client does.
  fx.echoPort = await listen(
    createTcpServer({ allowHalfOpen: true }, (s) => {
      fx.echoConnections++;
      s.on('error', () => undefined);
      s.pipe(s);
    }),
  );
  // A plain-http "registry".
  fx.httpPort = await listen(
    createHttpServer((req, res) => {
      fx.httpRequests.push({ url: req.url ?? '', headers: req.headers, method: req.method ?? '' });
      if (req.url === '/slow') {
        // Answers after the proxy's request-head timeout would have passed.
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('slow ');
        setTimeout(() => res.end('answer\n'), 500);
        return;
      }
      const body = 'tarball bytes\n';
      res.writeHead(200, {
        'content-type': 'application/octet-stream',
        'content-length': Buffer.byteLength(body),
        'x-origin': 'yes',
        'proxy-authenticate': 'Basic realm="origin"',
        'keep-alive': 'timeout=1',
        'x-up-hop': 'dropped',
        connection: 'x-up-hop',
      });
      res.end(req.method === 'HEAD' ? undefined : body);
    }),
  );
});

after(() => {
  for (const s of servers) s.close();
});

interface TestProxy {
  proxy: EgressProxy;
  socketPath: string;
  entries: EgressLogEntry[];
  connects: ConnectTarget[];
  lookups: string[];
  /** Resolves once `n` entries have been logged. */
  waitEntries(n: number): Promise<EgressLogEntry[]>;
}

/** Only loopback is ever contacted; anything else fails as a refused connect, with no packet sent. */
function loopbackOnlyConnector(calls: ConnectTarget[]): Connector {
  return (target) => {
    calls.push(target);
    if (LOOPBACK.has(target.address)) {
      return connect({ host: target.address, port: target.port, allowHalfOpen: true, noDelay: true });
    }
    const s = new Socket();
    process.nextTick(() => {
      s.destroy(Object.assign(new Error('test: non-loopback address'), { code: 'ETESTREFUSED' }));
    });
    return s;
  };
}

const DEFAULT_NAMES: Record<string, readonly string[]> = {
  'registry.test': ['127.0.0.1'],
  'cdn.mirror.test': ['127.0.0.1'],
  'private.test': ['10.0.0.1'],
  'metadata.test': ['169.254.169.254'],
  'mapped.test': ['::ffff:127.0.0.1'],
  'mixed.test': ['8.8.8.8', '127.0.0.1'],
};

async function startTestProxy(
  t: TestContext,
  options: Partial<EgressProxyOptions> & { names?: Record<string, readonly string[]> } = {},
): Promise<TestProxy> {
  const dir = mkdtempSync(join(tmpdir(), 'ia-egress-'));
  const socketPath = join(dir, 'egress.sock');
  const entries: EgressLogEntry[] = [];
  const connects: ConnectTarget[] = [];
  const lookups: string[] = [];
  const names = { ...DEFAULT_NAMES, ...options.names };
  const waiters: (() => void)[] = [];
  const proxy = await startEgressProxy({
    socketPath,
    allowHosts: [
      'registry.test',
      '*.mirror.test',
      'private.test',
      'metadata.test',
      'mapped.test',
      'mixed.test',
    ],
    allowedPorts: [fx.echoPort, fx.httpPort, 80, 443],
    resolve: (name) => {
      lookups.push(name);
      const found = names[name];
      if (found === undefined) {
        return Promise.reject(Object.assign(new Error(`no such name ${name}`), { code: 'ENOTFOUND' }));
      }
      return Promise.resolve(found.map((address): ResolvedAddress => ({ address })));
    },
    connect: loopbackOnlyConnector(connects),
    onRequest: (entry) => {
      entries.push(entry);
      for (const w of waiters.splice(0)) w();
    },
    ...options,
  });
  t.after(async () => {
    await proxy.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const waitEntries = async (n: number): Promise<EgressLogEntry[]> => {
    const deadline = Date.now() + 10_000;
    while (entries.length < n) {
      if (Date.now() > deadline) throw new Error(`expected ${n} log entries, got ${entries.length}`);
      await Promise.race([new Promise<void>((r) => waiters.push(r)), delay(100)]);
    }
    return entries;
  };
  return { proxy, socketPath, entries, connects, lookups, waitEntries };
}

// --- a raw HTTP/1.1 client over the unix socket ---------------------------------------------------

interface Head {
  status: number;
  head: string;
  rest: Buffer;
}

function readHead(socket: Socket): Promise<Head> {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      buf = Buffer.concat([buf, chunk]);
      const i = buf.indexOf('\r\n\r\n');
      if (i === -1) return;
      socket.pause();
      cleanup();
      const head = buf.subarray(0, i).toString('latin1');
      resolve({ status: Number(head.split(' ')[1]), head, rest: buf.subarray(i + 4) });
    };
    const onEnd = (): void => {
      cleanup();
      reject(new Error(`connection ended before a response head (${buf.toString('latin1')})`));
    };
    const cleanup = (): void => {
      socket.off('data', onData);
      socket.off('end', onEnd);
      socket.off('close', onEnd);
    };
    socket.on('data', onData);
    socket.once('end', onEnd);
    socket.once('close', onEnd);
  });
}

function readToEnd(socket: Socket, initial: Buffer = Buffer.alloc(0)): Promise<Buffer> {
  return new Promise((resolve) => {
    const chunks = [initial];
    socket.on('data', (c: Buffer) => chunks.push(c));
    // The end of what the proxy sends; our side is ended too, so nothing stays half-open.
    const done = (): void => {
      socket.end();
      resolve(Buffer.concat(chunks));
    };
    socket.once('end', done);
    socket.once('close', done);
    socket.resume();
  });
}

async function openUnix(path: string): Promise<Socket> {
  const socket = connect({ path, allowHalfOpen: true });
  socket.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  return socket;
}

/** Sends a raw request and reads the whole answer until the proxy closes the connection. */
async function rawExchange(path: string, text: string | Buffer): Promise<Head & { body: string }> {
  const socket = await openUnix(path);
  socket.write(text);
  const head = await readHead(socket);
  const body = (await readToEnd(socket, head.rest)).toString('utf8');
  return { ...head, body };
}

async function connectTunnel(path: string, authority: string): Promise<{ socket: Socket; head: Head }> {
  const socket = await openUnix(path);
  socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
  const head = await readHead(socket);
  return { socket, head };
}

/** Writes `payload` through an echo tunnel, half-closes, and returns what came back. */
async function echoThrough(socket: Socket, payload: Buffer): Promise<Buffer> {
  const back = readToEnd(socket);
  socket.end(payload);
  return back;
}

// --- the tunnel -----------------------------------------------------------------------------------

test('CONNECT to an allowlisted name opens a byte tunnel; bytes both ways are counted in the log', async (t) => {
  const p = await startTestProxy(t, { allowPrivate: ['127.0.0.0/8'] });
  const before = fx.echoConnections;
  const { socket, head } = await connectTunnel(p.socketPath, `registry.test:${fx.echoPort}`);
  assert.equal(head.status, 200);
  const payload = randomBytes(3 * 1024 * 1024 + 17);
  const back = await echoThrough(socket, payload);
  assert.ok(back.equals(payload), 'the echo came back intact');
  const [entry] = await p.waitEntries(1);
  assert.ok(entry);
  assert.equal(entry.method, 'CONNECT');
  assert.equal(entry.host, 'registry.test');
  assert.equal(entry.port, fx.echoPort);
  assert.equal(entry.allowed, true);
  assert.equal(entry.status, 200);
  assert.equal(entry.address, '127.0.0.1');
  assert.equal(entry.reason, undefined, 'a clean half-close ends the tunnel without a reason');
  assert.equal(entry.bytesUp, payload.length);
  assert.equal(entry.bytesDown, payload.length);
  assert.ok(entry.durationMs >= 0);
  assert.ok(!Number.isNaN(Date.parse(entry.time)));
  assert.deepEqual(p.lookups, ['registry.test']);
  assert.deepEqual(p.connects, [{ address: '127.0.0.1', family: 4, port: fx.echoPort }]);
  assert.equal(fx.echoConnections, before + 1);
  assert.deepEqual(p.proxy.log.totals(), {
    requests: 1,
    allowed: 1,
    denied: 0,
    bytesUp: payload.length,
    bytesDown: payload.length,
    deniedUntracked: 0,
  });
});

test('bytes the client sends right behind the CONNECT head reach the origin', async (t) => {
  const p = await startTestProxy(t, { allowPrivate: ['127.0.0.0/8'] });
  const socket = await openUnix(p.socketPath);
  socket.write(`CONNECT registry.test:${fx.echoPort} HTTP/1.1\r\n\r\nearly bytes`);
  const head = await readHead(socket);
  assert.equal(head.status, 200);
  const back = await echoThrough(socket, Buffer.from(' and late ones'));
  assert.equal(Buffer.concat([head.rest, back]).toString(), 'early bytes and late ones');
  const [entry] = await p.waitEntries(1);
  assert.ok(entry);
  assert.equal(entry.bytesUp, 'early bytes and late ones'.length);
});

test('a wildcard pattern opens subdomains, and a matching name works end to end', async (t) => {
  const p = await startTestProxy(t, { allowPrivate: ['127.0.0.0/8'] });
  const { socket, head } = await connectTunnel(p.socketPath, `CDN.Mirror.Test.:${fx.echoPort}`);
  assert.equal(head.status, 200);
  assert.equal((await echoThrough(socket, Buffer.from('x'))).toString(), 'x');
  const [entry] = await p.waitEntries(1);
  assert.ok(entry);
  assert.equal(entry.host, 'cdn.mirror.test');
});

// --- refusals -------------------------------------------------------------------------------------

test('a host outside the allowlist is refused with 403 before any lookup, and summarized', async (t) => {
  const p = await startTestProxy(t, { allowPrivate: ['127.0.0.0/8'] });
  const r = await rawExchange(
    p.socketPath,
    `CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n`,
  );
  assert.equal(r.status, 403);
  assert.match(r.body, /not in the allowlist/);
  // A bare base domain is not matched by its wildcard.
  const r2 = await rawExchange(p.socketPath, `CONNECT mirror.test:443 HTTP/1.1\r\n\r\n`);
  assert.equal(r2.status, 403);
  await rawExchange(p.socketPath, `CONNECT evil.example:80 HTTP/1.1\r\n\r\n`);
  const entries = await p.waitEntries(3);
  assert.deepEqual(
    entries.map((e) => [e.host, e.port, e.allowed, e.status]),
    [
      ['evil.example', 443, false, 403],
      ['mirror.test', 443, false, 403],
      ['evil.example', 80, false, 403],
    ],
  );
  assert.equal(entries[0]?.reason, 'host is not in the allowlist');
  assert.deepEqual(p.lookups, [], 'names that are not allowed are never resolved');
  assert.deepEqual(p.connects, []);
  assert.deepEqual(p.proxy.log.deniedHosts(), [
    { host: 'evil.example', ports: [80, 443], count: 2, reason: 'host is not in the allowlist' },
    { host: 'mirror.test', ports: [443], count: 1, reason: 'host is not in the allowlist' },
  ]);
  assert.equal(p.proxy.log.totals().denied, 3);
});

test('a port that is not allowed is refused with 403', async (t) => {
  const p = await startTestProxy(t, { allowPrivate: ['127.0.0.0/8'] });
  const r = await rawExchange(p.socketPath, `CONNECT registry.test:22 HTTP/1.1\r\n\r\n`);
  assert.equal(r.status, 403);
  assert.match(r.body, /port 22 is not allowed/);
  const g = await rawExchange(
    p.socketPath,
    `GET http://registry.test:8080/x HTTP/1.1\r\nHost: registry.test\r\nConnection: close\r\n\r\n`,
  );
  assert.equal(g.status, 403);
  const entries = await p.waitEntries(2);
  assert.deepEqual(
    entries.map((e) => [e.method, e.port, e.allowed]),
    [
      ['CONNECT', 22, false],
      ['GET', 8080, false],
    ],
  );
  assert.deepEqual(p.lookups, []);
  assert.deepEqual(p.connects, []);
});

test('a name resolving to a private, link-local or mapped-loopback address is refused before any connect', async (t) => {
  // No allowPrivate: loopback is refused like the rest.
  const p = await startTestProxy(t, {
    names: {
      'nat64.mirror.test': ['64:ff9b::a00:1'],
      'ula.mirror.test': ['fd12:3456::1'],
      'cgnat.mirror.test': ['100.64.0.7'],
      'zero.mirror.test': ['0.0.0.0'],
      'v6loop.mirror.test': ['::1'],
      'v6link.mirror.test': ['fe80::1'],
    },
  });
  const cases: [string, RegExp][] = [
    ['private.test', /resolves to 10\.0\.0\.1, refused \(private\)/],
    ['metadata.test', /resolves to 169\.254\.169\.254, refused \(link-local\)/],
    ['mapped.test', /resolves to 127\.0\.0\.1, refused \(loopback\)/],
    ['registry.test', /resolves to 127\.0\.0\.1, refused \(loopback\)/],
    // ANY refused address refuses the name, wherever it is in the answer.
    ['mixed.test', /resolves to 127\.0\.0\.1, refused \(loopback\)/],
    ['nat64.mirror.test', /resolves to 64:ff9b::a00:1, refused \(private\)/],
    ['ula.mirror.test', /refused \(unique-local\)/],
    ['cgnat.mirror.test', /refused \(cgnat\)/],
    ['zero.mirror.test', /refused \(unspecified\)/],
    ['v6loop.mirror.test', /refused \(loopback\)/],
    ['v6link.mirror.test', /refused \(link-local\)/],
  ];
  const before = fx.echoConnections;
  for (const [name, reason] of cases) {
    const r = await rawExchange(p.socketPath, `CONNECT ${name}:${fx.echoPort} HTTP/1.1\r\n\r\n`);
    assert.equal(r.status, 403, name);
    assert.match(r.body, reason, name);
  }
  const g = await rawExchange(
    p.socketPath,
    `GET http://metadata.test:${fx.httpPort}/latest/meta-data/ HTTP/1.1\r\nConnection: close\r\n\r\n`,
  );
  assert.equal(g.status, 403);
  const entries = await p.waitEntries(cases.length + 1);
  assert.ok(entries.every((e) => !e.allowed && e.status === 403 && e.address === undefined));
  assert.deepEqual(p.connects, [], 'no connection was attempted');
  assert.equal(fx.echoConnections, before);
  assert.equal(p.lookups.length, cases.length + 1);
});

test('IP literals are checked like resolved addresses (CONNECT and absolute-form URLs)', async (t) => {
  const p = await startTestProxy(t, { allowHosts: ['registry.test', '127.0.0.1', '::1', '8.8.8.8'] });
  const refused: [string, RegExp][] = [
    [`CONNECT 10.0.0.1:443 HTTP/1.1\r\n\r\n`, /address 10\.0\.0\.1 is refused \(private\)/],
    [`CONNECT 127.0.0.1:${fx.echoPort} HTTP/1.1\r\n\r\n`, /address 127\.0\.0\.1 is refused \(loopback\)/],
    [`CONNECT [::1]:${fx.echoPort} HTTP/1.1\r\n\r\n`, /address ::1 is refused \(loopback\)/],
    [`CONNECT [::ffff:127.0.0.1]:${fx.echoPort} HTTP/1.1\r\n\r\n`, /address 127\.0\.0\.1 is refused/],
    [
      `CONNECT [::ffff:a9fe:a9fe]:80 HTTP/1.1\r\n\r\n`,
      /address 169\.254\.169\.254 is refused \(link-local\)/,
    ],
    [`CONNECT 169.254.169.254:80 HTTP/1.1\r\n\r\n`, /refused \(link-local\)/],
    [`GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\nConnection: close\r\n\r\n`, /link-local/],
    // The URL parser reads these as 127.0.0.1; they are judged as that address.
    [
      `GET http://0x7f000001:${fx.httpPort}/ HTTP/1.1\r\nConnection: close\r\n\r\n`,
      /127\.0\.0\.1 is refused/,
    ],
    [
      `GET http://2130706433:${fx.httpPort}/ HTTP/1.1\r\nConnection: close\r\n\r\n`,
      /127\.0\.0\.1 is refused/,
    ],
    [`GET http://[::1]:${fx.httpPort}/ HTTP/1.1\r\nConnection: close\r\n\r\n`, /::1 is refused/],
    // A public literal that is not in the allowlist.
    [`CONNECT 1.1.1.1:443 HTTP/1.1\r\n\r\n`, /not in the allowlist/],
  ];
  for (const [request, reason] of refused) {
    const r = await rawExchange(p.socketPath, request);
    assert.equal(r.status, 403, request);
    assert.match(r.body, reason, request);
  }
  // Numeric names the system resolver would read as addresses are not names at all.
  for (const target of ['2130706433:443', '0x7f000001:443', '010.0.0.1:443', '127.1:443']) {
    const r = await rawExchange(p.socketPath, `CONNECT ${target} HTTP/1.1\r\n\r\n`);
    assert.equal(r.status, 400, target);
  }
  await p.waitEntries(refused.length + 4);
  assert.deepEqual(p.lookups, [], 'a literal is never looked up');
  assert.deepEqual(p.connects, []);
  // An allowlisted public literal goes to that address (the test connector refuses it: no packet).
  const ok = await rawExchange(p.socketPath, `CONNECT 8.8.8.8:443 HTTP/1.1\r\n\r\n`);
  assert.equal(ok.status, 502);
  assert.deepEqual(p.connects, [{ address: '8.8.8.8', family: 4, port: 443 }]);
});

test('the connection goes to the checked address: a rebinding resolver gets one lookup only', async (t) => {
  let calls = 0;
  const p = await startTestProxy(t, {
    allowHosts: ['rebind.test'],
    // First answer public, every later one loopback: a proxy that resolved again at connect time
    // (or let the socket layer resolve the name) would land on loopback.
    resolve: (name) => {
      calls++;
      assert.equal(name, 'rebind.test');
      return Promise.resolve([{ address: calls === 1 ? '93.184.216.34' : '127.0.0.1' }]);
    },
  });
  const r = await rawExchange(p.socketPath, `CONNECT rebind.test:443 HTTP/1.1\r\n\r\n`);
  // The test connector refuses the public address without sending anything: 502.
  assert.equal(r.status, 502);
  assert.equal(calls, 1);
  assert.deepEqual(p.connects, [{ address: '93.184.216.34', family: 4, port: 443 }]);
  const [entry] = await p.waitEntries(1);
  assert.ok(entry);
  assert.equal(entry.allowed, true);
  assert.equal(entry.reason, 'connect failed (ETESTREFUSED)');
});

test('DNS failures and timeouts are answered 502 and 504', async (t) => {
  const p = await startTestProxy(t, {
    allowHosts: ['missing.test', 'slow.test'],
    dnsTimeoutMs: 200,
    resolve: (name) =>
      name === 'slow.test'
        ? new Promise<readonly ResolvedAddress[]>(() => undefined)
        : Promise.reject(Object.assign(new Error('nope'), { code: 'ENOTFOUND' })),
  });
  const a = await rawExchange(p.socketPath, `CONNECT missing.test:443 HTTP/1.1\r\n\r\n`);
  assert.equal(a.status, 502);
  assert.match(a.body, /DNS lookup failed \(ENOTFOUND\)/);
  const b = await rawExchange(p.socketPath, `CONNECT slow.test:443 HTTP/1.1\r\n\r\n`);
  assert.equal(b.status, 504);
  assert.deepEqual(p.connects, []);
});

// --- absolute-form GET ----------------------------------------------------------------------------

test('absolute-form GET is forwarded with hop-by-hop and proxy headers stripped both ways', async (t) => {
  const p = await startTestProxy(t, { allowPrivate: ['127.0.0.0/8'] });
  fx.httpRequests.length = 0;
  const url = `http://user:pw@registry.test:${fx.httpPort}/pkg/-/pkg-1.0.0.tgz?token=s3cr3t`;
  const res = await new Promise<IncomingMessage>((resolve, reject) => {
    const req = httpRequest(
      {
        socketPath: p.socketPath,
        method: 'GET',
        path: url,
        headers: {
          host: 'somewhere-else.test',
          authorization: 'Bearer for-the-origin',
          'proxy-authorization': 'Basic cHJveHk6c2VjcmV0',
          'proxy-connection': 'keep-alive',
          connection: 'keep-alive, x-hop',
          'x-hop': 'must not pass',
          'keep-alive': 'timeout=5',
          te: 'trailers',
          'x-kept': 'yes',
        },
      },
      resolve,
    );
    req.on('error', reject);
    req.end();
  });
  const body = await new Promise<string>((resolve) => {
    let text = '';
    res.setEncoding('utf8');
    res.on('data', (c: string) => (text += c));
    res.on('end', () => {
      resolve(text);
    });
  });
  assert.equal(res.statusCode, 200);
  assert.equal(body, 'tarball bytes\n');
  assert.equal(res.headers['x-origin'], 'yes');
  assert.equal(res.headers['proxy-authenticate'], undefined);
  assert.equal(res.headers['x-up-hop'], undefined);
  assert.notEqual(res.headers['keep-alive'], 'timeout=1');

  const [seen] = fx.httpRequests;
  assert.ok(seen);
  assert.equal(seen.url, '/pkg/-/pkg-1.0.0.tgz?token=s3cr3t');
  assert.equal(seen.headers.host, `registry.test:${fx.httpPort}`);
  assert.equal(seen.headers.authorization, 'Bearer for-the-origin');
  assert.equal(seen.headers['x-kept'], 'yes');
  for (const h of ['proxy-authorization', 'proxy-connection', 'x-hop', 'keep-alive', 'te']) {
    assert.equal(seen.headers[h], undefined, `${h} was forwarded`);
  }
  assert.equal(seen.headers.connection, 'close');

  const [entry] = await p.waitEntries(1);
  assert.ok(entry);
  assert.equal(entry.method, 'GET');
  assert.equal(entry.host, 'registry.test');
  assert.equal(entry.port, fx.httpPort);
  assert.equal(entry.allowed, true);
  assert.equal(entry.status, 200);
  assert.ok(entry.bytesUp > 0 && entry.bytesDown > body.length);
  const logged = JSON.stringify(entry);
  for (const secret of ['s3cr3t', 'token', 'user', 'pw@', 'pkg-1.0.0', 'cHJveHk', 'for-the-origin']) {
    assert.ok(!logged.includes(secret), `the log entry carries ${secret}`);
  }
});

test('several absolute-form requests share one client connection, each logged', async (t) => {
  const p = await startTestProxy(t, { allowPrivate: ['127.0.0.0/8'] });
  const socket = await openUnix(p.socketPath);
  const base = `http://registry.test:${fx.httpPort}`;
  socket.write(`HEAD ${base}/a HTTP/1.1\r\nHost: registry.test\r\n\r\n`);
  const first = await readHead(socket);
  assert.equal(first.status, 200);
  assert.match(first.head, /content-length: 14/i);
  socket.write(`GET ${base}/b HTTP/1.1\r\nHost: registry.test\r\nConnection: close\r\n\r\n`);
  const rest = (await readToEnd(socket, first.rest)).toString();
  assert.match(rest, /^HTTP\/1\.1 200 OK/);
  assert.match(rest, /tarball bytes\n$/);
  const entries = await p.waitEntries(2);
  assert.deepEqual(
    entries.map((e) => [e.method, e.status, e.allowed]),
    [
      ['HEAD', 200, true],
      ['GET', 200, true],
    ],
  );
});

test('a forwarded response may take longer than the request-head timeout', async (t) => {
  const p = await startTestProxy(t, { allowPrivate: ['127.0.0.0/8'], headersTimeoutMs: 150 });
  const r = await rawExchange(
    p.socketPath,
    `GET http://registry.test:${fx.httpPort}/slow HTTP/1.1\r\nConnection: close\r\n\r\n`,
  );
  assert.equal(r.status, 200);
  assert.match(r.head, /transfer-encoding: chunked/i);
  assert.match(r.body, /slow [\s\S]*answer\n/);
  const [entry] = await p.waitEntries(1);
  assert.ok(entry);
  assert.equal(entry.reason, undefined);
  assert.ok(entry.durationMs >= 400);
});

test('methods and request forms other than CONNECT and absolute-form GET/HEAD are refused', async (t) => {
  const p = await startTestProxy(t, { allowPrivate: ['127.0.0.0/8'] });
  const base = `http://registry.test:${fx.httpPort}`;
  const cases: [string, number][] = [
    [`POST ${base}/x HTTP/1.1\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi`, 405],
    [`PUT ${base}/x HTTP/1.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`, 405],
    [`GET /x HTTP/1.1\r\nHost: registry.test\r\nConnection: close\r\n\r\n`, 400],
    [`GET https://registry.test/x HTTP/1.1\r\nConnection: close\r\n\r\n`, 400],
    [`GET ${base}/x HTTP/1.1\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc`, 400],
    [`CONNECT registry.test HTTP/1.1\r\n\r\n`, 400],
    [`CONNECT user:pw@registry.test:443 HTTP/1.1\r\n\r\n`, 400],
    [`CONNECT [registry.test]:443 HTTP/1.1\r\n\r\n`, 400],
    [`CONNECT registry.test:99999 HTTP/1.1\r\n\r\n`, 400],
    [`GET ${base}/ws HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n`, 400],
    [`BREW ${base}/ HTTP/1.1\r\n\r\n`, 400],
  ];
  for (const [request, status] of cases) {
    const r = await rawExchange(p.socketPath, request);
    assert.equal(r.status, status, request.split('\r\n')[0]);
  }
  const entries = await p.waitEntries(cases.length);
  assert.ok(entries.every((e) => !e.allowed));
  assert.deepEqual(p.connects, []);
  const logged = JSON.stringify(entries);
  assert.ok(!logged.includes('pw@'), 'userinfo in a CONNECT target is never logged');
});

test('a request head over the limit is answered 431 and logged', async (t) => {
  const p = await startTestProxy(t, { allowPrivate: ['127.0.0.0/8'], maxHeaderBytes: 4096 });
  const r = await rawExchange(
    p.socketPath,
    `CONNECT registry.test:${fx.echoPort} HTTP/1.1\r\nX-Pad: ${'a'.repeat(8192)}\r\n\r\n`,
  );
  assert.equal(r.status, 431);
  const [entry] = await p.waitEntries(1);
  assert.ok(entry);
  assert.equal(entry.status, 431);
  assert.equal(entry.allowed, false);
  assert.equal(entry.reason, 'request head too large');
  assert.deepEqual(p.connects, []);
});

// --- limits and closing ---------------------------------------------------------------------------

test('closing the proxy ends open tunnels and removes the socket', async (t) => {
  const p = await startTestProxy(t, { allowPrivate: ['127.0.0.0/8'] });
  const a = await connectTunnel(p.socketPath, `registry.test:${fx.echoPort}`);
  const b = await connectTunnel(p.socketPath, `registry.test:${fx.echoPort}`);
  assert.equal(a.head.status, 200);
  assert.equal(b.head.status, 200);
  a.socket.write('ping');
  const echoed = new Promise<string>((resolve) => {
    a.socket.once('data', (c: Buffer) => {
      resolve(c.toString());
    });
  });
  a.socket.resume();
  assert.equal(await echoed, 'ping');
  a.socket.pause();
  const ended = Promise.all([a.socket, b.socket].map((s) => readToEnd(s)));
  await p.proxy.close();
  await ended;
  // Every request is reported by the time close() resolves.
  assert.equal(p.entries.length, 2);
  assert.ok(p.entries.every((e) => e.reason === 'proxy closed'));
  assert.equal(existsSync(p.socketPath), false);
  await p.proxy.close();
});

test('at most maxTunnels upstream connections at once; the next is answered 503', async (t) => {
  const p = await startTestProxy(t, { allowPrivate: ['127.0.0.0/8'], maxTunnels: 1 });
  const a = await connectTunnel(p.socketPath, `registry.test:${fx.echoPort}`);
  assert.equal(a.head.status, 200);
  const b = await rawExchange(p.socketPath, `CONNECT registry.test:${fx.echoPort} HTTP/1.1\r\n\r\n`);
  assert.equal(b.status, 503);
  await echoThrough(a.socket, Buffer.from('done'));
  await p.waitEntries(2);
  const c = await connectTunnel(p.socketPath, `registry.test:${fx.echoPort}`);
  assert.equal(c.head.status, 200, 'the slot is free again once the tunnel closed');
  c.socket.destroy();
});

test('an idle tunnel is closed after idleTimeoutMs (and the request-head timeout does not apply to it)', async (t) => {
  const p = await startTestProxy(t, {
    allowPrivate: ['127.0.0.0/8'],
    idleTimeoutMs: 600,
    headersTimeoutMs: 100,
  });
  const { socket, head } = await connectTunnel(p.socketPath, `registry.test:${fx.echoPort}`);
  assert.equal(head.status, 200);
  // Traffic keeps it open past the timeout...
  for (let i = 0; i < 8; i++) {
    socket.write('tick');
    await delay(100);
  }
  assert.equal(p.entries.length, 0, 'the tunnel is still open after 800 ms of traffic');
  // ...silence closes it.
  await readToEnd(socket);
  const [entry] = await p.waitEntries(1);
  assert.ok(entry);
  assert.equal(entry.reason, 'idle timeout');
  assert.equal(entry.bytesUp, 32);
  assert.equal(entry.bytesDown, 32);
});

test('the lifetime byte cap cuts the tunnel that reaches it and refuses later requests', async (t) => {
  const cap = 256 * 1024;
  const p = await startTestProxy(t, { allowPrivate: ['127.0.0.0/8'], maxTotalBytes: cap });
  const { socket, head } = await connectTunnel(p.socketPath, `registry.test:${fx.echoPort}`);
  assert.equal(head.status, 200);
  const back = readToEnd(socket);
  socket.write(randomBytes(cap));
  const got = await back;
  assert.ok(got.length < cap);
  const [entry] = await p.waitEntries(1);
  assert.ok(entry);
  assert.equal(entry.reason, 'egress byte cap reached');
  assert.ok(entry.bytesUp + entry.bytesDown <= cap);
  const next = await rawExchange(p.socketPath, `CONNECT registry.test:${fx.echoPort} HTTP/1.1\r\n\r\n`);
  assert.equal(next.status, 403);
  assert.match(next.body, /byte cap/);
});

test('a request head that does not arrive in time is answered 408', async (t) => {
  const p = await startTestProxy(t, { allowPrivate: ['127.0.0.0/8'], headersTimeoutMs: 200 });
  const socket = await openUnix(p.socketPath);
  socket.write(`CONNECT registry.test:${fx.echoPort} HTTP/1.1\r\nX-Slow: `);
  const head = await readHead(socket);
  assert.equal(head.status, 408);
  const [entry] = await p.waitEntries(1);
  assert.ok(entry);
  assert.equal(entry.reason, 'request head not received in time');
  assert.deepEqual(p.connects, []);
});

test('client connections past maxClientConnections are dropped', async (t) => {
  const p = await startTestProxy(t, { allowPrivate: ['127.0.0.0/8'], maxClientConnections: 2 });
  const held = [await openUnix(p.socketPath), await openUnix(p.socketPath)];
  const third = await openUnix(p.socketPath);
  // The proxy closes it at once (our side is half-open, so this shows as its end).
  const closed = await Promise.race([
    new Promise<boolean>((resolve) => {
      third.once('end', () => {
        resolve(true);
      });
      third.resume();
    }),
    delay(2000).then(() => false),
  ]);
  assert.equal(closed, true);
  for (const s of held) s.destroy();
  await delay(50);
  const { socket, head } = await connectTunnel(p.socketPath, `registry.test:${fx.echoPort}`);
  assert.equal(head.status, 200);
  socket.destroy();
});

// --- the socket -----------------------------------------------------------------------------------

test('the socket gets the mode asked for; existing paths that are not a stale socket of ours are refused', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ia-egress-path-'));
  t.after(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const base = { allowHosts: ['registry.test'] };
  const s600 = await startEgressProxy({ ...base, socketPath: join(dir, 'a.sock') });
  assert.equal(lstatSync(join(dir, 'a.sock')).mode & 0o777, 0o600);
  const s660 = await startEgressProxy({ ...base, socketPath: join(dir, 'b.sock'), socketMode: 0o660 });
  assert.equal(lstatSync(join(dir, 'b.sock')).mode & 0o777, 0o660);

  // A live socket is someone's: refused, and left alone.
  await assert.rejects(startEgressProxy({ ...base, socketPath: join(dir, 'a.sock') }), /in use/);
  assert.ok(lstatSync(join(dir, 'a.sock')).isSocket());
  await s600.close();
  await s660.close();

  writeFileSync(join(dir, 'file'), 'x');
  await assert.rejects(startEgressProxy({ ...base, socketPath: join(dir, 'file') }), /not a socket/);
  symlinkSync('/tmp', join(dir, 'link'));
  await assert.rejects(startEgressProxy({ ...base, socketPath: join(dir, 'link') }), /not a socket/);
  await assert.rejects(startEgressProxy({ ...base, socketPath: 'relative.sock' }), /not absolute/);

  // A stale socket of ours (nobody listening) is replaced: a process killed while listening leaves one.
  const stalePath = join(dir, 'stale.sock');
  const killed = spawnSync(process.execPath, [
    '-e',
    `require('net').createServer().listen(${JSON.stringify(stalePath)}, () => process.kill(process.pid, 'SIGKILL'))`,
  ]);
  assert.equal(killed.signal, 'SIGKILL');
  assert.ok(lstatSync(stalePath).isSocket());
  const replaced = await startEgressProxy({ ...base, socketPath: stalePath });
  assert.equal(lstatSync(stalePath).mode & 0o777, 0o600);
  await replaced.close();
});

test('a socket directory writable by others, or a socket of another user, is refused', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ia-egress-path-'));
  t.after(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  chmodSync(dir, 0o770);
  const err = await startEgressProxy({ allowHosts: [], socketPath: join(dir, 'x.sock') }).catch(
    (e: unknown) => e,
  );
  assert.ok(err instanceof EgressProxyError);
  assert.equal(err.code, 'socket_path');
  assert.match(err.message, /writable by group or others/);
  chmodSync(dir, 0o700);
  if (process.getuid?.() === 0) {
    const s = await startEgressProxy({ allowHosts: [], socketPath: join(dir, 'y.sock') });
    lchownSync(join(dir, 'y.sock'), 65534, 65534);
    await s.close();
    assert.equal(existsSync(join(dir, 'y.sock')), false);
  }
});

test('invalid options are refused with typed errors', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ia-egress-opt-'));
  try {
    const socketPath = join(dir, 's.sock');
    const bad: Partial<EgressProxyOptions>[] = [
      { allowHosts: ['*.org'] },
      { allowHosts: ['*'] },
      { allowHosts: ['http://registry.npmjs.org'] },
      { allowHosts: ['registry.test'], allowPrivate: ['10.0.0.0/33'] },
      { allowHosts: ['registry.test'], allowPrivate: ['::ffff:127.0.0.0/104'] },
      { allowHosts: ['registry.test'], allowedPorts: [0] },
      { allowHosts: ['registry.test'], maxTunnels: 0 },
      { allowHosts: ['registry.test'], idleTimeoutMs: 1.5 },
    ];
    for (const options of bad) {
      const err = await startEgressProxy({ allowHosts: [], socketPath, ...options }).catch((e: unknown) => e);
      assert.ok(err instanceof EgressProxyError, JSON.stringify(options));
      assert.equal(err.code, 'invalid_option');
    }
    assert.equal(existsSync(socketPath), false, 'nothing is bound when an option is bad');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// --- the address and host rules on their own --------------------------------------------------------

test('address policy: only global unicast passes; allowPrivate opens ranges but never 0.0.0.0 or multicast', () => {
  const strict = new AddressPolicy();
  const pass = [
    '8.8.8.8',
    '1.1.1.1',
    '93.184.216.34',
    '2606:4700::1111',
    '2a00:1450:4001:82a::200e',
    '::ffff:8.8.8.8',
  ];
  for (const a of pass) assert.equal(strict.check(a).ok, true, a);
  const refused: [string, string][] = [
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['100.64.0.1', 'cgnat'],
    ['100.127.255.255', 'cgnat'],
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['169.254.169.254', 'link-local'],
    ['224.0.0.1', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['240.0.0.1', 'reserved'],
    ['192.0.2.1', 'documentation'],
    ['198.18.0.1', 'benchmarking'],
    ['::', 'unspecified'],
    ['::1', 'loopback'],
    ['0:0:0:0:0:0:0:1', 'loopback'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::FFFF:10.0.0.1', 'private'],
    ['::ffff:169.254.169.254', 'link-local'],
    ['::127.0.0.1', 'transition'],
    ['64:ff9b::7f00:1', 'loopback'],
    ['64:ff9b::a9fe:a9fe', 'link-local'],
    ['2002:7f00:1::1', 'transition'],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'reserved'],
    ['2001:db8::1', 'documentation'],
    ['fc00::1', 'unique-local'],
    ['fd00:ec2::254', 'unique-local'],
    ['fe80::1', 'link-local'],
    ['febf::1', 'link-local'],
    ['fec0::1', 'private'],
    ['ff02::1', 'multicast'],
    ['100::1', 'reserved'],
    ['4000::1', 'reserved'],
    ['fe80::1%eth0', 'malformed'],
    ['127.000.0.1', 'malformed'],
    ['localhost', 'malformed'],
  ];
  for (const [a, category] of refused) {
    const v = strict.check(a);
    if (v.ok) assert.fail(`${a} passed`);
    assert.equal(v.category, category, a);
  }
  const opened = new AddressPolicy(['127.0.0.0/8', '10.1.0.0/16', 'fd00::/8', '0.0.0.0/0', 'ff00::/8']);
  assert.deepEqual(opened.check('::ffff:127.0.0.1'), { ok: true, address: '127.0.0.1', family: 4 });
  assert.equal(opened.check('10.1.2.3').ok, true);
  assert.equal(opened.check('fd00::5').ok, true);
  assert.equal(opened.check('172.16.0.1').ok, true, '0.0.0.0/0 opens every private IPv4 range');
  for (const never of ['0.0.0.0', '224.0.0.1', '255.255.255.255', 'ff02::1', '::']) {
    assert.equal(opened.check(never).ok, false, never);
  }
  assert.equal(opened.check('::1').ok, false, 'an IPv4 range does not open IPv6 loopback');
});

test('host rules: wildcards match subdomains only; numeric names and odd forms are not names', () => {
  const list = new HostAllowlist(['registry.npmjs.org', '*.example.org', '203.0.113.9', '[2001:db8::1]']);
  const yes = (h: string): boolean => {
    const host = parseTargetHost(h);
    return host !== null && list.allows(host);
  };
  assert.equal(yes('registry.npmjs.org'), true);
  assert.equal(yes('REGISTRY.NPMJS.ORG.'), true);
  assert.equal(yes('a.example.org'), true);
  assert.equal(yes('a.b.example.org'), true);
  assert.equal(yes('example.org'), false);
  assert.equal(yes('badexample.org'), false);
  assert.equal(yes('a.example.org.evil.test'), false);
  assert.equal(yes('npmjs.org'), false);
  assert.equal(yes('x.registry.npmjs.org'), false);
  assert.equal(yes('203.0.113.9'), true);
  assert.equal(yes('2001:db8:0::1'), true);
  assert.equal(yes('::ffff:203.0.113.9'), true);
  for (const bad of [
    '2130706433',
    '0x7f000001',
    '127.1',
    '010.0.0.1',
    'a..b',
    '-a.test',
    'a b.test',
    'é.test',
    '',
  ]) {
    assert.equal(parseTargetHost(bad), null, bad);
  }
  assert.deepEqual(parseAuthority('[::1]:443'), { host: { kind: 'ip', address: '::1' }, port: 443 });
  assert.deepEqual(parseAuthority('Registry.Test:80'), {
    host: { kind: 'name', name: 'registry.test' },
    port: 80,
  });
  for (const bad of [
    'registry.test',
    'registry.test:',
    'registry.test:0',
    '::1:443',
    '[registry.test]:443',
    'a@b.test:443',
  ]) {
    assert.equal(parseAuthority(bad), null, bad);
  }
});

// --- throughput -----------------------------------------------------------------------------------

const SOURCE_BYTES = 64 * 1024 * 1024;

/** A child process serving SOURCE_BYTES to every connection on 127.0.0.1; prints its port. */
const SOURCE_SCRIPT = `
const net = require('net');
const chunk = Buffer.alloc(1 << 20, 7);
const total = Number(process.argv[1]);
const server = net.createServer((s) => {
  s.on('error', () => {});
  let sent = 0;
  const pump = () => {
    while (sent < total) {
      sent += chunk.length;
      if (!s.write(chunk)) { s.once('drain', pump); return; }
    }
    s.end();
  };
  pump();
});
server.listen(0, '127.0.0.1', () => process.stdout.write(server.address().port + '\\n'));
`;

/**
 * A child process that downloads everything from 127.0.0.1:port (`direct`), a unix socket that relays
 * it (`bare`), or the proxy's socket (`tunnel`, after a CONNECT), and prints the bytes and the
 * milliseconds from connect to EOF.
 */
const CLIENT_SCRIPT = `
const net = require('net');
const [mode, a, b] = process.argv.slice(1);
const start = process.hrtime.bigint();
const socket = mode === 'direct' ? net.connect({ host: '127.0.0.1', port: Number(a) }) : net.connect(a);
let bytes = 0;
let head = mode === 'tunnel' ? Buffer.alloc(0) : null;
if (head !== null) socket.write('CONNECT ' + b + ' HTTP/1.1\\r\\nHost: ' + b + '\\r\\n\\r\\n');
socket.on('data', (c) => {
  if (head !== null) {
    head = Buffer.concat([head, c]);
    const i = head.indexOf('\\r\\n\\r\\n');
    if (i === -1) return;
    if (!head.subarray(0, 12).toString().startsWith('HTTP/1.1 200')) throw new Error(head.toString());
    bytes += head.length - i - 4;
    head = null;
    return;
  }
  bytes += c.length;
});
socket.on('end', () => {
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  process.stdout.write(JSON.stringify({ bytes, ms }) + '\\n');
  socket.destroy();
});
`;

function runNode(
  t: TestContext,
  script: string,
  args: string[],
): { firstLine: Promise<string>; exit: Promise<number> } {
  const child = spawn(process.execPath, ['-e', script, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.after(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  let out = '';
  const firstLine = new Promise<string>((resolve, reject) => {
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (c: string) => {
      out += c;
      const i = out.indexOf('\n');
      if (i !== -1) resolve(out.slice(0, i));
    });
    child.once('exit', () => {
      reject(new Error(`child exited before printing (${out})`));
    });
  });
  const exit = new Promise<number>((resolve) =>
    child.once('exit', (code) => {
      resolve(code ?? -1);
    }),
  );
  return { firstLine, exit };
}

test('throughput: a 64 MiB download through the tunnel vs direct (diagnostic only)', async (t) => {
  // Source and client are separate processes, as in production (the origin elsewhere, the client in
  // the container), so the test process runs only the relay being measured. A bare relay (a unix
  // socket piped to TCP, no policy) is the floor for any userspace hop on this machine.
  const sourcePort = Number(await runNode(t, SOURCE_SCRIPT, [String(SOURCE_BYTES)]).firstLine);
  const p = await startTestProxy(t, { allowPrivate: ['127.0.0.0/8'], allowedPorts: [sourcePort] });
  const barePath = join(dirname(p.socketPath), 'bare.sock');
  const bare = createTcpServer({ allowHalfOpen: true }, (c) => {
    const u = connect({ host: '127.0.0.1', port: sourcePort, allowHalfOpen: true });
    c.on('error', () => undefined);
    u.on('error', () => undefined);
    u.pipe(c);
    c.pipe(u);
  });
  await new Promise<void>((resolve) => bare.listen(barePath, resolve));
  t.after(() => {
    bare.close();
  });
  const measure = async (args: string[]): Promise<number> => {
    const run = runNode(t, CLIENT_SCRIPT, args);
    const result = JSON.parse(await run.firstLine) as { bytes: number; ms: number };
    assert.equal(await run.exit, 0);
    assert.equal(result.bytes, SOURCE_BYTES);
    return SOURCE_BYTES / 1048576 / (result.ms / 1000);
  };
  const rates = { direct: [] as number[], bare: [] as number[], proxy: [] as number[] };
  const rounds = 5;
  for (let round = 0; round < rounds; round++) {
    rates.direct.push(await measure(['direct', String(sourcePort)]));
    rates.bare.push(await measure(['bare', barePath]));
    rates.proxy.push(await measure(['tunnel', p.socketPath, `registry.test:${sourcePort}`]));
  }
  const best = (xs: number[]): number => Math.max(...xs);
  const [direct, bareRate, proxy] = [best(rates.direct), best(rates.bare), best(rates.proxy)];
  t.diagnostic(
    `64 MiB download, best of ${rounds}: direct ${direct.toFixed(0)} MiB/s, bare relay ${bareRate.toFixed(0)} MiB/s, ` +
      `through the proxy ${proxy.toFixed(0)} MiB/s (proxy/direct ${(proxy / direct).toFixed(2)}, ` +
      `proxy/bare relay ${(proxy / bareRate).toFixed(2)})`,
  );
  const entries = await p.waitEntries(rounds);
  assert.ok(entries.every((e) => e.bytesDown === SOURCE_BYTES && e.allowed));
});
