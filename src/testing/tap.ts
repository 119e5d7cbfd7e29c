/**
 * The TAP reader: node:test's TAP reporter, node-tap (18–21, whose output in a sandbox without colour
 * is TAP), ava `--tap`, mocha's and vitest's TAP reporters. Fed one line at a time (ANSI escapes
 * already removed), so it serves both the text fallback and a TAP report file.
 *
 * What it knows of the dialects:
 * - Nesting is by indentation, four spaces a level. node and node-tap announce each test with
 *   `# Subtest: name` before its lines and close it with its result line; vitest opens a block with
 *   `ok 1 - name # time=1ms {` and closes it with `}`; ava and mocha are flat.
 * - A result with tests below it is a container (a suite, a file, a test with subtests), not a test.
 *   A container that failed while nothing below it failed failed on its own (a hook, a crash, a
 *   timeout of the whole file) and is reported as one failure. Where tests are announced, a result
 *   that was not announced is an assertion inside a test (node-tap's `ok 1 - should be equal`).
 * - Top-level entries whose names are file paths (node-tap's, and node's for a test file that
 *   failed as a whole: crashed, timed out, ran out of memory) are files: their tests' ids are
 *   `file::title > title`, and a file that failed without a test is a `crashed-file` fact.
 * - node-tap's file timeout: the file that ran past it is killed (its own result says the signal)
 *   and a top-level `not ok N - timeout!` whose YAML names it (`expired: file`) takes the place of
 *   the result of the file announced then. That file is timed out too when it had not finished (no
 *   plan of its own yet: a file still loading on a slow machine), and ran as its tests say when it
 *   had. The expired file and a file timed out so are the run's `hung` files.
 * - Directives: `# SKIP` and `# TODO` (any case, with or without a reason) make a test skipped;
 *   `# time=2.6ms` (node-tap, vitest) is dropped. Any other ` # ` is part of the name (ava does not
 *   escape `#`). Escapes `\#` and `\\` (node, node-tap) are undone.
 * - YAML blocks after a result are read for `type: 'suite'` (node 22+), the failure type (a timeout,
 *   a cancellation) and a file's exit code or signal, and never for results: an error message in
 *   them may look like TAP.
 * - `# tests N` / `# pass N` / `# fail N` comments (node, ava, mocha) and the top-level plan tell
 *   whether the list is complete; `Bail out!` makes it incomplete.
 */
import {
  FactList,
  NAME_SEPARATOR,
  looksLikeTestFile,
  testId,
  workspacePath,
  type FactSource,
  type TestStatus,
} from './test-run.js';

export interface TapOptions {
  /** The sandbox's workdir: absolute file paths under it are made relative. */
  readonly root: string | null;
  /** The file every test belongs to, when the run was of one file (eval's per-file runs). */
  readonly file?: string | null;
  readonly source: FactSource;
}

export interface TapCounts {
  passed: number;
  failed: number;
  skipped: number;
  seen: boolean;
}

interface Pending {
  readonly level: number;
  readonly status: TestStatus;
  readonly name: string;
  readonly container: boolean;
  readonly failedBelow: boolean;
  /** The file this entry is, when it is a top-level file entry. */
  readonly isFile: string | null;
  suite: boolean;
  detail: string | undefined;
  /**
   * node-tap's top-level `timeout!` in the place of the announced file's result: that file, and
   * whether it had finished (printed its plan).
   */
  readonly timeoutOf?: { readonly file: string; readonly finished: boolean };
  /** A `timeout!` result's `expired:` file. */
  expired?: string;
}

const RESULT_RE = /^(not )?ok\b(?: +\d+)?(?: +-)?(?: (.*))?$/;

