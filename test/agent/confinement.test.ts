import assert from 'node:assert/strict';
import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
  existsSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { DEFAULT_LIMITS } from '../../src/config/agent-env.js';
import { defaultTools } from '../../src/agent/tools/index.js';
import { runToolCall, type ToolContext } from '../../src/agent/tools/tool.js';
import { LocalSandbox } from '../../src/sandbox/local/local-sandbox.js';
import { SandboxFiles } from '../../src/sandbox/sandbox-files.js';

let root: string;
let ws: string;
let outside: string;
let ctx: ToolContext;
let sandbox: LocalSandbox;
const tools = defaultTools();

before(async () => {
  root = mkdtempSync(join(tmpdir(), 'ia-confine-'));
  ws = join(root, 'ws');
  outside = join(root, 'outside');
  mkdirSync(ws);
  mkdirSync(outside);
  writeFileSync(join(outside, 'secret.txt'), 'top secret\n');
  writeFileSync(join(ws, 'inside.txt'), 'hello\n');
  symlinkSync(join(outside, 'secret.txt'), join(ws, 'link-file'));
  symlinkSync(outside, join(ws, 'link-dir'));
  symlinkSync('inside.txt', join(ws, 'ok-link'));
  sandbox = await LocalSandbox.create({ workspace: ws, path: process.env.PATH ?? '/usr/bin:/bin' });
  const files = new SandboxFiles(sandbox);
  ctx = {
    sandbox,
    files,
    limits: DEFAULT_LIMITS,
    signal: undefined,
    testCommand: null,
    editHistory: new Map(),
    syntax: new Map(),
  };
});
after(async () => {
  await sandbox.close();
  rmSync(root, { recursive: true, force: true });
});

const escapes = [
  '../outside/secret.txt',
  join('..', 'outside', 'new.txt'),
  '/etc/passwd',
  '/tmp/ia-escape.txt',
  'link-file',
  'link-dir/secret.txt',
  'link-dir/new.txt',
  'sub/../../outside/x',
];
const calls = (path: string): Record<string, unknown>[] => [
  { command: 'view', path },
  { command: 'create', path, file_text: 'pwned\n' },
  { command: 'str_replace', path, old_str: 'top secret', new_str: 'pwned' },
  { command: 'insert', path, insert_line: 0, new_str: 'pwned' },
  { command: 'undo_edit', path },
];

for (const path of escapes) {
  test(`every file tool refuses ${path}`, async () => {
    for (const input of calls(path)) {
      const r = await runToolCall(tools, 'editor', input, ctx);
      assert.equal(r.isError, true, `${String(input.command)} ${path} was allowed: ${r.content}`);
      assert.match(r.content, /outside the workspace|No edit of/, r.content);
    }
    const s = await runToolCall(tools, 'search', { pattern: 'secret', path }, ctx);
    assert.equal(s.isError, true, `search ${path} was allowed: ${s.content}`);
  });
}

test('nothing outside the workspace changed', () => {
  assert.equal(readFileSync(join(outside, 'secret.txt'), 'utf8'), 'top secret\n');
  assert.equal(existsSync(join(outside, 'new.txt')), false);
  assert.equal(existsSync('/tmp/ia-escape.txt'), false);
});

test('paths inside the workspace work, including a link that stays inside', async () => {
  const v = await runToolCall(tools, 'editor', { command: 'view', path: 'ok-link' }, ctx);
  assert.equal(v.isError, false, v.content);
  assert.match(v.content, /hello/);
  const c = await runToolCall(
    tools,
    'editor',
    { command: 'create', path: 'deep/new/file.txt', file_text: 'x\n' },
    ctx,
  );
  assert.equal(c.isError, false, c.content);
  const abs = await runToolCall(tools, 'editor', { command: 'view', path: join(ws, 'inside.txt') }, ctx);
  assert.equal(abs.isError, false, abs.content);
});

test('editor: str_replace needs a unique match, undo reverts', async () => {
  writeFileSync(join(ws, 'dup.txt'), 'a\nb\na\n');
  const dup = await runToolCall(
    tools,
    'editor',
    { command: 'str_replace', path: 'dup.txt', old_str: 'a', new_str: 'c' },
    ctx,
  );
  assert.equal(dup.isError, true);
  assert.match(dup.content, /occurs 2 times .*lines 1, 3/);
  const ok = await runToolCall(
    tools,
    'editor',
    { command: 'str_replace', path: 'dup.txt', old_str: 'b\n', new_str: 'B\n' },
    ctx,
  );
  assert.equal(ok.isError, false);
  assert.equal(readFileSync(join(ws, 'dup.txt'), 'utf8'), 'a\nB\na\n');
  await runToolCall(tools, 'editor', { command: 'undo_edit', path: 'dup.txt' }, ctx);
  assert.equal(readFileSync(join(ws, 'dup.txt'), 'utf8'), 'a\nb\na\n');
  const ins = await runToolCall(
    tools,
    'editor',
    { command: 'insert', path: 'dup.txt', insert_line: 1, new_str: 'X' },
    ctx,
  );
  assert.equal(ins.isError, false);
  assert.equal(readFileSync(join(ws, 'dup.txt'), 'utf8'), 'a\nX\nb\na\n');
  const view = await runToolCall(
    tools,
    'editor',
    { command: 'view', path: 'dup.txt', view_range: [2, 3] },
    ctx,
  );
  assert.equal(view.content, '     2\tX\n     3\tb');
});
