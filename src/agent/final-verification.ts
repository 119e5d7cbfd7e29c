import { reduceState, type RunState } from '../events/reduce-state.js';
import type { AgentEvent, EventOf, NewEvent } from '../events/schema.js';
import { isTestPath } from '../testing/test-paths.js';
import { proofFiles, verdict, wouldResolve } from '../testing/verdict.js';
import type { AgentRun } from './agent-run.js';
import { freshSandbox, ownSandbox, type FinalRunPlace } from './final-run-place.js';
import { recordedRun, type TestRunResult } from './run-test-command.js';
import { finishWith, throwIfCancelled, type Outcome, type Stop } from './run-stop.js';
import { runnerConfigField, withRunnerConfigNote } from './runner-config-guard.js';
import type { LoopEnd } from './step.js';
import { checkSyntaxCached } from './syntax-check.js';
import type { ToolContext } from './tools/tool.js';
import type { WorkspaceGit } from './workspace-git.js';

/**
 * The outcome of every way the loop ends, recorded. A question: `needs_info`, nothing checked (the
 * question is refused after a change, so there is none). A stop: the workspace's change recorded as
 * far as it can be, with the stop's outcome. Done: the harness's verification, the one path to a
 * verdict (`verify`).
 */
export async function conclude(run: AgentRun, end: LoopEnd): Promise<Outcome> {
  switch (end.kind) {
    case 'question': {
      const questions = end.question.questions.map((q, i) => `${i + 1}. ${q}`).join('\n');
      return await finishWith(
        run.append,
        { outcome: 'needs_info', reason: end.question.missing },
        questions,
        '',
      );
    }
    case 'stopped': {
      let diffStat = '';
      try {
        if (run.workspaceKnown) {
          await run.checkpoint();
          diffStat = await run.git.diffStat(run.base.workspace.baseTree, run.lastTree);
        }
      } catch {
        // The sandbox may be gone; the outcome matters more than the stat.
      }
      return await finishWith(run.append, end.stop, reduceState(run.store.events).finishSummary, diffStat);
    }
    case 'done':
      return await verify(run);
  }
}

/** Verification by the harness: the change recorded, its files' syntax, then the verdict. */
async function verify(run: AgentRun): Promise<Outcome> {
  const baseTree = run.base.workspace.baseTree;
  await run.checkpoint();
  if (run.lastTree !== baseTree && !run.store.events.some((e) => e.kind === 'syntax_check')) {
    await run.append(await finalSyntax(run.ctx, run.git, baseTree, run.lastTree));
  }
  const state = reduceState(run.store.events);
  const summary = state.finishSummary ?? lastText(run.store.events);
  const diffStat = await run.git.diffStat(baseTree, run.lastTree);
  return await finishWith(run.append, await verdictOf(run, state), summary, diffStat);
}

async function verdictOf(run: AgentRun, state: RunState): Promise<Stop> {
  if (run.lastTree === run.base.workspace.baseTree)
    return { outcome: 'no_change', reason: 'the agent finished without changing any file' };
  const testCommand = run.base.testCommand;
  if (testCommand === null)
    return {
      outcome: 'unverified',
      reason: 'no test command is known for this repository, so the change is not proven',
    };
  throwIfCancelled(run.signal);
  const spec = {
    baseTree: run.base.workspace.baseTree,
    baseCommit: run.base.workspace.baseCommit,
    tree: run.lastTree,
    diff: state.lastCheckpoint?.diff ?? null,
    testCommand,
    limits: run.limits,
    baseline: state.baseline,
    signal: run.signal,
  };
  const verifier = run.deps.verifier;
  const place =
    verifier === undefined
      ? ownSandbox(run.sandbox, run.git, spec)
      : freshSandbox(verifier, spec, run.logger);
  return await finalRuns(run, state, place);
}

/**
 * The final run in `place`, recorded; when it would resolve the issue, the tests run once more on
 * the code before the change, with the change's test files (`withoutFixPaths`; runner configuration
 * the base's there too, never one of the change's files): a test that passes without the change's
 * code, or whose failure before was chance (a flaky test, or a cached baseline's one bad run), is
 * not taken as proof. This run is made even when the change changed no test file, at the cost of
 * one more test run for every change that would be proven. Each run is recorded as soon as it
 * ends. The verdict of them is the run's stop.
 */
