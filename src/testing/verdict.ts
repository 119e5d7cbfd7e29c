/**
 * The verdict of principle 6: from the baseline run (before any edit) and the final run (after the
 * change, both run by the harness), is the change proven by the repository's own tests?
 *
 * Pure: it reads the `test_run` events (two, or three with `without_fix`) and nothing else, so a
 * resumed run, a renderer and a test all reach the same verdict from the same log.
 *
 * Rules, in order:
 * 1. A run that could not run (`environmentProblem`) is not a run whose tests fail. The final run
 *    could not run: unverified. The baseline could not run: unverified too, even when the final run
 *    passes, because nothing shows the tests failing before the change (cause `environment` in both
 *    cases, unless the baseline ran and only the final did not: then the change broke the setup).
 * 2. Both runs name tests: compared test by test. Passing before and failing now is a regression;
 *    passing before and not reported now counts as one when the final run did not finish. Passing
 *    before and not reported by a final run that named all its tests was removed, renamed or
 *    skipped: never resolved either, since a change that skips the test it breaks would otherwise
 *    hide the break (a run past the parser's name cap cannot tell, and is not held to it).
 *    Failing before and after is pre-existing: reported, not held against the change. Failing before
 *    and not reported by a final run that named all its tests was removed, renamed or skipped: never
 *    resolved. Resolved needs no regression, no new test failing, a final run that did not fail
 *    without naming a failure, and proof: a test failing before and passing now, or a new passing
 *    test (new only counts when the baseline finished and its name lists are whole).
 *    A third run decides which of those tests are proof: the code before the change with the
 *    change's test files (`without_fix`; with none, the base run again). A test that passes there
 *    passes without the change's code (a trivial new test, a failing test edited until it passes,
 *    or a flaky test whose failure before was chance) and proves nothing. One that fails there, or
 *    is missing from a run that finished and failed (a test file that cannot load without the code
 *    it tests), is proof.
 * 3. A final run that ran no test (counts of zero), or that names none where the baseline named
 *    some, proves nothing: unverified, whatever its exit code (every test file removed).
 * 4. Otherwise the exit codes decide, as before per-test names existed, and the reason says so.
 */
import type { EventOf } from '../events/schema.js';
import { describeTestRun } from './describe-run.js';
import { clipLine, outputLines } from './output-lines.js';
import { posix } from 'node:path';
import { pythonImportProblem } from './python-import-problem.js';
import {
  compareRuns,
  factsOf,
  finished,
  fullyNamed,
  reported,
  RunView,
  statusOf,
  type FileChange,
  type TestComparison,
} from './compare.js';

export { compareRuns, type TestComparison, type FileChange } from './compare.js';

type TestRun = EventOf<'test_run'>;

export interface Verdict {
  readonly outcome: 'resolved' | 'unverified';
  /**
   * Of the tests that would prove the change (fixed and new passing), those that also pass without
   * the change's code, in the `without_fix` run: not proof. Empty when there was no such run.
   */
  readonly passWithoutFix: string[];
  readonly reason: string;
  /** `environment` when a run could not run at all: the test setup is broken, not the tests. */
  readonly cause?: 'environment';
  readonly comparison: TestComparison;
  /** Why the baseline could not run, or null when it ran (or there was none). */
  readonly baselineProblem: string | null;
  /** Why the final run could not run, or null when it ran. */
  readonly finalProblem: string | null;
}

/** Names listed in a reason before "and N more". */
const MAX_NAMED = 10;

/**
 * Lines that say the test command could not start or could not load its tests; the earliest entry
 * that matches any line wins (its line is quoted). Each test is a literal or a small regex without
 * nested quantifiers, on one line at a time, so the cost stays linear in the output.
 */
const PROBLEMS: readonly { readonly test: (line: string) => boolean; readonly words: string }[] = [
  {
    // bash/zsh "command not found"; dash and busybox "sh: 1: jest: not found".
    test: (l) =>
      /\bcommand not found\b/.test(l) ||
      /^(?:\/\S*\/)?(?:sh|bash|dash|ash|zsh)(?:: line \d+)?: (?:\d+: )?\S+: not found$/.test(l) ||
      l.includes('is not recognized as an internal or external command'),
    words: 'a command was not found',
  },
  { test: (l) => /npm (?:ERR!|error) missing script/i.test(l), words: 'the package has no such npm script' },
  { test: missingNodeModule, words: 'a module could not be loaded' },
];
// Python's import and collection failures come after these, judged over the whole output
// (python-import-problem.ts): those of the repository's own code (a circular import, a name or a
// module the fix adds, a SyntaxError) are a failing run, as a missing relative module is for Node.

