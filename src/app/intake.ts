import { traceCarrier } from '../telemetry/tracing.js';
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { ProbotOctokit } from 'probot';
import {
  parseRepoConfig,
  REPO_CONFIG_PATH,
  RepoConfigError,
  type RepoConfig,
} from '../config/repo-config.js';
import { findProgressMarker, renderProgress, type ProgressState } from '../publish/progress.js';
import { githubHosts, publishable } from '../publish/publishable.js';
import { Redactor } from '../publish/redact.js';
import {
  addPending,
  dropPending,
  handOffLocked,
  liveJobFor,
  lockKey,
  pendingCount,
  pendingKey,
  requestCancel,
} from '../queue/control.js';
import { firstTime, withIssueLock } from '../queue/issue-lock.js';
import { fixJobSchema, type FixJob, type ReviewContext } from '../queue/payloads.js';
import { evaluateKey, fixJobId, fixJobOptions, issueKey, type QueueSettings } from '../queue/queues.js';
import {
  asksNothingNew,
  buildEvaluateJob,
  buildFixJob,
  matches,
  mayTrigger,
  notOursReply,
  pullOwnership,
  react,
  reviewContext,
  STOP,
  targetOf,
} from './trigger-rules.js';
import { capIssueBody, type Trigger } from '../queue/trigger.js';
import { claimAnswer, clearQuestion, isAnswered, pendingQuestion } from './question.js';
import { decideCiRound, redisCiLedger } from './ci-round.js';
import { stripHiddenText } from '../agent/untrusted-text.js';
import { EVALUATE, EVALUATE_USAGE, mayEvaluate, parseEvaluate } from './evaluate-request.js';
import { APPROVE, storeRequest } from './approval.js';
import { approvedQuote, takeApproval, waitingReply, type Approval } from './approve-request.js';
import type { EvaluateRequest } from '../queue/payloads.js';

export type Octokit = InstanceType<typeof ProbotOctokit>;

export interface IntakeDeps {
  readonly octokit: (installationId: number) => Promise<Octokit>;
  /** The user id of this App's bot account (its own actions never trigger it). */
  readonly botUserId: () => Promise<number>;
  readonly fixQueue: Queue<FixJob>;
  readonly redis: Redis;
  readonly settings: QueueSettings;
  readonly defaults: { readonly label: string; readonly handle: string };
  readonly redactor: Redactor;
  readonly logger: Logger;
  /** Valid repo settings by repo id, so a burst of triggers costs one config read, not one each. */
  readonly configCache?: ConfigCache;
}

/**
 * A short-lived in-process cache of valid `.github/issue-agent.yml` contents. A changed file takes
 * effect within the TTL; an invalid one is never cached (its comment and the refusal stay immediate).
 */
export class ConfigCache {
  private readonly entries = new Map<number, { readonly at: number; readonly config: RepoConfig }>();
  constructor(private readonly ttlMs: number) {}
  get(repoId: number, now = Date.now()): RepoConfig | undefined {
    const e = this.entries.get(repoId);
    if (e === undefined || now - e.at >= this.ttlMs) return undefined;
    return e.config;
  }
  set(repoId: number, config: RepoConfig, now = Date.now()): void {
    if (this.ttlMs <= 0) return;
    if (this.entries.size > 10_000) this.entries.clear();
    this.entries.set(repoId, { at: now, config });
  }
}

export type IntakeResult =
  | { readonly status: 'queued'; readonly jobId: string; readonly position: number }
  | { readonly status: 'queued_after'; readonly jobId: string; readonly after: string }
  | { readonly status: 'duplicate'; readonly jobId: string }
  | { readonly status: 'cancelled'; readonly jobs: readonly string[] }
  | { readonly status: 'ignored'; readonly reason: string }
  | { readonly status: 'refused'; readonly reason: string }
  | { readonly status: 'config_error'; readonly problems: readonly string[] };

type Where = { readonly owner: string; readonly repo: string };

