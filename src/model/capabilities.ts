import type { ModelSetup } from '../events/schema.js';

/** Anthropic-defined client tools: the harness runs them in the sandbox as it runs its own. */
export const TEXT_EDITOR_TOOL = {
  type: 'text_editor_20250728',
  name: 'str_replace_based_edit_tool',
} as const;
export const BASH_TOOL = { type: 'bash_20250124', name: 'bash' } as const;

/** Beta header that lets a budget-thinking model think between tool calls (interleaved thinking). */
export const INTERLEAVED_THINKING_BETA = 'interleaved-thinking-2025-05-14';

/**
 * Beta header for server-side context management (`context_management` in the request,
 * `context_management.applied_edits` in the response): docs/context.md.
 */
export const CONTEXT_MANAGEMENT_BETA = 'context-management-2025-06-27';

/** The API's floor for `thinking.budget_tokens`. */
export const MIN_THINKING_BUDGET = 1024;

/** Thinking budget when ISSUE_AGENT_THINKING_BUDGET is unset, for models that think. */
export const DEFAULT_THINKING_BUDGET = 8192;

export interface ModelCapabilities {
  /** The model is trained on text_editor_20250728 and bash_20250124. */
  readonly nativeTools: boolean;
  /** Extended thinking with `budget_tokens`, and interleaved thinking with the beta header. */
  readonly thinking: boolean;
  /** Most output tokens one response may have (max_tokens), thinking included. */
  readonly maxOutputTokens: number;
}

const NONE: ModelCapabilities = {
  nativeTools: false,
  thinking: false,
  maxOutputTokens: Number.MAX_SAFE_INTEGER,
};

/**
 * What the Claude models this harness knows support, by name prefix (the longest match wins, so
 * dated snapshots find their family). A model not listed (a simulator's, a future one) gets the
 * schema tools and no thinking unless the settings ask for them. Claude 4.7 and later take only
 * adaptive thinking (`budget_tokens` is a 400 there), so they are not listed as budget thinkers.
 */
const TABLE: Readonly<Record<string, ModelCapabilities>> = {
  'claude-sonnet-4': { nativeTools: true, thinking: true, maxOutputTokens: 64_000 },
  'claude-opus-4': { nativeTools: true, thinking: true, maxOutputTokens: 32_000 },
  'claude-opus-4-5': { nativeTools: true, thinking: true, maxOutputTokens: 64_000 },
  'claude-opus-4-6': { nativeTools: true, thinking: true, maxOutputTokens: 128_000 },
  'claude-haiku-4-5': { nativeTools: true, thinking: true, maxOutputTokens: 64_000 },
};

export function capabilitiesOf(model: string): ModelCapabilities {
  let best: [string, ModelCapabilities] | null = null;
  for (const [key, caps] of Object.entries(TABLE)) {
    if (model.startsWith(key) && (best === null || key.length > best[0].length)) best = [key, caps];
  }
  return best?.[1] ?? NONE;
}

/** What the settings ask for; null: the model's default. */
export interface ModelChoice {
  readonly tools: 'native' | 'schema' | null;
  readonly thinkingBudget: number | null;
}

export class ModelSetupError extends Error {
  override readonly name = 'ModelSetupError';
}

/**
 * The tools and thinking a run of `model` uses: the settings' choice, else the model's default
 * (native tools and thinking where the table says it has them). A choice the API would refuse (a
 * budget under 1024, or one that leaves no room for the answer under the model's output cap) is an
 * error here, before any run starts. `maxOutputTokens`: the answer's own room (Limits); thinking
 * comes on top of it.
 */
export function resolveModelSetup(model: string, choice: ModelChoice, maxOutputTokens: number): ModelSetup {
  const caps = capabilitiesOf(model);
  const tools = choice.tools ?? (caps.nativeTools ? 'native' : 'schema');
  const thinkingBudget = choice.thinkingBudget ?? (caps.thinking ? DEFAULT_THINKING_BUDGET : 0);
  if (thinkingBudget !== 0 && thinkingBudget < MIN_THINKING_BUDGET) {
    throw new ModelSetupError(
      `ISSUE_AGENT_THINKING_BUDGET must be 0 (off) or at least ${MIN_THINKING_BUDGET} tokens, got ${thinkingBudget}`,
    );
  }
  if (thinkingBudget + maxOutputTokens > caps.maxOutputTokens) {
    throw new ModelSetupError(
      `ISSUE_AGENT_THINKING_BUDGET ${thinkingBudget} plus the answer's ${maxOutputTokens} tokens passes ${model}'s output limit (${caps.maxOutputTokens})`,
    );
  }
  return { tools, thinkingBudget };
}
