/**
 * `npm run bench -- --editor`: the file tools now run inside the sandbox (SandboxFiles over the
 * harness shell). Median and p95 of editor view / create / str_replace / insert on a 300-line file,
 * in the local sandbox and in the Docker sandbox, through the same runToolCall the loop uses.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { DEFAULT_LIMITS } from '../src/config/agent-env.js';
import { defaultTools } from '../src/agent/tools/index.js';
import { newToolContext, runToolCall } from '../src/agent/tools/tool.js';
import { createSandbox, type SandboxKind } from '../src/sandbox/create-sandbox.js';

function quantile(xs: readonly number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? NaN;
}

export interface EditorBench {
  readonly [op: string]: { readonly median: number; readonly p95: number };
}

export async function editorBench(kind: SandboxKind, n = 200): Promise<EditorBench> {
  const ws = mkdtempSync(join(tmpdir(), 'ia-editor-bench-'));
  const lines = Array.from({ length: 300 }, (_, i) => `export const value${i} = ${i}; // line ${i}`);
  writeFileSync(join(ws, 'big.ts'), `${lines.join('\n')}\n`);
  writeFileSync(join(ws, 'big.js'), `${lines.join('\n')}\n`);
  // A Node project, so the Docker sandbox is the Node image (node for the .js file's syntax check).
  writeFileSync(join(ws, 'package.json'), '{"name":"bench"}\n');
  execFileSync('git', ['init', '-q'], { cwd: ws });
  const sandbox = await createSandbox({
    kind,
    workspace: ws,
    path: process.env.PATH ?? '/usr/bin:/bin',
    jobId: 'bench-editor',
  });
  const tools = defaultTools();
  const ctx = newToolContext({ sandbox, limits: DEFAULT_LIMITS });
  const ops: Record<string, (i: number) => Record<string, unknown>> = {
    view: () => ({ command: 'view', path: 'big.ts' }),
    'view (range)': () => ({ command: 'view', path: 'big.ts', view_range: [100, 140] }),
    create: (i) => ({ command: 'create', path: `new/f${i}.ts`, file_text: `export const x = ${i};\n` }),
    // Alternates between two states so every call finds exactly one match.
    str_replace: (i) => ({
      command: 'str_replace',
      path: 'big.ts',
      old_str: i % 2 === 0 ? '// line 150\n' : '// line 150 (edited)\n',
      new_str: i % 2 === 0 ? '// line 150 (edited)\n' : '// line 150\n',
    }),
    insert: (i) => ({ command: 'insert', path: `new/f${i}.ts`, insert_line: 0, new_str: '// head' }),
    // An edit of a JavaScript file whose new content was never seen (so not memoised): its syntax
    // check starts `node --check` in the sandbox.
    'insert (.js, syntax checked)': (i) => ({
      command: 'insert',
      path: 'big.js',
      insert_line: 0,
      new_str: `// edit ${i}`,
    }),
  };
  const out: Record<string, { median: number; p95: number }> = {};
  try {
    for (const [name, input] of Object.entries(ops)) {
      for (let i = 0; i < 4; i++) await runToolCall(tools, 'editor', input(i + 10_000), ctx);
      const times: number[] = [];
      for (let i = 0; i < n; i++) {
        const started = performance.now();
        const r = await runToolCall(tools, 'editor', input(i), ctx);
        times.push(performance.now() - started);
        if (r.isError) throw new Error(`${name}: ${r.content}`);
      }
      out[name] = { median: quantile(times, 0.5), p95: quantile(times, 0.95) };
    }
  } finally {
    await sandbox.close();
    rmSync(ws, { recursive: true, force: true });
  }
  return out;
}
