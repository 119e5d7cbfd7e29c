import type { Redis } from 'ioredis';
import type { RepoConfig } from '../config/repo-config.js';
import { codeSpan, fenced, truncateMiddle } from '../publish/markdown.js';
import { bodyDigest, claimRequest, usedBy, waitingRequests, type WaitingRequest } from './approval.js';
import { claimAnswer, pendingQuestion } from './question.js';
import { extractMention } from './triggers.js';
import { isNotFound, type RestClient } from './trigger-rules.js';
import type { Trigger } from '../queue/trigger.js';

/**
 * What `@agent approve` covers, decided from GitHub's own record of the comments: the newest waiting
 * request posted before the approve comment, with the text it had when the approve comment was
 * created. GitHub keeps no readable history of a comment's text over REST, but it stamps every edit
 * (`updated_at`), so the text now is the text at the approval exactly when the last edit is older than
 * the approve comment. Timestamps are whole seconds: a request posted or edited in the same second as
 * the approval is taken to be after it (nobody reads and approves within a second).
 *
 * The text as delivered (its digest) is a second witness: a body that differs from it without a
 * recorded edit is refused too, whatever the timestamps say. Anything not covered waits for its own
 * approval, and each request is approved once.
 */

/** An approval, as the job's payload and the reply name it. */
export interface Approval {
  readonly by: { readonly login: string; readonly id: number };
  /** The request it covers: the comment's id and bodyDigest of the text approved. */
  readonly covers: { readonly commentId: number; readonly digest: string };
  /** When the approve comment was created (GitHub's clock). */
  readonly at: string;
  /** The job whose question the approved request answers, or null for a request. */
  readonly answers: string | null;
}

export type ApproveOutcome =
  | {
      readonly kind: 'start';
      /** The request with the approved text as its comment's body, delivered as the approval. */
      readonly request: Trigger;
      readonly approval: Approval;
      /** The request was edited after it was posted, before the approval (the approver saw the edit). */
      readonly editedBefore: boolean;
    }
  | { readonly kind: 'refused'; readonly reason: string; readonly reply: string };

/** A request comment as GitHub has it now. */
export interface RequestState {
  readonly body: string;
  readonly createdAt: string;
  /** Null when GitHub keeps no edit time for this kind of text. */
  readonly updatedAt: string | null;
}

export type Coverage =
  | { readonly kind: 'covered'; readonly editedBefore: boolean }
  | { readonly kind: 'posted_after' }
  | { readonly kind: 'edited_after' };

/** Whether an approve comment created at `approvedAt` covers a request as it is now (pure). */
export function coverage(now: RequestState, deliveredDigest: string, approvedAt: string): Coverage {
  const at = seconds(approvedAt);
  if (!(seconds(now.createdAt) < at)) return { kind: 'posted_after' };
  if (now.updatedAt !== null && !(seconds(now.updatedAt) < at)) return { kind: 'edited_after' };
  if (bodyDigest(now.body) === deliveredDigest) return { kind: 'covered', editedBefore: false };
  // Changed since it was delivered: only an edit GitHub dated before the approval is covered.
  return now.updatedAt === null ? { kind: 'edited_after' } : { kind: 'covered', editedBefore: true };
}

/** Whole seconds of a GitHub timestamp; NaN (never earlier than anything) when unreadable. */
function seconds(iso: string): number {
  return Math.floor(Date.parse(iso) / 1000);
}

type Where = { readonly owner: string; readonly repo: string };

/** The request's comment as GitHub has it now, or null when it was deleted. */
export async function requestState(
  octokit: RestClient,
  where: Where,
  request: Trigger,
): Promise<RequestState | null> {
  const id = request.comment?.id;
  if (id === undefined) return null;
  try {
    if (request.kind === 'review_comment') {
      const { data } = await octokit.rest.pulls.getReviewComment({ ...where, comment_id: id });
      return { body: data.body, createdAt: data.created_at, updatedAt: data.updated_at };
    }
    if (request.kind !== 'mention') return null;
    const { data } = await octokit.rest.issues.getComment({ ...where, comment_id: id });
    return { body: data.body ?? '', createdAt: data.created_at, updatedAt: data.updated_at };
  } catch (error) {
    if (isNotFound(error)) return null;
    throw error;
  }
}

