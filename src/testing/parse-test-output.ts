/**
 * The text fallback: a test run's console output read into the facts of test-run.ts, for the runners
 * the agent meets. Used when the runner wrote no machine-readable report (report-plan.ts asks for
 * one where it can), and beside one as a cross-check (run-tests.ts).
 *
 * Invariants and trade-offs:
 * - ANSI escapes are removed and carriage returns resolved before any reader sees a line (pytest's
 *   `--color=yes`, vitest under CI, jest's FORCE_COLOR all split names and summary lines).
 * - One pass over the text, line by line (indexOf, no split of the whole string), feeding every line
 *   to every reader; the reader with the most evidence wins. Each reader only does anchored prefix
 *   checks and small regexes without nested quantifiers, so the cost is linear in the output even
 *   for tens of megabytes. Lines longer than MAX_LINE_CHARS are skipped unread: no runner prints a
 *   result or summary line that long, and it bounds the work any single regex can do.
 * - Counts come from the runner's own summary lines when present (summed when the output holds
 *   several runs, e.g. cargo's one block per test binary); otherwise from the per-test lines;
 *   otherwise null. `failed` counts every failing test, errors included; `errored` is the part of it
 *   that did not fail an assertion (pytest's ERROR, a timeout, a file that could not run).
 * - Ids follow test-run.ts: `file::title > title` where the output says the file (jest, vitest,
 *   node-tap, pytest, go's package, cargo's target), the title path alone where it does not
 *   (node's spec reporter, mocha's spec reporter, ava). Where a runner prints a passed file without
 *   its tests (jest without --verbose, vitest's default reporter), the file is one passed fact; a
 *   file that failed to load is a `crashed-file` fact.
 * - The formats are checked against recorded output of the real runners (test/fixtures/runner-output,
 *   recorded by scripts/capture-runner-output.mjs).
 */
import type { RunnerKind } from './detect-test-command.js';
import {
  FACT_CAP,
  FactList,
  NAME_SEPARATOR,
  countFacts,
  isFailing,
  looksLikeTestFile,
  testId,
  workspacePath,
  type TestFact,
  type TestStatus,
} from './test-run.js';
import { TapReader } from './tap.js';
import { PytestOutputParser } from './pytest.js';
import {
  STRONG,
  Tally,
  indentOf,
  pickCounts,
  stripParenDuration,
  type Counts,
  type LineParser,
  type ParseResult,
} from './line-parser.js';

export type { RunnerKind } from './detect-test-command.js';
export { pytestNodeId } from './pytest.js';

/** What a test run's console output says, in the recorded shape (events/schema.ts testSummary). */
export interface TestSummary {
  readonly runner: string;
  readonly passed: number | null;
  /** Every failing test: failed, errored and files that could not run. */
  readonly failed: number | null;
  readonly skipped: number | null;
  /** Of `failed`, those that errored or were whole files that could not run. */
  readonly errored?: number | null | undefined;
  /** Ids of failing tests (capped at NAME_CAP), kept for readers of older runs. */
  readonly failedNames: string[];
  /** Ids of passing tests (capped at NAME_CAP). */
  readonly passedNames: string[];
  /** Every fact, in report order (capped at FACT_CAP). */
  readonly tests?: TestFact[] | undefined;
  /** The list accounts for every test the run ran (see test-run.ts RunFacts). */
  readonly complete?: boolean | undefined;
  /** What the facts were read from. */
  readonly sources?: string[] | undefined;
  /** Files that hung (still running when the run or the file was stopped). */
  readonly hung?: string[] | undefined;
  /** Milliseconds per test file, where a report gave them. */
  readonly fileMs?: Record<string, number> | undefined;
  /** The id scheme of test-run.ts; absent in runs recorded before it (names without files). */
  readonly idScheme?: 2 | undefined;
}

/** Maximum names kept per name list. */
export const NAME_CAP = 500;
/** Lines longer than this (before removing ANSI escapes) are ignored. */
const MAX_LINE_CHARS = 16_384;

const ESC = String.fromCharCode(27);
const BEL = String.fromCharCode(7);
/** CSI sequences (colors, cursor moves), OSC sequences (hyperlinks, titles) and 2-byte escapes. */
const ANSI_RE = new RegExp(
  `${ESC}\\[[0-?]*[ -/]*[@-~]|${ESC}\\][^${BEL}${ESC}]*(?:${BEL}|${ESC}\\\\)|${ESC}[@-Z\\\\-_]`,
  'g',
);

export function stripAnsi(text: string): string {
  return text.includes(ESC) ? text.replace(ANSI_RE, '') : text;
}

/** What the console output says, before it is merged with a report (run-tests.ts). */
export interface OutputReading {
  readonly runner: RunnerKind;
  readonly counts: Counts & { errored: number | null };
  readonly facts: TestFact[];
  /** Every test the runner counted is in `facts` (named, or under a file-level fact). */
  readonly whole: boolean;
  readonly running: string | null;
  readonly hung: readonly string[];
  readonly overflow: boolean;
}

export interface ReadOptions {
  /** The framework the command most likely runs: wins when its output left a trace. */
  readonly hint?: RunnerKind | undefined;
  /** The sandbox's workdir, so absolute paths in the output become workspace paths. */
  readonly root?: string | null | undefined;
}

export function readTestOutput(output: string, options: ReadOptions = {}): OutputReading {
  const root = options.root ?? null;
  const parsers: LineParser[] = [
    new NodeSpecParser(root),
    new TapParser(root, options.hint),
    new JestParser(),
    new VitestParser(),
    new MochaParser(root),
    new AvaParser(),
    new PytestOutputParser(root),
    new UnittestParser(),
    new GoParser(),
    new CargoParser(),
  ];

  let start = 0;
  while (start < output.length) {
    let end = output.indexOf('\n', start);
    if (end === -1) end = output.length;
    if (end - start <= MAX_LINE_CHARS) {
      const line = cleanLine(output.slice(start, end));
      for (const parser of parsers) parser.feed(line);
    }
    start = end + 1;
  }

  // The strongest evidence wins (first on ties). The hint wins when its runner left a trace and it
  // printed a summary or no other runner did: one runner's output can look a little like another's
  // (vitest's " FAIL  file > test" is jest's coloured file header), but not down to the summary.
  let strongest: LineParser | undefined;
  for (const parser of parsers) {
    if (parser.evidence > (strongest?.evidence ?? 0)) strongest = parser;
  }
  const hint = options.hint;
  const hinted = parsers.find((p) => p.runner === hint);
  // With no evidence at all (a run that ended before any summary, in lines several runners print
  // alike: mocha's "✔ title" when a test ended the process), the hint decides.
  const chosen =
    hinted !== undefined &&
    ((hinted.evidence > 0 && (hinted.evidence >= STRONG || (strongest?.evidence ?? 0) < STRONG)) ||
      strongest === undefined)
      ? hinted
      : strongest;
  if (chosen === undefined) {
    return {
      runner: 'unknown',
      counts: { passed: null, failed: null, skipped: null, errored: null },
      facts: [],
      whole: false,
      running: null,
      hung: [],
      overflow: false,
    };
  }
  const result = chosen.finish();
  const facts = result.facts.values();
  const errored = facts.filter((f) => f.status === 'errored' || f.status === 'crashed-file').length;
  return {
    runner: chosen.runner,
    counts: { ...result.counts, errored: result.counts.failed === null ? null : errored },
    facts,
    whole: result.whole && !result.facts.overflow,
    running: result.running,
    hung: result.hung,
    overflow: result.facts.overflow,
  };
}

