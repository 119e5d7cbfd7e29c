import { EXPLORE_MAX_STEPS } from '../explore.js';
import { delegateInput } from './schemas.js';
import { outsideLoop } from './run-control.js';
import { defineTool } from './tool.js';

/**
 * A read-only exploration by a sub-agent with its own context (agent/explore.ts), which answers one
 * question with a short summary. It runs on the run's model, budget and log, which the loop lends
 * through RunControl; the summary is this call's observation.
 */
export const delegateTool = defineTool({
  name: 'delegate',
  description:
    'Hand a read-only exploration to a helper with its own context, and get back a short summary: ' +
    'e.g. "Where is the date parsing done and which functions call it?". The helper can view files, ' +
    'search and run read-only commands; it cannot edit. Use it for questions that need many files to ' +
    'be read, so that your own context stays small. Its cost counts toward this run.',
  schema: delegateInput,
  async run(input, _ctx, control = outsideLoop) {
    const maxSteps = Math.min(input.max_steps ?? EXPLORE_MAX_STEPS, EXPLORE_MAX_STEPS);
    return { content: await control.delegate(input.question, maxSteps), isError: false, mutates: false };
  },
});
