import { z } from 'zod';
import type { Clarification, Limits, TestSummarySnapshot } from '../../events/schema.js';
import type { ToolSpec } from '../../model/model.js';
import type { KillReason, Sandbox } from '../../sandbox/sandbox.js';
import type { SyntaxResult } from '../syntax-check.js';
import { SandboxFiles } from '../../sandbox/sandbox-files.js';
import { outsideLoop, RunFailure, type RunControl } from './run-control.js';

export interface ToolContext {
  readonly sandbox: Sandbox;
  /** File operations, carried out inside the sandbox. */
  readonly files: SandboxFiles;
  readonly limits: Limits;
  readonly signal: AbortSignal | undefined;
  readonly testCommand: string | null;
  /** Previous contents per workspace-relative path, for editor undo. Lives as long as the process. */
  readonly editHistory: Map<string, string[]>;
  /** Syntax check results by path and content (see syntax-check.ts). */
  readonly syntax: Map<string, SyntaxResult>;
}

/** A context for one run: file operations inside `sandbox`, an empty edit history. */
export function newToolContext(options: {
  readonly sandbox: Sandbox;
  readonly limits: Limits;
  readonly signal?: AbortSignal | undefined;
  readonly testCommand?: string | null;
}): ToolContext {
  return {
    sandbox: options.sandbox,
    files: new SandboxFiles(options.sandbox),
    limits: options.limits,
    signal: options.signal,
    testCommand: options.testCommand ?? null,
    editHistory: new Map(),
    syntax: new Map(),
  };
}

/** What a tool returns. A failure the model can act on is a value with isError, never an exception. */
export interface ToolOutput {
  readonly content: string;
  readonly isError: boolean;
  /** The tool may have changed the workspace (a checkpoint follows). */
  readonly mutates: boolean;
  readonly exitCode?: number | null;
  readonly killed?: KillReason | null;
  /** The complete text when content was cut for the prompt (kept in the event, not sent). */
  readonly fullText?: string;
  /** Host file with the complete output when even the capture had to be cut. */
  readonly fullOutputPath?: string | undefined;
  readonly testSummary?: TestSummarySnapshot;
  readonly finishSummary?: string;
  /** ask_for_clarification: what is missing and the questions (the run ends `needs_info`). */
  readonly question?: Clarification;
  /** What the call took, when it is not the time the tool ran: 0 for an answer in which nothing ran. */
  readonly durationMs?: number;
}

export interface Tool<S extends z.ZodType = z.ZodType> {
  readonly name: string;
  readonly description: string;
  readonly schema: S;
  /** The JSON schema the model is given, when it is not `schema`'s (an MCP server's tool). */
  readonly inputSchema?: Record<string, unknown> | undefined;
  /**
   * `control`: the loop that runs the call, for the few tools that act on the run (run-control.ts);
   * absent for a call with no loop around it, which those tools take as `outsideLoop`.
   */
  run(input: z.infer<S>, ctx: ToolContext, control?: RunControl): Promise<ToolOutput>;
}

export function defineTool<S extends z.ZodType>(tool: Tool<S>): Tool {
  return tool;
}

export function toolSpec(tool: Tool): ToolSpec {
  if (tool.inputSchema !== undefined)
    return { name: tool.name, description: tool.description, inputSchema: tool.inputSchema };
  const schema = z.toJSONSchema(tool.schema, { target: 'draft-7' }) as Record<string, unknown>;
  delete schema.$schema;
  return { name: tool.name, description: tool.description, inputSchema: schema };
}

export interface ToolCallResult extends ToolOutput {
  readonly durationMs: number;
}

/**
 * The one place tool calls are validated and run. Unknown tools, invalid input and unexpected
 * exceptions all become error observations written for the model, so the loop always goes on;
 * only a broken sandbox and a failure of the run itself (RunFailure) are thrown to the loop.
 */
export async function runToolCall(
  tools: ReadonlyMap<string, Tool>,
  name: string,
  input: unknown,
  ctx: ToolContext,
  control: RunControl = outsideLoop,
): Promise<ToolCallResult> {
  const started = performance.now();
  const done = (out: ToolOutput): ToolCallResult => ({
    ...out,
    durationMs: out.durationMs ?? performance.now() - started,
  });
  const tool = tools.get(name);
  if (tool === undefined) {
    return done({
      content: `Unknown tool "${name}". Available tools: ${[...tools.keys()].join(', ')}.`,
      isError: true,
      mutates: false,
    });
  }
  const parsed = tool.schema.safeParse(input);
  if (!parsed.success) {
    const problems = parsed.error.issues
      .map((i) => `- ${i.path.length > 0 ? i.path.join('.') : '(input)'}: ${i.message}`)
      .join('\n');
    return done({
      content: `Invalid input for tool "${name}":\n${problems}\nCall it again with input matching its schema.`,
      isError: true,
      mutates: false,
    });
  }
  try {
    return done(await tool.run(parsed.data, ctx, control));
  } catch (error) {
    // Sandbox breakage and the run's own failures are not the model's to handle; anything else is
    // reported back to it.
    if (error instanceof RunFailure) throw error.error;
    if (error instanceof Error && error.name === 'SandboxError') throw error;
    const message = error instanceof Error ? error.message : String(error);
    return done({ content: `The ${name} tool failed: ${message}`, isError: true, mutates: false });
  }
}

/** Keeps the head and the tail of a long text around a marker that says how much was cut. */
export function truncateMiddle(text: string, maxChars: number): string {
  if (text.length <= maxChars) return text;
  const half = Math.floor(maxChars / 2);
  const omitted = text.length - 2 * half;
  return `${text.slice(0, half)}\n\n[... ${omitted} characters omitted; narrow the command (grep, head, tail) to see them ...]\n\n${text.slice(text.length - half)}`;
}
