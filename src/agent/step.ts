import type { AgentEvent, Clarification, Limits, ToolUseBlock } from '../events/schema.js';
import { mainEvents, reduceState, totalTokens, type RunState } from '../events/reduce-state.js';
import { ModelError, type ModelRequest } from '../model/model.js';
import { costUsd } from '../model/pricing.js';
import type { AgentRun } from './agent-run.js';
import { prepareRequest } from './prepare-request.js';
import { modelResponseEvent } from './model-response-event.js';
import { isReadOnlyCommand } from './read-only-command.js';
import { interruptedObservation, recordedCheckpoint } from './resume-check.js';
import { StopRun, throwIfCancelled, type Stop } from './run-stop.js';
import { holdForCall, worstCallUsd } from './spend-budget.js';
import { DEFAULT_STUCK, detectStuck } from './stuck.js';
import { isNativeTool } from './tools/native.js';
import { runToolCall, type ToolCallResult } from './tools/tool.js';

/**
 * How the loop ended, for `conclude` (final-verification.ts): the agent asked a question (the run
 * waits for the answer), it is done (finish, or twice no tool call: the change is verified), or the
 * run was stopped (a budget, a stuck run, a cancel, a failure).
 */
export type LoopEnd =
  | { readonly kind: 'question'; readonly question: Clarification }
  | { readonly kind: 'done' }
  | { readonly kind: 'stopped'; readonly stop: Stop };

/**
 * One step: the checks that may stop the run first (stuck, budgets), one model call, then its tool
 * calls, each recorded action, checkpoint (if it may have changed files), observation. Null: the
 * loop goes on; otherwise how it ended. A stop is thrown (StopRun, or the error the run hit).
 */
export async function step(run: AgentRun): Promise<LoopEnd | null> {
  const state = reduceState(run.store.events);
  await stopOrWarn(run, state);
  run.spans.next(state.steps + 1);
  await modelCall(run);
  return await toolCalls(run);
}

/**
 * Runs the tool calls of the last model turn that have no observation yet: all of a new turn's,
 * or the rest of a turn a crash interrupted (the loop does that first on a resume). Then what the
 * log says: how the loop ends, or null.
 */
export async function toolCalls(run: AgentRun): Promise<LoopEnd | null> {
  throwIfCancelled(run.signal);
  const state = reduceState(run.store.events);
  // After a question in this turn nothing more runs: the run waits for the answer unchanged.
  let waiting = state.question !== null;
  for (const use of state.pendingToolUses) {
    throwIfCancelled(run.signal);
    if (await toolCall(run, use, waiting)) waiting = true;
  }
  return loopEnd(reduceState(run.store.events));
}

/** How the log says the loop ends, or null while it goes on. */
export function loopEnd(state: RunState): LoopEnd | null {
  if (state.question !== null) return { kind: 'question', question: state.question };
  if (state.finishSummary !== null) return { kind: 'done' };
  if (state.turnsWithoutTools >= 2) return { kind: 'done' }; // the model said twice that it is done without finish
  return null;
}

