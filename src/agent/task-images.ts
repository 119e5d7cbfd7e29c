import type { Logger } from 'pino';
import type { EventStore } from '../events/event-store.js';
import type { ImageBlockParam } from '../model/model.js';

/**
 * The task's images (the and the request's, fetched by the worker before the run began) as
 * the image blocks that follow the task text in the first message, read from the run's attached
 * files: a resumed run, on any worker, sends the same bytes without fetching them again.
 *
 * The base state names the files before they are attached (the store must exist to attach to), so
 * a worker that died in between leaves a run whose files are missing and whose model has seen
 * nothing yet: the next worker fetches them again first (the worker's reattachTaskImages); one that
 * still is not there is left out here (logged).
 */
export async function loadTaskImages(
  store: Pick<EventStore, 'base' | 'readAttachment'>,
  logger?: Logger,
): Promise<ImageBlockParam[]> {
  const blocks: ImageBlockParam[] = [];
  for (const image of store.base.task.images ?? []) {
    const bytes = await store.readAttachment(image.file);
    if (bytes === null) {
      logger?.warn({ url: image.url, file: image.file }, "an image of the task is not among the run's files");
      continue;
    }
    blocks.push({
      type: 'image',
      source: { type: 'base64', media_type: image.mediaType, data: bytes.toString('base64') },
    });
  }
  return blocks;
}

/** The API's own fallback figure for an image whose size is unknown: its most after resizing. */
export const MAX_IMAGE_TOKENS = 1600;
/** The API scales an image down until its long edge is at most this (and it is at most ~1.15 MP). */
const MAX_LONG_EDGE = 1568;
const MAX_PIXELS = 1_150_000;

const estimates = new WeakMap<ImageBlockParam, number>();

/**
 * The tokens an image costs, by Anthropic's documented formula: width × height / 750, after the
 * API's resizing (long edge ≤ 1568 px, ≤ ~1.15 megapixels), so at most about 1600. The size is read
 * from the image's header; an image whose header does not say counts 1600. Kept per block: a run
 * estimates every step with the same blocks.
 */
export function imageTokens(block: ImageBlockParam): number {
  const known = estimates.get(block);
  if (known !== undefined) return known;
  // The headers that carry the size are near the start: a JPEG's frame header follows its EXIF
  // segments (at most 64 KiB each), so a few of them are read, never the whole image.
  const head = Buffer.from(block.source.data.slice(0, 4 * 65_536), 'base64');
  const size = imageDimensions(head);
  const tokens = size === null ? MAX_IMAGE_TOKENS : tokensFor(size.width, size.height);
  estimates.set(block, tokens);
  return tokens;
}

function tokensFor(width: number, height: number): number {
  let w = width;
  let h = height;
  const long = Math.max(w, h);
  if (long > MAX_LONG_EDGE) {
    w = (w * MAX_LONG_EDGE) / long;
    h = (h * MAX_LONG_EDGE) / long;
  }
  if (w * h > MAX_PIXELS) {
    const s = Math.sqrt(MAX_PIXELS / (w * h));
    w *= s;
    h *= s;
  }
  return Math.max(1, Math.min(MAX_IMAGE_TOKENS, Math.ceil((w * h) / 750)));
}

/** Width and height from a PNG, GIF, WebP or JPEG header, or null when the bytes do not say. */
export function imageDimensions(b: Uint8Array): { width: number; height: number } | null {
  const u16be = (i: number): number => ((b[i] ?? 0) << 8) | (b[i + 1] ?? 0);
  const u16le = (i: number): number => (b[i] ?? 0) | ((b[i + 1] ?? 0) << 8);
  const u24le = (i: number): number => u16le(i) | ((b[i + 2] ?? 0) << 16);
  const u32be = (i: number): number => u16be(i) * 65_536 + u16be(i + 2);
  const ascii = (from: number, to: number): string => String.fromCharCode(...b.subarray(from, to));
  const ok = (width: number, height: number): { width: number; height: number } | null =>
    width > 0 && height > 0 ? { width, height } : null;
  if (b.length >= 24 && b[0] === 0x89 && ascii(1, 4) === 'PNG' && ascii(12, 16) === 'IHDR')
    return ok(u32be(16), u32be(20));
  if (b.length >= 10 && ascii(0, 3) === 'GIF') return ok(u16le(6), u16le(8));
  if (b.length >= 30 && ascii(0, 4) === 'RIFF' && ascii(8, 12) === 'WEBP') {
    const chunk = ascii(12, 16);
    if (chunk === 'VP8 ') return ok(u16le(26) & 0x3fff, u16le(28) & 0x3fff);
    if (chunk === 'VP8L') {
      const b1 = b[22] ?? 0;
      const b2 = b[23] ?? 0;
      const b3 = b[24] ?? 0;
      return ok(1 + (((b1 & 0x3f) << 8) | (b[21] ?? 0)), 1 + (((b3 & 0x0f) << 10) | (b2 << 2) | (b1 >> 6)));
    }
    if (chunk === 'VP8X') return ok(1 + u24le(24), 1 + u24le(27));
    return null;
  }
  if (b[0] === 0xff && b[1] === 0xd8) return jpegDimensions(b, u16be);
  return null;
}

/** A JPEG's size from its first start-of-frame marker (SOF0–SOF15 but DHT, JPG and DAC). */
function jpegDimensions(
  b: Uint8Array,
  u16be: (i: number) => number,
): { width: number; height: number } | null {
  let i = 2;
  while (i + 9 < b.length) {
    if (b[i] !== 0xff) return null;
    const marker = b[i + 1] ?? 0;
    if (marker === 0xff) {
      i += 1;
      continue;
    }
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
      const height = u16be(i + 5);
      const width = u16be(i + 7);
      return width > 0 && height > 0 ? { width, height } : null;
    }
    // Markers without a length: RSTn, SOI, TEM.
    if ((marker >= 0xd0 && marker <= 0xd8) || marker === 0x01) {
      i += 2;
      continue;
    }
    i += 2 + u16be(i + 2);
  }
  return null;
}