/**
 * Decides what one trigger means, off the webhook's request path: the repo's settings, whether the
 * label or mention is ours, who asked, which issue or PR it is about, and what to do with the job
 * that may already run there (queue after it, replace it, or cancel it). Enqueues at most one job per
 * issue or PR and announces each job in one progress comment. Safe to run twice for the same
 * delivery (BullMQ retries): the progress comment and the job id are found again, not doubled.
 */
export async function processTrigger(
  trigger: Trigger,
  deps: IntakeDeps,
  attempt = 0,
  /** An outsider's request (or answer) a writer approved (`@agent approve`): the approval. */
  approval: Approval | null = null,
): Promise<IntakeResult> {
  const log = deps.logger.child({
    delivery: trigger.deliveryId,
    repo: `${trigger.repo.owner}/${trigger.repo.name}`,
    issue: trigger.issue.number,
  });
  const octokit = await deps.octokit(trigger.installationId);
  const where: Where = { owner: trigger.repo.owner, repo: trigger.repo.name };
  const prefix = deps.settings.prefix;

  let config: RepoConfig;
  try {
    const cached = deps.configCache?.get(trigger.repo.id);
    if (cached === undefined) {
      const { config: raw } = await octokit.config.get({ ...where, path: REPO_CONFIG_PATH });
      config = parseRepoConfig(raw, deps.defaults);
      deps.configCache?.set(trigger.repo.id, config);
    } else {
      config = cached;
    }
  } catch (error) {
    const problems =
      error instanceof RepoConfigError ? error.problems : [`it could not be read: ${firstLine(error)}`];
    if (!(error instanceof RepoConfigError) && !isYamlError(error)) throw error;
    log.warn({ problems }, 'invalid repository config');
    const key = `${prefix}:config-error:${issueKey(trigger.repo.id, trigger.issue.number)}:${hash(problems.join())}`;
    if (matches(trigger, deps.defaults) !== null && (await firstTime(deps.redis, key, 24 * 3600))) {
      await comment(
        octokit,
        deps,
        where,
        trigger.issue.number,
        [
          `I can't start: \`${REPO_CONFIG_PATH}\` is invalid.`,
          '',
          ...problems.map((p) => `- ${p}`),
          '',
          'Fix the file on the default branch and ask again.',
        ].join('\n'),
      );
    }
    return { status: 'config_error', problems };
  }

  // A check failed on a pull request: a round on the App's own PR, or nothing (see ci-round.ts).
  let ci: FixJob['ci'] = null;
  if (trigger.kind === 'ci_failure') {
    const decided = await decideCiRound(
      trigger,
      config,
      octokit,
      (pr) => redisCiLedger(deps.redis, prefix, issueKey(trigger.repo.id, pr), trigger.deliveryId),
      await deps.botUserId(),
      log,
    );
    if (decided.kind === 'none') {
      log.info({ check: trigger.checkRun?.name, reason: decided.reason }, 'no CI round');
      if (decided.comment !== null)
        await comment(octokit, deps, where, trigger.issue.number, decided.comment);
      return ignored(log, decided.reason);
    }
    ci = decided.ci;
  }
  const mentioned = trigger.kind === 'ci_failure' ? { instruction: '' } : matches(trigger, config);
  const conversation = issueKey(trigger.repo.id, trigger.issue.number);
  // An answer to the agent's question (question.ts); the issue author's, when they may not start
  // jobs, is new instructions nobody who can has read: it waits for an approval like a request.
  const answered = await answerFor(trigger, mentioned, approval, config, octokit, deps, log);
  if (answered?.kind === 'needs_approval') return answerWaits(trigger, config, octokit, deps, answered.jobId);
  const answer = answered;
  if (mentioned === null && answer === null) return ignored(log, 'not our label or handle');
  const ours = mentioned ?? { instruction: '' };
  const cancel = trigger.kind === 'unlabel' || (trigger.kind !== 'manual' && STOP.test(ours.instruction));
  if (trigger.issue.state !== 'open' && !cancel) return ignored(log, 'the issue or PR is closed');

  const who =
    approval === null && answer === null && ci === null
      ? await mayTrigger(trigger, config, octokit, deps.botUserId)
      : ({ allowed: true } as const);
  if (who.allowed === 'self') return ignored(log, 'the App itself');
  if (!who.allowed) {
    log.info({ sender: trigger.sender.login, reason: who.reason }, 'trigger refused');
    // A person's request, in a comment or a review comment (not a bot's, not a stop, an approval or
    // an evaluation), waits for someone who may approve it (approve-request.ts).
    const person = trigger.sender.type !== 'Bot' && !trigger.sender.login.endsWith('[bot]');
    const waits =
      person &&
      (trigger.kind === 'mention' || trigger.kind === 'review_comment') &&
      !cancel &&
      !APPROVE.test(ours.instruction) &&
      !EVALUATE.test(ours.instruction) &&
      ours.instruction !== '';
    if (waits)
      await storeRequest(
        deps.redis,
        prefix,
        conversation,
        { trigger, answers: null },
        config.approvalDays * 86_400,
      );
    const key = `${prefix}:refused:${conversation}:${trigger.sender.id}`;
    if (await firstTime(deps.redis, key, 24 * 3600)) {
      const approve = waits
        ? `\n\n${waitingReply(config, trigger.kind === 'review_comment' ? 'review_comment' : 'request')}`
        : '';
      await comment(octokit, deps, where, trigger.issue.number, `${who.reply}${approve}`);
    }
    return { status: 'refused', reason: who.reason };
  }
  // `@agent approve`: the request it covers runs, once, with the text it had at the approval.
  if (trigger.kind === 'mention' && approval === null && APPROVE.test(ours.instruction))
    return startApproved(trigger, config, octokit, deps, attempt, log);
  // `@agent evaluate …`: an admin's request, answered where it was asked.
  let evaluate: EvaluateRequest | null = null;
  if (trigger.kind === 'mention' && EVALUATE.test(ours.instruction)) {
    // Who asks first: only an admin hears anything more about the command (once a day otherwise).
    const admin = await mayEvaluate(trigger, octokit);
    if (!admin.allowed) {
      log.info({ sender: trigger.sender.login, reason: admin.reason }, 'evaluate refused');
      const key = `${prefix}:refused-evaluate:${conversation}:${trigger.sender.id}`;
      if (await firstTime(deps.redis, key, 24 * 3600)) {
        await comment(octokit, deps, where, trigger.issue.number, admin.reply);
      }
      return { status: 'refused', reason: admin.reason };
    }
    const parsed = parseEvaluate(ours.instruction);
    if (!parsed.ok) {
      await comment(
        octokit,
        deps,
        where,
        trigger.issue.number,
        `I can't start the evaluation: ${parsed.problem}.\n\n${EVALUATE_USAGE}`,
      );
      return { status: 'refused', reason: `bad evaluate request: ${parsed.problem}` };
    }
    evaluate = parsed.request;
  }
  // The job is announced (its progress comment) and queued before the reaction: an installation's
  // writes go a second apart, and the reaction is the one that can wait.
  const accept = async (): Promise<IntakeResult> => {
    // The target: a PR's own conversation, or the App's open PR for an issue (a follow-up there, never
    // a second PR), or the issue itself.
    // An evaluation reports in the conversation that asked, whatever it is; it opens no pull request.
    // An answer continues a conversation on the issue itself, never on a PR opened since.
    const target =
      evaluate === null && answer === null
        ? await targetOf(octokit, where, trigger)
        : ({ kind: 'issue', number: trigger.issue.number } as const);
    const targetKey =
      evaluate === null
        ? issueKey(trigger.repo.id, target.number)
        : evaluateKey(trigger.repo.id, target.number);

    // A stop, or any other request on the issue, ends the wait for an answer to an earlier question.
    if (answer === null && evaluate === null && target.kind === 'issue')
      await clearQuestion(deps.redis, prefix, issueKey(trigger.repo.id, trigger.issue.number));
    if (cancel) {
      const keys = [
        targetKey,
        ...(target.number === trigger.issue.number ? [] : [issueKey(trigger.repo.id, trigger.issue.number)]),
        // An evaluation asked for here stops too.
        evaluateKey(trigger.repo.id, trigger.issue.number),
      ];
      const cancelled: string[] = [];
      for (const key of keys)
        cancelled.push(...(await cancelTarget(octokit, deps, where, key, trigger.sender.login)));
      if (cancelled.length === 0 && trigger.kind !== 'unlabel') {
        await comment(
          octokit,
          deps,
          where,
          trigger.issue.number,
          'Nothing to stop: no job of mine is queued or running here.',
        );
      }
      log.info({ jobs: cancelled }, 'cancel requested');
      return { status: 'cancelled', jobs: cancelled };
    }

    let reviewComments: ReviewContext[] = [];
    if (target.kind === 'pull') {
      const { data: pr } = await octokit.rest.pulls.get({ ...where, pull_number: target.number });
      if (pr.state !== 'open') return ignored(log, 'the pull request is closed');
      const owner = pullOwnership(pr, await deps.botUserId());
      if (!owner.ours) {
        // Pushing to someone else's branch (or a fork, or `main` behind a PR from it) is never done.
        const key = `${prefix}:not-mine:${issueKey(trigger.repo.id, target.number)}`;
        if (await firstTime(deps.redis, key, 24 * 3600)) {
          await comment(octokit, deps, where, trigger.issue.number, notOursReply(owner));
        }
        return {
          status: 'refused',
          reason: owner.fork ? 'pull request from a fork' : 'not one of the App pull requests',
        };
      }
      reviewComments = await reviewContext(octokit, where, target.number, trigger);
    }

    const jobId = fixJobId(trigger.repo.id, target.number, trigger.deliveryId);
    const approvedBy =
      approval === null ? null : { ...approval.by, covers: { ...approval.covers }, at: approval.at };
    const job =
      evaluate === null
        ? ci !== null
          ? { ...buildFixJob(trigger, target, config, '', []), ci }
          : answer === null
            ? buildFixJob(trigger, target, config, ours.instruction, reviewComments, approvedBy)
            : {
                // The answer continues the asking job's conversation; were its trajectory gone from
                // the worker hosts, a new run still gets the answer, as an instruction.
                ...buildFixJob(
                  trigger,
                  target,
                  config,
                  `Answer to the agent's question: ${answer.text}`,
                  [],
                  approvedBy,
                ),
                // The repository's settings, not any `(try N)` in the answer's text: an answer may
                // come from an outsider, who cannot ask for more attempts.
                config: { ...config },
                continues: { jobId: answer.jobId, answer: { by: trigger.sender.login, text: answer.text } },
              }
        : buildEvaluateJob(trigger, config, ours.instruction, evaluate);

    const shown = {
      ...(approvedBy === null
        ? {}
        : { approval: { requestedBy: trigger.sender.login, approvedBy: approvedBy.login } }),
      ...(ci === null ? {} : { ciRound: { round: ci.round, of: ci.of } }),
    };
    return withIssueLock(deps.redis, lockKey(prefix, targetKey), async () => {
      const live = await liveJobFor(deps.fixQueue, targetKey);
      if (live === jobId) return { status: 'queued', jobId, position: 0 } as const;
      // Requests already waiting keep their turn even if nothing runs this instant (a job just ended
      // and its worker has not handed over yet).
      const waiting = await pendingCount(deps.redis, prefix, targetKey);
      if (
        live !== null &&
        asksNothingNew(job, {
          repository: config.attempts,
          live: await attemptsOfJob(deps.fixQueue, live, config.attempts),
        })
      ) {
        log.info({ job: live }, 'a job for this issue or PR is already queued or running');
        return { status: 'duplicate', jobId: live } as const;
      }
      if (live !== null || waiting > 0) {
        // Busy: the request waits for the running job (or replaces it), and is never dropped.
        const pendingAlready = (await deps.redis.lrange(pendingKey(prefix, targetKey), 0, -1)).some((r) =>
          r.includes(`"jobId":"${jobId}"`),
        );
        if (!pendingAlready) {
          // Only a request by someone who may start jobs replaces a running one: not an answer
          // (its author may be an outsider), not an automatic CI round.
          if (config.onBusy === 'replace' && live !== null && answer === null && ci === null)
            await requestCancel(deps.redis, prefix, live, `${trigger.sender.login} (a newer request)`);
          const commentId = await progressComment(octokit, deps, where, target.number, jobId, attempt > 0, {
            kind: 'queued',
            jobId,
            ...shown,
            position: null,
            ...(live === null ? {} : config.onBusy === 'replace' ? { replaces: live } : { after: live }),
          });
          const n = await addPending(deps.redis, prefix, targetKey, {
            jobId,
            job: { ...job, progressCommentId: commentId, trace: traceCarrier() },
          });
          log.info(
            { job: jobId, after: live, waiting: n, mode: config.onBusy },
            'request queued behind the running job',
          );
        }
        if (live === null) await handOffLocked(deps.redis, deps.fixQueue, deps.settings, targetKey);
        return { status: 'queued_after', jobId, after: live ?? 'earlier requests' } as const;
      }
      const position = (await deps.fixQueue.getWaitingCount()) + (await deps.fixQueue.getActiveCount()) + 1;
      const commentId = await progressComment(octokit, deps, where, target.number, jobId, attempt > 0, {
        kind: 'queued',
        jobId,
        ...shown,
        position,
      });
      const added = await deps.fixQueue.add(
        job.kind,
        { ...job, progressCommentId: commentId, trace: traceCarrier() },
        fixJobOptions(deps.settings, targetKey, jobId),
      );
      if (added.id !== jobId) {
        // Deduplicated against a job that took the target after our check (only if the lock expired
        // under us): wait behind it rather than vanish.
        await addPending(deps.redis, prefix, targetKey, {
          jobId,
          job: { ...job, progressCommentId: commentId, trace: traceCarrier() },
        });
        log.warn(
          { job: jobId, holder: added.id },
          'the target was taken meanwhile; request queued behind it',
        );
        return { status: 'queued_after', jobId, after: added.id ?? 'another job' } as const;
      }
      log.info({ job: jobId, position, kind: job.kind }, 'job queued');
      return { status: 'queued', jobId, position } as const;
    });
  };
  const result = await accept();
  await react(octokit, where, trigger);
  return result;
}

