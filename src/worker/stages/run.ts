import { join } from 'node:path';
import { FileBaselineStore } from '../baseline-store.js';
import { newBaseState } from '../../agent/new-run.js';
import type { FreshVerifier, Outcome } from '../../agent/run-agent.js';
import { fenceUntrusted, stripHiddenText } from '../../agent/untrusted-text.js';
import { runModelSetup, type AgentEnv } from '../../config/agent-env.js';
import type { EventStore } from '../../events/event-store.js';
import { reduceState } from '../../events/reduce-state.js';
import type { BaseState, EnvironmentRecord, Limits, Task } from '../../events/schema.js';
import { collectInstructions } from '../../agent/instructions.js';
import { mergeMcp } from '../../config/mcp-config.js';
import { runAgentIn } from '../../execution/execute.js';
import type { Model } from '../../model/model.js';
import type { FixJob } from '../../queue/payloads.js';
import type { Sandbox } from '../../sandbox/sandbox.js';
import {
  attachTaskImages,
  fetchTaskImages,
  reattachTaskImages,
  taskImageFields,
  type IssueText,
  type TaskImages,
} from './prepare.js';
import { priorRounds } from './rounds.js';
import type { JobContext, PullInfo } from './types.js';

/**
 * Whether the agent may ask before acting (pre-flight triage): on issues, as the repository's
 * `triage` says (default on), and only where an answer can continue the conversation (the App; the
 * Action keeps nothing between workflow runs). Never on a round on the App's PR: a request there, or
 * a red CI, is an explicit request to act.
 */
export function triageApplies(
  p: Pick<FixJob, 'kind'> & { readonly config: Pick<FixJob['config'], 'triage'> },
  onPull: boolean,
  canContinue: boolean,
): boolean {
  return canContinue && !onPull && p.kind === 'fix-issue' && p.config.triage === 'on';
}

export interface RunInput {
  readonly ctx: JobContext;
  readonly sandbox: Sandbox;
  /** The trajectory of an earlier attempt to resume, or null to start one. */
  readonly store: EventStore | null;
  /** How the sandbox's environment was made, for a new run's base state (null: no setup phase). */
  readonly environment: EnvironmentRecord | null;
  readonly pull: PullInfo | null;
  /** The issue's text, for a new run that is not a follow-up. */
  readonly issue: IssueText;
  readonly agent: AgentEnv;
  readonly model: (name: string) => Model;
  /** Aborted by a stop request or the caller: the agent stops at its next step boundary. */
  readonly signal: AbortSignal;
  /** The branch the PR targets, whose tip the repository's instructions are read from. */
  readonly baseBranch: string;
  /** Where `baseBranch` is fetched from when the clone is a fork's (RepoInfo.base_clone_url). */
  readonly baseUrl?: string | undefined;
  /**
   * Attempt `number` of `of` (best-of-N): the run's cost and token limits are its share of the job's
   * (1/of), so all attempts together stay within the job's budget. Absent: the one attempt.
   */
  readonly attempt?: { readonly number: number; readonly of: number; readonly jobId: string } | undefined;
  /** The runtime can continue the conversation after an answer (see FixRuntime.canContinue). */
  readonly canContinue: boolean;
  /** No sandbox process can reach the worker's disk (SandboxBackend.hostDiskSealed). */
  readonly hostDiskSealed: boolean;
  /**
   * The backend's own name (SandboxBackend.kind), recorded in a new trajectory: the sandbox's kind
   * names its implementation, which backends share (`unconfined` and `local` are both a LocalSandbox).
   */
  readonly backendKind: string;
  /** Where the verdict's final run happens, when not in `sandbox` (AgentDeps.verifier). */
  readonly verifier?: FreshVerifier | undefined;
  /**
   * A new run's task takes the images its texts link, user attachments of this GitHub web origin
   * (FixRuntime.images); absent: none are fetched.
   */
  readonly images?: { readonly webOrigin: string } | undefined;
}

/**
 * The repository's instruction files from the base branch's tip, never from the workspace or the PR
 * head: a new run's clone is at that tip; a follow-up's follows the PR head, so the base branch is
 * fetched beside it. A failure to read them is logged and the run goes on without them.
 */
