import { baselineKey, keepable, type BaselineCache, type BaselineRun } from './baseline-cache.js';
import type { Logger } from 'pino';
import type { AgentEvent, EventOf, Limits, NewEvent, ToolUseBlock } from '../events/schema.js';
import type { EventStore } from '../events/event-store.js';
import { mainEvents, reduceState, totalTokens, type RunState } from '../events/reduce-state.js';
import { ModelError, type Model, type ModelRequest } from '../model/model.js';
import { costUsd, findPrice, type PriceTable } from '../model/pricing.js';
import { SandboxError, type Sandbox } from '../sandbox/sandbox.js';
import { chooseCondensationPoint, summarizeTurns } from './condense.js';
import { buildMessages, estimateTokens } from './conversation.js';
import { systemPrompt } from './prompt.js';
import { runTestCommand, type TestRunResult } from './run-test-command.js';
import { DEFAULT_STUCK, detectStuck, type StuckThresholds } from './stuck.js';
import { defaultTools } from './tools/index.js';
import { askTool } from './tools/ask.js';
import { asRunFailure, type RunControl } from './tools/run-control.js';
import { StepSpans } from '../telemetry/tracing.js';
import { newToolContext, runToolCall, toolSpec, type Tool } from './tools/tool.js';
import { explore } from './explore.js';
import { WorkspaceGit, WorkspaceGitError } from './workspace-git.js';
import { describedWorkspace, interruptedObservation, recordedCheckpoint } from './resume-check.js';
import { isReadOnlyCommand } from './read-only-command.js';
import { reusableBaseline } from './baseline-answer.js';
import { verdict, wouldResolve } from '../testing/verdict.js';
import { isTestPath } from '../testing/test-paths.js';
import { appliesFromStart, covers, workspaceRelative } from './instructions.js';
import { checkSyntaxCached } from './syntax-check.js';
import { proofTree, runnerConfigField, withRunnerConfigNote, type ProofTree } from './runner-config-guard.js';

export interface AgentDeps {
  readonly store: EventStore;
  readonly sandbox: Sandbox;
  readonly model: Model;
  readonly prices: PriceTable;
  /** Aborting cancels the run at the next step boundary and kills the running command or model call. */
  readonly signal?: AbortSignal | undefined;
  readonly logger?: Logger | undefined;
  /** Called after each event is durable (progress lines, live views). */
  readonly onEvent?: ((event: AgentEvent) => void) | undefined;
  readonly tools?: ReadonlyMap<string, Tool> | undefined;
  readonly stuck?: StuckThresholds | undefined;
  /**
   * Applied to every command and test output before it is stored or shown to the model: the host's
   * redactor, so a secret that a command should never have seen (in a weak sandbox) still never
   * reaches the model, the trajectory or a PR. Default: outputs as they are.
   */
  readonly scrub?: ((text: string) => string) | undefined;
  /** Baselines of earlier runs of this repository, reused when the key matches (baseline-cache.ts). */
  readonly baselines?: BaselineCache | undefined;
  /**
   * Warnings from preparing the run (an MCP server that did not start): recorded once each, before
   * the first model call, so the model and the trajectory see them.
   */
  readonly notices?: readonly { readonly code: 'mcp_unavailable'; readonly message: string }[] | undefined;
  /**
   * Where the verdict's final run happens. Absent: in the agent's own sandbox (through the harness
   * shell). Present: in a sandbox this opens, which no agent process ever ran in, after the recorded
   * change is applied there; see FreshVerifier.
   */
  readonly verifier?: FreshVerifier | undefined;
}

/**
 * A source of sandboxes for the final run that the agent never touched. Everything the agent can
 * change in its own sandbox without it showing in the change (its home and the npm or pip settings
 * there, installed packages, the tools folder first on the tests' PATH, processes it left running)
 * can make the tests there pass whatever the code does. A sandbox from `open` has only the base
 * commit's files and the run's environment; the run applies the change it will publish (the last
 * checkpoint's diff) and checks the result is the checkpoint's tree before testing it. The verdict
 * is then a function of the base, the environment and the published change alone.
 */
