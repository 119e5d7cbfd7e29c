import type { Limits } from '../events/schema.js';
import type { TestSummary } from './parse-test-output.js';

/** The fields of a run that its one-line description reads. */
export interface DescribedRun {
  readonly exitCode: number | null;
  readonly killed: 'timeout' | 'memory' | 'cancelled' | null;
  readonly durationMs?: number | undefined;
  readonly summary: Pick<TestSummary, 'passed' | 'failed' | 'skipped' | 'failedNames' | 'hung' | 'errored'>;
}

/**
 * One line a person or a model can read: "tests fail (exit code 1): 3 passed, 1 failed (failing:
 * test_a)", or why the run stopped, naming the files that hung.
 */
export function describeTestRun(r: DescribedRun, limits?: Pick<Limits, 'testTimeoutMs'>): string {
  const hung = r.summary.hung ?? [];
  const where =
    hung.length > 0 ? `; it hung in ${hung.slice(0, 5).join(', ')}${hung.length > 5 ? ', …' : ''}` : '';
  if (r.killed === 'timeout') {
    const after =
      r.durationMs !== undefined
        ? `${Math.round(r.durationMs / 1000)} s`
        : limits === undefined
          ? 'its time limit'
          : `${Math.round(limits.testTimeoutMs / 1000)} s`;
    return `the test run was stopped after ${after} (it hung or was too slow${where})${counted(r)}`;
  }
  if (r.killed === 'memory') return `the test run was stopped: it used more memory than allowed${counted(r)}`;
  if (r.killed === 'cancelled') return 'the test run was cancelled';
  const verdict = r.exitCode === 0 ? 'tests pass' : `tests fail (exit code ${String(r.exitCode)})`;
  const c = counts(r);
  return `${verdict}${c === '' ? '' : `: ${c}`}${names(r)}${hung.length > 0 ? ` (hung: ${hung.slice(0, 5).join(', ')})` : ''}`;
}

function counts(r: DescribedRun): string {
  const s = r.summary;
  const out: string[] = [];
  if (s.passed !== null) out.push(`${s.passed} passed`);
  if (s.failed !== null) out.push(`${s.failed} failed`);
  if (s.skipped !== null && s.skipped > 0) out.push(`${s.skipped} skipped`);
  return out.join(', ');
}

function names(r: DescribedRun): string {
  const f = r.summary.failedNames;
  return f.length > 0 ? ` (failing: ${f.slice(0, 10).join(', ')}${f.length > 10 ? ', …' : ''})` : '';
}

/** What a stopped run had reported before it was stopped. */
function counted(r: DescribedRun): string {
  const c = counts(r);
  return c === '' ? '' : `; before that: ${c}${names(r)}`;
}