export class TapReader {
  /** How sure we are this is TAP: results and version lines count one, summary comments ten. */
  evidence = 0;
  readonly facts = new FactList();
  readonly summary: TapCounts = { passed: 0, failed: 0, skipped: 0, seen: false };
  /** Results counted from the lines (tests only, not containers or assertions). */
  readonly counted: TapCounts = { passed: 0, failed: 0, skipped: 0, seen: false };
  /** A `Bail out!` line: the run stopped early. */
  bailedOut = false;
  /** Containers that are not suites (tests with subtests): node counts them in its "tests" total. */
  containers = 0;
  /** Files that ran past the runner's own timeout (node-tap's `timeout!`). */
  readonly hung: string[] = [];
  private announceMode = false;
  /** Per level: the `# Subtest:` name announced there (raw, escaped), or a `{` block's name. */
  private readonly announced: (string | null)[] = [];
  /** Per level: the unescaped title of the container open there (for its children's paths). */
  private readonly titles: string[] = [];
  /** Per level k: tests recorded at level >= k since the last result at level k - 1. */
  private readonly below: number[] = [];
  private readonly failedBelowAt: boolean[] = [];
  /** vitest's `{` blocks: levels whose container result came first. */
  private readonly braces: { level: number; status: TestStatus; name: string }[] = [];
  private pending: Pending | null = null;
  private yamlIndent = -1;
  private plan: number | null = null;
  /** The plan of the top-level entry open now (a node-tap file prints it when its tests are done). */
  private innerPlan: number | null = null;
  private topResults = 0;

  constructor(private readonly options: TapOptions) {}

  feed(line: string): void {
    const indent = indentOf(line);
    const text = indent === 0 ? line : line.slice(indent);
    if (this.yamlIndent >= 0) {
      if (text === '...' && indent <= this.yamlIndent) {
        this.yamlIndent = -1;
        return;
      }
      if (text === '' || indent >= this.yamlIndent) {
        this.yamlLine(text);
        return;
      }
      this.yamlIndent = -1; // a block that was never closed
    }
    if (text === '') return;
    if (text === '---' && this.pending !== null && indent > this.pending.level * 4) {
      this.yamlIndent = indent;
      return;
    }
    const level = Math.floor(indent / 4);
    if (text.startsWith('# Subtest: ')) {
      this.commit();
      this.announceMode = true;
      this.evidence += 1;
      this.announced[level] = text.slice(11);
      this.announced.length = level + 1;
      if (level === 0) this.innerPlan = null;
      // Printed before the children: their paths start with this title.
      this.titles[level] = unescapeTap(text.slice(11));
      this.titles.length = level + 1;
      return;
    }
    if (text.startsWith('ok') || text.startsWith('not ok')) {
      const m = RESULT_RE.exec(text);
      if (m !== null) {
        this.commit();
        this.result(level, m[1] === undefined, m[2] ?? '');
        return;
      }
    }
    if (text === '}') {
      this.commit();
      this.closeBrace(level);
      return;
    }
    if (text.startsWith('#')) {
      this.commit();
      if (level === 0) this.comment(text);
      return;
    }
    if (text.startsWith('TAP version ')) {
      this.evidence += 1;
      return;
    }
    if (text.startsWith('Bail out!')) {
      this.commit();
      this.bailedOut = true;
      this.evidence += 1;
      return;
    }
    const plan = /^1\.\.(\d+)/.exec(text);
    if (plan !== null) {
      this.commit();
      if (level === 0) this.plan = Number(plan[1]);
      if (level === 1) this.innerPlan = Number(plan[1]);
    }
  }

  private comment(text: string): void {
    const m = /^# (tests|pass|fail|cancelled|skip|skipped|todo) (\d+)$/.exec(text);
    if (m === null) return;
    const n = Number(m[2]);
    this.summary.seen = true;
    this.evidence += 10;
    switch (m[1]) {
      case 'pass':
        this.summary.passed += n;
        break;
      case 'fail':
      case 'cancelled':
        this.summary.failed += n;
        break;
      case 'tests':
        break;
      default:
        this.summary.skipped += n;
    }
  }

  private yamlLine(text: string): void {
    const p = this.pending;
    if (p === null) return;
    if (text === "type: 'suite'") p.suite = true;
    const failure = /^failureType: '(\w+)'$/.exec(text)?.[1];
    if (failure === 'testTimeoutFailure') p.detail = 'timed out';
    else if (failure === 'cancelledByParent') p.detail ??= 'cancelled';
    else if (failure === 'hookFailed') p.detail ??= 'a hook failed';
    const signal = /^signal: '?(SIG\w+)'?$/.exec(text)?.[1];
    if (signal !== undefined) p.detail = `killed by ${signal}`;
    const code = /^exitCode: (\d+)$/.exec(text)?.[1];
    if (code !== undefined && code !== '0') p.detail ??= `exited with code ${code}`;
    const expired = /^expired: (.+)$/.exec(text)?.[1];
    if (expired !== undefined && p.timeoutOf !== undefined) p.expired = expired.trim();
  }