/** The console output alone, as the recorded summary (no report beside it). */
export function parseTestOutput(output: string, hint?: RunnerKind, root?: string | null): TestSummary {
  const r = readTestOutput(output, { hint, root });
  return summarize({
    runner: r.runner,
    facts: r.facts,
    counts: r.counts,
    complete: r.whole,
    sources: r.runner === 'unknown' ? [] : [`output (${r.runner})`],
    hung: r.hung,
    fileMs: new Map(),
  });
}

/** The recorded summary of a run's facts: counts, the capped name lists, the facts themselves. */
export function summarize(run: {
  readonly runner: string;
  readonly facts: readonly TestFact[];
  readonly counts: Counts & { errored?: number | null };
  readonly complete: boolean;
  readonly sources: readonly string[];
  readonly hung: readonly string[];
  readonly fileMs: ReadonlyMap<string, number>;
}): TestSummary {
  const failedNames: string[] = [];
  const passedNames: string[] = [];
  for (const f of run.facts) {
    if (isFailing(f.status)) {
      if (failedNames.length < NAME_CAP) failedNames.push(f.id);
    } else if (f.status === 'passed' && passedNames.length < NAME_CAP) {
      passedNames.push(f.id);
    }
  }
  const tests = run.facts.slice(0, FACT_CAP);
  const fileMs: Record<string, number> = {};
  let kept = 0;
  for (const [file, ms] of run.fileMs) {
    if (kept++ >= 2000) break;
    fileMs[file] = Math.round(ms);
  }
  return {
    runner: run.runner,
    passed: run.counts.passed,
    failed: run.counts.failed,
    skipped: run.counts.skipped,
    errored: run.counts.errored ?? null,
    failedNames,
    passedNames,
    tests,
    complete: run.complete && run.facts.length <= FACT_CAP,
    sources: [...run.sources],
    hung: [...run.hung],
    ...(kept > 0 ? { fileMs } : {}),
    idScheme: 2,
  };
}

/** Counts from facts, for a run whose output printed no summary of its own. */
export function countsOf(facts: readonly TestFact[]): Counts & { errored: number } {
  const c = countFacts(facts);
  return { passed: c.passed, failed: c.failed + c.errored, skipped: c.skipped, errored: c.errored };
}

/** Removes ANSI escapes and resolves carriage returns (CRLF endings, progress lines redrawn with \r). */
function cleanLine(raw: string): string {
  let line = stripAnsi(raw);
  if (line.includes('\r')) {
    if (line.endsWith('\r')) line = line.slice(0, -1);
    const cr = line.lastIndexOf('\r');
    if (cr !== -1) line = line.slice(cr + 1);
  }
  return line;
}

function tallyStatus(t: Tally, status: TestStatus): void {
  t.seen = true;
  if (status === 'passed') t.passed++;
  else if (status === 'skipped') t.skipped++;
  else t.failed++;
}

function result(
  counts: Counts,
  facts: FactList,
  whole: boolean,
  running: string | null = null,
  hung: readonly string[] = [],
): ParseResult {
  return { counts, facts, whole, running, hung };
}

// ---------------------------------------------------------------------------------------------------
// TAP: node's TAP reporter (its default when stdout is not a terminal, before node 23), node-tap,
// ava --tap, mocha's and vitest's TAP reporters. The reading itself is tap.ts.

class TapParser implements LineParser {
  runner: RunnerKind = 'tap';
  private readonly reader: TapReader;
  private node = false;

  constructor(
    root: string | null,
    private readonly hint: RunnerKind | undefined,
  ) {
    this.reader = new TapReader({ root, source: 'output' });
    if (hint === 'node-test' || hint === 'ava' || hint === 'mocha' || hint === 'vitest') this.runner = hint;
  }

  get evidence(): number {
    return this.reader.evidence;
  }

  feed(line: string): void {
    if (line === '# suites 0' || line.startsWith('# duration_ms ') || line.startsWith('# suites '))
      this.node = true;
    this.reader.feed(line);
  }

  finish(): ParseResult {
    this.reader.finish();
    if (this.node && this.hint === undefined) this.runner = 'node-test';
    const r = this.reader;
    const counts: Counts = r.summary.seen
      ? { passed: r.summary.passed, failed: r.summary.failed, skipped: r.summary.skipped }
      : pickCounts(new Tally(), Object.assign(new Tally(), r.counted));
    const planMet = r.planMet();
    const summaryAgrees =
      r.summary.seen &&
      r.counted.passed + r.counted.failed + r.counted.skipped + r.containers >=
        r.summary.passed + r.summary.failed + r.summary.skipped;
    const whole = !r.bailedOut && (summaryAgrees || (!r.summary.seen && planMet === true));
    return result(counts, r.facts, whole, null, r.hung);
  }
}

// ---------------------------------------------------------------------------------------------------
// node:test — spec reporter (its default on a terminal, and everywhere from node 23)
//
// Names are the title path ("suite > test"), rebuilt from the "▶ suite" lines and the indentation
// (two spaces a level). A line whose name is a test file's path is the file (node reports a file so
// when it failed outside its tests: it did not load, timed out, crashed).

class NodeSpecParser implements LineParser {
  readonly runner = 'node-test';
  evidence = 0;
  private readonly summary = new Tally();
  private readonly lines = new Tally();
  private readonly facts = new FactList();
  /** `▶ name` lines not yet closed: suites and tests with subtests. */
  private readonly open: { indent: number; name: string }[] = [];
  /** Inside spec's "✖ failing tests:" recap, which repeats earlier failures. */
  private recap = false;
  /** The last failure recorded, which an error line below it may show timed out. */
  private lastFailed: string | null = null;
  /** `▶` containers closed: node counts a test with subtests in its "tests" total. */
  private containers = 0;

  constructor(private readonly root: string | null) {}

