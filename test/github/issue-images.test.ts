import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { attachmentUrls, fetchIssueImages, sniffImageType } from '../../src/github/issue-images.js';

const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
  'base64',
);

test('attachment URLs from markdown, HTML and bare links; other hosts ignored', () => {
  const a = 'https://github.com/user-attachments/assets/0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0';
  const b = 'https://github.com/user-attachments/assets/11111111-2222-3333-4444-555555555555';
  const body = `![shot](${a})\n<img width="300" src="${b}" />\nagain ${a}\n![x](https://evil.example/user-attachments/assets/12345678)`;
  assert.deepEqual(attachmentUrls(body), [a, b]);
});

test('image types by magic bytes, not by name or header', () => {
  assert.equal(sniffImageType(PNG), 'image/png');
  assert.equal(sniffImageType(Buffer.from([0xff, 0xd8, 0xff, 0xe0])), 'image/jpeg');
  assert.equal(sniffImageType(Buffer.from('GIF89a....')), 'image/gif');
  assert.equal(sniffImageType(Buffer.from('RIFF\0\0\0\0WEBPVP8 ')), 'image/webp');
  assert.equal(sniffImageType(Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"/>')), null);
});

test('fetch: the token is sent, a missing or non-image attachment is named, never thrown', async () => {
  const seen: (string | undefined)[] = [];
  const server = createServer((req, res) => {
    seen.push(req.headers.authorization);
    if (req.url?.endsWith('/aaaaaaaa')) {
      res.writeHead(200, { 'content-type': 'image/png' });
      res.end(PNG);
    } else if (req.url?.endsWith('/bbbbbbbb')) {
      res.writeHead(200, { 'content-type': 'image/png' });
      res.end('<html>not an image</html>');
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const urls = ['aaaaaaaa', 'bbbbbbbb', 'cccccccc'].map((id) => `${origin}/user-attachments/assets/${id}`);
    const { images, unavailable } = await fetchIssueImages(urls, { token: 'ghs_test' });
    assert.deepEqual(
      images.map((i) => [i.url, i.mediaType, i.data]),
      [[urls[0], 'image/png', PNG.toString('base64')]],
    );
    assert.deepEqual(unavailable, [
      { url: urls[1], reason: 'not a PNG, JPEG, GIF or WebP image' },
      { url: urls[2], reason: 'HTTP 404' },
    ]);
    assert.deepEqual(seen, ['token ghs_test', 'token ghs_test', 'token ghs_test']);
  } finally {
    await new Promise<void>((resolve) =>
      server.close(() => {
        resolve();
      }),
    );
  }
});
