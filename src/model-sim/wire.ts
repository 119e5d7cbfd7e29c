import type {
  ContentBlock,
  Message,
  RawMessageStreamEvent,
  Usage,
} from '@anthropic-ai/sdk/resources/messages/messages';
import type { ErrorResponse, ErrorType } from '@anthropic-ai/sdk/resources/shared';
import { newId } from './replies.js';
import type { ApiErrorStatus, Reply } from './types.js';
import { countTokens, type InputUsage } from './usage.js';
import type { ContextManagementResponse } from './context-management.js';

/** A Message as the beta API returns it when the request asked for context management. */
export type SimMessage = Message & { context_management?: ContextManagementResponse | null };

/** The Message the API returns for `reply`, as the non-streaming endpoint sends it. */
export function toMessage(
  reply: Reply,
  model: string,
  input: InputUsage,
  contextManagement: ContextManagementResponse | null = null,
): SimMessage {
  const content = reply.content.map((block): ContentBlock => {
    if (block.type === 'text') return { type: 'text', text: block.text, citations: null };
    if (block.type === 'thinking' || block.type === 'redacted_thinking') return { ...block };
    const { id, name, input: toolInput } = block;
    return { type: 'tool_use', id, name, input: toolInput, caller: { type: 'direct' } };
  });
  // Thinking tokens are output tokens; the API also reports them apart.
  const thinking = content.reduce(
    (n, b) =>
      n +
      (b.type === 'thinking'
        ? countTokens(b.thinking)
        : b.type === 'redacted_thinking'
          ? countTokens(b.data)
          : 0),
    0,
  );
  const usage: Usage = {
    ...input,
    output_tokens: countTokens(JSON.stringify(content)),
    cache_creation: {
      ephemeral_5m_input_tokens: input.cache_creation_input_tokens,
      ephemeral_1h_input_tokens: 0,
    },
    inference_geo: null,
    output_tokens_details: thinking > 0 ? { thinking_tokens: thinking } : null,
    server_tool_use: null,
    service_tier: 'standard',
    speed: null,
  };
  return {
    id: newId('msg_'),
    type: 'message',
    role: 'assistant',
    model,
    content,
    stop_reason: reply.stopReason,
    stop_sequence: null,
    stop_details: null,
    container: null,
    diagnostics: null,
    usage,
    ...(contextManagement === null ? {} : { context_management: contextManagement }),
  };
}

/** Size of text_delta chunks; tool input JSON is split into at least 3 input_json_delta chunks. */
const TEXT_CHUNK = 24;
const JSON_CHUNKS = 3;

/**
 * The server-sent events that deliver `message`, in the API's order: message_start (no content,
 * input usage, output_tokens 1), then per block content_block_start / deltas / content_block_stop
 * with a ping after the first start, then message_delta (stop reason, final usage), message_stop.
 * Accumulating them (as the SDK's MessageStream does) yields `message` again.
 */
export function toStreamEvents(message: SimMessage): { event: string; data: unknown }[] {
  const events: { event: string; data: unknown }[] = [];
  const emit = (data: RawMessageStreamEvent | { type: 'ping' }): void => {
    events.push({ event: data.type, data });
  };
  const contextManagement = message.context_management;
  emit({
    type: 'message_start',
    message: {
      ...message,
      // The applied edits come with the final message_delta, as the API sends them.
      ...(contextManagement === undefined ? {} : { context_management: null }),
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { ...message.usage, output_tokens: 1 },
    },
  });
  for (const [index, block] of message.content.entries()) {
    if (block.type === 'text') {
      emit({ type: 'content_block_start', index, content_block: { ...block, text: '' } });
      if (index === 0) emit({ type: 'ping' });
      for (const text of chunks(block.text, TEXT_CHUNK)) {
        emit({ type: 'content_block_delta', index, delta: { type: 'text_delta', text } });
      }
    } else if (block.type === 'tool_use') {
      emit({ type: 'content_block_start', index, content_block: { ...block, input: {} } });
      if (index === 0) emit({ type: 'ping' });
      // The API opens every tool input with an empty delta.
      const json = JSON.stringify(block.input);
      for (const partial_json of ['', ...chunks(json, Math.ceil(json.length / JSON_CHUNKS))]) {
        emit({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json } });
      }
    } else if (block.type === 'thinking') {
      emit({ type: 'content_block_start', index, content_block: { ...block, thinking: '', signature: '' } });
      if (index === 0) emit({ type: 'ping' });
      for (const thinking of chunks(block.thinking, TEXT_CHUNK)) {
        emit({ type: 'content_block_delta', index, delta: { type: 'thinking_delta', thinking } });
      }
      emit({
        type: 'content_block_delta',
        index,
        delta: { type: 'signature_delta', signature: block.signature },
      });
    } else if (block.type === 'redacted_thinking') {
      emit({ type: 'content_block_start', index, content_block: block });
      if (index === 0) emit({ type: 'ping' });
    } else {
      throw new Error(`model simulator cannot stream a ${block.type} block`);
    }
    emit({ type: 'content_block_stop', index });
  }
  const { usage } = message;
  emit({
    type: 'message_delta',
    delta: { stop_reason: message.stop_reason, stop_sequence: null, stop_details: null, container: null },
    usage: {
      input_tokens: usage.input_tokens,
      cache_creation_input_tokens: usage.cache_creation_input_tokens,
      cache_read_input_tokens: usage.cache_read_input_tokens,
      output_tokens: usage.output_tokens,
      output_tokens_details: usage.output_tokens_details,
      server_tool_use: null,
    },
    ...(contextManagement === undefined ? {} : { context_management: contextManagement }),
  });
  emit({ type: 'message_stop' });
  return events;
}

export function formatSse(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

const ERROR_TYPES: Record<ApiErrorStatus | 404, ErrorType> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  429: 'rate_limit_error',
  500: 'api_error',
  503: 'api_error',
  529: 'overloaded_error',
};

const DEFAULT_MESSAGES: Record<ApiErrorStatus | 404, string> = {
  400: 'Invalid request',
  401: 'invalid x-api-key',
  403: 'Your API key does not have permission to use the specified resource.',
  404: 'Not found',
  429: 'Number of request tokens has exceeded your per-minute rate limit',
  500: 'Internal server error',
  503: 'Service unavailable',
  529: 'Overloaded',
};

export function errorBody(status: ApiErrorStatus | 404, requestId: string, message?: string): ErrorResponse {
  return {
    type: 'error',
    error: {
      type: ERROR_TYPES[status],
      message: message ?? DEFAULT_MESSAGES[status],
    } as ErrorResponse['error'],
    request_id: requestId,
  };
}

function chunks(text: string, size: number): string[] {
  const out: string[] = [];
  // Split on code points so no chunk ends inside a surrogate pair.
  const chars = Array.from(text);
  for (let i = 0; i < chars.length; i += size) out.push(chars.slice(i, i + size).join(''));
  return out;
}
