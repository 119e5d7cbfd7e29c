import type { EventOf } from '../events/schema.js';
import { codeSpan, formatDuration, tableCell, truncateEnd, truncateInline } from './markdown.js';

type TestRun = EventOf<'test_run'>;
type Status = 'pass' | 'fail' | 'absent';

/** Rows of the per-test table, most telling first: what the change fixed leads, then what it broke. */
const CATEGORIES = [
  { key: 'fixed', before: 'fail', after: 'pass', words: 'fixed' },
  { key: 'new_pass', before: 'absent', after: 'pass', words: 'new and passing' },
  { key: 'regressed', before: 'pass', after: 'fail', words: 'passing before, failing now' },
  { key: 'still_failing', before: 'fail', after: 'fail', words: 'still failing' },
  { key: 'new_fail', before: 'absent', after: 'fail', words: 'new and failing' },
  { key: 'gone_pass', before: 'pass', after: 'absent', words: 'passing before, not reported now' },
  { key: 'gone_fail', before: 'fail', after: 'absent', words: 'failing before, not reported now' },
  { key: 'unchanged', before: 'pass', after: 'pass', words: 'passing before and after' },
] as const satisfies readonly { key: string; before: Status; after: Status; words: string }[];

const ICON: Record<Status, string> = { pass: '✅', fail: '❌', absent: '—' };

export interface VerificationOptions {
  /** Rows of the per-test table before "and N more" (default 50). */
  readonly maxRows?: number;
  /** Longest test name shown, in characters (default 150). */
  readonly maxNameChars?: number;
  /** Why there is no run at all, when neither run exists. */
  readonly noTestsReason?: string;
  /** Applied to every test name and command before it is shown (a Redactor's redact). */
  readonly redact?: (text: string) => string;
}

function statusIndex(run: TestRun | null): (name: string) => Status {
  if (run === null) return () => 'absent';
  const failed = new Set(run.summary.failedNames);
  const passed = new Set(run.summary.passedNames);
  // A name in both lists (a retried test) counts as failed, as the parser reports it.
  return (name) => (failed.has(name) ? 'fail' : passed.has(name) ? 'pass' : 'absent');
}

function resultCell(run: TestRun | null): string {
  if (run === null) return 'not run';
  if (run.killed !== null) return `⛔ killed (${run.killed})`;
  if (run.exitCode === 0) return '✅ exit 0';
  return `❌ exit ${run.exitCode === null ? '?' : run.exitCode}`;
}

function count(run: TestRun | null, pick: (r: TestRun) => number | null): string {
  if (run === null) return '—';
  const n = pick(run);
  return n === null ? '?' : String(n);
}

/**
 * The verification section: counts before (the baseline run, before any edit) and after (the final
 * run, by the harness), then each named test with its status in both runs. Only names the test
 * output gave are listed (the parser keeps up to 500 per list), so the counts can exceed the rows.
 */
export function renderVerification(
  before: TestRun | null,
  after: TestRun | null,
  options: VerificationOptions = {},
): string {
  const maxRows = options.maxRows ?? 50;
  const maxName = options.maxNameChars ?? 150;
  const redact = options.redact ?? ((t: string): string => t);
  if (before === null && after === null) {
    return options.noTestsReason ?? 'No test run was recorded.';
  }
  const out: string[] = [];
  const commands = [...new Set([before?.command, after?.command].filter((c) => c !== undefined))];
  out.push(`Test command: ${commands.map((c) => codeSpan(truncateEnd(redact(c), 200))).join(' then ')}`);
  out.push('');
  out.push('| | Before (baseline) | After (final) |');
  out.push('| --- | ---: | ---: |');
  out.push(
    `| Passed | ${count(before, (r) => r.summary.passed)} | ${count(after, (r) => r.summary.passed)} |`,
  );
  out.push(
    `| Failed | ${count(before, (r) => r.summary.failed)} | ${count(after, (r) => r.summary.failed)} |`,
  );
  out.push(
    `| Skipped | ${count(before, (r) => r.summary.skipped)} | ${count(after, (r) => r.summary.skipped)} |`,
  );
  out.push(`| Result | ${resultCell(before)} | ${resultCell(after)} |`);
  const duration = (r: TestRun | null): string => (r === null ? '—' : formatDuration(r.durationMs));
  out.push(`| Duration | ${duration(before)} | ${duration(after)} |`);

  const names = new Set<string>();
  for (const run of [before, after]) {
    if (run === null) continue;
    for (const n of run.summary.failedNames) names.add(n);
    for (const n of run.summary.passedNames) names.add(n);
  }
  if (names.size === 0) {
    out.push('');
    out.push('The test output did not name individual tests; only the counts are known.');
    return out.join('\n');
  }

  const buckets = new Map<string, string[]>();
  const beforeOf = statusIndex(before);
  const afterOf = statusIndex(after);
  for (const name of names) {
    const b = beforeOf(name);
    const a = afterOf(name);
    const cat = CATEGORIES.find((c) => c.before === b && c.after === a);
    // absent→absent cannot happen: every name comes from one of the runs.
    if (cat === undefined) continue;
    const list = buckets.get(cat.key) ?? [];
    list.push(name);
    buckets.set(cat.key, list);
  }
  out.push('');
  out.push('| Test | Before | After |');
  out.push('| --- | :---: | :---: |');
  let shown = 0;
  const omitted: string[] = [];
  let omittedTotal = 0;
  for (const cat of CATEGORIES) {
    const list = (buckets.get(cat.key) ?? []).sort((x, y) => x.localeCompare(y));
    const take = Math.max(0, Math.min(list.length, maxRows - shown));
    for (const name of list.slice(0, take)) {
      out.push(
        `| ${tableCell(codeSpan(truncateInline(redact(name), maxName)))} | ${ICON[cat.before]} | ${ICON[cat.after]} |`,
      );
    }
    shown += take;
    const rest = list.length - take;
    if (rest > 0) {
      omitted.push(`${rest} ${cat.words}`);
      omittedTotal += rest;
    }
  }
  if (omittedTotal > 0) out.push(`| *… and ${omittedTotal} more: ${omitted.join(', ')}* | | |`);
  return out.join('\n');
}
