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
import { fixJobSchema, type FixJob } from '../queue/payloads.js';
import { fixJobOptions, issueKey, type QueueSettings } from '../queue/queues.js';
import { mayPush, mayTrigger, pullOwnership, react, reviewContext, targetOf } from './trigger-rules.js';
import type { Trigger } from '../queue/trigger.js';
import { claimAnswer, clearQuestion, isAnswered, pendingQuestion } from './question.js';
import { redisCiLedger } from './ci-ledger.js';
import { decideCiRound } from './ci-round.js';
import { mayEvaluate } from './evaluate-request.js';
import { storeRequest } from './approval.js';
import { takeApproval } from './approve-request.js';
import {
  decide,
  placeJob,
  reasonText,
  type Enqueue,
  type Facts,
  type IntakeConfig,
  type Need,
  type Plan,
  type RunFacts,
  type Say,
} from './intake-decision.js';

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

/** What intake works with for one trigger: its clients, the repository's settings and the log. */
interface Context {
  readonly trigger: Trigger;
  readonly deps: IntakeDeps;
  readonly octokit: Octokit;
  readonly where: Where;
  readonly prefix: string;
  readonly log: Logger;
}

/** The decision asks for each fact at most once: more reads than this for one trigger is a bug. */
const MAX_FACTS = 16;

/**
 * Decides what one trigger means, off the webhook's request path, and does it: reads the repo's
 * settings and each fact the decision asks for (intake-decision.ts), then carries out its plan
 * (comments, the reaction, the queue). Enqueues at most one job per issue or PR and announces each
 * job in one progress comment. Safe to run twice for the same delivery (BullMQ retries): the
 * progress comment and the job id are found again, not doubled.
 */
export async function processTrigger(trigger: Trigger, deps: IntakeDeps, attempt = 0): Promise<IntakeResult> {
  const log = deps.logger.child({
    delivery: trigger.deliveryId,
    repo: `${trigger.repo.owner}/${trigger.repo.name}`,
    issue: trigger.issue.number,
  });
  const octokit = await deps.octokit(trigger.installationId);
  const where: Where = { owner: trigger.repo.owner, repo: trigger.repo.name };
  const ctx: Context = { trigger, deps, octokit, where, prefix: deps.settings.prefix, log };
  const config = await readConfig(ctx);
  let facts: Facts = {};
  for (let read = 0; ; read++) {
    const decided = decide(trigger, config, facts);
    if (decided.kind !== 'need') return apply(ctx, decided, attempt);
    if (config.kind !== 'valid' || read >= MAX_FACTS)
      throw new Error(`intake asked for ${decided.fact} after ${read} facts`);
    facts = withFact(facts, decided.phase, await gather(ctx, config.config, decided));
  }
}

/** The repository's settings (cached per repo id), or why they are invalid; other read errors throw. */
async function readConfig(ctx: Context): Promise<IntakeConfig> {
  const { trigger, deps } = ctx;
  try {
    const cached = deps.configCache?.get(trigger.repo.id);
    if (cached !== undefined) return { kind: 'valid', config: cached };
    const { config: raw } = await ctx.octokit.config.get({ ...ctx.where, path: REPO_CONFIG_PATH });
    const config = parseRepoConfig(raw, deps.defaults);
    deps.configCache?.set(trigger.repo.id, config);
    return { kind: 'valid', config };
  } catch (error) {
    if (!(error instanceof RepoConfigError) && !isYamlError(error)) throw error;
    const problems =
      error instanceof RepoConfigError ? error.problems : [`it could not be read: ${firstLine(error)}`];
    return { kind: 'invalid', problems, defaults: deps.defaults };
  }
}

function withFact(facts: Facts, phase: Need['phase'], fact: RunFacts & Facts): Facts {
  return phase === 'delivered'
    ? { ...facts, ...fact }
    : { ...facts, approved: { ...facts.approved, ...fact } };
}

/** Reads the fact a decision asks for (a claim, for an answer or an approval: see intake-decision.ts). */
async function gather(ctx: Context, config: RepoConfig, need: Need): Promise<RunFacts & Facts> {
  const { deps, octokit, where, prefix, log } = ctx;
  const about = need.about;
  const conversation = issueKey(about.repo.id, about.issue.number);
  switch (need.fact) {
    case 'ci':
      return {
        ci: await decideCiRound(
          about,
          config,
          octokit,
          (pr) => redisCiLedger(deps.redis, prefix, issueKey(about.repo.id, pr), about.deliveryId),
          await deps.botUserId(),
          log,
        ),
      };
    case 'question':
      return { question: await pendingQuestion(deps.redis, prefix, conversation) };
    case 'permission':
      return { permission: await mayTrigger(about, config, octokit, deps.botUserId) };
    case 'answered':
      return { answered: await isAnswered(deps.redis, prefix, conversation, need.jobId) };
    case 'answerClaim':
      return {
        answerClaim: await claimAnswer(deps.redis, prefix, conversation, need.jobId, about.deliveryId),
      };
    case 'approval':
      return {
        approval: await takeApproval(about, config, octokit, { redis: deps.redis, prefix }, conversation),
      };
    case 'evaluator':
      return { evaluator: await mayEvaluate(about, octokit) };
    case 'target':
      return { target: await targetOf(octokit, where, about) };
    case 'pull': {
      const { data: pr } = await octokit.rest.pulls.get({ ...where, pull_number: need.pull });
      if (pr.state !== 'open') return { pull: { state: 'closed' } };
      return { pull: { state: 'open', ownership: pullOwnership(pr, await deps.botUserId()) } };
    }
    case 'reviewComments':
      return { reviewComments: await reviewContext(octokit, where, need.pull, about) };
    case 'pushAccess':
      return { pushAccess: await mayPush(about, octokit) };
  }
}

