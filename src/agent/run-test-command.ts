import type { EventOf, Limits } from '../events/schema.js';
import type { Sandbox } from '../sandbox/sandbox.js';
import { boundsAfter } from '../testing/bounds.js';
import type { RunnerKind } from '../testing/detect-test-command.js';
import { runTests, type TestRunResult } from '../testing/run-tests.js';
import type { BaselineRun } from './baseline-cache.js';

export type { TestRunResult } from '../testing/run-tests.js';
export { describeTestRun } from '../testing/describe-run.js';

/**
 * Runs the test command from the workspace root in a subshell (the persistent shell's cwd and
 * variables are untouched), through the test-results engine (src/testing/run-tests.ts): a report
 * asked of the runner where it can give one, the console output read beside it, bounded in time
 * and memory. A hang or a memory blow-up is a result with `killed` set, never an exception: the
 * loop reports it and goes on.
 *
 * `via`: the harness's verification runs (baseline, final) go through the harness shell, which the
 * agent's commands never touch, so a function, alias or variable the agent set in its own shell
 * (`npm() { echo 'ok'; }`) cannot fake a verdict; the agent's own run_tests goes through its shell.
 *
 * `baseline`: the baseline run, when there is one: its durations bound this run (bounds.ts).
 */
export async function runTestCommand(
  sandbox: Sandbox,
  command: string,
  limits: Limits,
  signal: AbortSignal | undefined,
  via: 'agent' | 'harness',
  baseline?: EventOf<'test_run'> | null,
  runner?: RunnerKind,
): Promise<TestRunResult> {
  const bounds = boundsAfter(baseline ?? null, limits);
  return runTests(sandbox, command, {
    via,
    timeoutMs: bounds.runMs,
    memoryLimitBytes: limits.testMemoryBytes,
    signal,
    runner,
    perTestMs: bounds.perTestMs,
  });
}

/** What the event log keeps of a harness test run: its output capped and scrubbed. */
export function recordedRun(r: TestRunResult, scrub: (text: string) => string): BaselineRun {
  return {
    command: r.command,
    exitCode: r.exitCode,
    killed: r.killed,
    durationMs: r.durationMs,
    summary: r.summary,
    output: scrub(cap(r.output)),
    outputBytes: r.outputBytes,
    // Names of the workspace's files: scrubbed like the output they explain.
    ...(r.ownModules === undefined ? {} : { ownModules: r.ownModules.map(scrub) }),
  };
}

function cap(output: string): string {
  return output.length > 200_000 ? `${output.slice(0, 100_000)}\n[...]\n${output.slice(-100_000)}` : output;
}
