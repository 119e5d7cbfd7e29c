import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { ProbotOctokit } from 'probot';
import { stripHiddenText } from '../agent/untrusted-text.js';
import {
  parseRepoConfig,
  REPO_CONFIG_PATH,
  RepoConfigError,
  type RepoConfig,
} from '../config/repo-config.js';
import { findProgressMarker, renderProgress, type ProgressState } from '../publish/progress.js';
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
import type { FixJob, ReviewContext } from '../queue/payloads.js';
import { fixJobId, fixJobOptions, issueKey, type QueueSettings } from '../queue/queues.js';
import { extractMention, type Trigger } from './triggers.js';

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

const ROLE_RANK: Readonly<Record<string, number>> = { read: 1, triage: 2, write: 3, maintain: 4, admin: 5 };
const STOP = /^(stop|cancel)\b/i;

type Where = { readonly owner: string; readonly repo: string };

/**
 * Decides what one trigger means, off the webhook's request path: the repo's settings, whether the
 * label or mention is ours, who asked, which issue or PR it is about, and what to do with the job
 * that may already run there (queue after it, replace it, or cancel it). Enqueues at most one job per
 * issue or PR and announces each job in one progress comment. Safe to run twice for the same
 * delivery (BullMQ retries): the progress comment and the job id are found again, not doubled.
 */