  private result(level: number, ok: boolean, rest: string): void {
    this.evidence += 1;
    if (level === 0) this.topResults++;
    let body = rest;
    const brace = body.endsWith(' {') || body === '{';
    if (brace) body = body.slice(0, -1).trimEnd();
    let status: TestStatus = ok ? 'passed' : 'failed';
    let from = 0;
    for (;;) {
      const at = findUnescaped(body, ' # ', from);
      if (at === -1) break;
      const directive = body.slice(at + 3);
      if (/^(?:skip|todo)\b/i.test(directive)) {
        status = 'skipped';
        body = body.slice(0, at);
        break;
      }
      if (directive.startsWith('time=')) {
        body = body.slice(0, at);
        break;
      }
      from = at + 3;
    }
    const raw = body;
    const name = unescapeTap(raw);
    const announcedHere = this.announced[level];
    if (
      level === 0 &&
      this.announceMode &&
      !ok &&
      name === 'timeout!' &&
      announcedHere != null &&
      announcedHere !== raw &&
      looksLikeTestFile(unescapeTap(announcedHere))
    ) {
      // node-tap's file timeout, in the place of the announced file's own result.
      const file = unescapeTap(announcedHere);
      const finished = (this.innerPlan ?? 0) > 0;
      this.resetBelow(level);
      this.announced.length = level;
      this.pending = {
        level,
        status: 'failed',
        name: file,
        container: true,
        failedBelow: false,
        isFile: workspacePath(file, this.options.root),
        suite: false,
        detail: 'timed out',
        timeoutOf: { file, finished },
      };
      return;
    }
    if (this.announceMode && !brace && announcedHere !== raw && status !== 'skipped') {
      // An assertion inside a test (node-tap): its test's own result line says whether it failed.
      this.resetBelow(level);
      return;
    }
    const container = brace || (this.below[level + 1] ?? 0) > 0;
    const failedBelow = this.failedBelowAt[level + 1] ?? false;
    this.resetBelow(level);
    this.announced.length = level;
    const isFile = level === 0 && looksLikeTestFile(name) ? workspacePath(name, this.options.root) : null;
    if (brace) {
      this.braces.push({ level, status, name });
      this.titles[level] = name;
      this.titles.length = level + 1;
      return;
    }
    this.pending = { level, status, name, container, failedBelow, isFile, suite: false, detail: undefined };
  }

  private closeBrace(level: number): void {
    const open = this.braces.at(-1);
    if (open?.level !== level) return;
    this.braces.pop();
    const failedBelow = this.failedBelowAt[level + 1] ?? false;
    const hadTests = (this.below[level + 1] ?? 0) > 0;
    this.resetBelow(level);
    this.titles.length = level;
    if (open.status === 'failed' && !failedBelow) {
      this.record(level, open.name, 'failed', hadTests ? 'failed outside its tests' : undefined, true);
    }
  }

  /** Records the pending result once its YAML block (if any) has been read. */
  private commit(): void {
    const p = this.pending;
    if (p === null) return;
    this.pending = null;
    if (p.timeoutOf !== undefined) {
      this.timedOut(p.timeoutOf, p.expired);
      return;
    }
    if (p.container || p.suite) {
      if (!p.suite) this.containers++;
      // A suite or file that failed with no failing test below it failed on its own.
      if (p.status === 'failed' && !p.failedBelow) this.record(p.level, p.name, 'failed', p.detail, true);
      return;
    }
    let status = p.status;
    if (status === 'failed' && (p.detail === 'timed out' || p.detail === 'cancelled')) status = 'errored';
    this.record(p.level, p.name, status, p.detail, false);
  }

