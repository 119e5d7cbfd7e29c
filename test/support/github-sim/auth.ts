/**
 * GitHub App credentials: the app's RSA key, RS256 JWT verification with GitHub's rules and error
 * messages (which @octokit/auth-app matches to correct clock skew), and installation access tokens.
 */
import {
  createPrivateKey,
  createPublicKey,
  generateKeyPair,
  randomBytes,
  verify,
  type KeyObject,
} from 'node:crypto';
import { promisify } from 'node:util';

export interface InstallationToken {
  readonly token: string;
  readonly installationId: number;
  /** Epoch ms. */
  readonly expiresAt: number;
  /** The repositories the token is limited to; null for all of the installation's. */
  readonly repositoryIds: ReadonlySet<number> | null;
  readonly permissions: Readonly<Record<string, string>>;
  /** The login the token acts as: the App's bot, or `github-actions[bot]` for a workflow's GITHUB_TOKEN. */
  readonly actor?: string;
}

export type TokenLookup =
  { readonly kind: 'valid'; readonly token: InstallationToken } | { readonly kind: 'expired' | 'unknown' };

export type JwtCheck = { readonly ok: true } | { readonly ok: false; readonly message: string };

/** GitHub allows this much clock skew for `iat`, and at most ten minutes of JWT lifetime. */
const SKEW_SECONDS = 60;
const MAX_LIFETIME_SECONDS = 600;

const NOT_DECODED = 'A JSON web token could not be decoded';
const BAD_EXP =
  "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires";
const BAD_IAT =
  "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued";
const EXP_TOO_FAR = "'Expiration time' claim ('exp') is too far in the future";

const generateRsa = promisify(generateKeyPair);

/** A 2048-bit key in PKCS#1 PEM (`BEGIN RSA PRIVATE KEY`), the format GitHub hands out for apps. */
export async function generateAppKey(): Promise<{ privateKeyPem: string; publicKey: KeyObject }> {
  const { privateKey } = await generateRsa('rsa', { modulusLength: 2048 });
  const privateKeyPem = privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
  return { privateKeyPem, publicKey: createPublicKey(createPrivateKey(privateKeyPem)) };
}

export function checkAppJwt(jwt: string, publicKey: KeyObject, appId: number, nowMs: number): JwtCheck {
  const parts = jwt.split('.');
  if (parts.length !== 3) return { ok: false, message: NOT_DECODED };
  const [headerPart = '', payloadPart = '', signaturePart = ''] = parts;
  const header = parseSegment(headerPart);
  const payload = parseSegment(payloadPart);
  if (header === null || payload === null || header.alg !== 'RS256')
    return { ok: false, message: NOT_DECODED };
  const signed = verify(
    'sha256',
    Buffer.from(`${headerPart}.${payloadPart}`),
    publicKey,
    Buffer.from(signaturePart, 'base64url'),
  );
  if (!signed || String(payload.iss) !== String(appId)) return { ok: false, message: NOT_DECODED };
  const now = Math.floor(nowMs / 1000);
  const { exp, iat } = payload;
  if (typeof exp !== 'number' || exp <= now) return { ok: false, message: BAD_EXP };
  if (typeof iat !== 'number' || !Number.isInteger(iat) || iat > now + SKEW_SECONDS)
    return { ok: false, message: BAD_IAT };
  if (exp - iat > MAX_LIFETIME_SECONDS || exp > now + MAX_LIFETIME_SECONDS + SKEW_SECONDS)
    return { ok: false, message: EXP_TOO_FAR };
  return { ok: true };
}

/** Looks like a JWT: three base64url segments. Installation tokens (`ghs_…`) never contain dots. */
export function isJwtShaped(credential: string): boolean {
  return /^[\w-]+\.[\w-]+\.[\w-]*$/.test(credential);
}

export class TokenStore {
  private readonly tokens = new Map<string, InstallationToken>();

  constructor(private readonly ttlSeconds: number) {}

  issue(
    installationId: number,
    repositoryIds: ReadonlySet<number> | null,
    permissions: Readonly<Record<string, string>>,
    nowMs: number,
    actor?: string,
  ): InstallationToken {
    const token: InstallationToken = {
      token: `ghs_${randomAlphanumeric(36)}`,
      installationId,
      // GitHub reports expiry to the second; a token is valid strictly before it.
      expiresAt: Math.floor(nowMs / 1000) * 1000 + this.ttlSeconds * 1000,
      repositoryIds,
      permissions,
      ...(actor === undefined ? {} : { actor }),
    };
    this.tokens.set(token.token, token);
    return token;
  }

  lookup(credential: string, nowMs: number): TokenLookup {
    const token = this.tokens.get(credential);
    if (token === undefined) return { kind: 'unknown' };
    return nowMs >= token.expiresAt ? { kind: 'expired' } : { kind: 'valid', token };
  }
}

function parseSegment(segment: string): Record<string, unknown> | null {
  try {
    const value = JSON.parse(Buffer.from(segment, 'base64url').toString('utf8')) as unknown;
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : null;
  } catch {
    return null;
  }
}

const ALPHANUMERIC = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

export function randomAlphanumeric(length: number): string {
  // 248 is the largest multiple of 62 below 256: rejecting bytes above it keeps the draw uniform.
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += ALPHANUMERIC[byte % 62] ?? '';
    }
  }
  return out;
}
