import type { GitHubClient } from '../github/app-client.js';
import { stripHiddenText } from '../agent/untrusted-text.js';
import { MAX_ATTEMPTS, REPO_CONFIG_PATH, type RepoConfig } from '../config/repo-config.js';
import type { EvaluateRequest, FixJob, ReviewContext } from '../queue/payloads.js';
import { codeSpan } from '../publish/markdown.js';
import { capIssueBody, type Trigger } from '../queue/trigger.js';
import { extractMention } from './triggers.js';

/**
 * The rules of a trigger that the App (intake) and the Action share: is the label or mention ours,
 * may its sender start a job, which open PR of ours an issue already has, and which review comments
 * a request is about. Only REST reads and a reaction; nothing about queues.
 */

/** What both Probot's Octokit and the worker's client offer (the same REST methods). */
export type RestClient = Pick<GitHubClient, 'rest' | 'paginate'>;

type Where = { readonly owner: string; readonly repo: string };

const ROLE_RANK: Readonly<Record<string, number>> = { read: 1, triage: 2, write: 3, maintain: 4, admin: 5 };
/** `@agent stop` / `@agent cancel`. */
export const STOP = /^(stop|cancel)\b/i;

export async function openPullFor(octokit: RestClient, where: Where, issue: number): Promise<number | null> {
  return (await openPullOn(octokit, where, `issue-agent/issue-${issue}`))?.number ?? null;
}

/** The open PR whose head is `branch` in this repository, with who opened it, or null. */
export async function openPullOn(
  octokit: RestClient,
  where: Where,
  branch: string,
): Promise<{ readonly number: number; readonly author: string | null } | null> {
  const { data } = await octokit.rest.pulls.list({
    ...where,
    state: 'open',
    head: `${where.owner}:${branch}`,
    per_page: 1,
  });
  const pr = data[0];
  return pr === undefined ? null : { number: pr.number, author: pr.user?.login ?? null };
}

/**
 * The review comments a request is about: the commented line itself for a review comment (and the
 * thread it replies to), or every comment of a submitted review.
 */