/**
 * `@agent approve` by someone who may: starts the request it covers (approve-request.ts) with the
 * text it had at the approval, and quotes that text in the conversation; or says why nothing starts.
 */
async function startApproved(
  trigger: Trigger,
  config: RepoConfig,
  octokit: Octokit,
  deps: IntakeDeps,
  attempt: number,
  log: Logger,
): Promise<IntakeResult> {
  const prefix = deps.settings.prefix;
  const where: Where = { owner: trigger.repo.owner, repo: trigger.repo.name };
  const conversation = issueKey(trigger.repo.id, trigger.issue.number);
  const taken = await takeApproval(trigger, config, octokit, { redis: deps.redis, prefix }, conversation);
  if (taken.kind === 'refused') {
    await comment(octokit, deps, where, trigger.issue.number, taken.reply);
    return ignored(log, taken.reason);
  }
  log.info(
    {
      approvedBy: trigger.sender.login,
      requester: taken.request.sender.login,
      covers: taken.approval.covers,
    },
    'request approved',
  );
  const result = await processTrigger(taken.request, deps, attempt, taken.approval);
  const started = result.status === 'queued' || result.status === 'queued_after';
  if (started && (await firstTime(deps.redis, `${prefix}:approval-quote:${trigger.deliveryId}`, 24 * 3600))) {
    const quote = approvedQuote(taken.request, taken.approval, taken.editedBefore);
    await comment(octokit, deps, where, trigger.issue.number, quote);
  }
  return result;
}