/** Carries out a plan: what it stores and says, the job it queues or stops, and the reaction. */
async function apply(ctx: Context, plan: Plan, attempt: number): Promise<IntakeResult> {
  const { trigger, log } = ctx;
  switch (plan.kind) {
    case 'config_error':
      log.warn({ problems: plan.problems }, 'invalid repository config');
      await say(ctx, plan.say);
      return { status: 'config_error', problems: plan.problems };
    case 'ignore': {
      const reason = reasonText(plan.reason);
      await say(ctx, plan.say);
      if (plan.react !== null) await react(ctx.octokit, ctx.where, plan.react);
      log.info({ reason }, 'trigger ignored');
      return { status: 'ignored', reason };
    }
    case 'refuse': {
      const reason = reasonText(plan.reason);
      log.info({ sender: trigger.sender.login, code: plan.reason.code, reason }, 'trigger refused');
      if (plan.store !== null) {
        const { trigger: request, answers, ttlSeconds } = plan.store;
        const conversation = issueKey(request.repo.id, request.issue.number);
        await storeRequest(
          ctx.deps.redis,
          ctx.prefix,
          conversation,
          { trigger: request, answers },
          ttlSeconds,
        );
      }
      await say(ctx, plan.say);
      if (plan.react !== null) await react(ctx.octokit, ctx.where, plan.react);
      return { status: 'refused', reason };
    }
    case 'cancel': {
      if (plan.clearQuestion !== null) await clearQuestion(ctx.deps.redis, ctx.prefix, plan.clearQuestion);
      const cancelled: string[] = [];
      for (const key of plan.targets) cancelled.push(...(await cancelTarget(ctx, key, plan.by)));
      if (cancelled.length === 0) await say(ctx, plan.sayIfNone);
      log.info({ jobs: cancelled }, 'cancel requested');
      await react(ctx.octokit, ctx.where, plan.react);
      return { status: 'cancelled', jobs: cancelled };
    }
    case 'enqueue': {
      if (plan.approved !== null) {
        const { approval, requester } = plan.approved;
        log.info({ approvedBy: approval.by.login, requester, covers: approval.covers }, 'request approved');
      }
      if (plan.answers !== null)
        log.info({ asked: plan.answers, by: plan.react.sender.login }, 'an answer to the agent’s question');
      if (plan.clearQuestion !== null) await clearQuestion(ctx.deps.redis, ctx.prefix, plan.clearQuestion);
      // The job is announced (its progress comment) and queued before the reaction: an installation's
      // writes go a second apart, and the reaction is the one that can wait.
      const result = await enqueue(ctx, plan.enqueue, attempt);
      await react(ctx.octokit, ctx.where, plan.react);
      const started = result.status === 'queued' || result.status === 'queued_after';
      if (started && plan.approved !== null) await say(ctx, plan.approved.quote);
      return result;
    }
  }
}

/** Says something in the trigger's conversation (once per key, when the plan says so). */
async function say(ctx: Context, what: Say | null): Promise<void> {
  if (what === null) return;
  if (
    what.once !== null &&
    !(await firstTime(ctx.deps.redis, `${ctx.prefix}:${what.once.key}`, what.once.ttlSeconds))
  )
    return;
  await comment(ctx, ctx.trigger.issue.number, what.body);
}

/**
 * Queues a job on its target, under the target's lock: where it goes (placeJob) depends on what the
 * queue holds there at that moment, so it is read and acted on without another request in between.
 */
