/**
 * Images attached to an issue (GitHub's user-attachment URLs), fetched by the worker with the
 * installation's token, never by the sandbox. Only URLs under the configured web origin's
 * `/user-attachments/assets/` are
 * fetched (no arbitrary hosts: the issue's author chooses the text), at most MAX_IMAGES of them,
 * each at most MAX_IMAGE_BYTES, and only bytes whose magic says PNG, JPEG, GIF or WebP.
 */

export const MAX_IMAGES = 5;
/** 3.75 MiB raw is 5 MiB as base64, the API's limit on one image. */
export const MAX_IMAGE_BYTES = (15 * 1024 * 1024) / 4;

export type ImageMediaType = 'image/png' | 'image/jpeg' | 'image/gif' | 'image/webp';

export interface IssueImage {
  readonly url: string;
  readonly mediaType: ImageMediaType;
  /** Base64 of the bytes, as an image block's source carries them. */
  readonly data: string;
}

export interface UnavailableImage {
  readonly url: string;
  readonly reason: string;
}

/** Attachment URLs in markdown images, HTML img tags or bare links, in order, without repeats. */
export function attachmentUrls(text: string, webOrigin = 'https://github.com'): string[] {
  const origin = webOrigin.replace(/\/+$/, '').replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const pattern = new RegExp(`${origin}/user-attachments/assets/[0-9a-fA-F-]{8,64}`, 'g');
  return [...new Set(text.match(pattern) ?? [])];
}

/** The image type the bytes' magic numbers say, or null: the content-type header is not trusted. */
export function sniffImageType(bytes: Uint8Array): ImageMediaType | null {
  const starts = (...sig: number[]): boolean => sig.every((b, i) => bytes[i] === b);
  if (starts(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a)) return 'image/png';
  if (starts(0xff, 0xd8, 0xff)) return 'image/jpeg';
  if (starts(0x47, 0x49, 0x46, 0x38) && (bytes[4] === 0x37 || bytes[4] === 0x39) && bytes[5] === 0x61)
    return 'image/gif';
  const ascii = (from: number, to: number): string => String.fromCharCode(...bytes.subarray(from, to));
  if (bytes.length >= 12 && ascii(0, 4) === 'RIFF' && ascii(8, 12) === 'WEBP') return 'image/webp';
  return null;
}

export interface FetchImagesOptions {
  readonly token: string;
  readonly fetch?: typeof fetch;
  readonly maxImages?: number;
  readonly maxBytes?: number;
  readonly signal?: AbortSignal;
}

/** Fetches each URL; one that fails is named with its reason, never thrown. */
export async function fetchIssueImages(
  urls: readonly string[],
  options: FetchImagesOptions,
): Promise<{ images: IssueImage[]; unavailable: UnavailableImage[] }> {
  const images: IssueImage[] = [];
  const unavailable: UnavailableImage[] = [];
  const max = options.maxImages ?? MAX_IMAGES;
  for (const [i, url] of urls.entries()) {
    if (i >= max) {
      unavailable.push({ url, reason: `more than ${max} images: not fetched` });
      continue;
    }
    try {
      const got = await fetchOne(url, options);
      if (typeof got === 'string') unavailable.push({ url, reason: got });
      else images.push(got);
    } catch (error) {
      unavailable.push({ url, reason: error instanceof Error ? error.message : String(error) });
    }
  }
  return { images, unavailable };
}

/** Redirects followed at most: GitHub answers one, to the file's short-lived signed URL. */
const MAX_REDIRECTS = 3;

async function fetchOne(url: string, options: FetchImagesOptions): Promise<IssueImage | string> {
  const maxBytes = options.maxBytes ?? MAX_IMAGE_BYTES;
  const get = options.fetch ?? fetch;
  const signal = options.signal === undefined ? {} : { signal: options.signal };
  // The token goes to the attachment URL alone: a redirect (to the signed blob URL, which needs no
  // credentials) is followed here without it, whatever its host.
  let response = await get(url, {
    headers: { authorization: `token ${options.token}`, accept: 'image/*' },
    redirect: 'manual',
    ...signal,
  });
  for (let hops = 0; isRedirect(response.status); hops += 1) {
    const location = response.headers.get('location');
    await response.body?.cancel();
    if (location === null || hops >= MAX_REDIRECTS)
      return `HTTP ${response.status} without a usable redirect`;
    response = await get(new URL(location, url), {
      headers: { accept: 'image/*' },
      redirect: 'manual',
      ...signal,
    });
  }
  if (!response.ok) {
    await response.body?.cancel();
    return `HTTP ${response.status}`;
  }
  const declared = Number(response.headers.get('content-length') ?? '0');
  if (declared > maxBytes) {
    await response.body?.cancel();
    return `larger than ${maxBytes} bytes`;
  }
  const bytes = await readAtMost(response, maxBytes);
  if (bytes === null) return `larger than ${maxBytes} bytes`;
  const mediaType = sniffImageType(bytes);
  if (mediaType === null) return 'not a PNG, JPEG, GIF or WebP image';
  return { url, mediaType, data: Buffer.from(bytes).toString('base64') };
}

function isRedirect(status: number): boolean {
  return status === 301 || status === 302 || status === 303 || status === 307 || status === 308;
}

/** The body, or null once it passes `max` bytes (read no further: a missing length is not trusted). */
async function readAtMost(response: Response, max: number): Promise<Uint8Array | null> {
  if (response.body === null) return new Uint8Array();
  const chunks: Uint8Array[] = [];
  let total = 0;
  const reader: ReadableStreamDefaultReader<Uint8Array> = response.body.getReader();
  for (;;) {
    const next = (await reader.read()) as { done: true } | { done: false; value: Uint8Array };
    if (next.done) break;
    const value = next.value;
    total += value.length;
    if (total > max) {
      await reader.cancel();
      return null;
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks);
}