async function finalRuns(run: AgentRun, state: RunState, place: FinalRunPlace): Promise<Stop> {
  const baseTree = run.base.workspace.baseTree;
  const record = async (
    phase: 'final' | 'without_fix',
    r: TestRunResult,
    extra: Pick<EventOf<'test_run'>, 'runnerConfig' | 'changeFiles'>,
  ): Promise<EventOf<'test_run'>> =>
    (await run.append({
      kind: 'test_run',
      phase,
      ...recordedRun(r, run.scrub),
      ...place.recordedAs,
      ...extra,
    })) as EventOf<'test_run'>;
  try {
    const proof = await place.prepare();
    if (!proof.ok) return { outcome: 'unverified', reason: proof.reason };
    const final = await record('final', await place.run(), runnerConfigField(proof));
    let withoutFix: EventOf<'test_run'> | undefined;
    if (wouldResolve(state.baseline, final)) {
      const changed = await run.git.changedFiles(baseTree, run.lastTree);
      const paths = withoutFixPaths(changed, proofFiles(state.baseline, final), proof.fromBase);
      await place.checkoutOnly(paths);
      withoutFix = await record('without_fix', await place.run(), {
        changeFiles: { paths: paths.slice(0, MAX_RECORDED_PATHS), total: paths.length },
      });
    }
    return withRunnerConfigNote(judge(state.baseline, final, withoutFix), final);
  } finally {
    await place.close();
  }
}

/** Paths of a `without_fix` run's `changeFiles` recorded (the total is always). */
const MAX_RECORDED_PATHS = 50;

/**
 * The change's files the `without_fix` run takes at the change's version: its test files by name
 * (testing/test-paths.ts), and every changed file that holds a test the verdict would count as
 * proof, whatever its name (a `calc_test.js` at the root, a doctest), so a test whose expectation
 * the change edited is run as edited on the code before the change and passes there: not proof.
 * Runner configuration stays the base's (`fromBase`) as in the final run.
 */
export function withoutFixPaths(
  changed: readonly string[],
  proving: ReadonlySet<string>,
  fromBase: ReadonlySet<string>,
): string[] {
  return changed.filter((p) => (isTestPath(p) || proving.has(p)) && !fromBase.has(p));
}

/**
 * The verdict of principle 6 as the stop the run ends with (the rules are in testing/verdict.ts):
 * per test when both runs name tests, by exit code otherwise, and never `resolved` when the
 * baseline could not run (cause `environment`).
 */
export function judge(
  baseline: EventOf<'test_run'> | null,
  final: EventOf<'test_run'>,
  withoutFix?: EventOf<'test_run'>,
): Stop {
  const v = verdict(baseline, final, withoutFix);
  return { outcome: v.outcome, reason: v.reason, ...(v.cause === undefined ? {} : { cause: v.cause }) };
}

/** The model's last words, for a run that ended without a finish summary. */
function lastText(events: readonly AgentEvent[]): string | null {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i];
    if (e?.kind === 'model_response') {
      const t = e.content.find((b) => b.type === 'text');
      if (t !== undefined && t.text.trim() !== '') return t.text.trim();
    }
  }
  return null;
}

/** Changed files checked at most, and their size limit, at the end of a run. */
const FINAL_SYNTAX_FILES = 200;

/** The syntax of every changed file as the run ends: what the PR states about files that do not parse. */
async function finalSyntax(
  ctx: ToolContext,
  git: WorkspaceGit,
  baseTree: string,
  tree: string,
): Promise<NewEvent> {
  const failures: { path: string; checker: string; message: string }[] = [];
  let checked = 0;
  let unchecked = 0;
  const paths = await git.changedFiles(baseTree, tree);
  for (const [i, path] of paths.entries()) {
    if (i >= FINAL_SYNTAX_FILES) {
      unchecked += paths.length - i;
      break;
    }
    const { stat, data } = await ctx.files.read(path).catch(() => ({ stat: null, data: Buffer.alloc(0) }));
    if (stat?.kind !== 'file' || data.subarray(0, 8000).includes(0)) {
      unchecked++;
      continue;
    }
    const r = await checkSyntaxCached(ctx.syntax, ctx.sandbox, path, data.toString('utf8'), ctx.signal);
    if (r.kind === 'unchecked') unchecked++;
    else checked++;
    if (r.kind === 'error') failures.push({ path, checker: r.checker, message: r.message });
  }
  return { kind: 'syntax_check', checked, unchecked, failures };
}
