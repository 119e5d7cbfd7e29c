import Anthropic from '@anthropic-ai/sdk';
import type { Usage } from '../events/schema.js';
import {
  ModelError,
  type CompleteOptions,
  type ConversationMessage,
  type Model,
  type ModelErrorCause,
  type ModelRequest,
  type ModelResponse,
} from './model.js';
import {
  appliedEditsOf,
  assistantBlockParam,
  betaHeaders,
  contextManagementParams,
  fromContent,
  thinkingParams,
  thinkingTokensOf,
  toolParams,
} from './request-shape.js';

export interface AnthropicModelOptions {
  readonly apiKey: string;
  readonly model: string;
  /** Defaults to the SDK's (api.anthropic.com); tests point it at the model simulator. */
  readonly baseURL?: string | undefined;
  /** Attempts per call for retryable failures (429, 5xx, 529, connection). Default 6. */
  readonly maxAttempts?: number;
  /** First backoff step; doubles per attempt with jitter, capped by maxBackoffMs. Default 1000. */
  readonly baseBackoffMs?: number;
  readonly maxBackoffMs?: number;
  /** Per-request timeout. Default 10 minutes (the SDK's). */
  readonly timeoutMs?: number;
  readonly fetch?: typeof fetch;
  /**
   * Cache breakpoints on the stable prefix and the newest message (default true). Off only to
   * measure what caching saves (bench/tokens-bench.ts).
   */
  readonly promptCaching?: boolean;
  /**
   * A client for another provider (Bedrock, Vertex; see providers.ts), then apiKey and baseURL are
   * unused, or its promise (their SDKs load on first use); and the id that provider knows the model
   * by (default: `model`).
   */
  readonly client?: MessagesClient | Promise<MessagesClient> | undefined;
  readonly modelId?: string | undefined;
}

/** The part of the SDK the loop uses; Anthropic, AnthropicBedrock and AnthropicVertex all have it. */
export interface MessagesClient {
  readonly messages: Pick<Anthropic['messages'], 'stream'>;
  /**
   * The beta surface, used when a request asks for server-side context management: its stream
   * keeps the `context_management` the final message_delta carries (the plain one drops it).
   */
  readonly beta?: { readonly messages: Pick<Anthropic['beta']['messages'], 'stream'> };
}

type Param = Anthropic.MessageCreateParamsStreaming;
type ApiError = InstanceType<typeof Anthropic.APIError<number | undefined, Headers | undefined>>;

/**
 * Claude through the official SDK, streamed. The SDK's own retries are off (maxRetries 0) so that
 * every retry is ours: bounded, honouring retry-after, and reported through onRetry into the
 * trajectory. Prompt caching: breakpoints on the tools and system prompt (the stable prefix) and on
 * the newest message (so each turn reads the previous turn's prefix from cache).
 */
export class AnthropicModel implements Model {
  readonly name: string;
  private readonly modelId: string;
  private readonly client: MessagesClient | Promise<MessagesClient>;
  private readonly maxAttempts: number;
  private readonly baseBackoffMs: number;
  private readonly maxBackoffMs: number;
  private readonly promptCaching: boolean;

  constructor(options: AnthropicModelOptions) {
    this.name = options.model;
    this.modelId = options.modelId ?? options.model;
    this.client =
      options.client ??
      new Anthropic({
        apiKey: options.apiKey,
        baseURL: options.baseURL ?? null,
        maxRetries: 0,
        timeout: options.timeoutMs ?? 600_000,
        ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
      });
    this.maxAttempts = options.maxAttempts ?? 6;
    this.baseBackoffMs = options.baseBackoffMs ?? 1000;
    this.maxBackoffMs = options.maxBackoffMs ?? 30_000;
    this.promptCaching = options.promptCaching ?? true;
  }

  async complete(request: ModelRequest, options: CompleteOptions = {}): Promise<ModelResponse> {
    const params = toParams(this.modelId, request, this.promptCaching);
    const client = await this.client;
    for (let attempt = 1; ; attempt++) {
      try {
        const streamOptions = { signal: options.signal ?? null, headers: betaHeaders(request) };
        const stream =
          request.contextManagement && client.beta !== undefined
            ? client.beta.messages.stream(params, streamOptions)
            : client.messages.stream(params, streamOptions);
        const message = (await stream.finalMessage()) as Anthropic.Message;
        const thinkingTokens = thinkingTokensOf(message.usage);
        const contextEdits = request.contextManagement ? { contextEdits: appliedEditsOf(message) } : {};
        return {
          model: message.model,
          requestId: stream.request_id ?? null,
          content: fromContent(message.content),
          stopReason: message.stop_reason,
          usage: toUsage(message.usage),
          ...(thinkingTokens === undefined ? {} : { thinkingTokens }),
          ...contextEdits,
          attempts: attempt,
        };
      } catch (error) {
        const failure = classify(error, options.signal);
        if (!failure.retryable || attempt >= this.maxAttempts) {
          const suffix = failure.retryable ? ` (gave up after ${attempt} attempts)` : '';
          throw new ModelError(failure.cause, `${failure.message}${suffix}`, failure.status, {
            cause: error,
          });
        }
        const backoff = Math.min(this.maxBackoffMs, this.baseBackoffMs * 2 ** (attempt - 1));
        const jittered = backoff * (0.75 + Math.random() * 0.5);
        const waitMs = failure.retryAfterMs ?? jittered;
        await options.onRetry?.({ attempt, status: failure.status, reason: failure.message, waitMs });
        await sleep(waitMs, options.signal);
      }
    }
  }
}