  private record(
    level: number,
    name: string,
    status: TestStatus,
    detail: string | undefined,
    container: boolean,
  ): void {
    const fixedFile = this.options.file ?? null;
    const fileTitle = fixedFile === null ? this.fileTitle() : null;
    const top = level === 0 && fixedFile === null && looksLikeTestFile(name);
    if (top) {
      // A whole file: one fact for it, a crash when it failed.
      const file = workspacePath(name, this.options.root);
      const fileStatus: TestStatus = status === 'failed' || status === 'errored' ? 'crashed-file' : status;
      this.count(fileStatus, level);
      this.facts.add({ id: file, file, status: fileStatus, source: this.options.source, detail });
      return;
    }
    const file = fixedFile ?? fileTitle;
    const start = fileTitle === null ? 0 : 1;
    const path = [...this.titles.slice(start, level), name];
    if (container && status === 'failed' && detail === undefined) detail = 'failed outside its tests';
    this.count(status, level);
    this.facts.add({
      id: testId(file, path.join(NAME_SEPARATOR)),
      file,
      status,
      source: this.options.source,
      ...(detail === undefined ? {} : { detail }),
    });
  }

  /**
   * node-tap's `timeout!`: the expired file hung (killed, its result already read: now timed out),
   * and the file whose place it took did too when it had not finished.
   */
  private timedOut(place: { readonly file: string; readonly finished: boolean }, expired?: string): void {
    if (expired !== undefined && looksLikeTestFile(expired)) {
      const file = workspacePath(expired, this.options.root);
      this.markHung(file);
      const fact = this.facts.get(file);
      if (fact?.status === 'crashed-file') this.facts.replace({ ...fact, detail: 'timed out' });
    }
    if (!place.finished) {
      this.record(0, place.file, 'failed', 'timed out', true);
      this.markHung(workspacePath(place.file, this.options.root));
    }
  }

  private markHung(file: string): void {
    if (!this.hung.includes(file)) this.hung.push(file);
  }

  /** The file of the current top-level container, when its title is a file path. */
  private fileTitle(): string | null {
    const title = this.titles[0];
    return title !== undefined && looksLikeTestFile(title) ? workspacePath(title, this.options.root) : null;
  }

  private count(status: TestStatus, level: number): void {
    this.counted.seen = true;
    if (status === 'passed') this.counted.passed++;
    else if (status === 'skipped') this.counted.skipped++;
    else this.counted.failed++;
    for (let k = 0; k <= level; k++) {
      this.below[k] = (this.below[k] ?? 0) + 1;
      if (status !== 'passed' && status !== 'skipped') this.failedBelowAt[k] = true;
    }
  }

  private resetBelow(level: number): void {
    this.below.length = level + 1;
    this.failedBelowAt.length = level + 1;
  }

  /** Records what is still pending: call once the output has ended. */
  finish(): void {
    this.commit();
    while (this.braces.length > 0) this.closeBrace(this.braces.at(-1)?.level ?? 0);
  }

  /** The plan was met and nothing bailed out (a list with no plan cannot say). */
  planMet(): boolean | null {
    if (this.bailedOut) return false;
    return this.plan === null ? null : this.topResults >= this.plan;
  }
}

function indentOf(line: string): number {
  let i = 0;
  while (i < line.length && line[i] === ' ') i++;
  return i;
}

/** The first ` # ` at or after `from` that is not escaped (`\#`). */
function findUnescaped(text: string, needle: string, from: number): number {
  let at = text.indexOf(needle, from);
  while (at > 0 && text[at - 1] === '\\' && !escapedBackslash(text, at - 1)) {
    at = text.indexOf(needle, at + 1);
  }
  return at;
}

/** Whether the backslash at `i` is itself escaped (preceded by an odd run of backslashes). */
function escapedBackslash(text: string, i: number): boolean {
  let n = 0;
  for (let j = i - 1; j >= 0 && text[j] === '\\'; j--) n++;
  return n % 2 === 1;
}

/** Undoes TAP's escapes of names: `\\` → `\`, `\#` → `#`; any other backslash stays. */
export function unescapeTap(text: string): string {
  if (!text.includes('\\')) return text;
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    const next = text[i + 1];
    if (c === '\\' && (next === '\\' || next === '#')) {
      out += next;
      i++;
    } else {
      out += c ?? '';
    }
  }
  return out;
}
