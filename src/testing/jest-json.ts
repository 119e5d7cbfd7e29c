/**
 * jest's `--json` report and vitest's `json` reporter, which writes the same shape: one entry per
 * test file (`name` its absolute path, `status`, `message`) with its tests (`ancestorTitles`, `title`,
 * `status`). A file with no test and a failure message failed to load or crashed: a `crashed-file`.
 * Ids are `file::describe > … > test`, the same the console readers build from jest's verbose tree
 * and vitest's `file > describe > test` lines.
 */
import { FactList, NAME_SEPARATOR, oneLine, testId, workspacePath, type TestStatus } from './test-run.js';

export interface JestReport {
  readonly facts: FactList;
  readonly fileMs: Map<string, number>;
  /** The report's own totals agree with its list, and the run was not interrupted. */
  readonly whole: boolean;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function statusOf(raw: unknown): TestStatus | null {
  switch (raw) {
    case 'passed':
      return 'passed';
    case 'failed':
      return 'failed';
    case 'pending':
    case 'skipped':
    case 'todo':
    case 'disabled':
      return 'skipped';
    default:
      return null;
  }
}

/** Null when the text is not such a report. */
export function readJestReport(text: string, root: string | null): JestReport | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return null;
  }
  if (!isRecord(parsed) || !Array.isArray(parsed['testResults'])) return null;
  const facts = new FactList();
  const fileMs = new Map<string, number>();
  let counted = 0;
  for (const entry of parsed['testResults']) {
    if (!isRecord(entry) || typeof entry['name'] !== 'string') continue;
    const file = workspacePath(entry['name'], root);
    const start = entry['startTime'];
    const end = entry['endTime'];
    const perf = entry['perfStats'];
    if (typeof start === 'number' && typeof end === 'number' && end >= start) fileMs.set(file, end - start);
    else if (isRecord(perf) && typeof perf['start'] === 'number' && typeof perf['end'] === 'number') {
      fileMs.set(file, perf['end'] - perf['start']);
    }
    const tests = Array.isArray(entry['assertionResults']) ? entry['assertionResults'] : [];
    let failedTest = false;
    for (const t of tests) {
      if (!isRecord(t) || typeof t['title'] !== 'string') continue;
      let status = statusOf(t['status']);
      if (status === null) continue;
      counted++;
      if (status === 'failed') failedTest = true;
      // jest's "Exceeded timeout of 5000 ms", vitest's "Test timed out in 5000ms": the test hung.
      const messages = Array.isArray(t['failureMessages']) ? t['failureMessages'].join('\n') : '';
      const timedOut =
        status === 'failed' && /Exceeded timeout of \d+ ?ms|Test timed out in \d+ ?ms/.test(messages);
      if (timedOut) status = 'errored';
      const titles = Array.isArray(t['ancestorTitles'])
        ? t['ancestorTitles'].filter((x): x is string => typeof x === 'string')
        : [];
      const name = [...titles, t['title']].map(oneLine).join(NAME_SEPARATOR);
      facts.add({
        id: testId(file, name),
        file,
        status,
        source: 'report',
        ...(timedOut ? { detail: 'timed out' } : {}),
      });
    }
    const message = typeof entry['message'] === 'string' ? entry['message'] : '';
    const execError = entry['testExecError'];
    if (entry['status'] === 'failed' && !failedTest && (message.trim() !== '' || execError !== undefined)) {
      // Failed outside any test: the file did not load, or crashed (a worker killed, out of memory).
      facts.add({ id: file, file, status: 'crashed-file', source: 'report', detail: crashDetail(message) });
    }
  }
  const total = parsed['numTotalTests'];
  const interrupted = parsed['wasInterrupted'] === true;
  const whole = !interrupted && (typeof total !== 'number' || counted >= total);
  return { facts, fileMs, whole };
}

function crashDetail(message: string): string {
  if (/heap out of memory|ERR_WORKER_OUT_OF_MEMORY|out of memory/i.test(message)) return 'out of memory';
  if (/timed? ?out/i.test(message)) return 'timed out';
  if (/worker process .*(?:terminated|exited)|was terminated by another process/i.test(message))
    return 'crashed';
  return 'failed to load';
}
