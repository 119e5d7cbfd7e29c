import type { EventStore } from '../events/event-store.js';
import { reduceState } from '../events/reduce-state.js';
import type { AgentEvent, Limits, NewEvent } from '../events/schema.js';
import type { ImageBlockParam, ModelRequest } from '../model/model.js';
import { chooseCondensationPoint, summarizeTurns } from './condense.js';
import { askForSummary, modelSummaryText, type Summarizer } from './condense-summary.js';
import { buildMessages, estimateTokens } from './conversation.js';

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
  const build = (): { request: ModelRequest; estimate: number } => {
    const request: ModelRequest = {
      system,
      tools,
      messages: buildMessages(store.base, store.events, images),
      maxOutputTokens: limits.maxOutputTokens,
    };
    return { request, estimate: estimateTokens(request) };
  };
  let built = build();
  if (built.estimate > contextTokens * 0.8) {
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
      const lines = { kind: 'condensation', throughEventId: through, condensedTurns: turns } as const;
      let event: NewEvent = { ...lines, summary, method: 'lines' };
      if ((limits.condenser ?? 'summary') === 'summary' && summarizer !== undefined) {
        const maxTokens = Math.min(limits.maxOutputTokens, Math.floor(contextTokens * 0.15));
        const got = await askForSummary(summarizer, built.request, maxTokens, maxChars);
        const call = got.call === undefined ? {} : { call: got.call };
        event = got.ok
          ? { ...lines, summary: modelSummaryText(got.text, turns), method: 'model', ...call }
          : { ...lines, summary, method: 'lines', fallback: got.reason, ...call };
      }
      await append(event);
      built = build();
    }
  }
  return built;
}