/** Cancels what runs or waits for a target: removes waiting jobs, flags the running one for its worker. */
async function cancelTarget(
  octokit: Octokit,
  deps: IntakeDeps,
  where: Where,
  target: string,
  by: string,
): Promise<string[]> {
  const prefix = deps.settings.prefix;
  return withIssueLock(deps.redis, lockKey(prefix, target), async () => {
    const out: string[] = [];
    for (const p of await dropPending(deps.redis, prefix, target)) {
      out.push(p.jobId);
      if (p.job.progressCommentId !== null) {
        await octokit.rest.issues.updateComment({
          ...where,
          comment_id: p.job.progressCommentId,
          body: renderProgress({ kind: 'cancelled', jobId: p.jobId, by }, deps.redactor, hostsOf(octokit)),
        });
      }
    }
    const live = await liveJobFor(deps.fixQueue, target);
    if (live !== null) {
      out.push(live);
      const job = await deps.fixQueue.getJob(live);
      const state = await deps.fixQueue.getJobState(live);
      await requestCancel(deps.redis, prefix, live, by);
      if (state !== 'active' && job !== undefined) {
        // Not started: it is removed here; a worker that picks it up in the meantime sees the flag.
        await job.remove().catch(() => undefined);
        if (job.data.progressCommentId !== null) {
          await octokit.rest.issues.updateComment({
            ...where,
            comment_id: job.data.progressCommentId,
            body: renderProgress({ kind: 'cancelled', jobId: live, by }, deps.redactor, hostsOf(octokit)),
          });
        }
      }
    }
    return out;
  });
}

