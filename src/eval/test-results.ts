/**
 * Per-test results read from a test run's output, as SWE-bench's log parsers do: pytest's `-rA`
 * summary lines (`PASSED tests/test_x.py::test_a`), and TAP (`node --test --test-reporter=tap`,
 * `tap`, mocha's TAP reporter), whose nested tests are named `parent > child`. A test counts as
 * passed when its status is passed or an expected failure (xfail), as in SWE-bench; skipped, failed,
 * errored and absent tests did not pass.
 */

export type TestStatus = 'passed' | 'failed' | 'skipped' | 'error' | 'xfail';

/** Test id (or name, for TAP) → its status. A test reported twice keeps its worse status. */
export type TestResults = Map<string, TestStatus>;

const RANK: Record<TestStatus, number> = { passed: 0, xfail: 0, skipped: 1, failed: 2, error: 3 };

function record(results: TestResults, id: string, status: TestStatus): void {
  const prior = results.get(id);
  if (prior === undefined || RANK[status] > RANK[prior]) results.set(id, status);
}

const PYTEST = /^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED)\s+(\S.*)$/;

/** The node id at the start of a `-rA` line's rest: up to the first space, or the `]` of its parameters. */
function pytestId(rest: string): string {
  const space = rest.search(/\s/);
  let id = space < 0 ? rest : rest.slice(0, space);
  if (id.includes('[') && !id.includes(']')) {
    const close = rest.indexOf(']', id.length);
    if (close > 0) id = rest.slice(0, close + 1);
  }
  return id;
}

export function parsePytest(output: string, into: TestResults = new Map()): TestResults {
  for (const raw of output.split('\n')) {
    const m = PYTEST.exec(raw.trimEnd());
    if (m === null) continue;
    const [, word = '', rest = ''] = m;
    const id = pytestId(rest);
    if (!id.includes('::')) continue;
    const status: TestStatus =
      word === 'PASSED' || word === 'XPASS'
        ? 'passed'
        : word === 'XFAIL'
          ? 'xfail'
          : word === 'SKIPPED'
            ? 'skipped'
            : word === 'ERROR'
              ? 'error'
              : 'failed';
    record(into, id, status);
  }
  return into;
}

const TAP_RESULT = /^( *)(not )?ok\s+\d+(?:\s+-)?\s*(.*?)(?:\s+#\s*(SKIP|TODO)\b.*)?$/i;
const TAP_SUBTEST = /^( *)# Subtest: (.*)$/;

/**
 * TAP with node's nesting (4 spaces a level, `# Subtest:` before each test). `prefix` names the
 * file the output is of (ids become `prefix::name`).
 */
export function parseTap(output: string, prefix: string | null, into: TestResults = new Map()): TestResults {
  const stack: string[] = [];
  for (const raw of output.split('\n')) {
    const line = raw.trimEnd();
    const sub = TAP_SUBTEST.exec(line);
    if (sub !== null) {
      const level = Math.floor((sub[1] ?? '').length / 4);
      stack.length = level;
      stack[level] = (sub[2] ?? '').trim();
      continue;
    }
    const m = TAP_RESULT.exec(line);
    if (m === null) continue;
    const level = Math.floor((m[1] ?? '').length / 4);
    const name = (m[3] ?? '').trim();
    const path = [...stack.slice(0, level), name].filter((x) => x !== '');
    stack.length = level;
    if (path.length === 0) continue;
    const directive = (m[4] ?? '').toUpperCase();
    const status: TestStatus =
      directive === 'SKIP'
        ? 'skipped'
        : directive === 'TODO'
          ? m[2] === undefined
            ? 'passed'
            : 'xfail'
          : m[2] === undefined
            ? 'passed'
            : 'failed';
    const id = path.join(' > ');
    record(into, prefix === null ? id : `${prefix}::${id}`, status);
  }
  return into;
}

/**
 * The status of a listed test: by its full id, or, for `file::name` when the output named tests
 * without their file (a `test_command`'s TAP), by the name, but only when `byName` (the listed tests
 * are of one file: otherwise a passing `x` of one file would stand for a failing `x` of another).
 */
export function statusOf(results: TestResults, id: string, byName = false): TestStatus | null {
  const exact = results.get(id);
  if (exact !== undefined) return exact;
  const i = id.indexOf('::');
  if (byName && i > 0) {
    const byName = results.get(id.slice(i + 2));
    if (byName !== undefined) return byName;
  }
  return null;
}

export function passed(status: TestStatus | null): boolean {
  return status === 'passed' || status === 'xfail';
}
