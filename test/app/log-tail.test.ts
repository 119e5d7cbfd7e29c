import assert from 'node:assert/strict';
import { test } from 'node:test';
import { tailText } from '../../src/app/ci-round.js';

/** A job log of `lines` numbered lines, streamed in chunks of uneven sizes (cut mid-line). */
function logStream(
  lines: number,
  chunk: number,
): { stream: ReadableStream<Uint8Array>; pulled: () => number } {
  const text = Buffer.from(Array.from({ length: lines }, (_, i) => `step ${i + 1}: ok ✓`).join('\n'));
  let at = 0;
  let pulls = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (at >= text.byteLength) {
        controller.close();
        return;
      }
      pulls += 1;
      const size = chunk + (pulls % 7) * 13;
      controller.enqueue(new Uint8Array(text.subarray(at, at + size)));
      at += size;
    },
  });
  return { stream, pulled: () => at };
}

test('a streamed job log is read through and only its last bytes kept, starting at a whole line', async () => {
  const { stream, pulled } = logStream(200_000, 4096);
  const tail = await tailText(stream, 2048);
  assert.ok(pulled() > 3_000_000, 'the whole log was read');
  assert.ok(Buffer.byteLength(tail) <= 2048, String(Buffer.byteLength(tail)));
  const lines = tail.split('\n');
  assert.equal(lines.at(-1), 'step 200000: ok ✓');
  assert.match(lines[0] ?? '', /^step \d+: ok ✓$/);
  // Consecutive lines, nothing skipped inside the window.
  const numbers = lines.map((l) => Number(/^step (\d+)/.exec(l)?.[1]));
  numbers.forEach((n, i) => {
    assert.equal(n, (numbers[0] ?? 0) + i);
  });
});

test('a short log is kept whole; strings and buffers are tailed the same way', async () => {
  const { stream } = logStream(3, 5);
  assert.equal(await tailText(stream, 2048), 'step 1: ok ✓\nstep 2: ok ✓\nstep 3: ok ✓');
  assert.equal(await tailText('a\nb\nc', 3), 'c');
  assert.equal(await tailText(new TextEncoder().encode('x\ny').buffer, 100), 'x\ny');
  assert.equal(await tailText(null, 100), '');
});
