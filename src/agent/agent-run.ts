import type { Logger } from 'pino';
import type { AgentEvent, BaseState, Limits, ModelSetup, NewEvent, ToolUseBlock } from '../events/schema.js';
import type { EventStore } from '../events/event-store.js';
import { reduceState, totalTokens, type RunState } from '../events/reduce-state.js';
import type { ImageBlockParam, Model, ToolSpec } from '../model/model.js';
import { findPrice, type ModelPrice, type PriceTable } from '../model/pricing.js';
import type { Sandbox } from '../sandbox/sandbox.js';
import { StepSpans } from '../telemetry/tracing.js';
import { reusableBaseline } from './baseline-answer.js';
import type { BaselineCache } from './baseline-cache.js';
import { explore } from './explore.js';
import { appliesFromStart, covers, workspaceRelative } from './instructions.js';
import { systemPrompt } from './prompt.js';
import type { StuckThresholds } from './stuck.js';
import { askTool } from './tools/ask.js';
import { defaultTools } from './tools/index.js';
import { isNativeTool, nativeSpec, withNativeTools } from './tools/native.js';
import { asRunFailure, type RunControl } from './tools/run-control.js';
import { newToolContext, toolSpec, type Tool, type ToolContext } from './tools/tool.js';
import type { WorkspaceGit } from './workspace-git.js';
import type { SpendBudget } from './spend-budget.js';

export interface AgentDeps {
  readonly store: EventStore;
  readonly sandbox: Sandbox;
  readonly model: Model;
  readonly prices: PriceTable;
  /** Aborting cancels the run at the next step boundary and kills the running command or model call. */
  readonly signal?: AbortSignal | undefined;
  readonly logger?: Logger | undefined;
  /** Called after each event is durable (progress lines, live views). */
  readonly onEvent?: ((event: AgentEvent) => void) | undefined;
  readonly tools?: ReadonlyMap<string, Tool> | undefined;
  readonly stuck?: StuckThresholds | undefined;
  /**
   * Applied to every command and test output before it is stored or shown to the model: the host's
   * redactor, so a secret that a command should never have seen (in a weak sandbox) still never
   * reaches the model, the trajectory or a PR. Default: outputs as they are.
   */
  readonly scrub?: ((text: string) => string) | undefined;
  /** Baselines of earlier runs of this repository, reused when the key matches (baseline-cache.ts). */
  readonly baselines?: BaselineCache | undefined;
  /**
   * Warnings from preparing the run (an MCP server that did not start): recorded once each, before
   * the first model call, so the model and the trajectory see them.
   */
  readonly notices?: readonly { readonly code: 'mcp_unavailable'; readonly message: string }[] | undefined;
  /**
   * Where the verdict's final run happens. Absent: in the agent's own sandbox (through the harness
   * shell). Present: in a sandbox this opens, which no agent process ever ran in, after the recorded
   * change is applied there; see FreshVerifier.
   */
  readonly verifier?: FreshVerifier | undefined;
  /**
   * The month's spending limits shared with the owner's other runs (spend-budget.ts): each model
   * call is held against them first. Absent: only the run's own `maxUsd` applies.
   */
  readonly budget?: SpendBudget | undefined;
}

/**
 * A source of sandboxes for the final run that the agent never touched. Everything the agent can
 * change in its own sandbox without it showing in the change (its home and the npm or pip settings
 * there, installed packages, the tools folder first on the tests' PATH, processes it left running)
 * can make the tests there pass whatever the code does. A sandbox from `open` has only the base
 * commit's files and the run's environment; the run applies the change it will publish (the last
 * checkpoint's diff) and checks the result is the checkpoint's tree before testing it. The verdict
 * is then a function of the base, the environment and the published change alone.
 */
export interface FreshVerifier {
  /** A new sandbox holding `baseCommit`'s files and the run's environment; the run closes it. */
  open(baseCommit: string): Promise<{ readonly sandbox: Sandbox; close(): Promise<void> }>;
}

/**
 * One process's run of the loop: what every part of it reads (the log, the base state, the tools)
 * and the few things it does to the log and the workspace that more than one part needs.
 * Everything it decides still comes from the log (state = reduce(events)); what it keeps besides
 * is the workspace's tree, which only it changes.
 */
export class AgentRun {
  readonly store: EventStore;
  readonly base: BaseState;
  readonly limits: Limits;
  readonly sandbox: Sandbox;
  readonly model: Model;
  readonly signal: AbortSignal | undefined;
  readonly logger: Logger | undefined;
  /** The tools by the names the model calls them (Anthropic-defined ones with a native run). */
  readonly tools: ReadonlyMap<string, Tool>;
  /** The harness's own tools, which the read-only explorer (delegate) uses whatever the run's set. */
  readonly schemaTools: ReadonlyMap<string, Tool>;
  readonly specs: readonly ToolSpec[];
  readonly setup: ModelSetup;
  readonly system: string;
  readonly price: ModelPrice | null;
  readonly scrub: (text: string) => string;
  readonly ctx: ToolContext;
  readonly spans = new StepSpans();
  /** The task's images, read once from the run's files before the first step (task-images.ts). */
  images: readonly ImageBlockParam[] = [];
  /** The tree of the last checkpoint (the base tree before any): the workspace's, once `workspaceKnown`. */
  lastTree: string;
  /**
   * Whether the workspace is the tree the log describes. Not yet, on a resume that must rebuild it:
   * a run that stops before it is rebuilt records no checkpoint of whatever the workspace holds.
   */
  workspaceKnown: boolean;
  private readonly priorMs: number;

