import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { MessagesRequest, Reply, ReplyBlock } from './types.js';
import { isRecord } from './validate.js';

/*
 * Thinking as the API does it, for the simulator: the request's thinking config is checked as the
 * API checks it, replies carry thinking blocks the simulator signs, and a continued conversation
 * must send them back unchanged (a changed or missing signature is a 400, as it is at the API).
 */

const KEY = 'model-simulator-thinking-signature';
const INTERLEAVED = 'interleaved-thinking-2025-05-14';

/** The signature the simulator gives a thinking block's text. */
export function signThinking(text: string): string {
  return createHmac('sha256', KEY).update(`thinking\0${text}`).digest('base64');
}

/** Opaque data of a redacted thinking block the simulator made. */
export function redactedData(text: string): string {
  const mac = createHmac('sha256', KEY).update(`redacted\0${text}`).digest('base64');
  return Buffer.from(JSON.stringify({ text, mac })).toString('base64');
}

function validRedacted(data: string): boolean {
  try {
    const parsed: unknown = JSON.parse(Buffer.from(data, 'base64').toString('utf8'));
    if (!isRecord(parsed) || typeof parsed['text'] !== 'string' || typeof parsed['mac'] !== 'string')
      return false;
    return sameText(redactedData(parsed['text']), data);
  } catch {
    return false;
  }
}

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** The request's thinking budget, or null when thinking is off. */
export function thinkingBudget(request: MessagesRequest): number | null {
  const t = request.thinking;
  return t?.type === 'enabled' ? t.budget_tokens : null;
}

function betas(headers: IncomingHttpHeaders): string[] {
  const raw = headers['anthropic-beta'];
  const text = Array.isArray(raw) ? raw.join(',') : (raw ?? '');
  return text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/**
 * What the API would refuse about thinking in `body` (already structurally valid), or null: the
 * config (type, budget ≥ 1024 and under max_tokens unless interleaved), temperature and top_k with
 * thinking, a forcing tool_choice with thinking, and the assistant's thinking blocks: each one's
 * signature must be the one the simulator gave it, and with thinking on, the assistant message a
 * tool-result turn continues must start with its thinking.
 */
export function findThinkingViolation(
  body: Record<string, unknown>,
  headers: IncomingHttpHeaders,
): string | null {
  const config = body['thinking'];
  let enabled = false;
  if (config !== undefined) {
    if (!isRecord(config)) return 'thinking: Input should be an object';
    const type = config['type'];
    if (type === 'enabled') {
      enabled = true;
      const budget = config['budget_tokens'];
      if (typeof budget !== 'number' || !Number.isInteger(budget))
        return 'thinking.enabled.budget_tokens: Field required';
      if (budget < 1024)
        return 'thinking.enabled.budget_tokens: Input should be greater than or equal to 1024';
      const maxTokens = body['max_tokens'] as number;
      if (budget >= maxTokens && !betas(headers).includes(INTERLEAVED))
        return '`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size';
    } else if (type === 'adaptive') {
      enabled = true;
    } else if (type !== 'disabled') {
      return `thinking: Input tag '${String(type)}' found using 'type' does not match any of the expected tags: 'enabled', 'disabled', 'adaptive'`;
    }
  }
  if (enabled) {
    const temperature = body['temperature'];
    if (temperature !== undefined && temperature !== 1)
      return '`temperature` may only be set to 1 when thinking is enabled. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#important-considerations-when-using-extended-thinking';
    if (body['top_k'] !== undefined) return '`top_k` must be unset when thinking is enabled.';
    const choice = body['tool_choice'];
    if (isRecord(choice) && (choice['type'] === 'any' || choice['type'] === 'tool'))
      return 'Thinking may not be enabled when tool_choice forces tool use.';
  }
  return checkThinkingBlocks(body['messages'] as unknown[], enabled);
}

function checkThinkingBlocks(messages: unknown[], enabled: boolean): string | null {
  for (const [i, m] of messages.entries()) {
    if (!isRecord(m) || m['role'] !== 'assistant' || !Array.isArray(m['content'])) continue;
    for (const [j, b] of (m['content'] as unknown[]).entries()) {
      if (!isRecord(b)) continue;
      const path = `messages.${i}.content.${j}`;
      if (b['type'] === 'thinking') {
        const text = b['thinking'];
        const signature = b['signature'];
        if (typeof text !== 'string') return `${path}.thinking: Field required`;
        if (typeof signature !== 'string' || signature === '') return `${path}.signature: Field required`;
        if (!sameText(signThinking(text), signature))
          return `${path}: Invalid \`signature\` in \`thinking\` block`;
      } else if (b['type'] === 'redacted_thinking') {
        if (typeof b['data'] !== 'string' || !validRedacted(b['data']))
          return `${path}: Invalid \`data\` in \`redacted_thinking\` block`;
      }
    }
  }
  if (!enabled) return null;
  // The turn a tool result continues: its last assistant message must start with its thinking.
  const last = messages.at(-1);
  const assistant = messages.at(-2);
  const continues =
    isRecord(last) &&
    Array.isArray(last['content']) &&
    (last['content'] as unknown[]).some((b) => isRecord(b) && b['type'] === 'tool_result');
  if (!continues || !isRecord(assistant) || !Array.isArray(assistant['content'])) return null;
  const first = (assistant['content'] as unknown[])[0];
  const type = isRecord(first) ? first['type'] : undefined;
  if (type === 'thinking' || type === 'redacted_thinking') return null;
  return `messages.${messages.length - 2}.content.0.type: Expected \`thinking\` or \`redacted_thinking\`, but found \`${String(type)}\`. When \`thinking\` is enabled, a final \`assistant\` message must start with a thinking block (preceeding the lastmost set of \`tool_use\` and \`tool_result\` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable \`thinking\`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking`;
}

/**
 * The reply as the model gives it under the request's thinking config: with thinking on, a signed
 * thinking block first (unless the policy wrote its own), derived from what the reply does so a
 * stateless policy gives the same bytes on a resumed conversation; with it off, no thinking blocks.
 */
export function withThinking(reply: Reply, request: MessagesRequest): Reply {
  const on = thinkingBudget(request) !== null || request.thinking?.type === 'adaptive';
  const thinks = (b: ReplyBlock): boolean => b.type === 'thinking' || b.type === 'redacted_thinking';
  if (!on) {
    return reply.content.some(thinks)
      ? { kind: 'reply', stopReason: reply.stopReason, content: reply.content.filter((b) => !thinks(b)) }
      : reply;
  }
  if (reply.content.some(thinks)) return reply;
  const plan = reply.content
    .map((b) => (b.type === 'text' ? b.text : b.type === 'tool_use' ? `call ${b.name}` : ''))
    .filter((s) => s !== '')
    .join('; ');
  const text = `Thinking about the next step: ${plan === '' ? 'nothing more to do' : plan}.`;
  return {
    kind: 'reply',
    stopReason: reply.stopReason,
    content: [{ type: 'thinking', thinking: text, signature: signThinking(text) }, ...reply.content],
  };
}
