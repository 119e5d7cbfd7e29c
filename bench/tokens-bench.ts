/**
 * `npm run bench -- --tokens`: what a long run is billed, weighted by price, with and without prompt
 * caching and condensation. The 200-step scripted run of the condenser's test (test/support/
 * long-run.ts: file views of 200 lines, test output of about 1,200 lines) against the model
 * simulator over loopback with the real SDK, the local sandbox and the default context budget
 * (150,000 tokens). The simulator counts tokens as 4 bytes each and caches as the API does (usage.ts);
 * dollars are the default model's list prices. Deterministic: the same numbers on every machine.
 */
import { reduceState } from '../src/events/reduce-state.js';
import type { Limits } from '../src/events/schema.js';
import { DEFAULT_MODEL } from '../src/config/agent-env.js';
import { DEFAULT_PRICES, findPrice } from '../src/model/pricing.js';
import { startHarness } from '../test/support/agent-harness.js';
import {
  costPerStep,
  LONG_RUN_TASK,
  LONG_RUN_TEST_COMMAND,
  longRunFiles,
  longRunPolicy,
} from '../test/support/long-run.js';

interface Variant {
  readonly name: string;
  readonly caching: boolean;
  /** Null: never condensed (a context budget no run reaches). */
  readonly condenser: Limits['condenser'] | null;
}

const VARIANTS: readonly Variant[] = [
  { name: 'neither (no caching, no condensation)', caching: false, condenser: null },
  { name: 'caching only', caching: true, condenser: null },
  { name: 'caching + condensation, one line per action', caching: true, condenser: 'lines' },
  { name: 'caching + condensation, model-written summary (default)', caching: true, condenser: 'summary' },
  {
    name: 'caching + server-side clearing of old tool results (condenser server)',
    caching: true,
    condenser: 'server',
  },
];

interface Result {
  readonly input: number;
  readonly output: number;
  readonly cacheWrite: number;
  readonly cacheRead: number;
  readonly usd: number;
  readonly condensations: number;
  readonly firstTen: number;
  readonly lastTen: number;
  readonly largestPrompt: number;
}

async function measure(v: Variant, steps: number): Promise<Result> {
  const h = await startHarness({
    policy: longRunPolicy(steps),
    task: LONG_RUN_TASK,
    files: longRunFiles(),
    testCommand: LONG_RUN_TEST_COMMAND,
    promptCaching: v.caching,
    limits: {
      maxSteps: steps + 20,
      maxTokens: 1e12,
      maxUsd: 1e9,
      ...(v.condenser === null ? { contextTokens: 1e9 } : { condenser: v.condenser }),
    },
  });
  try {
    await h.run();
    const events = h.store.events;
    const state = reduceState(events);
    const perStep = costPerStep(events).map((s) => s.usd);
    const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
    const prompts = h.sim.requests.map((r) =>
      r.usage === null
        ? 0
        : r.usage.input_tokens +
          (r.usage.cache_read_input_tokens ?? 0) +
          (r.usage.cache_creation_input_tokens ?? 0),
    );
    return {
      input: state.usage.inputTokens,
      output: state.usage.outputTokens,
      cacheWrite: state.usage.cacheWriteTokens,
      cacheRead: state.usage.cacheReadTokens,
      usd: state.usd,
      condensations: events.filter((e) => e.kind === 'condensation').length,
      firstTen: mean(perStep.slice(0, 10)),
      lastTen: mean(perStep.slice(-10)),
      largestPrompt: Math.max(...prompts),
    };
  } finally {
    await h.close();
  }
}

export async function tokensBench(steps = Number(process.env.TOKENS_BENCH_STEPS ?? 200)): Promise<void> {
  const price = findPrice(DEFAULT_PRICES, DEFAULT_MODEL);
  const m = (n: number): string => `${(n / 1e6).toFixed(2)} M`;
  const usd = (n: number): string => `$${n.toFixed(2)}`;
  console.log(
    `\nBilled tokens of a ${steps}-step scripted run (${DEFAULT_MODEL}: $${price?.input ?? '?'} / $${price?.output ?? '?'} / $${price?.cacheWrite ?? '?'} / $${price?.cacheRead ?? '?'} per M input / output / cache write / cache read):\n`,
  );
  console.log(
    '| run | input | output | cache writes | cache reads | condensations | largest prompt | $ per step, first 10 | $ per step, last 10 | billed, by price | × neither |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  );
  let baseline: number | null = null;
  for (const v of VARIANTS) {
    const r = await measure(v, steps);
    baseline ??= r.usd;
    console.log(
      `| ${v.name} | ${m(r.input)} | ${m(r.output)} | ${m(r.cacheWrite)} | ${m(r.cacheRead)} | ${r.condensations} | ${Math.round(r.largestPrompt / 1000)} k | ${usd(r.firstTen)} | ${usd(r.lastTen)} | ${usd(r.usd)} | ${(r.usd / baseline).toFixed(3)}× |`,
    );
  }
  console.log('\ntarget: caching + condensation (the default) ≤ 0.3× neither');
}
