import type { ContentBlock, Usage } from '../events/schema.js';

/** The model seam. The loop speaks these shapes; an implementation maps them to a provider's API. */

export interface SchemaToolSpec {
  readonly name: string;
  readonly description: string;
  readonly inputSchema: Record<string, unknown>;
}

/**
 * An Anthropic-defined client tool (`text_editor_20250728`, `bash_20250124`): its schema is built
 * into the model, so it is declared by type and name only. The harness still runs it.
 */
export interface NativeToolSpec {
  readonly name: string;
  readonly native: string;
  /** text editor: most characters a `view` shows (the harness cuts longer views the same way). */
  readonly maxCharacters?: number;
}

export type ToolSpec = SchemaToolSpec | NativeToolSpec;

export function isNativeSpec(spec: ToolSpec): spec is NativeToolSpec {
  return 'native' in spec;
}

export interface ToolResultBlock {
  readonly type: 'tool_result';
  readonly tool_use_id: string;
  readonly content: string;
  readonly is_error?: boolean;
}

export interface TextBlockParam {
  readonly type: 'text';
  readonly text: string;
}

/** An image as the Messages API takes it inline: base64 bytes of a PNG, JPEG, GIF or WebP. */
export interface ImageBlockParam {
  readonly type: 'image';
  readonly source: {
    readonly type: 'base64';
    readonly media_type: 'image/png' | 'image/jpeg' | 'image/gif' | 'image/webp';
    readonly data: string;
  };
}

export type UserBlock = TextBlockParam | ToolResultBlock | ImageBlockParam;

export type ConversationMessage =
  | { readonly role: 'user'; readonly content: readonly UserBlock[] }
  | { readonly role: 'assistant'; readonly content: readonly ContentBlock[] };

export interface ModelRequest {
  readonly system: string;
  readonly tools: readonly ToolSpec[];
  readonly messages: readonly ConversationMessage[];
  /** Room for the answer; a thinking budget comes on top of it. */
  readonly maxOutputTokens: number;
  /**
   * Extended thinking with this budget (tokens, ≥ 1024), interleaved between tool calls when the
   * request has tools. Absent or null: no thinking.
   */
  readonly thinking?: { readonly budgetTokens: number } | null;
  /**
   * Server-side context management (the `clear_tool_uses_20250919` edit, beta
   * `context-management-2025-06-27`): past `triggerTokens` of input the API replaces the results of
   * all but the newest `keepToolUses` tool calls with a placeholder before the model reads the
   * prompt, when that frees at least `clearAtLeastTokens`. Absent or null: not sent.
   */
  readonly contextManagement?: ContextClearing | null;
}

export interface ContextClearing {
  readonly triggerTokens: number;
  readonly keepToolUses: number;
  readonly clearAtLeastTokens: number;
}

/** An edit the API says it applied to the prompt before the model read it (`context_management.applied_edits`). */
export interface AppliedContextEdit {
  readonly type: string;
  readonly clearedInputTokens: number;
  /** `clear_tool_uses_20250919`: how many tool uses' results were replaced. */
  readonly clearedToolUses?: number;
  /** `clear_thinking_20251015`: how many turns' thinking was dropped. */
  readonly clearedThinkingTurns?: number;
}

export interface ModelResponse {
  readonly model: string;
  readonly requestId: string | null;
  readonly content: ContentBlock[];
  readonly stopReason: string | null;
  readonly usage: Usage;
  /** Of the output tokens, those spent thinking, when the API says (absent: it did not). */
  readonly thinkingTokens?: number;
  /** Context edits the API applied to this request's prompt (only when it was asked for some). */
  readonly contextEdits?: readonly AppliedContextEdit[];
  /** Attempts it took, including the successful one. */
  readonly attempts: number;
}

export interface RetryNotice {
  readonly attempt: number;
  readonly status: number | null;
  readonly reason: string;
  readonly waitMs: number;
}

export interface CompleteOptions {
  readonly signal?: AbortSignal | undefined;
  /** Called before each wait between attempts, so the retry is visible in the trajectory. */
  readonly onRetry?: ((notice: RetryNotice) => Promise<void> | void) | undefined;
}

export interface Model {
  readonly name: string;
  complete(request: ModelRequest, options?: CompleteOptions): Promise<ModelResponse>;
}

export type ModelErrorCause =
  | 'auth'
  | 'permission'
  | 'bad_request'
  | 'not_found'
  | 'context_too_long'
  | 'rate_limited'
  | 'overloaded'
  | 'server'
  | 'connection'
  | 'timeout'
  | 'cancelled';

/** A model call that failed for good (after retries where retrying made sense). */
export class ModelError extends Error {
  override readonly name = 'ModelError';
  constructor(
    readonly code: ModelErrorCause,
    message: string,
    readonly status: number | null,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
