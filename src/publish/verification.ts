import { stripAnsi } from '../testing/parse-test-output.js';
import { compareRuns, environmentProblem, verdict, type FileChange } from '../testing/verdict.js';
import type { EventOf } from '../events/schema.js';
import { ENVIRONMENT_HINT } from './outcome-words.js';
import {
  codeSpan,
  fenced,
  formatDuration,
  neutralizeInline,
  tableCell,
  truncateEnd,
  truncateInline,
} from './markdown.js';

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
  /** Applied to every test name, command and output before it is shown (a Redactor's redact). */
  readonly redact?: (text: string) => string;
  /**
   * Lines of a run's output quoted when the run could not run at all (default: 20, or `maxRows` when
   * smaller, so a tight budget quotes less).
   */
  readonly maxOutputLines?: number;
  /** The change's test files run on the code before it, after the final run (testing/verdict.ts). */
  readonly withoutFix?: TestRun | null;
}

/** Test names in the verdict line before "and N more". */
const MAX_VERDICT_NAMES = 10;
/** Longest output line quoted. */
const MAX_OUTPUT_LINE = 300;

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
  const verdictLines = renderVerdict(before, after, options);
  if (verdictLines.length > 0) out.push(...verdictLines, '');
  const commands = [...new Set([before?.command, after?.command].filter((c) => c !== undefined))];
  out.push(`Test command: ${commands.map((c) => codeSpan(truncateEnd(redact(c), 200))).join(' then ')}`);
  const reused = before?.reusedFrom;
  if (reused !== undefined) {
    out.push(
      '',
      `The baseline was not run again: run ${codeSpan(reused.conversationId)} ran it at ${reused.ts} on the same base tree, environment and test command.`,
    );
  }
  if (after?.sandbox === 'fresh') {
    out.push(
      '',
      'The final run was made in a new sandbox that the agent never ran in, on the base commit plus exactly the change in this pull request.',
    );
  }
  const config = after?.runnerConfig;
  if (config !== undefined) out.push('', runnerConfigLine(config, redact, maxName));
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
  // Both runs: the verdict's comparison (a file that could not run is compared with its tests).
  const c = before !== null && after !== null ? compareRuns(before, after) : null;
  if (c?.perTest === true) {
    buckets.set('fixed', c.fixed);
    buckets.set('new_pass', c.newPassing);
    buckets.set('regressed', c.regressed);
    buckets.set('still_failing', c.preExisting);
    buckets.set('new_fail', c.newFailing);
    buckets.set('gone_pass', c.missing);
    buckets.set('gone_fail', c.vanished);
    buckets.set('unchanged', c.unchanged);
  } else {
    const beforeOf = statusIndex(before);
    const afterOf = statusIndex(after);
    for (const name of names) {
      const cat = CATEGORIES.find((k) => k.before === beforeOf(name) && k.after === afterOf(name));
      // absent→absent cannot happen: every name comes from one of the runs.
      if (cat === undefined) continue;
      buckets.set(cat.key, [...(buckets.get(cat.key) ?? []), name]);
    }
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

/** Files of the change named in the runner-configuration line before "and N more". */
const MAX_CONFIG_FILES = 10;

/**
 * The change's files that decide how tests run, which the final run took from the base commit
 * (testing/runner-config.ts): the change did not decide how its own proof ran, and what it does
 * to how tests run is the reviewer's to judge.
 */
function runnerConfigLine(
  config: NonNullable<TestRun['runnerConfig']>,
  redact: (t: string) => string,
  maxName: number,
): string {
  const shown = config.files
    .slice(0, MAX_CONFIG_FILES)
    .map(
      (f) =>
        `${codeSpan(truncateInline(redact(f.path), maxName))} (${neutralizeInline(truncateEnd(redact(f.why), 200))})`,
    );
  const more = config.total - shown.length;
  return `⚠️ **This change changes how tests run:** ${shown.join(', ')}${more > 0 ? ` and ${more} more` : ''}. The final run used the base commit's versions of these files, so the change did not decide how its own proof was run; review what they would change.`;
}

/**
 * What the comparison means, above the tables: when a run could not run at all (the environment is
 * broken), with the first lines of its output; failures that were there before the change; tests the
 * change broke. Empty when there is nothing to add to the tables.
 */
function renderVerdict(
  before: TestRun | null,
  after: TestRun | null,
  options: VerificationOptions,
): string[] {
  const maxRows = options.maxRows ?? 50;
  const maxName = options.maxNameChars ?? 150;
  const maxLines = options.maxOutputLines ?? Math.min(20, maxRows);
  const redact = options.redact ?? ((t: string): string => t);
  const out: string[] = [];
  const problem = (text: string): string => neutralizeInline(truncateEnd(redact(text), 500));
  const beforeProblem = before === null ? null : environmentProblem(before);
  const afterProblem = after === null ? null : environmentProblem(after);
  if (before !== null && beforeProblem !== null) {
    const either =
      afterProblem !== null ? ' The final run could not run either, so nothing was verified.' : '';
    const proof =
      afterProblem === null && after !== null
        ? ' The run after the change has no baseline to be compared with, so it does not show what the change did.'
        : '';
    out.push(
      `⚠️ **The test environment is broken:** the baseline run could not run (${problem(beforeProblem)}).${either}${proof}`,
    );
    const head = firstLines(before.output, maxLines, redact);
    if (head !== '') out.push('', 'The baseline run began with:', '', fenced(head));
    out.push('', ENVIRONMENT_HINT);
  } else if (after !== null && afterProblem !== null) {
    const what =
      before === null
        ? 'the test environment is broken'
        : 'the baseline ran, so the change broke the test setup';
    out.push(`⚠️ **The final run could not run** (${problem(afterProblem)}): ${what}.`);
    const head = firstLines(after.output, maxLines, redact);
    if (head !== '') out.push('', 'The final run began with:', '', fenced(head));
  }
  if (after === null || beforeProblem !== null || afterProblem !== null) return out;

  const withoutFix = options.withoutFix ?? undefined;
  const v = verdict(before, after, withoutFix);
  const c = v.comparison;
  if (withoutFix !== undefined) {
    if (out.length > 0) out.push('');
    const result = resultCell(withoutFix).replace(/^\S+ /, '');
    out.push(
      withoutFix.changeFiles?.total === 0
        ? `The tests were also run again on the code before the change (${result}): a test that passes there did not need the change (its failure before was chance), and is not counted as proof.`
        : `The change's test files were also run on the code before it (${result}): a test that passes there passes without the change's code and is not counted as proof.`,
    );
  }
  if (!c.perTest) return out;
  const names = (list: readonly string[]): string => {
    const take = Math.min(list.length, MAX_VERDICT_NAMES, maxRows);
    const shown = list.slice(0, take).map((n) => codeSpan(truncateInline(redact(n), maxName)));
    const rest = list.length - take;
    if (rest > 0) shown.push(take === 0 ? `${rest} test${rest === 1 ? '' : 's'}` : `and ${rest} more`);
    return shown.join(', ');
  };
  const said: string[] = [];
  const files = (list: readonly FileChange[], when: string, tests: string): string =>
    list
      .slice(0, MAX_VERDICT_NAMES)
      .map(
        (f) =>
          `${codeSpan(truncateInline(redact(f.file), maxName))} (${f.detail} ${when}; ${f.tests} test${f.tests === 1 ? '' : 's'} ${tests})`,
      )
      .join(', ');
  if (c.filesFixed.length > 0) {
    said.push(
      `✅ **Test files that could not run before and whose tests pass now:** ${files(c.filesFixed, 'before', 'passing now')}.`,
    );
  }
  if (c.filesBroken.length > 0) {
    said.push(
      `❌ **Test files whose tests passed before and that cannot run now:** ${files(c.filesBroken, 'now', 'passing before')}.`,
    );
  }
  if (c.regressed.length > 0) said.push(`❌ **Passing before, failing now:** ${names(c.regressed)}.`);
  if (c.preExisting.length > 0) {
    said.push(`**Failing before and after, not caused by this change:** ${names(c.preExisting)}.`);
  }
  if (c.vanished.length > 0) {
    said.push(
      `⚠️ **Failing before, not reported after (removed, renamed or skipped):** ${names(c.vanished)}.`,
    );
  }
  if (v.passWithoutFix.length > 0) {
    said.push(`⚠️ **Passing without the change's code too, so not proof:** ${names(v.passWithoutFix)}.`);
  }
  if (said.length > 0) {
    if (out.length > 0) out.push('');
    out.push(said.join('\n\n'));
  }
  return out;
}

/**
 * The first lines of a run's output, without colour codes, each cut to a readable length. Redacted
 * before it is cut, over the whole region, so no cut leaves a recognisable piece of a secret.
 */
function firstLines(output: string, max: number, redact: (t: string) => string): string {
  if (max <= 0) return '';
  let end = -1;
  for (let i = 0; i < max && end < output.length; i++) {
    const next = output.indexOf('\n', end + 1);
    end = next === -1 ? output.length : next;
  }
  // Bounded, so an enormous first line costs no more than a few short ones. A line the bound cuts is
  // left out: its start alone may hold the head of a secret that the redactor no longer recognises.
  const limit = max * MAX_OUTPUT_LINE * 4;
  const region = output.slice(0, Math.min(end, limit));
  const lines = redact(stripAnsi(region)).split('\n').slice(0, max);
  if (end > limit) lines.pop();
  for (let i = 0; i < lines.length; i++) {
    lines[i] = truncateEnd((lines[i] ?? '').replace(/\r$/, ''), MAX_OUTPUT_LINE);
  }
  while (lines.length > 0 && lines[0]?.trim() === '') lines.shift();
  while (lines.length > 0 && lines[lines.length - 1]?.trim() === '') lines.pop();
  if (lines.length === 0) return '';
  return `${lines.join('\n')}${region.length < output.trimEnd().length ? '\n[…]' : ''}`;
}