/**
 * Node's "Cannot find module/package" and ERR_MODULE_NOT_FOUND. A relative or absolute path outside
 * node_modules is the repository's own file, which a fix may be the one to create, so it does not
 * count; a package (bare name, or a path into node_modules) is a dependency that is not installed.
 */
function missingNodeModule(line: string): boolean {
  const m = /\bCannot find (?:module|package) ['"]([^'"]*)['"]/.exec(line);
  if (m !== null) {
    const spec = m[1] ?? '';
    return !/^(?:\.|\/|[A-Za-z]:[\\/]|file:)/.test(spec) || spec.includes('node_modules');
  }
  // The `code: 'ERR_MODULE_NOT_FOUND'` line of an error object repeats the message judged above.
  return /\bERR_MODULE_NOT_FOUND\b/.test(line) && !/^code:/.test(line) && !line.includes('Cannot find');
}

/**
 * Why a test run could not run at all, or null when it ran (whatever its tests did). "Could not
 * run": exit 126 or 127 (the shell could not execute or find the command), output saying a command,
 * script or dependency is missing or that pytest could not collect for a reason outside the
 * repository's own code (python-import-problem.ts), or a non-zero exit with no test
 * counts and no test names at all. A run in which some test passed did run: a missing module there is
 * one test file's failure, not the environment's. A run that was stopped (time, memory, cancel) is
 * not a setup problem either; the verdict treats it as an incomplete run.
 */
export function environmentProblem(run: TestRun): string | null {
  if (run.killed !== null) return null;
  const s = run.summary;
  if (s.passedNames.length > 0 || (s.passed ?? 0) > 0) return null;
  const exit = run.exitCode;
  const found =
    exit === 0
      ? null
      : (findProblemLine(run.output) ??
        pythonImportProblem(run.output, run.ownModules === undefined ? {} : { ownModules: run.ownModules }));
  if (found !== null) return `${found.words}${exitWords(exit)}: ${found.line}`;
  if (exit === 127) return `the test command was not found (exit code 127)${quoteFirst(run.output)}`;
  if (exit === 126) return `the test command could not be executed (exit code 126)${quoteFirst(run.output)}`;
  const noSummary = s.passed === null && s.failed === null && s.failedNames.length === 0;
  if (exit !== 0 && noSummary) {
    return `the test command failed${exitWords(exit)} without reporting any test${quoteFirst(run.output)}`;
  }
  return null;
}

function exitWords(exit: number | null): string {
  return exit === null ? '' : ` (exit code ${exit})`;
}

function findProblemLine(output: string): { words: string; line: string } | null {
  let best: { rank: number; line: string } | null = null;
  for (const line of outputLines(output)) {
    const limit: number = best === null ? PROBLEMS.length : best.rank;
    const rank: number = PROBLEMS.slice(0, limit).findIndex((p) => p.test(line));
    if (rank !== -1) best = { rank, line: clipLine(line) };
    if (best?.rank === 0) break;
  }
  if (best === null) return null;
  return { words: PROBLEMS[best.rank]?.words ?? '', line: best.line };
}

function quoteFirst(output: string): string {
  for (const line of outputLines(output)) return `: ${clipLine(line)}`;
  return '';
}

/** "test/a.test.js (out of memory before; its 3 tests pass now)". */
function fixedWords(f: FileChange): string {
  return `${f.file} (${f.detail} before; ${testsWord(f.tests)} ${f.tests === 1 ? 'passes' : 'pass'} now)`;
}

/** "test/a.test.js (timed out now; its 3 tests passed before)". */
function brokenWords(f: FileChange): string {
  return `${f.file} (${f.detail} now; ${testsWord(f.tests)} passed before)`;
}

function testsWord(n: number): string {
  return n === 1 ? 'its 1 test' : `its ${n} tests`;
}

