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
import { findProgressMarker, renderProgress } from '../publish/progress.js';
import { Redactor } from '../publish/redact.js';
import { firstTime, withIssueLock } from '../queue/issue-lock.js';
import type { FixJob } from '../queue/payloads.js';
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
}

export type IntakeResult =
  | { readonly status: 'queued'; readonly jobId: string; readonly position: number }
  | { readonly status: 'duplicate'; readonly jobId: string }
  | { readonly status: 'ignored'; readonly reason: string }
  | { readonly status: 'refused'; readonly reason: string }
  | { readonly status: 'config_error'; readonly problems: readonly string[] };

const ROLE_RANK: Readonly<Record<string, number>> = { read: 1, triage: 2, write: 3, maintain: 4, admin: 5 };
const LIVE_STATES = new Set(['waiting', 'active', 'delayed', 'prioritized', 'waiting-children', 'paused']);

/**
 * Decides what one trigger means, off the webhook's request path: the repo's settings, whether the
 * label or mention is ours, who asked, and whether a job for the issue already exists. Enqueues at
 * most one fix job per issue and announces it in one progress comment. Safe to run twice for the
 * same delivery (BullMQ retries): the progress comment and the job id are found again, not doubled.
 */
export async function processTrigger(trigger: Trigger, deps: IntakeDeps, attempt = 0): Promise<IntakeResult> {
  const log = deps.logger.child({
    delivery: trigger.deliveryId,
    repo: `${trigger.repo.owner}/${trigger.repo.name}`,
    issue: trigger.issue.number,
  });
  const octokit = await deps.octokit(trigger.installationId);
  const where = { owner: trigger.repo.owner, repo: trigger.repo.name };

  let config: RepoConfig;
  try {
    const { config: raw } = await octokit.config.get({ ...where, path: REPO_CONFIG_PATH });
    config = parseRepoConfig(raw, deps.defaults);
  } catch (error) {
    const problems =
      error instanceof RepoConfigError ? error.problems : [`it could not be read: ${firstLine(error)}`];
    if (!(error instanceof RepoConfigError) && !isYamlError(error)) throw error;
    log.warn({ problems }, 'invalid repository config');
    if (
      matchesDefaults(trigger, deps.defaults) &&
      (await firstTime(
        deps.redis,
        `${deps.settings.prefix}:config-error:${issueKey(trigger.repo.id, trigger.issue.number)}:${hash(problems.join())}`,
        24 * 3600,
      ))
    ) {
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
  if (trigger.issue.isPullRequest)
    return ignored(log, 'pull request conversations are not handled by fix jobs');
  if (trigger.issue.state !== 'open') return ignored(log, 'the issue is closed');

  const who = await mayTrigger(trigger, config, octokit, deps);
  if (who.allowed === 'self') return ignored(log, 'the App itself');
  if (!who.allowed) {
    log.info({ sender: trigger.sender.login, reason: who.reason }, 'trigger refused');
    if (
      await firstTime(
        deps.redis,
        `${deps.settings.prefix}:refused:${issueKey(trigger.repo.id, trigger.issue.number)}:${trigger.sender.id}`,
        24 * 3600,
      )
    ) {
      await comment(octokit, deps, where, trigger.issue.number, who.reply);
    }
    return { status: 'refused', reason: who.reason };
  }

  await react(octokit, where, trigger);

  const jobId = fixJobId(trigger.repo.id, trigger.issue.number, trigger.deliveryId);
  const lockKey = `${deps.settings.prefix}:lock:${issueKey(trigger.repo.id, trigger.issue.number)}`;
  return withIssueLock(deps.redis, lockKey, async () => {
    const existing = await liveJobFor(deps.fixQueue, issueKey(trigger.repo.id, trigger.issue.number));
    if (existing !== null && existing !== jobId) {
      log.info({ job: existing }, 'a job for this issue is already queued or running');
      return { status: 'duplicate', jobId: existing } as const;
    }
    if (existing === jobId) return { status: 'queued', jobId, position: 0 } as const;
    const position = (await deps.fixQueue.getWaitingCount()) + (await deps.fixQueue.getActiveCount()) + 1;
    const commentId = await progressComment(
      octokit,
      deps,
      where,
      trigger.issue.number,
      jobId,
      position,
      attempt > 0,
    );
    const job: FixJob = {
      v: 1,
      kind: 'fix-issue',
      installationId: trigger.installationId,
      repo: { id: trigger.repo.id, owner: trigger.repo.owner, name: trigger.repo.name },
      issue: { number: trigger.issue.number, title: trigger.issue.title },
      instructions: ours.instruction === '' ? [] : [ours.instruction],
      trigger: {
        kind: trigger.kind,
        deliveryId: trigger.deliveryId,
        sender: { login: trigger.sender.login, id: trigger.sender.id },
        commentId: trigger.comment?.id ?? null,
      },
      config: { ...config },
      progressCommentId: commentId,
      requestedAt: trigger.receivedAt,
    };
    await deps.fixQueue.add('fix-issue', job, fixJobOptions(deps.settings, job, jobId));
    log.info({ job: jobId, position }, 'fix job queued');
    return { status: 'queued', jobId, position } as const;
  });
}

function matchesDefaults(trigger: Trigger, defaults: { label: string; handle: string }): boolean {
  return matches(trigger, defaults) !== null;
}

function matches(
  trigger: Trigger,
  config: { label: string; handle: string },
): { instruction: string } | null {
  if (trigger.kind === 'label') return trigger.label === config.label ? { instruction: '' } : null;
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

async function liveJobFor(queue: Queue<FixJob>, dedupId: string): Promise<string | null> {
  const id = await queue.getDeduplicationJobId(dedupId);
  if (id === null) return null;
  const state = await queue.getJobState(id);
  return LIVE_STATES.has(state) ? id : null;
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
  where: { owner: string; repo: string },
  issue: number,
  jobId: string,
  position: number,
  mayExist: boolean,
): Promise<number> {
  const body = deps.redactor.redact(renderProgress({ kind: 'queued', jobId, position }));
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
