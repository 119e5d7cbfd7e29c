import { reduceState, type RunState } from '../events/reduce-state.js';
import type { AgentEvent, NewEvent } from '../events/schema.js';
import { AgentRun, type AgentDeps } from './agent-run.js';
import { baselineKey, keepable } from './baseline-cache.js';
import { conclude } from './final-verification.js';
import { describedWorkspace } from './resume-check.js';
import { recordedRun, runTestCommand } from './run-test-command.js';
import { finishWith, StopRun, throwIfCancelled, toStop, type Outcome } from './run-stop.js';
import { step, toolCalls } from './step.js';
import { loadTaskImages } from './task-images.js';
import { WorkspaceGit, WorkspaceGitError } from './workspace-git.js';

export type { AgentDeps, FreshVerifier } from './agent-run.js';
export type { Outcome } from './run-stop.js';
export { judge } from './final-verification.js';

/**
 * The Edit-Run-Verify loop. Everything it decides comes from the event log (state = reduce(events)),
 * every step is appended before the next begins, and a run whose log already has steps continues
 * where it stopped: answered model calls are not repeated and the workspace is put back to the last
 * checkpoint. It never throws for anything a run can hit; every way it ends is an outcome event,
 * recorded by `conclude` (final-verification.ts).
 *
 * The driver: the workspace made the log's, the baseline, then `step` (step.ts: one model call and
 * its tool calls) until the log says the loop ends or a step stops the run.
 */
export async function runAgent(deps: AgentDeps): Promise<Outcome> {
  const { store } = deps;
  const existing = reduceState(store.events);
  if (existing.outcome !== null) return existing.outcome;
  const segmentStart = Date.now();
  let git: WorkspaceGit;
  try {
    git = await WorkspaceGit.open(deps.sandbox);
  } catch (error) {
    const append = async (event: NewEvent): Promise<AgentEvent> => {
      const stored = await store.append(event);
      deps.onEvent?.(stored);
      return stored;
    };
    const reason = `could not open the workspace: ${error instanceof Error ? error.message : String(error)}`;
    return await finishWith(append, { outcome: 'failed', reason, cause: 'workspace' }, null, '');
  }

  const run = new AgentRun(deps, git, existing, segmentStart);
  try {
    run.images = await loadTaskImages(store, deps.logger);
    if (store.events.length > 0) await resume(run, existing);
    for (const n of deps.notices ?? []) {
      if (!store.events.some((e) => e.kind === 'warning' && e.message === n.message))
        await run.append({ kind: 'warning', code: n.code, message: n.message });
    }
    await recordBaseline(run, existing);
    // The calls of a turn a crash interrupted come first (none on a new run); then step after step.
    let end = await toolCalls(run);
    while (end === null) end = await step(run);
    return await conclude(run, end);
  } catch (error) {
    const stop = toStop(error, deps.signal);
    if (stop === null) throw error;
    return await conclude(run, { kind: 'stopped', stop });
  } finally {
    run.spans.end();
  }
}

/**
 * A run whose log has events goes on from them. The workspace the log describes is its last
 * checkpoint, which every recorded change of a tool call is in (a step is recorded checkpoint
 * first). A log that says otherwise, or a checkpoint that cannot be rebuilt here, stops the run
 * with a typed cause: going on would let the model build on files that are not what it was told.
 */
async function resume(run: AgentRun, existing: RunState): Promise<void> {
  const baseTree = run.base.workspace.baseTree;
  const described = describedWorkspace(baseTree, run.store.events);
  await run.append({ kind: 'run_resumed', pid: process.pid });
  if (!described.ok)
    throw new StopRun({ outcome: 'failed', cause: described.cause, reason: described.reason });
  if (run.workspaceKnown) return;
  let from: 'object' | 'diff';
  try {
    from = await run.git.restore(baseTree, run.lastTree, existing.lastCheckpoint?.diff ?? null);
  } catch (error) {
    if (!(error instanceof WorkspaceGitError)) throw error;
    throw new StopRun({
      outcome: 'failed',
      cause: 'resume_unrestorable',
      reason: `the workspace could not be rebuilt as the log describes it (tree ${run.lastTree}): ${error.message}`,
    });
  }
  run.workspaceKnown = true;
  run.logger?.info({ tree: run.lastTree, from }, 'workspace restored to the last checkpoint');
}

/**
 * The baseline: the tests before any edit, run by the harness, not the model; or an earlier run's
 * on the same base tree, environment and test command (recorded as reused, and from where). Once
 * per run: a resumed run that has it does not run it again.
 */
async function recordBaseline(run: AgentRun, existing: RunState): Promise<void> {
  const { base, deps } = run;
  if (base.testCommand === null || existing.baseline !== null) return;
  throwIfCancelled(run.signal);
  const key = deps.baselines === undefined ? null : baselineKey(base);
  const reused = key === null ? null : await deps.baselines?.get(key).catch(() => null);
  if (reused != null) {
    await run.append({
      kind: 'test_run',
      phase: 'baseline',
      ...reused.run,
      reusedFrom: { conversationId: reused.conversationId, ts: reused.ts },
    });
    run.logger?.info({ from: reused.conversationId }, 'baseline reused');
    return;
  }
  const r = await runTestCommand(run.sandbox, base.testCommand, run.limits, run.signal, 'harness');
  // What the baseline run wrote (snapshots, build output, a fixture it rewrote) is the harness's,
  // not the agent's: the workspace goes back to the tree it ran on.
  await run.git.restore(base.workspace.baseTree, run.lastTree, existing.lastCheckpoint?.diff ?? null);
  const recorded = recordedRun(r, run.scrub);
  const stored = await run.append({ kind: 'test_run', phase: 'baseline', ...recorded });
  if (key !== null && keepable(recorded)) {
    await deps.baselines
      ?.put(key, { run: recorded, conversationId: base.conversationId, ts: stored.ts })
      .catch((error: unknown) => run.logger?.warn({ err: error }, 'could not keep the baseline'));
  }
}