/** "a, b, c" or "a, b, … and 3 more". */
export function listNames(list: readonly string[], max = MAX_NAMED): string {
  const shown = list.slice(0, max).join(', ');
  return list.length > max ? `${shown} and ${list.length - max} more` : shown;
}

/** The verdict with its comparison: see the rules at the top of this file. */
export function verdict(baseline: TestRun | null, final: TestRun, withoutFix?: TestRun): Verdict {
  const comparison = compareRuns(baseline, final);
  const baselineProblem = baseline === null ? null : environmentProblem(baseline);
  const finalProblem = environmentProblem(final);
  const problems = { comparison, baselineProblem, finalProblem, passWithoutFix: [] };
  const after = describeTestRun(final);

  if (finalProblem !== null) {
    const reason =
      baselineProblem !== null
        ? `the test environment is broken: neither the baseline nor the final test run could run, so the change is not proven (final run: ${finalProblem})`
        : baseline === null
          ? `the test environment is broken: the final test run could not run, so the change is not proven (${finalProblem})`
          : `the final test run could not run, though the baseline did: the change broke the test setup (${finalProblem})`;
    const environment = baseline === null || baselineProblem !== null;
    return {
      outcome: 'unverified',
      reason,
      ...(environment ? { cause: 'environment' as const } : {}),
      ...problems,
    };
  }
  if (baselineProblem !== null) {
    return {
      outcome: 'unverified',
      cause: 'environment',
      reason: `the test environment is broken: the baseline test run could not run (${baselineProblem}), so a final run that ${final.exitCode === 0 && final.killed === null ? 'passes' : 'fails'} does not show what the change did (${after})`,
      ...problems,
    };
  }
  // A final run that ran no test proves nothing, whatever its exit code: every test file removed, or
  // none found. So does one that names no test where the baseline named some.
  const ranNone = final.summary.passed === 0 && (final.summary.failed ?? 0) === 0;
  const baselineNames = baseline === null ? 0 : reported(baseline);
  // A baseline that named only some of its tests (runners that name failures only: unittest, go
  // without -v) is followed by a final run naming none when they all pass: that is "removed" only
  // when fewer tests ran than before, or when the counts do not say.
  const namedNone =
    baselineNames > 0 &&
    reported(final) === 0 &&
    finished(final) &&
    (baseline === null || fullyNamed(baseline) || !countedNoFewer(baseline, final));
  if (ranNone || namedNone) {
    const what = ranNone ? 'ran no test' : `names no test, though the baseline named ${baselineNames}`;
    return {
      outcome: 'unverified',
      reason: `the final test run ${what}: the tests were removed or not found, so nothing shows the change works (${after})`,
      ...problems,
    };
  }
  if (comparison.perTest && baseline !== null)
    return byTest(baseline, final, comparison, problems, withoutFix);
  const byCode = byExitCode(baseline, final, after);
  if (byCode.outcome === 'resolved' && withoutFix !== undefined && passes(withoutFix)) {
    return {
      outcome: 'unverified',
      reason: `the tests pass without the change's code too (${withoutFixWords(withoutFix)}: ${describeTestRun(withoutFix)}), so they do not show that the change fixes anything (judged by exit code, because the test runner did not name individual tests)`,
      ...problems,
    };
  }
  // A runner that names failures only, quiet when all pass: as many tests ran, but which? The tests
  // that failed before must fail again without the change, or they may have been replaced.
  const quiet = baselineNames > 0 && reported(final) === 0 && baseline !== null;
  if (byCode.outcome === 'resolved' && quiet && withoutFix !== undefined) {
    const again = new Set(withoutFix.summary.failedNames);
    const notAgain = baseline.summary.failedNames.filter((n) => !again.has(n));
    if (notAgain.length > 0) {
      return {
        outcome: 'unverified',
        reason: `the final run names no test (its runner names failures only), and tests that failed before do not fail without the change (${withoutFixWords(withoutFix)}), so they may have been removed or replaced rather than fixed: ${listNames(notAgain)} (${after})`,
        ...problems,
      };
    }
  }
  return { ...byCode, ...problems };
}