  feed(line: string): void {
    const indent = indentOf(line);
    const text = indent === 0 ? line : line.slice(indent);
    if (text === '') return;
    const first = text[0];
    if (first === 'ℹ') {
      if (indent === 0) this.summaryLine(text);
      return;
    }
    if (this.lastFailed !== null && /^'test timed out after \d+ms'$/.test(text)) {
      this.timedOut(this.lastFailed);
      this.lastFailed = null;
    }
    if (text[1] === ' ' && (first === '✔' || first === '✖' || first === '﹣' || first === '▶')) {
      this.specResult(first, text.slice(2), indent);
    }
  }

  private timedOut(id: string): void {
    const fact = this.facts.get(id);
    if (fact === undefined) return;
    const whole = fact.file !== null && fact.id === fact.file;
    this.facts.add({ ...fact, status: whole ? 'crashed-file' : 'errored', detail: 'timed out' });
  }

  private summaryLine(text: string): void {
    const match = /^ℹ (tests|pass|fail|cancelled|skipped|todo) (\d+)$/.exec(text);
    if (match === null) return;
    const n = Number(match[2]);
    this.summary.seen = true;
    this.evidence += STRONG;
    switch (match[1]) {
      case 'tests':
        this.recap = false;
        break;
      case 'pass':
        this.summary.passed += n;
        break;
      case 'fail':
      case 'cancelled':
        this.summary.failed += n;
        break;
      default:
        this.summary.skipped += n;
    }
  }

  private specResult(symbol: string, body: string, indent: number): void {
    if (symbol === '✖' && body === 'failing tests:') {
      this.recap = true;
      return;
    }
    if (indent === 0 && symbol !== '✖') this.recap = false;
    this.lastFailed = null;

    let name = body;
    let directive = '';
    const duration = / \(\d+(?:\.\d+)?ms\)(?: # (.*))?$/.exec(body);
    if (duration !== null) {
      name = body.slice(0, duration.index);
      directive = duration[1] ?? '';
    }
    // Containers whose block ended without an explicit close are dropped from the stack.
    while (this.open.length > 0 && (this.open.at(-1)?.indent ?? -1) > indent) this.open.pop();
    const top = this.open.at(-1);
    if (top !== undefined && top.indent === indent && top.name === name) {
      this.open.pop(); // the closing line of a suite / parent test (node 20 prints ✔ or ✖ here)
      this.containers++;
      return;
    }
    if (symbol === '▶') {
      this.evidence += 1;
      if (duration === null)
        this.open.push({ indent, name }); // newer nodes close with "▶ name (…ms)"
      else this.containers++;
      return;
    }
    let status: TestStatus = symbol === '✔' ? 'passed' : symbol === '✖' ? 'failed' : 'skipped';
    if (directive.toUpperCase().startsWith('TODO')) status = 'skipped';
    const path = [...this.open.map((o) => o.name), name].join(NAME_SEPARATOR);
    if (this.recap) {
      // Already counted above (the recap names a test by its own title, without its suites); kept
      // only when the output was cut before the test's own line.
      const known = this.facts
        .values()
        .some((f) => f.id === name || f.id.endsWith(`${NAME_SEPARATOR}${name}`) || f.file === name);
      if (status === 'failed' && indent === 0 && !known && !looksLikeTestFile(name)) {
        this.facts.add({ id: path, file: null, status, source: 'output' });
      }
      return;
    }
    // No evidence from a result line: mocha's spec reporter prints the same "✔ title".
    if (indent === 0 && this.open.length === 0 && looksLikeTestFile(name)) {
      const file = workspacePath(name, this.root);
      const fileStatus: TestStatus = status === 'failed' ? 'crashed-file' : status;
      tallyStatus(this.lines, fileStatus);
      this.facts.add({ id: file, file, status: fileStatus, source: 'output' });
      if (status === 'failed') this.lastFailed = file;
      return;
    }
    tallyStatus(this.lines, status);
    this.facts.add({ id: path, file: null, status, source: 'output' });
    if (status === 'failed') this.lastFailed = path;
  }

  finish(): ParseResult {
    const c = this.lines;
    const whole =
      this.summary.seen &&
      c.passed + c.failed + c.skipped + this.containers >=
        this.summary.passed + this.summary.failed + this.summary.skipped;
    return result(pickCounts(this.summary, this.lines), this.facts, whole);
  }
}

// ---------------------------------------------------------------------------------------------------
// jest
//
// Piped output (CI, `npm test` in the sandbox) prints file headers as "PASS path" / "FAIL path"; under
// colour they are " PASS  path" / " FAIL  path" (an inverse badge). Without --verbose (jest turns it on by
// itself for a single test file) jest prints no test names for a file that passed, only "PASS path":
// such a file is one passed fact, its path; the failing tests of a failing file are named by their
// "● describe › test" headers (jest joins titles with " › "; a title containing " › " is matched
// against the verbose tree when there is one). With --verbose every test is named.
// A file that failed to load ("● Test suite failed to run") is a crashed file; jest's own "Tests:"
// line leaves it out, so it is added to the failed count.

const JEST_HEADER_RE = /^ ?(PASS|FAIL) {1,2}(\S.*)$/;

class JestParser implements LineParser {
  readonly runner = 'jest';
  evidence = 0;
  private readonly summary = new Tally();
  private readonly lines = new Tally();
  private readonly facts = new FactList();
  /** The "N total" of jest's "Tests:" line. */
  private total = 0;
  /** Inside a verbose result tree (after a file header until a blank line). */
  private inTree = false;
  private treeCount = 0;
  /** describe() titles of the current verbose tree, by nesting level. */
  private readonly describes: string[] = [];
  /** The file of the last header, and whether it was a PASS that has listed no test yet. */
  private file = '';
  private passedFileUnlisted = false;
  /** Per file, " › "-joined paths of the tree → ids, to read failure headers. */
  private readonly treeIds = new Map<string, string>();
  /** Files with a FAIL header, and those of them that failed to load (counted once each). */
  private readonly failFiles = new Set<string>();
  private readonly suiteErrors = new Set<string>();
  /** Inside "Summary of all failing tests", which repeats earlier failures. */
  private recap = false;
  /** A test called process.exit with this code; its file is named by the stack below. */
  private exitCode: string | null = null;

