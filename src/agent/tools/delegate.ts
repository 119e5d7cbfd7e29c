import { delegateInput } from './schemas.js';
import { defineTool } from './tool.js';

/**
 * The `delegate` tool as the model sees it. The agent loop runs it (agent/explore.ts), because a
 * sub-agent needs the model, the budget and the log, which a tool's context does not carry.
 */
export const delegateTool = defineTool({
  name: 'delegate',
  description:
    'Hand a read-only exploration to a helper with its own context, and get back a short summary: ' +
    'e.g. "Where is the date parsing done and which functions call it?". The helper can view files, ' +
    'search and run read-only commands; it cannot edit. Use it for questions that need many files to ' +
    'be read, so that your own context stays small. Its cost counts toward this run.',
  schema: delegateInput,
  run() {
    return Promise.resolve({
      content: 'delegate runs only inside the agent loop.',
      isError: true,
      mutates: false,
    });
  },
});