export interface FreshVerifier {
  /** A new sandbox holding `baseCommit`'s files and the run's environment; the run closes it. */
  open(baseCommit: string): Promise<{ readonly sandbox: Sandbox; close(): Promise<void> }>;
}

export type Outcome = EventOf<'outcome'>;

type Stop = Omit<EventOf<'outcome'>, 'id' | 'ts' | 'kind' | 'diffStat' | 'summary'>;

class StopRun extends Error {
  constructor(readonly stop: Stop) {
    super(stop.reason);
  }
}

/**
 * The Edit-Run-Verify loop. Everything it decides comes from the event log (state = reduce(events)),
 * every step is appended before the next begins, and a run whose log already has steps continues
 * where it stopped: answered model calls are not repeated and the workspace is put back to the last
 * checkpoint. It never throws for anything a run can hit; every way it ends is an outcome event.
 */
export async function runAgent(deps: AgentDeps): Promise<Outcome> {
  const { store, sandbox, model } = deps;
  const base = store.base;
  const limits = base.limits;
  // Pre-flight triage: the base state decides (so a resumed run offers the same tools).
  const tools =
    base.triage === true
      ? new Map([...(deps.tools ?? defaultTools()), [askTool.name, askTool]])
      : (deps.tools ?? defaultTools());
  const specs = [...tools.values()].map(toolSpec);
  const system = systemPrompt(sandbox.workdir);
  const price = findPrice(deps.prices, model.name);
  const scrub = deps.scrub ?? ((text: string) => text);

  const append = async (event: NewEvent): Promise<AgentEvent> => {
    const stored = await store.append(event);
    deps.onEvent?.(stored);
    return stored;
  };

  const existing = reduceState(store.events);
  if (existing.outcome !== null) return existing.outcome;
  const priorMs = existing.elapsedMs;
  const segmentStart = Date.now();
  const elapsed = (): number => priorMs + (Date.now() - segmentStart);

  let git: WorkspaceGit;
  try {
    git = await WorkspaceGit.open(sandbox);
  } catch (error) {
    return finishWith(
      append,
      { outcome: 'failed', reason: `could not open the workspace: ${message(error)}`, cause: 'workspace' },
      null,
      '',
    );
  }

  const ctx = newToolContext({ sandbox, limits, signal: deps.signal, testCommand: base.testCommand });
  let lastTree = existing.lastCheckpoint?.tree ?? base.workspace.baseTree;
  // Whether the workspace is the tree the log describes. Not yet, on a resume that must rebuild it:
  // a run that stops before it is rebuilt records no checkpoint of whatever the workspace holds.
  const mustRestore = store.events.length > 0 && (existing.lastCheckpoint !== null || existing.steps > 0);
  let workspaceKnown = !mustRestore;

  /**
   * Records the workspace as a checkpoint when it changed; the tree it is at. `toolUseId`: the
   * call whose change it is, recorded before that call's observation (see the tool loop).
   */
  const checkpoint = async (toolUseId?: string): Promise<string> => {
    const tree = await git.snapshot();
    if (tree === lastTree) return tree;
    const d = await git.diff(base.workspace.baseTree, tree);
    const leftOut = await git.leftOut();
    // A diff that did not fit the capture is not recorded; restore then needs the tree object.
    await append({
      kind: 'checkpoint',
      tree,
      diff: d.truncated ? null : d.diff,
      filesChanged: d.files,
      ...(leftOut.length > 0 ? { leftOut } : {}),
      ...(toolUseId === undefined ? {} : { toolUseId }),
    });
    lastTree = tree;
    return tree;
  };

  // Instruction files not yet in the conversation that cover a path the agent works on are added
  // after that tool's result (once each; the log says which are in, so a resumed run agrees).
  const instructionFiles = base.instructions?.files ?? [];
  const addGuidance = async (input: unknown): Promise<void> => {
    const path = pathOf(input);
    if (path === null || instructionFiles.length === 0) return;
    const rel = workspaceRelative(path, sandbox.workdir);
    if (rel === null) return;
    const added = new Set<string>();
    for (const e of store.events) if (e.kind === 'guidance_added') for (const p of e.paths) added.add(p);
    const paths = instructionFiles
      .filter((f) => f.included && !appliesFromStart(f) && !added.has(f.path) && covers(f, rel))
      .map((f) => f.path);
    if (paths.length > 0) await append({ kind: 'guidance_added', paths, touched: rel });
  };

  // What the tools that act on the run may ask of it (run-control.ts), for the call `use`.
  const control = (use: ToolUseBlock): RunControl => ({
    changedFiles: lastTree !== base.workspace.baseTree,
    reusableBaseline: () => reusableBaseline(store.events),
    delegate: (question, maxSteps) =>
      asRunFailure(() => {
        const state = reduceState(store.events);
        return explore({
          id: use.id,
          question,
          maxSteps,
          events: () => store.events,
          append,
          model,
          price,
          tools,
          ctx,
          limits,
          remaining: {
            tokens: Math.max(0, limits.maxTokens - totalTokens(state.usage)),
            usd: Math.max(0, limits.maxUsd - state.usd),
          },
          signal: deps.signal,
          scrub,
        });
      }),
  });

  const steps = new StepSpans();
  try {
    if (store.events.length > 0) {
      // The workspace the log describes: its last checkpoint, which every recorded change of a
      // tool call is in (a step is recorded checkpoint first). A log that says otherwise, or a
      // checkpoint that cannot be rebuilt here, stops the run with a typed cause: going on would
      // let the model build on files that are not what it was told.
      const described = describedWorkspace(base.workspace.baseTree, store.events);
      await append({ kind: 'run_resumed', pid: process.pid });
      if (!described.ok)
        throw new StopRun({ outcome: 'failed', cause: described.cause, reason: described.reason });
      if (mustRestore) {
        let from: 'object' | 'diff';
        try {
          from = await git.restore(base.workspace.baseTree, lastTree, existing.lastCheckpoint?.diff ?? null);
        } catch (error) {
          if (!(error instanceof WorkspaceGitError)) throw error;
          throw new StopRun({
            outcome: 'failed',
            cause: 'resume_unrestorable',
            reason: `the workspace could not be rebuilt as the log describes it (tree ${lastTree}): ${error.message}`,
          });
        }
        workspaceKnown = true;
        deps.logger?.info({ tree: lastTree, from }, 'workspace restored to the last checkpoint');
      }
    }

    for (const n of deps.notices ?? []) {
      if (!store.events.some((e) => e.kind === 'warning' && e.message === n.message))
        await append({ kind: 'warning', code: n.code, message: n.message });
    }

    // Baseline: the tests before any edit, run by the harness, not the model; or an earlier run's
    // on the same base tree, environment and test command (recorded as reused, and from where).
    if (base.testCommand !== null && existing.baseline === null) {
      throwIfCancelled(deps.signal);
      const key = deps.baselines === undefined ? null : baselineKey(base);
      const reused = key === null ? null : await deps.baselines?.get(key).catch(() => null);
      if (reused != null) {
        await append({
          kind: 'test_run',
          phase: 'baseline',
          ...reused.run,
          reusedFrom: { conversationId: reused.conversationId, ts: reused.ts },
        });
        deps.logger?.info({ from: reused.conversationId }, 'baseline reused');
      } else {
        const r = await runTestCommand(sandbox, base.testCommand, limits, deps.signal, 'harness');
        // What the baseline run wrote (snapshots, build output, a fixture it rewrote) is the
        // harness's, not the agent's: the workspace goes back to the tree it ran on.
        await git.restore(base.workspace.baseTree, lastTree, existing.lastCheckpoint?.diff ?? null);
        const run = recordedRun(r, scrub);
        const stored = await append({ kind: 'test_run', phase: 'baseline', ...run });
        if (key !== null && keepable(run)) {
          await deps.baselines
            ?.put(key, { run, conversationId: base.conversationId, ts: stored.ts })
            .catch((error: unknown) => deps.logger?.warn({ err: error }, 'could not keep the baseline'));
        }
      }
    }

    for (;;) {
      throwIfCancelled(deps.signal);
      let state = reduceState(store.events);

      // After a question in this turn nothing more runs: the run waits for the answer unchanged.
      let waiting = state.question !== null;
      // Finish tool calls of a turn that a crash interrupted, then continue as usual.
      for (const use of state.pendingToolUses) {
        throwIfCancelled(deps.signal);
        // A call whose checkpoint is recorded ran to its end before a crash took its observation:
        // it is not run again (the workspace already holds its change), its observation says so.
        const recorded = recordedCheckpoint(store.events, use.id);
        if (recorded !== null) {
          await append(interruptedObservation(use, recorded));
          await addGuidance(use.input);
          continue;
        }
        await append({ kind: 'action', toolUseId: use.id, tool: use.name, input: use.input });
        const result = waiting
          ? {
              content:
                'Not run: you asked for clarification in this turn, so the run now waits for the answer.',
              isError: true,
              mutates: false,
              durationMs: 0,
            }
          : await steps.child(`tool ${use.name}`, { 'issue_agent.tool': use.name }, () =>
              runToolCall(tools, use.name, use.input, ctx, control(use)),
            );
        let fullContentFile: string | undefined;
        if (result.fullOutputPath !== undefined) {
          fullContentFile = await store.attachFile(result.fullOutputPath, `${use.id}.log`);
        }
        // A call that may have changed files is recorded checkpoint first, then its observation:
        // the log never tells the model of a change that no checkpoint holds. A crash before the
        // checkpoint is durable leaves the call unrecorded (resume rebuilds the tree before it
        // and runs it again); a crash between the two leaves a checkpoint naming the call, and
        // resume records the observation without running it again. The other order (observation
        // first) left a window of several git commands in which a kill lost the change while the
        // conversation kept it. One event for both was the alternative: every reader of
        // checkpoints (PR, CLI, eval, web viewer) would then have to find them inside
        // observations, and a harness record would carry the agent's output.
        const readOnly = use.name === 'bash' && isReadOnlyCommand(commandOf(use.input));
        const tree = result.mutates && !readOnly ? await checkpoint(use.id) : undefined;
        await append({
          kind: 'observation',
          toolUseId: use.id,
          tool: use.name,
          isError: result.isError,
          content: scrub(result.content),
          ...(fullContentFile === undefined ? {} : { fullContentFile }),
          ...(result.fullText === undefined || fullContentFile !== undefined
            ? {}
            : { fullContent: scrub(result.fullText) }),
          ...(result.exitCode === undefined ? {} : { exitCode: result.exitCode }),
          ...(result.killed === undefined ? {} : { killed: result.killed }),
          durationMs: result.durationMs,
          ...(result.testSummary === undefined ? {} : { testSummary: result.testSummary }),
          ...(result.finishSummary === undefined ? {} : { finishSummary: result.finishSummary }),
          ...(result.question === undefined ? {} : { question: result.question }),
          ...(tree === undefined ? {} : { tree }),
        });
        if (result.question !== undefined && !result.isError) waiting = true;
        await addGuidance(use.input);
        if (result.killed === 'cancelled') throwIfCancelled(deps.signal);
      }
      state = reduceState(store.events);

      if (state.question !== null) {
        // Nothing was changed (the question is refused after a change): no checkpoint, no tests.
        return await finishWith(
          append,
          { outcome: 'needs_info', reason: state.question.missing },
          state.question.questions.map((q, i) => `${i + 1}. ${q}`).join('\n'),
          '',
        );
      }
      if (state.finishSummary !== null) break;
      if (state.turnsWithoutTools >= 2) break; // the model said twice that it is done without finish

      const stuck = detectStuck(mainEvents(store.events), deps.stuck ?? DEFAULT_STUCK);
      if (stuck?.stop === true) {
        throw new StopRun({
          outcome: 'stuck',
          reason:
            stuck.kind === 'repeat'
              ? `the same action and result repeated ${stuck.count} times`
              : `two actions alternated ${stuck.count} times without progress`,
        });
      }
      if (stuck?.warn === true) {
        await append({
          kind: 'warning',
          code: stuck.kind === 'repeat' ? 'stuck_repeat' : 'stuck_alternating',
          message:
            stuck.kind === 'repeat'
              ? `You have run the same action ${stuck.count} times with the same result. It will not change: try a different approach.`
              : 'You are alternating between the same two actions without progress. Step back and try something different.',
        });
      }
      if (state.turnsWithoutTools === 1 && lastEvent(store.events)?.kind === 'model_response') {
        await append({
          kind: 'warning',
          code: 'no_tool_call',
          message:
            'Your last reply called no tool. Continue with a tool call, or call finish if the issue is resolved.',
        });
      }

      checkBudgets(state, limits, elapsed());

      steps.next(state.steps + 1);
      const request = await prepareRequest(
        store,
        system,
        specs,
        limits.contextTokens,
        limits.maxOutputTokens,
        append,
      );
      const started = performance.now();
      const wallLeft = limits.maxWallMs - elapsed();
      const signal = anySignal(deps.signal, AbortSignal.timeout(Math.max(1, wallLeft)));
      let response;
      try {
        response = await steps.child('model call', { 'gen_ai.request.model': base.model }, () =>
          model.complete(request.request, {
            signal,
            onRetry: async (n) => {
              await append({
                kind: 'model_retry',
                attempt: n.attempt,
                status: n.status,
                reason: n.reason,
                waitMs: n.waitMs,
              });
            },
          }),
        );
      } catch (error) {
        if (error instanceof ModelError && error.code === 'cancelled') {
          throwIfCancelled(deps.signal);
          checkBudgets(reduceState(store.events), limits, Math.max(elapsed(), limits.maxWallMs));
        }
        throw error;
      }
      await append({
        kind: 'model_response',
        model: response.model,
        requestId: response.requestId,
        content: response.content,
        stopReason: response.stopReason,
        usage: response.usage,
        usd: costUsd(price, response.usage),
        latencyMs: performance.now() - started,
        attempts: response.attempts,
        promptTokensEstimate: request.estimate,
      });
    }

    // Verification by the harness: the change, its files' syntax, then the full test run.
    await checkpoint();
    if (lastTree !== base.workspace.baseTree && !store.events.some((e) => e.kind === 'syntax_check')) {
      await append(await finalSyntax(ctx, git, base.workspace.baseTree, lastTree));
    }
    const state = reduceState(store.events);
    const summary = state.finishSummary ?? lastText(store.events);
    const diffStat = await git.diffStat(base.workspace.baseTree, lastTree);
    if (lastTree === base.workspace.baseTree) {
      return await finishWith(
        append,
        { outcome: 'no_change', reason: 'the agent finished without changing any file' },
        summary,
        diffStat,
      );
    }
    if (base.testCommand === null) {
      return await finishWith(
        append,
        {
          outcome: 'unverified',
          reason: 'no test command is known for this repository, so the change is not proven',
        },
        summary,
        diffStat,
      );
    }
    throwIfCancelled(deps.signal);
    const testCommand = base.testCommand;
    // The change's test files, when the final run would resolve it: run once more on the code
    // before the change, so a test that passes without the change's code is not taken as proof.
    // Runner configuration is the base's in that run too (never one of the change's files).
    const testFilesToCheck = async (
      final: EventOf<'test_run'>,
      proof: Extract<ProofTree, { ok: true }>,
    ): Promise<string[]> =>
      wouldResolve(state.baseline, final)
        ? (await git.changedFiles(base.workspace.baseTree, lastTree)).filter(
            (p) => isTestPath(p) && !proof.fromBase.has(p),
          )
        : [];
    if (deps.verifier === undefined) {
      // In the agent's own sandbox (no fresh one here): the workspace is made the proof tree (the
      // change with the base's runner configuration), and put back afterwards, checked to be the
      // change's tree again.
      const proof = await proofTree(git, base.workspace.baseTree, lastTree, testCommand);
      if (!proof.ok)
        return await finishWith(append, { outcome: 'unverified', reason: proof.reason }, summary, diffStat);
      let moved = proof.tree !== lastTree;
      let final: EventOf<'test_run'>;
      let withoutFix: EventOf<'test_run'> | undefined;
      try {
        if (moved) await git.restore(base.workspace.baseTree, proof.tree, null);
        const r = await runTestCommand(sandbox, testCommand, limits, deps.signal, 'harness', state.baseline);
        final = (await append({
          kind: 'test_run',
          phase: 'final',
          ...recordedRun(r, scrub),
          ...runnerConfigField(proof),
        })) as EventOf<'test_run'>;
        const paths = await testFilesToCheck(final, proof);
        if (paths.length > 0) {
          moved = true;
          await git.checkoutOnly(base.workspace.baseTree, lastTree, paths);
          const w = await runTestCommand(
            sandbox,
            testCommand,
            limits,
            deps.signal,
            'harness',
            state.baseline,
          );
          withoutFix = (await append({
            kind: 'test_run',
            phase: 'without_fix',
            ...recordedRun(w, scrub),
          })) as EventOf<'test_run'>;
        }
      } finally {
        if (moved) await git.restore(base.workspace.baseTree, lastTree, state.lastCheckpoint?.diff ?? null);
      }
      const stop = withRunnerConfigNote(judge(state.baseline, final, withoutFix), final);
      return await finishWith(append, stop, summary, diffStat);
    }
    const recorded: { final: EventOf<'test_run'> | null } = { final: null };
    const fresh = await finalRunInFresh(deps.verifier, base, lastTree, state.lastCheckpoint?.diff ?? null, {
      limits,
      baseline: state.baseline,
      signal: deps.signal,
      logger: deps.logger,
      recordFinal: async (run, proof) => {
        const final = (await append({
          kind: 'test_run',
          phase: 'final',
          ...recordedRun(run, scrub),
          sandbox: 'fresh',
          ...runnerConfigField(proof),
        })) as EventOf<'test_run'>;
        recorded.final = final;
        return await testFilesToCheck(final, proof);
      },
    });
    const final = recorded.final;
    if (!fresh.ok || final === null)
      return await finishWith(
        append,
        { outcome: 'unverified', reason: fresh.ok ? 'no final run was recorded' : fresh.reason },
        summary,
        diffStat,
      );
    const withoutFix =
      fresh.withoutFix === null
        ? undefined
        : ((await append({
            kind: 'test_run',
            phase: 'without_fix',
            ...recordedRun(fresh.withoutFix, scrub),
            sandbox: 'fresh',
          })) as EventOf<'test_run'>);
    const stop = withRunnerConfigNote(judge(state.baseline, final, withoutFix), final);
    return await finishWith(append, stop, summary, diffStat);
  } catch (error) {
    const stop = toStop(error, deps.signal);
    if (stop === null) throw error;
    let diffStat = '';
    try {
      if (workspaceKnown) {
        await checkpoint();
        diffStat = await git.diffStat(base.workspace.baseTree, lastTree);
      }
    } catch {
      // The sandbox may be gone; the outcome matters more than the stat.
    }
    return await finishWith(append, stop, reduceState(store.events).finishSummary, diffStat);
  } finally {
    steps.end();
  }
}

