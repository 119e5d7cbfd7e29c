import { finishInput } from './schemas.js';
import { defineTool } from './tool.js';

export const finishTool = defineTool({
  name: 'finish',
  description:
    'Call when the issue is fixed and the tests pass (or when you are certain it cannot be fixed). ' +
    'The harness then runs the test suite itself to verify. Summarize what you changed and why.',
  schema: finishInput,
  run(input) {
    return Promise.resolve({
      content: 'Finishing. The harness will now run the tests to verify the change.',
      isError: false,
      mutates: false,
      finishSummary: input.summary,
    });
  },
});
