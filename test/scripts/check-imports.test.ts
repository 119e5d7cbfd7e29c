import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, test } from 'node:test';
import {
  BOUNDARY_RULES,
  checkImports,
  describe,
  REACH_RULES,
  specifiers,
} from '../../scripts/check-imports.js';

const roots: string[] = [];
after(() => {
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

/** A small source tree: path → text, under a fresh root. */
function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'ia-imports-'));
  roots.push(root);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

test('every kind of module specifier is read, and whether only types cross it', () => {
  const text = [
    "import { a } from './a.js';",
    "import type { B } from './b.js';",
    "import { type C, type D } from './c.js';",
    "import { type E, e } from './e.js';",
    "import './side.js';",
    "export { f } from './f.js';",
    "export type { G } from './g.js';",
    "export * from './h.js';",
    "const i = await import('./i.js');",
    "type J = import('./j.js').J;",
    "const k = require('./k.cjs');",
    "import l = require('./l.js');",
    'const dynamic = await import(name);',
    "import { z } from 'zod';",
  ].join('\n');
  const found = specifiers('x.ts', text).map((s) => `${s.text}${s.typeOnly ? ' (type)' : ''}`);
  assert.deepEqual(found, [
    './a.js',
    './b.js (type)',
    './c.js (type)',
    './e.js',
    './side.js',
    './f.js',
    './g.js (type)',
    './h.js',
    './i.js',
    './j.js (type)',
    './k.cjs',
    './l.js',
    'zod',
  ]);
});

test('a clean tree: no violation, no cycle, and imports resolved from .js to .ts and index files', () => {
  const root = tree({
    'src/app/main.ts': "import { q } from '../queue/index.js';\nimport { c } from '../config/env.js';\n",
    'src/queue/index.ts': "import { c } from '../config/env.js';\nexport const q = c;\n",
    'src/config/env.ts': "import { z } from 'zod';\nexport const c = 1;\n",
    'src/config/readme.md': "import { x } from '../app/main.js';\n",
  });
  const report = checkImports(root);
  assert.equal(report.files, 3);
  assert.deepEqual(
    report.edges.map((e) => `${e.from} → ${e.to}`),
    [
      'src/app/main.ts → src/queue/index.ts',
      'src/app/main.ts → src/config/env.ts',
      'src/queue/index.ts → src/config/env.ts',
    ],
  );
  assert.deepEqual(report.violations, []);
  assert.deepEqual(report.cycles, []);
  assert.deepEqual(describe(report), []);
});

test('each boundary rule is enforced, through every kind of import, type-only ones included', () => {
  const root = tree({
    'src/eval/run.ts': "import type { W } from '../cli/workspace.js';\n",
    'src/queue/payloads.ts': "export { triggerSchema } from '../app/triggers.js';\n",
    'src/config/repo.ts': "type P = import('../publish/policy.js').P;\n",
    'src/worker/metrics.ts': "const m = await import('../server/metrics.js');\n",
    'src/execution/execute.ts': [
      "import { a } from '../cli/a.js';",
      "import { b } from '../app/b.js';",
      "import { c } from '../worker/c.js';",
      "import { d } from '../action/d.js';",
      "import { s } from '../sandbox/sandbox.js';",
    ].join('\n'),
    'src/cli/workspace.ts': "import { e } from '../execution/execute.js';\n",
    'src/app/triggers.ts': '',
    'src/app/b.ts': '',
    'src/publish/policy.ts': '',
    'src/server/metrics.ts': '',
    'src/cli/a.ts': '',
    'src/worker/c.ts': '',
    'src/action/d.ts': '',
    'src/sandbox/sandbox.ts': '',
    // A folder whose name only starts like a ruled one is not under the rule.
    'src/evaluation/x.ts': "import { w } from '../cli/workspace.js';\n",
  });
  const report = checkImports(root);
  assert.deepEqual(report.violations.map((v) => `${v.edge.from} → ${v.edge.to}`).sort(), [
    'src/config/repo.ts → src/publish/policy.ts',
    'src/eval/run.ts → src/cli/workspace.ts',
    'src/execution/execute.ts → src/action/d.ts',
    'src/execution/execute.ts → src/app/b.ts',
    'src/execution/execute.ts → src/cli/a.ts',
    'src/execution/execute.ts → src/worker/c.ts',
    'src/queue/payloads.ts → src/app/triggers.ts',
    'src/worker/metrics.ts → src/server/metrics.ts',
  ]);
  const lines = describe(report);
  assert.ok(
    lines.includes(
      'src/eval/run.ts:1 → src/cli/workspace.ts (eval/ imports nothing from cli/: ' +
        `${BOUNDARY_RULES[0]?.why ?? ''})`,
    ),
    lines.join('\n'),
  );
  assert.ok(
    lines.some((l) =>
      l.startsWith('src/execution/execute.ts:4 → src/action/d.ts (execution/ imports nothing from action/'),
    ),
  );
  assert.deepEqual(report.cycles, []);
});

