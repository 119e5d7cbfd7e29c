import { FileOpFailed, PathRefused, type FileStat } from '../../sandbox/sandbox-files.js';
import { findLazyPlaceholder } from './lazy-edit.js';
import { checkSyntaxCached, describeSyntax } from '../syntax-check.js';
import { editorInput, type EditorInput } from './schemas.js';
import { defineTool, truncateMiddle, type ToolContext, type ToolOutput } from './tool.js';

const MAX_VIEW_LINES = 600;

function fail(content: string): ToolOutput {
  return { content, isError: true, mutates: false };
}

function numbered(lines: readonly string[], first: number): string {
  return lines.map((l, i) => `${String(first + i).padStart(6)}\t${l}`).join('\n');
}

function occurrences(haystack: string, needle: string): number[] {
  const at: number[] = [];
  for (let i = haystack.indexOf(needle); i >= 0; i = haystack.indexOf(needle, i + 1)) at.push(i);
  return at;
}

function lineOf(text: string, index: number): number {
  let n = 1;
  for (let i = 0; i < index; i++) if (text.charCodeAt(i) === 10) n++;
  return n;
}

/** A few numbered lines around an edit, so the model sees the result without another view call. */
function snippet(text: string, startLine: number, lineCount: number): string {
  const lines = text.split('\n');
  const from = Math.max(1, startLine - 3);
  const to = Math.min(lines.length, startLine + lineCount + 3);
  return numbered(lines.slice(from - 1, to), from);
}

/**
 * The text of a file as the sandbox reads it (one round trip), with what it is. Every read and write
 * happens inside the sandbox (see SandboxFiles); `path` is the model's, resolved there.
 */
async function readText(
  ctx: ToolContext,
  path: string,
): Promise<{ readonly stat: FileStat; readonly text: string } | ToolOutput> {
  const { stat, data } = await ctx.files.read(path);
  if (stat.kind === 'missing')
    return fail(`${stat.rel} does not exist. Use the create command to make a new file.`);
  if (stat.kind !== 'file') return fail(`${stat.rel} is not a regular file.`);
  if (data.subarray(0, 8000).includes(0))
    return fail(`${stat.rel} is a binary file; the editor only handles text.`);
  return { stat, text: data.toString('utf8') };
}

async function save(ctx: ToolContext, rel: string, before: string | null, after: string): Promise<void> {
  await ctx.files.write(rel, after);
  const history = ctx.editHistory.get(rel) ?? [];
  // An empty-string sentinel cannot stand for "did not exist"; a null marker is kept as '\0'.
  history.push(before ?? '\0');
  ctx.editHistory.set(rel, history);
}

/**
 * The edit's result with the file's syntax check (see syntax-check.ts): a file the edit left
 * unparseable is said in the same observation, so the model fixes it at once. The edit stands.
 */
async function checked(ctx: ToolContext, rel: string, text: string, out: ToolOutput): Promise<ToolOutput> {
  const said = describeSyntax(rel, await checkSyntaxCached(ctx.syntax, ctx.sandbox, rel, text, ctx.signal));
  return said === null ? out : { ...out, content: `${out.content}\n\n${said}` };
}

async function view(input: EditorInput, ctx: ToolContext): Promise<ToolOutput> {
  const read = await readText(ctx, input.path);
  if ('content' in read) {
    // Not a file: a directory gets a listing, anything else the error.
    const { stat, entries } = await ctx.files.list(input.path);
    if (stat.kind !== 'directory') return read;
    return {
      content: `Files in ${stat.rel} (two levels):\n${entries.join('\n')}`,
      isError: false,
      mutates: false,
    };
  }
  const { stat: p, text } = read;
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  const [first, requestedLast] = input.view_range ?? [1, lines.length];
  let last = requestedLast;
  if (last === -1) last = lines.length;
  if (first > Math.max(lines.length, 1) || last < first) {
    return fail(`Invalid view_range [${first}, ${last}]: ${p.rel} has ${lines.length} lines.`);
  }
  last = Math.min(last, lines.length);
  let note = '';
  if (input.view_range === undefined && last - first + 1 > MAX_VIEW_LINES) {
    last = first + MAX_VIEW_LINES - 1;
    note = `\n[showing lines 1-${last} of ${lines.length}; pass view_range to see more]`;
  }
  const body = numbered(lines.slice(first - 1, last), first);
  return {
    content: truncateMiddle(body, ctx.limits.observationChars) + note,
    isError: false,
    mutates: false,
  };
}

