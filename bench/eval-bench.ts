/**
 * `npm run bench -- --eval` (issue 16): the eval harness's own cost. The 8 fixture tasks (Python and
 * JavaScript, test/support/eval-tasks.ts) with the oracle in Docker (or BENCH_EVAL_SANDBOX), at concurrency 1 and 2, each
 * into a fresh output folder: wall time of the whole eval, and per task the median of its wall time
 * minus the time its tests ran (baseline, the agent's test runs, grading), which is the harness:
 * checkout, sandbox, environment, agent loop, grading's own work.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { cpus } from 'node:os';
import type { EvalSummary } from '../src/eval/report.js';
import { testTime, type TaskResult } from '../src/eval/run-eval.js';
import { FileEventStore } from '../src/events/file-event-store.js';
import { buildTaskSet } from '../test/support/eval-tasks.js';

/** The machine's busy and total CPU time so far (/proc/stat, in clock ticks), for utilisation. */
function cpuTicks(): { readonly busy: number; readonly total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const total = v.slice(0, 8).reduce((a, b) => a + b, 0);
  // idle and iowait are not busy.
  return { busy: total - (v[3] ?? 0) - (v[4] ?? 0), total };
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? (s[m] ?? NaN) : ((s[m - 1] ?? NaN) + (s[m] ?? NaN)) / 2;
}

export function evalBench(): void {
  const set = buildTaskSet();
  // BENCH_EVAL_CLI: another checkout's CLI (an earlier commit, built), for a before/after pair; its
  // results are read with this checkout's definition of harness time.
  const cli = resolve(process.env.BENCH_EVAL_CLI ?? 'bin/issue-agent.js');
  // The Docker sandbox by default (the must-show's); BENCH_EVAL_SANDBOX=local for the CLI's default.
  const sandbox = process.env.BENCH_EVAL_SANDBOX ?? 'docker';
  console.log(`eval bench: the ${sandbox} sandbox`);
  try {
    const rows: string[] = [];
    const walls: Record<number, number> = {};
    for (const concurrency of [1, 2]) {
      const out = join(set.dir, `out-${concurrency}`);
      const started = performance.now();
      const ticks = cpuTicks();
      execFileSync(
        process.execPath,
        [
          cli,
          'eval',
          set.file,
          '--model',
          'oracle',
          '--sandbox',
          sandbox,
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
      const after = cpuTicks();
      // Busy cores on average: the whole machine (dockerd, containers and their tests included).
      const busy = ((after.busy - ticks.busy) / Math.max(1, after.total - ticks.total)) * cpus().length;
      walls[concurrency] = wall;
      const s = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as EvalSummary;
      // Harness: a task's wall time minus every test run in its log and grading's (run-eval's testTime).
      const results = readFileSync(join(out, 'results.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as TaskResult);
      const harness = median(
        results.map(
          (r) => r.wallMs - testTime(FileEventStore.open(r.trajectory).events) - (r.grade?.testMs ?? 0),
        ),
      );
      rows.push(
        `| ${concurrency} | ${s.resolved}/${s.tasks} | ${(wall / 1000).toFixed(1)} s | ${(s.time.taskWallMedianMs / 1000).toFixed(2)} s | ${(harness / 1000).toFixed(2)} s | ${busy.toFixed(2)} of ${cpus().length} |`,
      );
    }
    console.log(
      '| concurrency | resolved | eval wall | task wall (median) | harness per task (median) | busy cores (machine) |',
    );
    console.log('| --- | --- | --- | --- | --- | --- |');
    for (const r of rows) console.log(r);
    console.log(`\nconcurrency 2 / concurrency 1: ${((walls[2] ?? NaN) / (walls[1] ?? NaN)).toFixed(2)}×`);
  } finally {
    set.cleanup();
  }
}
