import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino, type Logger } from 'pino';
import { parse as parseYaml } from 'yaml';
import { readAgentEnv } from '../config/agent-env.js';
import {
  parseRepoConfig,
  REPO_CONFIG_PATH,
  RepoConfigError,
  type RepoConfig,
} from '../config/repo-config.js';
import { FileEventStore } from '../events/file-event-store.js';
import { reduceState, totalTokens } from '../events/reduce-state.js';
import { botUser, tokenClient, type GitHubClient } from '../github/app-client.js';
import { pristineRoot } from '../github/pristine-clone.js';
import { AnthropicModel } from '../model/anthropic-model.js';
import { formatUsd } from '../publish/markdown.js';
import { renderPullRequest } from '../publish/pr-body.js';
import { githubHosts, hostsIn, publishable, type Audience } from '../publish/publishable.js';
import { Redactor } from '../publish/redact.js';
import { fixJobId } from '../queue/ids.js';
import {
  buildFixJob,
  isNotFound,
  matches,
  mayTrigger,
  notOursReply,
  pullOwnership,
  react,
  reviewContext,
  STOP,
  targetOf,
  type Target,
} from '../app/trigger-rules.js';
import { decideCiRound } from '../app/ci-round.js';
import { VERIFY } from '../app/verify-request.js';
import type { FixJob } from '../queue/payloads.js';
import { commentCiLedger } from './ci-ledger.js';
import { parseTrigger } from '../app/triggers.js';
import type { Trigger } from '../queue/trigger.js';
import { FixRunError, runFix, type FixJobResult } from '../worker/fix-run.js';
import { ActionInputError, readInputs, readRunner, type ActionInputs, type RunnerContext } from './inputs.js';
import { environmentEnv, setupSecretValues } from './environment-env.js';
import { fileCommandPaths, runnerHidePaths } from './isolation.js';
import { detectRunnerLayout, runnerProcess } from './runner-layout.js';
import { RunnerIo } from './runner-io.js';
import { loadBackend } from '../sandbox/backends.js';

/** The account a workflow's GITHUB_TOKEN acts as. */
const ACTIONS_BOT = 'github-actions[bot]';
/** GitHub keeps at most 1 MiB of summary per step; the rest of the trajectory is in the artifact. */
const SUMMARY_BUDGET = 900_000;

export interface ActionResult {
  readonly exitCode: number;
  readonly outcome: string;
}

export interface ActionOptions {
  /** Aborted when the runner cancels the job (SIGINT, then SIGTERM). */
  readonly signal?: AbortSignal;
  /** Where the action's own lines go (default stdout); the runner reads workflow commands here. */
  readonly write?: (line: string) => void;
}

/**
 * The GitHub Action: one workflow event, handled with the App's rules and the same fix core. Every
 * way it can end is explicit: a clean skip (not our event, not our label or handle, an untrusted
 * sender) exits 0 with a log line and no work; a failure exits 1 with an annotation and, when the
 * issue is known, a comment on it that says what failed.
 */
export async function runAction(env: NodeJS.ProcessEnv, options: ActionOptions = {}): Promise<ActionResult> {
  const write =
    options.write ??
    ((line: string) => {
      process.stdout.write(`${line}\n`);
    });
  let runner: RunnerContext;
  let payload: unknown;
  try {
    runner = readRunner(env);
    payload = JSON.parse(readFileSync(runner.eventPath, 'utf8')) as unknown;
  } catch (error) {
    write(`::error::issue-agent: ${oneLine(error)}`);
    return { exitCode: 1, outcome: 'failed' };
  }
  const io = new RunnerIo(runner.outputFile, runner.summaryFile, write);
  const deliveryId = `actions-${runner.runId}-${runner.runAttempt}`;
  const parsed = parseTrigger(runner.eventName, deliveryId, payload, -1, new Date(), {
    requireInstallation: false,
  });
  // Secrets are masked before anything else is printed, including the skip line.
  const token = nonEmpty(env['INPUT_GITHUB-TOKEN']) ?? nonEmpty(env.GITHUB_TOKEN);
  const key = nonEmpty(env['INPUT_ANTHROPIC-API-KEY']) ?? nonEmpty(env.ANTHROPIC_API_KEY);
  io.start([token, key, ...setupSecretValues(env)].filter((s): s is string => s !== null));
  if (!parsed.ok) return skip(io, write, `nothing to do: ${parsed.reason}`);
  const trigger = parsed.trigger;

  let inputs: ActionInputs;
  try {
    inputs = readInputs(env);
  } catch (error) {
    const message = error instanceof ActionInputError ? error.message : oneLine(error);
    return fail(io, message, token === null ? null : { runner, trigger, token, logger: null });
  }
  const logger = pino(
    { level: inputs.logLevel, base: { service: 'issue-agent-action' } },
    pino.destination({ dest: 1, sync: true }),
  );
  const gh = tokenClient(runner.apiUrl, () => Promise.resolve(inputs.githubToken), logger, {
    userAgent: 'issue-agent-action',
  });
  const ctx: FailContext = { runner, trigger, token: inputs.githubToken, logger, gh };
  try {
    return await handle(trigger, inputs, runner, env, io, gh, logger, write, options.signal);
  } catch (error) {
    return fail(io, oneLine(error), ctx, error instanceof FixRunError);
  }
}

