import { cookieHeader, safeNext, SESSION_COOKIE, STATE_COOKIE } from '../auth.js';
import type { ServerContext } from '../context.js';
import { exchangeCode, fetchUser } from '../github.js';
import { ApiError, readJson, SECURITY_HEADERS, type Route } from '../http.js';

const SESSION_MAX_AGE_S = 8 * 3600;

/**
 * Signing in and out: the admin token (exchanged for a session cookie), GitHub's OAuth web flow
 * (state bound to this browser by a short-lived cookie), and `/api/me`, which the sign-in screen
 * also reads before anyone is signed in.
 */
export function authRoutes(ctx: ServerContext): Route[] {
  const { options, sessions, json, secure } = ctx;
  return [
    {
      method: 'POST',
      path: '/auth/token',
      handle: async ({ req, res }) => {
        const body = await readJson(req);
        const token = typeof body === 'object' && body !== null && 'token' in body ? body.token : undefined;
        if (typeof token !== 'string' || !sessions.isAdminToken(token))
          throw new ApiError(401, 'unauthorized', 'wrong token');
        const cookie = sessions.create({ kind: 'admin' });
        return json(
          res,
          200,
          { login: null, admin: true },
          { 'set-cookie': cookieHeader(SESSION_COOKIE, cookie, { secure, maxAgeS: SESSION_MAX_AGE_S }) },
        );
      },
    },
    {
      method: 'POST',
      path: '/auth/logout',
      handle: ({ req, res }) => {
        sessions.destroy(req);
        return json(
          res,
          200,
          { ok: true },
          { 'set-cookie': cookieHeader(SESSION_COOKIE, '', { secure, maxAgeS: 0 }) },
        );
      },
    },
    {
      method: 'GET',
      path: '/auth/github/login',
      handle: ({ req, res, url }) => {
        const clientId = options.github.clientId;
        if (clientId === null)
          throw new ApiError(404, 'github_sign_in_disabled', 'sign-in with GitHub is not configured');
        const next = safeNext(url.searchParams.get('next'));
        const { state, cookie } = sessions.beginLogin(next);
        const authorize = new URL(`${options.github.webUrl}/login/oauth/authorize`);
        authorize.searchParams.set('client_id', clientId);
        authorize.searchParams.set('redirect_uri', `${ctx.origin(req)}/auth/github/callback`);
        authorize.searchParams.set('state', state);
        res.writeHead(302, {
          ...SECURITY_HEADERS,
          location: authorize.toString(),
          'cache-control': 'no-store',
          'set-cookie': cookieHeader(STATE_COOKIE, cookie, { secure, maxAgeS: 600, path: '/auth/github' }),
        });
        res.end();
        return true;
      },
    },
    {
      method: 'GET',
      path: '/auth/github/callback',
      handle: async ({ req, res, url }) => {
        const { clientId, clientSecret } = options.github;
        if (clientId === null || clientSecret === null)
          throw new ApiError(404, 'github_sign_in_disabled', 'sign-in with GitHub is not configured');
        const state = url.searchParams.get('state') ?? '';
        const code = url.searchParams.get('code') ?? '';
        const next = sessions.finishLogin(req, state);
        const clearState = cookieHeader(STATE_COOKIE, '', { secure, maxAgeS: 0, path: '/auth/github' });
        if (next === null)
          throw new ApiError(
            400,
            'bad_state',
            'the sign-in could not be matched to this browser; start again',
          );
        if (code === '') throw new ApiError(400, 'no_code', 'GitHub did not authorize the sign-in');
        const token = await exchangeCode({
          webUrl: options.github.webUrl,
          clientId,
          clientSecret,
          code,
          redirectUri: `${ctx.origin(req)}/auth/github/callback`,
        });
        const user = await fetchUser(options.github.apiUrl, token);
        const cookie = sessions.create({ kind: 'user', login: user.login, id: user.id, token });
        ctx.log.info({ login: user.login }, 'signed in with GitHub');
        res.writeHead(302, {
          ...SECURITY_HEADERS,
          location: next,
          'cache-control': 'no-store',
          'set-cookie': [
            cookieHeader(SESSION_COOKIE, cookie, { secure, maxAgeS: SESSION_MAX_AGE_S }),
            clearState,
          ],
        });
        res.end();
        return true;
      },
    },
    {
      method: 'GET',
      path: '/api/me',
      handle: ({ req, res }) => {
        const p = sessions.authenticate(req);
        // The sign-in screen needs to know which ways of signing in exist, before anyone is signed in.
        if (p === null)
          return json(res, 401, {
            error: { code: 'unauthorized', message: 'not signed in' },
            githubSignIn: options.github.clientId !== null,
          });
        return json(res, 200, {
          login: p.kind === 'user' ? p.login : null,
          admin: p.kind === 'admin',
          githubSignIn: options.github.clientId !== null,
        });
      },
    },
  ];
}
