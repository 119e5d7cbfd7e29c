import type { AgentEvent, EventOf } from '../events/schema.js';
import { isReadOnlyCommand } from './read-only-command.js';

/**
 * The model's first move is usually to run the tests, before it has changed anything. The harness
 * has just run that same command on that same tree (the baseline) and told the model the result in
 * its first message, so running it again costs a whole test run for nothing. While nothing can have
 * changed since the baseline, an unfiltered `run_tests` answers with the baseline's result, saying
 * so (tools/run-tests.ts); the model can still run the tests again through bash.
 *
 * "Nothing can have changed" is decided from the log alone (so a resumed run agrees): every action
 * since the baseline only read. That is an editor `view`, a `search`, a bash command that
 * `isReadOnlyCommand` vouches for, a question, or another unfiltered `run_tests` (itself answered
 * this way). Anything else ends the reuse for the rest of the run, even if it changed nothing: an
 * edit, any other command, a filtered test run, a delegated exploration, an MCP tool.
 *
 * This only shapes what the agent sees. The verdict never reuses anything: its final run is always
 * made by the harness after the agent has finished.
 */
export function reusableBaseline(events: readonly AgentEvent[]): EventOf<'test_run'> | null {
  let baseline: EventOf<'test_run'> | null = null;
  for (const e of events) {
    if (e.kind === 'test_run' && e.phase === 'baseline') baseline = e;
    else if (baseline !== null && e.kind === 'action' && !onlyReads(e.tool, e.input)) return null;
  }
  // A run that was stopped says little about the next one: that one is run.
  return baseline !== null && baseline.killed === null ? baseline : null;
}

/** Whether this `run_tests` input asks for the whole suite (no filter): the only kind reused. */
function isWholeSuite(input: unknown): boolean {
  return field(input, 'filter') === undefined;
}

function onlyReads(tool: string, input: unknown): boolean {
  switch (tool) {
    case 'editor':
      return field(input, 'command') === 'view';
    case 'search':
    case 'ask_for_clarification':
      return true;
    case 'bash': {
      const command = field(input, 'command');
      return typeof command === 'string' && isReadOnlyCommand(command);
    }
    case 'run_tests':
      return isWholeSuite(input);
    default:
      return false;
  }
}

function field(input: unknown, name: string): unknown {
  return typeof input === 'object' && input !== null ? (input as Record<string, unknown>)[name] : undefined;
}
