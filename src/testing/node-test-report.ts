/**
 * node:test's report: the harness adds a reporter of its own (NODE_TEST_REPORTER below) beside the
 * console one, which writes node's test events, one JSON object a line, as they happen, to the file
 * ISSUE_AGENT_NODE_TEST_REPORT names. Node's
 * built-in reporters do not say which file a passing test is in before node 24 (TAP and spec never,
 * JUnit only from 24), and the events do, so this is where `file::name` ids for node:test come
 * from; the lines are flushed as the run goes, so a run that is stopped still says which test was
 * running.
 *
 * Reading the events, per file (several files run at once, their events interleaved):
 * - `dequeue` / `start` at nesting n open a test; `pass` / `fail` at nesting n close it, after
 *   everything nested in it. A result with results nested in it (or `type: 'suite'`) is a
 *   container: not a test, but one failure when it failed while nothing in it did (a hook).
 * - a result at nesting 0 whose name is the file's own path is the file: node reports a file this
 *   way only when it failed outside its tests (it did not load, crashed, timed out under
 *   `--test-timeout`, ran out of memory): a `crashed-file`.
 * - a test dequeued with no result when the events end was running when the run was stopped: it
 *   is `errored` (source `harness`) and its file hung.
 */
import { FactList, NAME_SEPARATOR, oneLine, testId, workspacePath, type TestStatus } from './test-run.js';

/**
 * The reporter, loaded by node from the run's report folder (`--test-reporter=<path>` in
 * NODE_OPTIONS). It only serialises events: what they mean is read here, where it is tested.
 */
export const NODE_TEST_REPORTER = `// issue-agent's node:test reporter (docs/testing.md): node's test events, one JSON line each.
// Written with writeSync as they come, not yielded to a stream: --test-force-exit ends the process
// as soon as the tests are done, before a stream would be flushed, and a killed run keeps its lines.
import { openSync, writeSync } from 'node:fs';

export default async function* issueAgentReporter(source) {
  const path = process.env.ISSUE_AGENT_NODE_TEST_REPORT;
  const fd = path ? openSync(path, 'a') : null;
  const write = (record) => {
    if (fd !== null) writeSync(fd, JSON.stringify(record) + '\\n');
  };
  let ended = false;
  const end = () => {
    if (!ended) write({ e: 'end', name: '', nesting: 0 });
    ended = true;
  };
  for await (const event of source) {
    const type = event.type;
    // The run's own plan (nesting 0, no file) comes once every file has reported, just before the
    // summary: under --test-force-exit node may exit before the events' stream ends (node 20 does),
    // so this is where the end is known.
    if (type === 'test:plan' && event.data?.nesting === 0 && event.data?.file === undefined) end();
    if (type !== 'test:dequeue' && type !== 'test:start' && type !== 'test:pass' && type !== 'test:fail') continue;
    const d = event.data ?? {};
    const details = d.details ?? {};
    const error = details.error ?? {};
    write({
      e: type.slice(5),
      file: d.file ?? null,
      name: d.name,
      nesting: d.nesting,
      skip: d.skip !== undefined && d.skip !== false,
      todo: d.todo !== undefined && d.todo !== false,
      type: details.type ?? null,
      ms: details.duration_ms ?? null,
      failure: error.failureType ?? null,
      exitCode: error.exitCode ?? null,
      signal: error.signal ?? null,
      line: d.line ?? null,
    });
  }
  // The events ended: a report without this line was cut short (the process was stopped).
  end();
  yield '';
}
`;

interface Event {
  readonly e: string;
  readonly file: string | null;
  readonly name: string;
  readonly nesting: number;
  readonly skip: boolean;
  readonly todo: boolean;
  readonly type: string | null;
  readonly ms: number | null;
  readonly failure: string | null;
  readonly exitCode: number | null;
  readonly signal: string | null;
  /** The line of the test's definition in its file (node's event data), when given. */
  readonly line: number | null;
}

function parseEvent(line: string): Event | null {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    return null;
  }
  if (typeof v !== 'object' || v === null) return null;
  const r = v as Record<string, unknown>;
  if (typeof r['e'] !== 'string' || typeof r['name'] !== 'string' || typeof r['nesting'] !== 'number')
    return null;
  const str = (x: unknown): string | null => (typeof x === 'string' ? x : null);
  const num = (x: unknown): number | null => (typeof x === 'number' ? x : null);
  return {
    e: r['e'],
    file: str(r['file']),
    name: r['name'],
    nesting: r['nesting'],
    skip: r['skip'] === true,
    todo: r['todo'] === true,
    type: str(r['type']),
    ms: num(r['ms']),
    failure: str(r['failure']),
    exitCode: num(r['exitCode']),
    signal: str(r['signal']),
    line: typeof r['line'] === 'number' && Number.isInteger(r['line']) && r['line'] > 0 ? r['line'] : null,
  };
}

interface FileState {
  /** Titles of the open tests by nesting. */
  readonly titles: string[];
  /** Per nesting k: results recorded at nesting >= k since the last result at k - 1. */
  readonly below: number[];
  readonly failedBelow: boolean[];
  /** Dequeued tests with no result yet, by "nesting:name". */
  readonly open: Map<string, string>;
  ms: number;
}