  feed(line: string): void {
    const header = JEST_HEADER_RE.exec(line);
    if (header?.[2] !== undefined && !header[2].includes(' > ') && !header[2].endsWith(' ]')) {
      this.closeFile();
      this.evidence += 1;
      this.inTree = true;
      this.describes.length = 0;
      this.file = stripParenDuration(header[2]);
      this.passedFileUnlisted = header[1] === 'PASS' && !this.recap;
      if (header[1] === 'FAIL') this.failFiles.add(this.file);
      return;
    }
    if (line.startsWith('Tests:')) {
      this.closeFile();
      this.summaryLine(line);
      return;
    }
    if (line.startsWith('Test Suites:')) {
      this.closeFile();
      this.evidence += STRONG;
      return;
    }
    if (line === 'Summary of all failing tests') {
      this.closeFile();
      this.recap = true;
      return;
    }
    const indent = indentOf(line);
    const text = line.slice(indent);
    if (text === '') {
      this.inTree = false;
      return;
    }
    if (this.exitCode !== null) {
      // "● process.exit called with "3"": the code frame's stack names the file that exited.
      const file = /\(([^()\s]+\.[cm]?[jt]sx?):\d+:\d+\)$/.exec(text)?.[1];
      if (file !== undefined && !file.includes('node_modules')) {
        this.facts.add({
          id: file,
          file,
          status: 'crashed-file',
          source: 'output',
          detail: `exited with code ${this.exitCode}`,
        });
        this.exitCode = null;
      }
    }
    if (text.startsWith('● ')) {
      const title = text.slice(2);
      const exit = /^\s*process\.exit called with "(\d+)"/.exec(title)?.[1];
      if (exit !== undefined) {
        this.exitCode = exit;
        return;
      }
      if (title.startsWith('Test suite failed to run')) {
        if (this.file !== '') {
          this.facts.add({
            id: this.file,
            file: this.file,
            status: 'crashed-file',
            source: 'output',
            detail: 'failed to load',
          });
          this.suiteErrors.add(this.file);
        }
      } else if (title !== 'Console' && this.file !== '') {
        // "● Console" introduces captured console output (older jests).
        const id =
          this.treeIds.get(`${this.file}\u0000${title}`) ??
          testId(this.file, title.split(' › ').join(NAME_SEPARATOR));
        this.facts.add({ id, file: this.file, status: 'failed', source: 'output' });
      }
      return;
    }
    if (!this.inTree) return;
    const level = Math.max(0, Math.floor(indent / 2) - 1);
    const symbol = text[0];
    if (text[1] === ' ' && (symbol === '✓' || symbol === '✕' || symbol === '○' || symbol === '✎')) {
      this.passedFileUnlisted = false;
      this.treeCount++;
      let title = stripParenDuration(text.slice(2));
      if (symbol === '○' && title.startsWith('skipped ')) title = title.slice(8);
      if (symbol === '✎' && title.startsWith('todo ')) title = title.slice(5);
      const titles = [...this.describes.slice(0, level), title];
      const id = testId(this.file, titles.join(NAME_SEPARATOR));
      this.treeIds.set(`${this.file}\u0000${titles.join(' › ')}`, id);
      const status: TestStatus = symbol === '✓' ? 'passed' : symbol === '✕' ? 'failed' : 'skipped';
      tallyStatus(this.lines, status);
      this.facts.add({ id, file: this.file, status, source: 'output' });
      return;
    }
    this.describes.length = level;
    this.describes[level] = text;
  }

  /** A PASS file that listed no test (non-verbose output) is one passed fact, its path. */
  private closeFile(): void {
    if (this.passedFileUnlisted) {
      this.facts.add({ id: this.file, file: this.file, status: 'passed', source: 'output' });
    }
    this.passedFileUnlisted = false;
  }

  private summaryLine(line: string): void {
    let matched = false;
    for (const match of line.matchAll(/\b(\d+) (failed|passed|skipped|todo|pending|total)/g)) {
      matched = true;
      const n = Number(match[1]);
      if (match[2] === 'passed') this.summary.passed += n;
      else if (match[2] === 'failed') this.summary.failed += n;
      else if (match[2] === 'total') this.total += n;
      else this.summary.skipped += n;
    }
    if (matched) {
      this.summary.seen = true;
      this.evidence += STRONG;
    }
  }

  finish(): ParseResult {
    this.closeFile();
    const loadErrors = this.suiteErrors.size;
    if (loadErrors > 0) {
      this.summary.failed += loadErrors;
      this.lines.failed += loadErrors;
      this.lines.seen = true;
    }
    // Whole: the verbose tree named every test, or (without it) every file that failed did not load,
    // so each file is a fact of its own.
    const failedWithTests = [...this.failFiles].some((f) => !this.suiteErrors.has(f));
    const whole = this.summary.seen && (this.treeCount > 0 ? this.treeCount >= this.total : !failedWithTests);
    return result(pickCounts(this.summary, this.lines), this.facts, whole);
  }
}

// ---------------------------------------------------------------------------------------------------
// vitest
//
// Names are vitest's own "file > describe > test" paths, as its verbose reporter and its "FAIL" detail
// lines print them (the id is `file::describe > test`). The default reporter prints a file that
// passed as one line, "✓ file (N tests)": one passed fact for the file; a file with failures as a
// tree of titles (suites carry a "(N)" count) from which the same full paths are rebuilt by
// indentation. A file that failed to load is listed under "Failed Suites N", which vitest's "Tests"
// line leaves out: a crashed file.

const TEST_FILE_RE = /\.[cm]?[jt]sx?$/;
const VITEST_SYMBOLS = new Set(['✓', '×', '↓', '□', '❯']);
/** " 12ms" / " 1.2s" after a title, and the " (retry x2)" / " (repeat x2)" markers before it. */
const VITEST_SUFFIX_RE = /(?: \((?:retry|repeat) x\d+\))*(?: \[slow\])?(?: \d+(?:\.\d+)?m?s)?$/;
const VITEST_FILE_RE = /^(.+?) \(\d+ tests?(?: \|[^)]*)?\)$/;

function vitestId(path: string): { id: string; file: string | null } {
  const sep = path.indexOf(' > ');
  if (sep !== -1 && TEST_FILE_RE.test(path.slice(0, sep))) {
    const file = path.slice(0, sep);
    return { id: testId(file, path.slice(sep + 3)), file };
  }
  return { id: path, file: null };
}

class VitestParser implements LineParser {
  readonly runner = 'vitest';
  evidence = 0;
  private readonly summary = new Tally();
  private readonly lines = new Tally();
  private readonly facts = new FactList();
  /** The file whose default-reporter tree is being read, or '' outside one. */
  private file = '';
  /** Open suites of that tree. */
  private readonly suites: { indent: number; title: string }[] = [];
  /** The last tree line: a suite if the next line is deeper, else a test. */
  private pending: { indent: number; symbol: string; body: string } | null = null;
  private readonly failedSuites = new Set<string>();
  private failedSuitesCount = 0;
  private unnamed = 0;
  /** Files with failures, and how many tests the header said each has. */
  private readonly declared = new Map<string, number>();