function byTest(
  baseline: TestRun,
  final: TestRun,
  c: TestComparison,
  problems: Pick<Verdict, 'comparison' | 'baselineProblem' | 'finalProblem' | 'passWithoutFix'>,
  withoutFix: TestRun | undefined,
): Verdict {
  const after = describeTestRun(final);
  const preExisting =
    c.preExisting.length > 0
      ? `; failing before and after, not caused by this change: ${listNames(c.preExisting)}`
      : '';
  const unverified = (why: string): Verdict => ({
    outcome: 'unverified',
    reason: `${why}${preExisting} (${after})`,
    ...problems,
  });
  if (final.killed !== null) return unverified(`the final test run did not finish`);
  const lost = finished(final) ? [] : c.missing;
  if (c.regressed.length > 0 || lost.length > 0) {
    const parts: string[] = [];
    const broken = new Set(c.filesBroken.map((f) => f.file));
    const tests = c.regressed.filter((n) => !broken.has(n));
    if (c.filesBroken.length > 0) {
      parts.push(
        `test files whose tests passed before cannot run now: ${listNames(c.filesBroken.map(brokenWords))}`,
      );
    }
    if (tests.length > 0) {
      parts.push(`tests that passed before fail now: ${listNames(tests)}`);
    }
    if (lost.length > 0) {
      parts.push(
        `tests that passed before are not reported by the final run, which did not finish: ${listNames(lost)}`,
      );
    }
    return unverified(`the change breaks tests — ${parts.join('; ')}`);
  }
  if (c.newFailing.length > 0) {
    return unverified(`new tests fail: ${listNames(c.newFailing)}`);
  }
  // A failing test that the final run no longer reports was removed, renamed or skipped: whatever
  // else passes, the failure it showed is not shown fixed (a run that named only part of its tests
  // cannot tell).
  if (c.vanished.length > 0 && fullyNamed(final)) {
    return unverified(
      `tests that failed before are not reported by the final run (removed, renamed or skipped), so the change does not show them fixed: ${listNames(c.vanished)}`,
    );
  }
  // A passing test that a final run naming all its tests no longer reports was removed, renamed or
  // skipped: the change may hide what it breaks, so it does not stand as proven.
  if (c.missing.length > 0 && fullyNamed(final)) {
    return unverified(
      `tests that passed before are not reported by the final run (removed, renamed or skipped), so the change may hide what it breaks: ${listNames(c.missing)}`,
    );
  }
  if (final.exitCode !== 0 && final.summary.failedNames.length === 0) {
    return unverified(
      `the final test run fails (exit code ${String(final.exitCode)}) without naming a failing test, so its failure cannot be compared with the baseline`,
    );
  }
  const newIsNew = fullyNamed(baseline);
  const candidates = newIsNew ? [...c.fixed, ...c.newPassing] : c.fixed;
  const without = withoutFix === undefined ? null : provesWithout(withoutFix, final, new Set(c.fixed));
  const shows = (n: string): Without => (without === null ? 'fails' : without(n));
  const passWithoutFix = candidates.filter((n) => shows(n) === 'passes');
  const edited = candidates.filter((n) => shows(n) === 'edited');
  const proof = candidates.filter((n) => shows(n) === 'fails');
  if (proof.length === 0 && (passWithoutFix.length > 0 || edited.length > 0)) {
    const why = [
      ...(passWithoutFix.length > 0
        ? [
            `the tests that would prove the change also pass without it (${withoutFixWords(withoutFix)}), so they do not show that the change fixes anything: ${listNames(passWithoutFix)}`,
          ]
        : []),
      ...(edited.length > 0 ? [editedWords(edited)] : []),
    ];
    return { ...unverified(why.join('; ')), passWithoutFix };
  }
  if (proof.length === 0) {
    const why =
      c.newPassing.length > 0
        ? 'the baseline run did not finish or named only part of its tests, so the tests passing now are not known to be new, and no test that failed before passes now'
        : 'no test that failed before passes now and no new test passes, so no test demonstrates the fix';
    return unverified(why);
  }
  const proven = new Set(proof);
  const filesFixed = c.filesFixed.filter((f) => proven.has(f.file));
  const reconciled = new Set(filesFixed.map((f) => f.file));
  const fixed = c.fixed.filter((n) => proven.has(n) && !reconciled.has(n));
  const added = newIsNew ? c.newPassing.filter((n) => proven.has(n)) : [];
  const shown: string[] = [];
  if (filesFixed.length > 0) {
    shown.push(
      `test files that could not run before run now and their tests pass: ${listNames(filesFixed.map(fixedWords))}`,
    );
  }
  if (fixed.length > 0) shown.push(`tests that failed before pass now: ${listNames(fixed)}`);
  if (added.length > 0) shown.push(`new passing tests: ${listNames(added)}`);
  if (without !== null) shown.push(`each fails without the change (${withoutFixWords(withoutFix)})`);
  const notProof =
    (passWithoutFix.length > 0
      ? `; passing without the change too, so not counted as proof: ${listNames(passWithoutFix)}`
      : '') + (edited.length > 0 ? `; not counted as proof either: ${editedWords(edited)}` : '');
  return {
    outcome: 'resolved',
    reason: `no test that passed before fails now, and ${shown.join('; ')}${notProof}${preExisting} (${after})`,
    ...problems,
    passWithoutFix,
  };
}

