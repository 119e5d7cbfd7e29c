import type Anthropic from '@anthropic-ai/sdk';
import type { ContentBlock } from '../events/schema.js';
import { INTERLEAVED_THINKING_BETA } from './capabilities.js';
import { isNativeSpec, type ModelRequest, type ToolSpec } from './model.js';

/*
 * The parts of a Messages request that depend on the tool set and on thinking, shared by every
 * client of the Messages shape (docs/model-requests.md says what is sent and why).
 */

/** The tool definitions: Anthropic-defined tools by type and name, ours with their schema. */
export function toolParams(specs: readonly ToolSpec[], caching = true): Anthropic.ToolUnion[] {
  return specs.map((t, i): Anthropic.ToolUnion => {
    const cache = caching && i === specs.length - 1 ? { cache_control: { type: 'ephemeral' as const } } : {};
    if (isNativeSpec(t)) {
      return {
        type: t.native,
        name: t.name,
        ...(t.maxCharacters === undefined ? {} : { max_characters: t.maxCharacters }),
        ...cache,
      } as Anthropic.ToolUnion;
    }
    return {
      name: t.name,
      description: t.description,
      input_schema: t.inputSchema as Anthropic.Tool.InputSchema,
      ...cache,
    };
  });
}

/**
 * `thinking` and `max_tokens` for a request. With thinking on, max_tokens is the answer's room plus
 * the budget (the API wants budget_tokens < max_tokens, and the answer keeps the room it had
 * without thinking). Temperature and a forcing tool_choice are never sent: the API refuses both
 * with thinking.
 */
export function thinkingParams(request: ModelRequest): {
  max_tokens: number;
  thinking?: Anthropic.ThinkingConfigEnabled;
} {
  const budget = request.thinking?.budgetTokens ?? 0;
  if (budget <= 0) return { max_tokens: request.maxOutputTokens };
  return {
    max_tokens: request.maxOutputTokens + budget,
    thinking: { type: 'enabled', budget_tokens: budget },
  };
}

/** Request headers: the interleaved-thinking beta when the model thinks and may call tools. */
export function betaHeaders(request: ModelRequest): Record<string, string> {
  const thinking = (request.thinking?.budgetTokens ?? 0) > 0;
  return thinking && request.tools.length > 0 ? { 'anthropic-beta': INTERLEAVED_THINKING_BETA } : {};
}

/** An assistant block as it goes back to the API: thinking blocks exactly as they came. */
export function assistantBlockParam(b: ContentBlock): Anthropic.ContentBlockParam {
  switch (b.type) {
    case 'text':
      return { type: 'text', text: b.text };
    case 'tool_use':
      return { type: 'tool_use', id: b.id, name: b.name, input: b.input ?? {} };
    case 'thinking':
      return { type: 'thinking', thinking: b.thinking, signature: b.signature };
    case 'redacted_thinking':
      return { type: 'redacted_thinking', data: b.data };
  }
}

/** The blocks of a response the loop keeps; server-tool blocks are not requested and are dropped. */
export function fromContent(blocks: readonly Anthropic.ContentBlock[]): ContentBlock[] {
  const out: ContentBlock[] = [];
  for (const b of blocks) {
    if (b.type === 'text') out.push({ type: 'text', text: b.text });
    else if (b.type === 'tool_use') out.push({ type: 'tool_use', id: b.id, name: b.name, input: b.input });
    else if (b.type === 'thinking')
      out.push({ type: 'thinking', thinking: b.thinking, signature: b.signature });
    else if (b.type === 'redacted_thinking') out.push({ type: 'redacted_thinking', data: b.data });
  }
  return out;
}

/** Thinking tokens as the API reports them, or undefined when it does not. */
export function thinkingTokensOf(usage: Anthropic.Usage): number | undefined {
  const n = usage.output_tokens_details?.thinking_tokens;
  return typeof n === 'number' ? n : undefined;
}
