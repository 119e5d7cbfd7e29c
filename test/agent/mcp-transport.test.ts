import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { LineReader, SandboxStdioTransport } from '../../src/agent/mcp/sandbox-transport.js';
import type { SandboxProcess } from '../../src/sandbox/sandbox.js';

function read(reader: LineReader, chunks: readonly Buffer[]): { lines: string[]; overflows: number } {
  const lines: string[] = [];
  let overflows = 0;
  for (const chunk of chunks) {
    reader.push(
      chunk,
      (l) => lines.push(l),
      () => {
        overflows += 1;
      },
    );
  }
  return { lines, overflows };
}

test('LineReader: lines split across chunks, several in one chunk, CRLF, and an empty line', () => {
  const r = read(new LineReader(100), [
    Buffer.from('{"a":'),
    Buffer.from('1}\n{"b":2}\r\n\n{"c"'),
    Buffer.from(':3}\n'),
  ]);
  assert.deepEqual(r, { lines: ['{"a":1}', '{"b":2}', '', '{"c":3}'], overflows: 0 });
});

test('LineReader: a line past the cap is dropped to its newline, never held past the cap, and reported once; the next line reads', () => {
  const reader = new LineReader(4096);
  const chunk = Buffer.alloc(1000, 'A');
  let maxHeld = 0;
  const lines: string[] = [];
  let overflows = 0;
  for (let i = 0; i < 50; i++) {
    reader.push(
      chunk,
      (l) => lines.push(l),
      () => {
        overflows += 1;
      },
    );
    maxHeld = Math.max(maxHeld, reader.heldBytes);
  }
  reader.push(
    Buffer.from('AAAA\n{"ok":true}\n'),
    (l) => lines.push(l),
    () => {
      overflows += 1;
    },
  );
  assert.ok(maxHeld <= 4096, `held ${maxHeld}`);
  assert.equal(overflows, 1);
  assert.deepEqual(lines, ['{"ok":true}']);
  assert.equal(reader.heldBytes, 0);
});

test('SandboxStdioTransport: a 6 MB message stops the server at once (its process closed, the reason kept); nothing after it is read', async () => {
  const stdout = new PassThrough();
  let closed = 0;
  let close = (): void => undefined;
  const process: SandboxProcess = {
    stdin: new PassThrough(),
    stdout,
    stderrTail: () => '',
    closed: new Promise<void>((resolve) => {
      close = resolve;
    }),
    close: () => {
      closed += 1;
      close();
    },
  };
  const transport = new SandboxStdioTransport(process);
  const messages: JSONRPCMessage[] = [];
  const errors: string[] = [];
  let onclose = 0;
  transport.onmessage = (m) => messages.push(m);
  transport.onerror = (e) => errors.push(e.message);
  transport.onclose = () => {
    onclose += 1;
  };
  await transport.start();
  stdout.write('{"jsonrpc":"2.0","id":1,"result":{}}\n');
  const block = Buffer.alloc(64 * 1024, 'A');
  for (let i = 0; i < 96; i++) stdout.write(block);
  stdout.write('\n{"jsonrpc":"2.0","id":2,"result":{}}\n');
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(
    messages.map((m) => ('id' in m ? m.id : null)),
    [1],
  );
  assert.equal(errors.length, 1);
  assert.match(errors[0] ?? '', /longer than 4194304 bytes, so it was stopped/);
  assert.match(transport.droppedFor ?? '', /longer than/);
  assert.equal(closed, 1);
  assert.equal(onclose, 1);
  await assert.rejects(transport.send({ jsonrpc: '2.0', id: 3, method: 'ping' }), /has exited/);
});
