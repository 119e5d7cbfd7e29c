import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { test, type TestContext } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import type { MessageParam, Tool, ToolResultBlockParam } from '@anthropic-ai/sdk/resources/messages/messages';
import { z } from 'zod';
import {
  bashInput,
  editorInput,
  finishInput,
  runTestsInput,
  searchInput,
  type ToolName,
} from '../../src/agent/tools/schemas.js';
import { oracle, oraclePlan } from '../support/model-sim/policies/oracle.js';
import { startModelSimulator } from '../support/model-sim/server.js';

const fixture = (name: string): Promise<string> =>
  readFile(new URL(`fixtures/${name}`, import.meta.url), 'utf8');

const schemas = {
  bash: bashInput,
  editor: editorInput,
  search: searchInput,
  run_tests: runTestsInput,
  finish: finishInput,
};
const tools: Tool[] = Object.entries(schemas).map(([name, schema]) => ({
  name,
  description: `The ${name} tool.`,
  input_schema: { ...z.toJSONSchema(schema), type: 'object' },
}));

/** A workspace in memory with just enough of the agent's editor semantics to replay the oracle's edits. */
class Workspace {
  constructor(readonly files: Map<string, string>) {}

  run(name: string, input: unknown): { content: string; isError: boolean } {
    if (name === 'run_tests') return { content: 'ok', isError: false };
    if (name !== 'editor') return { content: `tool ${name} is not simulated here`, isError: true };
    const edit = editorInput.parse(input);
    const current = this.files.get(edit.path);
    switch (edit.command) {
      case 'view':
        return current === undefined
          ? { content: 'no such file', isError: true }
          : { content: current, isError: false };
      case 'create':
        assert.equal(current, undefined, `create over an existing ${edit.path}`);
        this.files.set(edit.path, edit.file_text ?? '');
        return { content: 'created', isError: false };
      case 'str_replace': {
        assert.ok(current !== undefined && edit.old_str !== undefined && edit.new_str !== undefined);
        assert.equal(
          current.split(edit.old_str).length - 1,
          1,
          `old_str must occur exactly once in ${edit.path}`,
        );
        this.files.set(
          edit.path,
          current.replace(edit.old_str, () => edit.new_str ?? ''),
        );
        return { content: 'replaced', isError: false };
      }
      default:
        return { content: `editor ${edit.command} is not simulated here`, isError: true };
    }
  }
}

async function startOracle(t: TestContext): Promise<Anthropic> {
  const sim = await startModelSimulator({ policy: oracle(await fixture('two-files.patch')) });
  t.after(() => sim.close());
  return new Anthropic({ apiKey: 'sk-any', baseURL: sim.url, maxRetries: 0 });
}

void test('an agent loop driven by the oracle reproduces the patched files exactly', async (t) => {
  const client = await startOracle(t);
  const workspace = new Workspace(new Map([['src/math.ts', await fixture('math-before.txt')]]));
  const messages: MessageParam[] = [{ role: 'user', content: 'Issue: add() subtracts. Please fix it.' }];
  const calls: string[] = [];

  for (let turn = 0; turn < 20; turn++) {
    const message = await client.messages
      .stream({ model: 'claude-sim', max_tokens: 4096, tools, messages })
      .finalMessage();
    messages.push({ role: 'assistant', content: message.content });
    assert.equal(message.stop_reason, 'tool_use');
    assert.equal(message.content[0]?.type, 'text', 'each turn starts with a sentence');
    const toolUses = message.content.flatMap((block) => (block.type === 'tool_use' ? [block] : []));
    assert.equal(toolUses.length, 1);
    const [call] = toolUses;
    assert.ok(call && call.name in schemas);
    schemas[call.name as ToolName].parse(call.input);
    const input = call.input as { command?: string };
    calls.push(input.command === undefined ? call.name : `${call.name}:${input.command}`);
    if (call.name === 'finish') break;
    const { content, isError } = workspace.run(call.name, call.input);
    const result: ToolResultBlockParam = {
      type: 'tool_result',
      tool_use_id: call.id,
      content,
      is_error: isError,
    };
    messages.push({ role: 'user', content: [result] });
    assert.equal(isError, false, `${call.name} failed: ${content}`);
  }

  assert.deepEqual(calls, [
    'run_tests',
    'editor:view',
    'editor:create',
    'editor:str_replace',
    'editor:str_replace',
    'run_tests',
    'finish',
  ]);
  assert.equal(workspace.files.get('src/math.ts'), await fixture('math-after.txt'));
  assert.equal(workspace.files.get('src/clamp.ts'), await fixture('clamp-after.txt'));

  // Stateless: every prefix of the conversation gets the very turn it got the first time.
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
  const finishCall = messages.at(-1)?.content;
  assert.ok(Array.isArray(finishCall));
  const [finishId = assert.fail()] = finishCall.flatMap((block) =>
    block.type === 'tool_use' ? [block.id] : [],
  );
  messages.push({
    role: 'user',
    content: [{ type: 'tool_result', tool_use_id: finishId, content: 'finished' }],
  });
  const after = await client.messages.create({ model: 'claude-sim', max_tokens: 4096, tools, messages });
  assert.equal(after.stop_reason, 'end_turn');
  assert.equal(after.content[0]?.type, 'text');
});

void test('the oracle plan: str_replace texts are whole hunks, inserts shift, deletions use rm', async () => {
  const plan = oraclePlan(await fixture('two-files.patch'), { summary: 'Fixed add() and div().' });
  assert.deepEqual(plan.at(-1)?.input, { summary: 'Fixed add() and div().' });
  const firstEdit = plan.find((step) => step.input['command'] === 'str_replace')?.input;
  assert.deepEqual(firstEdit, {
    command: 'str_replace',
    path: 'src/math.ts',
    old_str:
      'export function add(a: number, b: number): number {\n  return a - b;\n}\n\nexport function sub(a: number, b: number): number {\n',
    new_str:
      'export function add(a: number, b: number): number {\n  return a + b;\n}\n\nexport function sub(a: number, b: number): number {\n',
  });

  const zeroContext = [
    '--- a/list.txt',
    '+++ b/list.txt',
    '@@ -1,0 +2,2 @@',
    '+b',
    '+c',
    '@@ -3,0 +6 @@',
    '+f',
    'diff --git a/old.txt b/old.txt',
    'deleted file mode 100644',
    '--- a/old.txt',
    '+++ /dev/null',
    '@@ -1 +0,0 @@',
    "-it's old",
    '',
  ].join('\n');
  const edits = oraclePlan(zeroContext).filter((step) => step.tool === 'editor' || step.tool === 'bash');
  assert.deepEqual(
    edits.map((step) => step.input),
    [
      { command: 'view', path: 'list.txt' },
      { command: 'view', path: 'old.txt' },
      { command: 'insert', path: 'list.txt', insert_line: 1, new_str: 'b\nc\n' },
      { command: 'insert', path: 'list.txt', insert_line: 5, new_str: 'f\n' },
      { command: "rm -- 'old.txt'" },
    ],
  );
  assert.throws(() => oraclePlan(''), /changes no file/);
});