async function readInstructions(
  ctx: JobContext,
  pull: PullInfo | null,
  baseBranch: string,
  baseUrl: string | undefined,
): Promise<BaseState['instructions'] | undefined> {
  try {
    const commit =
      pull === null
        ? await ctx.git.revParse(ctx.paths.pristine, 'HEAD')
        : // From this repository even when the clone is a fork's: a fork's own branch is not guidance.
          await ctx.git.fetchBranch(ctx.paths.pristine, baseBranch, (await ctx.tokens.get()).token, baseUrl);
    const files = await collectInstructions(ctx.git.instructionSource(ctx.paths.pristine, commit));
    if (files.length > 0)
      ctx.log.info({ files: files.map((f) => f.path), commit }, 'repository instructions');
    return { ref: baseBranch, commit, files };
  } catch (error) {
    ctx.log.warn({ err: error }, 'could not read the repository instructions; the run goes on without them');
    return undefined;
  }
}

/** The agent's run in the sandbox: a new trajectory (task and base state) unless one is resumed. */
export async function runInSandbox(
  input: RunInput,
): Promise<{ readonly store: EventStore; readonly outcome: Outcome }> {
  const { ctx, sandbox, pull } = input;
  const { p, jobId, progress, redactor } = ctx;
  let store = input.store;
  if (store === null) {
    // A start cut off before its base state holds nothing worth keeping.
    await ctx.storage.discard(jobId);
    const task =
      pull === null
        ? {
            title: stripHiddenText(input.issue.title),
            body: stripHiddenText(input.issue.body),
            instructions: p.instructions,
            source: `${p.repo.owner}/${p.repo.name}#${p.issue.number}`,
          }
        : followUpTask(
            p,
            pull,
            // A person's pull request's body is theirs: it names no earlier rounds of ours.
            pull.human === true ? [] : await priorRounds(ctx.storage, pull.body, p.repo.id, pull.number),
          );
    // The issue's body (unless this is a round on a pull request) and the request's comment.
    const fetched: TaskImages =
      input.images === undefined
        ? { images: [], unavailable: [] }
        : await fetchTaskImages(
            ctx,
            [...(pull === null ? [stripHiddenText(input.issue.body)] : []), ...p.instructions],
            input.images.webOrigin,
            input.signal,
          );
    const instructions = await readInstructions(ctx, pull, input.baseBranch, input.baseUrl);
    const base = await newBaseState({
      instructions,
      task: { ...task, ...taskImageFields(fetched) },
      sandbox,
      model: input.agent.model,
      modelSetup: runModelSetup(input.agent.model, input.agent.modelChoice, input.agent.limits),
      limits: shareOf(limitsFor(input.agent.limits, p.config.budgets), input.attempt?.of ?? 1),
      testCommand: p.config.testCommand,
      conversationId: jobId,
      sandboxLabel: input.backendKind,
      environment: input.environment,
    });
    const attempt = input.attempt;
    const triage = triageApplies(p, pull !== null, input.canContinue);
    store = await ctx.storage.create(jobId, {
      ...base,
      ...(triage ? { triage: true } : {}),
      ...(attempt === undefined || attempt.of === 1
        ? {}
        : { attempt: { number: attempt.number, of: attempt.of, jobId: attempt.jobId } }),
    });
    await attachTaskImages(store, fetched);
  } else if (input.images !== undefined) {
    await reattachTaskImages(ctx, store, input.signal);
  }
  const s = store;
  const outcome = await runAgentIn({
    store: s,
    sandbox,
    model: input.model(s.base.model),
    // The deployment's and the repository's MCP servers; their header values are secrets the
    // redactor also knows (fix-run).
    mcp: mergeMcp(input.agent.mcp?.config ?? null, p.config.mcp),
    env: input.agent,
    // Known secrets never reach the model or the log, even if a command saw one.
    scrub: (text) => redactor().redact(text),
    signal: input.signal,
    logger: ctx.log,
    onEvent: (e) => {
      progress.onEvent(e, s, input.attempt);
    },
    verifier: input.verifier,
    budget: ctx.spend?.budget,
    // Follow-up rounds, retries and later jobs on the same base tree and environment reuse the
    // baseline, only where no sandbox process can reach the worker's disk (Docker), so no run can
    // write the baseline a later run trusts.
    baselines: input.hostDiskSealed
      ? new FileBaselineStore(join(ctx.jobsDir, '..', 'baselines'), `github:${ctx.p.repo.id}`)
      : undefined,
  });
  return { store: s, outcome };
}

