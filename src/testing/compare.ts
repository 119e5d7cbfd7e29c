/**
 * Two runs of the same suite compared test by test, with whole files reconciled with their tests:
 * the comparison the verdict, the pull request's table and the attempt ranking all read.
 *
 * - Tests are matched by id; an id without a file (a runner that did not say it) matches the one
 *   test of that name in the other run (sameTest).
 * - A file that one run reports as a whole (it crashed, hung or ran out of memory, or jest printed
 *   `PASS file` without its tests) is compared with the other run's tests of that file taken
 *   together: failing if any fails, passing if some pass and none fails. Those tests are not
 *   compared one by one as well (they did not run, or were not named, in the first run), so a file
 *   that crashed before and whose tests all pass now is one fixed file, not a failure that
 *   vanished plus new passing tests; a file whose tests passed before and that crashes now is one
 *   regression.
 * - Skipped tests compare as not reported.
 * - Runs recorded before ids carried files (no `idScheme`) are compared only with runs like them.
 */
import type { EventOf } from '../events/schema.js';
import { NAME_CAP } from './parse-test-output.js';
import { isFailing, nameOf, type TestFact } from './test-run.js';

type TestRun = EventOf<'test_run'>;
export type Status = 'pass' | 'fail' | 'absent';

/** A file reported whole in one run and test by test in the other. */
export interface FileChange {
  readonly file: string;
  /** What the whole file did ("out of memory", "timed out", "failed to load", "crashed"). */
  readonly detail: string;
  /** Tests of the file the other run reported. */
  readonly tests: number;
}

/** The test-by-test comparison of the baseline and the final run, for the verdict and renderers. */
export interface TestComparison {
  /** Both runs named tests, so the lists below mean something; false: the verdict went by exit code. */
  readonly perTest: boolean;
  /** Failing at baseline, passing now (a test id, or a file that could not run before). */
  readonly fixed: string[];
  /** Not reported at baseline, passing now. */
  readonly newPassing: string[];
  /** Passing at baseline, failing now. */
  readonly regressed: string[];
  /** Failing at baseline and still failing: not caused by the change. */
  readonly preExisting: string[];
  /** Not reported at baseline, failing now (a test the change added or could not make pass). */
  readonly newFailing: string[];
  /** Passing at baseline, not reported now. */
  readonly missing: string[];
  /** Failing at baseline, not reported now: removed, renamed or skipped. */
  readonly vanished: string[];
  /** Passing at baseline and now. */
  readonly unchanged: string[];
  /** Files that could not run at baseline and whose tests all pass now (also in `fixed`). */
  readonly filesFixed: FileChange[];
  /** Files whose tests passed at baseline and that could not run now (also in `regressed`). */
  readonly filesBroken: FileChange[];
}

export function emptyComparison(): TestComparison {
  return {
    perTest: false,
    fixed: [],
    newPassing: [],
    regressed: [],
    preExisting: [],
    newFailing: [],
    missing: [],
    vanished: [],
    unchanged: [],
    filesFixed: [],
    filesBroken: [],
  };
}

/** A run's facts: its own list, or, for a run recorded before there was one, its two name lists. */
export function factsOf(run: Pick<TestRun, 'summary'>): TestFact[] {
  const s = run.summary;
  if (s.tests !== undefined) return s.tests;
  const failed = new Set(s.failedNames);
  return [
    ...s.failedNames.map((id): TestFact => ({ id, file: null, status: 'failed', source: 'output' })),
    ...s.passedNames
      .filter((id) => !failed.has(id))
      .map((id): TestFact => ({ id, file: null, status: 'passed', source: 'output' })),
  ];
}

/** The run went to its end: not stopped, and it exited. A test it does not report did not run. */
export function finished(run: Pick<TestRun, 'killed' | 'exitCode'>): boolean {
  return run.killed === null && run.exitCode !== null;
}

/**
 * A test missing from this run's list did not pass in it: the run finished and its list accounts
 * for every test it ran (older runs: neither name list reached the cap).
 */
export function fullyNamed(run: Pick<TestRun, 'killed' | 'exitCode' | 'summary'>): boolean {
  if (!finished(run)) return false;
  const s = run.summary;
  if (s.idScheme === 2) return s.complete === true;
  return s.passedNames.length < NAME_CAP && s.failedNames.length < NAME_CAP;
}

/** A run's facts indexed for matching. */
export class RunView {
  readonly byId = new Map<string, TestFact>();
  /** Facts that are a whole file (id = file). */
  readonly fileLevel = new Map<string, TestFact>();
  /** Test facts by file. */
  readonly testsOfFile = new Map<string, TestFact[]>();
  /** Name (without file) → ids of test facts that have a file. */
  private readonly byName = new Map<string, string[]>();
  readonly tests: TestFact[] = [];