/** When the approve comment was created: from the delivery, else asked of GitHub (null: deleted). */
async function approvedAt(octokit: RestClient, where: Where, approve: Trigger): Promise<string | null> {
  if (approve.comment?.createdAt !== undefined) return approve.comment.createdAt;
  return (await requestState(octokit, where, approve))?.createdAt ?? null;
}

/**
 * Takes the request an approval (`approve`, already allowed to approve) covers in `conversation`, or
 * says why nothing starts. Marks it used only when it starts.
 */
export async function takeApproval(
  approve: Trigger,
  config: RepoConfig,
  octokit: RestClient,
  deps: { readonly redis: Redis; readonly prefix: string },
  conversation: string,
): Promise<ApproveOutcome> {
  const where: Where = { owner: approve.repo.owner, repo: approve.repo.name };
  const { redis, prefix } = deps;
  const again = `${config.handle} approve`;
  const at = await approvedAt(octokit, where, approve);
  if (at === null)
    return refused('approve: the approval was deleted', 'The approval was deleted, so I start nothing.');

  const states = new Map<number, RequestState | null>();
  const stateOf = async (w: WaitingRequest): Promise<RequestState | null> => {
    const id = idOf(w);
    if (!states.has(id)) states.set(id, await requestState(octokit, where, w.trigger));
    return states.get(id) ?? null;
  };
  const all = await waitingRequests(redis, prefix, conversation);
  const { before, waiting } = await postedBefore(all, at, stateOf);
  const question = await pendingQuestion(redis, prefix, conversation);
  const picked = await pickRequest(approve, config.handle, before, async (w) =>
    // An answer to a question that no longer waits cannot start anything: not one to choose among.
    w.answers !== null && question?.jobId !== w.answers
      ? { deliveryId: '' }
      : usedBy(redis, prefix, conversation, idOf(w)),
  );
  if (picked.kind === 'refused') return refused(picked.reason, picked.reply(again));
  const candidate = picked.request;
  if (candidate === undefined) {
    const wait = config.approvalDays === 1 ? 'a day' : `${config.approvalDays} days`;
    return waiting > 0
      ? refused(
          'approve: the request was posted after the approval',
          `The request waiting here was posted after this approval, so the approval does not cover it: it needs its own. A maintainer who has read it can approve it with \`${again}\`.`,
        )
      : refused(
          'approve: no request',
          `Nothing here waits for approval (a request by someone who cannot start jobs waits ${wait}; if there was one, it has expired).`,
        );
  }
  const commentId = idOf(candidate);
  const what = candidate.answers === null ? 'request' : 'answer';
  const used = await usedBy(redis, prefix, conversation, commentId);
  if (used !== null && used.deliveryId !== approve.deliveryId) {
    return refused(
      'approve: already approved',
      `That ${what} was approved already: each request is approved once.`,
    );
  }

  let approved: { readonly body: string; readonly digest: string; readonly editedBefore: boolean };
  if (used !== null) {
    // An intake retry of this approval: the text it took the first time.
    approved = { body: used.body, digest: used.digest, editedBefore: used.digest !== candidate.digest };
  } else {
    const now = await stateOf(candidate);
    if (now === null) {
      return refused(
        'approve: the request was deleted',
        `The ${what} to approve was deleted, so there is nothing to start.`,
      );
    }
    const covered = coverage(now, candidate.digest, at);
    if (covered.kind === 'posted_after') {
      return refused(
        'approve: the request was posted after the approval',
        `The ${what} was posted after this approval, so the approval does not cover it. A maintainer who has read it can approve it with \`${again}\`.`,
      );
    }
    if (covered.kind !== 'covered') {
      return refused(
        'approve: the request was edited after the approval',
        `The ${what} was edited after this approval (GitHub dates its last edit ${codeSpan(now.updatedAt ?? 'unknown')}, the approval ${codeSpan(at)}), so the approval does not cover it and I start nothing: I only run text the approver could have read. A maintainer who has read it as it reads now can approve it with \`${again}\`.`,
      );
    }
    approved = { body: now.body, digest: bodyDigest(now.body), editedBefore: covered.editedBefore };
    if (
      candidate.answers !== null &&
      (await pendingQuestion(redis, prefix, conversation))?.jobId !== candidate.answers
    ) {
      return refused(
        'approve: the question no longer waits',
        'That answer was for a question that no longer waits (it was answered, or a new request came since), so there is nothing to continue.',
      );
    }
    const claimed = await claimRequest(redis, prefix, conversation, commentId, {
      deliveryId: approve.deliveryId,
      body: approved.body,
      digest: approved.digest,
    });
    if (!claimed) {
      return refused(
        'approve: already approved',
        `That ${what} was approved already: each request is approved once.`,
      );
    }
  }
  if (
    candidate.answers !== null &&
    !(await claimAnswer(redis, prefix, conversation, candidate.answers, approve.deliveryId))
  ) {
    return refused(
      'approve: the question was answered',
      'That question was answered already, so there is nothing to continue.',
    );
  }
  const comment = candidate.trigger.comment;
  return {
    kind: 'start',
    request: {
      ...candidate.trigger,
      deliveryId: approve.deliveryId,
      receivedAt: approve.receivedAt,
      issue: approve.issue,
      comment: { ...(comment ?? { id: commentId }), body: approved.body },
    },
    approval: {
      by: { login: approve.sender.login, id: approve.sender.id },
      covers: { commentId, digest: approved.digest },
      at,
      answers: candidate.answers,
    },
    editedBefore: approved.editedBefore,
  };
}