export async function reviewContext(
  octokit: RestClient,
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

export function matches(
  trigger: Trigger,
  config: { label: string; handle: string },
): { instruction: string } | null {
  if (trigger.kind === 'label' || trigger.kind === 'unlabel') {
    return trigger.label === config.label ? { instruction: '' } : null;
  }
  // A request made through the run server: no label or handle to match; its text is the instruction.
  if (trigger.kind === 'manual')
    return { instruction: stripHiddenText(trigger.manual?.instructions ?? '').trim() };
  const m = extractMention(trigger.comment?.body ?? '', config.handle);
  return m === null ? null : { instruction: stripHiddenText(m.instruction).trim() };
}

export type Permission =
  { allowed: true } | { allowed: 'self' } | { allowed: false; reason: string; reply: string };

/**
 * Who may start a job: a bot only when its numeric id is trusted by the repo (a `[bot]` login proves
 * nothing); a person only when their role on the repository, asked of the API now, is allowed.
 */
export async function mayTrigger(
  trigger: Trigger,
  config: RepoConfig,
  octokit: RestClient,
  botUserId: () => Promise<number>,
): Promise<Permission> {
  const sender = trigger.sender;
  // The run server's admin (authenticated there by the admin token); webhooks never produce this.
  if (trigger.kind === 'manual' && trigger.manual?.admin === true) return { allowed: true };
  if (sender.type === 'Bot' || sender.login.endsWith('[bot]')) {
    if (sender.id === (await botUserId())) return { allowed: 'self' };
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

export async function react(
  octokit: RestClient,
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

/** Where a request goes: the issue itself, or a PR (its own conversation, or the App's PR for the issue). */
export type Target = { readonly kind: 'issue' | 'pull'; readonly number: number };

/** Which open PR of the App's a trigger is about, if any; the issue itself otherwise. */
export async function targetOf(octokit: RestClient, where: Where, trigger: Trigger): Promise<Target> {
  if (trigger.issue.isPullRequest) return { kind: 'pull', number: trigger.issue.number };
  const openPr = await openPullFor(octokit, where, trigger.issue.number);
  return openPr === null ? { kind: 'issue', number: trigger.issue.number } : { kind: 'pull', number: openPr };
}

/** The fix job a trigger asks for (without its progress comment, which the caller posts). */
export function buildFixJob(
  trigger: Trigger,
  target: Target,
  config: RepoConfig,
  instruction: string,
  reviewComments: readonly ReviewContext[],
  /** A writer who approved this outsider's request (`@agent approve`), and what they approved; or null. */
  approvedBy: NonNullable<FixJob['trigger']['approvedBy']> | null = null,
): FixJob {
  const replyTo =
    trigger.kind === 'review_comment' && trigger.comment !== undefined
      ? {
          kind: 'review_thread' as const,
          commentId: trigger.reviewComment?.inReplyToId ?? trigger.comment.id,
        }
      : target.kind === 'pull'
        ? { kind: 'conversation' as const, commentId: trigger.comment?.id ?? 1 }
        : null;
  const tries = parseTries(instruction);
  return {
    v: 1,
    kind: target.kind === 'pull' ? 'follow-up' : 'fix-issue',
    installationId: trigger.installationId,
    repo: { id: trigger.repo.id, owner: trigger.repo.owner, name: trigger.repo.name },
    issue: {
      number: target.number,
      title: target.number === trigger.issue.number ? trigger.issue.title : `#${target.number}`,
      body: target.kind === 'issue' ? (trigger.issue.body ?? null) : null,
    },
    pull: target.kind === 'pull' ? { number: target.number } : null,
    instructions: tries.instruction === '' ? [] : [tries.instruction],
    reviewComments: [...reviewComments],
    trigger: {
      kind: trigger.kind,
      deliveryId: trigger.deliveryId,
      sender: { login: trigger.sender.login, id: trigger.sender.id },
      commentId: trigger.comment?.id ?? null,
      replyTo,
      ...(approvedBy === null ? {} : { approvedBy: { ...approvedBy } }),
    },
    config: { ...config, ...(tries.attempts === null ? {} : { attempts: tries.attempts }) },
    progressCommentId: null,
    requestedAt: trigger.receivedAt,
  };
}

/**
 * `(try N)` anywhere in a request: N independent attempts for this job instead of the repository's
 * `attempts` (clamped to 1–5, which the progress comment then shows). The marker is taken out of
 * the instruction the model reads.
 */
export function parseTries(instruction: string): {
  readonly instruction: string;
  readonly attempts: number | null;
} {
  const m = /\(\s*try\s+(\d{1,3})\s*\)/i.exec(instruction);
  if (m === null) return { instruction, attempts: null };
  const n = Math.min(MAX_ATTEMPTS, Math.max(1, Number(m[1])));
  const rest = `${instruction.slice(0, m.index)} ${instruction.slice(m.index + m[0].length)}`
    .replace(/\s+/g, ' ')
    .trim();
  return { instruction: rest, attempts: n };
}

/**
 * A review job (`@agent review …`, already allowed): the pull request's tests before and after, a
 * read of the change, one review posted on it; never a push. What follows `review` is a focus.
 */
export function buildReviewJob(trigger: Trigger, config: RepoConfig, instruction: string): FixJob {
  const number = trigger.issue.number;
  return {
    ...buildFixJob(trigger, { kind: 'pull', number }, config, instruction, []),
    kind: 'review',
    issue: { number, title: trigger.issue.title, body: null },
    // One review, whatever `(try N)` or the repository's attempts say.
    config: { ...config, attempts: 1 },
  };
}

/** An evaluate job (`@agent evaluate …`, already allowed): it works in the conversation that asked. */
export function buildEvaluateJob(
  trigger: Trigger,
  config: RepoConfig,
  instruction: string,
  request: EvaluateRequest,
): FixJob {
  return {
    ...buildFixJob(trigger, { kind: 'issue', number: trigger.issue.number }, config, instruction, []),
    kind: 'evaluate',
    issue: { number: trigger.issue.number, title: trigger.issue.title, body: null },
    evaluate: request,
  };
}

/** The issue's text a fix job works from, or why it does not start. */
export type ApprovedText =
  | { readonly ok: true; readonly title: string; readonly body: string; readonly note: string | null }
  | { readonly ok: false; readonly reason: string };

/**
 * The title and body a fix job works from: the ones the job's payload captured when it was asked
 * for, which is what the person who asked saw. The issue as it is now (`current`, read when the job
 * starts) matters only when it differs:
 * - when its author may start jobs here (a role in `allowedPermissions`), the captured text is used
 *   and `note` says so (whoever edited it, the edit was by someone the repository trusts);
 * - otherwise the job does not start: the author may have added instructions after the request.
 * REST does not say who edited a body, so an edit is taken to be the author's: a maintainer who
 * edits an outsider's issue after asking makes the job refuse too, and asking again starts it.
 * A payload without a captured body (queued by an older version, or a manual request) falls back to
 * the current text.
 */
export async function approvedIssueText(
  octokit: RestClient,
  job: FixJob,
  current: {
    readonly title: string;
    readonly body?: string | null | undefined;
    readonly user: { readonly login: string } | null;
  },
): Promise<ApprovedText> {
  const captured = job.issue.body;
  const now = capIssueBody(current.body);
  if (captured === null || captured === undefined) {
    return { ok: true, title: current.title, body: now, note: 'no text was captured with the request' };
  }
  if (current.title === job.issue.title && now === captured) {
    return { ok: true, title: job.issue.title, body: captured, note: null };
  }
  // An approved request: the approver saw the text captured at approval; later edits do not count.
  const approver = job.trigger.approvedBy;
  if (approver !== undefined && approver !== null) {
    return {
      ok: true,
      title: job.issue.title,
      body: captured,
      note: `the issue was edited after ${codeSpan(approver.login)} approved the request; working from its text at the time of the approval`,
    };
  }
  const author = current.user?.login ?? null;
  const trusted = author !== null && (await hasAllowedRole(octokit, job, author));
  if (trusted) {
    return {
      ok: true,
      title: job.issue.title,
      body: captured,
      note: 'the issue was edited after the request; working from its text at the time of the request',
    };
  }
  const asker = job.trigger.sender.login;
  return {
    ok: false,
    reason:
      `the issue's text changed after ${codeSpan(asker)} asked me to work on it, and its author ` +
      `(${author === null ? 'a deleted account' : codeSpan(author)}) cannot start jobs here, so I won't act on ` +
      'text nobody who can approve it has seen. Ask me again to work from the issue as it is now',
  };
}

async function hasAllowedRole(octokit: RestClient, job: FixJob, login: string): Promise<boolean> {
  try {
    const { data } = await octokit.rest.repos.getCollaboratorPermissionLevel({
      owner: job.repo.owner,
      repo: job.repo.name,
      username: login,
    });
    const role = roleOf(data.role_name, data.permission);
    return job.config.allowedPermissions.some((p) => p === role);
  } catch (error) {
    // Not a user GitHub knows (deleted, or a bot it has no collaborator record for): no role.
    if (isNotFound(error)) return false;
    throw error;
  }
}

/** A 404 from Octokit (the thing asked for does not exist, or is not visible to this token). */
export function isNotFound(error: unknown): boolean {
  return typeof error === 'object' && error !== null && 'status' in error && error.status === 404;
}

export interface PullOwnership {
  /** Opened by the App's bot, from a branch of its own (`issue-agent/issue-<n>`) in this repository. */
  readonly ours: boolean;
  readonly fork: boolean;
  readonly headRepo: string | null;
  /** Who opened it (null: a deleted account); absent where only `ours` matters. */
  readonly author?: string | null;
  /** Its head branch (in `headRepo`). */
  readonly headRef?: string;
  /** A fork's author lets maintainers (and so the App) push to its head branch. */
  readonly maintainerCanModify?: boolean;
  /** Where `headRepo` is cloned from (null: a deleted fork); absent where only `ours` matters. */
  readonly headCloneUrl?: string | null;
}

/**
 * Whether a PR is one the App may push to. Follow-ups only ever push to a PR the App's bot opened,
 * from a branch of its own in this repository: a PR from a fork, from any other branch (even `main`
 * into `release`), or opened by a person from a branch they named like ours, is never written to, and
 * a fork's code is never run with this repository's credentials.
 */
export function pullOwnership(
  pr: {
    readonly user: { readonly id: number; readonly login?: string } | null;
    readonly head: {
      readonly ref: string;
      readonly repo: { readonly full_name: string; readonly clone_url?: string } | null;
    };
    readonly base: { readonly repo: { readonly full_name: string } };
    readonly maintainer_can_modify?: boolean | undefined;
  },
  botId: number,
): PullOwnership {
  // Typed as always present by some clients, but null on GitHub when the fork was deleted.
  const headRepo = nullable(pr.head.repo)?.full_name ?? null;
  const fork = headRepo !== pr.base.repo.full_name;
  const byBot = nullable(pr.user)?.id === botId;
  return {
    ours: !fork && byBot && pr.head.ref.startsWith('issue-agent/issue-'),
    fork,
    headRepo,
    author: nullable(pr.user)?.login ?? null,
    headRef: pr.head.ref,
    maintainerCanModify: pr.maintainer_can_modify === true,
    headCloneUrl: nullable(pr.head.repo)?.clone_url ?? null,
  };
}

/**
 * Whether a person may push to this repository (collaborator permission write, maintain or admin):
 * only then are their requests on someone else's pull request carried out as commits on its branch.
 * A bot never may (its requests on a person's pull request are refused).
 */
export async function mayPush(trigger: Trigger, octokit: RestClient): Promise<boolean> {
  const sender = trigger.sender;
  if (sender.type === 'Bot' || sender.login.endsWith('[bot]')) return false;
  const { data } = await octokit.rest.repos.getCollaboratorPermissionLevel({
    owner: trigger.repo.owner,
    repo: trigger.repo.name,
    username: sender.login,
  });
  return (ROLE_RANK[roleOf(data.role_name, data.permission)] ?? 0) >= (ROLE_RANK.write ?? 3);
}

/** Why a request on a person's pull request pushes nothing (see intake-decision.ts). */
export function humanPullReply(
  why: 'fork_locked' | 'no_push' | 'fork_gone',
  o: PullOwnership,
  requester: string,
): string {
  switch (why) {
    case 'fork_locked':
      return (
        `I can't push to this pull request: its branch is in the fork \`${o.headRepo ?? '?'}\`, and its author did not ` +
        'allow edits by maintainers ("Allow edits by maintainers" on the pull request), so GitHub lets nobody but them push there. ' +
        `@${o.author ?? 'the author'} can turn that on and ask me again, or I can review it: \`@agent review\`.`
      );
    case 'no_push':
      return (
        `I only push to someone else's pull request for people who may push to this repository themselves, @${requester}. ` +
        'A maintainer can ask me instead; `@agent review` works for anyone who may start jobs.'
      );
    case 'fork_gone':
      return "I can't push to this pull request: the fork its branch was in is gone.";
  }
}

export function notOursReply(o: PullOwnership): string {
  return o.fork
    ? `I don't work on pull requests from forks (this one's branch is in \`${o.headRepo ?? 'a deleted fork'}\`): ` +
        "I could not push there, and I won't run a fork's code. Ask me on the issue instead and I'll open my own pull request."
    : "I only push to pull requests I opened (branches named `issue-agent/issue-<n>`). Ask me on the issue instead and I'll open my own pull request.";
}

function nullable<T>(value: T): T | null {
  return value;
}

/**
 * Whether a request only repeats what the live job on its issue or PR already does, so that it is a
 * duplicate: a second label, or a bare mention. A request with instructions or review comments, a
 * CI round, or a bare `(try N)` asking for other attempts than both the repository's and the live
 * job's asks for something, and waits for the live job instead.
 */
export function asksNothingNew(
  job: FixJob,
  attempts: { readonly repository: number; readonly live: number },
): boolean {
  return (
    job.instructions.length === 0 &&
    job.reviewComments.length === 0 &&
    (job.ci ?? null) === null &&
    (job.config.attempts === attempts.repository || job.config.attempts === attempts.live)
  );
}
