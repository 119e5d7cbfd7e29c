/**
 * `npm run bench -- --test-reports` (issue 34): what the structured reports cost. Each runner of the
 * corpus on its `main` suite (scripts/runner-suites.mjs), in the local sandbox, run by the
 * test-results engine with the reports and bounds it asks for and without (the command alone, its
 * console output read), alternating, ROUNDS times each; medians of the test command's own time and
 * of the whole run (the report folder made, the reports read back and removed). Runners are
 * installed from the registry into a temporary folder (BENCH_RUNNERS_DIR reuses one); pytest is
 * this machine's.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { LocalSandbox } from '../src/sandbox/local/local-sandbox.js';
import { runTests } from '../src/testing/run-tests.js';
// The suites are plain JavaScript shared with the capture script.
import { jsFiles, pytestFiles } from '../scripts/runner-suites.mjs';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);

interface Suite {
  readonly label: string;
  readonly spec: string | null;
  readonly files: Record<string, string>;
  readonly command: string;
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? (s[m] ?? NaN) : ((s[m - 1] ?? NaN) + (s[m] ?? NaN)) / 2;
}

function jsSuite(label: string, runner: string, spec: string | null, script: string, ext: string): Suite {
  const files = jsFiles(runner);
  const tree: Record<string, string> = {
    'package.json': `${JSON.stringify({ name: 'bench', private: true, scripts: { test: script } })}\n`,
  };
  for (const f of ['math', 'names', 'load']) tree[`test/${f}${ext}`] = files[f] ?? '';
  return { label, spec, files: tree, command: 'npm test' };
}

function suites(): Suite[] {
  const py = pytestFiles();
  return [
    jsSuite('node:test (node 20)', 'node-test', null, 'node --test', '.test.js'),
    jsSuite('jest 30', 'jest', 'jest@30', 'jest', '.test.js'),
    jsSuite('vitest 4', 'vitest', 'vitest@4', 'vitest run', '.test.mjs'),
    jsSuite('mocha 11', 'mocha', 'mocha@11', 'mocha', '.spec.js'),
    {
      label: 'pytest (this machine)',
      spec: null,
      files: { 'tests/test_math.py': py['math'] ?? '', 'tests/test_names.py': py['names'] ?? '' },
      command: 'python3 -m pytest -rA',
    },
  ];
}

function install(root: string, spec: string): string {
  const dir = join(root, spec.replace(/[@/]/g, '-'));
  if (!existsSync(join(dir, 'node_modules'))) {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'package.json'), '{"private":true}\n');
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--save-dev', spec], {
      cwd: dir,
      stdio: 'ignore',
    });
  }
  return join(dir, 'node_modules');
}

export async function testReportsBench(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'ia-bench-reports-'));
  const runners = process.env.BENCH_RUNNERS_DIR ?? join(work, 'runners');
  const rows: string[] = [];
  try {
    for (const suite of suites()) {
      const dir = join(work, suite.label.replace(/\W+/g, '-'));
      for (const [file, content] of Object.entries(suite.files)) {
        mkdirSync(dirname(join(dir, file)), { recursive: true });
        writeFileSync(join(dir, file), content);
      }
      if (suite.spec !== null)
        cpSync(install(runners, suite.spec), join(dir, 'node_modules'), { recursive: true });
      const sandbox = await LocalSandbox.create({
        workspace: dir,
        path: process.env.PATH ?? '/usr/bin:/bin',
      });
      const time = { plain: [] as number[], structured: [] as number[] };
      const wall = { plain: [] as number[], structured: [] as number[] };
      let sources = '';
      try {
        for (let i = 0; i < ROUNDS + 1; i++) {
          for (const mode of i % 2 === 0
            ? (['plain', 'structured'] as const)
            : (['structured', 'plain'] as const)) {
            const started = performance.now();
            const r = await runTests(sandbox, suite.command, {
              via: 'harness',
              timeoutMs: 120_000,
              perTestMs: 60_000,
              reports: mode === 'structured',
            });
            // The first round warms caches (jest's transform cache, vite's), and is not counted.
            if (i === 0) continue;
            time[mode].push(r.durationMs);
            wall[mode].push(performance.now() - started);
            if (mode === 'structured') sources = (r.summary.sources ?? []).join(', ');
          }
        }
      } finally {
        await sandbox.close();
      }
      const pct = (a: number, b: number): string => `${(((a - b) / b) * 100).toFixed(1)} %`;
      const [tp, ts, wp, ws] = [
        median(time.plain),
        median(time.structured),
        median(wall.plain),
        median(wall.structured),
      ];
      rows.push(
        `| ${suite.label} | ${tp.toFixed(0)} | ${ts.toFixed(0)} | ${pct(ts, tp)} | ${wp.toFixed(0)} | ${ws.toFixed(0)} | ${pct(ws, wp)} | ${sources} |`,
      );
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  console.log(`\n### Structured test reports (issue 34), ${ROUNDS} rounds each, medians\n`);
  console.log(
    '| Suite | Test ms, plain | Test ms, with reports | Cost | Whole run ms, plain | Whole run ms, with reports | Cost | Read from |',
  );
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |');
  for (const row of rows) console.log(row);
}
