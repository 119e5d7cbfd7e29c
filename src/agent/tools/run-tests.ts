import type { EventOf, Limits } from '../../events/schema.js';
import { describeTestRun, runTestCommand } from '../run-test-command.js';
import { runTestsInput } from './schemas.js';
import { outsideLoop } from './run-control.js';
import { defineTool, truncateMiddle, type ToolOutput } from './tool.js';

export const runTestsTool = defineTool({
  name: 'run_tests',
  description:
    "Run the repository's test suite (the detected or configured command) and get a parsed summary: " +
    'passed and failed counts and the failing test names. Optionally pass filter: extra arguments ' +
    'appended to the command (for example one test file).',
  schema: runTestsInput,
  async run(input, ctx, control = outsideLoop) {
    if (ctx.testCommand === null) {
      return {
        content: 'No test command is known for this repository. Run the tests with the bash tool instead.',
        isError: true,
        mutates: false,
      };
    }
    // The whole suite while nothing can have changed since the baseline: that run's result.
    const baseline = input.filter === undefined ? control.reusableBaseline() : null;
    if (baseline !== null && baseline.command === ctx.testCommand) return reusedTestRun(baseline, ctx.limits);
    const command = input.filter === undefined ? ctx.testCommand : `${ctx.testCommand} ${input.filter}`;
    const r = await runTestCommand(ctx.sandbox, command, ctx.limits, ctx.signal, 'agent');
    const head = `$ ${command}\n${describeTestRun(r, ctx.limits)}`;
    return {
      content: `${head}\n\n${truncateMiddle(r.output, ctx.limits.observationChars)}`,
      isError: false,
      mutates: true,
      exitCode: r.exitCode,
      killed: r.killed,
      fullOutputPath: r.fullOutputPath,
      ...(r.output.length > ctx.limits.observationChars ? { fullText: r.output } : {}),
      testSummary: r.summary,
    };
  },
});

/** The observation for a `run_tests` answered with the baseline's result (baseline-answer.ts). */
export function reusedTestRun(baseline: EventOf<'test_run'>, limits: Limits): ToolOutput {
  const head =
    `$ ${baseline.command}\n` +
    'Not run again: nothing has changed since the harness ran the tests before any change (no file ' +
    'edited, no command run since), so this is that run. To run them again anyway, use bash.\n' +
    describeTestRun(baseline, limits);
  return {
    content: `${head}\n\n${truncateMiddle(baseline.output, limits.observationChars)}`,
    isError: false,
    mutates: false,
    exitCode: baseline.exitCode,
    killed: baseline.killed,
    testSummary: baseline.summary,
    durationMs: 0,
  };
}