/**
 * The final run in a sandbox from `verifier`: the base commit there, the recorded change applied
 * (from its diff: the tree object exists only in the agent's repository) and checked to give the
 * checkpoint's tree, its runner configuration put back to the base's (the proof tree), then the
 * test command through the harness shell. `recordFinal` records that run and names the change's
 * test files to run again on the code before the change, in the same sandbox (none: no such run).
 * Not ok, with the reason, when the change cannot be rebuilt there (a diff too large to record, or
 * one that does not reproduce the tree) or its proof tree cannot be made: nothing else could be
 * tested. A sandbox that cannot be made throws, as any sandbox failure does (the job's retry
 * resumes here).
 */
async function finalRunInFresh(
  verifier: FreshVerifier,
  base: EventStore['base'],
  tree: string,
  diff: string | null,
  options: {
    readonly limits: Limits;
    /** Its durations bound the runs here (testing/bounds.ts). */
    readonly baseline: EventOf<'test_run'> | null;
    readonly signal: AbortSignal | undefined;
    readonly logger: Logger | undefined;
    readonly recordFinal: (
      run: TestRunResult,
      proof: Extract<ProofTree, { ok: true }>,
    ) => Promise<readonly string[]>;
  },
): Promise<
  | { readonly ok: true; readonly withoutFix: TestRunResult | null }
  | { readonly ok: false; readonly reason: string }
