import type Anthropic from '@anthropic-ai/sdk';
import type { ContentBlock } from '../events/schema.js';
import { CONTEXT_MANAGEMENT_BETA, INTERLEAVED_THINKING_BETA } from './capabilities.js';
import { isNativeSpec, type AppliedContextEdit, type ModelRequest, type ToolSpec } from './model.js';

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

/**
 * Request headers: the interleaved-thinking beta when the model thinks and may call tools, the
 * context-management beta when the request asks for server-side clearing.
 */
export function betaHeaders(request: ModelRequest): Record<string, string> {
  const thinking = (request.thinking?.budgetTokens ?? 0) > 0;
  const betas = [
    ...(thinking && request.tools.length > 0 ? [INTERLEAVED_THINKING_BETA] : []),
    ...(request.contextManagement ? [CONTEXT_MANAGEMENT_BETA] : []),
  ];
  return betas.length === 0 ? {} : { 'anthropic-beta': betas.join(',') };
}

/** The `context_management` body field as the API takes it (absent when not asked for). */
export interface ContextManagementParam {
  readonly edits: readonly {
    readonly type: 'clear_tool_uses_20250919';
    readonly trigger: { readonly type: 'input_tokens'; readonly value: number };
    readonly keep: { readonly type: 'tool_uses'; readonly value: number };
    readonly clear_at_least: { readonly type: 'input_tokens'; readonly value: number };
  }[];
}

/**
 * Server-side clearing of old tool results: the one edit the harness uses. Tool inputs stay (the
 * API's default `clear_tool_inputs: false`), so the model still sees what it called; only the
 * bulky results go.
 */
export function contextManagementParams(request: ModelRequest): {
  context_management?: ContextManagementParam;
} {
  const c = request.contextManagement;
  if (!c) return {};
  return {
    context_management: {
      edits: [
        {
          type: 'clear_tool_uses_20250919',
          trigger: { type: 'input_tokens', value: c.triggerTokens },
          keep: { type: 'tool_uses', value: c.keepToolUses },
          clear_at_least: { type: 'input_tokens', value: c.clearAtLeastTokens },
        },
      ],
    },
  };
}

/** `context_management.applied_edits` of a response, in the loop's shape ([] when there is none). */
export function appliedEditsOf(message: unknown): AppliedContextEdit[] {
  const cm = (message as { context_management?: { applied_edits?: unknown } | null }).context_management;
  const edits = cm?.applied_edits;
  if (!Array.isArray(edits)) return [];
  const out: AppliedContextEdit[] = [];
  for (const e of edits as unknown[]) {
    if (typeof e !== 'object' || e === null) continue;
    const r = e as Record<string, unknown>;
    if (typeof r['type'] !== 'string') continue;
    const n = (k: string): number | undefined => (typeof r[k] === 'number' ? r[k] : undefined);
    const toolUses = n('cleared_tool_uses');
    const thinkingTurns = n('cleared_thinking_turns');
    out.push({
      type: r['type'],
      clearedInputTokens: n('cleared_input_tokens') ?? 0,
      ...(toolUses === undefined ? {} : { clearedToolUses: toolUses }),
      ...(thinkingTurns === undefined ? {} : { clearedThinkingTurns: thinkingTurns }),
    });
  }
  return out;
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