/** Finds the progress comment of this job (an intake retry) or posts it. */
async function progressComment(
  octokit: Octokit,
  deps: IntakeDeps,
  where: Where,
  issue: number,
  jobId: string,
  mayExist: boolean,
  state: ProgressState,
): Promise<number> {
  const body = renderProgress(state, deps.redactor, hostsOf(octokit));
  if (mayExist) {
    const botId = await deps.botUserId();
    for await (const page of octokit.paginate.iterator(octokit.rest.issues.listComments, {
      ...where,
      issue_number: issue,
      per_page: 100,
    })) {
      const found = page.data.find((c) => c.user?.id === botId && findProgressMarker(c.body ?? '') === jobId);
      if (found !== undefined) return found.id;
    }
  }
  const { data } = await octokit.rest.issues.createComment({ ...where, issue_number: issue, body });
  return data.id;
}

async function comment(
  octokit: Octokit,
  deps: IntakeDeps,
  where: { owner: string; repo: string },
  issue: number,
  body: string,
): Promise<void> {
  await octokit.rest.issues.createComment({
    ...where,
    issue_number: issue,
    body: publishable(body, { redactor: deps.redactor, trustedHosts: hostsOf(octokit) }),
  });
}

/** GitHub's hosts for this client: links in what the App posts may lead there. */
function hostsOf(octokit: Octokit): string[] {
  return githubHosts(octokit.request.endpoint.DEFAULTS.baseUrl);
}

