/**
 * `npm run bench -- --eval` (issue 16): the eval harness's own cost. The 8 fixture tasks (Python and
 * JavaScript, test/support/eval-tasks.ts) with the oracle in Docker, at concurrency 1 and at 2, each
 * into a fresh output folder: wall time of the whole eval, and per task the median of its wall time
 * minus the time its tests ran (baseline, the agent's test runs, grading), which is the harness:
 * checkout, sandbox, environment, agent loop, grading's own work.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { EvalSummary } from '../src/eval/report.js';
import { buildTaskSet } from '../test/support/eval-tasks.js';

export function evalBench(): void {
  const set = buildTaskSet();
  const cli = resolve('bin/issue-agent.js');
  try {
    const rows: string[] = [];
    const walls: Record<number, number> = {};
    for (const concurrency of [1, 2]) {
      const out = join(set.dir, `out-${concurrency}`);
      const started = performance.now();
      execFileSync(
        process.execPath,
        [
          cli,
          'eval',
          set.file,
          '--model',
          'oracle',
          '--sandbox',
          'docker',
          '--concurrency',
          String(concurrency),
          '--out',
          out,
          '--json',
        ],
        {
          stdio: ['ignore', 'ignore', 'inherit'],
          env: { PATH: process.env.PATH, HOME: process.env.HOME, ISSUE_AGENT_ENV_CACHE: 'off' },
        },
      );
      const wall = performance.now() - started;
      walls[concurrency] = wall;
      const s = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as EvalSummary;
      rows.push(
        `| ${concurrency} | ${s.resolved}/${s.tasks} | ${(wall / 1000).toFixed(1)} s | ${(s.time.taskWallMedianMs / 1000).toFixed(2)} s | ${(s.time.harnessMedianMs / 1000).toFixed(2)} s |`,
      );
    }
    console.log('| concurrency | resolved | eval wall | task wall (median) | harness per task (median) |');
    console.log('| --- | --- | --- | --- | --- |');
    for (const r of rows) console.log(r);
    console.log(`\nconcurrency 2 / concurrency 1: ${((walls[2] ?? NaN) / (walls[1] ?? NaN)).toFixed(2)}×`);
  } finally {
    set.cleanup();
  }
}
