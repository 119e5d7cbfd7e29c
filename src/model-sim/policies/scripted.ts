import type { Fault, MessagesRequest, Policy, Reply } from '../types.js';
import { answeringSummaries } from './summary.js';

export type ScriptStep = Reply | Fault | ((request: MessagesRequest) => Reply | Fault);

/**
 * Answers the n-th request the policy is asked about with the n-th step. Past the end it answers
 * a 500 whose message says the script ran out, so a test sees an agent that made too many calls.
 * A request for a summary of the conversation (the agent condensing its context) is answered with
 * one built from the conversation (summary.ts) and takes no step.
 */
export function scripted(steps: readonly ScriptStep[]): Policy {
  return answeringSummaries((request, { requestIndex }) => {
    const step = steps[requestIndex];
    if (step === undefined) {
      return {
        status: 500,
        message: `model simulator: the script ran out: request #${requestIndex + 1} but only ${steps.length} scripted step(s)`,
      };
    }
    return typeof step === 'function' ? step(request) : step;
  });
}