/**
 * The waiting requests posted before `at` (GitHub's creation time, from the delivery or asked;
 * deliveries may arrive in any order), newest first, and how many wait in all.
 */
async function postedBefore(
  all: readonly WaitingRequest[],
  at: string,
  stateOf: (w: WaitingRequest) => Promise<RequestState | null>,
): Promise<{ readonly before: readonly WaitingRequest[]; readonly waiting: number }> {
  const dated: { readonly w: WaitingRequest; readonly created: number }[] = [];
  for (const w of all) {
    const created = w.trigger.comment?.createdAt ?? (await stateOf(w))?.createdAt;
    if (created !== undefined && seconds(created) < seconds(at)) dated.push({ w, created: seconds(created) });
  }
  dated.sort((a, b) => b.created - a.created || idOf(b.w) - idOf(a.w));
  return { before: dated.map((d) => d.w), waiting: all.length };
}

/**
 * The comment an approve comment names, if it names one, read from its instruction as the intake
 * reads it (no quoted line, code or hidden text), on the line of `approve` only: a link to the
 * comment (`…#issuecomment-<id>`, `…#discussion_r<id>`) as the first word after `approve`, or the
 * comment's number as the only one. Anything else after `approve` is for people.
 */
export function namedComment(body: string, handle: string): number | null {
  const instruction = extractMention(body, handle)?.instruction ?? '';
  const rest = /^approve\b(.*)$/im.exec(instruction.split('\n')[0] ?? '')?.[1]?.trim() ?? '';
  const link = /^\S*#(?:issuecomment-|discussion_r)(\d{1,15})(?:\s|$)/.exec(rest)?.[1];
  const id = link ?? /^(\d{1,15})$/.exec(rest)?.[1];
  return id === undefined ? null : Number(id);
}

type Picked =
  | { readonly kind: 'request'; readonly request: WaitingRequest | undefined }
  | { readonly kind: 'refused'; readonly reason: string; readonly reply: (again: string) => string };

