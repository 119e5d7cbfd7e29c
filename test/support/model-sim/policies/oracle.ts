import { createHash } from 'node:crypto';
import { reply } from '../replies.js';
import type { Policy } from '../types.js';
import { hunkNewText, hunkOldText, parseUnifiedDiff, type FilePatch } from '../unified-diff.js';

/** One assistant turn of the oracle: a sentence, then one tool call. */
export interface OracleStep {
  readonly text: string;
  readonly tool: 'run_tests' | 'editor' | 'bash' | 'finish';
  readonly input: Readonly<Record<string, unknown>>;
}

export interface OracleOptions {
  /** The finish summary. Default: names the changed files. */
  summary?: string;
}

/**
 * A model that knows the fix. Its turns: run_tests; view each file the patch changes that already
 * exists; per file, create it whole (new file), `rm` it (deleted file), or one str_replace per hunk
 * (old_str = the hunk's context and removed lines, new_str = context and added lines; a hunk without
 * old lines becomes an insert); run_tests again; finish. Later requests get an end_turn text.
 *
 * Stateless: the turn is the number of assistant messages in the request, so a client that resumes a
 * conversation gets the step it would have got, with the same tool_use id. Tool results are not read:
 * a failed edit does not change the plan.
 */
export function oracle(fixPatch: string, options: OracleOptions = {}): Policy {
  const plan = oraclePlan(fixPatch, options);
  return (request) => {
    const turn = request.messages.filter((message) => message.role === 'assistant').length;
    const step = plan[turn];
    if (step === undefined) return reply().text('The fix is complete and the tests pass.');
    const id = `toolu_${createHash('sha256')
      .update(`${turn}:${JSON.stringify(step)}`)
      .digest('hex')
      .slice(0, 24)}`;
    return reply().text(step.text).tool(step.tool, step.input, { id });
  };
}

export function oraclePlan(fixPatch: string, options: OracleOptions = {}): OracleStep[] {
  const files = parseUnifiedDiff(fixPatch);
  if (files.length === 0) throw new Error('oracle: the fix patch changes no file');
  const paths = files.map(pathOf);
  return [
    { text: 'Let me run the tests first to see what fails.', tool: 'run_tests', input: {} },
    ...files.flatMap((file): OracleStep[] =>
      file.oldPath === null
        ? []
        : [
            {
              text: `Let me look at ${file.oldPath}.`,
              tool: 'editor',
              input: { command: 'view', path: file.oldPath },
            },
          ],
    ),
    ...files.flatMap(editSteps),
    { text: 'Let me run the tests again to check the fix.', tool: 'run_tests', input: {} },
    {
      text: 'The tests pass now.',
      tool: 'finish',
      input: { summary: options.summary ?? `Fixed the issue by changing ${paths.join(', ')}.` },
    },
  ];
}

function editSteps(file: FilePatch): OracleStep[] {
  const path = pathOf(file);
  if (file.oldPath === null) {
    const file_text = file.hunks.map(hunkNewText).join('');
    return [{ text: `I'll create ${path}.`, tool: 'editor', input: { command: 'create', path, file_text } }];
  }
  if (file.newPath === null) {
    return [
      {
        text: `${path} is no longer needed.`,
        tool: 'bash',
        input: { command: `rm -- '${path.replaceAll("'", "'\\''")}'` },
      },
    ];
  }
  // Line numbers in later hunks refer to the original file; earlier hunks shift them by this much.
  let shift = 0;
  return file.hunks.map((hunk, k): OracleStep => {
    const text = `Now I'll change ${path} (edit ${k + 1} of ${file.hunks.length}).`;
    const old_str = hunkOldText(hunk);
    const new_str = hunkNewText(hunk);
    const insert_line = hunk.oldStart + shift;
    shift += hunk.newLines - hunk.oldLines;
    return old_str === ''
      ? { text, tool: 'editor', input: { command: 'insert', path, insert_line, new_str } }
      : { text, tool: 'editor', input: { command: 'str_replace', path, old_str, new_str } };
  });
}

function pathOf(file: FilePatch): string {
  const path = file.newPath ?? file.oldPath;
  if (path === null) throw new Error('oracle: a file patch without a path');
  return path;
}