/**
 * Which tests the `without_fix` run shows failing without the change's code: those it reports
 * failing (or whose file it reports failing as a whole), and those it does not report at all when
 * it finished and failed (a test file that cannot load without the code it tests fails as a whole,
 * under the file's name or none). A run that was stopped shows only what it reported.
 */
function provesWithout(run: TestRun, final: TestRun, existed: ReadonlySet<string>): (id: string) => Without {
  const without = new RunView(factsOf(run));
  const now = new RunView(factsOf(final));
  const failedWhole = finished(run) && run.exitCode !== 0 && listWhole(run);
  const edited = editedFiles(run, now);
  // A test that was there before, in a file the change edited (or beside a test helper it edited),
  // that fails here: what fails is the change's version of it, which may need the change's code to
  // run at all (an edited expectation beside an import of a name the change adds, in the file or in
  // the test's body), and says nothing of whether the test as it was passes with the change. Not
  // proof; a new test of the change's is.
  const judged = (id: string, file: string | null, fails: boolean): Without =>
    !fails ? 'passes' : existed.has(id) && file !== null && edited(file) ? 'edited' : 'fails';
  const fileFails = (file: string): boolean => {
    const s = without.fileStatus(file);
    return s === 'fail' || (s === 'absent' && failedWhole);
  };
  return (id) => {
    const fact = now.byId.get(id);
    // A whole file's id: one that could not run before and whose tests pass now (the final run
    // reports its tests, not the file), or a file fact of the final run.
    if (fact === undefined) return judged(id, id, now.testsOfFile.has(id) && fileFails(id));
    if (fact.file !== null && fact.id === fact.file) return judged(id, fact.file, fileFails(fact.file));
    const m = without.match(fact);
    // An expected failure (pytest's xfail) on the code before the change is that code failing it.
    if (m !== undefined) return judged(id, fact.file, statusOf(m) === 'fail' || m.detail === 'xfail');
    if (fact.file !== null && without.fileLevel.has(fact.file))
      return judged(id, fact.file, without.fileStatus(fact.file) === 'fail');
    return judged(id, fact.file, failedWhole);
  };
}

/** What a `without_fix` run shows of one test that would prove the change (see provesWithout). */
type Without = 'fails' | 'passes' | 'edited';

/** Source files a test may import (a helper); data files (fixtures, snapshots) are judged by what they do. */
const CODE_FILE = /\.(?:py|pyi|js|mjs|cjs|jsx|ts|mts|cts|tsx|rb|go|java|kt|rs|php|cs|swift|scala|exs?)$/;

/**
 * Whether a test file is one the `without_fix` run took from the change, or sits beside (in its
 * folder or below) a source file it took that is no test file of the final run (a helper the tests
 * import): by the recorded paths; past their cap every file may be one; a run recorded before it
 * named them took none of them as such. A data file the change edited (an expected output) is no
 * such file: a test it makes pass passes in the `without_fix` run too, and is no proof there.
 */