  constructor(facts: readonly TestFact[]) {
    for (const f of facts) {
      this.byId.set(f.id, f);
      if (f.file !== null && f.id === f.file) {
        this.fileLevel.set(f.file, f);
        continue;
      }
      this.tests.push(f);
      if (f.file !== null) {
        this.testsOfFile.set(f.file, [...(this.testsOfFile.get(f.file) ?? []), f]);
        const name = nameOf(f.id, f.file);
        this.byName.set(name, [...(this.byName.get(name) ?? []), f.id]);
      }
    }
  }

  /** The fact of the same test in this run, if there is one (sameTest). */
  match(f: TestFact): TestFact | undefined {
    const exact = this.byId.get(f.id);
    if (exact !== undefined && !(exact.file !== null && exact.id === exact.file && f.id !== f.file))
      return exact;
    if (f.file !== null) {
      const bare = this.byId.get(nameOf(f.id, f.file));
      return bare?.file === null ? bare : undefined;
    }
    const ids = this.byName.get(f.id);
    return ids?.length === 1 ? this.byId.get(ids[0] ?? '') : undefined;
  }

  /** A whole file's status: its own fact, or its tests taken together. */
  fileStatus(file: string): Status {
    const own = this.fileLevel.get(file);
    if (own !== undefined) return statusOf(own);
    return aggregate(this.testsOfFile.get(file) ?? []);
  }
}

export function statusOf(f: TestFact | undefined): Status {
  if (f === undefined || f.status === 'skipped') return 'absent';
  return isFailing(f.status) ? 'fail' : 'pass';
}

function aggregate(tests: readonly TestFact[]): Status {
  let pass = false;
  for (const t of tests) {
    const s = statusOf(t);
    if (s === 'fail') return 'fail';
    if (s === 'pass') pass = true;
  }
  return pass ? 'pass' : 'absent';
}

/** The two runs compared (see the top of this file); `perTest` false unless both name tests. */
export function compareRuns(baseline: TestRun | null, final: TestRun): TestComparison {
  const c = emptyComparison();
  if (baseline === null) return c;
  if ((baseline.summary.idScheme ?? 1) !== (final.summary.idScheme ?? 1)) return c;
  const before = new RunView(factsOf(baseline));
  const after = new RunView(factsOf(final));
  if (before.byId.size === 0 || after.byId.size === 0) return c;
  const out = { ...c, perTest: true };
  const put = (id: string, b: Status, a: Status): void => {
    if (b === 'fail' && a === 'pass') out.fixed.push(id);
    else if (b === 'absent' && a === 'pass') out.newPassing.push(id);
    else if (b === 'pass' && a === 'fail') out.regressed.push(id);
    else if (b === 'fail' && a === 'fail') out.preExisting.push(id);
    else if (b === 'absent' && a === 'fail') out.newFailing.push(id);
    else if (b === 'pass' && a === 'absent') out.missing.push(id);
    else if (b === 'fail' && a === 'absent') out.vanished.push(id);
    else if (b === 'pass' && a === 'pass') out.unchanged.push(id);
  };
  // Whole files first: each compared with the other run's tests of it taken together.
  const files = new Set([...before.fileLevel.keys(), ...after.fileLevel.keys()]);
  for (const file of files) {
    const bf = before.fileLevel.get(file);
    const af = after.fileLevel.get(file);
    const b = before.fileStatus(file);
    const a = after.fileStatus(file);
    put(file, b, a);
    if (bf !== undefined && af === undefined && b === 'fail' && a === 'pass') {
      out.filesFixed.push({
        file,
        detail: bf.detail ?? 'could not run',
        tests: (after.testsOfFile.get(file) ?? []).filter((t) => statusOf(t) === 'pass').length,
      });
    }
    if (bf === undefined && af !== undefined && b === 'pass' && a === 'fail') {
      out.filesBroken.push({
        file,
        detail: af.detail ?? 'could not run',
        tests: (before.testsOfFile.get(file) ?? []).filter((t) => statusOf(t) === 'pass').length,
      });
    }
  }
  const matched = new Set<TestFact>();
  for (const t of before.tests) {
    const m = after.match(t);
    if (m !== undefined && !(m.file !== null && m.id === m.file)) {
      matched.add(m);
      put(t.id, statusOf(t), statusOf(m));
    } else if (t.file === null || !after.fileLevel.has(t.file)) {
      put(t.id, statusOf(t), 'absent');
    }
  }
  for (const t of after.tests) {
    if (matched.has(t)) continue;
    if (t.file !== null && before.fileLevel.has(t.file)) continue;
    if (before.match(t) !== undefined) continue;
    put(t.id, 'absent', statusOf(t));
  }
  for (const list of [
    out.fixed,
    out.newPassing,
    out.regressed,
    out.preExisting,
    out.newFailing,
    out.missing,
    out.vanished,
    out.unchanged,
  ]) {
    list.sort((x, y) => x.localeCompare(y));
  }
  return out;
}

/** How many tests (or whole files) a run reports. */
export function reported(run: Pick<TestRun, 'summary'>): number {
  return factsOf(run).length;
}
