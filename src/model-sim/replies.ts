import { randomBytes } from 'node:crypto';
import type { StopReason } from '@anthropic-ai/sdk/resources/messages/messages';
import { redactedData, signThinking } from './thinking.js';
import type {
  ApiErrorStatus,
  DropConnectionFault,
  HangFault,
  HttpErrorFault,
  Reply,
  ReplyBlock,
} from './types.js';

const ID_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** An id shaped like the API's: `prefix` + 24 base62 characters, e.g. `toolu_01Ab...`. */
export function newId(prefix: 'toolu_' | 'msg_' | 'req_'): string {
  const bytes = randomBytes(24);
  let id = prefix;
  for (const byte of bytes) id += ID_ALPHABET[byte % ID_ALPHABET.length] ?? 'A';
  return id;
}

/**
 * An immutable Reply under construction: every method returns a new builder, so a partly built
 * reply can be shared between script steps. The builder itself is a Reply.
 */
export class ReplyBuilder implements Reply {
  readonly kind = 'reply';

  constructor(
    readonly content: readonly ReplyBlock[] = [],
    private readonly explicitStop?: StopReason,
  ) {}

  /** `tool_use` when the reply calls a tool, else `end_turn`, unless set with stop(). */
  get stopReason(): StopReason {
    return this.explicitStop ?? (this.content.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn');
  }

  text(text: string): ReplyBuilder {
    return this.with({ type: 'text', text });
  }

  tool(name: string, input: Readonly<Record<string, unknown>>, options: { id?: string } = {}): ReplyBuilder {
    return this.with({ type: 'tool_use', id: options.id ?? newId('toolu_'), name, input });
  }

  /** A thinking block, signed as the simulator signs them (thinking.ts); sent only when thinking is on. */
  thinking(text: string): ReplyBuilder {
    return this.with({ type: 'thinking', thinking: text, signature: signThinking(text) });
  }

  /** A redacted thinking block (opaque data the simulator can check); sent only when thinking is on. */
  redactedThinking(text: string): ReplyBuilder {
    return this.with({ type: 'redacted_thinking', data: redactedData(text) });
  }

  /** Overrides the stop reason, e.g. `max_tokens` to simulate a truncated answer. */
  stop(reason: StopReason): ReplyBuilder {
    return new ReplyBuilder(this.content, reason);
  }

  private with(block: ReplyBlock): ReplyBuilder {
    return new ReplyBuilder([...this.content, block], this.explicitStop);
  }
}

export function reply(): ReplyBuilder {
  return new ReplyBuilder();
}

export function httpError(
  status: ApiErrorStatus,
  options: { retryAfterSeconds?: number; message?: string } = {},
): HttpErrorFault {
  return { status, ...options };
}

export function hang(): HangFault {
  return { hang: true };
}

export function dropConnection(): DropConnectionFault {
  return { dropConnection: true };
}
