import type { EventOf } from '../events/schema.js';
import type { ModelResponse } from '../model/model.js';

/** The `model_response` event before the store gives it an id and a timestamp. */
export type ModelResponseEvent = Omit<EventOf<'model_response'>, 'id' | 'ts'>;

/** What the caller measured around one model call. */
export interface ModelCallFacts {
  readonly usd: number;
  readonly latencyMs: number;
  /** The prompt size the harness estimated before sending. */
  readonly promptTokensEstimate: number;
  /** The sub-run (delegate) this call belongs to. */
  readonly parent?: string | undefined;
}

/**
 * The one shape of a model call in the trajectory, for the fix run's steps, a delegate's calls and
 * a review: the answer as the model gave it, with what it cost.
 */
export function modelResponseEvent(response: ModelResponse, facts: ModelCallFacts): ModelResponseEvent {
  return {
    kind: 'model_response',
    ...(facts.parent === undefined ? {} : { parent: facts.parent }),
    model: response.model,
    requestId: response.requestId,
    content: response.content,
    stopReason: response.stopReason,
    usage: response.usage,
    usd: facts.usd,
    latencyMs: facts.latencyMs,
    attempts: response.attempts,
    promptTokensEstimate: facts.promptTokensEstimate,
    ...thinkingTokens(response),
    ...(response.contextEdits === undefined || response.contextEdits.length === 0
      ? {}
      : { contextEdits: response.contextEdits.map((e) => ({ ...e })) }),
  };
}

/**
 * Of the output tokens, those spent thinking: as the API reported them, else estimated from the
 * thinking blocks' text (four characters a token).
 */
export function thinkingTokens(response: ModelResponse): { thinkingTokens?: number } {
  if (response.thinkingTokens !== undefined) return { thinkingTokens: response.thinkingTokens };
  const chars = response.content.reduce((n, b) => n + (b.type === 'thinking' ? b.thinking.length : 0), 0);
  return chars === 0 ? {} : { thinkingTokens: Math.ceil(chars / 4) };
}
