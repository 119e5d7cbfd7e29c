import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import type { FileEventStore } from '../../src/events/file-event-store.js';
import { attackTest } from '../security/support.js';
import { makeFixtureRepo } from '../support/fixture-repo.js';
import { startGitHubSimulator } from '../support/github-sim/index.js';
import { makeRun, readSse, serverOptions, signInWithGitHub, startServer, step } from './helpers.js';

const ACCESS_CACHE_MS = 1000;
const POLL_MS = 100;

/**
 * A reader of a private repository opens a run's live stream, then loses access on GitHub. Every
 * route answers 404 once the access cache's time has passed; the open stream must stop as well,
 * within that time, and send nothing the run writes after it.
 */
attackTest(
  "streams: a reader who loses access to the run's repository stops receiving its events within the access cache's time",
  { timeout: 60_000 },
  async (t) => {
    const workDir = mkdtempSync(join(tmpdir(), 'ia-stream-access-'));
    const fixture = makeFixtureRepo('node-calc');
    const sim = await startGitHubSimulator();
    t.after(async () => {
      await sim.close();
      fixture.cleanup();
      rmSync(workDir, { recursive: true, force: true });
    });
    const calc = await sim.createRepo({ owner: 'acme', name: 'calc', sourceDir: fixture.dir, private: true });
    sim.addUser({ login: 'bob' });
    sim.setPermission('acme', 'calc', 'bob', 'read');
    const store: FileEventStore = makeRun(workDir, 'run-calc', {
      repo: 'acme/calc',
      issue: 1,
      steps: 1,
      finished: false,
      repoId: calc.id,
    });
    const server = await startServer(
      serverOptions(workDir, {
        github: {
          apiUrl: sim.url,
          webUrl: sim.url,
          clientId: sim.app.clientId,
          clientSecret: sim.app.clientSecret,
        },
        accessCacheMs: ACCESS_CACHE_MS,
        pollMs: POLL_MS,
      }),
    );
    t.after(() => server.close());
    sim.oauth.setCallbackUrl(`${server.url}/auth/github/callback`);
    const { cookie } = await signInWithGitHub(server.url, sim, 'bob', '/');

    const texts: string[] = [];
    let lost = 0;
    let ended = 0;
    const c = new AbortController();
    const res = await fetch(`${server.url}/api/runs/run-calc/stream`, {
      headers: { cookie },
      signal: c.signal,
    });
    assert.equal(res.status, 200);
    const reading = readSse(
      res,
      (messages) => {
        const last = messages.at(-1);
        if (last?.event === 'agent-event') texts.push(last.data);
        return texts.some((x) => x.includes('AFTER-LOSS'));
      },
      c,
    ).then(() => {
      ended = Date.now();
    });
    const seen = async (text: string): Promise<void> => {
      for (let i = 0; i < 200 && !texts.some((x) => x.includes(text)); i++) await delay(25);
      assert.ok(
        texts.some((x) => x.includes(text)),
        `${text} was streamed`,
      );
    };
    await seen('step 1');
    for (const e of step(2, 'SEEN-WHILE-READER')) store.appendSync(e);
    await seen('SEEN-WHILE-READER');

    // Access goes; once a route says so (the cache's time has passed), the run writes on.
    sim.setPermission('acme', 'calc', 'bob', 'none');
    lost = Date.now();
    for (let i = 0; i < 200; i++) {
      if ((await fetch(`${server.url}/api/runs/run-calc`, { headers: { cookie } })).status === 404) break;
      await delay(50);
    }
    assert.equal((await fetch(`${server.url}/api/runs/run-calc`, { headers: { cookie } })).status, 404);
    for (const e of step(3, 'AFTER-LOSS model text')) store.appendSync(e);

    const deadline = delay(ACCESS_CACHE_MS + 5000).then(() => 'open' as const);
    const outcome = await Promise.race([reading.then(() => 'ended' as const), deadline]);
    c.abort();
    assert.ok(
      !texts.some((x) => x.includes('AFTER-LOSS')),
      'an event written after the access was lost was streamed',
    );
    assert.equal(outcome, 'ended', 'the stream is still open');
    assert.ok(
      ended - lost <= ACCESS_CACHE_MS + 1000,
      `closed ${ended - lost} ms after the access was lost (cache ${ACCESS_CACHE_MS} ms)`,
    );
    // And it does not come back: the browser's reconnect gets 404.
    assert.equal(
      (await fetch(`${server.url}/api/runs/run-calc/stream`, { headers: { cookie } })).status,
      404,
    );
  },
);
