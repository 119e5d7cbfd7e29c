import { createHash } from 'node:crypto';
import type { MessageParam } from '@anthropic-ai/sdk/resources/messages/messages';
import { applyFileHunks, PatchDoesNotApply, splitLines, type AppliedHunk } from '../git-apply.js';
import { reply } from '../replies.js';
import type { Policy } from '../types.js';
import { parseUnifiedDiff, type FilePatch } from '../unified-diff.js';
import { answeringSummaries } from './summary.js';

/** One tool call of the oracle. */
export interface OracleCall {
  readonly tool: 'run_tests' | 'editor' | 'bash' | 'finish';
  readonly input: Readonly<Record<string, unknown>>;
}

/** One assistant turn of the oracle: a sentence, then its tool calls (one, or two when it reads a file). */
export interface OracleStep {
  readonly text: string;
  readonly calls: readonly OracleCall[];
  /** What the tool must answer for the edit to have done what `git apply` does; checked next turn. */
  readonly expect?: 'created' | 'edited' | 'removed';
}

export interface OracleOptions {
  /** The finish summary. Default: names the changed files. */
  summary?: string;
  /**
   * Whether the oracle runs the tests again after its edits (default true, as a model would). An
   * eval's oracle does not: the harness's final run is the same suite on the same tree in the same
   * sandbox right after, and the oracle reads no test result.
   */
  recheck?: boolean;
}

/**
 * A model that knows the fix and applies it through the agent's tools with the result `git apply`
 * would give. Its turns:
 * 1. run_tests;
 * 2. per file the patch changes or deletes: `editor view` of it, and in the same turn a bash probe
 *    for its last byte (a view does not show whether the file ends with a newline); a file too long
 *    for one view is read on with `view_range` turns until every line is known;
 * 3. the edits: the patch is applied to the files as read, as `git apply` would (see git-apply.ts),
 *    and each hunk becomes one str_replace whose old_str is the lines git replaced, widened by whole
 *    lines around them until it occurs exactly once in the file (a new file is `create`d, a deleted
 *    one `rm`ed, an empty file rewritten with `create`);
 * 4. run_tests (unless `recheck` is false); finish. Later requests get an end_turn text.
 *
 * Fails loudly: a patch that does not parse throws when the policy is made; one that does not apply
 * to the files as read, a file it cannot read, or an edit the agent's tools refused makes the policy
 * throw, which the simulator answers with an HTTP 500 naming the file and the hunk.
 *
 * Stateless: the step is computed from the request (the turn is the number of assistant messages,
 * the file contents come from the tool results in it), so a client that resumes a conversation gets
 * the step it would have got, with the same tool_use ids.
 */
export function oracle(fixPatch: string, options: OracleOptions = {}): Policy {
  const files = parseUnifiedDiff(fixPatch);
  if (files.length === 0) throw new Error('oracle: the fix patch changes no file');
  // A summary request (the condenser's) gets a summary, as from a real model; the plan itself reads
  // the whole conversation, so a run condensed before it finishes no longer follows the patch.
  return answeringSummaries((request) => {
    const conversation = readConversation(request.messages);
    const turn = conversation.turns.length;
    const step = oracleStep(files, conversation, options);
    if (step === null) return reply().text('The fix is complete and the tests pass.');
    let builder = reply().text(step.text);
    step.calls.forEach((call, k) => {
      const id = `toolu_${createHash('sha256')
        .update(`${turn}:${k}:${JSON.stringify(call)}`)
        .digest('hex')
        .slice(0, 24)}`;
      builder = builder.tool(call.tool, call.input, { id });
    });
    return builder;
  });
}

class PatchDoesNotApplyError extends Error {
  constructor(cause: PatchDoesNotApply) {
    super(`oracle: the fix patch does not apply: ${cause.message}`, { cause });
  }
}

/** The assistant turns of a conversation (their tool calls) and every tool result, by tool_use id. */
export interface Conversation {
  readonly turns: readonly (readonly ToolCallSeen[])[];
  readonly results: ReadonlyMap<string, ToolResultSeen>;
}

interface ToolCallSeen {
  readonly id: string;
  readonly name: string;
  readonly input: unknown;
}

interface ToolResultSeen {
  readonly text: string;
  readonly isError: boolean;
}

