import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { AgentEvent } from '../../src/events/schema.js';
import type { RunSummary } from '../../src/server/runs.js';
import {
  admin,
  makeRun,
  outcomeEvent,
  readSse,
  serverOptions,
  startServer,
  step,
  ADMIN_TOKEN,
} from './helpers.js';

type Started = Awaited<ReturnType<typeof startServer>>;

/**
 * The run index and the read API over job folders alone (no queue): listing, paging, one run's
 * events, and the live stream's resumption from Last-Event-ID.
 */
describe('run server: runs from the event store', () => {
  let workDir: string;
  let server: Started;

  before(async () => {
    workDir = mkdtempSync(join(tmpdir(), 'ia-server-'));
    const t0 = Date.parse('2025-01-01T00:00:00Z');
    for (let i = 0; i < 7; i++) {
      makeRun(workDir, `run-${i}`, {
        repo: 'acme/calc',
        issue: i + 1,
        steps: 2,
        finished: i !== 6,
        requestedAt: new Date(t0 + i * 1000).toISOString(),
      });
    }
    server = await startServer(serverOptions(workDir, { secrets: [ADMIN_TOKEN, 'sk-secret-value-123456'] }));
  });

  after(async () => {
    await server.close();
    rmSync(workDir, { recursive: true, force: true });
  });

  const get = async (path: string) => {
    const res = await fetch(`${server.url}${path}`, { headers: admin });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };

  it('lists runs newest first with their totals, and pages with a cursor', async () => {
    const first = await get('/api/runs?limit=3');
    assert.equal(first.status, 200);
    const runs = first.body.runs as RunSummary[];
    assert.deepEqual(
      runs.map((r) => r.id),
      ['run-6', 'run-5', 'run-4'],
    );
    assert.equal(runs[0]?.state, 'active');
    assert.equal(runs[1]?.state, 'finished');
    assert.equal(runs[1].outcome, 'resolved');
    assert.equal(runs[1].steps, 2);
    assert.equal(runs[1].tokens, 250);
    assert.equal(runs[1].repo, 'acme/calc');
    assert.equal(runs[1].issue, 6);
    assert.equal(runs[1].lastEventId, 7);
    assert.equal(typeof first.body.next, 'string');
    const seen = runs.map((r) => r.id);
    let next = first.body.next as string | null;
    while (next !== null) {
      const page = await get(`/api/runs?limit=3&before=${encodeURIComponent(next)}`);
      seen.push(...(page.body.runs as RunSummary[]).map((r) => r.id));
      next = page.body.next as string | null;
    }
    assert.deepEqual(seen, ['run-6', 'run-5', 'run-4', 'run-3', 'run-2', 'run-1', 'run-0']);
    const active = await get('/api/runs?state=active');
    assert.deepEqual(
      (active.body.runs as RunSummary[]).map((r) => r.id),
      ['run-6'],
    );
    assert.equal((await get('/api/runs?state=bogus')).status, 400);
    assert.equal((await get('/api/runs?before=not-a-cursor')).status, 400);
  });

  it('serves one run with its base state and reduced state, and its events in pages', async () => {
    const one = await get('/api/runs/run-3');
    assert.equal(one.status, 200);
    assert.equal((one.body.run as RunSummary).id, 'run-3');
    assert.equal((one.body.base as { conversationId: string }).conversationId, 'run-3');
    assert.equal((one.body.state as { steps: number }).steps, 2);
    const page1 = await get('/api/runs/run-3/events?limit=4');
    const events1 = page1.body.events as AgentEvent[];
    assert.deepEqual(
      events1.map((e) => e.id),
      [1, 2, 3, 4],
    );
    assert.equal(page1.body.next, 4);
    const page2 = await get('/api/runs/run-3/events?after=4&limit=4');
    assert.deepEqual(
      (page2.body.events as AgentEvent[]).map((e) => e.id),
      [5, 6, 7],
    );
    assert.equal(page2.body.next, null);
    assert.equal((await get('/api/runs/nope')).status, 404);
    assert.equal((await get('/api/runs/..%2F..%2Fetc/events')).status, 404);
  });

  it('redacts secrets of the process from what it serves', async () => {
    const store = makeRun(workDir, 'run-secret', { repo: 'acme/calc', issue: 99, steps: 0, finished: false });
    store.appendSync({
      kind: 'warning',
      code: 'no_tool_call',
      message: `leaked sk-secret-value-123456 and ${ADMIN_TOKEN} and ghs_abcdefghijklmnopqrstuvwxyz0123`,
    });
    await server.server.index.refresh();
    const res = await get('/api/runs/run-secret/events');
    const text = JSON.stringify(res.body);
    assert.doesNotMatch(text, /sk-secret-value-123456/);
    assert.ok(!text.includes(ADMIN_TOKEN));
    assert.doesNotMatch(text, /ghs_abcdef/);
    assert.match(text, /\[REDACTED\]/);
  });

  it("serves a turn's thinking to a signed-in reader only: signed out, every route that carries events is refused", async () => {
    const store = makeRun(workDir, 'run-thinking', {
      repo: 'acme/calc',
      issue: 77,
      steps: 0,
      finished: false,
    });
    const thought = 'The rounding happens before the division; check calc.js first.';
    store.appendSync({
      kind: 'model_response',
      model: 'claude-sim',
      requestId: 'req_t',
      content: [
        { type: 'thinking', thinking: thought, signature: 'sig' },
        { type: 'text', text: 'Looking at calc.js.' },
      ],
      stopReason: 'end_turn',
      usage: { inputTokens: 10, outputTokens: 20, cacheReadTokens: 0, cacheWriteTokens: 0 },
      usd: 0.001,
      latencyMs: 5,
      attempts: 1,
      promptTokensEstimate: 10,
      thinkingTokens: 16,
    });
    await server.server.index.refresh();
    const signedIn = await get('/api/runs/run-thinking/events');
    assert.equal(signedIn.status, 200);
    assert.ok(JSON.stringify(signedIn.body).includes(thought));
    for (const path of [
      '/api/runs/run-thinking/events',
      '/api/runs/run-thinking',
      '/api/runs/run-thinking/stream',
      '/issue-agent/runs/run-thinking/trajectory.json',
    ]) {
      const res = await fetch(`${server.url}${path}`);
      const text = await res.text();
      assert.equal(res.status, 401, path);
      assert.ok(!text.includes(thought), path);
    }
  });

  it('3. the run stream resumes from Last-Event-ID without losing or repeating an event', async () => {
    const store = makeRun(workDir, 'run-live', { repo: 'acme/calc', issue: 50, steps: 3, finished: false });
    await server.server.index.refresh();
    // First connection: read 5 of the 9 events, then disconnect.
    const c1 = new AbortController();
    const res1 = await fetch(`${server.url}/api/runs/run-live/stream`, { headers: admin, signal: c1.signal });
    assert.equal(res1.status, 200);
    assert.match(res1.headers.get('content-type') ?? '', /text\/event-stream/);
    const got1 = await readSse(res1, (m) => m.filter((x) => x.event === 'agent-event').length >= 5, c1);
    const events1 = got1.filter((m) => m.event === 'agent-event');
    assert.deepEqual(
      events1.map((m) => m.id),
      ['1', '2', '3', '4', '5'],
    );
    const lastId = events1.at(-1)?.id ?? '0';
    // While disconnected the run goes on and finishes.
    for (const e of step(4)) store.appendSync(e);
    store.appendSync(outcomeEvent());
    // Second connection, as EventSource reconnects: Last-Event-ID.
    const c2 = new AbortController();
    const res2 = await fetch(`${server.url}/api/runs/run-live/stream`, {
      headers: { ...admin, 'last-event-id': lastId },
      signal: c2.signal,
    });
    const got2 = await readSse(res2, (m) => m.some((x) => x.event === 'end'), c2);
    const events2 = got2.filter((m) => m.event === 'agent-event');
    const all = [...events1, ...events2].map((m) => Number(m.id));
    assert.deepEqual(
      all,
      Array.from({ length: 13 }, (_, i) => i + 1),
      'every event exactly once, in order',
    );
    for (const m of events2) assert.equal((JSON.parse(m.data) as AgentEvent).id, Number(m.id));
    assert.equal((JSON.parse(events2.at(-1)?.data ?? '{}') as AgentEvent).kind, 'outcome');
    const runs = got2.filter((m) => m.event === 'run').map((m) => JSON.parse(m.data) as RunSummary);
    assert.equal(runs.at(-1)?.state, 'finished');
    assert.ok(got2.at(-1)?.event === 'end', 'end comes last');
    // ?after= works the same for clients that cannot set the header.
    const c3 = new AbortController();
    const res3 = await fetch(`${server.url}/api/runs/run-live/stream?after=11`, {
      headers: admin,
      signal: c3.signal,
    });
    const got3 = await readSse(res3, (m) => m.some((x) => x.event === 'end'), c3);
    assert.deepEqual(
      got3.filter((m) => m.event === 'agent-event').map((m) => m.id),
      ['12', '13'],
    );
  });

  it('the runs stream sends a snapshot, then each change', async () => {
    const c = new AbortController();
    const res = await fetch(`${server.url}/api/runs/stream`, { headers: admin, signal: c.signal });
    assert.equal(res.status, 200);
    let added = false;
    const got = await readSse(
      res,
      (m) => {
        if (!added && m.length >= 7) {
          added = true;
          makeRun(workDir, 'run-new', { repo: 'acme/calc', issue: 77, steps: 1, finished: false });
        }
        return m.some((x) => x.event === 'run' && (JSON.parse(x.data) as RunSummary).id === 'run-new');
      },
      c,
    );
    const ids = got.map((m) => (JSON.parse(m.data) as RunSummary).id);
    assert.ok(ids.includes('run-0') && ids.includes('run-6'), 'the snapshot lists existing runs');
    assert.equal(ids.at(-1), 'run-new');
  });

  it('serves the client shell (or a not-built page) with security headers, without auth', async () => {
    const res = await fetch(`${server.url}/runs/run-3`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /text\/html/);
    assert.match(res.headers.get('content-security-policy') ?? '', /default-src 'self'/);
    assert.match(res.headers.get('content-security-policy') ?? '', /frame-ancestors 'none'/);
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(res.headers.get('referrer-policy'), 'no-referrer');
    assert.match(await res.text(), /not built/);
    // With a built client: index.html and assets/ from the folder, nothing outside it.
    const web = join(workDir, 'web');
    const { mkdirSync } = await import('node:fs');
    mkdirSync(join(web, 'assets'), { recursive: true });
    writeFileSync(join(web, 'index.html'), '<!doctype html><script src="/assets/app.js"></script>');
    writeFileSync(join(web, 'assets', 'app.js'), 'console.log(1)');
    const withWeb = await startServer(serverOptions(workDir, { webAssetsDir: web }));
    try {
      assert.match(await (await fetch(`${withWeb.url}/`)).text(), /assets\/app\.js/);
      const js = await fetch(`${withWeb.url}/assets/app.js`);
      assert.equal(js.status, 200);
      assert.match(js.headers.get('content-type') ?? '', /javascript/);
      assert.equal((await fetch(`${withWeb.url}/assets/..%2F..%2Fjobs%2Frun-0%2Fjob.json`)).status, 404);
    } finally {
      await withWeb.close();
    }
  });
});

