import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import type { MessageParam, Tool, ToolResultBlockParam } from '@anthropic-ai/sdk/resources/messages/messages';
import { z } from 'zod';
import { readSummary, summaryInstruction } from '../../src/agent/condense-summary.js';
import { defaultTools } from '../../src/agent/tools/index.js';
import { newToolContext, runToolCall } from '../../src/agent/tools/tool.js';
import { DEFAULT_LIMITS } from '../../src/config/agent-env.js';
import type { Limits } from '../../src/events/schema.js';
import { LocalSandbox } from '../../src/sandbox/local/local-sandbox.js';
import { startHarness } from '../support/agent-harness.js';
import {
  oracle,
  oracleStep,
  planEdits,
  readConversation,
  type OracleOptions,
} from '../../src/model-sim/policies/oracle.js';
import { startModelSimulator } from '../../src/model-sim/server.js';
import { parseUnifiedDiff } from '../../src/model-sim/unified-diff.js';
import { GitScratch, joinLines } from './git-fixtures.js';

const fixture = (name: string): Promise<string> =>
  readFile(new URL(`fixtures/${name}`, import.meta.url), 'utf8');

const scratch = new GitScratch();
const temp = mkdtempSync(join(tmpdir(), 'ia-oracle-'));
after(() => {
  scratch.cleanup();
  rmSync(temp, { recursive: true, force: true });
});
let workspaces = 0;

const agentTools = defaultTools();
const tools: Tool[] = [...agentTools.values()].map((t) => ({
  name: t.name,
  description: t.description,
  input_schema: { ...z.toJSONSchema(t.schema), type: 'object' },
}));

interface Drive {
  /** The texts of `paths` at the end (null: absent). */
  readonly files: Map<string, string | null>;
  /** `tool` or `tool:command`, per call, in order; a turn with two calls gives two entries. */
  readonly calls: string[];
  readonly messages: MessageParam[];
  /** The API error that ended the conversation, if one did. */
  readonly error: string | null;
  readonly client: Anthropic;
}

/**
 * An agent loop in miniature: the oracle over HTTP (the SDK against the simulator), its tool calls run
 * by the agent's real tools on a real directory; run_tests is answered "ok" (there are no tests).
 */
async function drive(
  patch: string,
  files: ReadonlyMap<string, string>,
  paths: readonly string[],
  limits: Partial<Limits> = {},
  options: OracleOptions = {},
): Promise<Drive> {
  const dir = join(temp, `w${workspaces++}`);
  mkdirSync(dir);
  for (const [path, text] of files) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  const sim = await startModelSimulator({ policy: oracle(patch, options) });
  const sandbox = await LocalSandbox.create({ workspace: dir, path: process.env.PATH ?? '/usr/bin:/bin' });
  const ctx = newToolContext({ sandbox, limits: { ...DEFAULT_LIMITS, ...limits } });
  const client = new Anthropic({ apiKey: 'sk-any', baseURL: sim.url, maxRetries: 0 });
  const messages: MessageParam[] = [{ role: 'user', content: 'Fix the issue.' }];
  const calls: string[] = [];
  let error: string | null = null;
  try {
    for (let turn = 0; turn < 200; turn++) {
      let message: Anthropic.Message;
      try {
        message = await client.messages.create({ model: 'claude-sim', max_tokens: 4096, tools, messages });
      } catch (e) {
        if (!(e instanceof Anthropic.APIError)) throw e;
        error = `${e.status}: ${e.message}`;
        break;
      }
      messages.push({ role: 'assistant', content: message.content });
      assert.equal(message.content[0]?.type, 'text', 'each turn starts with a sentence');
      const uses = message.content.flatMap((b) => (b.type === 'tool_use' ? [b] : []));
      if (uses.length === 0) break;
      const results: ToolResultBlockParam[] = [];
      for (const use of uses) {
        const command = (use.input as { command?: unknown }).command;
        calls.push(use.name === 'bash' || typeof command !== 'string' ? use.name : `${use.name}:${command}`);
        const out =
          use.name === 'run_tests' || use.name === 'finish'
            ? { content: 'ok', isError: false }
            : await runToolCall(agentTools, use.name, use.input, ctx);
        results.push({
          type: 'tool_result',
          tool_use_id: use.id,
          content: out.content,
          is_error: out.isError,
        });
      }
      messages.push({ role: 'user', content: results });
    }
  } finally {
    await sandbox.close();
    await sim.close();
  }
  const after = new Map(
    paths.map((p) => [p, existsSync(join(dir, p)) ? readFileSync(join(dir, p), 'utf8') : null] as const),
  );
  return { files: after, calls, messages, error, client };
}

