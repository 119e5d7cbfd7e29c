import { rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Usage } from '../events/schema.js';
import type { Skipped } from './from-repo.js';
import type { EvalRun, TaskResult } from './run-eval.js';

/**
 * The eval's report, from the per-task results only (each of which was read off its task's event log
 * and its grading): `results.jsonl` (one result per task), `predictions.jsonl` (SWE-bench's
 * `instance_id`, `model_name_or_path`, `model_patch`, for its own harness), `summary.json` and
 * `summary.md`, and the same table for the terminal.
 */

export interface EvalSummary {
  readonly model: string;
  readonly sandbox: string;
  readonly tasks: number;
  /** Independent attempts per task. */
  readonly attempts: number;
  /** Attempts finished (graded or failed by the harness), of tasks × attempts. */
  readonly completed: number;
  readonly interrupted: readonly string[];
  /** Tasks resolved by at least one attempt (pass@k for k = attempts; plainly "resolved" for one). */
  readonly resolved: number;
  /** Of all tasks in the set (an unfinished task counts as not resolved). */
  readonly resolvedPercent: number;
  /** Resolved attempts, and their share of tasks × attempts (pass@1 averaged over the attempts). */
  readonly resolvedAttempts: number;
  readonly attemptResolvedPercent: number;
  /** The agent's outcomes, and the grades, with their counts. */
  readonly outcomes: Readonly<Record<string, number>>;
  readonly grades: Readonly<Record<string, number>>;
  readonly usage: Usage;
  readonly tokens: number;
  readonly usd: number;
  readonly steps: number;
  readonly time: {
    /** This eval run, start to end. */
    readonly wallMs: number;
    readonly taskWallMedianMs: number;
    readonly agentMedianMs: number;
    /** Per task, everything but running tests (sandbox, setup, agent loop, grading's own work). */
    readonly harnessMedianMs: number;
  };
  /** For a task set built from a repository's history: the repository and the issues it skipped. */
  readonly source?: { readonly repo: string; readonly skipped: readonly Skipped[] };
  /** With the oracle: tasks the gold patch did not resolve, which are the harness's (or the task's) bugs. */
  readonly harnessBugs: readonly { readonly instance_id: string; readonly reason: string }[];
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

function count(values: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of values) out[v] = (out[v] ?? 0) + 1;
  return out;
}

export function summarize(
  run: EvalRun,
  meta: {
    readonly total: number;
    readonly attempts: number;
    readonly model: string;
    readonly sandbox: string;
    readonly source?: EvalSummary['source'];
  },
): EvalSummary {
  const r = run.results;
  const resolved = new Set(r.filter((x) => x.resolved).map((x) => x.instance_id)).size;
  const resolvedAttempts = r.filter((x) => x.resolved).length;
  const runs = meta.total * meta.attempts;
  const usage: Usage = {
    inputTokens: r.reduce((n, x) => n + x.usage.inputTokens, 0),
    outputTokens: r.reduce((n, x) => n + x.usage.outputTokens, 0),
    cacheReadTokens: r.reduce((n, x) => n + x.usage.cacheReadTokens, 0),
    cacheWriteTokens: r.reduce((n, x) => n + x.usage.cacheWriteTokens, 0),
  };
  return {
    model: meta.model,
    sandbox: meta.sandbox,
    tasks: meta.total,
    attempts: meta.attempts,
    completed: r.length,
    interrupted: run.interrupted,
    resolved,
    resolvedPercent: meta.total === 0 ? 0 : Math.round((1000 * resolved) / meta.total) / 10,
    resolvedAttempts,
    attemptResolvedPercent: runs === 0 ? 0 : Math.round((1000 * resolvedAttempts) / runs) / 10,
    outcomes: count(r.map((x) => x.outcome)),
    grades: count(r.map((x) => x.grade?.status ?? 'error')),
    usage,
    tokens: r.reduce((n, x) => n + x.tokens, 0),
    usd: r.reduce((n, x) => n + x.usd, 0),
    steps: r.reduce((n, x) => n + x.steps, 0),
    time: {
      wallMs: run.wallMs,
      taskWallMedianMs: median(r.map((x) => x.wallMs)),
      agentMedianMs: median(r.map((x) => x.agentMs)),
      harnessMedianMs: median(r.map((x) => Math.max(0, x.wallMs - x.testMs))),
    },
    ...(meta.source === undefined ? {} : { source: meta.source }),
    harnessBugs:
      meta.model === 'oracle'
        ? r
            .filter((x) => !x.resolved)
            .map((x) => ({
              instance_id: x.attempt === 1 ? x.instance_id : `${x.instance_id} (attempt ${x.attempt})`,
              reason: reasonOf(x),
            }))
        : [],
  };
}

export function reasonOf(x: TaskResult): string {
  if (x.resolved) return '';
  if (x.grade === null) return x.outcomeReason ?? x.outcome;
  return x.grade.reason ?? x.grade.status;
}

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
const dollars = (usd: number): string => `$${usd.toFixed(4)}`;

function passedOf(x: TaskResult, which: 'FAIL_TO_PASS' | 'PASS_TO_PASS'): string {
  const t = x.grade?.tests[which];
  if (t === undefined) return '–';
  const n = t.success.length + t.failure.length;
  return n === 0 ? '–' : `${t.success.length}/${n}`;
}

function rows(results: readonly TaskResult[]): string[][] {
  return results.map((x) => [
    x.attempt === 1 ? x.instance_id : `${x.instance_id} (${x.attempt})`,
    x.resolved ? 'yes' : 'no',
    x.outcome,
    passedOf(x, 'FAIL_TO_PASS'),
    passedOf(x, 'PASS_TO_PASS'),
    String(x.tokens),
    dollars(x.usd),
    String(x.steps),
    seconds(x.wallMs),
    reasonOf(x),
  ]);
}