  feed(line: string): void {
    const indent = indentOf(line);
    const text = line.slice(indent);
    if (this.file !== '' && indent >= 3 && VITEST_SYMBOLS.has(text[0] ?? '') && text[1] === ' ') {
      this.treeLine(indent, text[0] ?? '', text.slice(2).replace(VITEST_SUFFIX_RE, ''));
      return;
    }
    this.endTree();
    if (text.startsWith('Test Files ')) {
      this.evidence += STRONG;
      return;
    }
    if (text.startsWith('Tests ') && /^Tests +\d+ (?:passed|failed|skipped|todo)/.test(text)) {
      this.summary.seen = true;
      this.evidence += STRONG;
      for (const match of text.matchAll(/\b(\d+) (failed|passed|skipped|todo)/g)) {
        const n = Number(match[1]);
        if (match[2] === 'passed') this.summary.passed += n;
        else if (match[2] === 'failed') this.summary.failed += n;
        else this.summary.skipped += n;
      }
      return;
    }
    if (text.startsWith('RUN ') && /^RUN +v\d/.test(text)) {
      this.evidence += 5;
      return;
    }
    if (text.startsWith('⎯')) {
      const suites = /^⎯+ Failed Suites (\d+) ⎯+$/.exec(text);
      if (suites !== null) {
        this.evidence += 2;
        this.failedSuitesCount += Number(suites[1]);
      }
      return;
    }
    if (line.startsWith(' FAIL ')) {
      // " FAIL  src/a.test.ts > suite > test" in the failure details (deduplicated with the list);
      // " FAIL  src/b.test.ts [ src/b.test.ts ]" for a file that failed to load.
      const body = text.slice(5).trimStart();
      const load = / \[ [^\]]* \]$/.exec(body);
      if (load !== null) {
        const file = body.slice(0, load.index);
        this.failedSuites.add(file);
        this.facts.add({
          id: file,
          file,
          status: 'crashed-file',
          source: 'output',
          detail: 'failed to load',
        });
        return;
      }
      const { id, file } = vitestId(body);
      this.facts.add({ id, file, status: 'failed', source: 'output' });
      return;
    }
    const symbol = text[0];
    if (text[1] !== ' ' || symbol === undefined || !VITEST_SYMBOLS.has(symbol)) return;
    const body = text.slice(2).replace(VITEST_SUFFIX_RE, '');
    const sep = body.indexOf(' > ');
    if (sep !== -1 && TEST_FILE_RE.test(body.slice(0, sep))) {
      // Verbose reporter: one line per test with its full path.
      this.record(symbol, body);
      return;
    }
    const header = VITEST_FILE_RE.exec(body);
    const file = header?.[1];
    if (indent === 1 && file !== undefined && TEST_FILE_RE.test(file)) {
      this.evidence += 1;
      if (symbol !== '✓') this.declared.set(file, Number(/\((\d+) tests?/.exec(body)?.[1] ?? '0'));
      // A passed file's tests are listed only if some were slow; the file stands for them otherwise.
      if (symbol === '✓') this.facts.add({ id: file, file, status: 'passed', source: 'output' });
      else this.file = file;
    }
  }

  private treeLine(indent: number, symbol: string, body: string): void {
    const prev = this.pending;
    if (prev !== null) {
      if (indent > prev.indent)
        this.suites.push({ indent: prev.indent, title: prev.body.replace(/ \(\d+\)$/, '') });
      else this.recordTreeTest(prev);
    }
    while ((this.suites.at(-1)?.indent ?? -1) >= indent) this.suites.pop();
    this.pending = { indent, symbol, body };
  }

  /**
   * Vitest 4 prints only the tests of the tree, not their suites: a test deeper than one level below
   * the last printed suite (or file) has a path that cannot be rebuilt. It counts, unnamed; if it
   * failed, its " FAIL  file > suite > test" detail line names it.
   */
  private recordTreeTest(test: { indent: number; symbol: string; body: string }): void {
    let expected = 3;
    for (const suite of this.suites) {
      if (suite.indent !== expected) break;
      expected += 2;
    }
    const complete = test.indent === expected && expected === 3 + 2 * this.suites.length;
    const path = complete ? [this.file, ...this.suites.map((s) => s.title), test.body].join(' > ') : '';
    this.record(test.symbol, path);
  }

  private endTree(): void {
    if (this.pending !== null) this.recordTreeTest(this.pending);
    this.pending = null;
    this.suites.length = 0;
    this.file = '';
  }

  private record(symbol: string, path: string): void {
    if (symbol === '❯') return; // a suite or file summary line, not a test
    const status: TestStatus = symbol === '✓' ? 'passed' : symbol === '×' ? 'failed' : 'skipped';
    tallyStatus(this.lines, status);
    if (path === '') {
      if (status !== 'skipped') this.unnamed++;
      return;
    }
    const { id, file } = vitestId(path);
    this.facts.add({ id, file, status, source: 'output' });
  }

  finish(): ParseResult {
    this.endTree();
    const loadErrors = Math.max(this.failedSuitesCount, this.failedSuites.size);
    if (loadErrors > 0) {
      this.summary.failed += loadErrors;
      this.lines.failed += loadErrors;
    }
    // A file with failures is whole when its tree named as many tests as its header counted.
    const named = new Map<string, number>();
    for (const f of this.facts.values()) {
      if (f.file !== null) named.set(f.file, (named.get(f.file) ?? 0) + 1);
    }
    const listed = [...this.declared].every(([file, n]) => (named.get(file) ?? 0) >= n);
    return result(
      pickCounts(this.summary, this.lines),
      this.facts,
      this.summary.seen && this.unnamed === 0 && listed,
    );
  }
}

// ---------------------------------------------------------------------------------------------------
// mocha (spec reporter)
//
// Names are the describe titles and the test title joined with " > ", rebuilt from the indentation
// (two spaces a level); mocha's spec reporter does not print files. A spec file that fails to load
// stops mocha before any test runs ("Exception during run: …"): a crashed file, named by the first
// test file of the error's require stack when it has one.

class MochaParser implements LineParser {
  readonly runner = 'mocha';
  evidence = 0;
  private readonly summary = new Tally();
  private readonly lines = new Tally();
  private readonly facts = new FactList();
  /** describe() titles by nesting level. */
  private readonly describes: string[] = [];
  /** True between a summary and the next run's first result: the failure details use "1) suite". */
  private afterSummary = false;
  private loadError = false;
  private loadFile: string | null = null;

  constructor(private readonly root: string | null) {}

