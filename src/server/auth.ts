import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

/** Who is asking: the admin (the static token), a person signed in with GitHub, or nobody. */
export type Principal =
  | { readonly kind: 'admin'; readonly sessionId: string | null }
  | {
      readonly kind: 'user';
      readonly sessionId: string;
      readonly login: string;
      readonly id: number;
      /** The user's GitHub token; used by the server only, never sent to a browser. */
      readonly token: string;
    };

export type RepoAccess = 'none' | 'read' | 'write';

export const SESSION_COOKIE = 'ia_session';
export const STATE_COOKIE = 'ia_oauth_state';

interface Session {
  readonly id: string;
  readonly principal: Principal;
  readonly expiresAt: number;
  /** Repo access answers for this session: `owner/name` → access and when it was asked. */
  readonly access: Map<string, { readonly access: RepoAccess; readonly at: number }>;
}

interface PendingLogin {
  readonly next: string;
  readonly expiresAt: number;
}

const SESSION_TTL_MS = 8 * 3600 * 1000;
const STATE_TTL_MS = 10 * 60 * 1000;
const MAX_SESSIONS = 10_000;
const MAX_SESSIONS_PER_LOGIN = 20;
/** Sign-ins started and not finished (each holds only its `next` path, at most MAX_NEXT_LENGTH). */
const MAX_PENDING_LOGINS = 5_000;
const MAX_NEXT_LENGTH = 2_000;

/**
 * Sessions live in this process (so a GitHub user token never leaves it); the cookie holds a random
 * id and an HMAC of it under the session secret, so a forged or altered cookie is refused before any
 * lookup. Sessions end after eight hours (a GitHub App user token's lifetime) or on restart.
 */
export class Sessions {
  private readonly sessions = new Map<string, Session>();
  private readonly pending = new Map<string, PendingLogin>();
  private readonly secret: Buffer;
  private readonly adminDigest: Buffer | null;

  constructor(options: { readonly secret: string | null; readonly adminToken: string | null }) {
    this.secret = options.secret === null ? randomBytes(32) : Buffer.from(options.secret, 'utf8');
    this.adminDigest = options.adminToken === null ? null : digest(options.adminToken);
  }

  /** Constant-time check of a presented admin token. */
  isAdminToken(token: string): boolean {
    return this.adminDigest !== null && timingSafeEqual(digest(token), this.adminDigest);
  }

