import type {
  MessageCreateParamsBase,
  StopReason,
  Usage,
} from '@anthropic-ai/sdk/resources/messages/messages';

/** A request body that passed the simulator's validation (see validate.ts). */
export type MessagesRequest = MessageCreateParamsBase;

export type ReplyBlock =
  | { readonly type: 'text'; readonly text: string }
  | {
      readonly type: 'tool_use';
      readonly id: string;
      readonly name: string;
      readonly input: Readonly<Record<string, unknown>>;
    }
  | { readonly type: 'thinking'; readonly thinking: string; readonly signature: string }
  | { readonly type: 'redacted_thinking'; readonly data: string };

/** What the simulated model answers: the content of one assistant message. */
export interface Reply {
  readonly kind: 'reply';
  readonly content: readonly ReplyBlock[];
  readonly stopReason: StopReason;
}

export type ApiErrorStatus = 400 | 401 | 403 | 429 | 500 | 503 | 529;

/** The request is answered with an API error, shaped as the real API shapes it. */
export interface HttpErrorFault {
  readonly status: ApiErrorStatus;
  /** Sent as the `retry-after` header when set. */
  readonly retryAfterSeconds?: number;
  readonly message?: string;
}

/** The request is accepted and never answered, until the client aborts or the simulator closes. */
export interface HangFault {
  readonly hang: true;
}

/** The socket is destroyed without any response. */
export interface DropConnectionFault {
  readonly dropConnection: true;
}

export type Fault = HttpErrorFault | HangFault | DropConnectionFault;

export interface PolicyContext {
  /** 0-based count of earlier requests this policy was asked about (faulted requests don't count). */
  readonly requestIndex: number;
}

export type Policy = (request: MessagesRequest, ctx: PolicyContext) => Reply | Fault;

export type RequestOutcome = 'pending' | 'reply' | 'error' | 'hang' | 'dropped';

export interface RecordedRequest {
  readonly method: string;
  readonly path: string;
  /** Which API's door the request came through (see providers.ts); null for a path none serves. */
  readonly provider: 'anthropic' | 'bedrock' | 'vertex' | null;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  /** The parsed JSON body, or the raw text when it was not JSON. */
  readonly body: unknown;
  readonly stream: boolean;
  /** Mutated as the request is answered: the status stays null for hangs and dropped connections. */
  status: number | null;
  outcome: RequestOutcome;
  usage: Usage | null;
  /** The message of the error answered (outcome `error`), e.g. why a policy failed; else null. */
  errorMessage: string | null;
  /**
   * The context edits applied to the prompt before the policy read it (`applied_edits: []` when the
   * request asked for some and none applied); null when it asked for none or was refused.
   */
  contextManagement: { readonly applied_edits: readonly unknown[] } | null;
}

export function isReply(step: Reply | Fault): step is Reply {
  return 'kind' in step;
}