  feed(line: string): void {
    const text = line.trimStart();
    if (this.loadError && this.loadFile === null) {
      const m = /^- (\S+)$/.exec(text) ?? /\((\S+?):\d+:\d+\)$/.exec(text);
      const path = m?.[1];
      if (path !== undefined && looksLikeTestFile(path) && !path.includes('node_modules')) {
        this.loadFile = workspacePath(path, this.root);
      }
    }
    if (text === '' || line === text) return; // mocha indents every line it prints
    if (text.startsWith('Exception during run: ')) {
      this.loadError = true;
      this.evidence += STRONG;
      return;
    }
    const summary = /^(\d+) (passing|failing|pending)(?: \(.*\))?$/.exec(text);
    if (summary !== null) {
      const n = Number(summary[1]);
      this.summary.seen = true;
      this.afterSummary = true;
      this.describes.length = 0;
      this.evidence += summary[2] === 'passing' ? STRONG : 2;
      if (summary[2] === 'passing') this.summary.passed += n;
      else if (summary[2] === 'failing') this.summary.failed += n;
      else this.summary.skipped += n;
      return;
    }
    const level = Math.max(0, Math.floor((line.length - text.length) / 2) - 1);
    const nameOf = (title: string): string => [...this.describes.slice(0, level), title].join(NAME_SEPARATOR);
    const symbol = text[0];
    if ((symbol === '✔' || symbol === '✓') && text[1] === ' ') {
      this.afterSummary = false;
      this.add(nameOf(stripParenDuration(text.slice(2))), 'passed');
      return;
    }
    if (this.afterSummary) return;
    const failure = /^\d+\) (.+)$/.exec(text);
    if (failure?.[1] !== undefined) {
      // Only mocha numbers its failures in place; its "✔" lines look like node's spec reporter's.
      this.evidence += 1;
      this.add(nameOf(failure[1]), 'failed');
    } else if (text.startsWith('- ')) {
      this.add(nameOf(text.slice(2)), 'skipped');
    } else {
      this.describes.length = level;
      this.describes[level] = text;
    }
  }

  private add(name: string, status: TestStatus): void {
    tallyStatus(this.lines, status);
    this.facts.add({ id: name, file: null, status, source: 'output' });
  }

  finish(): ParseResult {
    if (this.loadError && !this.summary.seen) {
      if (this.loadFile !== null) {
        this.facts.add({
          id: this.loadFile,
          file: this.loadFile,
          status: 'crashed-file',
          source: 'output',
          detail: 'failed to load',
        });
      }
      return result({ passed: 0, failed: 1, skipped: 0 }, this.facts, false);
    }
    const c = this.lines;
    const whole =
      this.summary.seen &&
      c.passed + c.failed + c.skipped >= this.summary.passed + this.summary.failed + this.summary.skipped;
    return result(pickCounts(this.summary, this.lines), this.facts, whole);
  }
}

// ---------------------------------------------------------------------------------------------------
// ava (its default reporter)
//
// "✔ title", "✘ [fail]: title message", "- [skip] title", "- [todo] title"; with several files the
// title starts with ava's short name of the file ("a › title", the path without the test folder and
// extension), so the id is ava's title as printed. "✘ path exited with a non-zero exit code" and
// "Uncaught exception in path" are a crashed file; "◌ title" after "Timed out while running tests"
// is a test that was running when ava's timeout stopped it.

class AvaParser implements LineParser {
  readonly runner = 'ava';
  evidence = 0;
  private readonly summary = new Tally();
  private readonly lines = new Tally();
  private readonly facts = new FactList();
  private timedOut = false;
  private readonly hung: string[] = [];

  feed(line: string): void {
    const text = line.trimStart();
    if (text === '') return;
    const first = text[0];
    // ava's lines start with one of these; anything else is skipped before a regex runs.
    if (
      first !== '✘' &&
      first !== '✔' &&
      first !== '-' &&
      first !== '◌' &&
      first !== 'U' &&
      (first === undefined || first < '0' || first > '9')
    ) {
      return;
    }
    if (text === '✘ Timed out while running tests') {
      this.timedOut = true;
      this.evidence += 2;
      return;
    }
    const pendingIn = /^\d+ tests? (?:were|was) pending in (\S+)$/.exec(text)?.[1];
    if (pendingIn !== undefined && this.timedOut) {
      this.hung.push(pendingIn);
      return;
    }
    if (this.timedOut && text.startsWith('◌ ')) {
      this.add(text.slice(2), 'errored', 'timed out');
      return;
    }
    const exited = /^✘ (\S+) exited (?:with a non-zero exit code: \d+|due to \S+)$/.exec(text)?.[1];
    if (exited !== undefined) {
      this.evidence += 2;
      this.add(exited, 'crashed-file', 'crashed', exited);
      return;
    }
    const uncaught = /^Uncaught exception in (\S+)$/.exec(text)?.[1];
    if (uncaught !== undefined) {
      this.evidence += 1;
      this.add(uncaught, 'crashed-file', 'failed to load', uncaught);
      return;
    }
    if (text.startsWith('✔ ')) {
      // No evidence: mocha's and node's spec reporters print the same "✔ title".
      this.add(stripParenDuration(text.slice(2)).replace(/ \(\d+(?:\.\d+)?m?s\)$/, ''), 'passed');
      return;
    }
    if (text.startsWith('✘ [fail]: ')) {
      this.evidence += 2;
      const rest = text.slice(10);
      this.add(rest, 'failed');
      return;
    }
    if (text.startsWith('- [skip] ') || text.startsWith('- [todo] ')) {
      this.evidence += 1;
      this.add(text.slice(9), 'skipped');
      return;
    }
    const summary =
      /^(\d+) (tests? (?:passed|failed|skipped|todo)|known failures?|uncaught exceptions?)$/.exec(text);
    if (summary?.[2] !== undefined) {
      const n = Number(summary[1]);
      this.summary.seen = true;
      this.evidence += STRONG;
      const kind = summary[2];
      if (kind.endsWith('passed')) this.summary.passed += n;
      else if (kind.endsWith('failed') || kind.startsWith('uncaught')) this.summary.failed += n;
      else this.summary.skipped += n;
    }
  }

  private add(id: string, status: TestStatus, detail?: string, file: string | null = null): void {
    tallyStatus(this.lines, status);
    this.facts.add({ id, file, status, source: 'output', ...(detail === undefined ? {} : { detail }) });
  }

  finish(): ParseResult {
    // ava prints "N tests passed" only when some failed; a clean run ends with the passed count alone.
    if (this.summary.seen && this.summary.passed === 0 && this.lines.passed > 0)
      this.summary.passed = this.lines.passed;
    const whole = this.summary.seen && !this.timedOut;
    return result(pickCounts(this.summary, this.lines), this.facts, whole, null, this.hung);
  }
}

// ---------------------------------------------------------------------------------------------------
// unittest (python -m unittest -v)
//
// Ids are unittest's own, `package.module.Class.test`. A module that could not be imported is
// reported as the test `unittest.loader._FailedTest.<module>`: a crashed file, named by its path.

