import type { IncomingHttpHeaders } from 'node:http';
import type { MessagesRequest } from './types.js';
import { countTokens } from './usage.js';
import { isRecord } from './validate.js';

/*
 * Server-side context management as the API does it (beta `context-management-2025-06-27`,
 * docs.claude.com "Context editing"): the request's `context_management.edits` are checked as the
 * API checks them, `clear_tool_uses_20250919` is applied to the prompt before the policy (the
 * model) reads it and before its input tokens are counted, and the response says what was applied
 * in `context_management.applied_edits` (the final message_delta when streaming).
 * `clear_thinking_20251015` is accepted and checked but never applied (the simulator keeps every
 * thinking block), so it is never reported.
 */

export const CONTEXT_MANAGEMENT_BETA = 'context-management-2025-06-27';

const CLEAR_TOOL_USES = 'clear_tool_uses_20250919';
const CLEAR_THINKING = 'clear_thinking_20251015';

/** What a cleared tool result says instead (the API's own text is not documented; this is ours). */
export const CLEARED_TOOL_RESULT = '[This tool result was cleared by context management to save context.]';

/** The API's defaults for `clear_tool_uses_20250919`. */
const DEFAULT_TRIGGER_TOKENS = 100_000;
const DEFAULT_KEEP = 3;

export interface AppliedEdit {
  readonly type: typeof CLEAR_TOOL_USES;
  readonly cleared_tool_uses: number;
  readonly cleared_input_tokens: number;
}

export interface ContextManagementResponse {
  readonly applied_edits: AppliedEdit[];
}

function betas(headers: IncomingHttpHeaders): string[] {
  const raw = headers['anthropic-beta'];
  const text = Array.isArray(raw) ? raw.join(',') : (raw ?? '');
  return text.split(',').map((s) => s.trim());
}

/** What the API would refuse about `context_management` in `body`, or null. */
export function findContextManagementViolation(
  body: Record<string, unknown>,
  headers: IncomingHttpHeaders,
): string | null {
  const config = body['context_management'];
  if (config === undefined || config === null) return null;
  // Without the beta the field is not part of the request schema.
  if (!betas(headers).includes(CONTEXT_MANAGEMENT_BETA))
    return 'context_management: Extra inputs are not permitted';
  if (!isRecord(config)) return 'context_management: Input should be a valid dictionary or object';
  const extra = Object.keys(config).find((k) => k !== 'edits');
  if (extra !== undefined) return `context_management.${extra}: Extra inputs are not permitted`;
  const edits = config['edits'];
  if (edits === undefined || edits === null) return null;
  if (!Array.isArray(edits)) return 'context_management.edits: Input should be a valid list';
  for (const [i, edit] of (edits as unknown[]).entries()) {
    const path = `context_management.edits.${i}`;
    if (!isRecord(edit)) return `${path}: Input should be a valid dictionary or object`;
    const type = edit['type'];
    if (type === CLEAR_TOOL_USES) {
      const problem = checkClearToolUses(edit, path);
      if (problem !== null) return problem;
    } else if (type === CLEAR_THINKING) {
      if (i !== 0) return `${path}: \`${CLEAR_THINKING}\` must be the first edit in \`edits\``;
      const problem = checkClearThinking(edit, path, body);
      if (problem !== null) return problem;
    } else {
      return `${path}: Input tag '${String(type)}' found using 'type' does not match any of the expected tags: '${CLEAR_TOOL_USES}', '${CLEAR_THINKING}'`;
    }
  }
  return null;
}

function checkCount(value: unknown, path: string, types: readonly string[], min: number): string | null {
  if (!isRecord(value)) return `${path}: Input should be a valid dictionary or object`;
  const type = value['type'];
  if (typeof type !== 'string' || !types.includes(type)) {
    return `${path}: Input tag '${String(type)}' found using 'type' does not match any of the expected tags: ${types.map((t) => `'${t}'`).join(', ')}`;
  }
  const n = value['value'];
  if (typeof n !== 'number' || !Number.isInteger(n)) return `${path}.value: Input should be a valid integer`;
  if (n < min) return `${path}.value: Input should be greater than or equal to ${min}`;
  const extra = Object.keys(value).find((k) => k !== 'type' && k !== 'value');
  return extra === undefined ? null : `${path}.${extra}: Extra inputs are not permitted`;
}

function checkClearToolUses(edit: Record<string, unknown>, path: string): string | null {
  const allowed = ['type', 'trigger', 'keep', 'clear_at_least', 'exclude_tools', 'clear_tool_inputs'];
  const extra = Object.keys(edit).find((k) => !allowed.includes(k));
  if (extra !== undefined) return `${path}.${extra}: Extra inputs are not permitted`;
  if (edit['trigger'] !== undefined) {
    const problem = checkCount(edit['trigger'], `${path}.trigger`, ['input_tokens', 'tool_uses'], 1);
    if (problem !== null) return problem;
  }
  if (edit['keep'] !== undefined) {
    const problem = checkCount(edit['keep'], `${path}.keep`, ['tool_uses'], 0);
    if (problem !== null) return problem;
  }
  const atLeast = edit['clear_at_least'];
  if (atLeast !== undefined && atLeast !== null) {
    const problem = checkCount(atLeast, `${path}.clear_at_least`, ['input_tokens'], 0);
    if (problem !== null) return problem;
  }
  const exclude = edit['exclude_tools'];
  if (exclude !== undefined && exclude !== null) {
    if (!Array.isArray(exclude) || !(exclude as unknown[]).every((t) => typeof t === 'string'))
      return `${path}.exclude_tools: Input should be a valid list of strings`;
  }
  const inputs = edit['clear_tool_inputs'];
  if (inputs !== undefined && inputs !== null && typeof inputs !== 'boolean') {
    if (!Array.isArray(inputs) || !(inputs as unknown[]).every((t) => typeof t === 'string'))
      return `${path}.clear_tool_inputs: Input should be a valid boolean or a list of strings`;
  }
  return null;
}

