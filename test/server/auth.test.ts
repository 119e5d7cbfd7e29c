import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { IncomingMessage } from 'node:http';
import { Socket } from 'node:net';
import { safeNext, SESSION_COOKIE, Sessions } from '../../src/server/auth.js';
import type { RunSummary } from '../../src/server/runs.js';
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

/** Pulls `name=value` of each Set-Cookie header into a Cookie header value. */

/**
 * Must-show 2: nothing is readable without a valid token or session, and a person signed in with
 * GitHub (the real OAuth web flow against the GitHub simulator) sees only runs of repositories their
 * own token can read.
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

  it('2. a user signed in with GitHub sees only runs of repositories they can read (404 elsewhere)', async () => {
    const { cookie, location } = await signIn('maria', '/runs/run-calc');
    assert.equal(location, '/runs/run-calc');
    const headers = { cookie };
    const me = (await (await fetch(`${server.url}/api/me`, { headers })).json()) as Record<string, unknown>;
    assert.equal(me.login, 'maria');
    assert.equal(me.admin, false);
    assert.doesNotMatch(JSON.stringify(me), /ghu_/, 'the user token stays on the server');
    const list = (await (await fetch(`${server.url}/api/runs`, { headers })).json()) as {
      runs: RunSummary[];
    };
    assert.deepEqual(
      list.runs.map((r) => r.id),
      ['run-calc'],
    );
    assert.equal((await fetch(`${server.url}/api/runs/run-calc`, { headers })).status, 200);
    for (const path of ['', '/events', '/stream']) {
      const res = await fetch(`${server.url}/api/runs/run-vault${path}`, { headers });
      assert.equal(res.status, 404, `run-vault${path}`);
    }
    assert.equal(
      (await fetch(`${server.url}/api/runs/run-vault/cancel`, { method: 'POST', headers })).status,
      404,
    );
    assert.equal(
      (await fetch(`${server.url}/issue-agent/runs/run-vault/trajectory.json`, { headers })).status,
      404,
    );
    // The live list leaves it out too.
    const c = new AbortController();
    const res = await fetch(`${server.url}/api/runs/stream`, { headers, signal: c.signal });
    const got = await readSse(res, (m) => m.length >= 1, c);
    assert.deepEqual(
      got.map((m) => (JSON.parse(m.data) as RunSummary).id),
      ['run-calc'],
    );
    // Admin-only routes stay closed to a person.
    assert.equal((await fetch(`${server.url}/metrics`, { headers })).status, 401);
    assert.equal((await fetch(`${server.url}/admin/queues`, { headers })).status, 403);
    assert.deepEqual(sim.violations, []);
    assert.deepEqual(sim.responseViolations, []);
  });

  it('a reader cannot cancel or start runs (403); someone with no access gets 404', async () => {
    const { cookie } = await signIn('bob', '/');
    const headers = { cookie, 'content-type': 'application/json' };
    assert.equal((await fetch(`${server.url}/api/runs/run-calc`, { headers })).status, 200);
    assert.equal(
      (await fetch(`${server.url}/api/runs/run-calc/cancel`, { method: 'POST', headers })).status,
      403,
    );
    const start = await fetch(`${server.url}/api/runs`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ repo: 'acme/calc', issue: 1 }),
    });
    assert.equal(start.status, 403);
    const hidden = await fetch(`${server.url}/api/runs`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ repo: 'acme/vault', issue: 1 }),
    });
    assert.equal(hidden.status, 404);
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
    // No cookie (another browser), a different state, a state of another login attempt.
    assert.equal((await callback(`code=${code}&state=${state}`)).status, 400);
    assert.equal((await callback(`code=${code}&state=x${state}`, stateCookie)).status, 400);
    const other = cookiesOf(await fetch(`${server.url}/auth/github/login`, { redirect: 'manual' }));
    assert.equal((await callback(`code=${code}&state=${state}`, other)).status, 400);
    // The right pair (none of the tries above matched it, so it is unspent) works once; a replay fails.
    assert.equal((await callback(`code=${code}&state=${state}`, stateCookie)).status, 302);
    assert.equal((await callback(`code=${code}&state=${state}`, stateCookie)).status, 400);
  });

  it('never redirects off-site after sign-in', async () => {
    for (const next of [
      '//evil.example/x',
      'https://evil.example/',
      '/\\evil.example',
      'javascript:alert(1)',
      // Normalised into `//evil.example` by URL parsing: the result is checked, not only the input.
      '/.//evil.example',
      '/..//evil.example',
      '/%2e//evil.example',
    ]) {
      const { location } = await signIn('maria', next);
      assert.equal(location, '/', next);
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