export async function processTrigger(trigger: Trigger, deps: IntakeDeps, attempt = 0): Promise<IntakeResult> {
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

  const ours = matches(trigger, config);
  if (ours === null) return ignored(log, 'not our label or handle');
  const cancel = trigger.kind === 'unlabel' || STOP.test(ours.instruction);
  if (trigger.issue.state !== 'open' && !cancel) return ignored(log, 'the issue or PR is closed');

  const who = await mayTrigger(trigger, config, octokit, deps);
  if (who.allowed === 'self') return ignored(log, 'the App itself');
  if (!who.allowed) {
    log.info({ sender: trigger.sender.login, reason: who.reason }, 'trigger refused');
    const key = `${prefix}:refused:${issueKey(trigger.repo.id, trigger.issue.number)}:${trigger.sender.id}`;
    if (await firstTime(deps.redis, key, 24 * 3600)) {
      await comment(octokit, deps, where, trigger.issue.number, who.reply);
    }
    return { status: 'refused', reason: who.reason };
  }
  await react(octokit, where, trigger);

  // The target: a PR's own conversation, or the App's open PR for an issue (a follow-up there, never
  // a second PR), or the issue itself.
  const openPr = trigger.issue.isPullRequest ? null : await openPullFor(octokit, where, trigger.issue.number);
  const target = trigger.issue.isPullRequest
    ? { kind: 'pull' as const, number: trigger.issue.number }
    : openPr !== null
      ? { kind: 'pull' as const, number: openPr }
      : { kind: 'issue' as const, number: trigger.issue.number };
  const targetKey = issueKey(trigger.repo.id, target.number);

  if (cancel) {
    const keys = [
      targetKey,
      ...(target.number === trigger.issue.number ? [] : [issueKey(trigger.repo.id, trigger.issue.number)]),
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
    // Typed as always present, but null on GitHub when the fork was deleted.
    const headRepo = nullable(pr.head.repo);
    const fork = headRepo?.full_name !== pr.base.repo.full_name;
    const mine = !fork && pr.head.ref.startsWith('issue-agent/issue-');
    if (!mine) {
      // Pushing to someone else's branch (or a fork, or `main` behind a PR from it) is never done.
      const key = `${prefix}:not-mine:${issueKey(trigger.repo.id, target.number)}`;
      if (await firstTime(deps.redis, key, 24 * 3600)) {
        await comment(
          octokit,
          deps,
          where,
          trigger.issue.number,
          fork
            ? `I don't work on pull requests from forks (this one's branch is in \`${headRepo?.full_name ?? 'a deleted fork'}\`): ` +
                "I could not push there, and I won't run a fork's code. Ask me on the issue instead and I'll open my own pull request."
            : "I only push to pull requests I opened (branches named `issue-agent/issue-<n>`). Ask me on the issue instead and I'll open my own pull request.",
        );
      }
      return {
        status: 'refused',
        reason: fork ? 'pull request from a fork' : 'not one of the App pull requests',
      };
    }
    reviewComments = await reviewContext(octokit, where, target.number, trigger);
  }

  const jobId = fixJobId(trigger.repo.id, target.number, trigger.deliveryId);
  const replyTo =
    trigger.kind === 'review_comment' && trigger.comment !== undefined
      ? {
          kind: 'review_thread' as const,
          commentId: trigger.reviewComment?.inReplyToId ?? trigger.comment.id,
        }
      : target.kind === 'pull'
        ? { kind: 'conversation' as const, commentId: trigger.comment?.id ?? 1 }
        : null;
  const job: FixJob = {
    v: 1,
    kind: target.kind === 'pull' ? 'follow-up' : 'fix-issue',
    installationId: trigger.installationId,
    repo: { id: trigger.repo.id, owner: trigger.repo.owner, name: trigger.repo.name },
    issue: {
      number: target.number,
      title: target.number === trigger.issue.number ? trigger.issue.title : `#${target.number}`,
    },
    pull: target.kind === 'pull' ? { number: target.number } : null,
    instructions: ours.instruction === '' ? [] : [ours.instruction],
    reviewComments,
    trigger: {
      kind: trigger.kind,
      deliveryId: trigger.deliveryId,
      sender: { login: trigger.sender.login, id: trigger.sender.id },
      commentId: trigger.comment?.id ?? null,
      replyTo,
    },
    config: { ...config },
    progressCommentId: null,
    requestedAt: trigger.receivedAt,
  };

  return withIssueLock(deps.redis, lockKey(prefix, targetKey), async () => {
    const live = await liveJobFor(deps.fixQueue, targetKey);
    if (live === jobId) return { status: 'queued', jobId, position: 0 } as const;
    // Requests already waiting keep their turn even if nothing runs this instant (a job just ended
    // and its worker has not handed over yet).
    const waiting = await pendingCount(deps.redis, prefix, targetKey);
    if (live !== null && job.instructions.length === 0 && job.reviewComments.length === 0) {
      // A second label, or a bare mention, asks for nothing the live job is not already doing.
      log.info({ job: live }, 'a job for this issue or PR is already queued or running');
      return { status: 'duplicate', jobId: live } as const;
    }
    if (live !== null || waiting > 0) {
      // Busy: the request waits for the running job (or replaces it), and is never dropped.
      const pendingAlready = (await deps.redis.lrange(pendingKey(prefix, targetKey), 0, -1)).some((r) =>
        r.includes(`"jobId":"${jobId}"`),
      );
      if (!pendingAlready) {
        if (config.onBusy === 'replace' && live !== null)
          await requestCancel(deps.redis, prefix, live, `${trigger.sender.login} (a newer request)`);
        const commentId = await progressComment(octokit, deps, where, target.number, jobId, attempt > 0, {
          kind: 'queued',
          jobId,
          position: null,
          ...(live === null ? {} : config.onBusy === 'replace' ? { replaces: live } : { after: live }),
        });
        const n = await addPending(deps.redis, prefix, targetKey, {
          jobId,
          job: { ...job, progressCommentId: commentId },
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
      position,
    });
    const added = await deps.fixQueue.add(
      job.kind,
      { ...job, progressCommentId: commentId },
      fixJobOptions(deps.settings, targetKey, jobId),
    );
    if (added.id !== jobId) {
      // Deduplicated against a job that took the target after our check (only if the lock expired
      // under us): wait behind it rather than vanish.
      await addPending(deps.redis, prefix, targetKey, {
        jobId,
        job: { ...job, progressCommentId: commentId },
      });
      log.warn({ job: jobId, holder: added.id }, 'the target was taken meanwhile; request queued behind it');
      return { status: 'queued_after', jobId, after: added.id ?? 'another job' } as const;
    }
    log.info({ job: jobId, position, kind: job.kind }, 'job queued');
    return { status: 'queued', jobId, position } as const;
  });
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
          body: deps.redactor.redact(renderProgress({ kind: 'cancelled', jobId: p.jobId, by })),
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
            body: deps.redactor.redact(renderProgress({ kind: 'cancelled', jobId: live, by })),
          });
        }
      }
    }
    return out;
  });
}

async function openPullFor(octokit: Octokit, where: Where, issue: number): Promise<number | null> {
  const { data } = await octokit.rest.pulls.list({
    ...where,
    state: 'open',
    head: `${where.owner}:issue-agent/issue-${issue}`,
    per_page: 1,
  });
  return data[0]?.number ?? null;
}

/**
 * The review comments a request is about: the commented line itself for a review comment (and the
 * thread it replies to), or every comment of a submitted review.
 */
