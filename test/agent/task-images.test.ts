import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildMessages, estimateTokens } from '../../src/agent/conversation.js';
import { taskMessage } from '../../src/agent/prompt.js';
import { imageDimensions, imageTokens } from '../../src/agent/task-images.js';
import type { ImageBlockParam } from '../../src/model/model.js';
import { makeBase } from '../publish/event-log.js';

const PNG_1X1 = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
  'base64',
);

/** A PNG's signature and IHDR for a `width`×`height` image (no pixels: only the header is read). */
function pngHeader(width: number, height: number): Buffer {
  const b = Buffer.alloc(33);
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]).copy(b, 0);
  b.writeUInt32BE(13, 8);
  b.write('IHDR', 12, 'ascii');
  b.writeUInt32BE(width, 16);
  b.writeUInt32BE(height, 20);
  return b;
}

function block(
  bytes: Buffer,
  mediaType: ImageBlockParam['source']['media_type'] = 'image/png',
): ImageBlockParam {
  return { type: 'image', source: { type: 'base64', media_type: mediaType, data: bytes.toString('base64') } };
}

test('image sizes from PNG, GIF, JPEG and WebP headers', () => {
  assert.deepEqual(imageDimensions(PNG_1X1), { width: 1, height: 1 });
  assert.deepEqual(imageDimensions(pngHeader(3000, 2000)), { width: 3000, height: 2000 });
  const gif = Buffer.from('GIF89a\x40\x01\xf0\x00', 'latin1');
  assert.deepEqual(imageDimensions(gif), { width: 320, height: 240 });
  // SOI, an APP0 segment of 16 bytes, then SOF0 with height 480 and width 640.
  const jpeg = Buffer.concat([
    Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10]),
    Buffer.alloc(14),
    Buffer.from([0xff, 0xc0, 0x00, 0x11, 0x08, 0x01, 0xe0, 0x02, 0x80, 0x03]),
  ]);
  assert.deepEqual(imageDimensions(jpeg), { width: 640, height: 480 });
  const webp = Buffer.alloc(30);
  webp.write('RIFF', 0, 'ascii');
  webp.write('WEBPVP8X', 8, 'ascii');
  webp.writeUIntLE(799, 24, 3);
  webp.writeUIntLE(599, 27, 3);
  assert.deepEqual(imageDimensions(webp), { width: 800, height: 600 });
  assert.equal(imageDimensions(Buffer.from('<svg/>')), null);
});

test("image tokens: the API's width × height / 750 after its resizing, 1600 when the size is unknown", () => {
  assert.equal(imageTokens(block(PNG_1X1)), 1);
  assert.equal(imageTokens(block(pngHeader(1000, 1000))), 1334);
  // Long edge cut to 1568 (1568 × 1045), then to ~1.15 megapixels.
  assert.equal(imageTokens(block(pngHeader(3000, 2000))), 1534);
  assert.equal(imageTokens(block(Buffer.from('not an image at all'))), 1600);
});

test('the first message: task text, then the images; the estimate counts tokens per image, not base64', () => {
  const big = Buffer.concat([pngHeader(1000, 1000), Buffer.alloc(300_000, 7)]);
  const base = makeBase({
    task: {
      title: 'Chart is blank',
      body: 'see the screenshot',
      instructions: [],
      source: 'octo/repo#7',
      images: [
        {
          url: 'https://github.com/user-attachments/assets/a',
          mediaType: 'image/png',
          file: 'files/x.png',
          bytes: 1,
        },
      ],
      unavailableImages: [{ url: 'https://github.com/user-attachments/assets/b', reason: 'HTTP 404' }],
    },
  });
  const text = taskMessage(base, null);
  assert.match(
    text,
    /The image linked above follows this message, in this order: https:\/\/github\.com\/user-attachments\/assets\/a\./,
  );
  assert.match(
    text,
    /An image could not be loaded: https:\/\/github\.com\/user-attachments\/assets\/b \(HTTP 404\)\./,
  );
  const image = block(big);
  const messages = buildMessages(base, [], [image]);
  assert.equal(messages.length, 1);
  const first = messages[0];
  assert.ok(first?.role === 'user');
  assert.deepEqual(
    first.content.map((b) => b.type),
    ['text', 'image'],
  );
  assert.equal(first.content[1], image);
  const request = { system: 's', tools: [], messages };
  const without = estimateTokens({ ...request, messages: buildMessages(base, []) });
  const withImage = estimateTokens(request);
  // The text's estimate plus the image's 1334 (give or take the JSON punctuation around it).
  assert.ok(Math.abs(withImage - without - 1334) <= 2, `${withImage} vs ${without}`);
  // No images: the estimate is the plain one.
  assert.equal(without, Math.ceil((1 + 2 + JSON.stringify(buildMessages(base, [])).length) / 3));
});