class UnittestParser implements LineParser {
  readonly runner = 'unittest';
  evidence = 0;
  private readonly summary = new Tally();
  /** "... ok" lines; the summary has no passed count, so these give it exactly under -v. */
  private okLines = 0;
  private verboseSeen = false;
  private ran = 0;
  private readonly facts = new FactList();
  private prevLine = '';
  private afterRan = false;
  /** The test whose result line had no result yet: the last one when the output ended. */
  private running: string | null = null;

  feed(line: string): void {
    const prev = this.prevLine;
    this.prevLine = line;
    const ran = /^Ran (\d+) tests? in /.exec(line);
    if (ran !== null) {
      this.ran += Number(ran[1]);
      this.summary.seen = true;
      this.afterRan = true;
      this.evidence += STRONG;
      return;
    }
    if (this.afterRan && (line.startsWith('OK') || line.startsWith('FAILED ('))) {
      this.afterRan = false;
      this.evidence += 2;
      for (const match of line.matchAll(
        /(failures|errors|skipped|expected failures|unexpected successes)=(\d+)/g,
      )) {
        const n = Number(match[2]);
        if (match[1] === 'skipped' || match[1] === 'expected failures') this.summary.skipped += n;
        else this.summary.failed += n;
      }
      return;
    }
    const header = /^(FAIL|ERROR|UNEXPECTED SUCCESS): (.+)$/.exec(line);
    if (header?.[2] !== undefined) {
      this.add(header[2], header[1] === 'ERROR' ? 'errored' : 'failed');
      return;
    }
    const sep = line.endsWith(' ...') ? line.length - 4 : line.lastIndexOf(' ... ');
    if (sep === -1) return;
    const status = line.slice(sep + 5);
    // A docstring's first line replaces the name on the result line; the name is the line before.
    const text = unittestName(line.slice(0, sep).trim()) !== null ? line.slice(0, sep).trim() : prev.trim();
    // "name (id) ... " and nothing after: the test was running when the output ended.
    this.running = status === '' ? unittestName(text) : null;
    if (status === 'ok') {
      if (this.add(text, 'passed')) {
        this.verboseSeen = true;
        this.evidence += 1;
        this.okLines++;
      }
    } else if (status === 'FAIL' || status === 'ERROR' || status === 'unexpected success') {
      if (this.add(text, status === 'ERROR' ? 'errored' : 'failed')) {
        this.verboseSeen = true;
        this.evidence += 1;
      }
    } else if (status.startsWith('skipped') || status === 'expected failure') {
      if (this.add(text, 'skipped')) this.verboseSeen = true;
    }
  }

  /** Records a result line's test; false when the text is not a unittest name. */
  private add(text: string, status: TestStatus): boolean {
    const name = unittestName(text);
    if (name === null) return false;
    const failedImport = /^unittest\.loader\._FailedTest\.(.+)$/.exec(name)?.[1];
    if (failedImport !== undefined) {
      const file = `${failedImport.replace(/\./g, '/')}.py`;
      this.facts.add({ id: file, file, status: 'crashed-file', source: 'output', detail: 'failed to load' });
      return true;
    }
    this.facts.add({ id: name, file: null, status, source: 'output' });
    return true;
  }

  finish(): ParseResult {
    let counts: Counts = { passed: null, failed: null, skipped: null };
    if (this.summary.seen) {
      // Subtest failures count once each in "failures=", so the subtraction is only a fallback.
      const passed = this.verboseSeen
        ? this.okLines
        : Math.max(0, this.ran - this.summary.failed - this.summary.skipped);
      counts = { passed, failed: this.summary.failed, skipped: this.summary.skipped };
    } else if (this.verboseSeen) {
      const facts = this.facts.values();
      counts = {
        passed: this.okLines,
        failed: facts.filter((f) => isFailing(f.status)).length,
        skipped: null,
      };
    }
    if (this.running !== null && !this.summary.seen) {
      this.facts.add({
        id: this.running,
        file: null,
        status: 'errored',
        source: 'output',
        detail: 'did not finish',
      });
    }
    return result(counts, this.facts, this.summary.seen && this.verboseSeen);
  }
}

/**
 * "test_a (pkg.mod.TestX.test_a)" (3.11+) or "test_a (pkg.mod.TestX)" (older), optionally followed by
 * a subtest's " (i=2)", → "pkg.mod.TestX.test_a". Subtests map to their test so names compare across
 * runs. Null when the text is not such a name.
 */
export function unittestName(text: string): string | null {
  // Python names may hold any letter (`test_ünï`): anything but spaces and parentheses.
  const match = /^([^\s().]+) \(([^\s()]+)\)/.exec(text);
  if (match?.[1] === undefined || match[2] === undefined) return null;
  const [, method, qualified] = match;
  return qualified.endsWith(`.${method}`) ? qualified : `${qualified}.${method}`;
}

// ---------------------------------------------------------------------------------------------------
// go test -v
//
// Ids are `package::TestName/sub`: go prints a package's tests, then its "ok  pkg" or "FAIL pkg"
// line, so a package's results are held until that line names it. A package that failed without a
// failing test (a build error, a panic, TestMain's exit) is a crashed file named by the package; a
// test that started and has no result there was running when it panicked or timed out.

interface GoResult {
  readonly name: string;
  readonly status: TestStatus;
}

class GoParser implements LineParser {
  readonly runner = 'go';
  evidence = 0;
  private readonly lines = new Tally();
  private sawRun = false;
  private readonly facts = new FactList();
  private held: GoResult[] = [];
  private readonly running = new Set<string>();
  private timedOut = false;
  private readonly hung: string[] = [];
  private packages = 0;
  private building: string | null = null;
  private readonly buildFailed = new Set<string>();
  private readonly closed = new Set<string>();

  feed(line: string): void {
    // "# pkg" then compiler errors: a package that did not build (without tests of its own, go
    // prints no FAIL line for it).
    const build = /^# (\S+)$/.exec(line)?.[1];
    if (build !== undefined) {
      this.building = build;
      return;
    }
    if (this.building !== null) {
      if (/^\S+\.go:\d+:\d+: /.test(line)) {
        this.evidence += 1;
        this.buildFailed.add(this.building);
      }
      this.building = null;
    }
    if (line.startsWith('=== RUN ')) {
      this.sawRun = true;
      this.evidence += 1;
      this.running.add(line.slice(8).trim());
      return;
    }
    if (line.startsWith('panic: test timed out after ')) {
      this.timedOut = true;
      return;
    }
    if (line.startsWith('ok  \t') || line.startsWith('FAIL\t')) {
      this.evidence += 5;
      this.packages++;
      const pkg = line.slice(5).split(/[\t ]/)[0] ?? '';
      this.closePackage(
        pkg,
        line.startsWith('FAIL\t'),
        line.endsWith('[build failed]') || line.endsWith('[setup failed]'),
      );
      return;
    }
    const text = line.trimStart();
    if (!text.startsWith('--- ')) return;
    const match = /^--- (PASS|FAIL|SKIP): (\S+)/.exec(text);
    if (match?.[2] === undefined) return;
    this.evidence += 2;
    const status: TestStatus = match[1] === 'PASS' ? 'passed' : match[1] === 'FAIL' ? 'failed' : 'skipped';
    this.running.delete(match[2]);
    this.held.push({ name: match[2], status });
  }

