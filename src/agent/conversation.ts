import type { AgentEvent, BaseState, ContentBlock, EventOf } from '../events/schema.js';
import type {
  ConversationMessage,
  ImageBlockParam,
  ModelRequest,
  ToolSpec,
  UserBlock,
} from '../model/model.js';
import { answerMessage, taskMessage } from './prompt.js';
import { guidanceText } from './instructions.js';
import { imageTokens } from './task-images.js';

/**
 * The model's messages are a projection of the event log: the task, the latest condensation summary,
 * then every turn after the condensed part. Rebuilding from the log (rather than keeping a message
 * list) is what makes resume exact: a resumed run sends byte-for-byte the request it would have sent.
 */
export function buildMessages(
  base: BaseState,
  events: readonly AgentEvent[],
  /** The task's images (task-images.ts): after the task text, before any condensation summary. */
  images: readonly ImageBlockParam[] = [],
): ConversationMessage[] {
  let baseline: EventOf<'test_run'> | null = null;
  let condensation: EventOf<'condensation'> | null = null;
  for (const e of events) {
    if (e.kind === 'test_run' && e.phase === 'baseline') baseline = e;
    if (e.kind === 'condensation') condensation = e;
  }
  const first: UserBlock[] = [{ type: 'text', text: taskMessage(base, baseline) }, ...images];
  if (condensation !== null) first.push({ type: 'text', text: condensation.summary });
  // Instructions are never condensed away: those added before the condensed point stay up front.
  const instructionFiles = base.instructions?.files ?? [];
  const guidanceFor = (e: EventOf<'guidance_added'>): string =>
    guidanceText(
      instructionFiles.filter((f) => e.paths.includes(f.path)),
      'added',
    );
  if (condensation !== null) {
    for (const e of events) {
      if (e.kind === 'guidance_added' && e.id <= condensation.throughEventId)
        first.push({ type: 'text', text: guidanceFor(e) });
    }
  }
  const messages: ConversationMessage[] = [];
  let user: UserBlock[] = first;
  const results: UserBlock[] = [];
  const flush = (): void => {
    const content = [...results, ...user];
    if (content.length > 0) messages.push({ role: 'user', content });
    results.length = 0;
    user = [];
  };
  const from = condensation?.throughEventId ?? 0;
  for (const e of events) {
    if (e.id <= from) continue;
    if ('parent' in e && e.parent !== undefined) continue;
    if (e.kind === 'model_response') {
      flush();
      messages.push(assistantMessage(e));
    } else if (e.kind === 'observation') {
      results.push(toolResult(e));
    } else if (e.kind === 'warning') {
      user.push({ type: 'text', text: `[harness] ${e.message}` });
    } else if (e.kind === 'guidance_added') {
      user.push({ type: 'text', text: guidanceFor(e) });
    } else if (e.kind === 'round_started') {
      user.push({ type: 'text', text: answerMessage(e) });
    }
  }
  flush();
  return messages;
}

/**
 * A conservative token estimate (3 characters per token; real tokenizers average about 4 on code and
 * English), so a request judged under budget here is under budget at the API. An image counts what
 * the API's formula says for its size (imageTokens), never its base64 text.
 */
export function estimateTokens(request: Pick<ModelRequest, 'system' | 'tools' | 'messages'>): number {
  const fixed = request.system.length + JSON.stringify(request.tools).length;
  const { messages } = request;
  if (!messages.some(hasImage)) return Math.ceil((fixed + JSON.stringify(messages).length) / 3);
  let chars = fixed;
  let images = 0;
  for (const m of messages) {
    if (m.role === 'user' && hasImage(m)) {
      chars += JSON.stringify({ ...m, content: m.content.filter((b) => b.type !== 'image') }).length;
      for (const b of m.content) if (b.type === 'image') images += imageTokens(b);
    } else {
      chars += JSON.stringify(m).length;
    }
  }
  return Math.ceil(chars / 3) + images;
}

function hasImage(m: ConversationMessage): boolean {
  return m.role === 'user' && m.content.some((b) => b.type === 'image');
}

export function toolsTokens(tools: readonly ToolSpec[]): number {
  return Math.ceil(JSON.stringify(tools).length / 3);
}

/** A model turn as the assistant message a later request repeats. */
export function assistantMessage(e: EventOf<'model_response'>): ConversationMessage {
  const content: ContentBlock[] = e.content.length > 0 ? e.content : [{ type: 'text', text: '(no reply)' }];
  return { role: 'assistant', content };
}

/** A tool's observation as the tool_result block the model gets. */
export function toolResult(e: EventOf<'observation'>): UserBlock {
  return {
    type: 'tool_result',
    tool_use_id: e.toolUseId,
    content: e.content,
    ...(e.isError ? { is_error: true } : {}),
  };
}
