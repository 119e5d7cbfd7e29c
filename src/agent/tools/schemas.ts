import { z } from 'zod';

/**
 * Input schemas of the tools the model can call. They are the contract between the agent loop, the
 * model (which sees them as JSON Schema) and the model simulator's policies (which emit them).
 * Paths are relative to the workspace root; an absolute path must lie inside the workspace.
 */
export const bashInput = z
  .object({
    command: z.string().min(1).describe('A bash command. cd and export persist between calls.'),
    timeout_s: z
      .number()
      .int()
      .positive()
      .max(3600)
      .optional()
      .describe('Seconds before the command and all its children are killed (default 120).'),
  })
  .strict();

export const editorInput = z
  .object({
    command: z.enum(['view', 'create', 'str_replace', 'insert', 'undo_edit']),
    path: z.string().min(1).describe('File or directory, relative to the workspace root.'),
    view_range: z
      .tuple([z.number().int().min(1), z.number().int().min(-1)])
      .optional()
      .describe('view: [first, last] line, 1-based; last = -1 means to the end.'),
    file_text: z.string().optional().describe('create: the whole content of the new file.'),
    old_str: z.string().optional().describe('str_replace: text that occurs exactly once in the file.'),
    new_str: z.string().optional().describe('str_replace / insert: the replacement or inserted text.'),
    insert_line: z.number().int().min(0).optional().describe('insert: insert after this line (0 = top).'),
  })
  .strict();

export const searchInput = z
  .object({
    pattern: z.string().min(1).describe('A regular expression (ripgrep syntax).'),
    path: z.string().optional().describe('Directory or file to search, relative to the workspace root.'),
    glob: z.string().optional().describe('Only files matching this glob, e.g. "*.ts".'),
    ignore_case: z.boolean().optional(),
    max_results: z.number().int().positive().max(1000).optional(),
  })
  .strict();

export const runTestsInput = z
  .object({
    filter: z
      .string()
      .optional()
      .describe('Optional extra arguments appended to the detected test command (e.g. a test file).'),
  })
  .strict();

export const finishInput = z
  .object({
    summary: z.string().min(1).describe('What was changed and why, for the pull request.'),
  })
  .strict();

export type BashInput = z.infer<typeof bashInput>;
export type EditorInput = z.infer<typeof editorInput>;
export type SearchInput = z.infer<typeof searchInput>;
export type RunTestsInput = z.infer<typeof runTestsInput>;
export type FinishInput = z.infer<typeof finishInput>;

export const delegateInput = z
  .object({
    question: z
      .string()
      .min(1)
      .max(4000)
      .describe('What the helper should find out, with any names or paths you already know.'),
    max_steps: z
      .number()
      .int()
      .positive()
      .max(30)
      .optional()
      .describe('Most tool-using turns the helper may take (default 20).'),
  })
  .strict();
export type DelegateInput = z.infer<typeof delegateInput>;

export const TOOL_NAMES = ['bash', 'editor', 'search', 'run_tests', 'delegate', 'finish'] as const;
export type ToolName = (typeof TOOL_NAMES)[number];
