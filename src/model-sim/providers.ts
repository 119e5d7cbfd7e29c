import type { IncomingMessage } from 'node:http';
import { crc32 } from 'node:zlib';
import { isRecord } from './validate.js';

/**
 * The three doors to the same Messages API: Anthropic's own (`POST /v1/messages`, the model and
 * `stream` in the body, the version in a header), Amazon Bedrock's (the model in the path, the
 * version in the body, SigV4-signed, streams in AWS event-stream framing) and Google Vertex AI's
 * (the model in the path, the version in the body, an OAuth bearer token, streams as server-sent
 * events).
 */
export type SimProvider = 'anthropic' | 'bedrock' | 'vertex';

export interface ProviderRoute {
  readonly provider: SimProvider;
  /** The model named by the path (Bedrock, Vertex); null where the body names it. */
  readonly model: string | null;
  /** Whether the path asks for a stream (Bedrock, Vertex); null where the body says. */
  readonly stream: boolean | null;
  /** Vertex only: the project and location in the path. */
  readonly project?: string;
  readonly location?: string;
}

/**
 * The body's `anthropic_version`: each platform's own first version, or (what the 1.x SDKs send,
 * moving the `anthropic-version` header into the body) a dated Messages API version.
 */
export const BEDROCK_VERSION = 'bedrock-2023-05-31';
export const VERTEX_VERSION = 'vertex-2023-10-16';
const DATED_VERSION = /^\d{4}-\d{2}-\d{2}$/;

const BEDROCK_PATH = /^\/model\/([^/]+)\/(invoke|invoke-with-response-stream)$/;
const VERTEX_PATH =
  /^\/v1\/projects\/([^/]+)\/locations\/([^/]+)\/publishers\/anthropic\/models\/([^/:]+):(rawPredict|streamRawPredict)$/;
/** `Authorization: AWS4-HMAC-SHA256 Credential=<key>/<date>/<region>/bedrock/aws4_request, SignedHeaders=…, Signature=<hex>`. */
const SIGV4 =
  /^AWS4-HMAC-SHA256 Credential=([A-Z0-9]+)\/(\d{8})\/([a-z0-9-]+)\/bedrock\/aws4_request, ?SignedHeaders=([a-z0-9;-]+), ?Signature=[0-9a-f]{64}$/;

/** Which API a POST path belongs to, or null for a path none of them serves. */
export function routeOf(path: string): ProviderRoute | null {
  if (path === '/v1/messages') return { provider: 'anthropic', model: null, stream: null };
  const bedrock = BEDROCK_PATH.exec(path);
  if (bedrock !== null) {
    return {
      provider: 'bedrock',
      model: decodeURIComponent(bedrock[1] ?? ''),
      stream: bedrock[2] === 'invoke-with-response-stream',
    };
  }
  const vertex = VERTEX_PATH.exec(path);
  if (vertex !== null) {
    return {
      provider: 'vertex',
      project: decodeURIComponent(vertex[1] ?? ''),
      location: decodeURIComponent(vertex[2] ?? ''),
      model: decodeURIComponent(vertex[3] ?? ''),
      stream: vertex[4] === 'streamRawPredict',
    };
  }
  return null;
}

export interface ProviderAuth {
  /** Bedrock: the access key id a SigV4 signature must name (default: any well-formed one). */
  readonly awsAccessKeyId?: string;
  /** Vertex: the OAuth access token the bearer header must carry (default: any). */
  readonly googleAccessToken?: string;
}

export type Refusal = readonly [status: 400 | 401 | 403, message: string];

/**
 * Bedrock's and Vertex's checks of what only they ask for: their auth header, their version in the
 * body and no `model` (nor, on Bedrock, `stream`) in it. The signature is checked for its shape and
 * key id, not recomputed: the SDK's signer is AWS's own.
 */
