import assert from 'node:assert/strict';
import { attackTest } from '../security/support.js';
import { readFileSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { makeFixtureRepo, type FixtureRepo } from '../support/fixture-repo.js';
import { startGitHubSimulator, type GitHubSim } from '../support/github-sim/index.js';
import { deliveryHeaders, signBody } from '../support/github-sim/webhooks.js';
import { startPipeline, type Pipeline } from '../support/pipeline.js';
import { redisSkipReason, startRedis, type TestRedis } from '../support/redis-server.js';

const skip = redisSkipReason();
const MiB = 1024 * 1024;
/** The default limit (ISSUE_AGENT_WEBHOOK_MAX_BYTES unset): GitHub's 25 MiB. */
const LIMIT = 25 * MiB;
/**
 * What can be in flight between the two ends besides what the server read: the loopback socket
 * buffers of both sides (a few MiB each with autotuning) and the client's own write buffer.
 */
const IN_FLIGHT = 24 * MiB;
const OWNER = 'acme';
const REPO = 'calc';

interface RawExchange {
  /** Everything the server sent back. */
  readonly response: string;
  /** Body bytes handed to the socket before the server closed it (or the body ended). */
  readonly written: number;
  /** The server closed the connection before the client finished its body. */
  readonly closedWhileWriting: boolean;
}

/**
 * One HTTP/1.1 request over a raw socket, so the test sees exactly what the server does with a body
 * it does not want: `head` is sent, then `body` chunks (each written once the previous one was
 * taken, as a client honouring back-pressure does) until the generator ends or the server closes.
 * `afterChunk` runs between chunks (the memory probe). With `end: false` the client never ends its
 * side: only the server can end the exchange (a server waiting for the body would hang the test).
 */
async function exchange(
  port: number,
  head: string,
  body: Iterable<Buffer>,
  options: { afterChunk?: () => void; end?: boolean } = {},
): Promise<RawExchange> {
  const socket: Socket = connect(port, '127.0.0.1');
  socket.setNoDelay(true);
  const received: Buffer[] = [];
  // An object, not a `let`: it is set from the 'close' listener while the loop below awaits.
  const state = { closed: false };
  socket.on('data', (d: Buffer) => received.push(d));
  // A server that stops reading and closes resets the connection under a client that keeps writing.
  socket.on('error', () => undefined);
  const gone = new Promise<void>((resolve) =>
    socket.once('close', () => {
      state.closed = true;
      resolve();
    }),
  );
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  socket.write(head);
  let written = 0;
  let finished = true;
  for (const chunk of body) {
    if (state.closed) {
      finished = false;
      break;
    }
    const flushed = socket.write(chunk);
    written += chunk.length;
    if (!flushed) {
      await Promise.race([new Promise((resolve) => socket.once('drain', resolve)), gone]);
    }
    options.afterChunk?.();
  }
  if (finished && !state.closed && options.end !== false) socket.end();
  await gone;
  return {
    response: Buffer.concat(received).toString('latin1'),
    written,
    closedWhileWriting: !finished,
  };
}

/** A chunked body of `total` bytes of data in 64 KiB chunks; `terminate: false` leaves it unfinished. */
function* chunked(total: number, { terminate = true } = {}): Generator<Buffer> {
  const size = 64 * 1024;
  const payload = Buffer.alloc(size, 0x61);
  for (let sent = 0; sent < total; sent += size) {
    const n = Math.min(size, total - sent);
    yield Buffer.concat([Buffer.from(`${n.toString(16)}\r\n`), payload.subarray(0, n), Buffer.from('\r\n')]);
  }
  if (terminate) yield Buffer.from('0\r\n\r\n');
}

function* fixedLength(total: number, size = 64 * 1024): Generator<Buffer> {
  const payload = Buffer.alloc(size, 0x61);
  for (let sent = 0; sent < total; sent += size) yield payload.subarray(0, Math.min(size, total - sent));
}

const webhookHead = (port: number, framing: string): string =>
  [
    'POST /api/github/webhooks HTTP/1.1',
    `Host: 127.0.0.1:${port}`,
    'Content-Type: application/json',
    'X-GitHub-Event: issues',
    'X-GitHub-Delivery: 00000000-0000-0000-0000-000000000000',
    'X-Hub-Signature-256: sha256=0000000000000000000000000000000000000000000000000000000000000000',
    framing,
    '',
    '',
  ].join('\r\n');

const statusOf = (response: string): number => Number(/^HTTP\/1\.1 (\d{3})/.exec(response)?.[1] ?? 0);

/**
 * A client that keeps writing after the server answered and closed can have its next write fail
 * (a reset) before it reads the answer, so for such a client the test accepts "no answer seen";
 * an answer that was seen must be the 413.
 */
function assertRefusedOrReset(r: RawExchange): void {
  if (r.response !== '') assert.equal(statusOf(r.response), 413, r.response.slice(0, 300));
}

/** kB figures from /proc/<pid>/status. */
function procStatus(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (m?.[1] === undefined) throw new Error(`no ${field} in /proc/${pid}/status`);
  return Number(m[1]) * 1024;
}

describe('webhook bodies are bounded before the signature is checked', { skip, timeout: 240_000 }, () => {
  let redis: TestRedis | undefined;
  let sim: GitHubSim | undefined;
  let fixture: FixtureRepo | undefined;
  let pipeline: Pipeline | undefined;
  let port = 0;
  let pid = 0;

  before(async () => {
    redis = await startRedis();
    sim = await startGitHubSimulator();
    fixture = makeFixtureRepo('node-calc');
    await sim.createRepo({ owner: OWNER, name: REPO, sourceDir: fixture.dir });
    sim.addUser({ login: 'maria' });
    sim.setPermission(OWNER, REPO, 'maria', 'write');
    // No worker: these tests are about the App's webhook route (the model is never called).
    pipeline = await startPipeline({
      sim,
      modelUrl: 'http://127.0.0.1:9',
      modelKey: 'sk-ant-unused-0123456789abcdef',
      redisUrl: redis.url,
      workers: 0,
    });
    port = Number(new URL(pipeline.appUrl).port);
    pid = pipeline.app.child.pid ?? 0;
    assert.ok(pid > 0);
  });

  after(async () => {
    await pipeline?.stop();
    await sim?.close();
    await redis?.stop();
    fixture?.cleanup();
  });

  // First, while the App's memory is what it was at start.
  attackTest('a 300 MiB chunked body: refused, and the App holds at most about the limit', async () => {
    const before = procStatus(pid, 'VmRSS');
    // Resets the peak (VmHWM) to the current RSS (Linux ≥ 4.0), so the peak below is this request's.
    let peakReset = true;
    try {
      writeFileSync(`/proc/${pid}/clear_refs`, '5');
    } catch {
      peakReset = false;
    }
    let sampled = before;
    let n = 0;
    const r = await exchange(port, webhookHead(port, 'Transfer-Encoding: chunked'), chunked(300 * MiB), {
      afterChunk: () => {
        if (++n % 32 === 0) sampled = Math.max(sampled, procStatus(pid, 'VmRSS'));
      },
    });
    const peak = Math.max(sampled, procStatus(pid, 'VmRSS'), peakReset ? procStatus(pid, 'VmHWM') : 0);
    assertRefusedOrReset(r);
    assert.ok(r.closedWhileWriting, 'the server closed the connection before the body ended');
    assert.ok(r.written < LIMIT + IN_FLIGHT, `the server took ${r.written} bytes`);
    const grew = (peak - before) / MiB;
    assert.ok(
      grew < 50,
      `the App's RSS grew by ${grew.toFixed(1)} MiB (peak measured: ${String(peakReset)})`,
    );
  });

  it('a Content-Length over the limit is answered 413 at once: no byte of the body is needed', async () => {
    // The client sends the head only and never ends its side: only the server can end this.
    const r = await exchange(port, webhookHead(port, `Content-Length: ${26 * MiB}`), [], { end: false });
    assert.equal(statusOf(r.response), 413, r.response.slice(0, 300));
    assert.match(r.response, /\r\nconnection: close\r\n/i);
    assert.match(r.response, /larger than 26214400 bytes/);
  });

  attackTest('a Content-Length over the limit: the body sent anyway is not read', async () => {
    const r = await exchange(port, webhookHead(port, `Content-Length: ${200 * MiB}`), fixedLength(200 * MiB));
    assertRefusedOrReset(r);
    assert.ok(r.closedWhileWriting, 'the server closed the connection while the client was still writing');
    assert.ok(r.written < IN_FLIGHT, `the server took ${r.written} bytes`);
  });

  it('a chunked body one byte over the limit is answered 413 and the connection closed', async () => {
    // The last byte sent is the one over the limit, so nothing is in flight when the server answers.
    const r = await exchange(
      port,
      webhookHead(port, 'Transfer-Encoding: chunked'),
      chunked(LIMIT + 1, { terminate: false }),
      { end: false },
    );
    assert.equal(statusOf(r.response), 413, r.response.slice(0, 300));
    assert.match(r.response, /\r\nconnection: close\r\n/i);
  });

  it('a chunked body of exactly the limit is read and handed to the signature check', async () => {
    const r = await exchange(port, webhookHead(port, 'Transfer-Encoding: chunked'), chunked(LIMIT));
    // Not JSON signed with the secret, so @octokit/webhooks refuses it: it got the whole body.
    assert.equal(statusOf(r.response), 400, r.response.slice(0, 300));
    assert.match(r.response, /signature does not match/);
  });

  attackTest('a chunked body streamed on past the limit: the server stops reading and closes', async () => {
    const r = await exchange(port, webhookHead(port, 'Transfer-Encoding: chunked'), chunked(100 * MiB));
    assertRefusedOrReset(r);
    assert.ok(r.closedWhileWriting, 'the server closed the connection while the client was still writing');
    assert.ok(r.written > LIMIT, 'the body was counted up to the limit, not refused early');
    assert.ok(r.written < LIMIT + IN_FLIGHT, `the server took ${r.written} bytes`);
  });

  it('a signed delivery under the limit still works, in many chunks, and a wrong signature does not', async () => {
    if (sim === undefined) throw new Error('no simulator');
    // A ping padded to 2 MiB: it arrives in dozens of chunks, and verifies only if every byte does.
    const body = JSON.stringify({ zen: 'Keep it logically awesome.', hook_id: 1, pad: 'x'.repeat(2 * MiB) });
    const headers = deliveryHeaders(
      'ping',
      '11111111-1111-1111-1111-111111111111',
      body,
      sim.app.webhookSecret,
      {
        hookId: 1,
        appId: sim.app.id,
        userAgent: 'GitHub-Hookshot/test',
      },
    );
    assert.equal((await sim.sendRaw(headers, body)).status, 200);
    const forged = { ...headers, 'x-hub-signature-256': signBody('not-the-secret', body) };
    assert.equal((await sim.sendRaw(forged, body)).status, 400);

    // A real delivery the App acts on: the intake posts its progress comment on the issue.
    const issue = sim.createIssue(OWNER, REPO, { title: 'Average rounds wrong', body: 'x', author: 'maria' });
    const delivery = await sim.label(OWNER, REPO, issue.number, 'agent', 'maria');
    assert.equal(delivery.status, 200, delivery.body);
    await sim.waitFor(
      () =>
        sim
          ?.comments(OWNER, REPO, issue.number)
          .some((c) => c.user === sim?.app.botLogin && c.body.includes('issue-agent:progress')) ?? false,
      30_000,
      'the progress comment',
    );
  });
});
