/**
 * The GitHub App's user authorization (OAuth web flow) as github.com serves it: the authorize page
 * that sends the browser back to the app with a code, the code → user token exchange, and the user
 * tokens (`ghu_…`) the REST API then accepts as that user. There is no login form: a test decides
 * who "approves" with `authorizeAs(login)`, or per request with a `login` query parameter.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomAlphanumeric } from './auth.js';
import type { UserRecord, World } from './state.js';

export const OAUTH_PATH = /^\/login\/oauth\/(authorize|access_token)$/;

const CODE_TTL_MS = 10 * 60 * 1000;
const TOKEN_TTL_MS = 8 * 3600 * 1000;

interface Grant {
  readonly login: string;
  readonly redirectUri: string;
  readonly expiresAt: number;
}

export interface OAuthRecord {
  /** Every authorize request, as the browser sent it. */
  readonly authorizations: {
    readonly clientId: string;
    readonly redirectUri: string;
    readonly login: string | null;
  }[];
  /** Every code exchange and whether it succeeded. */
  readonly exchanges: { readonly code: string; readonly ok: boolean; readonly error: string | null }[];
}

export class OAuthService implements OAuthRecord {
  readonly authorizations: OAuthRecord['authorizations'] = [];
  readonly exchanges: OAuthRecord['exchanges'] = [];
  private signedIn: string | null = null;
  private callbackUrl: string | null = null;
  private readonly codes = new Map<string, Grant>();
  private readonly tokens = new Map<string, { readonly login: string; readonly expiresAt: number }>();

  constructor(
    private readonly world: World,
    private readonly client: { readonly clientId: string; readonly clientSecret: string },
  ) {}

  /** The user whose browser session approves authorize requests from now on (null: nobody is signed in). */
  authorizeAs(login: string | null): void {
    if (login !== null) this.world.ensureUser(login);
    this.signedIn = login;
  }

  /** The App's registered callback URL: redirect_uri must start with it (as GitHub checks). */
  setCallbackUrl(url: string | null): void {
    this.callbackUrl = url;
  }

  /** A user token for `login` without the browser dance. */
  issueToken(login: string, now = Date.now()): string {
    this.world.ensureUser(login);
    const token = `ghu_${randomAlphanumeric(36)}`;
    this.tokens.set(token, { login, expiresAt: now + TOKEN_TTL_MS });
    return token;
  }

  revoke(token: string): void {
    this.tokens.delete(token);
  }

  /** The user a `ghu_` token acts as, or null (unknown or expired). */
  userFor(token: string, now = Date.now()): UserRecord | null {
    const t = this.tokens.get(token);
    if (t === undefined || t.expiresAt <= now) return null;
    return this.world.user(t.login) ?? null;
  }

  async serve(req: IncomingMessage, res: ServerResponse, target: URL): Promise<void> {
    const action = OAUTH_PATH.exec(target.pathname)?.[1];
    if (action === 'authorize' && (req.method === 'GET' || req.method === 'HEAD')) {
      req.resume();
      this.authorize(res, target.searchParams);
      return;
    }
    if (action === 'access_token' && req.method === 'POST') {
      await this.accessToken(req, res);
      return;
    }
    req.resume();
    html(res, 404, 'Not Found');
  }

  private authorize(res: ServerResponse, q: URLSearchParams): void {
    const clientId = q.get('client_id') ?? '';
    const redirectUri = q.get('redirect_uri') ?? this.callbackUrl ?? '';
    const state = q.get('state');
    const login = q.get('login') ?? this.signedIn;
    this.authorizations.push({ clientId, redirectUri, login });
    if (clientId !== this.client.clientId) {
      html(res, 404, 'Not Found');
      return;
    }
    if (redirectUri === '' || (this.callbackUrl !== null && !redirectUri.startsWith(this.callbackUrl))) {
      html(res, 400, 'The redirect_uri MUST match the registered callback URL for this application.');
      return;
    }
    if (login === null) {
      html(res, 200, 'Sign in to GitHub to continue to the application.');
      return;
    }
    this.world.ensureUser(login);
    const code = randomBytes(10).toString('hex');
    this.codes.set(code, { login, redirectUri, expiresAt: Date.now() + CODE_TTL_MS });
    const back = new URL(redirectUri);
    back.searchParams.set('code', code);
    if (state !== null) back.searchParams.set('state', state);
    res.writeHead(302, { location: back.toString(), 'content-type': 'text/html; charset=utf-8' });
    res.end(`<html><body>You are being <a href="${back.toString()}">redirected</a>.</body></html>`);
  }

  private async accessToken(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = await readBody(req);
    const type = req.headers['content-type'] ?? '';
    const params = new Map<string, string>();
    if (type.includes('application/json')) {
      try {
        const body = JSON.parse(raw) as unknown;
        if (typeof body === 'object' && body !== null)
          for (const [k, v] of Object.entries(body)) if (typeof v === 'string') params.set(k, v);
      } catch {
        // treated as missing fields
      }
    } else {
      for (const [k, v] of new URLSearchParams(raw)) params.set(k, v);
    }
    const wantsJson = (req.headers.accept ?? '').includes('application/json');
    const reply = (body: Record<string, string>): void => {
      const text = wantsJson ? JSON.stringify(body) : new URLSearchParams(body).toString();
      res.writeHead(200, {
        'content-type': wantsJson
          ? 'application/json; charset=utf-8'
          : 'application/x-www-form-urlencoded; charset=utf-8',
      });
      res.end(text);
    };
    const error = (code: string, description: string): void => {
      this.exchanges.push({ code: params.get('code') ?? '', ok: false, error: code });
      reply({
        error: code,
        error_description: description,
        error_uri: `https://docs.github.com/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors/#${code.replace(/_/g, '-')}`,
      });
    };
    if (
      params.get('client_id') !== this.client.clientId ||
      params.get('client_secret') !== this.client.clientSecret
    ) {
      error('incorrect_client_credentials', 'The client_id and/or client_secret passed are incorrect.');
      return;
    }
    const code = params.get('code') ?? '';
    const grant = this.codes.get(code);
    // A code works once, within ten minutes.
    this.codes.delete(code);
    if (grant === undefined || grant.expiresAt <= Date.now()) {
      error('bad_verification_code', 'The code passed is incorrect or expired.');
      return;
    }
    const redirectUri = params.get('redirect_uri');
    if (redirectUri !== undefined && redirectUri !== grant.redirectUri) {
      error(
        'redirect_uri_mismatch',
        'The redirect_uri MUST match the registered callback URL for this application.',
      );
      return;
    }
    const token = this.issueToken(grant.login);
    this.exchanges.push({ code, ok: true, error: null });
    reply({ access_token: token, token_type: 'bearer', scope: '' });
  }
}

function html(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'content-type': 'text/html; charset=utf-8' });
  res.end(`<!doctype html><html><body><p>${text}</p></body></html>`);
}

async function readBody(req: IncomingMessage): Promise<string> {
  const parts: Buffer[] = [];
  for await (const part of req) parts.push(part as Buffer);
  return Buffer.concat(parts).toString('utf8');
}
