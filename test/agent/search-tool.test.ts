import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { execFileSync } from 'node:child_process';
import { defaultTools } from '../../src/agent/tools/index.js';
import { newToolContext, runToolCall } from '../../src/agent/tools/tool.js';
import { DEFAULT_LIMITS } from '../../src/config/agent-env.js';
import { LocalSandbox } from '../../src/sandbox/local/local-sandbox.js';

test('search: real matches as path:line:text, in path order on every call, ignored files left out, capped with a note', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ia-search-'));
  t.after(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  for (const d of ['src/b', 'src/a', 'node_modules/x']) mkdirSync(join(dir, d), { recursive: true });
  writeFileSync(join(dir, 'src/b/two.js'), 'const x = 1;\nfunction parseDate(s) {}\n');
  writeFileSync(join(dir, 'src/a/one.js'), '// parseDate is used here\nparseDate("2020");\n');
  writeFileSync(join(dir, 'README.md'), 'Call parseDate.\n');
  writeFileSync(join(dir, 'node_modules/x/index.js'), 'parseDate();\n');
  writeFileSync(join(dir, '.gitignore'), 'node_modules/\n');
  for (let i = 0; i < 30; i++)
    writeFileSync(join(dir, `src/gen${String(i).padStart(2, '0')}.js`), 'parseDate();\n');
  execFileSync('git', ['init', '-q'], { cwd: dir });
  const sandbox = await LocalSandbox.create({ workspace: dir, path: process.env.PATH ?? '/usr/bin:/bin' });
  t.after(() => sandbox.close());
  const ctx = newToolContext({ sandbox, limits: DEFAULT_LIMITS });
  const tools = defaultTools();

  const r = await runToolCall(tools, 'search', { pattern: 'parseDate', path: 'src/a' }, ctx);
  assert.equal(r.isError, false);
  assert.equal(r.content, 'src/a/one.js:1:// parseDate is used here\nsrc/a/one.js:2:parseDate("2020");');

  const all = await runToolCall(tools, 'search', { pattern: 'parseDate', max_results: 5 }, ctx);
  const lines = all.content.split('\n');
  assert.deepEqual(lines.slice(0, 5), [
    'README.md:1:Call parseDate.',
    'src/a/one.js:1:// parseDate is used here',
    'src/a/one.js:2:parseDate("2020");',
    'src/b/two.js:2:function parseDate(s) {}',
    'src/gen00.js:1:parseDate();',
  ]);
  assert.match(all.content, /\[more than 5 matches; narrow the pattern or the path\]$/);
  assert.doesNotMatch(all.content, /node_modules/, '.gitignore is respected');
  // The same call gives the same answer (ripgrep walks in parallel unless told to sort).
  for (let i = 0; i < 3; i++) {
    assert.equal(
      (await runToolCall(tools, 'search', { pattern: 'parseDate', max_results: 5 }, ctx)).content,
      all.content,
    );
  }
  const none = await runToolCall(tools, 'search', { pattern: 'nothingLikeThis' }, ctx);
  assert.equal(none.content, 'No matches for /nothingLikeThis/ in the workspace.');
});