export function checkProviderRequest(
  route: ProviderRoute,
  req: IncomingMessage,
  body: unknown,
  auth: ProviderAuth,
): Refusal | null {
  if (route.provider === 'anthropic') return null;
  const authorization = req.headers.authorization ?? '';
  if (route.provider === 'bedrock') {
    const signed = SIGV4.exec(authorization);
    if (signed === null) return [403, 'Missing Authentication Token'];
    if (req.headers['x-amz-date'] === undefined) return [403, 'Missing X-Amz-Date header'];
    if (auth.awsAccessKeyId !== undefined && signed[1] !== auth.awsAccessKeyId) {
      return [403, 'The security token included in the request is invalid.'];
    }
  } else {
    const bearer = /^Bearer (\S+)$/.exec(authorization);
    if (bearer === null) return [401, 'Request is missing required authentication credential.'];
    if (auth.googleAccessToken !== undefined && bearer[1] !== auth.googleAccessToken) {
      return [401, 'Request had invalid authentication credentials.'];
    }
  }
  if (!isRecord(body)) return [400, 'Malformed input request: expected a JSON object'];
  const legacy = route.provider === 'bedrock' ? BEDROCK_VERSION : VERTEX_VERSION;
  const version = body['anthropic_version'];
  if (version !== legacy && (typeof version !== 'string' || !DATED_VERSION.test(version))) {
    return [400, `anthropic_version: must be "${legacy}" or a Messages API version such as 2026-10-21`];
  }
  if ('model' in body) return [400, 'Malformed input request: extraneous key [model] is not permitted'];
  if (route.provider === 'bedrock' && 'stream' in body) {
    return [400, 'Malformed input request: extraneous key [stream] is not permitted'];
  }
  return null;
}

/** The body as the Messages API would have had it: the path's model and stream put back. */
export function toMessagesBody(route: ProviderRoute, body: Record<string, unknown>): Record<string, unknown> {
  if (route.provider === 'anthropic') return body;
  const rest = { ...body };
  delete rest['anthropic_version'];
  return { ...rest, model: route.model, stream: route.stream };
}

/** Bedrock's `x-amzn-errortype` for an HTTP status (its error body is `{"message": …}`). */
export function bedrockErrorType(status: number): string {
  if (status === 403) return 'AccessDeniedException';
  if (status === 429) return 'ThrottlingException';
  if (status === 503 || status === 529) return 'ServiceUnavailableException';
  if (status >= 500) return 'InternalServerException';
  return 'ValidationException';
}

/**
 * One AWS event-stream message (the framing Bedrock's InvokeModelWithResponseStream uses): total
 * and header lengths, a CRC of that prelude, string headers, the payload, a CRC of all before it.
 * A Messages stream event travels as a `chunk` event whose payload is `{"bytes": base64(json)}`.
 */
export function eventStreamChunk(data: unknown): Buffer {
  const payload = Buffer.from(
    JSON.stringify({ bytes: Buffer.from(JSON.stringify(data)).toString('base64') }),
  );
  const headers = Buffer.concat([
    stringHeader(':event-type', 'chunk'),
    stringHeader(':content-type', 'application/json'),
    stringHeader(':message-type', 'event'),
  ]);
  const total = 12 + headers.length + payload.length + 4;
  const prelude = Buffer.alloc(8);
  prelude.writeUInt32BE(total, 0);
  prelude.writeUInt32BE(headers.length, 4);
  const preludeCrc = Buffer.alloc(4);
  preludeCrc.writeUInt32BE(crc32(prelude), 0);
  const body = Buffer.concat([prelude, preludeCrc, headers, payload]);
  const messageCrc = Buffer.alloc(4);
  messageCrc.writeUInt32BE(crc32(body), 0);
  return Buffer.concat([body, messageCrc]);
}

/** A header of type 7 (string): name length, name, type, value length (16 bits), value. */
function stringHeader(name: string, value: string): Buffer {
  const n = Buffer.from(name);
  const v = Buffer.from(value);
  const out = Buffer.alloc(1 + n.length + 1 + 2 + v.length);
  out.writeUInt8(n.length, 0);
  n.copy(out, 1);
  out.writeUInt8(7, 1 + n.length);
  out.writeUInt16BE(v.length, 2 + n.length);
  v.copy(out, 4 + n.length);
  return out;
}

/**
 * Google's Security Token Service exchange (`POST /v1/token`, form-encoded), as a workload-identity
 * credential file's `token_url` names it: any subject token buys the configured access token. It
 * lets a test reach Vertex through google-auth-library's own credential chain, not a stub.
 */
export function stsTokenResponse(accessToken: string): Record<string, unknown> {
  return {
    access_token: accessToken,
    issued_token_type: 'urn:ietf:params:oauth:token-type:access_token',
    token_type: 'Bearer',
    expires_in: 3600,
  };
}
