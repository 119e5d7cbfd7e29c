import type { ContentBlock, Usage } from '../events/schema.js';

/** The model seam. The loop speaks these shapes; an implementation maps them to a provider's API. */

export interface ToolSpec {
  readonly name: string;
  readonly description: string;
  readonly inputSchema: Record<string, unknown>;
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

export type UserBlock = TextBlockParam | ToolResultBlock;

export type ConversationMessage =
  | { readonly role: 'user'; readonly content: readonly UserBlock[] }
  | { readonly role: 'assistant'; readonly content: readonly ContentBlock[] };

export interface ModelRequest {
  readonly system: string;
  readonly tools: readonly ToolSpec[];
  readonly messages: readonly ConversationMessage[];
  readonly maxOutputTokens: number;
}

export interface ModelResponse {
  readonly model: string;
  readonly requestId: string | null;
  readonly content: ContentBlock[];
  readonly stopReason: string | null;
  readonly usage: Usage;
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
