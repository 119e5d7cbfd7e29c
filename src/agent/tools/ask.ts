import { z } from 'zod';
import { outsideLoop } from './run-control.js';
import { defineTool } from './tool.js';

export const askInput = z
  .object({
    missing: z
      .string()
      .min(1)
      .max(2000)
      .describe('What the issue leaves open: the expected behaviour, or where the problem is.'),
    questions: z
      .array(z.string().min(1).max(1000))
      .min(1)
      .max(3)
      .describe('At most three questions whose answers would make the issue actionable.'),
  })
  .strict();

/**
 * Pre-flight triage (on when the run's base state says so): the agent asks instead of guessing. The
 * loop ends the run `needs_info` after the turn that asked (the question is the observation's); it
 * is refused once a file was changed, so a question never leaves a half-made change behind.
 */
export const askTool = defineTool({
  name: 'ask_for_clarification',
  description:
    'Call only before changing any file, when the issue is not actionable: you cannot state the ' +
    'expected behaviour or where to start. Say what is missing and ask at most three questions; the run ' +
    "then waits for the answer of the issue's author or a maintainer, which continues this conversation.",
  schema: askInput,
  run(input, _ctx, control = outsideLoop) {
    if (control.changedFiles)
      return Promise.resolve({
        content:
          'Not asked: you have already changed files. A question comes before any change; finish the work, or undo your changes first.',
        isError: true,
        mutates: false,
        durationMs: 0,
      });
    return Promise.resolve({
      content: 'The question is posted on the issue. This run now ends and waits for the answer.',
      isError: false,
      mutates: false,
      question: { missing: input.missing, questions: input.questions },
    });
  },
});
