import type { ContextEdit } from './schema.js';

/**
 * What the API cleared from a turn's prompt (server-side context management: a turn's
 * `contextEdits`, or a `context_edited` event), in one sentence for the trajectory, the CLI and the
 * run view.
 */
export function contextEditLine(edits: readonly ContextEdit[]): string {
  const toolUses = edits.reduce((n, e) => n + (e.clearedToolUses ?? 0), 0);
  const tokens = edits.reduce((n, e) => n + e.clearedInputTokens, 0);
  return `The API cleared ${toolUses} old tool result${toolUses === 1 ? '' : 's'} (${tokens} input tokens) from what the model read; the log keeps them whole.`;
}
