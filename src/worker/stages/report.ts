import { EnvironmentSetupError } from '../../environment/errors.js';
import { describeEnvironment, failedSetupOutput } from '../../publish/environment.js';
import type { Outcome } from '../../agent/run-agent.js';
import { HostGitError } from '../../github/host-git.js';
import { neutralizeInline, neutralizeProse, truncateEnd } from '../../publish/markdown.js';
import type { Clarification } from '../../events/schema.js';
import type { PolicyViolation } from '../../publish/policy.js';
import { githubHosts, hostsIn, publishable, type Audience } from '../../publish/publishable.js';
import { REFUSED } from '../../publish/outcome-words.js';
import { PermanentJobError } from '../permanent-job-error.js';
import type { JobContext, PullInfo } from './types.js';

/**
 * Every way a job ends without a failure, with what it needs to say so. `reportEnd` turns each into
 * the progress comment's final state and, where there is one, the reply in the thread that asked.
 */
export type JobEnd =
  /** A stop request won (before the start, after the run, or before the push). */
  | { readonly kind: 'cancelled'; readonly by: string | null }
  | { readonly kind: 'pull_closed'; readonly number: number; readonly merged: boolean }
  | { readonly kind: 'issue_closed' }
  /** A CI round whose PR got a new head before it started: the failures it was for may be gone. */
  | { readonly kind: 'ci_head_moved'; readonly headSha: string }
  /** The issue's text changed since the request (see approvedIssueText). */
  | { readonly kind: 'issue_changed'; readonly reason: string }
  /** The month's spending limit leaves no room for a model call: the job did not start. */
  | { readonly kind: 'budget_exhausted'; readonly reason: string }
  /** The run ended with nothing to publish: not resolved/unverified, or no change to the base. */
  | { readonly kind: 'nothing_to_publish'; readonly outcome: Outcome }
  | { readonly kind: 'change_too_large'; readonly outcome: Outcome }
  | { readonly kind: 'change_has_secret'; readonly outcome: Outcome }
  | { readonly kind: 'refused_by_policy'; readonly violations: readonly PolicyViolation[] }
  /** Pre-flight triage: the agent asked before changing anything; the job waits for an answer. */
  | {
      readonly kind: 'needs_info';
      readonly outcome: Outcome;
      readonly question: Clarification;
      /** Rounds before this one (answers so far): the question's marker names its round. */
      readonly round: number;
    }
  /** A follow-up's branch was moved or deleted by someone else while the job ran. */
  | {
      readonly kind: 'branch_moved';
      readonly outcome: Outcome;
      readonly branch: string;
      readonly remoteTip: string | null;
      readonly baseCommit: string;
    }
  /** A fork's branch refused the push (edits by maintainers turned off, or the PR closed meanwhile). */
  | {
      readonly kind: 'fork_push_refused';
      readonly outcome: Outcome;
      readonly branch: string;
      readonly fork: string;
      readonly reason: string;
    }
  | {
      readonly kind: 'pr_ready';
      readonly outcome: Outcome;
      readonly pr: { readonly number: number; readonly html_url: string };
      readonly draft: boolean;
      /** A follow-up updated its PR rather than opening one. */
      readonly updated: boolean;
      readonly head: string;
      readonly branch: string;
    };

