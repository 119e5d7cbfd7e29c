import { z } from 'zod';
import { BASH_TOOL, TEXT_EDITOR_TOOL } from '../../model/capabilities.js';
import { bashTool } from './bash.js';
import { editorTool } from './editor.js';
import type { EditorInput } from './schemas.js';
import type { NativeToolSpec } from '../../model/model.js';
import { defineTool, type Tool } from './tool.js';

/*
 * Anthropic-defined client tools (docs/model-requests.md), mapped onto the harness's own: the model
 * calls `str_replace_based_edit_tool` and `bash` with the inputs it was trained on; the call runs
 * as the `editor` and `bash` tools run (the same file rules, syntax check, lazy-edit refusal,
 * truncation), and the log records it under the harness's name and input shape (`calledAs` keeps
 * the name the model used), so trajectories, the PR, the web view, stuck detection and resume read
 * one shape whichever set the run used.
 */

const nativeEditorInput = z
  .object({
    command: z.enum(['view', 'create', 'str_replace', 'insert']),
    path: z.string().min(1),
    view_range: z.tuple([z.number().int().min(1), z.number().int().min(-1)]).optional(),
    file_text: z.string().optional(),
    old_str: z.string().optional(),
    new_str: z.string().optional(),
    insert_line: z.number().int().min(0).optional(),
    /** Some descriptions of the tool name the inserted text `insert_text`; both are taken. */
    insert_text: z.string().optional(),
  })
  .strict();
type NativeEditorInput = z.infer<typeof nativeEditorInput>;

/** The editor input a text-editor call stands for. */
export function editorInputOf(input: NativeEditorInput): EditorInput {
  const { insert_text: insertText, ...rest } = input;
  return insertText !== undefined && rest.new_str === undefined ? { ...rest, new_str: insertText } : rest;
}

const nativeBashInput = z
  .object({
    command: z.string().min(1).optional(),
    restart: z.boolean().optional(),
  })
  .strict()
  .refine((v) => v.restart === true || v.command !== undefined, {
    error: 'command is required unless restart is true',
  });
type NativeBashInput = z.infer<typeof nativeBashInput>;

/** A tool the model knows by an Anthropic-defined type; what the log records it as. */
export interface NativeTool extends Tool {
  readonly native: string;
  /** The harness tool the log names (`editor`, `bash`). */
  readonly records: string;
  /** The call's input in the recorded tool's shape. */
  recordedInput(input: unknown): unknown;
}

export function isNativeTool(tool: Tool | undefined): tool is NativeTool {
  return tool !== undefined && 'native' in tool;
}

export const nativeEditorTool: NativeTool = {
  ...defineTool({
    name: TEXT_EDITOR_TOOL.name,
    description: 'Anthropic text editor tool (text_editor_20250728), run as the editor tool.',
    schema: nativeEditorInput,
    run: (input, ctx) => editorTool.run(editorInputOf(input), ctx),
  }),
  native: TEXT_EDITOR_TOOL.type,
  records: editorTool.name,
  recordedInput: (input) => {
    const parsed = nativeEditorInput.safeParse(input);
    return parsed.success ? editorInputOf(parsed.data) : input;
  },
};

/**
 * `restart`: the session is reset in place: its background jobs stopped and the working directory
 * back at the workspace root (the sandbox's shell is the one the harness frames commands in, so it
 * is reset rather than replaced; exported variables stay).
 */
function restartCommand(workdir: string): string {
  return `kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; cd -- '${workdir.replaceAll("'", "'\\''")}'`;
}

export const nativeBashTool: NativeTool = {
  ...defineTool({
    name: BASH_TOOL.name,
    description: 'Anthropic bash tool (bash_20250124), run as the bash tool.',
    schema: nativeBashInput,
    async run(input: NativeBashInput, ctx) {
      if (input.restart === true) {
        const r = await ctx.sandbox.exec(restartCommand(ctx.sandbox.workdir), {
          timeoutMs: ctx.limits.commandTimeoutMs,
          signal: ctx.signal,
        });
        return {
          content:
            r.exitCode === 0 || r.exitCode === null
              ? `The bash session was restarted: background jobs stopped, working directory ${ctx.sandbox.workdir}.`
              : `The bash session could not be reset cleanly (exit ${r.exitCode}): ${r.output}`,
          isError: false,
          mutates: false,
          exitCode: r.exitCode,
        };
      }
      return bashTool.run({ command: input.command ?? '' }, ctx);
    },
  }),
  native: BASH_TOOL.type,
  records: bashTool.name,
  recordedInput: (input) => input,
};

/**
 * The tool set a run of the native kind offers: `editor` and `bash` replaced by the Anthropic-defined
 * tools; the rest (search, run_tests, delegate, finish, MCP tools) as they are.
 */
export function withNativeTools(tools: ReadonlyMap<string, Tool>): ReadonlyMap<string, Tool> {
  const out = new Map<string, Tool>();
  for (const [name, tool] of tools) {
    if (name === editorTool.name) out.set(nativeEditorTool.name, nativeEditorTool);
    else if (name === bashTool.name) out.set(nativeBashTool.name, nativeBashTool);
    else out.set(name, tool);
  }
  return out;
}

/** How the model is told of a native tool: type and name; the editor's view cap is the observation cap. */
export function nativeSpec(tool: NativeTool, observationChars: number): NativeToolSpec {
  return tool.native === TEXT_EDITOR_TOOL.type
    ? { name: tool.name, native: tool.native, maxCharacters: observationChars }
    : { name: tool.name, native: tool.native };
}
