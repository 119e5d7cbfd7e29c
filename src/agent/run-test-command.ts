import type { Limits, TestSummarySnapshot } from '../events/schema.js';
import type { KillReason, Sandbox } from '../sandbox/sandbox.js';
import { shellQuote } from '../sandbox/shell-session.js';
import { parseTestOutput } from './testing/parse-test-output.js';
import type { RunnerKind } from './testing/detect-test-command.js';

export interface TestRunResult {
  readonly command: string;
  readonly exitCode: number | null;
  readonly killed: KillReason | null;
  readonly durationMs: number;
  readonly summary: TestSummarySnapshot;
  readonly output: string;
  readonly outputBytes: number;
  readonly fullOutputPath?: string | undefined;
}

/**
 * Runs the test command from the workspace root in a subshell (the persistent shell's cwd and
 * variables are untouched), bounded in time and memory. A hang or a memory blow-up is a result with
 * `killed` set, never an exception: the loop reports it and goes on.
 *
 * `via`: the harness's verification runs (baseline, final) go through the harness shell, which the
 * agent's commands never touch, so a function, alias or variable the agent set in its own shell
 * (`npm() { echo 'ok'; }`) cannot fake a verdict; the agent's own run_tests goes through its shell.
 */
export async function runTestCommand(
  sandbox: Sandbox,
  command: string,
  limits: Limits,
  signal: AbortSignal | undefined,
  via: 'agent' | 'harness',
  runner?: RunnerKind,
): Promise<TestRunResult> {
  const run = via === 'harness' ? sandbox.harnessExec.bind(sandbox) : sandbox.exec.bind(sandbox);
  const r = await run(`(cd ${shellQuote(sandbox.workdir)} && ${command})`, {
    timeoutMs: limits.testTimeoutMs,
    memoryLimitBytes: limits.testMemoryBytes,
    signal,
  });
  const summary = parseTestOutput(r.output, runner);
  return {
    command,
    exitCode: r.exitCode,
    killed: r.killed,
    durationMs: r.durationMs,
    summary: { ...summary, runner: summary.runner },
    output: r.output,
    outputBytes: r.outputBytes,
    fullOutputPath: r.fullOutputPath,
  };
}

/** One line a person or a model can read: "3 passed, 1 failed (test_a)" or why the run stopped. */
export function describeTestRun(
  r: Pick<TestRunResult, 'exitCode' | 'killed' | 'summary'>,
  limits?: Limits,
): string {
  if (r.killed === 'timeout') {
    return `the test run was stopped after ${limits === undefined ? 'its' : `${Math.round(limits.testTimeoutMs / 1000)} s,`} time limit (it hung or was too slow)`;
  }
  if (r.killed === 'memory') return 'the test run was stopped: it used more memory than allowed';
  if (r.killed === 'cancelled') return 'the test run was cancelled';
  const s = r.summary;
  const counts: string[] = [];
  if (s.passed !== null) counts.push(`${s.passed} passed`);
  if (s.failed !== null) counts.push(`${s.failed} failed`);
  if (s.skipped !== null && s.skipped > 0) counts.push(`${s.skipped} skipped`);
  const names =
    s.failedNames.length > 0
      ? ` (failing: ${s.failedNames.slice(0, 10).join(', ')}${s.failedNames.length > 10 ? ', …' : ''})`
      : '';
  const verdict = r.exitCode === 0 ? 'tests pass' : `tests fail (exit code ${String(r.exitCode)})`;
  return `${verdict}${counts.length > 0 ? `: ${counts.join(', ')}` : ''}${names}`;
}