async function handle(
  trigger: Trigger,
  inputs: ActionInputs,
  runner: RunnerContext,
  env: NodeJS.ProcessEnv,
  io: RunnerIo,
  gh: GitHubClient,
  logger: Logger,
  write: (line: string) => void,
  signal: AbortSignal | undefined,
): Promise<ActionResult> {
  const where = { owner: trigger.repo.owner, repo: trigger.repo.name };
  if (`${where.owner}/${where.repo}`.toLowerCase() !== runner.repository.toLowerCase()) {
    return skip(io, write, `the event is about ${where.owner}/${where.repo}, not ${runner.repository}`);
  }
  const redactor = new Redactor([inputs.githubToken, inputs.anthropicApiKey, ...setupSecretValues(env)]);
  const runsUrl = `${runner.serverUrl}/${runner.repository}/actions/runs/${runner.runId}`;
  // Everything posted goes through `publishable`: links may lead to GitHub and this workflow run.
  const audience: Audience = {
    redactor,
    trustedHosts: [...githubHosts(runner.apiUrl), ...hostsIn(runsUrl)],
  };
  const config = await repoConfig(gh, where, inputs);
  const bot = await botUser(gh, inputs.appSlug === null ? ACTIONS_BOT : `${inputs.appSlug}[bot]`);
  const context: JobContext = {
    trigger,
    inputs,
    runner,
    env,
    io,
    gh,
    bot,
    logger,
    redactor,
    runsUrl,
    signal,
  };
  if (trigger.kind === 'ci_failure') {
    // A workflow failed on a pull request's head: a round only on the agent's own open PR (whoever
    // pushed the head, usually the agent itself, is not asked for a role), decided in ci-round.ts.
    const decided = await decideCiRound(
      trigger,
      config,
      gh,
      (pr) => commentCiLedger(gh, where, pr, bot, { id: runner.runId, url: runsUrl }, audience),
      bot.id,
      logger,
    );
    if (decided.kind === 'none') {
      if (decided.comment !== null) {
        await gh.rest.issues.createComment({
          ...where,
          issue_number: trigger.issue.number,
          body: publishable(decided.comment, audience),
        });
      }
      return skip(io, write, `no CI round: ${decided.reason}`);
    }
    const target = { kind: 'pull', number: trigger.issue.number } as const;
    const job = { ...buildFixJob(trigger, target, config, '', []), ci: decided.ci };
    return await runJob(job, target, context);
  }
  const ours = matches(trigger, config);
  if (ours === null) return skip(io, write, `not our label (${config.label}) or handle (${config.handle})`);
  const who = await mayTrigger(trigger, config, gh, () => Promise.resolve(bot.id));
  if (who.allowed === 'self') return skip(io, write, 'the event was caused by this action itself');
  if (!who.allowed) {
    // No comment and no model request: anyone can comment, and an answer to each would be spam.
    return skip(io, write, `untrusted sender: ${who.reason}; no work done`);
  }
  if (trigger.kind === 'unlabel') return skip(io, write, 'the label was removed');
  if (STOP.test(ours.instruction)) {
    await gh.rest.issues.createComment({
      ...where,
      issue_number: trigger.issue.number,
      body: publishable(
        `@${trigger.sender.login} under GitHub Actions a running job is stopped by cancelling its workflow run ` +
          `(Actions tab → the run → Cancel workflow). This run (${runsUrl}) did nothing.`,
        audience,
      ),
    });
    return skip(io, write, 'a stop request (cancel the workflow run instead)');
  }
  if (trigger.kind === 'mention' && VERIFY.test(ours.instruction)) {
    // The App's command: a workflow run would take it for a request and start the agent.
    await gh.rest.issues.createComment({
      ...where,
      issue_number: trigger.issue.number,
      body: publishable(
        `@${trigger.sender.login} under GitHub Actions I don't reproduce verdicts: run \`issue-agent verify ${trigger.repo.owner}/${trigger.repo.name} --pr <number>\` (see the README), which reads this repository's **Issue Agent** check run. This run (${runsUrl}) did nothing.`,
        audience,
      ),
    });
    return skip(io, write, 'a verify request (the App reproduces verdicts; use issue-agent verify)');
  }
  if (trigger.issue.state !== 'open') return skip(io, write, 'the issue or pull request is closed');
  await react(gh, where, trigger);

  const target = await targetOf(gh, where, trigger);
  let reviewComments: Awaited<ReturnType<typeof reviewContext>> = [];
  if (target.kind === 'pull') {
    const { data: pr } = await gh.rest.pulls.get({ ...where, pull_number: target.number });
    if (pr.state !== 'open') return skip(io, write, 'the pull request is closed');
    const owner = pullOwnership(pr, bot.id);
    if (!owner.ours) {
      await gh.rest.issues.createComment({
        ...where,
        issue_number: trigger.issue.number,
        body: publishable(notOursReply(owner), audience),
      });
      return skip(io, write, owner.fork ? 'a pull request from a fork' : 'not a pull request of ours');
    }
    reviewComments = await reviewContext(gh, where, target.number, trigger);
  }

  const job = buildFixJob(trigger, target, config, ours.instruction, reviewComments);
  return await runJob(job, target, context);
}

