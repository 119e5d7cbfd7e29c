import { mainEvents } from '../events/reduce-state.js';
import type { AgentEvent, EventOf, NewEvent, ToolUseBlock } from '../events/schema.js';

/**
 * Why a resumed run stopped instead of going on (an outcome `failed` with this cause):
 * `resume_unrecorded_change`: the log says a call changed files that no checkpoint holds, so no
 * workspace can be rebuilt that matches the conversation; `resume_unrestorable`: the last
 * checkpoint could not be rebuilt here (its diff was too large to record, does not apply, or does
 * not give the checkpoint's tree).
 */
export type ResumeCause = 'resume_unrecorded_change' | 'resume_unrestorable';

export type DescribedWorkspace =
  | { readonly ok: true; readonly tree: string }
  | { readonly ok: false; readonly cause: ResumeCause; readonly reason: string };

/** Editor commands that write a file when they succeed. */
const EDITOR_WRITES = new Set(['create', 'str_replace', 'insert', 'undo_edit']);

/**
 * The workspace tree a log describes: its last checkpoint's (the base tree before any), checked
 * against what its observations say. A resume rebuilds that tree, and `WorkspaceGit.restore`
 * checks the rebuilt workspace is it, file for file; this checks the conversation agrees, so a
 * resumed run never goes on with a model that was told of a change the workspace lacks.
 *
 * - An observation that states its tree (every call that may change files, in logs this build
 *   writes) must state the last checkpoint's: the call's own checkpoint is written before it.
 * - Logs written before steps were recorded checkpoint first put the checkpoint after the
 *   observation, and a process killed between the two left a successful edit with no checkpoint:
 *   an editor write (the one call known to change files when it succeeds) followed by the resume
 *   or the end of the log, with no checkpoint after it, is refused. A `bash` call in such a log
 *   cannot be told apart from one that changed nothing, and is trusted, as before.
 */
export function describedWorkspace(baseTree: string, events: readonly AgentEvent[]): DescribedWorkspace {
  let tree = baseTree;
  const inputs = new Map<string, unknown>();
  /** A legacy editor write whose checkpoint has not followed yet. */
  let open: EventOf<'observation'> | null = null;
  for (const e of mainEvents(events)) {
    if (open !== null && e.kind === 'run_resumed') return unrecorded(open);
    // Anything else the old loop could write after the observation (guidance before the
    // checkpoint aside) means the call changed nothing and the run went on.
    if (open !== null && e.kind !== 'guidance_added' && e.kind !== 'checkpoint') open = null;
    switch (e.kind) {
      case 'action':
        inputs.set(e.toolUseId, e.input);
        break;
      case 'checkpoint':
        tree = e.tree;
        open = null;
        break;
      case 'observation':
        if (e.tree !== undefined) {
          if (e.tree !== tree)
            return {
              ok: false,
              cause: 'resume_unrecorded_change',
              reason: `the log says the ${e.tool} call ${e.toolUseId} (event ${e.id}) left the workspace at tree ${e.tree}, but the last checkpoint before it holds ${tree}`,
            };
        } else if (!e.isError && e.tool === 'editor' && editorWrites(inputs.get(e.toolUseId))) {
          open = e;
        }
        break;
      default:
        break;
    }
  }
  return open === null ? { ok: true, tree } : unrecorded(open);
}

function unrecorded(o: EventOf<'observation'>): DescribedWorkspace {
  return {
    ok: false,
    cause: 'resume_unrecorded_change',
    reason: `the log records the editor's change of event ${o.id} (${o.content.split('\n')[0]?.slice(0, 200) ?? ''}) but no checkpoint holding it: the run was killed between the two (a log written before steps were recorded checkpoint first), so the workspace cannot be put back as the conversation describes`,
  };
}

function editorWrites(input: unknown): boolean {
  if (typeof input !== 'object' || input === null || !('command' in input)) return false;
  return typeof input.command === 'string' && EDITOR_WRITES.has(input.command);
}

/**
 * The checkpoint a call of the current turn wrote before its observation, when a crash came in
 * between (null: the call has no checkpoint, so its change, if any, was never recorded and the
 * restored workspace is from before it: the call runs again).
 */
export function recordedCheckpoint(
  events: readonly AgentEvent[],
  toolUseId: string,
): EventOf<'checkpoint'> | null {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i];
    if (e === undefined) continue;
    if (e.kind === 'model_response' && e.parent === undefined) return null;
    if (e.kind === 'checkpoint' && e.toolUseId === toolUseId) return e;
  }
  return null;
}

/**
 * The observation of a call that ran to its end and whose change was recorded (`checkpoint`), when
 * the process died before the observation was: the call is not run again (it may not be
 * idempotent: an insert, an append), and its output is lost, which the model is told. Only harness
 * facts are in it, never the call's output.
 */
export function interruptedObservation(
  use: ToolUseBlock,
  checkpoint: EventOf<'checkpoint'>,
  /** The harness tool the call ran as (tools/native.ts). */
  tool = use.name,
): NewEvent {
  return {
    kind: 'observation',
    toolUseId: use.id,
    tool,
    isError: false,
    content: `This call ran and changed files (${checkpoint.filesChanged} file${checkpoint.filesChanged === 1 ? '' : 's'} now differ from the base), but the run was interrupted before its output was recorded, so the output is lost. The files are as the call left them; view them if you need to see the result.`,
    durationMs: 0,
    tree: checkpoint.tree,
  };
}