function ignored(log: Logger, reason: string): IntakeResult {
  log.info({ reason }, 'trigger ignored');
  return { status: 'ignored', reason };
}

function isYamlError(error: unknown): boolean {
  return error instanceof Error && (error.name === 'YAMLException' || /yaml/i.test(error.name));
}

function firstLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split('\n')[0] ?? '';
}

function hash(text: string): string {
  let h = 0;
  for (let i = 0; i < text.length; i++) h = (Math.imul(31, h) + text.charCodeAt(i)) | 0;
  return (h >>> 0).toString(36);
}

type Answered =
  | { readonly kind: 'answer'; readonly jobId: string; readonly text: string }
  /** The issue's author, who cannot start jobs, answered: it waits for an approval like a request. */
  | { readonly kind: 'needs_approval'; readonly jobId: string };

/** An answer's text as a job carries it: hidden text removed, capped like an issue's body. */
function answerText(trigger: Trigger): string {
  return capIssueBody(stripHiddenText(trigger.comment?.body ?? '')).trim();
}

/** An approved answer (its text as approved) to the question of `jobId`; null when it says nothing. */
function approvedAnswer(trigger: Trigger, jobId: string): Answered | null {
  const text = answerText(trigger);
  return text === '' ? null : { kind: 'answer', jobId, text };
}

/**
 * The answer a trigger gives to the agent's question, if any: the approved one, or the first comment
 * on an issue whose last job ended `needs_info` (commands are not answers; see answerOf).
 */