interface JobContext {
  readonly trigger: Trigger;
  readonly inputs: ActionInputs;
  readonly runner: RunnerContext;
  readonly env: NodeJS.ProcessEnv;
  readonly io: RunnerIo;
  readonly gh: GitHubClient;
  readonly bot: Awaited<ReturnType<typeof botUser>>;
  readonly logger: Logger;
  readonly redactor: Redactor;
  readonly runsUrl: string;
  readonly signal: AbortSignal | undefined;
}

/** One fix job on the runner: the fix core in the sandbox, then the outputs, summary and trajectory. */
async function runJob(built: FixJob, target: Target, c: JobContext): Promise<ActionResult> {
  const { trigger, inputs, runner, env, io, gh, bot, logger, redactor, runsUrl, signal } = c;
  const jobId = fixJobId(trigger.repo.id, target.number, trigger.deliveryId);
  // One attempt: the Action reports (outputs, summary, artifact) one trajectory, and its runner
  // hides only that attempt's folders from the sandbox. Best-of-N is the App's.
  const job = { ...built, config: { ...built.config, attempts: 1 } };
  const jobsDir = join(inputs.workDir ?? join(runner.runnerTemp, 'issue-agent'), 'jobs');
  // Where the runner keeps its files, before anything is written: a layout the isolated sandbox
  // cannot hide refuses the job (RunnerLayoutError, reported on the issue by the failure path).
  const layout = inputs.sandbox === 'local' ? detectRunnerLayout(env, runnerProcess()) : null;
  if (layout !== null) logger.info({ runner: layout }, 'runner layout');
  // The jobs folder first, with the folders above it that are missing, passable but not listable by
  // others: the sandbox's user (nobody, when the runner runs as root) walks down it to the workspace.
  mkdirSync(jobsDir, { recursive: true, mode: 0o711 });
  // The host's clones and their seals (beside the jobs folder): hidden as a whole from the local
  // sandbox. Created now, because only paths that exist can be covered.
  const pristine = pristineRoot(jobsDir);
  mkdirSync(pristine, { recursive: true, mode: 0o700 });
  const agent = readAgentEnv({
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    ANTHROPIC_API_KEY: inputs.anthropicApiKey,
    ...(inputs.anthropicBaseUrl === null ? {} : { ANTHROPIC_BASE_URL: inputs.anthropicBaseUrl }),
    ...(inputs.model === null ? {} : { ISSUE_AGENT_MODEL: inputs.model }),
    ...(inputs.tools === null ? {} : { ISSUE_AGENT_TOOLS: inputs.tools }),
    ...(inputs.thinkingBudget === null ? {} : { ISSUE_AGENT_THINKING_BUDGET: String(inputs.thinkingBudget) }),
    ISSUE_AGENT_LOG_LEVEL: inputs.logLevel,
    // The setup phase (isolated local sandbox or Docker): the step's ISSUE_AGENT_* settings and the
    // `setup` input; the repository's `.github/issue-agent.yml` says what to run.
    ...environmentEnv(env, inputs.setup),
  });
  const hostIsolation =
    inputs.sandbox === 'local'
      ? {
          hide: runnerHidePaths({
            home: nonEmpty(env.HOME),
            jobsDir,
            layout,
            checkout: nonEmpty(env.GITHUB_WORKSPACE),
            path: agent.sandboxPath,
            extra: [pristine, ...fileCommandPaths(env)],
          }),
        }
      : null;
  let cancelledBy: string | null = null;
  signal?.addEventListener('abort', () => {
    cancelledBy = 'the workflow run being cancelled';
  });
  logger.info({ job: jobId, kind: job.kind, target }, 'starting');
  let result: FixJobResult;
  try {
    result = await runFix(
      job,
      {
        jobId,
        jobsDir,
        gh,
        tokens: { get: () => Promise.resolve({ token: inputs.githubToken }), issued: [inputs.githubToken] },
        secrets: [inputs.anthropicApiKey],
        bot,
        agent,
        model: (name) =>
          new AnthropicModel({
            apiKey: inputs.anthropicApiKey,
            model: name,
            baseURL: agent.anthropicBaseUrl ?? undefined,
            maxAttempts: agent.modelMaxAttempts,
            baseBackoffMs: agent.modelRetryBaseMs,
          }),
        // The only place the Action names a backend; Docker's (and dockerode) loads only if chosen.
        backend: await loadBackend(inputs.sandbox),
        ...(hostIsolation === null ? {} : { hostIsolation }),
        runLink: runsUrl,
        trajectoryLink: () =>
          `the workflow run's summary and its \`issue-agent-trajectory\` artifact: ${runsUrl}`,
        cancelled: () => Promise.resolve(cancelledBy),
        attempt: { number: 1, final: true },
        // No trajectory outlives the workflow run, so no answer could continue it: no triage.
        canContinue: false,
        logger,
        baseBranch: inputs.baseBranch,
        // The issue's images, fetched with the workflow's token (a private repository's need it).
        images: { webOrigin: runner.serverUrl },
      },
      signal,
    );
  } catch (error) {
    report(io, jobsDir, jobId, null, redactor, trigger, runsUrl);
    throw error;
  }
  const summary = report(io, jobsDir, jobId, result, redactor, trigger, runsUrl);
  logger.info({ outcome: result.outcome, pr: result.pullRequest?.url ?? null }, 'done');
  if (result.outcome === 'failed') {
    // The progress comment on the issue already says what failed and why.
    io.annotate('error', `issue-agent: the run failed: ${summary.reason ?? 'see the progress comment'}`);
    return { exitCode: 1, outcome: result.outcome };
  }
  return { exitCode: 0, outcome: result.outcome };
}