  /** `segmentStart`: when this process took the run up (its wall time counts from then). */
  constructor(
    readonly deps: AgentDeps,
    readonly git: WorkspaceGit,
    existing: RunState,
    private readonly segmentStart: number,
  ) {
    this.store = deps.store;
    this.base = deps.store.base;
    this.limits = this.base.limits;
    this.sandbox = deps.sandbox;
    this.model = deps.model;
    this.signal = deps.signal;
    this.logger = deps.logger;
    this.schemaTools = deps.tools ?? defaultTools();
    // Tools and thinking: the base state decides (so a resumed run sends what the run began with).
    this.setup = this.base.modelSetup ?? { tools: 'schema', thinkingBudget: 0 };
    const tools = this.setup.tools === 'native' ? withNativeTools(this.schemaTools) : this.schemaTools;
    // Pre-flight triage: the base state decides (so a resumed run offers the same tools).
    this.tools = this.base.triage === true ? new Map([...tools, [askTool.name, askTool]]) : tools;
    this.specs = [...this.tools.values()].map((t) =>
      isNativeTool(t) ? nativeSpec(t, this.limits.observationChars) : toolSpec(t),
    );
    this.system = systemPrompt(this.sandbox.workdir);
    this.price = findPrice(deps.prices, this.model.name);
    this.scrub = deps.scrub ?? ((text: string) => text);
    this.ctx = newToolContext({
      sandbox: this.sandbox,
      limits: this.limits,
      signal: this.signal,
      testCommand: this.base.testCommand,
    });
    this.lastTree = existing.lastCheckpoint?.tree ?? this.base.workspace.baseTree;
    this.workspaceKnown = !mustRestore(this.store, existing);
    this.priorMs = existing.elapsedMs;
  }

  /** Wall time of the run so far, earlier processes' included. */
  elapsed(): number {
    return this.priorMs + (Date.now() - this.segmentStart);
  }

  readonly append = async (event: NewEvent): Promise<AgentEvent> => {
    const stored = await this.store.append(event);
    this.deps.onEvent?.(stored);
    return stored;
  };

  /**
   * Records the workspace as a checkpoint when it changed; the tree it is at. `toolUseId`: the
   * call whose change it is, recorded before that call's observation (see step.ts).
   */
  async checkpoint(toolUseId?: string): Promise<string> {
    const tree = await this.git.snapshot();
    if (tree === this.lastTree) return tree;
    const baseTree = this.base.workspace.baseTree;
    const d = await this.git.diff(baseTree, tree);
    const leftOut = await this.git.leftOut();
    // A diff that did not fit the capture is not recorded; restore then needs the tree object.
    await this.append({
      kind: 'checkpoint',
      tree,
      diff: d.truncated ? null : d.diff,
      filesChanged: d.files,
      ...(leftOut.length > 0 ? { leftOut } : {}),
      ...(toolUseId === undefined ? {} : { toolUseId }),
    });
    this.lastTree = tree;
    return tree;
  }

  /**
   * Instruction files not yet in the conversation that cover the path a call worked on are added
   * after its result (once each; the log says which are in, so a resumed run agrees).
   */
  async addGuidance(input: unknown): Promise<void> {
    const files = this.base.instructions?.files ?? [];
    const path = pathOf(input);
    if (path === null || files.length === 0) return;
    const rel = workspaceRelative(path, this.sandbox.workdir);
    if (rel === null) return;
    const added = new Set<string>();
    for (const e of this.store.events) if (e.kind === 'guidance_added') for (const p of e.paths) added.add(p);
    const paths = files
      .filter((f) => f.included && !appliesFromStart(f) && !added.has(f.path) && covers(f, rel))
      .map((f) => f.path);
    if (paths.length > 0) await this.append({ kind: 'guidance_added', paths, touched: rel });
  }

  /** What the tools that act on the run may ask of it (run-control.ts), for the call `use`. */
  control(use: ToolUseBlock): RunControl {
    return {
      changedFiles: this.lastTree !== this.base.workspace.baseTree,
      reusableBaseline: () => reusableBaseline(this.store.events),
      // A read-only sub-agent whose turns are nested in this log under the call.
      delegate: (question, maxSteps) =>
        asRunFailure(() => {
          const state = reduceState(this.store.events);
          return explore({
            id: use.id,
            question,
            maxSteps,
            events: () => this.store.events,
            append: this.append,
            model: this.model,
            price: this.price,
            tools: this.schemaTools,
            ctx: this.ctx,
            limits: this.limits,
            remaining: {
              tokens: Math.max(0, this.limits.maxTokens - totalTokens(state.usage)),
              usd: Math.max(0, this.limits.maxUsd - state.usd),
            },
            signal: this.signal,
            scrub: this.scrub,
            budget: this.deps.budget,
          });
        }),
    };
  }
}

/** Whether a resumed run must rebuild the workspace before anything else: the log has steps. */
export function mustRestore(store: EventStore, existing: RunState): boolean {
  return store.events.length > 0 && (existing.lastCheckpoint !== null || existing.steps > 0);
}

/** The `path` argument of a tool call (editor, search), or null. */
function pathOf(input: unknown): string | null {
  if (typeof input !== 'object' || input === null || !('path' in input)) return null;
  const p = input.path;
  return typeof p === 'string' && p !== '' ? p : null;
}
