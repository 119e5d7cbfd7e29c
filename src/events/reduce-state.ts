import type { AgentEvent, Clarification, EventOf, ToolUseBlock, Usage } from './schema.js';

/** Everything the loop decides from, derived from the log alone: state = reduce(events). */
export interface RunState {
  /** Model turns answered. A step is one model turn and the tools it called. */
  readonly steps: number;
  readonly usage: Usage;
  readonly usd: number;
  /** Wall time spent across process lifetimes (gaps between a crash and its resume do not count). */
  readonly elapsedMs: number;
  readonly baseline: EventOf<'test_run'> | null;
  readonly finalTest: EventOf<'test_run'> | null;
  /** The change's test files run on the code before it, after the final run (see testing/verdict.ts). */
  readonly withoutFix: EventOf<'test_run'> | null;
  readonly lastCheckpoint: EventOf<'checkpoint'> | null;
  readonly lastCondensation: EventOf<'condensation'> | null;
  /** tool_use blocks of the last model turn that have no observation yet (a crash mid-step). */
  readonly pendingToolUses: readonly ToolUseBlock[];
  readonly finishSummary: string | null;
  /** The agent's question (ask_for_clarification) in the current round, or null. */
  readonly question: Clarification | null;
  readonly outcome: EventOf<'outcome'> | null;
  /** Rounds started by an answer (round_started events). */
  readonly rounds: number;
  /** Consecutive model turns that called no tool. */
  readonly turnsWithoutTools: number;
  readonly warnings: number;
}

export const emptyUsage: Usage = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };

export function totalTokens(u: Usage): number {
  return u.inputTokens + u.outputTokens + u.cacheReadTokens + u.cacheWriteTokens;
}

export function reduceState(events: readonly AgentEvent[]): RunState {
  let steps = 0;
  let usage = emptyUsage;
  let usd = 0;
  let elapsedMs = 0;
  let segmentStart: number | null = null;
  let segmentEnd = 0;
  let baseline: EventOf<'test_run'> | null = null;
  let finalTest: EventOf<'test_run'> | null = null;
  let withoutFix: EventOf<'test_run'> | null = null;
  let lastCheckpoint: EventOf<'checkpoint'> | null = null;
  let lastCondensation: EventOf<'condensation'> | null = null;
  let pending: ToolUseBlock[] = [];
  let finishSummary: string | null = null;
  let question: Clarification | null = null;
  let outcome: EventOf<'outcome'> | null = null;
  let rounds = 0;
  let turnsWithoutTools = 0;
  let warnings = 0;

  for (const e of events) {
    const t = Date.parse(e.ts);
    // A sub-agent's turns cost what they cost, and are not steps of the main loop.
    if ('parent' in e && e.parent !== undefined) {
      segmentStart ??= t;
      segmentEnd = t;
      if (e.kind === 'model_response') {
        usage = addUsage(usage, e.usage);
        usd += e.usd;
      }
      continue;
    }
    // A resume, or an answer after a question, starts a new segment: the time in between (a crash,
    // or days of waiting for the answer) is nobody's work.
    if (e.kind === 'run_resumed' || e.kind === 'round_started') {
      if (segmentStart !== null) elapsedMs += segmentEnd - segmentStart;
      segmentStart = t;
    }
    segmentStart ??= t;
    segmentEnd = t;
    switch (e.kind) {
      case 'model_response': {
        steps += 1;
        usage = addUsage(usage, e.usage);
        usd += e.usd;
        pending = e.content.filter((b): b is ToolUseBlock => b.type === 'tool_use');
        turnsWithoutTools = pending.length === 0 ? turnsWithoutTools + 1 : 0;
        break;
      }
      case 'observation':
        pending = pending.filter((b) => b.id !== e.toolUseId);
        if (e.finishSummary !== undefined && !e.isError) finishSummary = e.finishSummary;
        if (e.question !== undefined && !e.isError) question = e.question;
        break;
      case 'round_started':
        // An answer reopens the run: what ended the last round no longer holds.
        outcome = null;
        question = null;
        finishSummary = null;
        turnsWithoutTools = 0;
        rounds += 1;
        break;
      case 'test_run':
        if (e.phase === 'baseline') baseline = e;
        if (e.phase === 'final') {
          finalTest = e;
          withoutFix = null;
        }
        if (e.phase === 'without_fix') withoutFix = e;
        break;
      case 'checkpoint':
        lastCheckpoint = e;
        break;
      case 'condensation':
        lastCondensation = e;
        if (e.call !== undefined) {
          usage = addUsage(usage, e.call.usage);
          usd += e.call.usd;
        }
        break;
      case 'warning':
        warnings += 1;
        break;
      case 'outcome':
        outcome = e;
        break;
      case 'run_resumed':
      case 'model_retry':
      case 'action':
      case 'note':
        break;
    }
  }
  if (segmentStart !== null) elapsedMs += segmentEnd - segmentStart;
  return {
    steps,
    usage,
    usd,
    elapsedMs,
    baseline,
    finalTest,
    withoutFix,
    lastCheckpoint,
    lastCondensation,
    pendingToolUses: pending,
    finishSummary,
    question,
    outcome,
    rounds,
    turnsWithoutTools,
    warnings,
  };
}

function addUsage(a: Usage, b: Usage): Usage {
  return {
    inputTokens: a.inputTokens + b.inputTokens,
    outputTokens: a.outputTokens + b.outputTokens,
    cacheReadTokens: a.cacheReadTokens + b.cacheReadTokens,
    cacheWriteTokens: a.cacheWriteTokens + b.cacheWriteTokens,
  };
}

/** The events of the main conversation: a sub-agent's turns (see `parent`) left out. */
export function mainEvents(events: readonly AgentEvent[]): AgentEvent[] {
  return events.filter((e) => !('parent' in e) || e.parent === undefined);
}