function pathsOf(patch: string): string[] {
  return [...new Set(parseUnifiedDiff(patch).map((f) => f.newPath ?? f.oldPath ?? ''))];
}

/** Drives the oracle and real `git apply` on the same files: the same files, or both refuse. */
async function assertOracleIsGitApply(
  files: ReadonlyMap<string, string>,
  patch: string,
  label: string,
  limits: Partial<Limits> = {},
): Promise<Drive> {
  const paths = pathsOf(patch);
  const expected = scratch.apply(files, patch, paths);
  const run = await drive(patch, files, paths, limits);
  const context = `${label}\n--- files:\n${JSON.stringify([...files])}\n--- patch:\n${patch}`;
  if ('error' in expected) {
    assert.match(
      run.error ?? '',
      /^500: .*the fix patch does not apply/,
      `git apply refused (${expected.error.trim()}), the oracle did not: ${context}`,
    );
  } else {
    assert.equal(run.error, null, context);
    assert.deepEqual(run.files, expected, context);
  }
  return run;
}

void test('an agent loop driven by the oracle reproduces the patched files exactly, and replays statelessly', async () => {
  const patch = await fixture('two-files.patch');
  const run = await assertOracleIsGitApply(
    new Map([['src/math.ts', await fixture('math-before.txt')]]),
    patch,
    'two-files',
  );
  assert.deepEqual(run.calls, [
    'run_tests',
    'editor:view',
    'bash',
    'editor:create',
    'editor:str_replace',
    'editor:str_replace',
    'run_tests',
    'finish',
  ]);
  assert.equal(run.files.get('src/math.ts'), await fixture('math-after.txt'));
  assert.equal(run.files.get('src/clamp.ts'), await fixture('clamp-after.txt'));
  const { messages } = run;

  // Stateless: every prefix of the conversation gets the very turn it got the first time.
  const sim = await startModelSimulator({ policy: oracle(patch) });
  try {
    const client = new Anthropic({ apiKey: 'sk-any', baseURL: sim.url, maxRetries: 0 });
    for (let i = 1; i < messages.length; i += 2) {
      const again = await client.messages.create({
        model: 'claude-sim',
        max_tokens: 4096,
        tools,
        messages: messages.slice(0, i),
      });
      assert.deepEqual(again.content, messages[i]?.content, `turn ${(i - 1) / 2}`);
    }
    // After finish, the model just ends its turn.
    const end = await client.messages.create({ model: 'claude-sim', max_tokens: 4096, tools, messages });
    assert.equal(end.stop_reason, 'end_turn');

    // The condenser's summary request (the last user turn with the instruction appended) gets a
    // summary with every section the harness asks for, naming the files changed, and no tool call.
    const beforeFinish = messages.slice(0, -1);
    const last = beforeFinish.at(-1);
    assert.ok(last?.role === 'user' && typeof last.content !== 'string');
    const instruction = summaryInstruction(300);
    const summary = await client.messages.create({
      model: 'claude-sim',
      max_tokens: 4096,
      tools,
      messages: [
        ...beforeFinish.slice(0, -1),
        { role: 'user', content: [...last.content, { type: 'text', text: instruction }] },
      ],
    });
    assert.ok(summary.content.every((b) => b.type === 'text'));
    const read = readSummary(
      {
        content: summary.content.map((b) => ({ type: 'text' as const, text: b.text })),
        stopReason: 'end_turn',
      },
      20_000,
    );
    assert.ok(read.ok, read.ok ? '' : read.reason);
    assert.match(read.text, /## Changes made and why\n- `src\/clamp\.ts`\n- `src\/math\.ts`\n/);
  } finally {
    await sim.close();
  }
});

void test('without `recheck` (an eval: the harness runs the suite next), the oracle finishes right after its edits', async () => {
  const patch = await fixture('two-files.patch');
  const files = new Map([['src/math.ts', await fixture('math-before.txt')]]);
  const paths = pathsOf(patch);
  const run = await drive(patch, files, paths, {}, { recheck: false });
  assert.equal(run.error, null);
  assert.deepEqual(run.files, scratch.apply(files, patch, paths));
  assert.deepEqual(run.calls, [
    'run_tests',
    'editor:view',
    'bash',
    'editor:create',
    'editor:str_replace',
    'editor:str_replace',
    'finish',
  ]);
});

void test('a hunk whose context occurs twice is applied where its line number says, with a widened old_str', async () => {
  const block = ['function f() {', '  step();', '  done();', '}'];
  const lines = [...block, ...block, ...block, ...block];
  const before = joinLines(lines, true);
  const changed = [...lines];
  changed.splice(10, 0, '  STEP();'); // inside the third copy
  const patch = scratch.diff('g.js', before, joinLines(changed, true));
  const run = await assertOracleIsGitApply(new Map([['g.js', before]]), patch, 'twice');
  assert.equal(run.files.get('g.js'), joinLines(changed, true));

  const edit = planEdits(parseUnifiedDiff(patch), new Map([['g.js', before]]))[0]?.calls[0]?.input;
  assert.ok(edit !== undefined);
  assert.equal(edit['command'], 'str_replace');
  const oldStr = String(edit['old_str']);
  assert.equal(before.split(oldStr).length - 1, 1, 'old_str is unique in the file');
  assert.ok(oldStr.split('\n').length - 1 > 6, 'old_str is wider than the hunk');
});

void test('the oracle equals real git apply on generated cases (repeated lines, drifted headers, moved targets)', async () => {
  let applied = 0;
  let refused = 0;
  for (let seed = 1000; seed < 1030; seed++) {
    const generated = scratch.generated(seed);
    if (generated === null) continue;
    const run = await assertOracleIsGitApply(generated.files, generated.patch, `seed ${seed}`);
    if (run.error === null) applied++;
    else refused++;
  }
  assert.ok(applied > 10 && refused > 0, `applied ${applied}, refused ${refused}`);
});

void test('creation, deletion, empty files, no newline at end of file and several files at once', async () => {
  const a = 'one\ntwo\nthree\nfour\nfive\nsix\nseven\n';
  const b = 'alpha\nbeta';
  const patch = [
    scratch.diff('a.txt', a, a.replace('four\n', 'FOUR\n').replace('seven\n', 'seven')),
    scratch.diff('b.txt', b, `${b}\ngamma\n`),
    scratch.diff('dir/new.txt', null, 'fresh\nfile'),
    scratch.diff('gone.txt', 'bye\n', null),
    scratch.diff('empty.txt', null, ''),
    scratch.diff('was-empty.txt', '', 'now\n'),
  ].join('');
  const files = new Map([
    ['a.txt', a],
    ['b.txt', b],
    ['gone.txt', 'bye\n'],
    ['was-empty.txt', ''],
  ]);
  const run = await assertOracleIsGitApply(files, patch, 'mixed');
  assert.equal(run.files.get('a.txt'), 'one\ntwo\nthree\nFOUR\nfive\nsix\nseven');
  assert.equal(run.files.get('b.txt'), 'alpha\nbeta\ngamma\n');
  assert.equal(run.files.get('gone.txt'), null);
  assert.equal(run.files.get('empty.txt'), '');
  assert.equal(run.files.get('was-empty.txt'), 'now\n');

  // A patch that expects a final newline the file lacks is refused, as git refuses it.
  await assertOracleIsGitApply(
    new Map([['a.txt', a.slice(0, -1)]]),
    scratch.diff('a.txt', a, `${a}eight\n`),
    'eof',
  );
});

void test('a file longer than one view is read on with view_range until every line is known', async () => {
  const lines = Array.from({ length: 1500 }, (_, i) =>
    i % 7 === 0 ? '}' : `line ${i % 50} ${'x'.repeat(i % 13)}`,
  );
  const before = joinLines(lines, false);
  const changed = [...lines];
  changed.splice(700, 2, 'CHANGED');
  changed.push('appended');
  const patch = scratch.diff('big.txt', before, joinLines(changed, true));
  const run = await assertOracleIsGitApply(new Map([['big.txt', before]]), patch, 'big', {
    observationChars: 4000,
  });
  assert.ok(run.calls.filter((c) => c === 'editor:view').length > 3, run.calls.join(' '));
});

void test('a patch that does not apply fails loudly: a 500 naming the file and the hunk, before any edit', async () => {
  const patch = await fixture('two-files.patch');
  const broken = new Map([
    ['src/math.ts', (await fixture('math-before.txt')).replace('return a / b;', 'return b;')],
  ]);
  const run = await drive(patch, broken, ['src/math.ts', 'src/clamp.ts']);
  assert.match(
    run.error ?? '',
    /^500: .*oracle: the fix patch does not apply: src\/math\.ts: hunk #2 \(@@ -11,6 \+11,7 @@\)/s,
  );
  assert.deepEqual(run.calls, ['run_tests', 'editor:view', 'bash'], 'nothing was edited');
  assert.equal(run.files.get('src/clamp.ts'), null);

  // A file the patch changes that is missing fails the same way, naming it.
  const missing = await drive(patch, new Map(), ['src/math.ts']);
  assert.match(missing.error ?? '', /the fix patch does not apply: src\/math\.ts: cannot be read/);
});

void test('an edit the agent refused fails the next turn loudly', () => {
  const patch = '--- a/x.txt\n+++ b/x.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n';
  const files = parseUnifiedDiff(patch);
  const text = (s: string) => ({ type: 'text' as const, text: s });
  const messages: MessageParam[] = [
    { role: 'user', content: 'Fix it.' },
    {
      role: 'assistant',
      content: [text('Tests.'), { type: 'tool_use', id: 't0', name: 'run_tests', input: {} }],
    },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't0', content: 'ok' }] },
    {
      role: 'assistant',
      content: [
        text('Look.'),
        { type: 'tool_use', id: 't1', name: 'editor', input: { command: 'view', path: 'x.txt' } },
        { type: 'tool_use', id: 't2', name: 'bash', input: { command: "tail -c 1 -- 'x.txt' | wc -l" } },
      ],
    },
    {
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 't1', content: '     1\ta\n     2\tb\n     3\tc' },
        { type: 'tool_result', tool_use_id: 't2', content: '1\n[exit code 0]' },
      ],
    },
  ];
  const edit = oracleStep(files, readConversation(messages));
  assert.deepEqual(edit?.calls[0]?.input, {
    command: 'str_replace',
    path: 'x.txt',
    old_str: 'a\nb\nc\n',
    new_str: 'a\nB\nc\n',
  });
  messages.push(
    {
      role: 'assistant',
      content: [text('Edit.'), { type: 'tool_use', id: 't3', name: 'editor', input: {} }],
    },
    {
      role: 'user',
      content: [
        {
          type: 'tool_result',
          tool_use_id: 't3',
          content: 'old_str was not found in x.txt.',
          is_error: true,
        },
      ],
    },
  );
  assert.throws(() => oracleStep(files, readConversation(messages)), /refused an edit.*x\.txt.*not found/s);
});

void test('through the real agent, a patch that does not apply ends the run failed with the hunk in its reason', async () => {
  const patch = [
    'diff --git a/src/calc.js b/src/calc.js',
    '--- a/src/calc.js',
    '+++ b/src/calc.js',
    '@@ -26,5 +26,5 @@ export function average(values) {',
    "     throw new RangeError('average of an empty list');",
    '   }',
    '   const mean = sum(values) / values.length;',
    '-  return Math.round(mean * 100) / 100;',
    '+  return mean;',
    ' }',
    '',
  ].join('\n');
  const h = await startHarness({ policy: oracle(patch), maxAttempts: 1 });
  try {
    const outcome = await h.run();
    assert.equal(outcome.outcome, 'failed');
    assert.match(outcome.reason, /src\/calc\.js: hunk #1 \(@@ -26,5 \+26,5 @@\) does not apply/);
    const last = h.sim.requests.at(-1);
    assert.equal(last?.status, 500);
    assert.match(last.errorMessage ?? '', /hunk #1/);
  } finally {
    await h.close();
  }
});