/**
 * `.github/issue-agent.yml` from the default branch, with the workflow's inputs as defaults for the
 * label and handle, and as overrides for budgets, draft and test command (the workflow is the more
 * specific, and more visible, place). `_extends` (Probot's cross-repo config) is not followed.
 */
async function repoConfig(
  gh: GitHubClient,
  where: { owner: string; repo: string },
  inputs: ActionInputs,
): Promise<RepoConfig> {
  let raw: unknown = null;
  try {
    const { data } = await gh.rest.repos.getContent({ ...where, path: REPO_CONFIG_PATH });
    if (!Array.isArray(data) && data.type === 'file' && 'content' in data) {
      try {
        raw = parseYaml(Buffer.from(data.content, 'base64').toString('utf8')) as unknown;
      } catch (error) {
        throw new RepoConfigError([`it is not valid YAML: ${oneLine(error)}`]);
      }
    }
  } catch (error) {
    if (!isNotFound(error)) throw error;
  }
  const config = parseRepoConfig(raw, { label: inputs.label, handle: inputs.handle });
  return {
    ...config,
    budgets: { ...config.budgets, ...inputs.budgets },
    ...(inputs.draft === null ? {} : { draft: inputs.draft }),
    ...(inputs.testCommand === null ? {} : { testCommand: inputs.testCommand }),
  };
}