  private closePackage(pkg: string, failed: boolean, buildFailed: boolean): void {
    this.closed.add(pkg);
    let failing = 0;
    for (const r of this.held) {
      tallyStatus(this.lines, r.status);
      if (isFailing(r.status)) failing++;
      this.facts.add({ id: testId(pkg, r.name), file: pkg, status: r.status, source: 'output' });
    }
    // Tests that started and never ended: the package panicked or timed out while they ran.
    const detail = this.timedOut ? 'timed out' : 'crashed';
    for (const name of this.running) {
      if (failed && !buildFailed) {
        tallyStatus(this.lines, 'errored');
        failing++;
        this.facts.add({ id: testId(pkg, name), file: pkg, status: 'errored', source: 'output', detail });
      }
    }
    if (failed && failing === 0) {
      tallyStatus(this.lines, 'crashed-file');
      this.facts.add({
        id: pkg,
        file: pkg,
        status: 'crashed-file',
        source: 'output',
        detail: buildFailed ? 'did not build' : detail,
      });
    }
    if (failed && this.timedOut) this.hung.push(pkg);
    this.held = [];
    this.running.clear();
    this.timedOut = false;
  }

  finish(): ParseResult {
    for (const pkg of this.buildFailed) {
      if (this.closed.has(pkg)) continue;
      tallyStatus(this.lines, 'crashed-file');
      this.facts.add({
        id: pkg,
        file: pkg,
        status: 'crashed-file',
        source: 'output',
        detail: 'did not build',
      });
    }
    // The output ended inside a package (the run was stopped): its results so far, without the
    // package, which go had not printed yet; a test that started and did not end was running.
    const cut = this.held.length > 0 || this.running.size > 0;
    for (const r of this.held) {
      tallyStatus(this.lines, r.status);
      this.facts.add({ id: r.name, file: null, status: r.status, source: 'output' });
    }
    for (const name of this.running) {
      if ([...this.running].some((other) => other.startsWith(`${name}/`))) continue; // a parent of a running subtest
      tallyStatus(this.lines, 'errored');
      this.facts.add({ id: name, file: null, status: 'errored', source: 'output', detail: 'did not finish' });
    }
    const seen = this.lines.seen;
    // Without -v go prints only failures, so a zero passed count would be a guess.
    const counts: Counts = seen
      ? {
          passed: this.sawRun || this.lines.passed > 0 ? this.lines.passed : null,
          failed: this.lines.failed,
          skipped: this.lines.skipped,
        }
      : { passed: null, failed: null, skipped: null };
    const whole = this.sawRun && this.packages > 0 && !cut;
    return result(counts, this.facts, whole, null, this.hung);
  }
}

// ---------------------------------------------------------------------------------------------------
// cargo test (libtest): one block per test binary, each opened by "Running <target> (<binary>)" or
// "Doc-tests <crate>" and closed by "test result:", summed. Ids are `target::module::test`, the target
// being the source file cargo names (`src/lib.rs`, `tests/api.rs`) or `doc-tests`. A binary that
// ended without its "test result:" line (a panic that aborts, a signal) is a crashed file.

class CargoParser implements LineParser {
  readonly runner = 'cargo';
  evidence = 0;
  private readonly summary = new Tally();
  private readonly lines = new Tally();
  private readonly facts = new FactList();
  private target: string | null = null;
  private openBlock = false;
  private expected = 0;
  private seenInBlock = 0;
  private missing = false;

  feed(line: string): void {
    const text = line.trimStart();
    const running = /^Running (?:unittests )?(\S+) \(/.exec(text)?.[1];
    if (running !== undefined) {
      this.closeBlock(false);
      this.target = running;
      this.evidence += 1;
      return;
    }
    const doc = /^Doc-tests (\S+)$/.exec(text)?.[1];
    if (doc !== undefined) {
      this.closeBlock(false);
      this.target = 'doc-tests';
      this.evidence += 1;
      return;
    }
    if (line.startsWith('test result: ')) {
      this.summary.seen = true;
      this.evidence += STRONG;
      for (const match of line.matchAll(/\b(\d+) (passed|failed|ignored);/g)) {
        const n = Number(match[1]);
        if (match[2] === 'passed') this.summary.passed += n;
        else if (match[2] === 'failed') this.summary.failed += n;
        else this.summary.skipped += n;
      }
      this.closeBlock(true);
      return;
    }
    const run = /^running (\d+) tests?$/.exec(line);
    if (run !== null) {
      this.evidence += 3;
      this.openBlock = true;
      this.expected = Number(run[1]);
      this.seenInBlock = 0;
      return;
    }
    if (!line.startsWith('test ')) return;
    const sep = line.lastIndexOf(' ... ');
    if (sep === -1) return;
    const status = line.slice(sep + 5);
    const name = line.slice(5, sep).replace(/ - (?:should panic|compile fail)$/, '');
    let s: TestStatus;
    if (status === 'ok') s = 'passed';
    else if (status === 'FAILED') s = 'failed';
    else if (status.startsWith('ignored')) s = 'skipped';
    else return;
    tallyStatus(this.lines, s);
    this.seenInBlock++;
    this.evidence += 1;
    this.facts.add({ id: testId(this.target, name), file: this.target, status: s, source: 'output' });
  }

  /** Ends a binary's block: without its result line, the binary did not finish. */
  private closeBlock(resulted: boolean): void {
    if (this.openBlock && !resulted && this.target !== null) {
      this.missing = true;
      tallyStatus(this.lines, 'crashed-file');
      this.summary.failed += 1;
      this.facts.add({
        id: this.target,
        file: this.target,
        status: 'crashed-file',
        source: 'output',
        detail: 'crashed',
      });
    }
    if (this.openBlock && resulted && this.seenInBlock < this.expected) this.missing = true;
    this.openBlock = false;
  }

  finish(): ParseResult {
    this.closeBlock(false);
    return result(pickCounts(this.summary, this.lines), this.facts, this.summary.seen && !this.missing);
  }
}