export interface NodeTestReport {
  readonly facts: FactList;
  /** The reporter saw the end of the events: nothing was cut. */
  readonly ended: boolean;
  readonly fileMs: Map<string, number>;
  /** Files with a test that was running when the events end. */
  readonly hung: string[];
}

/**
 * Reads the reporter's lines. `stopped`: why the run ended early (`timed out`, `out of memory`),
 * given to a test that was still running; `heapOom`: the console output shows a V8 heap
 * exhaustion, so a file that crashed on SIGABRT ran out of memory.
 */
export function readNodeTestReport(
  text: string,
  root: string | null,
  stopped: string | null,
  heapOom: boolean,
): NodeTestReport {
  const facts = new FactList();
  const files = new Map<string, FileState>();
  const state = (file: string): FileState => {
    let s = files.get(file);
    if (s === undefined) {
      s = { titles: [], below: [], failedBelow: [], open: new Map(), ms: 0 };
      files.set(file, s);
    }
    return s;
  };
  let ended = false;
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const e = parseEvent(line);
    if (e === null) continue;
    if (e.e === 'end') {
      ended = true;
      continue;
    }
    const file = e.file === null ? '' : workspacePath(e.file, root);
    const s = state(file);
    const name = oneLine(e.name);
    const isFile = e.nesting === 0 && file !== '' && workspacePath(e.name, root) === file;
    if (e.e === 'dequeue' || e.e === 'start') {
      if (isFile) continue;
      s.titles[e.nesting] = name;
      s.titles.length = e.nesting + 1;
      s.open.set(`${e.nesting}:${e.name}`, [...s.titles].join(NAME_SEPARATOR));
      continue;
    }
    if (e.e !== 'pass' && e.e !== 'fail') continue;
    s.open.delete(`${e.nesting}:${e.name}`);
    if (e.nesting === 0 && e.ms !== null) s.ms += e.ms;
    const fileOrNull = file === '' ? null : file;
    if (isFile) {
      if (e.e === 'fail') {
        facts.add({
          id: file,
          file,
          status: 'crashed-file',
          source: 'report',
          detail: fileDetail(e, heapOom),
        });
      }
      continue;
    }
    const container = e.type === 'suite' || (s.below[e.nesting + 1] ?? 0) > 0;
    const failedBelow = s.failedBelow[e.nesting + 1] ?? false;
    s.below.length = e.nesting + 1;
    s.failedBelow.length = e.nesting + 1;
    const path = [...s.titles.slice(0, e.nesting), name].join(NAME_SEPARATOR);
    let status: TestStatus;
    let detail: string | undefined;
    if (e.skip || e.todo) status = 'skipped';
    else if (e.e === 'pass') status = 'passed';
    else if (e.failure === 'testTimeoutFailure') {
      status = 'errored';
      detail = 'timed out';
    } else if (e.failure === 'cancelledByParent') {
      status = 'errored';
      detail = 'cancelled';
    } else status = 'failed';
    if (container) {
      if (status === 'failed' && !failedBelow && e.failure !== 'subtestsFailed') {
        facts.add({
          id: testId(fileOrNull, path),
          file: fileOrNull,
          status,
          source: 'report',
          detail: 'a hook failed',
        });
        mark(s, e.nesting, true);
      }
      continue;
    }
    facts.add({
      id: testId(fileOrNull, path),
      file: fileOrNull,
      status,
      source: 'report',
      ...(detail === undefined ? {} : { detail }),
      ...(e.line === null || fileOrNull === null ? {} : { line: e.line }),
    });
    mark(s, e.nesting, status !== 'passed' && status !== 'skipped');
  }
  const hung: string[] = [];
  const fileMs = new Map<string, number>();
  for (const [file, s] of files) {
    if (file !== '' && s.ms > 0) fileMs.set(file, s.ms);
    // The deepest test still open in a file is the one that was running.
    let running: string | null = null;
    let depth = -1;
    for (const [key, path] of s.open) {
      const n = Number(key.slice(0, key.indexOf(':')));
      if (n >= depth) {
        depth = n;
        running = path;
      }
    }
    if (running === null) continue;
    const fileOrNull = file === '' ? null : file;
    // A test still open in a file node stopped as a whole (its timeout) ended with the file.
    const whole = file === '' ? undefined : facts.get(file);
    facts.add({
      id: testId(fileOrNull, running),
      file: fileOrNull,
      status: 'errored',
      source: whole === undefined ? 'harness' : 'report',
      detail: whole?.detail ?? stopped ?? 'did not finish',
    });
    if (file !== '') hung.push(file);
  }
  return { facts, ended, fileMs, hung };
}

function mark(s: FileState, nesting: number, failed: boolean): void {
  for (let k = 0; k <= nesting; k++) {
    s.below[k] = (s.below[k] ?? 0) + 1;
    if (failed) s.failedBelow[k] = true;
  }
}

function fileDetail(e: Event, heapOom: boolean): string {
  if (e.failure === 'testTimeoutFailure') return 'timed out';
  if (e.signal !== null) {
    return heapOom && e.signal === 'SIGABRT' ? 'out of memory' : `crashed (${e.signal})`;
  }
  if (heapOom) return 'out of memory';
  if (e.exitCode !== null) return `exited with code ${e.exitCode}`;
  return 'failed outside its tests';
}