/**
 * The task of a follow-up round: the request, the review comments it refers to with their file, line
 * and diff hunk, and what earlier rounds did. All of it is untrusted text and is fenced as such.
 */
function followUpTask(p: FixJob, pull: PullInfo, prior: readonly EventStore[]): Task {
  const ci = p.ci ?? null;
  const parts: string[] = [
    ci !== null
      ? `This is pull request #${pull.number} ("${stripHiddenText(pull.title)}"), opened earlier by this agent. ` +
        `Its CI failed on the head of its branch \`${pull.headRef}\`, which is checked out in the workspace. ` +
        `This is automatic round ${ci.round} of at most ${ci.of} to make it pass: find why the checks below fail ` +
        'and fix the cause in the code (never by weakening or deleting tests, or by editing CI configuration).'
      : `This is pull request #${pull.number} ("${stripHiddenText(pull.title)}"), ${pull.human === true ? 'opened by a person (their work: change only what is asked)' : 'opened earlier by this agent'}. ` +
        `${
          p.trigger.approvedBy === undefined || p.trigger.approvedBy === null
            ? `A maintainer (@${p.trigger.sender.login})`
            : `@${p.trigger.sender.login}, with the approval of a maintainer (@${p.trigger.approvedBy.login}),`
        } asked for more changes on its branch \`${pull.headRef}\`, ` +
        'which is checked out in the workspace.',
  ];
  for (const check of ci?.checks ?? []) {
    parts.push(
      [
        `The check "${stripHiddenText(check.name)}" ended \`${check.conclusion}\`.`,
        ...(check.summary === '' ? [] : [fenceUntrusted('check-output', check.summary)]),
        ...(check.annotations.length === 0
          ? []
          : [fenceUntrusted('check-annotations', check.annotations.join('\n'))]),
        ...(check.logTail === '' ? [] : ['The end of its log:', fenceUntrusted('check-log', check.logTail)]),
      ].join('\n\n'),
    );
  }
  if (ci !== null && (ci.preExisting ?? []).length > 0) {
    parts.push(
      `Also failing, but failing on \`${stripHiddenText(ci.baseRef ?? 'the base branch')}\` too (pre-existing, not caused by this pull request; ` +
        `leave them alone): ${(ci.preExisting ?? []).map((n) => `"${stripHiddenText(n)}"`).join(', ')}.`,
    );
  }
  for (const [i, store] of prior.entries()) {
    const o = reduceState(store.events).outcome;
    parts.push(
      `Round ${i + 1} (${o?.outcome ?? 'unfinished'}): ${stripHiddenText(o?.summary ?? store.base.task.title)}`,
    );
  }
  for (const c of p.reviewComments) {
    parts.push(
      [
        `Review comment by @${c.author} on ${c.path}${c.line === null ? '' : `, line ${c.line}`}:`,
        '```diff',
        c.diffHunk.replace(/```/g, '``\u200b`'),
        '```',
        stripHiddenText(c.body),
      ].join('\n'),
    );
  }
  return {
    title:
      ci === null
        ? `Follow-up on pull request #${pull.number}: ${stripHiddenText(pull.title)}`
        : `Fix the failing CI of pull request #${pull.number} (round ${ci.round} of ${ci.of}): ${stripHiddenText(pull.title)}`,
    body: parts.join('\n\n'),
    instructions: p.instructions,
    source: `${p.repo.owner}/${p.repo.name}#${pull.number}`,
  };
}

/**
 * One attempt's share of the job's spending limits (cost and tokens); steps and wall time are per
 * attempt, as attempts run side by side.
 */
function shareOf(limits: Limits, attempts: number): Limits {
  if (attempts <= 1) return limits;
  return {
    ...limits,
    maxUsd: limits.maxUsd / attempts,
    maxTokens: Math.max(1, Math.floor(limits.maxTokens / attempts)),
  };
}

function limitsFor(
  defaults: Limits,
  budgets: { maxSteps?: number | undefined; maxUsd?: number | undefined; maxMinutes?: number | undefined },
): Limits {
  return {
    ...defaults,
    ...(budgets.maxSteps === undefined ? {} : { maxSteps: budgets.maxSteps }),
    ...(budgets.maxUsd === undefined ? {} : { maxUsd: budgets.maxUsd }),
    ...(budgets.maxMinutes === undefined ? {} : { maxWallMs: Math.round(budgets.maxMinutes * 60_000) }),
  };
}
