import type { EventStore } from '../events/event-store.js';
import { reduceState } from '../events/reduce-state.js';
import type { AgentEvent, Limits, NewEvent } from '../events/schema.js';
import type { ContextClearing, ImageBlockParam, ModelRequest } from '../model/model.js';
import { chooseCondensationPoint, summarizeTurns } from './condense.js';
import { askForSummary, modelSummaryText, type Summarizer } from './condense-summary.js';
import { buildMessages, estimateTokens } from './conversation.js';
import { holdCall, worstCallUsd } from './spend-budget.js';

export type { Summarizer } from './condense-summary.js';

/**
 * The next model call's request, a projection of the log, with its token estimate. Condenses first
 * when the prompt passes 80% of the context budget, down to about 40%: condensations stay rare and
 * each one frees room for many turns (and the cached prefix survives in between).
 *
 * The condensed turns are replaced by a summary the model writes (`condenser: summary`, given a
 * `summarizer`), or by the harness's line per action (`lines`, and whenever the model's summary
 * cannot be had: the event says why). Either way the summary is an event, so a resumed run rebuilds
 * the same conversation without asking again.
 *
 * `condenser: server`: the request asks the API to clear old tool results itself (serverClearing),
 * and the harness sends its log whole. It condenses only as a last resort, with lines: when even the
 * prompt the API would leave after clearing (serverSeenEstimate) passes 80% of the budget, or when
 * the whole log passes SERVER_MAX_LOG times the budget (the request itself must stay bounded).
 */
export async function prepareRequest(
  store: EventStore,
  system: string,
  tools: ModelRequest['tools'],
  limits: Pick<Limits, 'contextTokens' | 'maxOutputTokens' | 'condenser'>,
  append: (e: NewEvent) => Promise<AgentEvent>,
  summarizer?: Summarizer,
  /** The task's images (task-images.ts), loaded once per run. */
  images: readonly ImageBlockParam[] = [],
): Promise<{ request: ModelRequest; estimate: number }> {
  const { contextTokens } = limits;
  const server = limits.condenser === 'server';
  const build = (): { request: ModelRequest; estimate: number } => {
    const request: ModelRequest = {
      system,
      tools,
      messages: buildMessages(store.base, store.events, images),
      maxOutputTokens: limits.maxOutputTokens,
      ...(server ? { contextManagement: serverClearing(contextTokens) } : {}),
    };
    return { request, estimate: estimateTokens(request) };
  };
  let built = build();
  const tooLarge = server
    ? serverSeenEstimate(built.request, built.estimate) > contextTokens * 0.8 ||
      built.estimate > contextTokens * SERVER_MAX_LOG
    : built.estimate > contextTokens * 0.8;
  if (tooLarge) {
    const state = reduceState(store.events);
    const after = state.lastCondensation?.throughEventId ?? 0;
    const fixed =
      built.estimate - estimateTokens({ system: '', tools: [], messages: built.request.messages });
    const keep = Math.max(0, contextTokens * 0.4 - fixed);
    const through = chooseCondensationPoint(store.events, after, keep);
    if (through !== null && through > after) {
      const maxChars = Math.floor(contextTokens * 0.15 * 3);
      const { summary, turns } = summarizeTurns(
        store.events,
        after,
        through,
        state.lastCondensation,
        maxChars,
      );
      const lines = {
        kind: 'condensation',
        throughEventId: through,
        condensedTurns: turns,
        summary,
      } as const;
      if (!server && (limits.condenser ?? 'summary') === 'summary' && summarizer !== undefined) {
        const maxTokens = Math.min(limits.maxOutputTokens, Math.floor(contextTokens * 0.15));
        const bounds = { contextTokens, maxTokens, maxChars };
        await appendModelSummary(summarizer, built.request, bounds, lines, append);
      } else await append({ ...lines, method: 'lines' });
      built = build();
    }
  }
  return built;
}

/** Tool results kept whole, newest first, when the API clears (condenser: server). */
const SERVER_KEEP_TOOL_USES = 5;

/** condenser server: the whole log the harness sends, at most, in context budgets. */
const SERVER_MAX_LOG = 4;

/**
 * About what the API leaves of `request` after its clearing (serverClearing): past the trigger,
 * every tool result but the newest SERVER_KEEP_TOOL_USES becomes a short placeholder, when that
 * frees at least clear_at_least. In the harness's estimate's units (estimateTokens).
 */
export function serverSeenEstimate(request: ModelRequest, estimate: number): number {
  const clearing = request.contextManagement;
  if (!clearing || estimate <= clearing.triggerTokens) return estimate;
  const results = request.messages.flatMap((m) =>
    m.role === 'user' ? m.content.filter((b) => b.type === 'tool_result') : [],
  );
  const cleared = results.slice(0, Math.max(0, results.length - clearing.keepToolUses));
  const freed = cleared.reduce((n, b) => n + Math.max(0, JSON.stringify(b.content).length / 3 - 25), 0);
  return freed >= clearing.clearAtLeastTokens ? Math.ceil(estimate - freed) : estimate;
}

/**
 * What `condenser: server` asks of the API: clear once the prompt passes half the context budget
 * (the client-side condenser's 80% is a ceiling; clearing early keeps each turn cheap), keep the
 * newest SERVER_KEEP_TOOL_USES results (an edit-and-test cycle's views and output), and only when
 * that frees a fifth of the budget: each clearing breaks the prompt cache from the first cleared
 * result on, which is worth paying only for a large saving (the API's own advice for
 * `clear_at_least`).
 */
export function serverClearing(contextTokens: number): ContextClearing {
  return {
    triggerTokens: Math.max(1, Math.floor(contextTokens * 0.5)),
    keepToolUses: SERVER_KEEP_TOOL_USES,
    clearAtLeastTokens: Math.max(1, Math.floor(contextTokens * 0.2)),
  };
}

/**
 * The condensation with the summary the model writes, recorded. The summary call is held against
 * the month's limits as a step's call is (step.ts): its worst cost (a whole context of input and
 * the summary's output limit) before, its real cost after the event that carries it is in the log,
 * so a crash between the two loses the call's spend (the hold expires) and never counts it twice.
 * A refused hold makes no call: the line list is recorded, with the refusal as its fallback (the
 * next step's hold then stops the run, budget_exhausted, unless room came back).
 */
async function appendModelSummary(
  summarizer: Summarizer,
  request: ModelRequest,
  bounds: { contextTokens: number; maxTokens: number; maxChars: number },
  /** The condensation with the line list as its summary: recorded as is when no model summary is had. */
  lines: { kind: 'condensation'; throughEventId: number; condensedTurns: number; summary: string },
  append: (e: NewEvent) => Promise<AgentEvent>,
): Promise<void> {
  const callUsd = worstCallUsd(summarizer.price, {
    contextTokens: bounds.contextTokens,
    maxOutputTokens: bounds.maxTokens,
  });
  const hold = await holdCall(summarizer.budget, callUsd, summarizer.signal);
  if (!hold.ok) {
    await append({ ...lines, method: 'lines', fallback: `no summary call was made: ${hold.reason}` });
    return;
  }
  let usd = 0;
  try {
    const got = await askForSummary(summarizer, request, bounds.maxTokens, bounds.maxChars);
    usd = got.call?.usd ?? 0;
    const call = got.call === undefined ? {} : { call: got.call };
    await append(
      got.ok
        ? { ...lines, summary: modelSummaryText(got.text, lines.condensedTurns), method: 'model', ...call }
        : { ...lines, method: 'lines', fallback: got.reason, ...call },
    );
  } finally {
    await hold.settle(usd);
  }
}