export function readConversation(messages: readonly MessageParam[]): Conversation {
  const turns: ToolCallSeen[][] = [];
  const results = new Map<string, ToolResultSeen>();
  for (const message of messages) {
    const blocks = typeof message.content === 'string' ? [] : message.content;
    if (message.role === 'assistant') {
      turns.push(
        blocks.flatMap((b) => (b.type === 'tool_use' ? [{ id: b.id, name: b.name, input: b.input }] : [])),
      );
      continue;
    }
    for (const b of blocks) {
      if (b.type !== 'tool_result') continue;
      const text =
        typeof b.content === 'string'
          ? b.content
          : (b.content ?? []).map((part) => (part.type === 'text' ? part.text : '')).join('');
      results.set(b.tool_use_id, { text, isError: b.is_error === true });
    }
  }
  return { turns, results };
}

/** The oracle's step at the turn after `conversation`, or null once it has finished. */
export function oracleStep(
  files: readonly FilePatch[],
  conversation: Conversation,
  options: OracleOptions = {},
): OracleStep | null {
  const turn = conversation.turns.length;
  if (turn === 0)
    return {
      text: 'Let me run the tests first to see what fails.',
      calls: [{ tool: 'run_tests', input: {} }],
    };
  const paths = [...new Set(files.flatMap((f) => (f.oldPath === null ? [] : [f.oldPath])))];
  if (turn <= paths.length) {
    const path = paths[turn - 1] ?? '';
    return {
      text: `Let me look at ${path}.`,
      calls: [
        { tool: 'editor', input: { command: 'view', path } },
        { tool: 'bash', input: { command: `tail -c 1 -- ${quote(path)} | wc -l` } },
      ],
    };
  }

  // Reading goes on until every line of every file is known; the edits start at the turn after.
  let firstEdit = paths.length + 1;
  let known = readFiles(paths, conversation, firstEdit);
  while (!('contents' in known)) {
    if (firstEdit === turn) return known.next;
    // That turn read on; what it read counts from the next one.
    firstEdit++;
    const again = readFiles(paths, conversation, firstEdit);
    if (!('contents' in again) && again.progress <= known.progress) {
      throw new Error(`oracle: cannot read ${known.path}: ${known.stuck}`);
    }
    known = again;
  }

  const edits = planEdits(files, known.contents);
  for (let t = firstEdit; t < turn && t - firstEdit < edits.length; t++) {
    checkEdit(edits[t - firstEdit], conversation, t);
  }
  const e = turn - firstEdit;
  const step = edits[e];
  if (step !== undefined) return step;
  const recheck = options.recheck ?? true;
  if (recheck && e === edits.length)
    return {
      text: 'Let me run the tests again to check the fix.',
      calls: [{ tool: 'run_tests', input: {} }],
    };
  if (e === edits.length + (recheck ? 1 : 0)) {
    const changed = files.map(pathOf).join(', ');
    return {
      text: recheck ? 'The tests pass now.' : 'The fix is in place.',
      calls: [
        { tool: 'finish', input: { summary: options.summary ?? `Fixed the issue by changing ${changed}.` } },
      ],
    };
  }
  return null;
}

/** An edit the agent's tools refused means the files are not what `git apply` would leave. */
function checkEdit(step: OracleStep | undefined, conversation: Conversation, turn: number): void {
  if (step?.expect === undefined) return;
  const call = conversation.turns[turn]?.[0];
  const result = call === undefined ? undefined : conversation.results.get(call.id);
  const what = `${step.text.replace(/\.$/, '')} (turn ${turn})`;
  if (result === undefined) throw new Error(`oracle: no tool result for: ${what}`);
  const refused =
    result.isError ||
    (step.expect === 'created' && /^Overwrote /.test(result.text)) ||
    (step.expect === 'removed' && !/\[exit code 0\]\s*$/.test(result.text));
  if (refused) {
    throw new Error(
      `oracle: the agent's tools refused an edit, so the files differ from what git apply gives: ${what}: ${result.text}`,
    );
  }
}

interface FileKnowledge {
  readonly lines: Map<number, string>;
  total: number | null;
  finalNewline: boolean | null;
}

type ReadState =
  | { readonly contents: Map<string, string> }
  | { readonly next: OracleStep; readonly path: string; readonly stuck: string; readonly progress: number };