/**
 * Which waiting request an approval is for. One it names (see namedComment), among those posted
 * before it; or, naming none, the newest posted before it (or the one this very approval took on an
 * earlier try). When several wait unapproved, an approval that names none is refused:
 * the maintainer read one of them, and another posted meanwhile (by anyone who may comment) must
 * not be the one that runs. Undefined: none was posted before the approval.
 */
async function pickRequest(
  approve: Trigger,
  handle: string,
  before: readonly WaitingRequest[],
  usedOf: (w: WaitingRequest) => Promise<{ readonly deliveryId: string } | null>,
): Promise<Picked> {
  const named = namedComment(approve.comment?.body ?? '', handle);
  if (named !== null) {
    const request = before.find((w) => idOf(w) === named);
    if (request !== undefined) return { kind: 'request', request };
    return {
      kind: 'refused',
      reason: 'approve: the named comment is no request waiting here',
      reply: (again) =>
        `This approval names comment ${named}, which is not a request waiting here that was posted before it, so I start nothing. Approve a waiting request with \`${again}\` followed by a link to it.`,
    };
  }
  const open: WaitingRequest[] = [];
  for (const w of before) {
    const used = await usedOf(w);
    if (used?.deliveryId === approve.deliveryId) return { kind: 'request', request: w };
    if (used === null) open.push(w);
  }
  // Naming none, the approval covers the newest request before it, as it always has: an older one
  // still waiting is taken only when named (the newest may have been approved already: then it
  // says so, and starts nothing).
  if (open.length <= 1) return { kind: 'request', request: before[0] };
  const listed = open
    .slice(0, 5)
    .map((w) => `comment ${idOf(w)} by ${codeSpan(w.trigger.sender.login)}`)
    .join(', ');
  return {
    kind: 'refused',
    reason: 'approve: several requests wait',
    reply: (again) =>
      `${open.length} requests wait here for approval (${listed}${open.length > 5 ? ', …' : ''}), so this approval does not say which one was read, and I start nothing. Approve one by naming it: \`${again}\` followed by a link to that comment (or its number).`,
  };
}

function idOf(w: WaitingRequest): number {
  return w.trigger.comment?.id ?? 0;
}

function refused(reason: string, reply: string): ApproveOutcome {
  return { kind: 'refused', reason, reply };
}

/** The reply that tells an outsider their request (or answer) waits, and how it is approved. */
export function waitingReply(config: RepoConfig, kind: 'request' | 'answer' | 'review_comment'): string {
  const wait = config.approvalDays === 1 ? 'a day' : `${config.approvalDays} days`;
  const where = kind === 'review_comment' ? "in this pull request's conversation" : 'here';
  const rule =
    'as it reads when they approve it (an edit after the approval is not covered, and needs an approval of its own)';
  return kind === 'answer'
    ? `A maintainer can approve this answer by commenting \`${config.handle} approve\` ${where} within ${wait}; I will then continue from it ${rule}.`
    : `A maintainer can approve this request by commenting \`${config.handle} approve\` ${where} within ${wait}; I will then work from it ${rule}.`;
}

/** The comment that shows what an approval started: the approved text, quoted literally. */
export function approvedQuote(request: Trigger, approval: Approval, editedBefore: boolean): string {
  const text = request.comment?.body ?? '';
  const what = approval.answers === null ? 'request' : 'answer to my question';
  return [
    `Approved by ${codeSpan(approval.by.login)}: I am working from ${codeSpan(request.sender.login)}'s ${what} exactly as it read when the approval was posted${editedBefore ? ' (it had been edited before that)' : ''}:`,
    '',
    fenced(truncateMiddle(text, 6000)),
    '',
    `<sub>comment ${approval.covers.commentId} · sha256 ${codeSpan(approval.covers.digest.slice(0, 16))} · approved ${codeSpan(approval.at)}. Later edits, and later requests or answers by someone who cannot start jobs here, each need their own approval.</sub>`,
  ].join('\n');
}
