/**
 * Turns a test run's console output into counts and test names, for the runners the agent meets.
 *
 * Invariants and trade-offs:
 * - One pass over the text, line by line (indexOf, no split of the whole string), feeding every line
 *   to every runner parser; the runner with the most evidence wins. Each parser only does anchored
 *   prefix checks and small regexes without nested quantifiers, so the cost is linear in the output
 *   even for tens of megabytes. Lines longer than MAX_LINE_CHARS are skipped unread: no runner prints
 *   a result or summary line that long, and it bounds the work any single regex can do.
 * - Counts come from the runner's own summary lines when present (summed when the output holds several
 *   runs, e.g. cargo's one block per test binary); otherwise from the per-test lines; otherwise null.
 * - "failed" includes errors (pytest/unittest ERROR, node's cancelled tests, go packages that failed
 *   without a failing test, e.g. build failures); "skipped" includes todo, xfail and expected failures.
 * - Names are deduplicated, capped at NAME_CAP each, and a name that is both passed and failed (a
 *   pytest teardown error, a retried test) is reported as failed only. Names follow each runner's own
 *   identifiers so "before" and "after" runs compare equal; containers (suites, tests with subtests)
 *   are left out where the output distinguishes them, except go, which reports parent tests too.
 */

import type { RunnerKind } from './detect-test-command.js';

export type { RunnerKind } from './detect-test-command.js';

export interface TestSummary {
  readonly runner: RunnerKind;
  readonly passed: number | null;
  readonly failed: number | null;
  readonly skipped: number | null;
  readonly failedNames: string[];
  readonly passedNames: string[];
}

/** Maximum names kept per list. */
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