/** What the tool results of turns before `beforeTurn` tell about the files. */
function readFiles(paths: readonly string[], conversation: Conversation, beforeTurn: number): ReadState {
  const knowledge = new Map<string, FileKnowledge>(
    paths.map((p) => [p, { lines: new Map(), total: null, finalNewline: null }]),
  );
  for (let t = 1; t < beforeTurn; t++) {
    for (const call of conversation.turns[t] ?? []) {
      const input = (typeof call.input === 'object' && call.input !== null ? call.input : {}) as Record<
        string,
        unknown
      >;
      const result = conversation.results.get(call.id);
      if (EDITORS.has(call.name) && input['command'] === 'view' && typeof input['path'] === 'string') {
        const file = knowledge.get(input['path']);
        if (file === undefined) continue;
        if (result === undefined) throw new Error(`oracle: no tool result for the view of ${input['path']}`);
        if (result.isError && EMPTY_VIEW.test(result.text)) {
          file.total = 0;
        } else if (result.isError) {
          throw new PatchDoesNotApplyError(
            new PatchDoesNotApply(input['path'], null, `cannot be read: ${result.text}`),
          );
        } else {
          readView(file, result.text, input['view_range'] !== undefined);
        }
      } else if (call.name === 'bash' && typeof input['command'] === 'string') {
        const probed = /^tail -c 1 -- (.*) \| wc -l$/.exec(input['command']);
        const path = paths.find((p) => quote(p) === probed?.[1]);
        const file = path === undefined ? undefined : knowledge.get(path);
        if (file === undefined) continue;
        const count = /^\s*([01])\s*$/m.exec(result?.text ?? '');
        if (count === null)
          throw new Error(`oracle: cannot tell whether ${path} ends with a newline: ${result?.text}`);
        file.finalNewline = count[1] === '1';
      }
    }
  }
  const contents = new Map<string, string>();
  let progress = 0;
  for (const [path, file] of knowledge) {
    progress += file.lines.size + (file.total === null ? 0 : 1);
    const missing = firstMissing(file);
    if (missing !== null) {
      const range = [missing, file.total ?? -1];
      return {
        next: {
          text: `Let me read on in ${path}.`,
          calls: [{ tool: 'editor', input: { command: 'view', path, view_range: range } }],
        },
        path,
        stuck: `line ${missing} is too long for the editor's view`,
        progress,
      };
    }
    if (file.finalNewline === null) throw new Error(`oracle: the probe of ${path}'s last byte is missing`);
    const lines = Array.from({ length: file.total ?? 0 }, (_, i) => file.lines.get(i + 1) ?? '');
    contents.set(path, lines.length === 0 ? '' : lines.join('\n') + (file.finalNewline ? '\n' : ''));
  }
  return { contents };
}

function firstMissing(file: FileKnowledge): number | null {
  for (let n = 1; file.total === null || n <= file.total; n++) if (!file.lines.has(n)) return n;
  return null;
}

/** The harness's editor, or Anthropic's text editor where the request offers that (server.ts renames). */
const EDITORS = new Set(['editor', 'str_replace_based_edit_tool', 'str_replace_editor']);

/** The editor refuses to view an empty file: its default range [1, 0] is invalid. */
const EMPTY_VIEW = /^Invalid view_range \[1, 0\]: .* has 0 lines\.$/s;
const TRUNCATED = /\n\n\[\.\.\. \d+ characters omitted; [^\n]*\]\n\n/;
const CAPPED = /\n\[showing lines \d+-\d+ of (\d+); pass view_range to see more\]$/;

/**
 * Lines of the editor's numbered view (`%6d\t<line>`). A view cut in the middle loses the lines
 * around the cut (they may be partial); a capped one says how many lines the file has.
 */
function readView(file: FileKnowledge, content: string, ranged: boolean): void {
  let body = content;
  const capped = CAPPED.exec(body);
  if (capped !== null) {
    file.total = Number(capped[1]);
    body = body.slice(0, capped.index);
  }
  const cut = TRUNCATED.exec(body);
  const head = cut === null ? body : body.slice(0, cut.index);
  const tail = cut === null ? '' : body.slice(cut.index + cut[0].length);
  const headLines = head === '' ? [] : head.split('\n');
  if (cut !== null) headLines.pop();
  const tailLines = tail.split('\n').slice(1);
  let last = 0;
  for (const line of [...headLines, ...tailLines]) {
    const numbered = /^ *(\d+)\t([\s\S]*)$/.exec(line);
    if (numbered === null)
      throw new Error(`oracle: not a line of the editor's view: ${JSON.stringify(line)}`);
    last = Number(numbered[1]);
    file.lines.set(last, numbered[2] ?? '');
  }
  // A whole-file view that is not capped ends with the file's last line, unless the cut took it.
  if (!ranged && capped === null && (cut === null || tailLines.length > 0)) file.total = last;
}