/**
 * A client that reads a run's events and then its summary must not see older counts in the
 * summary: the summary reads the run's trajectory as the events route does. The index's own poll
 * is off here (an hour), so only the request itself can bring the summary up to date.
 */
describe('run server: a run’s summary is as new as its events', () => {
  it('after new events, GET /api/runs/:id counts them at once', async () => {
    const workDir = mkdtempSync(join(tmpdir(), 'ia-server-current-'));
    const store = makeRun(workDir, 'run-now', { repo: 'acme/calc', issue: 5, steps: 1, finished: false });
    const server = await startServer(serverOptions(workDir, { pollMs: 3_600_000 }));
    try {
      const get = async (path: string) => {
        const res = await fetch(`${server.url}${path}`, { headers: admin });
        return (await res.json()) as Record<string, unknown>;
      };
      assert.equal(((await get('/api/runs/run-now')).run as RunSummary).steps, 1);
      for (const e of step(2)) store.appendSync(e);
      // A refresh just now: the index's freshness window (250 ms) would otherwise serve the old one.
      await server.server.index.refresh();
      for (const e of step(3)) store.appendSync(e);
      const events = (await get('/api/runs/run-now/events')).events as AgentEvent[];
      const run = (await get('/api/runs/run-now')).run as RunSummary;
      assert.equal(run.steps, 3, `events read: ${String(events.length)}`);
      store.appendSync(outcomeEvent());
      const done = (await get('/api/runs/run-now')).run as RunSummary;
      assert.equal(done.outcome, 'resolved');
      assert.equal(done.state, 'finished');
    } finally {
      await server.close();
      rmSync(workDir, { recursive: true, force: true });
    }
  });
});
