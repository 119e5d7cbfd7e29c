import { describeTestRun, runTestCommand } from '../run-test-command.js';
import { runTestsInput } from './schemas.js';
import { defineTool, truncateMiddle } from './tool.js';

export const runTestsTool = defineTool({
  name: 'run_tests',
  description:
    "Run the repository's test suite (the detected or configured command) and get a parsed summary: " +
    'passed and failed counts and the failing test names. Optionally pass filter: extra arguments ' +
    'appended to the command (for example one test file).',
  schema: runTestsInput,
  async run(input, ctx) {
    if (ctx.testCommand === null) {
      return {
        content: 'No test command is known for this repository. Run the tests with the bash tool instead.',
        isError: true,
        mutates: false,
      };
    }
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
