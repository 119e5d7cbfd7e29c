import { randomBytes, randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { InstallationToken } from './auth.js';
import type { RepoRecord } from './state.js';

/** `GET /user-attachments/assets/<uuid>`: where an issue's uploaded image is linked from. */
export const ATTACHMENT_PATH = /^\/user-attachments\/assets\/([0-9a-f-]{36})$/;
/** The signed URL an attachment of a private repository redirects to (private-user-images.githubusercontent.com). */
export const PRIVATE_IMAGE_PATH = /^\/_private-user-images\/(\d+)\/(\d+)-([0-9a-f-]{36})\.[a-z]+$/;
/** How long the redirect's signed URL is good for (GitHub's `jwt` lasts five minutes). */
const SIGNED_TTL_MS = 5 * 60_000;

interface Attachment {
  readonly id: number;
  readonly uuid: string;
  readonly repo: RepoRecord;
  readonly uploaderId: number;
  readonly bytes: Buffer;
  readonly contentType: string;
  readonly ext: string;
}

/**
 * Files uploaded into issues and comments (GitHub's user attachments). An attachment belongs to the
 * repository it was uploaded to: of a private repository it is served only to a credential that can
 * read that repository, else 404 (GitHub answers 404, never 401 or 403, so nothing says it exists).
 * A readable one answers 302 to a short-lived signed URL that serves the bytes without credentials.
 * The content type is the upload's own: what it says is not checked against the bytes.
 */
export class AttachmentService {
  private readonly byUuid = new Map<string, Attachment>();
  /** Signed URLs handed out, by their `jwt` value. */
  private readonly signed = new Map<string, { readonly uuid: string; readonly expiresAt: number }>();
  private nextId = 401_000_001;

  constructor(private readonly url: string) {}

  add(repo: RepoRecord, uploaderId: number, bytes: Uint8Array, contentType: string): string {
    const uuid = randomUUID();
    const ext = /^image\/(png|jpeg|gif|webp)$/.exec(contentType)?.[1] ?? 'bin';
    this.byUuid.set(uuid, {
      id: this.nextId++,
      uuid,
      repo,
      uploaderId,
      bytes: Buffer.from(bytes),
      contentType,
      ext: ext === 'jpeg' ? 'jpg' : ext,
    });
    return `${this.url}/user-attachments/assets/${uuid}`;
  }

  /** The asset's redirect, for a caller that may read it; `token` is the request's installation token, if any. */
  serveAsset(res: ServerResponse, method: string, uuid: string, token: InstallationToken | null): void {
    const a = this.byUuid.get(uuid);
    const readable =
      a !== undefined &&
      (!a.repo.private || (token !== null && (token.repositoryIds?.has(a.repo.id) ?? true)));
    if (a === undefined || !readable || (method !== 'GET' && method !== 'HEAD')) {
      notFound(res);
      return;
    }
    const jwt = randomBytes(24).toString('base64url');
    this.signed.set(jwt, { uuid, expiresAt: Date.now() + SIGNED_TTL_MS });
    const location = `${this.url}/_private-user-images/${a.uploaderId}/${a.id}-${uuid}.${a.ext}?jwt=${jwt}`;
    res.writeHead(302, { location, 'content-length': 0 });
    res.end();
  }

  /** The bytes behind a signed URL: no credentials needed, 404 once it expired. */
  serveSigned(res: ServerResponse, method: string, uuid: string, jwt: string | undefined): void {
    const grant = jwt === undefined ? undefined : this.signed.get(jwt);
    const a = this.byUuid.get(uuid);
    if (grant === undefined || grant.uuid !== uuid || Date.now() >= grant.expiresAt || a === undefined) {
      notFound(res);
      return;
    }
    res.writeHead(200, { 'content-type': a.contentType, 'content-length': a.bytes.length });
    res.end(method === 'HEAD' ? undefined : a.bytes);
  }
}

function notFound(res: ServerResponse): void {
  const body = 'Not Found';
  res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8', 'content-length': body.length });
  res.end(body);
}