export function parseTestOutput(output: string, hint?: RunnerKind): TestSummary {
  const parsers: LineParser[] = [
    new NodeTestParser(),
    new JestParser(),
    new VitestParser(),
    new MochaParser(),
    new PytestParser(),
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
  const hinted = parsers.find((p) => p.runner === hint && p.evidence > 0);
  const chosen =
    hinted !== undefined && (hinted.evidence >= STRONG || (strongest?.evidence ?? 0) < STRONG)
      ? hinted
      : strongest;
  if (chosen === undefined) {
    return { runner: 'unknown', passed: null, failed: null, skipped: null, failedNames: [], passedNames: [] };
  }
  const result = chosen.finish();
  const failedNames = result.failed.values();
  const passedNames = result.passed.values().filter((name) => !result.failed.has(name));
  return {
    runner: chosen.runner,
    passed: result.counts.passed,
    failed: result.counts.failed,
    skipped: result.counts.skipped,
    failedNames,
    passedNames,
  };
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

// ---------------------------------------------------------------------------------------------------
// Shared pieces

interface Counts {
  passed: number | null;
  failed: number | null;
  skipped: number | null;
}

interface ParseResult {
  counts: Counts;
  passed: NameSet;
  failed: NameSet;
}

interface LineParser {
  readonly runner: RunnerKind;
  /** How sure the parser is that this output is its runner's: summary lines weigh most. */
  readonly evidence: number;
  feed(line: string): void;
  finish(): ParseResult;
}

const STRONG = 10;

/** Insertion-ordered, deduplicated, capped list of names. */
class NameSet {
  private readonly names = new Set<string>();
  add(name: string): void {
    if (name !== '' && this.names.size < NAME_CAP) this.names.add(name);
  }
  has(name: string): boolean {
    return this.names.has(name);
  }
  values(): string[] {
    return [...this.names];
  }
}

class Tally {
  passed = 0;
  failed = 0;
  skipped = 0;
  seen = false;
}

/** Summary counts when seen, else per-test line counts when seen, else unknown. */
function pickCounts(summary: Tally, lines: Tally): Counts {
  const source = summary.seen ? summary : lines.seen ? lines : null;
  if (source === null) return { passed: null, failed: null, skipped: null };
  return { passed: source.passed, failed: source.failed, skipped: source.skipped };
}

function indentOf(line: string): number {
  let i = 0;
  while (i < line.length && (line[i] === ' ' || line[i] === '\t')) i++;
  return i;
}

/** "name (1.23ms)" / "name (12 ms)" / "name (0.1s)" → "name"; otherwise unchanged. */
function stripParenDuration(text: string): string {
  const match = / \(\d+(?:\.\d+)? ?m?s\)$/.exec(text);
  return match === null ? text : text.slice(0, match.index);
}

// ---------------------------------------------------------------------------------------------------
// node:test — TAP (the default when stdout is not a terminal, e.g. under `npm test`) and spec reporters

class NodeTestParser implements LineParser {
  readonly runner = 'node-test';
  evidence = 0;
  private readonly summary = new Tally();
  private readonly lines = new Tally();
  private readonly passed = new NameSet();
  private readonly failed = new NameSet();
  /** TAP result waiting for its YAML block, which may reveal it as a suite (`type: 'suite'`). */
  private pending: { name: string; status: 'pass' | 'fail' | 'skip' } | null = null;
  /** Indent of the previous non-blank line when it was a `1..N` plan, else -1. */
  private prevPlanIndent = -1;
  /** Spec reporter `▶ name` lines not yet closed: suites and tests with subtests. */
  private readonly open: { indent: number; name: string }[] = [];
  /** Inside spec's "✖ failing tests:" recap, which repeats earlier failures. */
  private recap = false;

  feed(line: string): void {
    const indent = indentOf(line);
    const text = indent === 0 ? line : line.slice(indent);
    if (text === '') return;
    const planIndent = this.prevPlanIndent;
    this.prevPlanIndent = /^1\.\.\d+$/.test(text) ? indent : -1;

    const first = text[0];
    if (first === '#' || first === 'ℹ') {
      if (text.startsWith('# Subtest: ')) {
        this.commitPending();
        this.evidence += 1;
        return;
      }
      if (indent === 0) this.summaryLine(text);
      return;
    }
    if (text.startsWith('ok ') || text.startsWith('not ok ')) {
      this.tapResult(text, indent, planIndent);
      return;
    }
    if (this.pending !== null && text === "type: 'suite'") {
      this.pending = null;
      return;
    }
    if (text === 'TAP version 13') {
      this.evidence += 1;
      return;
    }
    if (text[1] === ' ' && (first === '✔' || first === '✖' || first === '﹣' || first === '▶')) {
      this.specResult(first, text.slice(2), indent);
    }
  }

  private summaryLine(text: string): void {
    const match = /^[#ℹ] (tests|pass|fail|cancelled|skipped|todo) (\d+)$/.exec(text);
    if (match === null) return;
    const n = Number(match[2]);
    this.commitPending();
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

  private tapResult(text: string, indent: number, planIndent: number): void {
    this.commitPending();
    const match = /^(not )?ok \d+(?: - (.*))?$/.exec(text);
    if (match === null) return;
    // A result right after a deeper plan line closes a suite or a test with subtests: not a leaf.
    if (planIndent > indent) return;
    let body = match[2] ?? '';
    let status: 'pass' | 'fail' | 'skip' = match[1] === undefined ? 'pass' : 'fail';
    // node escapes '#' in names as '\#', so the first unescaped " # " starts the directive.
    const directive = findUnescaped(body, ' # ');
    if (directive !== -1) {
      const word = body.slice(directive + 3, directive + 7).toUpperCase();
      if (word === 'SKIP' || word === 'TODO') status = 'skip';
      body = body.slice(0, directive);
    }
    this.pending = { name: body.replace(/\\([#\\])/g, '$1'), status };
  }

  private commitPending(): void {
    if (this.pending === null) return;
    this.record(this.pending.name, this.pending.status);
    this.pending = null;
  }

  private specResult(symbol: string, body: string, indent: number): void {
    if (symbol === '✖' && body === 'failing tests:') {
      this.recap = true;
      return;
    }
    if (indent === 0 && symbol !== '✖') this.recap = false;

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
      return;
    }
    if (symbol === '▶') {
      if (duration === null) this.open.push({ indent, name }); // newer nodes close with "▶ name (…ms)"
      return;
    }
    let status: 'pass' | 'fail' | 'skip' = symbol === '✔' ? 'pass' : symbol === '✖' ? 'fail' : 'skip';
    if (directive.toUpperCase().startsWith('TODO')) status = 'skip';
    if (this.recap) {
      if (status === 'fail') this.failed.add(name); // already counted above; keeps names if cut there
      return;
    }
    this.record(name, status);
  }

  private record(name: string, status: 'pass' | 'fail' | 'skip'): void {
    this.lines.seen = true;
    if (status === 'pass') {
      this.lines.passed++;
      this.passed.add(name);
    } else if (status === 'fail') {
      this.lines.failed++;
      this.failed.add(name);
    } else {
      this.lines.skipped++;
    }
  }

  finish(): ParseResult {
    this.commitPending();
    return { counts: pickCounts(this.summary, this.lines), passed: this.passed, failed: this.failed };
  }
}

function findUnescaped(text: string, needle: string): number {
  let from = 0;
  for (;;) {
    const at = text.indexOf(needle, from);
    if (at <= 0 || text[at - 1] !== '\\') return at;
    from = at + 1;
  }
}

// ---------------------------------------------------------------------------------------------------
// jest
//
// Piped output (CI, `npm test` in the sandbox) prints file headers as "PASS path" / "FAIL path"; under
// colour they are " PASS  path" / " FAIL  path" (an inverse badge). Without --verbose (jest turns it on by
// itself for a single test file) jest prints no test names for a file that passed, only "PASS path":
// such a file is reported as one passed name, its path; the failing tests of a failing file are named
// by their "● describe › test" headers. With --verbose every test is named "describe › test".
// A file that failed to load ("● Test suite failed to run") is one failure named by its path; jest's
// own "Tests:" line leaves it out, so it is added to the failed count.

const JEST_HEADER_RE = /^ ?(PASS|FAIL) {1,2}(\S.*)$/;

class JestParser implements LineParser {
  readonly runner = 'jest';
  evidence = 0;
  private readonly summary = new Tally();
  private readonly lines = new Tally();
  private readonly passed = new NameSet();
  private readonly failed = new NameSet();
  /** Inside a verbose result tree (after a file header until a blank line). */
  private inTree = false;
  /** describe() titles of the current verbose tree, by nesting level. */
  private readonly describes: string[] = [];
  /** The file of the last header, and whether it was a PASS that has listed no test yet. */
  private file = '';
  private passedFileUnlisted = false;
  /** Files that failed to load, counted once each. */
  private readonly suiteErrors = new Set<string>();
  /** Inside "Summary of all failing tests", which repeats earlier failures. */
  private recap = false;

  feed(line: string): void {
    const header = JEST_HEADER_RE.exec(line);
    if (header?.[2] !== undefined && !header[2].includes(' > ') && !header[2].endsWith(' ]')) {
      this.closeFile();
      this.evidence += 1;
      this.inTree = true;
      this.describes.length = 0;
      this.file = stripParenDuration(header[2]);
      this.passedFileUnlisted = header[1] === 'PASS' && !this.recap;
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
    if (text.startsWith('● ')) {
      const title = text.slice(2);
      if (title.startsWith('Test suite failed to run')) {
        if (this.file !== '') this.failed.add(this.file);
        if (!this.recap) this.suiteErrors.add(this.file);
      } else if (title !== 'Console') {
        // "● Console" introduces captured console output (older jests).
        this.failed.add(title);
      }
      return;
    }
    if (!this.inTree) return;
    const level = Math.max(0, Math.floor(indent / 2) - 1);
    const symbol = text[0];
    if (text[1] === ' ' && (symbol === '✓' || symbol === '✕' || symbol === '○' || symbol === '✎')) {
      this.passedFileUnlisted = false;
      let title = stripParenDuration(text.slice(2));
      if (symbol === '○' && title.startsWith('skipped ')) title = title.slice(8);
      if (symbol === '✎' && title.startsWith('todo ')) title = title.slice(5);
      const name = [...this.describes.slice(0, level), title].join(' › ');
      this.lines.seen = true;
      if (symbol === '✓') {
        this.lines.passed++;
        this.passed.add(name);
      } else if (symbol === '✕') {
        this.lines.failed++;
        this.failed.add(name);
      } else {
        this.lines.skipped++;
      }
      return;
    }
    this.describes.length = level;
    this.describes[level] = text;
  }

  /** A PASS file that listed no test (non-verbose output) is named by its path. */
  private closeFile(): void {
    if (this.passedFileUnlisted) this.passed.add(this.file);
    this.passedFileUnlisted = false;
  }

  private summaryLine(line: string): void {
    let matched = false;
    for (const match of line.matchAll(/\b(\d+) (failed|passed|skipped|todo|pending|total)/g)) {
      matched = true;
      const n = Number(match[1]);
      if (match[2] === 'passed') this.summary.passed += n;
      else if (match[2] === 'failed') this.summary.failed += n;
      else if (match[2] !== 'total') this.summary.skipped += n;
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
    return { counts: pickCounts(this.summary, this.lines), passed: this.passed, failed: this.failed };
  }
}

// ---------------------------------------------------------------------------------------------------
// vitest
//
// Names are vitest's own "file > describe > test" paths, as its verbose reporter and its "FAIL" detail
// lines print them. The default reporter prints a file that passed as one line, "✓ file (N tests)",
// named by its path; a file with failures as a tree of titles (suites carry a "(N)" count) from which
// the same full paths are rebuilt by indentation. A file that failed to load is listed under "Failed
// Suites N", which vitest's "Tests" line leaves out: it is one failure named by its path.

const TEST_FILE_RE = /\.[cm]?[jt]sx?$/;
const VITEST_SYMBOLS = new Set(['✓', '×', '↓', '□', '❯']);
/** " 12ms" / " 1.2s" after a title, and the " (retry x2)" / " (repeat x2)" markers before it. */
const VITEST_SUFFIX_RE = /(?: \((?:retry|repeat) x\d+\))*(?: \[slow\])?(?: \d+(?:\.\d+)?m?s)?$/;
const VITEST_FILE_RE = /^(.+?) \(\d+ tests?(?: \|[^)]*)?\)$/;

class VitestParser implements LineParser {
  readonly runner = 'vitest';
  evidence = 0;
  private readonly summary = new Tally();
  private readonly lines = new Tally();
  private readonly passed = new NameSet();
  private readonly failed = new NameSet();
  /** The file whose default-reporter tree is being read, or '' outside one. */
  private file = '';
  /** Open suites of that tree. */
  private readonly suites: { indent: number; title: string }[] = [];
  /** The last tree line: a suite if the next line is deeper, else a test. */
  private pending: { indent: number; symbol: string; body: string } | null = null;
  private failedSuites = 0;

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
        this.failedSuites += Number(suites[1]);
      }
      return;
    }
    if (line.startsWith(' FAIL ')) {
      // " FAIL  src/a.test.ts > suite > test" in the failure details (deduplicated with the list);
      // " FAIL  src/b.test.ts [ src/b.test.ts ]" for a file that failed to load.
      this.failed.add(
        text
          .slice(5)
          .trimStart()
          .replace(/ \[ [^\]]* \]$/, ''),
      );
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
    const file = VITEST_FILE_RE.exec(body)?.[1];
    if (indent === 1 && file !== undefined && TEST_FILE_RE.test(file)) {
      this.evidence += 1;
      // A passed file's tests are listed only if some were slow; the file stands for them otherwise.
      if (symbol === '✓') this.passed.add(file);
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
    const name = complete ? [this.file, ...this.suites.map((s) => s.title), test.body].join(' > ') : '';
    this.record(test.symbol, name);
  }

  private endTree(): void {
    if (this.pending !== null) this.recordTreeTest(this.pending);
    this.pending = null;
    this.suites.length = 0;
    this.file = '';
  }

  private record(symbol: string, name: string): void {
    if (symbol === '❯') return; // a suite or file summary line, not a test
    this.lines.seen = true;
    if (symbol === '✓') {
      this.lines.passed++;
      this.passed.add(name);
    } else if (symbol === '×') {
      this.lines.failed++;
      this.failed.add(name);
    } else {
      this.lines.skipped++;
    }
  }

  finish(): ParseResult {
    this.endTree();
    if (this.failedSuites > 0) {
      this.summary.failed += this.failedSuites;
      this.lines.failed += this.failedSuites;
    }
    return { counts: pickCounts(this.summary, this.lines), passed: this.passed, failed: this.failed };
  }
}

// ---------------------------------------------------------------------------------------------------
// mocha (spec reporter)
//
// Names are the describe titles and the test title joined with " › ", rebuilt from the indentation
// (two spaces a level), so that tests of the same title in different suites stay apart. A spec file
// that fails to load stops mocha before any test runs ("Exception during run: …"): one failure, no name.

class MochaParser implements LineParser {
  readonly runner = 'mocha';
  evidence = 0;
  private readonly summary = new Tally();
  private readonly lines = new Tally();
  private readonly passed = new NameSet();
  private readonly failed = new NameSet();
  /** describe() titles by nesting level. */
  private readonly describes: string[] = [];
  /** True between a summary and the next run's first result: the failure details use "1) suite". */
  private afterSummary = false;
  private loadError = false;

  feed(line: string): void {
    const text = line.trimStart();
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
    const nameOf = (title: string): string => [...this.describes.slice(0, level), title].join(' › ');
    const symbol = text[0];
    if ((symbol === '✔' || symbol === '✓') && text[1] === ' ') {
      this.afterSummary = false;
      this.lines.seen = true;
      this.lines.passed++;
      this.passed.add(nameOf(stripParenDuration(text.slice(2))));
      return;
    }
    if (this.afterSummary) return;
    const failure = /^\d+\) (.+)$/.exec(text);
    if (failure?.[1] !== undefined) {
      // Only mocha numbers its failures in place; its "✔" lines look like node's spec reporter's.
      this.evidence += 1;
      this.lines.seen = true;
      this.lines.failed++;
      this.failed.add(nameOf(failure[1]));
    } else if (text.startsWith('- ')) {
      this.lines.seen = true;
      this.lines.skipped++;
    } else {
      this.describes.length = level;
      this.describes[level] = text;
    }
  }

  finish(): ParseResult {
    if (this.loadError && !this.summary.seen) {
      return { counts: { passed: 0, failed: 1, skipped: 0 }, passed: this.passed, failed: this.failed };
    }
    return { counts: pickCounts(this.summary, this.lines), passed: this.passed, failed: this.failed };
  }
}

// ---------------------------------------------------------------------------------------------------
// pytest (best with -rA, which lists every test id in the short summary)

const PYTEST_STATUS_RE = /^(PASSED|FAILED|ERROR|XPASS|XFAIL) (.+)$/;
const PYTEST_OUTCOMES = new Set(['PASSED', 'FAILED', 'ERROR', 'SKIPPED', 'XFAIL', 'XPASS']);

class PytestParser implements LineParser {
  readonly runner = 'pytest';
  evidence = 0;
  private readonly summary = new Tally();
  private readonly lines = new Tally();
  private readonly passed = new NameSet();
  private readonly failed = new NameSet();

  feed(line: string): void {
    const first = line[0];
    if (first === '=') {
      this.summaryLine(line);
      return;
    }
    // "-q" summaries have no rulers; a digit can also start a test id, so only return on a match.
    if (((first !== undefined && first >= '0' && first <= '9') || first === 'n') && this.summaryLine(line))
      return;
    const status = PYTEST_STATUS_RE.exec(line);
    if (status?.[1] !== undefined && status[2] !== undefined) {
      if (status[2].startsWith('(')) return; // unittest's "FAILED (failures=1)"
      this.evidence += 1;
      this.record(status[1], pytestNodeId(status[2]));
      return;
    }
    if (line.includes('::')) this.verboseLine(line);
  }

  /** -v lines: "tests/test_x.py::test_a PASSED   [ 50%]" (parsed by hand: ids may hold anything). */
  private verboseLine(line: string): void {
    let end = line.length;
    if (line.endsWith('%]')) {
      end = line.lastIndexOf('[');
      while (end > 0 && line[end - 1] === ' ') end--;
    }
    const space = line.lastIndexOf(' ', end - 1);
    if (space <= 0) return;
    const outcome = line.slice(space + 1, end);
    const id = line.slice(0, space);
    if (!PYTEST_OUTCOMES.has(outcome) || !id.includes('::')) return;
    this.evidence += 1;
    this.record(outcome, id);
  }

  private record(status: string, id: string): void {
    this.lines.seen = true;
    if (status === 'PASSED' || status === 'XPASS') {
      this.lines.passed++;
      this.passed.add(id);
    } else if (status === 'FAILED' || status === 'ERROR') {
      this.lines.failed++;
      this.failed.add(id);
    } else {
      this.lines.skipped++;
    }
  }

  /** "==== 2 failed, 3 passed, 1 warning in 0.12s ====" (or without the rulers under -q). */
  private summaryLine(line: string): boolean {
    if (line.includes('test session starts')) {
      this.evidence += STRONG;
      return true;
    }
    const body = line.replace(/^=+ /, '').replace(/ =+$/, '');
    if (!/^(?:\d+ [a-z]+(?:, )?)+ in \d+(?:\.\d+)?s\b/.test(body) && !/^no tests ran in /.test(body)) {
      return false;
    }
    this.summary.seen = true;
    this.evidence += STRONG;
    for (const match of body.matchAll(/\b(\d+) (passed|failed|skipped|xfailed|xpassed|errors?)\b/g)) {
      const n = Number(match[1]);
      const kind = match[2];
      if (kind === 'passed' || kind === 'xpassed') this.summary.passed += n;
      else if (kind === 'failed' || kind === 'error' || kind === 'errors') this.summary.failed += n;
      else this.summary.skipped += n;
    }
    return true;
  }

  finish(): ParseResult {
    return { counts: pickCounts(this.summary, this.lines), passed: this.passed, failed: this.failed };
  }
}

/**
 * The node id from the text after "FAILED ": "path::test[params] - message" → "path::test[params]".
 * Parametrize ids may contain " - ", so when the id has a "[" the message starts after the "]".
 */
export function pytestNodeId(rest: string): string {
  const sep = rest.indexOf(' - ');
  if (sep === -1) return rest.trimEnd();
  const bracket = rest.indexOf('[');
  if (bracket !== -1 && bracket < sep) {
    const close = rest.indexOf('] - ', bracket);
    if (close !== -1) return rest.slice(0, close + 1);
    if (rest.endsWith(']')) return rest;
  }
  return rest.slice(0, sep);
}

// ---------------------------------------------------------------------------------------------------
// unittest (python -m unittest -v)

class UnittestParser implements LineParser {
  readonly runner = 'unittest';
  evidence = 0;
  private readonly summary = new Tally();
  /** "... ok" lines; the summary has no passed count, so these give it exactly under -v. */
  private okLines = 0;
  private verboseSeen = false;
  private ran = 0;
  private readonly passed = new NameSet();
  private readonly failed = new NameSet();
  private prevLine = '';
  private afterRan = false;

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
      this.failed.add(unittestName(header[2]) ?? header[2]);
      return;
    }
    const sep = line.lastIndexOf(' ... ');
    if (sep === -1) return;
    const status = line.slice(sep + 5);
    // A docstring's first line replaces the name on the result line; the name is the line before.
    const name = unittestName(line.slice(0, sep).trim()) ?? unittestName(prev.trim());
    if (name === null) return;
    if (status === 'ok') {
      this.verboseSeen = true;
      this.evidence += 1;
      this.okLines++;
      this.passed.add(name);
    } else if (status === 'FAIL' || status === 'ERROR' || status === 'unexpected success') {
      this.verboseSeen = true;
      this.evidence += 1;
      this.failed.add(name);
    }
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
      counts = { passed: this.okLines, failed: this.failed.values().length, skipped: null };
    }
    return { counts, passed: this.passed, failed: this.failed };
  }
}

/**
 * "test_a (pkg.mod.TestX.test_a)" (3.11+) or "test_a (pkg.mod.TestX)" (older), optionally followed by
 * a subtest's " (i=2)", → "pkg.mod.TestX.test_a". Subtests map to their test so names compare across
 * runs. Null when the text is not such a name.
 */
export function unittestName(text: string): string | null {
  const match = /^(\w+) \(([\w.]+)\)/.exec(text);
  if (match?.[1] === undefined || match[2] === undefined) return null;
  const [, method, qualified] = match;
  return qualified.endsWith(`.${method}`) ? qualified : `${qualified}.${method}`;
}

// ---------------------------------------------------------------------------------------------------
// go test -v

class GoParser implements LineParser {
  readonly runner = 'go';
  evidence = 0;
  private readonly lines = new Tally();
  private sawRun = false;
  private failsInPackage = 0;
  private readonly passed = new NameSet();
  private readonly failed = new NameSet();

  feed(line: string): void {
    if (line.startsWith('=== RUN ')) {
      this.sawRun = true;
      this.evidence += 1;
      return;
    }
    if (line.startsWith('ok  \t') || line.startsWith('FAIL\t')) {
      this.evidence += 5;
      if (line.startsWith('FAIL\t') && this.failsInPackage === 0) {
        // The package failed without a failing test: build error, panic in init, TestMain exit.
        const pkg = line.slice(5).split(/[\t ]/)[0] ?? '';
        this.lines.seen = true;
        this.lines.failed++;
        this.failed.add(pkg);
      }
      this.failsInPackage = 0;
      return;
    }
    const text = line.trimStart();
    if (!text.startsWith('--- ')) return;
    const match = /^--- (PASS|FAIL|SKIP): (\S+)/.exec(text);
    if (match?.[2] === undefined) return;
    this.evidence += 2;
    this.lines.seen = true;
    if (match[1] === 'PASS') {
      this.lines.passed++;
      this.passed.add(match[2]);
    } else if (match[1] === 'FAIL') {
      this.failsInPackage++;
      this.lines.failed++;
      this.failed.add(match[2]);
    } else {
      this.lines.skipped++;
    }
  }

  finish(): ParseResult {
    const seen = this.lines.seen;
    // Without -v go prints only failures, so a zero passed count would be a guess.
    const counts: Counts = seen
      ? {
          passed: this.sawRun || this.lines.passed > 0 ? this.lines.passed : null,
          failed: this.lines.failed,
          skipped: this.lines.skipped,
        }
      : { passed: null, failed: null, skipped: null };
    return { counts, passed: this.passed, failed: this.failed };
  }
}

// ---------------------------------------------------------------------------------------------------
// cargo test (libtest): one "test result:" line per test binary and for doc tests, summed

class CargoParser implements LineParser {
  readonly runner = 'cargo';
  evidence = 0;
  private readonly summary = new Tally();
  private readonly lines = new Tally();
  private readonly passed = new NameSet();
  private readonly failed = new NameSet();

  feed(line: string): void {
    if (line.startsWith('test result: ')) {
      this.summary.seen = true;
      this.evidence += STRONG;
      for (const match of line.matchAll(/\b(\d+) (passed|failed|ignored);/g)) {
        const n = Number(match[1]);
        if (match[2] === 'passed') this.summary.passed += n;
        else if (match[2] === 'failed') this.summary.failed += n;
        else this.summary.skipped += n;
      }
      return;
    }
    if (line.startsWith('running ') && /^running \d+ tests?$/.test(line)) {
      this.evidence += 3;
      return;
    }
    if (!line.startsWith('test ')) return;
    const sep = line.lastIndexOf(' ... ');
    if (sep === -1) return;
    const status = line.slice(sep + 5);
    const name = line.slice(5, sep).replace(/ - (?:should panic|compile fail)$/, '');
    if (status === 'ok') {
      this.lines.passed++;
      this.passed.add(name);
    } else if (status === 'FAILED') {
      this.lines.failed++;
      this.failed.add(name);
    } else if (status.startsWith('ignored')) {
      this.lines.skipped++;
    } else {
      return;
    }
    this.lines.seen = true;
    this.evidence += 1;
  }

  finish(): ParseResult {
    return { counts: pickCounts(this.summary, this.lines), passed: this.passed, failed: this.failed };
  }
}