export const editorTool = defineTool({
  name: 'editor',
  description:
    'View and edit files in the workspace. Commands: view (a file with line numbers, optionally a ' +
    'view_range, or a directory listing), create (a new file with file_text), str_replace (replace ' +
    'old_str, which must occur exactly once, with new_str; include enough context to be unique), ' +
    'insert (new_str after line insert_line; 0 = top), undo_edit (revert the last edit of path). ' +
    'Always write complete code: placeholders such as "... rest of code ..." are refused.',
  schema: editorInput,
  async run(input, ctx) {
    try {
      return await runEditor(input, ctx);
    } catch (error) {
      if (error instanceof PathRefused || error instanceof FileOpFailed) return fail(error.message);
      throw error;
    }
  },
});

async function runEditor(input: EditorInput, ctx: ToolContext): Promise<ToolOutput> {
  switch (input.command) {
    case 'view':
      return view(input, ctx);
    case 'create': {
      if (input.file_text === undefined)
        return fail('create needs file_text: the whole content of the new file.');
      const lazy = findLazyPlaceholder(input.file_text);
      if (lazy !== null)
        return fail(`Refused: the file text contains the placeholder "${lazy}". Write the complete content.`);
      const { stat, data } = await ctx.files.read(input.path);
      if (stat.kind === 'directory' || stat.kind === 'other')
        return fail(`${stat.rel} exists and is not a regular file.`);
      const before = stat.kind === 'file' ? data.toString('utf8') : null;
      await save(ctx, stat.rel, before, input.file_text);
      const verb = before === null ? 'Created' : 'Overwrote';
      return checked(ctx, stat.rel, input.file_text, {
        content: `${verb} ${stat.rel} (${input.file_text.split('\n').length} lines).`,
        isError: false,
        mutates: true,
      });
    }
    case 'str_replace': {
      if (input.old_str === undefined || input.old_str === '')
        return fail('str_replace needs a non-empty old_str.');
      const read = await readText(ctx, input.path);
      if ('content' in read) return read;
      const { stat: p, text } = read;
      const newStr = input.new_str ?? '';
      const lazy = findLazyPlaceholder(newStr, input.old_str);
      if (lazy !== null)
        return fail(`Refused: new_str contains the placeholder "${lazy}". Write the complete replacement.`);
      const at = occurrences(text, input.old_str);
      if (at.length === 0) {
        return fail(
          `old_str was not found in ${p.rel}. It must match exactly, including whitespace and indentation; view the file first.`,
        );
      }
      if (at.length > 1) {
        const lines = at.map((i) => lineOf(text, i)).join(', ');
        return fail(
          `old_str occurs ${at.length} times in ${p.rel} (lines ${lines}); include more surrounding context so it is unique.`,
        );
      }
      const index = at[0] ?? 0;
      const after = text.slice(0, index) + newStr + text.slice(index + input.old_str.length);
      await save(ctx, p.rel, text, after);
      const line = lineOf(after, index);
      return checked(ctx, p.rel, after, {
        content: `Edited ${p.rel}. The changed region now reads:\n${snippet(after, line, newStr.split('\n').length)}`,
        isError: false,
        mutates: true,
      });
    }
    case 'insert': {
      if (input.insert_line === undefined || input.new_str === undefined)
        return fail('insert needs insert_line and new_str.');
      const read = await readText(ctx, input.path);
      if ('content' in read) return read;
      const { stat: p, text } = read;
      const lazy = findLazyPlaceholder(input.new_str);
      if (lazy !== null)
        return fail(`Refused: new_str contains the placeholder "${lazy}". Write the complete text.`);
      const lines = text.split('\n');
      const count = text.endsWith('\n') ? lines.length - 1 : lines.length;
      if (input.insert_line > count)
        return fail(`insert_line ${input.insert_line} is past the end of ${p.rel} (${count} lines).`);
      const inserted = input.new_str.endsWith('\n')
        ? input.new_str.slice(0, -1).split('\n')
        : input.new_str.split('\n');
      lines.splice(input.insert_line, 0, ...inserted);
      const after = lines.join('\n');
      await save(ctx, p.rel, text, after);
      return checked(ctx, p.rel, after, {
        content: `Inserted ${inserted.length} lines into ${p.rel} after line ${input.insert_line}:\n${snippet(after, input.insert_line + 1, inserted.length)}`,
        isError: false,
        mutates: true,
      });
    }
    case 'undo_edit': {
      const { rel } = await ctx.files.stat(input.path);
      const history = ctx.editHistory.get(rel);
      const previous = history?.pop();
      if (previous === undefined) return fail(`No edit of ${rel} to undo in this session.`);
      if (previous === '\0') {
        await ctx.files.remove(rel);
        return { content: `Undid the creation of ${rel} (removed it).`, isError: false, mutates: true };
      }
      await ctx.files.write(rel, previous);
      return checked(ctx, rel, previous, {
        content: `Reverted the last edit of ${rel}.`,
        isError: false,
        mutates: true,
      });
    }
  }
}
