import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { checkSyntax, checkSyntaxCached, type SyntaxResult } from '../../src/agent/syntax-check.js';
import type { Sandbox } from '../../src/sandbox/sandbox.js';
import type { EventOf } from '../../src/events/schema.js';
import { renderPullRequest } from '../../src/publish/pr-body.js';
import { Redactor } from '../../src/publish/redact.js';
import { LocalSandbox } from '../../src/sandbox/local/local-sandbox.js';
import { reply, scripted } from '../../src/model-sim/index.js';
import { startHarness } from '../support/agent-harness.js';

let dir: string;
let sandbox: LocalSandbox;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ia-syntax-'));
  // The repository's own TypeScript (here: this project's), as a checked-out repo with its
  // dependencies installed would have it.
  symlinkSync(resolve('node_modules'), join(dir, 'node_modules'));
  sandbox = await LocalSandbox.create({ workspace: dir, path: process.env.PATH ?? '/usr/bin:/bin' });
});

after(async () => {
  await sandbox.close();
  rmSync(dir, { recursive: true, force: true });
});

test('each language: parses, or the line and the reason it does not', async () => {
  const cases: [string, string, string | null][] = [
    ['a.json', '{"a": 1}', null],
    ['a.json', '{"a": 1,\n}', 'JSON'],
    ['tsconfig.json', '{ // comments are fine here\n "a": 1 }', 'unchecked'],
    ['a.yml', 'a: 1\nb: [1, 2]\n', null],
    ['a.yaml', 'a: [1, 2\nb: 3\n', 'YAML'],
    ['a.py', 'def f(x):\n    return x\n', null],
    ['a.py', 'def f(x)\n    return x\n', 'python ast'],
    ['a.js', 'const a = require("x");\nmodule.exports = a;\n', null],
    ['a.js', 'import x from "y";\nexport const a = x;\n', null],
    ['a.mjs', 'export const a = ;\n', 'node --check'],
    ['a.js', 'function f( {\n', 'node --check'],
    ['a.ts', 'const a: number = 1;\nexport type T = { a: string };\n', null],
    ['a.ts', 'const a: number = ;\n', 'typescript (syntax)'],
    ['a.tsx', 'export const A = () => <div>hi</div>;\n', null],
    ['a.tsx', 'export const A = () => <div>hi</span>;\n', 'typescript (syntax)'],
    ['README.md', '# anything', 'unchecked'],
  ];
  for (const [rel, text, expect] of cases) {
    const r = await checkSyntax(sandbox, rel, text);
    if (expect === null) assert.equal(r.kind, 'ok', `${rel}: ${JSON.stringify(r)}`);
    else if (expect === 'unchecked') assert.equal(r.kind, 'unchecked', rel);
    else {
      assert.equal(r.kind, 'error', `${rel} ${text}`);
      assert.equal(r.checker, expect);
      assert.match(r.message, /^line \d+: \S/, `${rel}: ${r.message}`);
    }
  }
  const py = await checkSyntax(sandbox, 'b.py', 'x = 1\ny = (\n');
  assert.ok(py.kind === 'error' && /^line \d+:/.test(py.message));
});

test('the content travels on stdin and is read off whole: shell text in a file never runs', async () => {
  const marker = join(dir, 'PWNED');
  const hostile = `x = 1\n"; touch ${marker}; echo "\n$(touch ${marker})\n`;
  await checkSyntax(sandbox, 'evil.py', hostile);
  await checkSyntax(sandbox, 'evil.js', hostile);
  await checkSyntax(sandbox, 'evil name; touch PWNED.js', hostile);
  const after = await sandbox.harnessExec('echo still-in-step', { timeoutMs: 5000 });
  assert.equal(after.output.trim(), 'still-in-step', 'the harness shell reads its next command cleanly');
  assert.equal(existsSync(marker), false);
  assert.equal(existsSync(join(dir, 'PWNED')), false);
});

test('an edit that breaks syntax is said in the same observation; the run ends with the file named in the PR', async () => {
  const h = await startHarness({
    testCommand: 'npm test',
    policy: scripted([
      reply().tool('editor', {
        command: 'str_replace',
        path: 'src/calc.js',
        old_str: 'export function sum(values) {',
        new_str: 'export function sum(values {',
      }),
      reply().tool('finish', { summary: 'left it broken' }),
    ]),
  });
  try {
    await h.run();
    const observation = h.store.events.find((e) => e.kind === 'observation');
    assert.ok(observation?.kind === 'observation');
    assert.match(
      observation.content,
      /Syntax check \(node --check\): src\/calc\.js does not parse: line \d+:/,
    );
    assert.equal(observation.isError, false, 'the edit itself stands');
    const check = h.store.events.find((e): e is EventOf<'syntax_check'> => e.kind === 'syntax_check');
    assert.ok(check);
    assert.equal(check.checked, 1);
    assert.deepEqual(
      check.failures.map((f) => [f.path, f.checker]),
      [['src/calc.js', 'node --check']],
    );
    const body = renderPullRequest({
      base: h.store.base,
      events: h.store.events,
      issue: { number: 1, title: 't' },
      trajectoryLink: 'https://agent.example/t.json',
      redactor: new Redactor([]),
    }).body;
    assert.match(body, /⚠️ \*\*1 changed file does not parse:\*\* `src\/calc\.js` \(node --check: line \d+:/);
  } finally {
    await h.close();
  }
});

test('memo: a checked content is not checked again; a checker the sandbox lacks is looked for once per run', async (t) => {
  const bare = mkdtempSync(join(tmpdir(), 'ia-syntax-bare-'));
  const plain = await LocalSandbox.create({ workspace: bare, path: process.env.PATH ?? '/usr/bin:/bin' });
  t.after(async () => {
    await plain.close();
    rmSync(bare, { recursive: true, force: true });
  });
  let execs = 0;
  const counted: Sandbox = {
    kind: plain.kind,
    workdir: plain.workdir,
    exec: (c, o) => plain.exec(c, o),
    harnessExec: (c, o) => {
      execs++;
      return plain.harnessExec(c, o);
    },
    close: () => plain.close(),
  };
  const cache = new Map<string, SyntaxResult>();
  // No node_modules/typescript here: unchecked, found out once.
  assert.equal((await checkSyntaxCached(cache, counted, 'a.ts', 'const a = 1;')).kind, 'unchecked');
  assert.equal((await checkSyntaxCached(cache, counted, 'b.ts', 'const b = ;')).kind, 'unchecked');
  assert.equal(execs, 1);
  // A JavaScript file: checked once per content.
  assert.equal((await checkSyntaxCached(cache, counted, 'a.js', 'let x = (;')).kind, 'error');
  assert.equal((await checkSyntaxCached(cache, counted, 'a.js', 'let x = (;')).kind, 'error');
  assert.equal((await checkSyntaxCached(cache, counted, 'a.js', 'let x = 1;')).kind, 'ok');
  assert.equal(execs, 3);
});