/** The progress comment's final state for `end`, then the reply in the thread (`pull`: the job's PR). */
export async function reportEnd(ctx: JobContext, end: JobEnd, pull: PullInfo | null): Promise<void> {
  const { progress } = ctx;
  switch (end.kind) {
    case 'cancelled':
      await progress.update({ kind: 'cancelled', by: end.by });
      return;
    case 'pull_closed':
      await progress.update({
        kind: 'ended',
        outcome: 'cancelled',
        reason: `pull request #${end.number} was ${end.merged ? 'merged' : 'closed'} before the job started, so the request was dropped`,
        summary: '',
      });
      return;
    case 'issue_closed':
      await progress.update({
        kind: 'ended',
        outcome: 'cancelled',
        reason: 'the issue was closed before the job started, so the request was dropped',
        summary: '',
      });
      return;
    case 'ci_head_moved':
      await progress.update({
        kind: 'ended',
        outcome: 'cancelled',
        reason: `the pull request moved past ${end.headSha.slice(0, 12)}, the commit whose checks failed, before this round started; its checks run again on the new head`,
        summary: '',
      });
      return;
    case 'issue_changed':
      await progress.update({ kind: 'ended', outcome: 'cancelled', reason: end.reason, summary: '' });
      return;
    case 'budget_exhausted':
      await progress.update({
        kind: 'ended',
        outcome: 'budget_exhausted',
        limit: 'monthly_usd',
        reason: `the job did not start: ${end.reason}`,
        summary: '',
      });
      await replyInThread(ctx, pull, `I did not start: ${end.reason}.`);
      return;
    case 'nothing_to_publish': {
      const { outcome } = end;
      await progress.update({
        kind: 'ended',
        outcome: outcome.outcome,
        reason: outcome.reason,
        summary: outcome.summary ?? '',
        ...(outcome.limit === undefined ? {} : { limit: outcome.limit }),
        ...(outcome.cause === undefined ? {} : { cause: outcome.cause }),
      });
      await replyInThread(
        ctx,
        pull,
        `I made no change this time: ${neutralizeInline(ctx.redactor().redact(outcome.reason))}`,
      );
      return;
    }
    case 'needs_info':
      await postQuestion(ctx, end.question, end.round);
      await progress.update({
        kind: 'ended',
        outcome: 'needs_info',
        reason: end.question.missing,
        summary: end.question.questions.map((q, i) => `${i + 1}. ${q}`).join('\n'),
      });
      return;
    case 'change_too_large':
      await progress.update({
        kind: 'ended',
        outcome: 'failed',
        reason: 'the change was too large to record in the trajectory, so it cannot be published',
        summary: end.outcome.summary,
      });
      return;
    case 'change_has_secret':
      await progress.update({
        kind: 'ended',
        outcome: 'failed',
        reason: 'the change contains a secret this job holds (a token or key), so nothing was pushed',
        summary: end.outcome.summary ?? '',
      });
      await replyInThread(ctx, pull, 'I did not push: the change contained a secret of this job.');
      return;
    case 'refused_by_policy':
      await progress.update({
        kind: 'refused',
        reason: "the change breaks this repository's push policy, so nothing was pushed",
        violations: end.violations,
      });
      await replyInThread(
        ctx,
        pull,
        "I did not push: the change breaks this repository's push policy (see the progress comment).",
      );
      return;
    case 'branch_moved': {
      const { branch, remoteTip, baseCommit, outcome } = end;
      const reason =
        remoteTip === null
          ? `the branch \`${branch}\` was deleted while I worked, so I did not push`
          : `someone pushed to \`${branch}\` while I worked (it is now at ${remoteTip.slice(0, 12)}, I started from ${baseCommit.slice(0, 12)}); I did not push, so nothing of theirs is lost. Ask again to build on top of their commits`;
      await progress.update({ kind: 'ended', outcome: outcome.outcome, reason, summary: outcome.summary });
      await replyInThread(ctx, pull, `I did not push: ${reason}.`);
      return;
    }
    case 'fork_push_refused': {
      const reason = `I could not push to \`${end.branch}\` in the fork \`${end.fork}\`: ${end.reason}. Nothing was changed there; the change is in the trajectory, and asking again once edits by maintainers are allowed redoes it`;
      await progress.update({
        kind: 'ended',
        outcome: end.outcome.outcome,
        reason,
        summary: end.outcome.summary,
      });
      await replyInThread(ctx, pull, `I did not push: ${reason}.`);
      return;
    }
    case 'pr_ready': {
      const { outcome, pr } = end;
      await progress.update({
        kind: 'pr_opened',
        url: pr.html_url,
        number: pr.number,
        outcome: outcome.outcome,
        ...(outcome.cause === undefined ? {} : { cause: outcome.cause }),
        draft: end.draft,
        ...(end.updated ? { updated: true } : {}),
      });
      await replyInThread(
        ctx,
        pull,
        `Pushed ${end.head.slice(0, 12)} to \`${end.branch}\` (${outcome.outcome}). ${neutralizeInline(truncateEnd(ctx.redactor().redact(oneParagraph(outcome.summary ?? '')), 500))}`,
      );
      ctx.log.info({ pr: pr.number }, 'pull request ready');
      return;
    }
  }
}

/** The hidden first line of the agent's question, found again by a retry so it is posted once. */
export function questionMarker(jobId: string, round: number): string {
  return `<!-- issue-agent:question job=${encodeURIComponent(jobId)} round=${round} -->`;
}

/**
 * The one clarifying comment of a round: what is missing and the questions, in the agent's words
 * (untrusted: neutralized, redacted), and how to answer. Posted once per job and round (a retry
 * finds its marker among the App's comments).
 */
