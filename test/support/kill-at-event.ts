/**
 * Loaded with `--import` into a CLI process under test (test/cli/crash-consistent-steps.test.ts):
 * SIGKILLs the process at a named point of its first editing step (the first editor call that
 * writes a file), so a kill test lands exactly there instead of wherever a timer happens to.
 *
 * `KILL_AT_EVENT=<when>:<kind>`: `when` is `before` (the append was asked for and nothing of it is
 * written) or `after` (the event is durable: the append returned); `kind` is `action`,
 * `checkpoint` or `observation`, the step's own (the checkpoint naming the edit's call, or, in a
 * log that does not name calls, the first checkpoint after its action).
 *
 * It wraps FileEventStore's append, the one door every event of a CLI run goes through: a test
 * seam from outside, so the product carries no kill switch.
 */
import { FileEventStore } from '../../src/events/file-event-store.js';
import type { AgentEvent, NewEvent } from '../../src/events/schema.js';

const EDITOR_WRITES = new Set(['create', 'str_replace', 'insert', 'undo_edit']);

const spec = /^(before|after):(action|checkpoint|observation)$/.exec(process.env.KILL_AT_EVENT ?? '');
if (spec === null) throw new Error(`KILL_AT_EVENT must be <before|after>:<action|checkpoint|observation>`);
const [, when, kind] = spec;

/** The edit's tool_use id, once its action is asked to be appended. */
let edit: string | null = null;

function isEdit(event: NewEvent): boolean {
  if (event.kind !== 'action' || event.tool !== 'editor' || edit !== null) return false;
  const input = event.input;
  return (
    typeof input === 'object' &&
    input !== null &&
    'command' in input &&
    typeof input.command === 'string' &&
    EDITOR_WRITES.has(input.command)
  );
}

function hit(event: NewEvent): boolean {
  if (event.kind !== kind || edit === null) return false;
  if (event.kind === 'action' || event.kind === 'observation') return event.toolUseId === edit;
  return event.kind === 'checkpoint' && (event.toolUseId ?? edit) === edit;
}

function die(): never {
  process.kill(process.pid, 'SIGKILL');
  throw new Error('unreachable: SIGKILL was sent');
}

// eslint-disable-next-line @typescript-eslint/unbound-method -- called with its store below (.call)
const append = FileEventStore.prototype.append;
FileEventStore.prototype.append = async function (
  this: FileEventStore,
  event: NewEvent,
): Promise<AgentEvent> {
  if (isEdit(event) && event.kind === 'action') edit = event.toolUseId;
  const target = hit(event);
  if (target && when === 'before') die();
  const stored = await append.call(this, event);
  if (target && when === 'after') die();
  return stored;
};
