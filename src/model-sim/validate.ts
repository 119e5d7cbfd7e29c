import type { MessagesRequest, Reply } from './types.js';

/**
 * Structural validation of a Messages API request body, strict where an agent is likely to get the
 * conversation wrong: role order, tool_use/tool_result pairing, empty text, malformed tools, image
 * blocks (media type, base64, size). Other block types are accepted unchecked. Messages mimic the API's
 * (`messages.3.content.0: ...`). Returns the first violation, or null for a valid body.
 */
export function findRequestViolation(body: unknown): string | null {
  if (!isRecord(body)) return 'request body must be a JSON object';
  if (typeof body['model'] !== 'string' || body['model'] === '') return 'model: Field required';
  const maxTokens = body['max_tokens'];
  if (typeof maxTokens !== 'number' || !Number.isInteger(maxTokens) || maxTokens < 1) {
    return 'max_tokens: must be a positive integer';
  }
  if (body['stream'] !== undefined && typeof body['stream'] !== 'boolean') return 'stream: must be a boolean';
  return checkSystem(body['system']) ?? checkTools(body['tools']) ?? checkMessages(body['messages']);
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function checkSystem(system: unknown): string | null {
  if (system === undefined || typeof system === 'string') return null;
  if (!Array.isArray(system)) return 'system: Input should be a valid string or list of text blocks';
  return firstOf(system, (block, i) => checkTextBlock(block, `system.${i}`));
}

function checkTools(tools: unknown): string | null {
  if (tools === undefined) return null;
  if (!Array.isArray(tools)) return 'tools: Input should be a valid list';
  const names = new Set<string>();
  return firstOf(tools, (tool, i) => {
    if (!isRecord(tool)) return `tools.${i}: Input should be an object`;
    const name = tool['name'];
    if (typeof name !== 'string' || !/^[a-zA-Z0-9_-]{1,128}$/.test(name)) {
      return `tools.${i}.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'`;
    }
    if (names.has(name)) return 'tools: Tool names must be unique.';
    names.add(name);
    const type = tool['type'];
    const isCustom = type === undefined || type === 'custom';
    // Anthropic-defined tools are declared by type and the one name that type takes, no schema.
    if (!isCustom) return checkDefinedTool(tool, `tools.${i}`);
    const schema = tool['input_schema'];
    if (!isRecord(schema) || schema['type'] !== 'object') {
      return `tools.${i}.input_schema: Input should be a JSON schema with type 'object'`;
    }
    return null;
  });
}

/** Anthropic-defined tool types and the name each must have (client tools only). */
const DEFINED_TOOLS: Readonly<Record<string, string>> = {
  text_editor_20250124: 'str_replace_editor',
  text_editor_20250429: 'str_replace_based_edit_tool',
  text_editor_20250728: 'str_replace_based_edit_tool',
  bash_20241022: 'bash',
  bash_20250124: 'bash',
};

function checkDefinedTool(tool: Record<string, unknown>, path: string): string | null {
  const type = tool['type'];
  const expected = typeof type === 'string' ? DEFINED_TOOLS[type] : undefined;
  if (expected === undefined) {
    return `${path}: Input tag '${String(type)}' found using 'type' does not match any of the expected tags: ${Object.keys(DEFINED_TOOLS).join(', ')}, custom`;
  }
  if (tool['name'] !== expected) return `${path}.name: Input should be '${expected}'`;
  const allowed = new Set([
    'type',
    'name',
    'cache_control',
    ...(type === 'text_editor_20250728' ? ['max_characters'] : []),
  ]);
  const extra = Object.keys(tool).find((k) => !allowed.has(k));
  if (extra !== undefined) return `${path}.${extra}: Extra inputs are not permitted`;
  const max = tool['max_characters'];
  if (max !== undefined && max !== null && (typeof max !== 'number' || !Number.isInteger(max) || max < 1)) {
    return `${path}.max_characters: Input should be greater than or equal to 1`;
  }
  return null;
}

function checkMessages(messages: unknown): string | null {
  if (!Array.isArray(messages) || messages.length === 0) return 'messages: at least one message is required';
  let previousToolUseIds: string[] = [];
  for (const [i, message] of messages.entries()) {
    if (!isRecord(message)) return `messages.${i}: Input should be an object`;
    const role = message['role'];
    if (role !== 'user' && role !== 'assistant')
      return `messages.${i}.role: Input should be 'user' or 'assistant'`;
    const expected = i % 2 === 0 ? 'user' : 'assistant';
    if (role !== expected) {
      return i === 0
        ? 'messages: first message must use the "user" role'
        : `messages: roles must alternate between "user" and "assistant", but found multiple "${role}" roles in a row`;
    }
    const blocks = contentBlocks(message['content'], `messages.${i}`);
    if (typeof blocks === 'string') return blocks;
    const blockError = firstOf(blocks, (block, j) => checkBlock(block, role, `messages.${i}.content.${j}`));
    if (blockError !== null) return blockError;

    const resultIds = idsOf(blocks, 'tool_result', 'tool_use_id');
    const unexpected = resultIds.filter((id) => !previousToolUseIds.includes(id));
    if (unexpected.length > 0) {
      return `messages.${i}.content: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${unexpected.join(', ')}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`;
    }
    const unanswered = previousToolUseIds.filter((id) => !resultIds.includes(id));
    if (unanswered.length > 0) {
      return `messages.${i - 1}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${unanswered.join(', ')}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`;
    }
    previousToolUseIds = idsOf(blocks, 'tool_use', 'id');
    if (new Set(previousToolUseIds).size !== previousToolUseIds.length) {
      return `messages.${i}.content: \`tool_use\` ids must be unique`;
    }
  }
  if (previousToolUseIds.length > 0) {
    return `messages.${messages.length - 1}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${previousToolUseIds.join(', ')}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`;
  }
  return null;
}

function contentBlocks(content: unknown, path: string): unknown[] | string {
  if (typeof content === 'string') {
    return content === '' ? `${path}.content: text content must be non-empty` : [];
  }
  if (!Array.isArray(content)) return `${path}.content: Input should be a valid string or list of blocks`;
  if (content.length === 0) return `${path}.content: at least one content block is required`;
  return content as unknown[];
}

function checkBlock(block: unknown, role: 'user' | 'assistant', path: string): string | null {
  if (!isRecord(block) || typeof block['type'] !== 'string')
    return `${path}: block must be an object with a type`;
  switch (block['type']) {
    case 'text':
      return checkTextBlock(block, path);
    case 'tool_use':
      if (role !== 'assistant') return `${path}: tool_use blocks can only appear in assistant messages`;
      if (typeof block['id'] !== 'string' || typeof block['name'] !== 'string' || !isRecord(block['input'])) {
        return `${path}: tool_use blocks need a string id, a string name and an object input`;
      }
      return null;
    case 'tool_result': {
      if (role !== 'user') return `${path}: tool_result blocks can only appear in user messages`;
      if (typeof block['tool_use_id'] !== 'string') return `${path}.tool_use_id: Field required`;
      const content = block['content'];
      if (content !== undefined && typeof content !== 'string' && !Array.isArray(content)) {
        return `${path}.content: Input should be a valid string or list of blocks`;
      }
      if (block['is_error'] !== undefined && typeof block['is_error'] !== 'boolean') {
        return `${path}.is_error: Input should be a valid boolean`;
      }
      return null;
    }
    case 'image':
      if (role !== 'user') return `${path}: image blocks can only appear in user messages`;
      return checkImageBlock(block, path);
    case 'thinking':
    case 'redacted_thinking':
      if (role !== 'assistant')
        return `${path}: ${block['type']} blocks can only appear in assistant messages`;
      return null;
    default:
      return null;
  }
}

/** The media types the API takes for base64 image blocks. */
export const IMAGE_MEDIA_TYPES = ['image/jpeg', 'image/png', 'image/gif', 'image/webp'];
/** The API's limit on one image's base64 data. */
export const MAX_IMAGE_BASE64_BYTES = 5 * 1024 * 1024;

/** An image block as the API checks it: a base64 (or URL) source, a known media type, the size cap. */
function checkImageBlock(block: Record<string, unknown>, path: string): string | null {
  const source = block['source'];
  if (!isRecord(source)) return `${path}.source: Field required`;
  if (source['type'] === 'url') {
    return typeof source['url'] === 'string' ? null : `${path}.source.url: Field required`;
  }
  if (source['type'] !== 'base64') return `${path}.source.type: Input should be 'base64' or 'url'`;
  const mediaType = source['media_type'];
  if (typeof mediaType !== 'string' || !IMAGE_MEDIA_TYPES.includes(mediaType)) {
    return `${path}.source.media_type: Input should be ${IMAGE_MEDIA_TYPES.map((t) => `'${t}'`).join(', ')}`;
  }
  const data = source['data'];
  if (typeof data !== 'string' || data === '') return `${path}.source.data: Field required`;
  if (data.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(data)) {
    return `${path}.source.data: The image data is not valid base64`;
  }
  if (data.length > MAX_IMAGE_BASE64_BYTES) {
    return `${path}.source: image exceeds 5 MB maximum: ${data.length} bytes > ${MAX_IMAGE_BASE64_BYTES} bytes`;
  }
  return null;
}

function checkTextBlock(block: unknown, path: string): string | null {
  if (!isRecord(block) || block['type'] !== 'text') return `${path}: expected a text block`;
  const text = block['text'];
  if (typeof text !== 'string') return `${path}.text: Field required`;
  if (text === '') return `${path}: text content blocks must be non-empty`;
  return null;
}

function idsOf(blocks: unknown[], type: string, key: string): string[] {
  return blocks.flatMap((b) =>
    isRecord(b) && b['type'] === type && typeof b[key] === 'string' ? [b[key]] : [],
  );
}

function firstOf(items: unknown[], check: (item: unknown, index: number) => string | null): string | null {
  for (const [i, item] of items.entries()) {
    const error = check(item, i);
    if (error !== null) return error;
  }
  return null;
}

/**
 * The reply with its tool calls named as the request declares the tools: a policy that calls the
 * harness's `editor` talks to a request that offers Anthropic's text editor instead through that
 * tool's name (the inputs are the same shape), as a model given that tool would call it.
 */
export function forTools(reply: Reply, request: MessagesRequest): Reply {
  const tools = (request.tools ?? []) as unknown[];
  const declared = (name: string): boolean => tools.some((t) => isRecord(t) && t['name'] === name);
  const editor = tools.find(
    (t) => isRecord(t) && typeof t['type'] === 'string' && t['type'].startsWith('text_editor_'),
  );
  if (declared('editor') || !isRecord(editor) || typeof editor['name'] !== 'string') return reply;
  const name = editor['name'];
  if (!reply.content.some((b) => b.type === 'tool_use' && b.name === 'editor')) return reply;
  return {
    kind: 'reply',
    stopReason: reply.stopReason,
    content: reply.content.map((b) => (b.type === 'tool_use' && b.name === 'editor' ? { ...b, name } : b)),
  };
}