function toParams(model: string, request: ModelRequest, caching: boolean): Param {
  const cache = caching ? { cache_control: { type: 'ephemeral' as const } } : {};
  const messages = request.messages.map((m, i) =>
    toMessageParam(m, caching && i === request.messages.length - 1),
  );
  return {
    model,
    ...thinkingParams(request),
    ...contextManagementParams(request),
    system: [{ type: 'text', text: request.system, ...cache }],
    tools: toolParams(request.tools, caching),
    messages,
    stream: true,
  };
}

function toMessageParam(message: ConversationMessage, cacheBreakpoint: boolean): Anthropic.MessageParam {
  const cache = { cache_control: { type: 'ephemeral' as const } };
  if (message.role === 'assistant') {
    return { role: 'assistant', content: message.content.map(assistantBlockParam) };
  }
  const content = message.content.map((b, i): Anthropic.ContentBlockParam => {
    const mark = cacheBreakpoint && i === message.content.length - 1 ? cache : {};
    switch (b.type) {
      case 'text':
        return { type: 'text', text: b.text, ...mark };
      case 'image':
        return {
          type: 'image',
          source: { type: 'base64', media_type: b.source.media_type, data: b.source.data },
          ...mark,
        };
      case 'tool_result':
        return {
          type: 'tool_result',
          tool_use_id: b.tool_use_id,
          content: b.content,
          ...(b.is_error === true ? { is_error: true } : {}),
          ...mark,
        };
    }
  });
  return { role: 'user', content };
}

function toUsage(u: Anthropic.Usage): Usage {
  return {
    inputTokens: u.input_tokens,
    outputTokens: u.output_tokens,
    cacheReadTokens: u.cache_read_input_tokens ?? 0,
    cacheWriteTokens: u.cache_creation_input_tokens ?? 0,
  };
}

interface Failure {
  readonly cause: ModelErrorCause;
  readonly retryable: boolean;
  readonly status: number | null;
  readonly message: string;
  readonly retryAfterMs?: number;
}

function classify(error: unknown, signal: AbortSignal | undefined): Failure {
  if (signal?.aborted === true || error instanceof Anthropic.APIUserAbortError) {
    return { cause: 'cancelled', retryable: false, status: null, message: 'the model call was cancelled' };
  }
  if (error instanceof Anthropic.APIConnectionTimeoutError) {
    return { cause: 'timeout', retryable: true, status: null, message: 'the model API timed out' };
  }
  if (error instanceof Anthropic.APIConnectionError) {
    return {
      cause: 'connection',
      retryable: true,
      status: null,
      message: `cannot reach the model API: ${error.message}`,
    };
  }
  if (error instanceof Anthropic.APIError) {
    const apiError: ApiError = error as ApiError;
    const status = typeof apiError.status === 'number' ? apiError.status : null;
    const detail = apiMessage(apiError);
    const retryAfterMs = parseRetryAfter(apiError.headers);
    const base = { status, ...(retryAfterMs === undefined ? {} : { retryAfterMs }) };
    const type = errorType(apiError);
    if (status === 401)
      return {
        ...base,
        cause: 'auth',
        retryable: false,
        message: `the model API rejected the API key (401): ${detail}`,
      };
    if (status === 403)
      return {
        ...base,
        cause: 'permission',
        retryable: false,
        message: `the API key may not use this model (403): ${detail}`,
      };
    if (status === 404)
      return { ...base, cause: 'not_found', retryable: false, message: `model not found (404): ${detail}` };
    if (status === 429)
      return { ...base, cause: 'rate_limited', retryable: true, message: `rate limited (429): ${detail}` };
    if (status === 529 || type === 'overloaded_error')
      return {
        ...base,
        cause: 'overloaded',
        retryable: true,
        message: `the model API is overloaded: ${detail}`,
      };
    if (status === 408 || status === 409 || (status !== null && status >= 500) || status === null) {
      return {
        ...base,
        cause: 'server',
        retryable: true,
        message: `model API error (${status ?? 'stream'}): ${detail}`,
      };
    }
    if (/prompt is too long|too many tokens/i.test(detail)) {
      return {
        ...base,
        cause: 'context_too_long',
        retryable: false,
        message: `the prompt is too long: ${detail}`,
      };
    }
    return {
      ...base,
      cause: 'bad_request',
      retryable: false,
      message: `the model API refused the request (${status}): ${detail}`,
    };
  }
  const message = error instanceof Error ? error.message : String(error);
  return { cause: 'connection', retryable: true, status: null, message: `model call failed: ${message}` };
}

function errorType(error: ApiError): string | null {
  const body = error.error as { error?: { type?: unknown } } | undefined;
  const t = body?.error?.type;
  return typeof t === 'string' ? t : null;
}

function apiMessage(error: ApiError): string {
  const body = error.error as { error?: { message?: unknown } } | undefined;
  const m = body?.error?.message;
  return typeof m === 'string' ? m : error.message;
}

function parseRetryAfter(headers: Headers | undefined): number | undefined {
  if (headers === undefined) return undefined;
  const ms = headers.get('retry-after-ms');
  if (ms !== null && Number.isFinite(Number(ms))) return Math.max(0, Number(ms));
  const value = headers.get('retry-after');
  if (value === null) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(value);
  return Number.isFinite(date) ? Math.max(0, date - Date.now()) : undefined;
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted === true) {
      reject(new ModelError('cancelled', 'the model call was cancelled', null));
      return;
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(new ModelError('cancelled', 'the model call was cancelled', null));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
