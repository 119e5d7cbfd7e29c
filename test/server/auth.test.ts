import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { IncomingMessage } from 'node:http';
import { Socket } from 'node:net';
import { safeNext, SESSION_COOKIE, Sessions } from '../../src/server/auth.js';
import type { RunSummary } from '../../src/server/runs.js';
import { tallied } from '../support/attack-log.js';
import { makeFixtureRepo, type FixtureRepo } from '../support/fixture-repo.js';
import { startGitHubSimulator, type GitHubSim } from '../support/github-sim/index.js';
import {
  admin,
  ADMIN_TOKEN,
  cookiesOf,
  makeRun,
  readSse,
  serverOptions,
  signInWithGitHub,
  startServer,
} from './helpers.js';

type Started = Awaited<ReturnType<typeof startServer>>;

/**
 * One probe of the run server's authorization battery (real OAuth sessions against the GitHub
 * simulator): an attack, tallied with the attack suite, that passes when the server refuses it.
 */
function probe(name: string, fn: () => Promise<void>): Promise<void> {
  return tallied(`run server authorization: ${name}`, fn);
}

/**
 * Must-show 2: nothing is readable without a valid token or session, and a person signed in with
 * GitHub (the real OAuth web flow against the GitHub simulator) sees only runs of repositories their
 * own token can read. The probes of the authorization battery (other repositories' runs, cancel and
 * start, cross-site requests, `next=` redirects, callback replay, login CSRF) are tallied as attacks.
 */