/** One call of the turn, recorded; whether it asked a question (the rest of the turn then waits). */
async function toolCall(run: AgentRun, use: ToolUseBlock, waiting: boolean): Promise<boolean> {
  // A call whose checkpoint is recorded ran to its end before a crash took its observation:
  // it is not run again (the workspace already holds its change), its observation says so.
  // An Anthropic-defined tool is recorded as the harness tool it runs as (tools/native.ts).
  const tool = run.tools.get(use.name);
  const called = isNativeTool(tool)
    ? { tool: tool.records, input: tool.recordedInput(use.input), calledAs: use.name }
    : { tool: use.name, input: use.input };
  const recorded = recordedCheckpoint(run.store.events, use.id);
  if (recorded !== null) {
    await run.append(interruptedObservation(use, recorded, called.tool));
    await run.addGuidance(use.input);
    return false;
  }
  await run.append({ kind: 'action', toolUseId: use.id, ...called });
  const result: ToolCallResult = waiting
    ? {
        content: 'Not run: you asked for clarification in this turn, so the run now waits for the answer.',
        isError: true,
        mutates: false,
        durationMs: 0,
      }
    : await run.spans.child(`tool ${called.tool}`, { 'issue_agent.tool': called.tool }, () =>
        runToolCall(run.tools, use.name, use.input, run.ctx, run.control(use)),
      );
  let fullContentFile: string | undefined;
  if (result.fullOutputPath !== undefined) {
    fullContentFile = await run.store.attachFile(result.fullOutputPath, `${use.id}.log`);
  }
  // A call that may have changed files is recorded checkpoint first, then its observation: the
  // log never tells the model of a change that no checkpoint holds. A crash before the checkpoint
  // is durable leaves the call unrecorded (resume rebuilds the tree before it and runs it again);
  // a crash between the two leaves a checkpoint naming the call, and resume records the
  // observation without running it again (above). The other order (observation first) left a
  // window of several git commands in which a kill lost the change while the conversation kept
  // it. One event for both was the alternative: every reader of checkpoints (PR, CLI, eval, web
  // viewer) would then have to find them inside observations, and a harness record would carry
  // the agent's output.
  const readOnly = called.tool === 'bash' && isReadOnlyCommand(commandOf(called.input));
  const tree = result.mutates && !readOnly ? await run.checkpoint(use.id) : undefined;
  await run.append({
    kind: 'observation',
    toolUseId: use.id,
    tool: called.tool,
    isError: result.isError,
    content: run.scrub(result.content),
    ...(fullContentFile === undefined ? {} : { fullContentFile }),
    ...(result.fullText === undefined || fullContentFile !== undefined
      ? {}
      : { fullContent: run.scrub(result.fullText) }),
    ...(result.exitCode === undefined ? {} : { exitCode: result.exitCode }),
    ...(result.killed === undefined ? {} : { killed: result.killed }),
    durationMs: result.durationMs,
    ...(result.testSummary === undefined ? {} : { testSummary: result.testSummary }),
    ...(result.finishSummary === undefined ? {} : { finishSummary: result.finishSummary }),
    ...(result.question === undefined ? {} : { question: result.question }),
    ...(tree === undefined ? {} : { tree }),
  });
  await run.addGuidance(use.input);
  if (result.killed === 'cancelled') throwIfCancelled(run.signal);
  return result.question !== undefined && !result.isError;
}

/** Before a model call: stop a run going in circles, warn one heading there or one that called no tool, check the budgets. */
async function stopOrWarn(run: AgentRun, state: RunState): Promise<void> {
  const stuck = detectStuck(mainEvents(run.store.events), run.deps.stuck ?? DEFAULT_STUCK);
  if (stuck?.stop === true) {
    throw new StopRun({
      outcome: 'stuck',
      reason:
        stuck.kind === 'repeat'
          ? `the same action and result repeated ${stuck.count} times`
          : `two actions alternated ${stuck.count} times without progress`,
    });
  }
  if (stuck?.warn === true) {
    await run.append({
      kind: 'warning',
      code: stuck.kind === 'repeat' ? 'stuck_repeat' : 'stuck_alternating',
      message:
        stuck.kind === 'repeat'
          ? `You have run the same action ${stuck.count} times with the same result. It will not change: try a different approach.`
          : 'You are alternating between the same two actions without progress. Step back and try something different.',
    });
  }
  if (state.turnsWithoutTools === 1 && lastEvent(run.store.events)?.kind === 'model_response') {
    await run.append({
      kind: 'warning',
      code: 'no_tool_call',
      message:
        'Your last reply called no tool. Continue with a tool call, or call finish if the issue is resolved.',
    });
  }
  checkBudgets(state, run.limits, run.elapsed());
}