async function reviewContext(
  octokit: Octokit,
  where: Where,
  pull: number,
  trigger: Trigger,
): Promise<ReviewContext[]> {
  if (
    trigger.kind === 'review_comment' &&
    trigger.reviewComment !== undefined &&
    trigger.comment !== undefined
  ) {
    return [
      {
        path: trigger.reviewComment.path,
        line: trigger.reviewComment.line,
        diffHunk: trigger.reviewComment.diffHunk,
        body: stripHiddenText(trigger.comment.body),
        author: trigger.sender.login,
      },
    ];
  }
  if (trigger.kind !== 'review' || trigger.comment === undefined) return [];
  const reviewId = trigger.comment.id;
  const all = await octokit.paginate(octokit.rest.pulls.listReviewComments, {
    ...where,
    pull_number: pull,
    per_page: 100,
  });
  return all
    .filter((c) => c.pull_request_review_id === reviewId)
    .map((c) => ({
      path: c.path,
      line: c.line ?? c.original_line ?? null,
      diffHunk: c.diff_hunk,
      body: stripHiddenText(c.body),
      author: c.user.login,
    }));
}

function matches(
  trigger: Trigger,
  config: { label: string; handle: string },
): { instruction: string } | null {
  if (trigger.kind === 'label' || trigger.kind === 'unlabel') {
    return trigger.label === config.label ? { instruction: '' } : null;
  }
  const m = extractMention(trigger.comment?.body ?? '', config.handle);
  return m === null ? null : { instruction: stripHiddenText(m.instruction).trim() };
}

type Permission = { allowed: true } | { allowed: 'self' } | { allowed: false; reason: string; reply: string };

/**
 * Who may start a job: a bot only when its numeric id is trusted by the repo (a `[bot]` login proves
 * nothing); a person only when their role on the repository, asked of the API now, is allowed.
 */
async function mayTrigger(
  trigger: Trigger,
  config: RepoConfig,
  octokit: Octokit,
  deps: IntakeDeps,
): Promise<Permission> {
  const sender = trigger.sender;
  if (sender.type === 'Bot' || sender.login.endsWith('[bot]')) {
    if (sender.id === (await deps.botUserId())) return { allowed: 'self' };
    if (sender.type === 'Bot' && config.trustedBots.includes(sender.id)) return { allowed: true };
    return {
      allowed: false,
      reason: `bot ${sender.login} (id ${sender.id}) is not trusted`,
      reply:
        `I don't take instructions from other bots (\`${sender.login}\`, id ${sender.id}). ` +
        `A maintainer can allow one by its numeric id in \`trustedBots\` in \`${REPO_CONFIG_PATH}\`.`,
    };
  }
  const { data } = await octokit.rest.repos.getCollaboratorPermissionLevel({
    owner: trigger.repo.owner,
    repo: trigger.repo.name,
    username: sender.login,
  });
  const role = roleOf(data.role_name, data.permission);
  const allowed = config.allowedPermissions.some((p) => p === role);
  if (allowed) return { allowed: true };
  const needed =
    [...config.allowedPermissions].sort((a, b) => (ROLE_RANK[a] ?? 0) - (ROLE_RANK[b] ?? 0))[0] ?? 'write';
  return {
    allowed: false,
    reason: `${sender.login} has role ${role}`,
    reply:
      `Thanks for the request, @${sender.login}. I only take instructions from people with ${needed} access ` +
      `or more to this repository, so I won't start on this. A maintainer can ask me instead.`,
  };
}

function roleOf(roleName: string | undefined, permission: string): string {
  if (roleName !== undefined && roleName in ROLE_RANK) return roleName;
  return permission in ROLE_RANK ? permission : 'none';
}

async function react(
  octokit: Octokit,
  where: { owner: string; repo: string },
  trigger: Trigger,
): Promise<void> {
  if (trigger.kind === 'mention' && trigger.comment !== undefined) {
    await octokit.rest.reactions.createForIssueComment({
      ...where,
      comment_id: trigger.comment.id,
      content: 'eyes',
    });
  } else {
    await octokit.rest.reactions.createForIssue({
      ...where,
      issue_number: trigger.issue.number,
      content: 'eyes',
    });
  }
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
  const body = deps.redactor.redact(renderProgress(state));
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
    body: deps.redactor.redact(body),
  });
}

function nullable<T>(value: T): T | null {
  return value;
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
