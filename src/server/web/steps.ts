/**
 * Groups a run's events into steps as they arrive, for the run view. A step is one model turn and
 * everything that happened until the next one: its tool calls (an action joined with its
 * observation), test runs, checkpoints, warnings, retries. Step 0 holds what came before the first
 * model turn (the baseline test run). Running totals follow `reduceState`: tokens and USD are
 * summed over model turns, and elapsed time does not count the gap before a resume.
 * Pure: also unit-tested under Node.
 */
import type { AgentEvent, EventOf } from './types.js';

export interface ToolCall {
  readonly kind: 'call';
  readonly toolUseId: string;
  readonly tool: string;
  /** undefined when the observation came without its action (it never does in a valid log). */
  readonly input: unknown;
  observation: EventOf<'observation'> | null;
}

export type OtherEvent = Exclude<
  AgentEvent,
  EventOf<'model_response'> | EventOf<'action'> | EventOf<'observation'>
>;

export interface EventItem {
  readonly kind: 'event';
  readonly event: OtherEvent;
}

/** A sub-agent's turns (the `delegate` tool), nested under the step that called it. */
export interface SubAgentItem {
  readonly kind: 'sub';
  /** The delegate call's tool_use id. */
  readonly parent: string;
  /** Its turns and its tool calls (each paired with its result), in order. */
  readonly entries: (EventOf<'model_response'> | ToolCall)[];
}

export type StepItem = ToolCall | EventItem | SubAgentItem;

export interface Totals {
  readonly tokens: number;
  readonly usd: number;
  readonly elapsedMs: number;
}

export interface Step {
  /** 0 for what came before the first model turn, then 1, 2, … */
  readonly index: number;
  readonly response: EventOf<'model_response'> | null;
  readonly items: StepItem[];
  readonly firstEventId: number;
  lastEventId: number;
  /** Elapsed time (as in totals) from the end of the previous step, or the first event, to this step's last event. */
  durationMs: number;
  /** Running totals after this step's last event. */
  totals: Totals;
  /** Bumped on every change, so a view can tell whether to redraw. */
  version: number;
}

export function tokensOf(e: EventOf<'model_response'>): number {
  const u = e.usage;
  return u.inputTokens + u.outputTokens + u.cacheReadTokens + u.cacheWriteTokens;
}

export class StepGrouper {
  readonly steps: Step[] = [];
  private lastId = 0;
  private tokens = 0;
  private usd = 0;
  private elapsedBefore = 0;
  private segmentStart: number | null = null;
  private lastTs = 0;
  /** Elapsed time at the event before the current step's first one (when its model call started). */
  private stepStart = 0;
  private readonly calls = new Map<string, ToolCall>();

  get lastEventId(): number {
    return this.lastId;
  }

  get totals(): Totals {
    return { tokens: this.tokens, usd: this.usd, elapsedMs: this.elapsed() };
  }

  private elapsed(): number {
    return this.elapsedBefore + (this.segmentStart === null ? 0 : this.lastTs - this.segmentStart);
  }

  /**
   * Adds the next event; events at or below the last id are ignored (a stream that replays what a
   * page already brought). Returns the step that changed, or null for an ignored event.
   */
  add(e: AgentEvent): { readonly step: Step; readonly created: boolean } | null {
    if (e.id <= this.lastId) return null;
    this.lastId = e.id;
    const t = Date.parse(e.ts);
    const elapsedBefore = this.elapsed();
    if (e.kind === 'run_resumed' && this.segmentStart !== null) {
      this.elapsedBefore += this.lastTs - this.segmentStart;
      this.segmentStart = t;
    }
    this.segmentStart ??= t;
    this.lastTs = t;

    let created = false;
    let step = this.steps[this.steps.length - 1];
    const parent = 'parent' in e ? e.parent : undefined;
    if (parent !== undefined && step !== undefined) {
      // A sub-agent's turn: part of the step that delegated, counted in the totals.
      let sub = step.items.find((i): i is SubAgentItem => i.kind === 'sub' && i.parent === parent);
      if (sub === undefined) {
        sub = { kind: 'sub', parent, entries: [] };
        step.items.push(sub);
      }
      const entries = sub.entries;
      if (e.kind === 'model_response') {
        this.tokens += tokensOf(e);
        this.usd += e.usd;
        entries.push(e);
      } else if (e.kind === 'action' || e.kind === 'observation') {
        this.addCall(e, (c) => entries.push(c));
      }
      step.lastEventId = e.id;
      step.totals = this.totals;
      step.durationMs = Math.max(0, this.elapsed() - this.stepStart);
      step.version += 1;
      return { step, created: false };
    }
    if (e.kind === 'model_response' || step === undefined) {
      this.stepStart = elapsedBefore;
      step = {
        index: e.kind === 'model_response' ? (step?.index ?? 0) + 1 : 0,
        response: e.kind === 'model_response' ? e : null,
        items: [],
        firstEventId: e.id,
        lastEventId: e.id,
        durationMs: 0,
        totals: this.totals,
        version: 0,
      };
      this.steps.push(step);
      created = true;
    }
    switch (e.kind) {
      case 'model_response':
        this.tokens += tokensOf(e);
        this.usd += e.usd;
        break;
      case 'action':
      case 'observation': {
        const items = step.items;
        this.addCall(e, (c) => items.push(c));
        break;
      }
      default:
        // A summary call's cost is the run's, counted where it was made (condense-summary.ts).
        if (e.kind === 'condensation' && e.call !== undefined) {
          const u = e.call.usage;
          this.tokens += u.inputTokens + u.outputTokens + u.cacheReadTokens + u.cacheWriteTokens;
          this.usd += e.call.usd;
        }
        step.items.push({ kind: 'event', event: e });
    }
    step.lastEventId = e.id;
    step.totals = this.totals;
    step.durationMs = Math.max(0, this.elapsed() - this.stepStart);
    step.version += 1;
    return { step, created };
  }

  /** An action starts a call (pushed); its observation completes it (or stands alone if none). */
  private addCall(e: EventOf<'action'> | EventOf<'observation'>, push: (c: ToolCall) => void): void {
    if (e.kind === 'action') {
      const call: ToolCall = {
        kind: 'call',
        toolUseId: e.toolUseId,
        tool: e.tool,
        input: e.input,
        observation: null,
      };
      this.calls.set(e.toolUseId, call);
      push(call);
      return;
    }
    const call = this.calls.get(e.toolUseId);
    if (call === undefined) {
      push({ kind: 'call', toolUseId: e.toolUseId, tool: e.tool, input: undefined, observation: e });
    } else {
      call.observation = e;
      this.calls.delete(e.toolUseId);
    }
  }
}
