/**
 * The pytest reader: pytest's console output (the text fallback) and the report of the harness's
 * pytest plugin (report-helpers.ts), one JSON object a line, written as the run goes, so a run that
 * hung, crashed or ran out of memory still says which tests passed and which one was running.
 *
 * Ids are pytest's node ids (`tests/test_x.py::TestClass::test_a[param]`), as both the output and
 * the report print them; the file is the part before the first `::`.
 *
 * The console output, read line by line with ANSI escapes removed (`--color=yes` in `addopts` is
 * common, and colour splits the summary line and the ids):
 * - `-rA` short summary lines (`PASSED id`, `FAILED id - message`, `ERROR id`, `XFAIL`, `XPASS`) and
 *   `-v` lines (`id PASSED [ 50%]`) name tests; `ERROR path` without `::` is a file that could not
 *   be collected: a `crashed-file`.
 * - the summary line (`2 failed, 3 passed, 1 error in 0.12s`, with or without its rulers) gives the
 *   counts; errors count as failures.
 * - progress lines (`tests/test_x.py ..F.  [ 40%]`) give each file's outcome when no test of it is
 *   named (the run was stopped before the summary), and the one still open when the output ended
 *   is the file that was running.
 * - a faulthandler dump (`Timeout (0:03:00)!` then the stack) names the file of the test that hung.
 */
import { FactList, workspacePath, worse, type TestFact, type TestStatus } from './test-run.js';
import { STRONG, Tally, pickCounts, type LineParser, type ParseResult } from './line-parser.js';

const STATUS_RE = /^(PASSED|FAILED|ERROR|XPASS|XFAIL) (.+)$/;
const OUTCOMES = new Set(['PASSED', 'FAILED', 'ERROR', 'SKIPPED', 'XFAIL', 'XPASS']);
const PROGRESS_RE = /^(\S+\.py) ([.FEsxX]*)(?: +\[ *\d+%\])?$/;

function statusOfWord(word: string): TestStatus {
  if (word === 'PASSED' || word === 'XPASS') return 'passed';
  if (word === 'FAILED') return 'failed';
  if (word === 'ERROR') return 'errored';
  return 'skipped';
}

/** The file of a pytest node id: what comes before the first `::`. */
export function pytestFile(id: string): string {
  const i = id.indexOf('::');
  return i === -1 ? id : id.slice(0, i);
}

export class PytestOutputParser implements LineParser {
  readonly runner = 'pytest';
  evidence = 0;
  private readonly summary = new Tally();
  private readonly lines = new Tally();
  private readonly facts = new FactList();
  /** Per file, from progress lines: the worst status shown, and whether its line was finished. */
  private readonly progress = new Map<string, TestStatus>();
  private openFile: string | null = null;
  private readonly hung: string[] = [];
  private inDump = false;

  constructor(private readonly root: string | null) {}

  feed(line: string): void {
    if (this.inDump) {
      const frame = /^ {2}File "(.+)", line \d+ in \w+$/.exec(line);
      if (frame?.[1] !== undefined) {
        const file = workspacePath(frame[1], this.root);
        if (/(?:^|\/)(?:test_[^/]*|[^/]*_test)\.py$/.test(file)) {
          if (!this.hung.includes(file)) this.hung.push(file);
          this.inDump = false;
        }
        return;
      }
      if (!line.startsWith('Thread ') && !line.startsWith('Current thread ') && line !== '') {
        this.inDump = false;
      }
    }
    // The dump may start on a progress line ("tests/test_x.py .Timeout (0:03:00)!").
    if (line.endsWith(')!') && /Timeout \(\d+:\d\d:\d\d\)!$/.test(line)) {
      this.inDump = true;
      this.evidence += 2;
      return;
    }
    const first = line[0];
    if (first === '=') {
      this.summaryLine(line);
      return;
    }
    // "-q" summaries have no rulers; a digit can also start a test id, so only return on a match.
    if (((first !== undefined && first >= '0' && first <= '9') || first === 'n') && this.summaryLine(line))
      return;
    const status = STATUS_RE.exec(line);
    if (status?.[1] !== undefined && status[2] !== undefined) {
      if (status[2].startsWith('(')) return; // unittest's "FAILED (failures=1)"
      this.evidence += 1;
      const id = pytestNodeId(status[2]);
      if (status[1] === 'ERROR' && !id.includes('::')) {
        // A module that could not be collected.
        this.record('crashed-file', id);
        return;
      }
      this.record(statusOfWord(status[1]), id, status[1] === 'XFAIL' ? 'xfail' : undefined);
      return;
    }
    if (line.includes('::')) {
      this.verboseLine(line);
      return;
    }
    if (!line.includes('.py ')) return;
    const progress = PROGRESS_RE.exec(line);
    if (progress?.[1] !== undefined) this.progressLine(progress[1], progress[2] ?? '', line.endsWith('%]'));
  }

