import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';

const main = fileURLToPath(new URL('../../src/model-sim/main.ts', import.meta.url));
const patch = fileURLToPath(new URL('fixtures/two-files.patch', import.meta.url));

void test('main.ts prints the listening line, serves the oracle, and exits 0 on SIGTERM', async (t) => {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', main, '--port', '0', '--policy', 'oracle', '--fix', patch, '--api-key', 'k'],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  t.after(() => child.kill('SIGKILL'));
  const exited = once(child, 'exit');

  const lines = createInterface({ input: child.stdout });
  const [first] = (await once(lines, 'line')) as [string];
  const match = /^listening on (http:\/\/127\.0\.0\.1:(\d+))$/.exec(first);
  assert.ok(match, `unexpected first line: ${first}`);
  const url = match[1] ?? '';
  assert.notEqual(match[2], '0');

  assert.equal((await fetch(`${url}/health`)).status, 200);
  const client = new Anthropic({ apiKey: 'k', baseURL: url, maxRetries: 0 });
  const message = await client.messages.create({
    model: 'm',
    max_tokens: 64,
    messages: [{ role: 'user', content: 'Fix it.' }],
  });
  const tool = message.content.find((block) => block.type === 'tool_use');
  assert.equal(tool?.name, 'run_tests');

  child.kill('SIGTERM');
  const [code, signal] = (await exited) as [number | null, NodeJS.Signals | null];
  assert.deepEqual({ code, signal }, { code: 0, signal: null });
});

void test('main.ts exits 2 with a usage line on bad arguments', async () => {
  const child = spawn(process.execPath, ['--import', 'tsx', main, '--policy', 'nope'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  assert.equal(code, 2);
  assert.match(stderr, /unknown policy nope/);
  assert.match(stderr, /^usage: /m);
});