  /** The principal of a request: a valid Bearer admin token, or a valid session cookie. */
  authenticate(req: IncomingMessage, now = Date.now()): Principal | null {
    const header = req.headers.authorization;
    if (header !== undefined) {
      const token = /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1];
      // A wrong token is a failure even with a valid cookie: the caller meant the token.
      return token !== undefined && this.isAdminToken(token) ? { kind: 'admin', sessionId: null } : null;
    }
    const cookie = readCookie(req, SESSION_COOKIE);
    if (cookie === null) return null;
    const id = this.verify(cookie);
    if (id === null) return null;
    const session = this.sessions.get(id);
    if (session === undefined) return null;
    if (session.expiresAt <= now) {
      this.sessions.delete(id);
      return null;
    }
    return session.principal;
  }

  /** Creates a session; returns the cookie value. */
  create(
    principal:
      | { readonly kind: 'admin' }
      | { readonly kind: 'user'; readonly login: string; readonly id: number; readonly token: string },
    now = Date.now(),
  ): string {
    if (this.sessions.size >= MAX_SESSIONS) this.sweep(now);
    if (principal.kind === 'user') this.limitPerLogin(principal.id);
    const id = randomBytes(24).toString('base64url');
    const full: Principal =
      principal.kind === 'admin' ? { kind: 'admin', sessionId: id } : { ...principal, sessionId: id };
    this.sessions.set(id, { id, principal: full, expiresAt: now + SESSION_TTL_MS, access: new Map() });
    return `${id}.${this.sign(id)}`;
  }

  destroy(req: IncomingMessage): void {
    const cookie = readCookie(req, SESSION_COOKIE);
    const id = cookie === null ? null : this.verify(cookie);
    if (id !== null) this.sessions.delete(id);
  }

  /** Whether a principal's session still stands (streams re-check this, so sign-out ends them too). */
  isLive(p: Principal, now = Date.now()): boolean {
    if (p.sessionId === null) return true;
    const session = this.sessions.get(p.sessionId);
    return session !== undefined && session.expiresAt > now;
  }

  /** Ends a session (e.g. its GitHub token was revoked). */
  end(sessionId: string): void {
    this.sessions.delete(sessionId);
  }

  cachedAccess(sessionId: string, repo: string, maxAgeMs: number, now = Date.now()): RepoAccess | null {
    const hit = this.sessions.get(sessionId)?.access.get(repo.toLowerCase());
    return hit !== undefined && now - hit.at < maxAgeMs ? hit.access : null;
  }

  rememberAccess(sessionId: string, repo: string, access: RepoAccess, now = Date.now()): void {
    const session = this.sessions.get(sessionId);
    if (session === undefined) return;
    if (session.access.size > 1000) session.access.clear();
    session.access.set(repo.toLowerCase(), { access, at: now });
  }

  /** Starts a GitHub sign-in: a random state, bound to the browser by a cookie holding it. */
  beginLogin(next: string, now = Date.now()): { state: string; cookie: string } {
    // Anyone can start a sign-in, so the pending ones are bounded: expired ones go first, then the
    // oldest (a Map iterates in insertion order).
    if (this.pending.size >= MAX_PENDING_LOGINS) {
      for (const [k, v] of this.pending) if (v.expiresAt <= now) this.pending.delete(k);
      for (const k of this.pending.keys()) {
        if (this.pending.size < MAX_PENDING_LOGINS) break;
        this.pending.delete(k);
      }
    }
    const state = randomBytes(24).toString('base64url');
    this.pending.set(state, { next, expiresAt: now + STATE_TTL_MS });
    return { state, cookie: `${state}.${this.sign(state)}` };
  }

  /**
   * Ends a GitHub sign-in: the state in the query must be the one in this browser's cookie and one
   * this server issued within ten minutes; each state works once. Returns where to go next.
   */
  finishLogin(req: IncomingMessage, state: string, now = Date.now()): string | null {
    const cookie = readCookie(req, STATE_COOKIE);
    const bound = cookie === null ? null : this.verify(cookie);
    if (bound === null || !equalStrings(bound, state)) return null;
    const pending = this.pending.get(state);
    this.pending.delete(state);
    if (pending === undefined || pending.expiresAt <= now) return null;
    return pending.next;
  }

  private sign(value: string): string {
    return createHmac('sha256', this.secret).update(value).digest('base64url');
  }

  /** The value of a signed cookie, or null when its signature does not match. */
  private verify(cookie: string): string | null {
    const dot = cookie.lastIndexOf('.');
    if (dot <= 0) return null;
    const value = cookie.slice(0, dot);
    return equalStrings(cookie.slice(dot + 1), this.sign(value)) ? value : null;
  }

  /**
   * One GitHub account holds at most MAX_SESSIONS_PER_LOGIN sessions (its oldest goes), so signing in
   * over and over cannot fill the table and push everyone else, the admin included, out.
   */
  private limitPerLogin(userId: number): void {
    const mine = [...this.sessions.values()].filter(
      (x) => x.principal.kind === 'user' && x.principal.id === userId,
    );
    for (const old of mine.slice(0, Math.max(0, mine.length - MAX_SESSIONS_PER_LOGIN + 1)))
      this.sessions.delete(old.id);
  }

  private sweep(now: number): void {
    for (const [id, s] of this.sessions) if (s.expiresAt <= now) this.sessions.delete(id);
    // Still full: the oldest go first (Map keeps insertion order).
    for (const id of this.sessions.keys()) {
      if (this.sessions.size < MAX_SESSIONS) break;
      this.sessions.delete(id);
    }
  }
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

function equalStrings(a: string, b: string): boolean {
  return timingSafeEqual(digest(a), digest(b));
}

export function readCookie(req: IncomingMessage, name: string): string | null {
  const header = req.headers.cookie;
  if (header === undefined) return null;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq === -1) continue;
    if (part.slice(0, eq).trim() === name) {
      try {
        return decodeURIComponent(part.slice(eq + 1).trim());
      } catch {
        return null;
      }
    }
  }
  return null;
}

export function cookieHeader(
  name: string,
  value: string,
  options: { readonly secure: boolean; readonly maxAgeS: number; readonly path?: string },
): string {
  return [
    `${name}=${encodeURIComponent(value)}`,
    `Path=${options.path ?? '/'}`,
    'HttpOnly',
    'SameSite=Lax',
    ...(options.secure ? ['Secure'] : []),
    `Max-Age=${options.maxAgeS}`,
  ].join('; ');
}

/**
 * Where to send someone after sign-in: only a path on this server (`/runs/x?y`), never another
 * origin (`//evil`, `/\evil`, `https://evil`, control characters); anything else becomes `/`.
 */
export function safeNext(next: string | null | undefined): string {
  if (next === null || next === undefined || next === '') return '/';
  if (!next.startsWith('/') || next.startsWith('//') || next.startsWith('/\\')) return '/';
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f\\]/.test(next)) return '/';
  let url: URL;
  try {
    url = new URL(next, 'http://same.invalid');
  } catch {
    return '/';
  }
  if (url.origin !== 'http://same.invalid') return '/';
  // Normalising can make a second leading slash (`/.//evil` → `//evil`), which a browser reads as
  // another host: the result is checked again, not only the input.
  const out = `${url.pathname}${url.search}${url.hash}`;
  if (out.startsWith('//') || out.startsWith('/\\') || out.length > MAX_NEXT_LENGTH) return '/';
  return out;
}

/** Permissions flags of GET /repos/{owner}/{repo} → what the user may do with the App's runs there. */
export function accessFromPermissions(permissions: unknown): RepoAccess {
  // No permissions object (an answer GitHub gives only without a user token) grants nothing.
  if (typeof permissions !== 'object' || permissions === null) return 'none';
  const p = permissions as Record<string, unknown>;
  if (p.push === true || p.maintain === true || p.admin === true) return 'write';
  return 'read';
}
