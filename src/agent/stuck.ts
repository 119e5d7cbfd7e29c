import type { AgentEvent } from '../events/schema.js';

export interface StuckVerdict {
  readonly kind: 'repeat' | 'alternating';
  readonly count: number;
  readonly stop: boolean;
  readonly warn: boolean;
}

export interface StuckThresholds {
  /** Identical action+observation pairs in a row: warn at `repeatWarn`, stop at `repeatStop`. */
  readonly repeatWarn: number;
  readonly repeatStop: number;
  /** A-B-A-B… pairs: warn and stop after this many pairs in the pattern. */
  readonly alternateWarn: number;
  readonly alternateStop: number;
}

export const DEFAULT_STUCK: StuckThresholds = {
  repeatWarn: 3,
  repeatStop: 4,
  alternateWarn: 6,
  alternateStop: 8,
};

/**
 * Looks at the newest tool calls (action + its observation) for a run that is going in circles:
 * the same call with the same result again and again, or two calls alternating. A pure function of
 * the log, so a resumed run judges exactly as the original would have.
 */
export function detectStuck(
  events: readonly AgentEvent[],
  t: StuckThresholds = DEFAULT_STUCK,
): StuckVerdict | null {
  const actions = new Map<string, string>();
  const pairs: string[] = [];
  for (const e of events) {
    if (e.kind === 'action') actions.set(e.toolUseId, `${e.tool}:${JSON.stringify(e.input)}`);
    else if (e.kind === 'observation') pairs.push(`${actions.get(e.toolUseId) ?? e.tool}\u0000${e.content}`);
    else if (e.kind === 'condensation' || e.kind === 'run_resumed') continue;
  }
  const n = pairs.length;
  const last = pairs[n - 1];
  if (last === undefined) return null;
  let repeat = 1;
  while (repeat < n && pairs[n - 1 - repeat] === last) repeat++;
  if (repeat >= t.repeatWarn) {
    return { kind: 'repeat', count: repeat, stop: repeat >= t.repeatStop, warn: repeat === t.repeatWarn };
  }
  const prev = pairs[n - 2];
  if (prev !== undefined && prev !== last) {
    let alt = 2;
    while (alt < n && pairs[n - 1 - alt] === (alt % 2 === 0 ? last : prev)) alt++;
    if (alt >= t.alternateWarn) {
      return { kind: 'alternating', count: alt, stop: alt >= t.alternateStop, warn: alt === t.alternateWarn };
    }
  }
  return null;
}
