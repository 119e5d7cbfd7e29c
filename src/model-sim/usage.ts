import { createHash } from 'node:crypto';
import type { MessagesRequest } from './types.js';
import { isRecord } from './validate.js';

/**
 * The simulator's tokenizer: one token per 4 bytes of UTF-8, rounded up. A request's input size is
 * `countTokens(JSON.stringify({ system, tools, messages }))`; a reply's output size is
 * `countTokens(JSON.stringify(content))` of the content blocks as sent on the wire.
 */
export function countTokens(text: string): number {
  return Math.ceil(Buffer.byteLength(text, 'utf8') / 4);
}

export interface InputUsage {
  readonly input_tokens: number;
  readonly cache_creation_input_tokens: number;
  readonly cache_read_input_tokens: number;
}

/** How many blocks before a breakpoint the API looks for an earlier cache hit. */
const LOOKBACK_BLOCKS = 20;

/**
 * Prompt caching as the API does it, on a cache-order sequence of blocks (tools, then system, then
 * each message's content blocks). A `cache_control` marker makes its block a breakpoint; the
 * request's top-level `cache_control` marks the last block. A prefix is identified by a hash chain
 * over the blocks (with their cache_control markers removed, and the model), so moving a breakpoint
 * does not change the prefix it ends. Every breakpoint's prefix is written; the longest earlier-written
 * prefix ending at or up to LOOKBACK_BLOCKS before a breakpoint is read. There is no minimum cacheable
 * length and entries never expire.
 * Invariant: input_tokens + cache_creation_input_tokens + cache_read_input_tokens = the request's total.
 */
export class PromptCache {
  private readonly written = new Set<string>();

  account(request: MessagesRequest): InputUsage {
    const { system, tools, messages } = request;
    const total = countTokens(JSON.stringify({ system, tools, messages }));
    const blocks = cacheOrderBlocks(request);
    const hashes: string[] = [];
    const prefixTokens: number[] = [];
    let hash = createHash('sha256').update(request.model).digest('hex');
    let bytes = 0;
    for (const block of blocks) {
      hash = createHash('sha256').update(hash).update('\0').update(block.key).digest('hex');
      bytes += Buffer.byteLength(block.key, 'utf8');
      hashes.push(hash);
      prefixTokens.push(Math.min(total, Math.ceil(bytes / 4)));
    }
    const breakpoints = blocks.flatMap((block, i) => (block.breakpoint ? [i] : []));
    if (request.cache_control && blocks.length > 0) breakpoints.push(blocks.length - 1);
    const lastBreakpoint = breakpoints.at(-1);
    if (lastBreakpoint === undefined) {
      return { input_tokens: total, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
    }

    let read = 0;
    for (const breakpoint of breakpoints) {
      for (let i = breakpoint; i >= 0 && i > breakpoint - LOOKBACK_BLOCKS; i--) {
        if (this.written.has(hashes[i] ?? '')) {
          read = Math.max(read, prefixTokens[i] ?? 0);
          break;
        }
      }
    }
    const creation = Math.max(0, (prefixTokens[lastBreakpoint] ?? 0) - read);
    for (const breakpoint of breakpoints) this.written.add(hashes[breakpoint] ?? '');
    return {
      input_tokens: total - read - creation,
      cache_creation_input_tokens: creation,
      cache_read_input_tokens: read,
    };
  }
}

interface CacheBlock {
  /** The block's canonical text: JSON without its cache_control marker. */
  readonly key: string;
  readonly breakpoint: boolean;
}

function cacheOrderBlocks(request: MessagesRequest): CacheBlock[] {
  const blocks: CacheBlock[] = [];
  const push = (value: unknown, tag: string): void => {
    if (!isRecord(value)) {
      blocks.push({ key: `${tag}${JSON.stringify(value)}`, breakpoint: false });
      return;
    }
    const { cache_control: marker, ...rest } = value;
    blocks.push({ key: `${tag}${JSON.stringify(rest)}`, breakpoint: isRecord(marker) });
  };
  for (const tool of request.tools ?? []) push(tool, 'tool:');
  if (typeof request.system === 'string') push(request.system, 'system:');
  else for (const block of request.system ?? []) push(block, 'system:');
  for (const [i, message] of request.messages.entries()) {
    const content = typeof message.content === 'string' ? [message.content] : message.content;
    for (const [j, block] of content.entries()) push(block, j === 0 ? `${i}:${message.role}:` : '');
  }
  return blocks;
}
