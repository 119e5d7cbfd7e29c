import type { Usage } from '../events/schema.js';

/** US dollars per million tokens. */
export interface ModelPrice {
  readonly input: number;
  readonly output: number;
  readonly cacheWrite: number;
  readonly cacheRead: number;
}

export type PriceTable = Readonly<Record<string, ModelPrice>>;

const sonnet: ModelPrice = { input: 3, output: 15, cacheWrite: 3.75, cacheRead: 0.3 };
const opus: ModelPrice = { input: 5, output: 25, cacheWrite: 6.25, cacheRead: 0.5 };
const haiku: ModelPrice = { input: 1, output: 5, cacheWrite: 1.25, cacheRead: 0.1 };

/**
 * Published list prices for the models we test with. Keys match a model name exactly or as a prefix
 * (so dated snapshots such as claude-sonnet-4-5-20250929 find their family). Override or extend with
 * ISSUE_AGENT_PRICES (JSON of the same shape).
 */
export const DEFAULT_PRICES: PriceTable = {
  'claude-sonnet-4': sonnet,
  'claude-opus-4-5': opus,
  'claude-opus-4-6': opus,
  'claude-haiku-4-5': haiku,
};

export function findPrice(table: PriceTable, model: string): ModelPrice | null {
  const exact = table[model];
  if (exact !== undefined) return exact;
  let best: [string, ModelPrice] | null = null;
  for (const [key, price] of Object.entries(table)) {
    if (model.startsWith(key) && (best === null || key.length > best[0].length)) best = [key, price];
  }
  return best?.[1] ?? null;
}

export function costUsd(price: ModelPrice | null, usage: Usage): number {
  if (price === null) return 0;
  return (
    (usage.inputTokens * price.input +
      usage.outputTokens * price.output +
      usage.cacheWriteTokens * price.cacheWrite +
      usage.cacheReadTokens * price.cacheRead) /
    1_000_000
  );
}

/**
 * Bedrock's and Vertex's regional endpoints bill Claude Sonnet 4.5, Haiku 4.5, Opus 4.5 and later
 * models 10% over list; their global endpoints (Vertex's `global` region, Bedrock's `global.`
 * inference profiles) and Anthropic's API bill list. Older models keep list prices everywhere.
 */
export const REGIONAL_PREMIUM = 1.1;
const REGIONAL_FAMILIES = [
  'claude-sonnet-4-5',
  'claude-sonnet-4-6',
  'claude-opus-4-5',
  'claude-opus-4-6',
  'claude-haiku-4-5',
];

/** The default table for a provider's endpoint: list prices, or list plus the regional premium. */
export function providerPrices(regional: boolean): PriceTable {
  if (!regional) return DEFAULT_PRICES;
  const table: Record<string, ModelPrice> = { ...DEFAULT_PRICES };
  for (const family of REGIONAL_FAMILIES) {
    const list = findPrice(DEFAULT_PRICES, family);
    if (list === null) continue;
    table[family] = {
      input: list.input * REGIONAL_PREMIUM,
      output: list.output * REGIONAL_PREMIUM,
      cacheWrite: list.cacheWrite * REGIONAL_PREMIUM,
      cacheRead: list.cacheRead * REGIONAL_PREMIUM,
    };
  }
  return table;
}