> {
  if (diff === null)
    return {
      ok: false,
      reason:
        'the change was too large to record, so it could not be rebuilt in a fresh sandbox and tested there',
    };
  const testCommand = base.testCommand;
  if (testCommand === null) throw new Error('finalRunInFresh needs a test command');
  const started = performance.now();
  const fresh = await verifier.open(base.workspace.baseCommit);
  const run = (): Promise<TestRunResult> =>
    runTestCommand(fresh.sandbox, testCommand, options.limits, options.signal, 'harness', options.baseline);
  try {
    const git = await WorkspaceGit.open(fresh.sandbox);
    let proof: ProofTree;
    try {
      await git.restore(base.workspace.baseTree, tree, diff);
      proof = await proofTree(git, base.workspace.baseTree, tree, testCommand);
      if (proof.ok && proof.tree !== tree) await git.restore(base.workspace.baseTree, proof.tree, null);
    } catch (error) {
      if (!(error instanceof WorkspaceGitError)) throw error;
      return {
        ok: false,
        reason: `the change could not be rebuilt in a fresh sandbox to test it: ${error.message}`,
      };
    }
    if (!proof.ok) return proof;
    options.logger?.info(
      { ms: Math.round(performance.now() - started) },
      'the change rebuilt in a fresh sandbox',
    );
    const final = await run();
    const paths = await options.recordFinal(final, proof);
    if (paths.length === 0) return { ok: true, withoutFix: null };
    await git.checkoutOnly(base.workspace.baseTree, tree, paths);
    return {
      ok: true,
      withoutFix: await run(),
    };
  } finally {
    await fresh.close();
  }
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

async function prepareRequest(
  store: EventStore,
  system: string,
  tools: ModelRequest['tools'],
  contextTokens: number,
  maxOutputTokens: number,
  append: (e: NewEvent) => Promise<AgentEvent>,
): Promise<{ request: ModelRequest; estimate: number }> {
  const build = (): { request: ModelRequest; estimate: number } => {
    const request: ModelRequest = {
      system,
      tools,
      messages: buildMessages(store.base, store.events),
      maxOutputTokens,
    };
    return { request, estimate: estimateTokens(request) };
  };
  let built = build();
  // Condense when the prompt passes 80% of the budget, down to about 40%: condensations stay rare and
  // each one frees room for many turns (and the cached prefix survives in between).
  if (built.estimate > contextTokens * 0.8) {
    const state = reduceState(store.events);
    const after = state.lastCondensation?.throughEventId ?? 0;
    const fixed =
      built.estimate - estimateTokens({ system: '', tools: [], messages: built.request.messages });
    const keep = Math.max(0, contextTokens * 0.4 - fixed);
    const through = chooseCondensationPoint(store.events, after, keep);
    if (through !== null && through > after) {
      const { summary, turns } = summarizeTurns(
        store.events,
        after,
        through,
        state.lastCondensation,
        Math.floor(contextTokens * 0.15 * 3),
      );
      await append({ kind: 'condensation', throughEventId: through, summary, condensedTurns: turns });
      built = build();
    }
  }
  return built;
}

function checkBudgets(state: RunState, limits: Limits, elapsedMs: number): void {
  if (state.steps >= limits.maxSteps) {
    throw new StopRun({
      outcome: 'budget_exhausted',
      limit: 'steps',
      reason: `the step limit (${limits.maxSteps}) was reached`,
    });
  }
  const tokens = totalTokens(state.usage);
  if (tokens >= limits.maxTokens) {
    throw new StopRun({
      outcome: 'budget_exhausted',
      limit: 'tokens',
      reason: `the token limit (${limits.maxTokens}) was reached: ${tokens} tokens used`,
    });
  }
  if (state.usd >= limits.maxUsd) {
    throw new StopRun({
      outcome: 'budget_exhausted',
      limit: 'usd',
      reason: `the cost limit ($${limits.maxUsd.toFixed(2)}) was reached: $${state.usd.toFixed(4)} spent`,
    });
  }
  if (elapsedMs >= limits.maxWallMs) {
    throw new StopRun({
      outcome: 'budget_exhausted',
      limit: 'wall_time',
      reason: `the time limit (${Math.round(limits.maxWallMs / 1000)} s) was reached`,
    });
  }
}

function toStop(error: unknown, signal: AbortSignal | undefined): Stop | null {
  if (error instanceof StopRun) return error.stop;
  if (signal?.aborted === true) return { outcome: 'cancelled', reason: cancelReason(signal) };
  if (error instanceof ModelError) {
    return { outcome: 'failed', cause: `model_${error.code}`, reason: error.message };
  }
  if (error instanceof SandboxError)
    return { outcome: 'failed', cause: `sandbox_${error.code}`, reason: error.message };
  if (error instanceof WorkspaceGitError)
    return { outcome: 'failed', cause: 'workspace', reason: error.message };
  return null;
}

function cancelReason(signal: AbortSignal): string {
  const r: unknown = signal.reason;
  if (typeof r === 'string') return r;
  if (r instanceof Error && r.name !== 'AbortError') return r.message;
  return 'the run was cancelled';
}

function throwIfCancelled(signal: AbortSignal | undefined): void {
  if (signal?.aborted === true) throw new StopRun({ outcome: 'cancelled', reason: cancelReason(signal) });
}

async function finishWith(
  append: (e: NewEvent) => Promise<AgentEvent>,
  stop: Stop,
  summary: string | null,
  diffStat: string,
): Promise<Outcome> {
  const event = await append({ kind: 'outcome', ...stop, summary, diffStat });
  return event as Outcome;
}

function anySignal(a: AbortSignal | undefined, b: AbortSignal): AbortSignal {
  return a === undefined ? b : AbortSignal.any([a, b]);
}

function lastEvent(events: readonly AgentEvent[]): AgentEvent | undefined {
  return events[events.length - 1];
}

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

/** Test output kept in the event; the model and people see the parsed summary first. */
/** What the event log keeps of a harness test run: its output capped and scrubbed. */
function recordedRun(r: TestRunResult, scrub: (text: string) => string): BaselineRun {
  return {
    command: r.command,
    exitCode: r.exitCode,
    killed: r.killed,
    durationMs: r.durationMs,
    summary: r.summary,
    output: scrub(cap(r.output)),
    outputBytes: r.outputBytes,
  };
}

function cap(output: string): string {
  return output.length > 200_000 ? `${output.slice(0, 100_000)}\n[...]\n${output.slice(-100_000)}` : output;
}

function commandOf(input: unknown): string {
  const c = (input as { command?: unknown } | null)?.command;
  return typeof c === 'string' ? c : '';
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The `path` argument of a tool call (editor, search), or null. */
function pathOf(input: unknown): string | null {
  if (typeof input !== 'object' || input === null || !('path' in input)) return null;
  const p = input.path;
  return typeof p === 'string' && p !== '' ? p : null;
}

/** Changed files checked at most, and their size limit, at the end of a run. */
const FINAL_SYNTAX_FILES = 200;

/** The syntax of every changed file as the run ends: what the PR states about files that do not parse. */
async function finalSyntax(
  ctx: ReturnType<typeof newToolContext>,
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