  private progressLine(file: string, marks: string, closed: boolean): void {
    this.evidence += 1;
    let status: TestStatus = this.progress.get(file) ?? 'skipped';
    for (const mark of marks) {
      if (mark === '.' || mark === 'X') status = worse(status, 'passed');
      else if (mark === 'F') status = worse(status, 'failed');
      else if (mark === 'E') status = worse(status, 'errored');
    }
    this.progress.set(file, status);
    this.openFile = closed ? null : file;
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
    if (!OUTCOMES.has(outcome) || !id.includes('::')) return;
    this.evidence += 1;
    this.record(statusOfWord(outcome), id, outcome === 'XFAIL' ? 'xfail' : undefined);
  }

  private record(status: TestStatus, id: string, detail?: string): void {
    this.lines.seen = true;
    if (status === 'passed') this.lines.passed++;
    else if (status === 'skipped') this.lines.skipped++;
    else this.lines.failed++;
    const file = pytestFile(id);
    this.facts.add({ id, file, status, source: 'output', ...(detail === undefined ? {} : { detail }) });
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
    // Files the progress lines show and no line names a test of: one fact for the whole file.
    const named = new Set(this.facts.values().map((f) => f.file));
    for (const [file, status] of this.progress) {
      if (named.has(file)) continue;
      const open = file === this.openFile;
      if (open || status !== 'skipped') {
        this.facts.add({
          id: file,
          file,
          status: open ? 'crashed-file' : status,
          source: 'output',
          ...(open ? { detail: this.hung.includes(file) ? 'timed out' : 'did not finish' } : {}),
        });
      }
    }
    const counted = this.lines.passed + this.lines.failed + this.lines.skipped;
    const total = (this.summary.passed + this.summary.failed + this.summary.skipped) | 0;
    return {
      counts: pickCounts(this.summary, this.lines),
      facts: this.facts,
      // -rA names every test but the skipped ones (listed by location), so skips are not required.
      whole: this.summary.seen && counted >= total - this.summary.skipped && this.openFile === null,
      running: this.openFile,
      hung: this.hung,
    };
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
// The plugin's report

export interface PytestReport {
  readonly facts: TestFact[];
  /** The session finished (its `finish` record was written). */
  readonly finished: boolean;
  /** Every collected test has a result. */
  readonly allReported: boolean;
  /** The test that was running when the process ended, if one was. */
  readonly running: string | null;
  readonly fileMs: Map<string, number>;
}

interface Record_ {
  readonly e: string;
  readonly id?: unknown;
  readonly when?: unknown;
  readonly outcome?: unknown;
  readonly xfail?: unknown;
  readonly dur?: unknown;
  readonly line?: unknown;
}

/**
 * Reads the plugin's report. `stopped` says why the run ended early, if it did (`timed out` when
 * the plugin's per-test bound or the harness's time limit stopped it, `out of memory`, or
 * `crashed`): the test that was running gets it as its detail, and the tests of its file that never
 * started are errored too (the file hung: none of them can be said to pass).
 */
export function readPytestReport(text: string, stopped: string | null): PytestReport {
  const items: string[] = [];
  /** The line of each collected test's definition, as the plugin reported it. */
  const lines = new Map<string, number>();
  const started = new Set<string>();
  const status = new Map<string, TestStatus>();
  /** Tests that failed as expected (pytest's xfail): skipped, which SWE-bench's grading counts as passing. */
  const xfail = new Set<string>();
  const collectErrors: string[] = [];
  const fileMs = new Map<string, number>();
  let finished = false;
  let last: string | null = null;
  for (const line of text.split('\n')) {
    if (line === '') continue;
    let r: Record_;
    try {
      r = JSON.parse(line) as Record_;
    } catch {
      continue; // a line cut by the end of the process
    }
    const id = typeof r.id === 'string' ? r.id : null;
    switch (r.e) {
      case 'item':
        if (id !== null) items.push(id);
        if (id !== null && typeof r.line === 'number' && Number.isInteger(r.line) && r.line > 0)
          lines.set(id, r.line);
        break;
      case 'collect_error':
        if (id !== null) collectErrors.push(id);
        break;
      case 'start':
        if (id !== null) {
          started.add(id);
          last = id;
        }
        break;
      case 'report': {
        if (id === null) break;
        const s = reportStatus(r);
        if (s === null) break;
        if (s === 'skipped' && r.xfail === true) xfail.add(id);
        const prior = status.get(id);
        status.set(id, prior === undefined ? s : combine(prior, s));
        if (typeof r.dur === 'number' && r.dur > 0) {
          const file = pytestFile(id);
          fileMs.set(file, (fileMs.get(file) ?? 0) + r.dur * 1000);
        }
        if (r.when === 'teardown' && last === id) last = null;
        break;
      }
      case 'finish':
        finished = true;
        last = null;
        break;
      default:
        break;
    }
  }
  const facts = new FactList();
  for (const file of collectErrors) {
    facts.add({
      id: file,
      file: pytestFile(file),
      status: 'crashed-file',
      source: 'report',
      detail: 'failed to load',
    });
  }
  const running = finished ? null : last;
  const runningFile = running === null ? null : pytestFile(running);
  const order = [...items, ...[...status.keys()].filter((id) => !items.includes(id))];
  let allReported = true;
  for (const id of order) {
    const file = pytestFile(id);
    const s = status.get(id);
    if (id === running) {
      facts.add({ id, file, status: 'errored', source: 'harness', detail: stopped ?? 'did not finish' });
    } else if (s !== undefined) {
      const expected = s === 'skipped' && xfail.has(id);
      const line = lines.get(id);
      facts.add({
        id,
        file,
        status: s,
        source: 'report',
        ...(expected ? { detail: 'xfail' } : {}),
        ...(line === undefined ? {} : { line }),
      });
    } else if (runningFile !== null && file === runningFile && !started.has(id)) {
      facts.add({
        id,
        file,
        status: 'errored',
        source: 'harness',
        detail: 'not run: its file did not finish',
      });
    } else {
      allReported = false;
    }
  }
  return { facts: facts.values(), finished, allReported, running, fileMs };
}

function reportStatus(r: Record_): TestStatus | null {
  const when = r.when;
  const outcome = r.outcome;
  if (outcome === 'skipped') return 'skipped';
  if (outcome === 'failed') return when === 'call' ? 'failed' : 'errored';
  if (outcome === 'passed') return when === 'call' ? 'passed' : null;
  return null;
}

/** Setup, call and teardown of one test: a failure anywhere wins, a skip only over nothing. */
function combine(a: TestStatus, b: TestStatus): TestStatus {
  if (a === 'skipped') return b;
  if (b === 'skipped') return a;
  return worse(a, b);
}