async function answerFor(
  trigger: Trigger,
  mentioned: { readonly instruction: string } | null,
  approval: Approval | null,
  config: RepoConfig,
  octokit: Octokit,
  deps: IntakeDeps,
  log: Logger,
): Promise<Answered | null> {
  if (approval !== null) return approval.answers === null ? null : approvedAnswer(trigger, approval.answers);
  const candidate =
    trigger.kind === 'mention' &&
    !trigger.issue.isPullRequest &&
    trigger.issue.state === 'open' &&
    trigger.comment !== undefined &&
    (mentioned === null ||
      (!STOP.test(mentioned.instruction) &&
        !APPROVE.test(mentioned.instruction) &&
        !EVALUATE.test(mentioned.instruction)));
  return candidate ? answerOf(trigger, config, octokit, deps, log) : null;
}

/** Keeps an answer waiting for approval (as approve-request.ts covers it) and says so, once per question. */
async function answerWaits(
  trigger: Trigger,
  config: RepoConfig,
  octokit: Octokit,
  deps: IntakeDeps,
  jobId: string,
): Promise<IntakeResult> {
  const prefix = deps.settings.prefix;
  const conversation = issueKey(trigger.repo.id, trigger.issue.number);
  await storeRequest(
    deps.redis,
    prefix,
    conversation,
    { trigger, answers: jobId },
    config.approvalDays * 86_400,
  );
  if (
    await firstTime(
      deps.redis,
      `${prefix}:refused-answer:${conversation}:${trigger.sender.id}:${jobId}`,
      24 * 3600,
    )
  ) {
    await comment(
      octokit,
      deps,
      { owner: trigger.repo.owner, repo: trigger.repo.name },
      trigger.issue.number,
      `Thanks for the answer, @${trigger.sender.login}. An answer is an instruction to me, and only people who can start jobs in this repository give me those, so it needs a maintainer's approval first. ${waitingReply(config, 'answer')}`,
    );
  }
  return { status: 'refused', reason: `an answer by ${trigger.sender.login} waits for approval` };
}

/**
 * The answer a comment gives to the agent's question waiting on its issue, or null: nothing waits,
 * the commenter is neither the issue's author nor allowed to start jobs, another comment answered
 * first, or it says nothing. An answer by someone allowed to start jobs counts at once; the issue
 * author's, when they may not, needs an approval (`needs_approval`). The text is the comment as
 * delivered (hidden text removed, capped like an issue's body).
 */
async function answerOf(
  trigger: Trigger,
  config: RepoConfig,
  octokit: Octokit,
  deps: IntakeDeps,
  log: Logger,
): Promise<Answered | null> {
  const prefix = deps.settings.prefix;
  const target = issueKey(trigger.repo.id, trigger.issue.number);
  const pending = await pendingQuestion(deps.redis, prefix, target);
  if (pending === null) return null;
  // A bot that opened the issue answers only if trusted like any bot (mayTrigger's trustedBots).
  const byAuthor =
    trigger.issue.authorId !== undefined &&
    trigger.issue.authorId === trigger.sender.id &&
    trigger.sender.type !== 'Bot';
  const who = await mayTrigger(trigger, config, octokit, deps.botUserId);
  if (who.allowed !== true) {
    if (
      byAuthor &&
      answerText(trigger) !== '' &&
      !(await isAnswered(deps.redis, prefix, target, pending.jobId))
    ) {
      log.info({ asked: pending.jobId, by: trigger.sender.login }, 'an answer that waits for approval');
      return { kind: 'needs_approval', jobId: pending.jobId };
    }
    log.info({ sender: trigger.sender.login }, 'a comment on a question by someone who may not answer it');
    return null;
  }
  if (!(await claimAnswer(deps.redis, prefix, target, pending.jobId, trigger.deliveryId))) return null;
  const text = answerText(trigger);
  if (text === '') return null;
  log.info({ asked: pending.jobId, by: trigger.sender.login }, 'an answer to the agent’s question');
  return { kind: 'answer', jobId: pending.jobId, text };
}

/** How many attempts a queued or running job makes (the repository's count when it cannot be read). */
async function attemptsOfJob(queue: Queue<FixJob>, id: string, fallback: number): Promise<number> {
  const parsed = fixJobSchema.safeParse((await queue.getJob(id))?.data);
  return parsed.success ? parsed.data.config.attempts : fallback;
}
