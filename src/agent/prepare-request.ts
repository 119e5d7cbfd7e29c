import type { EventStore } from '../events/event-store.js';
import { reduceState } from '../events/reduce-state.js';
import type { AgentEvent, Limits, NewEvent } from '../events/schema.js';
import type { ModelRequest } from '../model/model.js';
import { chooseCondensationPoint, summarizeTurns } from './condense.js';
import { buildMessages, estimateTokens } from './conversation.js';

/**
 * The next model call's request, a projection of the log, with its token estimate. Condenses first
 * when the prompt passes 80% of the context budget, down to about 40%: condensations stay rare and
 * each one frees room for many turns (and the cached prefix survives in between).
 */
export async function prepareRequest(
  store: EventStore,
  system: string,
  tools: ModelRequest['tools'],
  limits: Pick<Limits, 'contextTokens' | 'maxOutputTokens'>,
  append: (e: NewEvent) => Promise<AgentEvent>,
): Promise<{ request: ModelRequest; estimate: number }> {
  const { contextTokens } = limits;
  const build = (): { request: ModelRequest; estimate: number } => {
    const request: ModelRequest = {
      system,
      tools,
      messages: buildMessages(store.base, store.events),
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
      const { summary, turns } = summarizeTurns(
        store.events,
        after,
        through,
        state.lastCondensation,
        Math.floor(contextTokens * 0.15 * 3),
      );
      await append({ kind: 'condensation', throughEventId: through, summary, condensedTurns: turns });
      built = build();
    }
  }
  return built;
}