test("the Action's code reaches no queue-bound module nor the queue's or Probot's packages, through any import of any form", () => {
  const root = tree({
    'src/action/run-action.ts': "import { decide } from '../app/ci-round.js';\nimport './own.js';\n",
    'src/action/own.ts': "import type { Queue } from 'bullmq';\n",
    // A relative import beside the module (`./intake.js`), two files away from the Action's entry.
    'src/app/ci-round.ts': "import { firstTime } from './ci-ledger.js';\nexport const decide = 1;\n",
    'src/app/ci-ledger.ts': "import { lock } from '../queue/issue-lock.js';\nimport './intake.js';\n",
    'src/app/intake.ts': "import { Probot } from 'probot';\nimport { Redis } from 'ioredis';\n",
    'src/queue/issue-lock.ts': "import type { Redis } from 'ioredis';\n",
    // Type-only imports are erased from the bundle; the App's own entry is not the Action's.
    'src/app/triggers.ts': "import type { Q } from '../queue/queues.js';\n",
    'src/queue/queues.ts': "import { Queue } from 'bullmq/dist/esm/index.js';\n",
    'src/app/main.ts': "import { q } from '../queue/queues.js';\n",
  });
  const report = checkImports(root);
  assert.deepEqual(
    report.reached.map((r) => `${r.target}: ${r.chain.join(' → ')}`),
    [
      'src/queue/issue-lock.ts: src/action/run-action.ts → src/app/ci-round.ts → src/app/ci-ledger.ts → src/queue/issue-lock.ts',
      'src/app/intake.ts: src/action/run-action.ts → src/app/ci-round.ts → src/app/ci-ledger.ts → src/app/intake.ts',
      'probot: src/action/run-action.ts → src/app/ci-round.ts → src/app/ci-ledger.ts → src/app/intake.ts',
      'ioredis: src/action/run-action.ts → src/app/ci-round.ts → src/app/ci-ledger.ts → src/app/intake.ts',
    ],
  );
  assert.ok(
    describe(report).includes(
      `reaches probot: src/action/run-action.ts → src/app/ci-round.ts → src/app/ci-ledger.ts → src/app/intake.ts (${REACH_RULES[0]?.why ?? ''})`,
    ),
    describe(report).join('\n'),
  );
  assert.deepEqual(report.violations, []);
});

test('cycles, type-only ones too, are reported once per tangle as a chain', () => {
  const root = tree({
    // A type cycle: a run and its stages (the stages need the runtime's type).
    'src/worker/fix-run.ts':
      "import { prepare } from './stages/prepare.js';\nexport interface Runtime { x: 1 }\n",
    'src/worker/stages/prepare.ts':
      "import type { Runtime } from '../fix-run.js';\nexport const prepare = 1;\n",
    // A tangle of three: server → routes → context → server.
    'src/server/server.ts': "import { routes } from './routes/runs.js';\n",
    'src/server/routes/runs.ts': "import type { Context } from '../context.js';\nexport const routes = 1;\n",
    'src/server/context.ts': "import type { Options } from './server.js';\nexport type Context = 1;\n",
    'src/server/extra.ts': "import { routes } from './routes/runs.js';\n",
    // A module that imports itself.
    'src/self.ts': "export { a } from './self.js';\n",
  });
  const report = checkImports(root);
  assert.deepEqual(report.violations, []);
  assert.deepEqual(
    report.cycles.map((c) => c.chain.join(' → ')),
    [
      'src/self.ts → src/self.ts',
      'src/server/context.ts → src/server/server.ts → src/server/routes/runs.ts → src/server/context.ts',
      'src/worker/fix-run.ts → src/worker/stages/prepare.ts → src/worker/fix-run.ts',
    ],
  );
  assert.deepEqual(
    describe(report).filter((l) => l.startsWith('cycle: ')),
    [
      'cycle: src/self.ts → src/self.ts',
      'cycle: src/server/context.ts → src/server/server.ts → src/server/routes/runs.ts → src/server/context.ts',
      'cycle: src/worker/fix-run.ts → src/worker/stages/prepare.ts → src/worker/fix-run.ts',
    ],
  );
});