async function enqueue(ctx: Context, e: Enqueue, attempt: number): Promise<IntakeResult> {
  const { deps, prefix, log } = ctx;
  const { jobId, job, targetKey } = e;
  return withIssueLock(deps.redis, lockKey(prefix, targetKey), async () => {
    const live = await liveJobFor(deps.fixQueue, targetKey);
    const placed = placeJob(e, {
      live,
      liveAttempts:
        live === null ? e.repositoryAttempts : await attemptsOfJob(deps.fixQueue, live, e.repositoryAttempts),
      waiting: await pendingCount(deps.redis, prefix, targetKey),
      pendingAlready: (await deps.redis.lrange(pendingKey(prefix, targetKey), 0, -1)).some((r) =>
        r.includes(`"jobId":"${jobId}"`),
      ),
    });
    const announce = (position: number | null, busy: { replaces: string } | { after: string } | object) =>
      progressComment(ctx, e.target.number, jobId, attempt > 0, {
        kind: 'queued',
        jobId,
        ...e.shown,
        position,
        ...busy,
      });
    switch (placed.kind) {
      case 'live':
        return { status: 'queued', jobId, position: 0 };
      case 'duplicate':
        log.info({ job: placed.live }, 'a job for this issue or PR is already queued or running');
        return { status: 'duplicate', jobId: placed.live };
      case 'behind': {
        // Busy: the request waits for the running job (or replaces it), and is never dropped.
        const after = placed.live;
        if (placed.replace && after !== null)
          await requestCancel(deps.redis, prefix, after, `${ctx.trigger.sender.login} (a newer request)`);
        if (placed.add) {
          const commentId = await announce(
            null,
            after === null ? {} : e.onBusy === 'replace' ? { replaces: after } : { after },
          );
          const n = await addPending(deps.redis, prefix, targetKey, {
            jobId,
            job: { ...job, progressCommentId: commentId, trace: traceCarrier() },
          });
          log.info(
            { job: jobId, after, waiting: n, mode: e.onBusy },
            'request queued behind the running job',
          );
        }
        if (placed.handOff) await handOffLocked(deps.redis, deps.fixQueue, deps.settings, targetKey);
        return { status: 'queued_after', jobId, after: after ?? 'earlier requests' };
      }
      case 'queue': {
        const position = (await deps.fixQueue.getWaitingCount()) + (await deps.fixQueue.getActiveCount()) + 1;
        const commentId = await announce(position, {});
        const payload = { ...job, progressCommentId: commentId, trace: traceCarrier() };
        const added = await deps.fixQueue.add(
          job.kind,
          payload,
          fixJobOptions(deps.settings, targetKey, jobId),
        );
        if (added.id !== jobId) {
          // Deduplicated against a job that took the target after our check (only if the lock expired
          // under us): wait behind it rather than vanish.
          await addPending(deps.redis, prefix, targetKey, { jobId, job: payload });
          log.warn(
            { job: jobId, holder: added.id },
            'the target was taken meanwhile; request queued behind it',
          );
          return { status: 'queued_after', jobId, after: added.id ?? 'another job' };
        }
        log.info({ job: jobId, position, kind: job.kind }, 'job queued');
        return { status: 'queued', jobId, position };
      }
    }
  });
}

/** Cancels what runs or waits for a target: removes waiting jobs, flags the running one for its worker. */
async function cancelTarget(ctx: Context, target: string, by: string): Promise<string[]> {
  const { deps, prefix, octokit, where } = ctx;
  const cancelled = (jobId: string) =>
    renderProgress({ kind: 'cancelled', jobId, by }, deps.redactor, hostsOf(octokit));
  return withIssueLock(deps.redis, lockKey(prefix, target), async () => {
    const out: string[] = [];
    for (const p of await dropPending(deps.redis, prefix, target)) {
      out.push(p.jobId);
      if (p.job.progressCommentId !== null) {
        await octokit.rest.issues.updateComment({
          ...where,
          comment_id: p.job.progressCommentId,
          body: cancelled(p.jobId),
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
            body: cancelled(live),
          });
        }
      }
    }
    return out;
  });
}

/** Finds the progress comment of this job (an intake retry) or posts it. */
async function progressComment(
  ctx: Context,
  issue: number,
  jobId: string,
  mayExist: boolean,
  state: ProgressState,
): Promise<number> {
  const { deps, octokit, where } = ctx;
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

async function comment(ctx: Context, issue: number, body: string): Promise<void> {
  await ctx.octokit.rest.issues.createComment({
    ...ctx.where,
    issue_number: issue,
    body: publishable(body, { redactor: ctx.deps.redactor, trustedHosts: hostsOf(ctx.octokit) }),
  });
}

/** GitHub's hosts for this client: links in what the App posts may lead there. */
function hostsOf(octokit: Octokit): string[] {
  return githubHosts(octokit.request.endpoint.DEFAULTS.baseUrl);
}

function isYamlError(error: unknown): boolean {
  return error instanceof Error && (error.name === 'YAMLException' || /yaml/i.test(error.name));
}

function firstLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split('\n')[0] ?? '';
}

/** How many attempts a queued or running job makes (the repository's count when it cannot be read). */
async function attemptsOfJob(queue: Queue<FixJob>, id: string, fallback: number): Promise<number> {
  const parsed = fixJobSchema.safeParse((await queue.getJob(id))?.data);
  return parsed.success ? parsed.data.config.attempts : fallback;
}