function editedFiles(run: TestRun, final: RunView): (file: string) => boolean {
  const taken = run.changeFiles;
  if (taken === undefined) return () => false;
  const paths = new Set(taken.paths);
  const folders = taken.paths
    .filter((p) => CODE_FILE.test(p) && !final.testsOfFile.has(p) && !final.fileLevel.has(p))
    .map((p) => posix.dirname(p));
  const under = (file: string, folder: string): boolean => folder === '.' || file.startsWith(`${folder}/`);
  return (file) => paths.has(file) || taken.total > taken.paths.length || folders.some((f) => under(file, f));
}

/** Why tests that failed before, in files the change edited, are not proof (see provesWithout). */
function editedWords(tests: readonly string[]): string {
  return `tests that failed before pass now only as the change edited their test files (or helpers beside them), so nothing shows the tests as they were pass with the change: ${listNames(tests)}`;
}

/**
 * What a `without_fix` run was: the change's test files on the code before it, or, when the change
 * has none, the code before it run again (a failure before that was chance passes there).
 */
function withoutFixWords(run: TestRun | undefined): string {
  return run?.changeFiles?.total === 0
    ? 'the tests run again on the code before it'
    : "the change's test files run on the code before it";
}

/** Whether both runs counted their tests, and the final run counted at least as many as the baseline. */
function countedNoFewer(baseline: TestRun, final: TestRun): boolean {
  const counted = (r: TestRun): number | null =>
    r.summary.passed === null || r.summary.failed === null ? null : r.summary.passed + r.summary.failed;
  const before = counted(baseline);
  const after = counted(final);
  return before !== null && after !== null && before > 0 && after >= before;
}

/** A list that was cut (at a cap, or a report cut short) cannot show a test missing from it. */
function listWhole(run: TestRun): boolean {
  const s = run.summary;
  if (s.idScheme === 2) return s.complete === true;
  return s.passedNames.length < 500 && s.failedNames.length < 500;
}

function passes(run: TestRun): boolean {
  return run.killed === null && run.exitCode === 0;
}

/**
 * Whether the verdict would be `resolved` from the baseline and the final run alone: then the
 * `without_fix` run must be made before the verdict is given.
 */
export function wouldResolve(baseline: TestRun | null, final: TestRun): boolean {
  return verdict(baseline, final).outcome === 'resolved';
}

/**
 * The files, as the final run names them, of the tests that would prove the change (fixed, and new
 * passing when the baseline's lists are whole). A changed file among them is run at the change's
 * version in `without_fix`, whatever its name, so an expectation edited in it is never proof.
 * Tests known only by name (runners that do not say their file) add nothing.
 */
export function proofFiles(baseline: TestRun | null, final: TestRun): Set<string> {
  const files = new Set<string>();
  if (baseline === null) return files;
  const c = compareRuns(baseline, final);
  if (!c.perTest) return files;
  const now = new RunView(factsOf(final));
  for (const id of fullyNamed(baseline) ? [...c.fixed, ...c.newPassing] : c.fixed) {
    const file = now.byId.get(id)?.file;
    if (file !== null && file !== undefined) files.add(file);
  }
  return files;
}

/** The rule for runners that do not name tests: the final run must exit 0. */
function byExitCode(
  baseline: TestRun | null,
  final: TestRun,
  after: string,
): Pick<Verdict, 'outcome' | 'reason'> {
  const by = 'judged by exit code, because the test runner did not name individual tests';
  if (final.killed !== null || final.exitCode !== 0) {
    return { outcome: 'unverified', reason: `the final test run does not pass — ${after} (${by})` };
  }
  if (baseline === null)
    return { outcome: 'resolved', reason: `the final test run passes (${after}; ${by})` };
  if (baseline.exitCode !== 0 || baseline.killed !== null) {
    return {
      outcome: 'resolved',
      reason: `before: ${describeTestRun(baseline)}; after: ${after} (${by})`,
    };
  }
  const before = baseline.summary.passed ?? 0;
  const now = final.summary.passed ?? 0;
  if (now > before) {
    return {
      outcome: 'resolved',
      reason: `the tests passed before and pass after, with ${now - before} new passing test(s) covering the change (${after}; ${by})`,
    };
  }
  return {
    outcome: 'unverified',
    reason: `the tests passed before the change too, and no new test demonstrates the fix (${after}; ${by})`,
  };
}