/** Outputs, the job summary and the trajectory file; what the run reported, for the annotation. */
function report(
  io: RunnerIo,
  jobsDir: string,
  jobId: string,
  result: FixJobResult | null,
  redactor: Redactor,
  trigger: Trigger,
  runsUrl: string,
): { reason: string | null } {
  const dir = join(jobsDir, jobId, 'trajectory');
  const store = existsSync(join(dir, 'base_state.json')) ? FileEventStore.open(dir) : null;
  const state = store === null ? null : reduceState(store.events);
  const outcome = result?.outcome ?? state?.outcome?.outcome ?? 'failed';
  io.setOutput('outcome', outcome);
  io.setOutput('pr-url', result?.pullRequest?.url ?? '');
  io.setOutput(
    'pr-number',
    result?.pullRequest === null || result === null ? '' : String(result.pullRequest.number),
  );
  io.setOutput('branch', result?.branch ?? '');
  io.setOutput('cost-usd', (state?.usd ?? 0).toFixed(4));
  io.setOutput('tokens', String(state === null ? 0 : totalTokens(state.usage)));
  io.setOutput('steps', String(state?.steps ?? 0));
  const file = join(jobsDir, jobId, 'trajectory.json');
  if (store !== null && state !== null) {
    writeFileSync(
      file,
      `${JSON.stringify(redactor.redactDeep({ base: store.base, events: store.events, state }), null, 2)}\n`,
    );
    io.setOutput('trajectory', file);
    io.setOutput('trajectory-dir', dir);
  } else {
    io.setOutput('trajectory', '');
    io.setOutput('trajectory-dir', '');
  }
  const lines = [
    `## Issue Agent: ${outcome}`,
    '',
    `| | |`,
    `|---|---|`,
    `| Request | ${trigger.repo.owner}/${trigger.repo.name}#${trigger.issue.number} by @${trigger.sender.login} |`,
    `| Pull request | ${result?.pullRequest?.url ?? 'none'} |`,
    `| Steps | ${state?.steps ?? 0} |`,
    `| Tokens | ${state === null ? 0 : totalTokens(state.usage)} |`,
    `| Cost | ${formatUsd(state?.usd ?? 0)} |`,
    '',
  ];
  if (store !== null) {
    const rendered = renderPullRequest({
      base: store.base,
      events: store.events,
      issue: { number: trigger.issue.number, title: trigger.issue.title },
      redactor,
      trajectoryLink: `this run's \`issue-agent-trajectory\` artifact (${runsUrl})`,
      maxTrajectoryComments: 12,
    });
    let text = [rendered.body, ...rendered.trajectoryComments].join('\n\n---\n\n');
    if (Buffer.byteLength(text) > SUMMARY_BUDGET) {
      text = `${text.slice(0, SUMMARY_BUDGET)}\n\n… (cut to fit the job summary; the artifact has the whole trajectory)\n`;
    }
    lines.push(redactor.redact(text));
  }
  io.appendSummary(lines.join('\n'));
  return { reason: state?.outcome?.reason ?? null };
}

interface FailContext {
  readonly runner: RunnerContext;
  readonly trigger: Trigger;
  readonly token: string;
  readonly logger: Logger | null;
  readonly gh?: GitHubClient;
}

/**
 * A failure the workflow must show: an error annotation, `outcome=failed`, and a comment on the
 * issue that says what failed (unless the fix core already wrote it into its progress comment).
 */
async function fail(
  io: RunnerIo,
  message: string,
  ctx: FailContext | null,
  alreadyReported = false,
): Promise<ActionResult> {
  const redactor = new Redactor(ctx === null ? [] : [ctx.token]);
  const text = redactor.redact(message);
  io.annotate('error', `issue-agent: ${text}`);
  io.setOutput('outcome', 'failed');
  io.appendSummary(`## Issue Agent: failed\n\n${text}\n`);
  if (ctx !== null && !alreadyReported) {
    const runsUrl = `${ctx.runner.serverUrl}/${ctx.runner.repository}/actions/runs/${ctx.runner.runId}`;
    const gh =
      ctx.gh ?? tokenClient(ctx.runner.apiUrl, () => Promise.resolve(ctx.token), pino({ level: 'silent' }));
    const problems = text.split('; ');
    try {
      await gh.rest.issues.createComment({
        owner: ctx.trigger.repo.owner,
        repo: ctx.trigger.repo.name,
        issue_number: ctx.trigger.issue.number,
        body: publishable(
          [
            `I could not work on this: the Issue Agent action failed (${runsUrl}).`,
            '',
            ...(problems.length > 1 ? problems.map((p) => `- ${p}`) : [`> ${text.replace(/\n/g, '\n> ')}`]),
          ].join('\n'),
          { redactor, trustedHosts: [...githubHosts(ctx.runner.apiUrl), ...hostsIn(runsUrl)] },
        ),
      });
    } catch (error) {
      io.annotate(
        'warning',
        `issue-agent: could not comment on the issue: ${redactor.redact(oneLine(error))}`,
      );
    }
  }
  return { exitCode: 1, outcome: 'failed' };
}

function skip(io: RunnerIo, write: (line: string) => void, reason: string): ActionResult {
  write(`issue-agent: ${reason}`);
  io.setOutput('outcome', 'skipped');
  return { exitCode: 0, outcome: 'skipped' };
}

function oneLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split('\n')[0] ?? '';
}

function nonEmpty(v: string | undefined): string | null {
  return v === undefined || v.trim() === '' ? null : v.trim();
}