function checkClearThinking(
  edit: Record<string, unknown>,
  path: string,
  body: Record<string, unknown>,
): string | null {
  const extra = Object.keys(edit).find((k) => k !== 'type' && k !== 'keep');
  if (extra !== undefined) return `${path}.${extra}: Extra inputs are not permitted`;
  const thinking = body['thinking'];
  if (!isRecord(thinking) || (thinking['type'] !== 'enabled' && thinking['type'] !== 'adaptive'))
    return `${path}: \`${CLEAR_THINKING}\` requires \`thinking\` to be enabled`;
  const keep = edit['keep'];
  if (keep === undefined || keep === 'all') return null;
  if (isRecord(keep) && keep['type'] === 'all') return null;
  return checkCount(keep, `${path}.keep`, ['thinking_turns'], 1);
}

function inputTokens(request: MessagesRequest): number {
  const { system, tools, messages } = request;
  return countTokens(JSON.stringify({ system, tools, messages }));
}

interface ToolUseRef {
  readonly id: string;
  readonly name: string;
  readonly message: number;
  readonly block: number;
}

/**
 * The request as the model reads it after its context edits, and what was applied; `applied` is
 * null when the request asked for none (then the response carries no `context_management`).
 */
export function applyContextManagement(request: MessagesRequest): {
  request: MessagesRequest;
  applied: ContextManagementResponse | null;
} {
  const config = (request as { context_management?: { edits?: unknown[] | null } | null }).context_management;
  if (config === undefined || config === null) return { request, applied: null };
  let current = request;
  const applied: AppliedEdit[] = [];
  for (const edit of config.edits ?? []) {
    if (!isRecord(edit) || edit['type'] !== CLEAR_TOOL_USES) continue;
    const result = clearToolUses(current, edit);
    if (result !== null) {
      current = result.request;
      applied.push(result.edit);
    }
  }
  return { request: current, applied: { applied_edits: applied } };
}

function countOf(value: unknown, fallback: number): { type: string; value: number } {
  return isRecord(value) && typeof value['type'] === 'string' && typeof value['value'] === 'number'
    ? { type: value['type'], value: value['value'] }
    : { type: 'input_tokens', value: fallback };
}

/**
 * `clear_tool_uses_20250919`: once the prompt passes the trigger, the results of all but the newest
 * `keep` tool uses (oldest first, `exclude_tools` never) become a placeholder, and their inputs too
 * where `clear_tool_inputs` says so; not applied when it would free less than `clear_at_least`.
 */
function clearToolUses(
  request: MessagesRequest,
  edit: Record<string, unknown>,
): { request: MessagesRequest; edit: AppliedEdit } | null {
  const before = inputTokens(request);
  const exclude = new Set(Array.isArray(edit['exclude_tools']) ? (edit['exclude_tools'] as string[]) : []);
  const uses: ToolUseRef[] = [];
  for (const [m, message] of request.messages.entries()) {
    if (message.role !== 'assistant' || typeof message.content === 'string') continue;
    for (const [b, block] of message.content.entries()) {
      if (block.type === 'tool_use' && !exclude.has(block.name))
        uses.push({ id: block.id, name: block.name, message: m, block: b });
    }
  }
  const trigger = countOf(edit['trigger'], DEFAULT_TRIGGER_TOKENS);
  const reached = trigger.type === 'tool_uses' ? uses.length > trigger.value : before > trigger.value;
  if (!reached) return null;
  const keep = countOf(edit['keep'], DEFAULT_KEEP).value;
  const cleared = uses.slice(0, Math.max(0, uses.length - keep));
  if (cleared.length === 0) return null;
  const inputsRule = edit['clear_tool_inputs'];
  const clearInput = (name: string): boolean =>
    inputsRule === true || (Array.isArray(inputsRule) && (inputsRule as unknown[]).includes(name));
  const byId = new Map(cleared.map((u) => [u.id, u]));
  const messages = request.messages.map((message) => {
    if (typeof message.content === 'string') return message;
    const content = message.content.map((block) => {
      if (block.type === 'tool_result' && byId.has(block.tool_use_id))
        return { ...block, content: CLEARED_TOOL_RESULT };
      if (block.type === 'tool_use' && byId.has(block.id) && clearInput(block.name))
        return { ...block, input: {} };
      return block;
    });
    return { ...message, content } as typeof message;
  });
  const edited = { ...request, messages };
  const freed = before - inputTokens(edited);
  const atLeast = isRecord(edit['clear_at_least']) ? countOf(edit['clear_at_least'], 0).value : 0;
  if (freed <= 0 || freed < atLeast) return null;
  return {
    request: edited,
    edit: { type: CLEAR_TOOL_USES, cleared_tool_uses: cleared.length, cleared_input_tokens: freed },
  };
}
