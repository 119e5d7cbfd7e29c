/**
 * One model of a test run, shared by the agent's `run_tests`, the verdict (baseline, final,
 * without_fix), the pull request's tables and eval grading (docs/testing.md).
 *
 * A run is a list of facts, one per test id:
 * - the id is the test's file and the runner's full name, `file::name`. The name is the runner's own
 *   title path joined with " > " (describe blocks, then the test), except where the runner has an
 *   id of its own, which is kept whole: pytest's node id (already `file::Class::test[param]`),
 *   unittest's `module.Class.test`, go's `package::TestName/sub`. Where the runner does not say which
 *   file a test is in (node's spec and TAP reporters, mocha's spec reporter, ava's), the id is the
 *   name alone; comparisons then match it to a `file::name` of another run by the name (see
 *   sameTest in verdict.ts).
 * - a whole test file that could not run (it failed to load, crashed, hung or ran out of memory)
 *   is one fact whose id is the file and whose status is `crashed-file`.
 * - every fact says where it came from: the runner's machine-readable report (`report`), its
 *   console output (`output`), or the harness itself (`harness`: a test that was running when the
 *   harness stopped the run).
 */

export type TestStatus = 'passed' | 'failed' | 'skipped' | 'errored' | 'crashed-file';

export type FactSource = 'report' | 'output' | 'harness';

export interface TestFact {
  readonly id: string;
  /** The test file, relative to the workspace root, when the runner said which it is. */
  readonly file: string | null;
  readonly status: TestStatus;
  readonly source: FactSource;
  /** Why a file or a test did not finish: "timed out", "out of memory", "failed to load". */
  readonly detail?: string | undefined;
  /**
   * The line of the test's definition in `file` (1-based), where the runner's report says it (the
   * harness's pytest plugin and node:test reporter); output read as text never gives one.
   */
  readonly line?: number | undefined;
}

/** Everything the engine knows about one run, before it is recorded. */
export interface RunFacts {
  readonly runner: string;
  /** In the order the runner reported them; one fact per id. */
  readonly tests: readonly TestFact[];
  /** The runner's own counts where it printed them, else counted from `tests`. */
  readonly counts: {
    readonly passed: number | null;
    readonly failed: number | null;
    readonly skipped: number | null;
    readonly errored: number | null;
  };
  /**
   * The list accounts for every test the run ran: the runner ended on its own, its summary (if any)
   * agrees with the list, and nothing was cut at the cap. A run that is not complete cannot show
   * that a test is missing from it.
   */
  readonly complete: boolean;
  /** What the facts were read from, in order of trust: e.g. `pytest report`, `output (jest)`. */
  readonly sources: readonly string[];
  /** Seconds per test file, where a report gave them (used to bound later runs). */
  readonly fileMs: ReadonlyMap<string, number>;
  /** Files that were still running when the run was stopped or bounded: they hung. */
  readonly hung: readonly string[];
}

/** Facts kept per run (the recorded event holds at most this many; the list is then incomplete). */
export const FACT_CAP = 5000;

/** The separator of title paths in a test name. */
export const NAME_SEPARATOR = ' > ';

/** `file::name`, or the name alone when the file is not known. */
export function testId(file: string | null, name: string): string {
  return file === null || file === '' ? name : `${file}::${name}`;
}

/** The name part of an id (`file::name` → `name`); pytest ids keep their `Class::test` tail. */
export function nameOf(id: string, file: string | null): string {
  return file !== null && id.startsWith(`${file}::`) ? id.slice(file.length + 2) : id;
}

/** Status order when two sources disagree on one test: the worse wins. */
const RANK: Record<TestStatus, number> = {
  skipped: 0,
  passed: 1,
  failed: 2,
  errored: 3,
  'crashed-file': 4,
};

export function worse(a: TestStatus, b: TestStatus): TestStatus {
  return RANK[a] >= RANK[b] ? a : b;
}

/** Failing: the test did not pass and was not skipped. */
export function isFailing(status: TestStatus): boolean {
  return status === 'failed' || status === 'errored' || status === 'crashed-file';
}

/**
 * A path as the workspace names it: relative to `root` (the sandbox's workdir) when under it, with
 * `/` separators and no leading `./`; `file://` URLs are read as paths.
 */
export function workspacePath(path: string, root: string | null): string {
  let p = path.startsWith('file://') ? decodeURIComponent(path.slice(7)) : path;
  p = p.replace(/\\/g, '/');
  if (root !== null && root !== '') {
    const base = root.endsWith('/') ? root : `${root}/`;
    if (p.startsWith(base)) p = p.slice(base.length);
  }
  while (p.startsWith('./')) p = p.slice(2);
  return p;
}

/** Names on one line: newlines and tabs inside a title become the two-character escapes TAP uses. */
export function oneLine(name: string): string {
  return /[\r\n\t]/.test(name)
    ? name.replace(/\r/g, '\\r').replace(/\n/g, '\\n').replace(/\t/g, '\\t')
    : name;
}

/** Looks like a test file's path: what the runners print in place of a test name for a whole file. */
export function looksLikeTestFile(name: string): boolean {
  return !name.includes(' ') && /\.(?:[cm]?[jt]sx?|py|go|rs)$/.test(name);
}

/**
 * Collects facts in report order, one per id (a test reported twice keeps its worse status, as a
 * retried test that failed once counts as failed), up to FACT_CAP.
 */
export class FactList {
  private readonly byId = new Map<string, TestFact>();
  overflow = false;

  add(fact: TestFact): void {
    const prior = this.byId.get(fact.id);
    if (prior === undefined) {
      if (this.byId.size >= FACT_CAP) {
        this.overflow = true;
        return;
      }
      this.byId.set(fact.id, fact);
      return;
    }
    if (worse(prior.status, fact.status) !== prior.status) {
      const line = fact.line ?? prior.line;
      this.byId.set(fact.id, {
        ...fact,
        detail: fact.detail ?? prior.detail,
        ...(line === undefined ? {} : { line }),
      });
    }
  }

  get(id: string): TestFact | undefined {
    return this.byId.get(id);
  }

  /** Puts `fact` in the place of the fact with its id, when there is one (a detail learnt later). */
  replace(fact: TestFact): void {
    if (this.byId.has(fact.id)) this.byId.set(fact.id, fact);
  }

  get size(): number {
    return this.byId.size;
  }

  values(): TestFact[] {
    return [...this.byId.values()];
  }
}

/** Counts of a fact list (a crashed file counts as one error). */
export function countFacts(tests: readonly TestFact[]): {
  passed: number;
  failed: number;
  skipped: number;
  errored: number;
} {
  const c = { passed: 0, failed: 0, skipped: 0, errored: 0 };
  for (const t of tests) {
    if (t.status === 'passed') c.passed++;
    else if (t.status === 'failed') c.failed++;
    else if (t.status === 'skipped') c.skipped++;
    else c.errored++;
  }
  return c;
}