/**
 * The edit turns for `files` applied to `contents` (path → text of each file the patch changes or
 * deletes), with `git apply`'s result; throws when `git apply` would refuse the patch.
 */
export function planEdits(files: readonly FilePatch[], contents: ReadonlyMap<string, string>): OracleStep[] {
  const state = new Map<string, string | null>(contents);
  const steps: OracleStep[] = [];
  try {
    for (const file of files) {
      const path = pathOf(file);
      const current = state.get(path) ?? null;
      if (file.oldPath === null) {
        if (current !== null)
          throw new PatchDoesNotApply(path, null, 'already exists, but the patch creates it');
        const { text } = applyFileHunks(path, '', file.hunks);
        steps.push({
          text: `I'll create ${path}.`,
          calls: [{ tool: 'editor', input: { command: 'create', path, file_text: text } }],
          expect: 'created',
        });
        state.set(path, text);
        continue;
      }
      if (current === null)
        throw new PatchDoesNotApply(path, null, 'does not exist, but the patch changes it');
      const applied = applyFileHunks(path, current, file.hunks);
      if (file.newPath === null) {
        if (applied.text !== '')
          throw new PatchDoesNotApply(path, null, 'the removal patch leaves file contents');
        steps.push({
          text: `${path} is no longer needed.`,
          calls: [{ tool: 'bash', input: { command: `rm -- ${quote(path)}` } }],
          expect: 'removed',
        });
        state.set(path, null);
        continue;
      }
      for (const hunk of applied.hunks) {
        steps.push({
          text: `Now I'll change ${path} (edit ${hunk.hunk} of ${applied.hunks.length}).`,
          calls: [{ tool: 'editor', input: editFor(path, hunk) }],
          expect: 'edited',
        });
      }
      state.set(path, applied.text);
    }
  } catch (error) {
    if (error instanceof PatchDoesNotApply) throw new PatchDoesNotApplyError(error);
    throw error;
  }
  return steps;
}

/**
 * The editor call that turns `hunk.before` into `hunk.after`: a str_replace of the lines git
 * replaced, widened by a line on each side at a time until old_str occurs once (the editor refuses
 * an ambiguous one); an empty file is rewritten whole.
 */
export function editFor(path: string, hunk: AppliedHunk): Record<string, unknown> {
  const { before, after } = hunk;
  if (before === '') return { command: 'create', path, file_text: after };
  const lines = splitLines(before);
  const offsets = [0];
  for (const line of lines) offsets.push((offsets.at(-1) ?? 0) + line.length);
  const at = (n: number): number => offsets[n] ?? before.length;
  const start = at(hunk.line);
  const end = at(hunk.line + hunk.removedLines);
  for (let k = 0; ; k++) {
    const from = at(Math.max(0, hunk.line - k));
    const to = at(Math.min(lines.length, hunk.line + hunk.removedLines + k));
    const oldStr = before.slice(from, to);
    if (oldStr !== '' && occurrences(before, oldStr) === 1) {
      const newStr = before.slice(from, start) + hunk.inserted + before.slice(end, to);
      if (before.slice(0, from) + newStr + before.slice(to) !== after) {
        throw new Error(
          `oracle: internal error: the edit of ${path} for hunk #${hunk.hunk} does not give git's result`,
        );
      }
      return { command: 'str_replace', path, old_str: oldStr, new_str: newStr };
    }
  }
}

/** Occurrences, overlapping ones too, as the editor counts them. */
function occurrences(haystack: string, needle: string): number {
  let n = 0;
  for (let i = haystack.indexOf(needle); i >= 0; i = haystack.indexOf(needle, i + 1)) n++;
  return n;
}

function quote(path: string): string {
  return `'${path.replaceAll("'", "'\\''")}'`;
}

function pathOf(file: FilePatch): string {
  const path = file.newPath ?? file.oldPath;
  if (path === null) throw new Error('oracle: a file patch without a path');
  return path;
}