async function postQuestion(ctx: JobContext, question: Clarification, round: number): Promise<void> {
  const where = { owner: ctx.p.repo.owner, repo: ctx.p.repo.name };
  const marker = questionMarker(ctx.jobId, round);
  for await (const page of ctx.gh.paginate.iterator(ctx.gh.rest.issues.listComments, {
    ...where,
    issue_number: ctx.p.issue.number,
    per_page: 100,
  })) {
    if (page.data.some((c) => c.user?.login === ctx.bot.login && (c.body ?? '').startsWith(marker))) return;
  }
  const prose = (text: string, max: number): string =>
    neutralizeProse(truncateEnd(ctx.redactor().redact(text.replace(/\s+/g, ' ').trim()), max));
  const body = [
    marker,
    `❓ **Before I change anything, I need to know more.** ${prose(question.missing, 1500)}`,
    '',
    ...question.questions.map((q, i) => `${i + 1}. ${prose(q, 800)}`),
    '',
    'Reply in this issue: an answer from its author or from someone allowed to start me continues the same conversation (no need to mention me).',
  ].join('\n');
  await ctx.gh.rest.issues.createComment({
    ...where,
    issue_number: ctx.p.issue.number,
    body: publishable(body, audienceOf(ctx)),
  });
}

/**
 * A failed job on the progress comment: ended when `permanent` or on the last attempt, else
 * retrying. Returns the redacted reason and whether retrying can help.
 */
export async function reportFailure(
  ctx: JobContext,
  error: unknown,
  attempt: { readonly number: number; readonly final: boolean },
): Promise<{ reason: string; permanent: boolean }> {
  const permanent = isPermanent(error);
  const reason = ctx.redactor().redact(error instanceof Error ? error.message : String(error));
  ctx.log.error({ err: error, attempt: attempt.number }, 'fix job failed');
  if (error instanceof EnvironmentSetupError) {
    ctx.progress.setEnvironment(describeEnvironment(error.record, (t) => ctx.redactor().redact(t)));
  }
  if (permanent || attempt.final) {
    await ctx.progress.update({
      kind: 'ended',
      outcome: 'failed',
      reason,
      summary: '',
      ...(error instanceof EnvironmentSetupError
        ? { cause: SETUP_FAILED, details: ctx.redactor().redact(failedSetupOutput(error.record)) }
        : error instanceof PermanentJobError
          ? { cause: REFUSED }
          : {}),
    });
  } else {
    await ctx.progress.update({ kind: 'retrying', attempt: attempt.number, reason });
  }
  return { reason, permanent };
}

/** The cause of a job whose setup failed. */
export const SETUP_FAILED = 'setup_failed';

/**
 * Failures a retry cannot fix: a refused request (4xx other than timeouts, conflicts and rate limits,
 * which the client has already waited out), a git error that is not about the network, anything
 * marked unrecoverable. Everything else (5xx after the client's own retries, connection errors) is
 * retried by BullMQ with backoff.
 */
function isPermanent(error: unknown): boolean {
  if (error instanceof PermanentJobError) return true;
  if (error instanceof EnvironmentSetupError) return !error.transient;
  if (error instanceof HostGitError) return !error.transient;
  const status = typeof error === 'object' && error !== null && 'status' in error ? error.status : undefined;
  return typeof status === 'number' && status >= 400 && status < 500 && ![408, 409, 429].includes(status);
}

/**
 * The answer in the thread that asked: a reply in the review thread for a review comment. For a PR
 * conversation request the progress comment is that reply (it is edited to the result).
 */
async function replyInThread(ctx: JobContext, pull: PullInfo | null, text: string): Promise<void> {
  const to = ctx.p.trigger.replyTo;
  if (to?.kind !== 'review_thread' || pull === null) return;
  try {
    await ctx.gh.rest.pulls.createReplyForReviewComment({
      owner: ctx.p.repo.owner,
      repo: ctx.p.repo.name,
      pull_number: pull.number,
      comment_id: to.commentId,
      body: publishable(text, audienceOf(ctx)),
    });
  } catch (error) {
    ctx.log.warn({ err: error }, 'could not reply in the review thread');
  }
}

/** Who a posted text is for: the job's secrets are redacted, links may lead to GitHub and the run view. */
export function audienceOf(ctx: JobContext): Audience {
  return {
    redactor: ctx.redactor(),
    trustedHosts: [
      ...githubHosts(ctx.gh.request.endpoint.DEFAULTS.baseUrl),
      ...hostsIn(ctx.trajectoryLink(ctx.storage.locationOf(ctx.jobId), ctx.jobId)),
    ],
  };
}

/** The summary as one paragraph of bounded length (commit messages, replies). */
export function oneParagraph(text: string): string {
  return text.trim().slice(0, 2000);
}