test('a tangle larger than its shortest chain names the other files in it', () => {
  const root = tree({
    'src/a.ts': "import './b.js';\nimport './c.js';\n",
    'src/b.ts': "import './a.js';\n",
    'src/c.ts': "import './a.js';\n",
  });
  const report = checkImports(root);
  assert.deepEqual(report.cycles, [
    { chain: ['src/a.ts', 'src/b.ts', 'src/a.ts'], files: ['src/a.ts', 'src/b.ts', 'src/c.ts'] },
  ]);
  assert.deepEqual(describe(report), ['cycle: src/a.ts → src/b.ts → src/a.ts (tangled with it: src/c.ts)']);
});

test('the script exits 1 and prints what it found; 0 on a clean tree', () => {
  const script = join(import.meta.dirname, '../../scripts/check-imports.ts');
  const bad = tree({
    'src/queue/payloads.ts': "import type { T } from '../app/triggers.js';\n",
    'src/app/triggers.ts': "import type { P } from '../queue/payloads.js';\n",
  });
  const r = spawnSync(process.execPath, ['--import', 'tsx', script, bad], { encoding: 'utf8' });
  assert.equal(r.status, 1, r.stderr);
  assert.match(
    r.stderr,
    /^src\/queue\/payloads\.ts:1 → src\/app\/triggers\.ts \(queue\/ imports nothing from app\//m,
  );
  assert.match(
    r.stderr,
    /^cycle: src\/app\/triggers\.ts → src\/queue\/payloads\.ts → src\/app\/triggers\.ts$/m,
  );
  assert.match(r.stderr, /1 boundary violations, 1 cycles/);
  const good = tree({
    'src/app/triggers.ts': "import type { P } from '../queue/payloads.js';\n",
    'src/queue/payloads.ts': '',
  });
  const ok = spawnSync(process.execPath, ['--import', 'tsx', script, good], { encoding: 'utf8' });
  assert.equal(ok.status, 0, ok.stderr);
  assert.match(ok.stdout, /2 files, 1 imports, 0 boundary violations, 0 cycles/);
});

test('a comparison with a sandbox kind is reported outside src/sandbox and the composition roots', () => {
  const root = tree({
    'src/worker/stages/run.ts':
      "export const a = (k: string) => k === 'docker';\nexport const b = (k: string) => 'local' != k;\n",
    'src/eval/grade.ts':
      "export function f(k: string) {\n  switch (k) {\n    case 'unconfined':\n      return 1;\n  }\n  return k === 'fresh' ? 2 : 0;\n}\n",
    'src/sandbox/local/backend.ts': "export const c = (k: string) => k === 'local';\n",
    'src/cli/main.ts': "export const d = (k: string) => k !== 'docker';\n",
    'src/worker/fix-job.ts': "export const e = (k: string) => k === 'unconfined';\n",
  });
  const report = checkImports(root);
  assert.deepEqual(
    report.kindBranches.map((b) => `${b.file}:${b.line} ${b.kind}`),
    [
      'src/eval/grade.ts:3 unconfined',
      'src/worker/stages/run.ts:1 docker',
      'src/worker/stages/run.ts:2 local',
    ],
  );
  const lines = describe(report);
  assert.equal(lines.length, 3);
  assert.match(
    lines[0] ?? '',
    /^src\/eval\/grade\.ts:3: compares with the sandbox kind 'unconfined': choose the backend once at a composition root/,
  );
});