const HEAD = [
  'task',
  'resolved',
  'agent outcome',
  'F2P',
  'P2P',
  'tokens',
  'cost',
  'steps',
  'time',
  'why not',
];

function totals(s: EvalSummary): string[] {
  return [
    `resolved: ${s.resolved}/${s.tasks} (${s.resolvedPercent}%)${s.attempts > 1 ? ` by any of ${s.attempts} attempts; per attempt ${s.resolvedAttempts}/${s.tasks * s.attempts} (${s.attemptResolvedPercent}%)` : ''}${s.interrupted.length > 0 ? `, ${s.interrupted.length} not finished` : ''}`,
    `outcomes: ${Object.entries(s.outcomes)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}`,
    `tokens: ${s.tokens} (in ${s.usage.inputTokens}, out ${s.usage.outputTokens}, cache read ${s.usage.cacheReadTokens}, cache write ${s.usage.cacheWriteTokens})`,
    `cost: ${dollars(s.usd)}; steps: ${s.steps}`,
    `time: ${seconds(s.time.wallMs)} in all; per task median ${seconds(s.time.taskWallMedianMs)}, agent ${seconds(s.time.agentMedianMs)}, harness (all but tests) ${seconds(s.time.harnessMedianMs)}`,
  ];
}

/** The table for a terminal: aligned columns, the reason last (it may be long). */
export function terminalReport(results: readonly TaskResult[], s: EvalSummary): string {
  const all = [HEAD, ...rows(results)];
  const widths = HEAD.slice(0, -1).map((_, i) => Math.max(...all.map((r) => (r[i] ?? '').length)));
  const line = (r: readonly string[]): string =>
    r
      .map((c, i) => (i < widths.length ? c.padEnd(widths[i] ?? 0) : c))
      .join('  ')
      .trimEnd();
  const bugs =
    s.harnessBugs.length > 0
      ? [
          '',
          'The oracle did not resolve these: the harness (environment, detection, grading) or the task is wrong:',
          ...s.harnessBugs.map((b) => `  ${b.instance_id}: ${b.reason}`),
        ]
      : [];
  return [
    ...all.map(line),
    '',
    ...totals(s),
    ...bugs,
    ...sourceLines(s).map((l) => l.replace(/^- /, '  ')),
  ].join('\n');
}

/** Which issues of the repository made no task, and why. */
function sourceLines(s: EvalSummary): string[] {
  if (s.source === undefined) return [];
  const skipped = s.source.skipped;
  return [
    '',
    `Tasks from ${s.source.repo}: ${s.tasks} built, ${skipped.length} closed issue(s) skipped${skipped.length > 0 ? ':' : '.'}`,
    ...skipped.map((k) => `- #${k.issue}${k.pull === null ? '' : ` (pull request #${k.pull})`}: ${k.reason}`),
  ];
}

const cell = (text: string): string => text.replace(/\|/g, '\\|').replace(/\n/g, ' ');

export function markdownReport(results: readonly TaskResult[], s: EvalSummary): string {
  const table = [
    `| ${HEAD.join(' | ')} |`,
    `|${HEAD.map(() => ' --- ').join('|')}|`,
    ...rows(results).map((r) => `| ${r.map(cell).join(' | ')} |`),
  ];
  return [
    `# Eval: ${s.resolvedPercent}% resolved (${s.resolved}/${s.tasks})${s.attempts > 1 ? ` by any of ${s.attempts} attempts` : ''}`,
    '',
    `Model: ${s.model}; sandbox: ${s.sandbox}.`,
    '',
    ...totals(s).map((t) => `- ${t}`),
    '',
    ...table,
    ...(s.harnessBugs.length > 0
      ? [
          '',
          '## Harness bugs',
          '',
          'With the oracle (the gold patch as the model), a task that is not resolved is a bug of the harness or of the task:',
          '',
          ...s.harnessBugs.map((b) => `- ${b.instance_id}: ${cell(b.reason)}`),
        ]
      : []),
    ...(s.source === undefined
      ? []
      : [
          '',
          '## Task set',
          ...sourceLines(s).map((l) => (l.startsWith('- ') ? `- ${cell(l.slice(2))}` : l)),
        ]),
    '',
  ].join('\n');
}

async function writeAtomic(path: string, text: string): Promise<void> {
  await writeFile(`${path}.tmp`, text);
  await rename(`${path}.tmp`, path);
}

export async function writeReport(
  out: string,
  results: readonly TaskResult[],
  s: EvalSummary,
): Promise<void> {
  const jsonl = (values: readonly unknown[]): string => values.map((v) => `${JSON.stringify(v)}\n`).join('');
  await writeAtomic(join(out, 'results.jsonl'), jsonl(results));
  await writeAtomic(
    join(out, 'predictions.jsonl'),
    // One prediction per task, SWE-bench's format: the first attempt's (choosing the best attempt
    // by its grade would be pass@k, not a prediction).
    jsonl(
      results
        .filter((x) => x.attempt === 1)
        .map((x) => ({
          instance_id: x.instance_id,
          model_name_or_path: `issue-agent/${x.model}`,
          model_patch: x.patch ?? '',
        })),
    ),
  );
  await writeAtomic(join(out, 'summary.json'), `${JSON.stringify(s, null, 2)}\n`);
  await writeAtomic(join(out, 'summary.md'), markdownReport(results, s));
}