/** The model's next turn, recorded with its usage and cost; bounded by the time the run has left. */
async function modelCall(run: AgentRun): Promise<void> {
  const { limits } = run;
  const request = await prepareRequest(
    run.store,
    run.system,
    run.specs,
    limits,
    run.append,
    {
      model: run.model,
      price: run.price,
      signal: run.signal,
      wallLeftMs: () => limits.maxWallMs - run.elapsed(),
      budget: run.deps.budget,
    },
    run.images,
  );
  // The month's shared limits: this call's worst cost is held first, its real cost recorded after.
  const hold = await holdForCall(run.deps.budget, worstCallUsd(run.price, limits), run.signal);
  const started = performance.now();
  const wallLeft = limits.maxWallMs - run.elapsed();
  const signal = anySignal(run.signal, AbortSignal.timeout(Math.max(1, wallLeft)));
  let response;
  try {
    response = await run.spans.child('model call', { 'gen_ai.request.model': run.base.model }, () =>
      run.model.complete(withThinking(request.request, run.setup.thinkingBudget), {
        signal,
        onRetry: async (n) => {
          await run.append({
            kind: 'model_retry',
            attempt: n.attempt,
            status: n.status,
            reason: n.reason,
            waitMs: n.waitMs,
          });
        },
      }),
    );
  } catch (error) {
    await hold?.settle(0);
    // Cancelled: by the run's signal, or by the wall-time bound (a budget stop, not a failure).
    if (error instanceof ModelError && error.code === 'cancelled') {
      throwIfCancelled(run.signal);
      checkBudgets(reduceState(run.store.events), limits, Math.max(run.elapsed(), limits.maxWallMs));
    }
    throw error;
  }
  const usd = costUsd(run.price, response.usage);
  // Recorded after the answer is in the log: a crash between the two loses this call's spend (its
  // hold expires), never counts it twice. The API's context edits travel in the same event.
  try {
    await run.append(
      modelResponseEvent(response, {
        usd,
        latencyMs: performance.now() - started,
        promptTokensEstimate: request.estimate,
      }),
    );
  } finally {
    await hold?.settle(usd);
  }
}

/** The request with the run's thinking budget (0: none). */
function withThinking(request: ModelRequest, budgetTokens: number): ModelRequest {
  return budgetTokens > 0 ? { ...request, thinking: { budgetTokens } } : request;
}

function checkBudgets(state: RunState, limits: Limits, elapsedMs: number): void {
  if (state.steps >= limits.maxSteps) {
    throw new StopRun({
      outcome: 'budget_exhausted',
      limit: 'steps',
      reason: `the step limit (${limits.maxSteps}) was reached`,
    });
  }
  const tokens = totalTokens(state.usage);
  if (tokens >= limits.maxTokens) {
    throw new StopRun({
      outcome: 'budget_exhausted',
      limit: 'tokens',
      reason: `the token limit (${limits.maxTokens}) was reached: ${tokens} tokens used`,
    });
  }
  if (state.usd >= limits.maxUsd) {
    throw new StopRun({
      outcome: 'budget_exhausted',
      limit: 'usd',
      reason: `the cost limit ($${limits.maxUsd.toFixed(2)}) was reached: $${state.usd.toFixed(4)} spent`,
    });
  }
  if (elapsedMs >= limits.maxWallMs) {
    throw new StopRun({
      outcome: 'budget_exhausted',
      limit: 'wall_time',
      reason: `the time limit (${Math.round(limits.maxWallMs / 1000)} s) was reached`,
    });
  }
}

function anySignal(a: AbortSignal | undefined, b: AbortSignal): AbortSignal {
  return a === undefined ? b : AbortSignal.any([a, b]);
}

/** The newest event, past the API's note of what it cleared from that turn (it belongs to the turn). */
function lastEvent(events: readonly AgentEvent[]): AgentEvent | undefined {
  for (let i = events.length - 1; i >= 0; i--) if (events[i]?.kind !== 'context_edited') return events[i];
  return undefined;
}

function commandOf(input: unknown): string {
  const c = (input as { command?: unknown } | null)?.command;
  return typeof c === 'string' ? c : '';
}