describe('run server: authentication and per-user access', () => {
  let workDir: string;
  let server: Started;
  let sim: GitHubSim;
  let fixture: FixtureRepo;

  before(async () => {
    workDir = mkdtempSync(join(tmpdir(), 'ia-server-auth-'));
    fixture = makeFixtureRepo('node-calc');
    sim = await startGitHubSimulator();
    const calc = await sim.createRepo({ owner: 'acme', name: 'calc', sourceDir: fixture.dir, private: true });
    const vault = await sim.createRepo({
      owner: 'acme',
      name: 'vault',
      sourceDir: fixture.dir,
      private: true,
    });
    sim.addUser({ login: 'maria' });
    sim.addUser({ login: 'bob' });
    sim.setPermission('acme', 'calc', 'maria', 'write');
    sim.setPermission('acme', 'calc', 'bob', 'read');
    makeRun(workDir, 'run-calc', { repo: 'acme/calc', issue: 1, steps: 1, finished: false, repoId: calc.id });
    makeRun(workDir, 'run-vault', {
      repo: 'acme/vault',
      issue: 2,
      steps: 1,
      finished: false,
      repoId: vault.id,
    });
    // A run of an earlier repository that had the name acme/calc (deleted, or renamed away): readers
    // of today's acme/calc must not see it.
    makeRun(workDir, 'run-old-calc', {
      repo: 'acme/calc',
      issue: 3,
      steps: 1,
      finished: true,
      repoId: 424_242,
    });
    server = await startServer(
      serverOptions(workDir, {
        github: {
          apiUrl: sim.url,
          webUrl: sim.url,
          clientId: sim.app.clientId,
          clientSecret: sim.app.clientSecret,
        },
      }),
    );
    sim.oauth.setCallbackUrl(`${server.url}/auth/github/callback`);
  });

  after(async () => {
    await server.close();
    await sim.close();
    fixture.cleanup();
    rmSync(workDir, { recursive: true, force: true });
  });

  const routes: readonly (readonly [string, string])[] = [
    ['GET', '/api/me'],
    ['GET', '/api/runs'],
    ['POST', '/api/runs'],
    ['GET', '/api/runs/stream'],
    ['GET', '/api/runs/run-calc'],
    ['GET', '/api/runs/run-calc/events'],
    ['GET', '/api/runs/run-calc/stream'],
    ['POST', '/api/runs/run-calc/cancel'],
    ['GET', '/api/runs/no-such-run'],
    ['GET', '/api/anything'],
    ['GET', '/issue-agent/runs/run-calc/trajectory.json'],
    ['GET', '/metrics'],
    ['GET', '/admin/queues'],
    ['GET', '/admin/queues/api/queues'],
  ];

  it('2. answers 401 on every API route, both streams, /metrics and bull-board without a valid credential', async () => {
    const wrong = [
      {},
      { authorization: 'Bearer wrong-token-wrong-token' },
      { authorization: `Bearer ${ADMIN_TOKEN}x` },
      { authorization: ADMIN_TOKEN },
      { cookie: 'ia_session=forged.value' },
    ];
    for (const headers of wrong) {
      for (const [method, path] of routes) {
        const res = await fetch(`${server.url}${path}`, {
          method,
          headers: { ...headers, 'content-type': 'application/json' },
          ...(method === 'POST' ? { body: '{}' } : {}),
        });
        assert.equal(res.status, 401, `${method} ${path} with ${JSON.stringify(headers)}`);
        const body = (await res.json()) as { error?: { code?: string } };
        assert.equal(body.error?.code, 'unauthorized');
      }
    }
    // The health check is open, and the admin token opens the rest.
    assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
    assert.equal((await fetch(`${server.url}/api/runs`, { headers: admin })).status, 200);
  });

  it('an admin session from the token; a tampered cookie is refused', async () => {
    assert.equal(
      (
        await fetch(`${server.url}/auth/token`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ token: 'wrong-token-wrong-token' }),
        })
      ).status,
      401,
    );
    const login = await fetch(`${server.url}/auth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: ADMIN_TOKEN }),
    });
    assert.equal(login.status, 200);
    const setCookie = login.headers.getSetCookie()[0] ?? '';
    assert.match(setCookie, /^ia_session=/);
    assert.match(setCookie, /HttpOnly/);
    assert.match(setCookie, /SameSite=Lax/);
    const cookie = cookiesOf(login);
    const me = (await (await fetch(`${server.url}/api/me`, { headers: { cookie } })).json()) as Record<
      string,
      unknown
    >;
    assert.deepEqual({ login: me.login, admin: me.admin }, { login: null, admin: true });
    const value = decodeURIComponent(cookie.slice('ia_session='.length));
    const [id = '', sig = ''] = value.split('.');
    const flip = (s: string) => (s.startsWith('A') ? `B${s.slice(1)}` : `A${s.slice(1)}`);
    for (const tampered of [`${flip(id)}.${sig}`, `${id}.${flip(sig)}`, id, `${id}.`, `.${sig}`]) {
      const res = await fetch(`${server.url}/api/runs`, {
        headers: { cookie: `ia_session=${encodeURIComponent(tampered)}` },
      });
      assert.equal(res.status, 401, tampered);
    }
    // A cookie-authenticated POST from another site is refused even with a valid session.
    const cross = await fetch(`${server.url}/api/runs/run-calc/cancel`, {
      method: 'POST',
      headers: { cookie, origin: 'https://evil.example' },
    });
    assert.equal(cross.status, 403);
    const out = await fetch(`${server.url}/auth/logout`, { method: 'POST', headers: { cookie } });
    assert.equal(out.status, 200);
    assert.equal((await fetch(`${server.url}/api/runs`, { headers: { cookie } })).status, 401);
  });

  /** The browser's part of the web flow: login → GitHub's authorize page → callback. */
  const signIn = (login: string, next: string) => signInWithGitHub(server.url, sim, login, next);
  const status = async (method: string, path: string, headers: Record<string, string>, body?: string) =>
    (
      await fetch(`${server.url}${path}`, {
        method,
        headers,
        redirect: 'manual',
        ...(body === undefined ? {} : { body }),
      })
    ).status;

  it('2. a user signed in with GitHub sees only runs of repositories they can read (404 elsewhere)', async () => {
    const { cookie, location } = await signIn('maria', '/runs/run-calc');
    assert.equal(location, '/runs/run-calc');
    const headers = { cookie };
    const me = (await (await fetch(`${server.url}/api/me`, { headers })).json()) as Record<string, unknown>;
    assert.equal(me.login, 'maria');
    assert.equal(me.admin, false);
    assert.doesNotMatch(JSON.stringify(me), /ghu_/, 'the user token stays on the server');
    assert.equal((await fetch(`${server.url}/api/runs/run-calc`, { headers })).status, 200);
    await probe("another repository's run, its events and its stream", async () => {
      for (const path of ['', '/events', '/stream'])
        assert.equal(await status('GET', `/api/runs/run-vault${path}`, headers), 404, `run-vault${path}`);
    });
    await probe("another repository's trajectory file", async () => {
      assert.equal(await status('GET', '/issue-agent/runs/run-vault/trajectory.json', headers), 404);
    });
    await probe('a run of an earlier repository of the same name (deleted or renamed away)', async () => {
      for (const path of ['', '/events', '/stream'])
        assert.equal(
          await status('GET', `/api/runs/run-old-calc${path}`, headers),
          404,
          `run-old-calc${path}`,
        );
    });
    await probe("the runs list leaves other repositories' runs out", async () => {
      const list = (await (await fetch(`${server.url}/api/runs`, { headers })).json()) as {
        runs: RunSummary[];
      };
      assert.deepEqual(
        list.runs.map((r) => r.id),
        ['run-calc'],
      );
    });
    await probe("the live runs list leaves other repositories' runs out", async () => {
      const c = new AbortController();
      const res = await fetch(`${server.url}/api/runs/stream`, { headers, signal: c.signal });
      const got = await readSse(res, (m) => m.length >= 1, c);
      assert.deepEqual(
        got.map((m) => (JSON.parse(m.data) as RunSummary).id),
        ['run-calc'],
      );
    });
    await probe("cancelling another repository's run", async () => {
      assert.equal(await status('POST', '/api/runs/run-vault/cancel', headers), 404);
    });
    await probe(
      "starting a run in another repository (even one the user's token can see nothing of)",
      async () => {
        const start = (repo: string) =>
          status(
            'POST',
            '/api/runs',
            { ...headers, 'content-type': 'application/json' },
            JSON.stringify({ repo, issue: 2 }),
          );
        assert.equal(await start('acme/vault'), 404);
        assert.equal(await start('acme/no-such-repo'), 404);
      },
    );
    await probe('a person on the admin-only routes (metrics, bull-board)', async () => {
      assert.equal(await status('GET', '/metrics', headers), 401);
      assert.equal(await status('GET', '/admin/queues', headers), 403);
    });
    assert.deepEqual(sim.violations, []);
    assert.deepEqual(sim.responseViolations, []);
  });

  it('a reader cannot cancel or start runs (403); someone with no access gets 404', async () => {
    const { cookie } = await signIn('bob', '/');
    const headers = { cookie, 'content-type': 'application/json' };
    assert.equal(await status('GET', '/api/runs/run-calc', headers), 200);
    await probe('a reader cancels a run of a repository they can only read', async () => {
      assert.equal(await status('POST', '/api/runs/run-calc/cancel', headers), 403);
    });
    await probe('a reader starts a run in a repository they can only read', async () => {
      const body = JSON.stringify({ repo: 'acme/calc', issue: 1 });
      assert.equal(await status('POST', '/api/runs', headers, body), 403);
    });
    await probe('someone without access starts a run there', async () => {
      const body = JSON.stringify({ repo: 'acme/vault', issue: 1 });
      assert.equal(await status('POST', '/api/runs', headers, body), 404);
    });
  });

  it('a signed-in writer’s session does not carry a request from another site', async () => {
    const { cookie } = await signIn('maria', '/');
    const json = { cookie, 'content-type': 'application/json' };
    const start = JSON.stringify({ repo: 'acme/calc', issue: 1 });
    await probe('a cross-site cancel (Origin of another site)', async () => {
      assert.equal(
        await status('POST', '/api/runs/run-calc/cancel', { cookie, origin: 'https://evil.example' }),
        403,
      );
    });
    await probe('a cross-site cancel (Sec-Fetch-Site: cross-site, no Origin)', async () => {
      assert.equal(
        await status('POST', '/api/runs/run-calc/cancel', { cookie, 'sec-fetch-site': 'cross-site' }),
        403,
      );
    });
    await probe('a cross-site start from an opaque origin (Origin: null, a sandboxed frame)', async () => {
      assert.equal(await status('POST', '/api/runs', { ...json, origin: 'null' }, start), 403);
    });
    await probe('a cross-site start as a simple form post (text/plain, no preflight)', async () => {
      const form = { cookie, 'content-type': 'text/plain', origin: 'https://evil.example' };
      assert.equal(await status('POST', '/api/runs', form, start), 403);
    });
    await probe('a cross-site start from a look-alike host (same name as a prefix)', async () => {
      const host = new URL(server.url).host;
      assert.equal(
        await status('POST', '/api/runs', { ...json, origin: `http://${host}.evil.example` }, start),
        403,
      );
    });
  });

  it('refuses a callback whose state is not this browser’s, or is used twice', async () => {
    const start = await fetch(`${server.url}/auth/github/login?next=/`, { redirect: 'manual' });
    const stateCookie = cookiesOf(start);
    const authorize = new URL(start.headers.get('location') ?? '');
    sim.oauth.authorizeAs('maria');
    const approved = new URL((await fetch(authorize, { redirect: 'manual' })).headers.get('location') ?? '');
    const code = approved.searchParams.get('code') ?? '';
    const state = approved.searchParams.get('state') ?? '';
    const callback = (q: string, cookie?: string) =>
      fetch(`${server.url}/auth/github/callback?${q}`, {
        redirect: 'manual',
        ...(cookie === undefined ? {} : { headers: { cookie } }),
      });
    await probe('a callback from another browser (no state cookie)', async () => {
      assert.equal((await callback(`code=${code}&state=${state}`)).status, 400);
    });
    await probe('a callback with a state this browser did not start', async () => {
      assert.equal((await callback(`code=${code}&state=x${state}`, stateCookie)).status, 400);
    });
    await probe("a callback with the state of this browser's other sign-in", async () => {
      const other = cookiesOf(await fetch(`${server.url}/auth/github/login`, { redirect: 'manual' }));
      assert.equal((await callback(`code=${code}&state=${state}`, other)).status, 400);
    });
    // The right pair (none of the tries above matched it, so it is unspent) works once; a replay fails.
    assert.equal((await callback(`code=${code}&state=${state}`, stateCookie)).status, 302);
    await probe('a callback replayed', async () => {
      const again = await callback(`code=${code}&state=${state}`, stateCookie);
      assert.equal(again.status, 400);
      assert.doesNotMatch(again.headers.getSetCookie().join('\n'), /ia_session=[^;]/);
    });
    await probe('a spent code with a fresh state of this browser', async () => {
      const fresh = await fetch(`${server.url}/auth/github/login?next=/`, { redirect: 'manual' });
      const freshState = new URL(fresh.headers.get('location') ?? '').searchParams.get('state') ?? '';
      const res = await callback(`code=${code}&state=${freshState}`, cookiesOf(fresh));
      assert.notEqual(res.status, 302);
      assert.doesNotMatch(res.headers.getSetCookie().join('\n'), /ia_session=[^;]/);
    });
  });

  it('login CSRF: an attacker’s sign-in cannot be finished in someone else’s browser', async () => {
    await probe(
      "the attacker's code and state, delivered to a victim's browser in the middle of its own sign-in",
      async () => {
        // The attacker signs in as themselves up to GitHub's redirect, and stops there.
        const theirs = await fetch(`${server.url}/auth/github/login?next=/`, { redirect: 'manual' });
        sim.oauth.authorizeAs('bob');
        const approved = new URL(
          (await fetch(theirs.headers.get('location') ?? '', { redirect: 'manual' })).headers.get(
            'location',
          ) ?? '',
        );
        // The victim has started a sign-in of their own (their browser holds its state cookie).
        const victim = cookiesOf(
          await fetch(`${server.url}/auth/github/login?next=/`, { redirect: 'manual' }),
        );
        const res = await fetch(`${server.url}/auth/github/callback${approved.search}`, {
          redirect: 'manual',
          headers: { cookie: victim },
        });
        assert.equal(res.status, 400);
        assert.doesNotMatch(res.headers.getSetCookie().join('\n'), /ia_session=[^;]/);
      },
    );
  });

  it('never redirects off-site after sign-in', async () => {
    const offSite: readonly (readonly [string, readonly string[]])[] = [
      ['a protocol-relative `next`', ['//evil.example/x']],
      ['an absolute `next`', ['https://evil.example/', 'javascript:alert(1)']],
      ['a backslash `next` (browsers read `/\\` as `//`)', ['/\\evil.example']],
      // Normalised into `//evil.example` by URL parsing: the result is checked, not only the input.
      [
        'a `next` that normalises to another host',
        ['/.//evil.example', '/..//evil.example', '/%2e//evil.example'],
      ],
    ];
    for (const [name, nexts] of offSite) {
      await probe(`a sign-in redirect to another site: ${name}`, async () => {
        for (const next of nexts) {
          const { location } = await signIn('maria', next);
          assert.equal(location, '/', next);
        }
      });
    }
    assert.equal(safeNext('/runs/abc?x=1#y'), '/runs/abc?x=1#y');
    assert.equal(safeNext('//evil'), '/');
    assert.equal(safeNext('/%2F%2Fevil'), '/%2F%2Fevil');
    assert.equal(safeNext('/\tevil'), '/');
    assert.equal(safeNext('evil'), '/');
    assert.equal(safeNext(`/runs/${'x'.repeat(5000)}`), '/', 'an overlong next is dropped');
  });
});

describe('sessions', () => {
  const asRequest = (cookie: string): IncomingMessage => {
    const req = new IncomingMessage(new Socket());
    req.headers = { cookie: `${SESSION_COOKIE}=${encodeURIComponent(cookie)}` };
    return req;
  };

  it('one GitHub account keeps at most 20 sessions (its oldest go), the admin is not pushed out', () => {
    const sessions = new Sessions({ secret: 'session-secret-0123456789', adminToken: ADMIN_TOKEN });
    const adminCookie = sessions.create({ kind: 'admin' });
    const cookies = Array.from({ length: 25 }, () =>
      sessions.create({ kind: 'user', login: 'mallory', id: 66, token: 'ghu_x' }),
    );
    const live = cookies.filter((c) => sessions.authenticate(asRequest(c)) !== null);
    assert.equal(live.length, 20);
    assert.deepEqual(live, cookies.slice(5), 'the newest stay');
    assert.equal(sessions.authenticate(asRequest(adminCookie))?.kind, 'admin');
  });
});
