import { stripHiddenText } from '../agent/untrusted-text.js';
import { REPO_CONFIG_PATH, type RepoConfig } from '../config/repo-config.js';
import type { EvaluateRequest, FixJob, ReviewContext } from '../queue/payloads.js';
import { evaluateKey, fixJobId, issueKey, reviewKey, verifyKey } from '../queue/ids.js';
import { capIssueBody, type Trigger } from '../queue/trigger.js';
import { APPROVE } from './approval.js';
import { approvedQuote, waitingReply, type Approval, type ApproveOutcome } from './approve-request.js';
import type { CiDecision } from './ci-round.js';
import { EVALUATE, EVALUATE_USAGE, parseEvaluate, type EvaluatePermission } from './evaluate-request.js';
import {
  asksNothingNew,
  buildEvaluateJob,
  buildFixJob,
  buildReviewJob,
  humanPullReply,
  matches,
  notOursReply,
  STOP,
  type Permission,
  type PullOwnership,
  type Target,
} from './trigger-rules.js';
import { buildVerifyJob, VERIFY, VERIFY_NO_PULL } from './verify-request.js';

/**
 * What one trigger means, decided without I/O: from the trigger, the repository's settings and the
 * facts read about it (who the sender is, which question waits, which pull request an issue has…),
 * the plan of what to say, store and queue. The decision asks for each fact it needs, one at a time
 * (`need`), in the order the reads cost least: a refused trigger reads no pull request, an ignored
 * one no permission. intake.ts gathers what is asked and carries out the plan.
 *
 * Some facts are claims, not plain reads: an answer to the agent's question and a waiting request an
 * approval covers are single-use, and which delivery takes them is settled by an atomic mark in Redis
 * when the fact is read (so a retry of the same delivery finds its own claim again). The decision
 * only asks for a claim once everything before it allows the trigger to take it.
 *
 * `@agent approve` is a case of the decision: once the approval's facts say which request it covers,
 * the decision goes on as that request (its text as approved) would, with facts of its own
 * (`Facts.approved`), and the plan says so.
 */

const DAY_SECONDS = 24 * 3600;

/** `@agent review`: a review of the pull request, posted as one GitHub review. */
export const REVIEW = /^review\b/i;

type CiRound = NonNullable<FixJob['ci']>;

/** The repository's settings, or why `.github/issue-agent.yml` is not valid (with the defaults). */
export type IntakeConfig =
  | { readonly kind: 'valid'; readonly config: RepoConfig }
  | {
      readonly kind: 'invalid';
      readonly problems: readonly string[];
      readonly defaults: { readonly label: string; readonly handle: string };
    };

/** What was read about one trigger (as delivered, or as the approved request). */
export interface RunFacts {
  /** The job whose question the issue waits on (question.ts), or null. */
  readonly question?: { readonly jobId: string } | null;
  /** Whether the sender may start jobs (trigger-rules.ts' mayTrigger). */
  readonly permission?: Permission;
  /** Whether the waiting question was answered already (by another comment or an approval). */
  readonly answered?: boolean;
  /** Whether this delivery holds the waiting question's single answer (claimAnswer). */
  readonly answerClaim?: boolean;
  /** Whether the sender may ask for an evaluation (an admin). */
  readonly evaluator?: EvaluatePermission;
  /** Where a request goes: the issue, its PR's conversation, or the App's open PR for the issue. */
  readonly target?: Target;
  /** The target pull request: closed, or open and whose it is. */
  readonly pull?:
    { readonly state: 'closed' } | { readonly state: 'open'; readonly ownership: PullOwnership };
  /** The review comments the request is about. */
  readonly reviewComments?: readonly ReviewContext[];
  /** Whether the sender may push to this repository (write, maintain or admin): see mayPush. */
  readonly pushAccess?: boolean;
}

export interface Facts extends RunFacts {
  /** For a failed check: the CI round it starts, or why none. */
  readonly ci?: CiDecision;
  /** For `@agent approve` by someone who may: the request it covers (claimed), or why none. */
  readonly approval?: ApproveOutcome;
  /** Facts about the approved request, read once the approval covers one. */
  readonly approved?: RunFacts;
}

/** A fact the decision needs next, about `about` (the trigger as delivered, or the approved request). */
export type Need = {
  readonly kind: 'need';
  readonly about: Trigger;
  /** Which bag the fact goes in: the delivered trigger's, or the approved request's. */
  readonly phase: 'delivered' | 'approved';
} & (
  | {
      readonly fact: 'ci' | 'question' | 'permission' | 'approval' | 'evaluator' | 'target' | 'pushAccess';
    }
  | { readonly fact: 'answered' | 'answerClaim'; readonly jobId: string }
  | { readonly fact: 'pull' | 'reviewComments'; readonly pull: number }
);

/** Something said in the trigger's conversation; `once` keeps it to one per key for `ttlSeconds`. */
export interface Say {
  readonly body: string;
  readonly once: { readonly key: string; readonly ttlSeconds: number } | null;
}

/** Why nothing happens (for the log and the result; nothing here is said unless `say` is set). */
export type IgnoreReason =
  | { readonly code: 'not_ours' }
  | { readonly code: 'closed' }
  | { readonly code: 'self' }
  | { readonly code: 'pull_closed' }
  | { readonly code: 'no_ci_round'; readonly detail: string }
  | { readonly code: 'approval_refused'; readonly detail: string };

/** Why a request is turned down. */
export type Refusal =
  | { readonly code: 'sender_not_allowed'; readonly detail: string }
  | { readonly code: 'evaluate_not_admin'; readonly detail: string }
  | { readonly code: 'evaluate_bad_request'; readonly problem: string }
  | { readonly code: 'answer_waits'; readonly by: string }
  | { readonly code: 'pull_from_fork' }
  | { readonly code: 'pull_not_ours' }
  /** `@agent review` where there is no pull request to review. */
  | { readonly code: 'review_not_pull' }
  /** A person's pull request from a fork whose author did not allow edits by maintainers. */
  | { readonly code: 'pull_fork_locked' }
  /** A person's pull request, asked for by someone who may not push to this repository. */
  | { readonly code: 'pull_push_denied' }
  | { readonly code: 'verify_no_pull' };

/** A request (or an answer) kept waiting for `@agent approve` (approval.ts). */
export interface StoreRequest {
  readonly trigger: Trigger;
  readonly answers: string | null;
  readonly ttlSeconds: number;
}

/** A job to queue: where, what, and how it is announced. */
export interface Enqueue {
  readonly target: Target;
  /** The queue target (the issue or PR's key, or the evaluation's). */
  readonly targetKey: string;
  readonly jobId: string;
  /** Without its progress comment and trace, which are added when it is queued. */
  readonly job: FixJob;
  /** What the progress comment shows besides the job's place. */
  readonly shown: {
    readonly approval?: { readonly requestedBy: string; readonly approvedBy: string };
    readonly ciRound?: { readonly round: number; readonly of: number };
    /** Commits go on a person's pull request: its author is told in the progress comment. */
    readonly pushTo?: {
      readonly author: string | null;
      readonly branch: string;
      readonly requester: string;
      /** The fork the branch is in (`owner/name`); absent: a branch of this repository. */
      readonly fork?: string;
    };
  };
  /**
   * May replace a running job (`onBusy: replace`): only a request by someone who may start jobs, not
   * an answer (its author may be an outsider), not an automatic CI round.
   */
  readonly mayReplace: boolean;
  readonly onBusy: RepoConfig['onBusy'];
  /** The repository's attempts (a live job asking the same is not asked again). */
  readonly repositoryAttempts: number;
}

export type Plan =
  | { readonly kind: 'config_error'; readonly problems: readonly string[]; readonly say: Say | null }
  | {
      readonly kind: 'ignore';
      readonly reason: IgnoreReason;
      readonly say: Say | null;
      /** The trigger that gets the `eyes` reaction, or null for none. */
      readonly react: Trigger | null;
    }
  | {
      readonly kind: 'refuse';
      readonly reason: Refusal;
      /** Kept before anything is said. */
      readonly store: StoreRequest | null;
      readonly say: Say | null;
      readonly react: Trigger | null;
    }
  | {
      readonly kind: 'cancel';
      /** The issue whose wait for an answer ends first (issue key), or null. */
      readonly clearQuestion: string | null;
      /** The queue targets whose jobs stop, in order. */
      readonly targets: readonly string[];
      readonly by: string;
      /** Said when nothing was queued or running. */
      readonly sayIfNone: Say | null;
      readonly react: Trigger;
    }
  | {
      readonly kind: 'enqueue';
      readonly clearQuestion: string | null;
      readonly enqueue: Enqueue;
      readonly react: Trigger;
      /** The approval that started it: who and what (for the log), and the quote said once it starts. */
      readonly approved: {
        readonly approval: Approval;
        readonly requester: string;
        readonly quote: Say;
      } | null;
      /** An answer to the agent's question it carries (for the log), or null. */
      readonly answers: string | null;
    };

export type Decision = Plan | Need;

/** The text of a reason, as the log and IntakeResult have always said it. */
export function reasonText(reason: IgnoreReason | Refusal): string {
  switch (reason.code) {
    case 'not_ours':
      return 'not our label or handle';
    case 'closed':
      return 'the issue or PR is closed';
    case 'self':
      return 'the App itself';
    case 'pull_closed':
      return 'the pull request is closed';
    case 'no_ci_round':
    case 'approval_refused':
    case 'sender_not_allowed':
    case 'evaluate_not_admin':
      return reason.detail;
    case 'evaluate_bad_request':
      return `bad evaluate request: ${reason.problem}`;
    case 'answer_waits':
      return `an answer by ${reason.by} waits for approval`;
    case 'pull_from_fork':
      return 'pull request from a fork';
    case 'pull_not_ours':
      return 'not one of the App pull requests';
    case 'review_not_pull':
      return 'a review asked for where there is no pull request';
    case 'pull_fork_locked':
      return 'pull request from a fork without edits by maintainers';
    case 'pull_push_denied':
      return "the sender may not push to this repository, so not to a person's pull request";
    case 'verify_no_pull':
      return 'verify asked where no pull request is open';
  }
}

/** The plan for `trigger`, or the next fact it needs. */
export function decide(trigger: Trigger, config: IntakeConfig, facts: Facts): Decision {
  if (config.kind === 'invalid') {
    const problems = config.problems;
    const conversation = issueKey(trigger.repo.id, trigger.issue.number);
    return {
      kind: 'config_error',
      problems,
      say:
        matches(trigger, config.defaults) === null
          ? null
          : {
              body: [
                `I can't start: \`${REPO_CONFIG_PATH}\` is invalid.`,
                '',
                ...problems.map((p) => `- ${p}`),
                '',
                'Fix the file on the default branch and ask again.',
              ].join('\n'),
              once: { key: `config-error:${conversation}:${hash(problems.join())}`, ttlSeconds: DAY_SECONDS },
            },
    };
  }
  // A check failed on a pull request: a round on the App's own PR, or nothing (see ci-round.ts).
  let ci: CiRound | null = null;
  if (trigger.kind === 'ci_failure') {
    if (facts.ci === undefined) return need(trigger, 'delivered', { fact: 'ci' });
    if (facts.ci.kind === 'none') {
      const comment = facts.ci.comment;
      return {
        kind: 'ignore',
        reason: { code: 'no_ci_round', detail: facts.ci.reason },
        say: comment === null ? null : { body: comment, once: null },
        react: null,
      };
    }
    ci = facts.ci.ci;
  }
  return decideRun(trigger, config.config, facts, { phase: 'delivered', approval: null, ci });
}

interface RunContext {
  readonly phase: 'delivered' | 'approved';
  /** The approval this run carries out (phase `approved`), or null. */
  readonly approval: Approval | null;
  readonly ci: CiRound | null;
}

/** An answer to the agent's question this trigger gives (its text as a job carries it). */
type Answer = { readonly jobId: string; readonly text: string };

/** The rest of the decision, for the trigger as delivered or for the request an approval covers. */
function decideRun(trigger: Trigger, config: RepoConfig, facts: Facts | RunFacts, run: RunContext): Decision {
  const mentioned = trigger.kind === 'ci_failure' ? { instruction: '' } : matches(trigger, config);
  // An answer to the agent's question (question.ts); the issue author's, when they may not start
  // jobs, is new instructions nobody who can has read: it waits for an approval like a request.
  const answered = answerFor(trigger, config, mentioned, facts, run);
  if (answered.kind === 'decided') return answered.decision;
  const answer = answered.answer;
  if (mentioned === null && answer === null) return ignore({ code: 'not_ours' });
  const ours = mentioned ?? { instruction: '' };
  const cancel = trigger.kind === 'unlabel' || (trigger.kind !== 'manual' && STOP.test(ours.instruction));
  if (trigger.issue.state !== 'open' && !cancel) return ignore({ code: 'closed' });

  if (run.approval === null && answer === null && run.ci === null) {
    if (facts.permission === undefined) return need(trigger, run.phase, { fact: 'permission' });
    const who = facts.permission;
    if (who.allowed === 'self') return ignore({ code: 'self' });
    if (!who.allowed) return refuseSender(trigger, config, ours.instruction, cancel, who);
  }
  // `@agent approve`: the request it covers runs, once, with the text it had at the approval.
  if (trigger.kind === 'mention' && run.approval === null && APPROVE.test(ours.instruction))
    return decideApproved(trigger, config, facts);
  // `@agent verify`: the PR's verdict reproduced, reported on its check run and in its conversation.
  if (trigger.kind === 'mention' && run.approval === null && VERIFY.test(ours.instruction))
    return decideVerify(trigger, config, facts, run);
  // `@agent evaluate …`: an admin's request, answered where it was asked.
  let evaluate: EvaluateRequest | null = null;
  if (trigger.kind === 'mention' && EVALUATE.test(ours.instruction)) {
    // Who asks first: only an admin hears anything more about the command (once a day otherwise).
    if (facts.evaluator === undefined) return need(trigger, run.phase, { fact: 'evaluator' });
    const admin = facts.evaluator;
    if (!admin.allowed) {
      const conversation = issueKey(trigger.repo.id, trigger.issue.number);
      return refuse({ code: 'evaluate_not_admin', detail: admin.reason }, null, {
        body: admin.reply,
        once: { key: `refused-evaluate:${conversation}:${trigger.sender.id}`, ttlSeconds: DAY_SECONDS },
      });
    }
    const parsed = parseEvaluate(ours.instruction);
    if (!parsed.ok) {
      return refuse({ code: 'evaluate_bad_request', problem: parsed.problem }, null, {
        body: `I can't start the evaluation: ${parsed.problem}.\n\n${EVALUATE_USAGE}`,
        once: null,
      });
    }
    evaluate = parsed.request;
  }
  // `@agent review`: one review of the pull request it was asked on, never a push.
  const review = trigger.kind === 'mention' && !cancel && REVIEW.test(ours.instruction);
  if (review && !trigger.issue.isPullRequest) {
    const conversation = issueKey(trigger.repo.id, trigger.issue.number);
    return refuse({ code: 'review_not_pull' }, null, {
      body: 'I review pull requests: ask `@agent review` on the pull request itself.',
      once: { key: `review-not-pull:${conversation}`, ttlSeconds: DAY_SECONDS },
    });
  }
  return decideAccepted(trigger, config, facts, run, {
    instruction: review ? ours.instruction.replace(REVIEW, '').trim() : ours.instruction,
    answer,
    cancel,
    evaluate,
    review,
  });
}

/**
 * The answer a trigger gives to the agent's question, if any: the approved one, or the first comment
 * on an issue whose last job ended `needs_info` by someone who may answer (commands are not answers).
 * An answer by someone allowed to start jobs counts at once; the issue author's, when they may not,
 * waits for an approval. A bot that opened the issue answers only if trusted like any bot.
 */
function answerFor(
  trigger: Trigger,
  config: RepoConfig,
  mentioned: { readonly instruction: string } | null,
  facts: RunFacts,
  run: RunContext,
):
  | { readonly kind: 'answer'; readonly answer: Answer | null }
  | { readonly kind: 'decided'; readonly decision: Decision } {
  const none = { kind: 'answer', answer: null } as const;
  if (run.approval !== null) {
    const text = answerText(trigger);
    return run.approval.answers === null || text === ''
      ? none
      : { kind: 'answer', answer: { jobId: run.approval.answers, text } };
  }
  const candidate =
    trigger.kind === 'mention' &&
    !trigger.issue.isPullRequest &&
    trigger.issue.state === 'open' &&
    trigger.comment !== undefined &&
    (mentioned === null ||
      (!STOP.test(mentioned.instruction) &&
        !APPROVE.test(mentioned.instruction) &&
        !EVALUATE.test(mentioned.instruction) &&
        !REVIEW.test(mentioned.instruction) &&
        !VERIFY.test(mentioned.instruction)));
  if (!candidate) return none;
  const decided = (decision: Decision) => ({ kind: 'decided', decision }) as const;
  if (facts.question === undefined) return decided(need(trigger, run.phase, { fact: 'question' }));
  const pending = facts.question;
  if (pending === null) return none;
  const byAuthor =
    trigger.issue.authorId !== undefined &&
    trigger.issue.authorId === trigger.sender.id &&
    trigger.sender.type !== 'Bot';
  if (facts.permission === undefined) return decided(need(trigger, run.phase, { fact: 'permission' }));
  if (facts.permission.allowed !== true) {
    if (!byAuthor || answerText(trigger) === '') return none;
    if (facts.answered === undefined)
      return decided(need(trigger, run.phase, { fact: 'answered', jobId: pending.jobId }));
    return facts.answered ? none : decided(answerWaits(trigger, config, pending.jobId));
  }
  if (facts.answerClaim === undefined)
    return decided(need(trigger, run.phase, { fact: 'answerClaim', jobId: pending.jobId }));
  const text = answerText(trigger);
  return !facts.answerClaim || text === ''
    ? none
    : { kind: 'answer', answer: { jobId: pending.jobId, text } };
}

/** An answer's text as a job carries it: hidden text removed, capped like an issue's body. */
export function answerText(trigger: Trigger): string {
  return capIssueBody(stripHiddenText(trigger.comment?.body ?? '')).trim();
}

/** The issue author's answer waits for approval (as approve-request.ts covers it), said once per question. */
function answerWaits(trigger: Trigger, config: RepoConfig, jobId: string): Plan {
  const conversation = issueKey(trigger.repo.id, trigger.issue.number);
  return refuse(
    { code: 'answer_waits', by: trigger.sender.login },
    { trigger, answers: jobId, ttlSeconds: config.approvalDays * 86_400 },
    {
      body: `Thanks for the answer, @${trigger.sender.login}. An answer is an instruction to me, and only people who can start jobs in this repository give me those, so it needs a maintainer's approval first. ${waitingReply(config, 'answer')}`,
      once: {
        key: `refused-answer:${conversation}:${trigger.sender.id}:${jobId}`,
        ttlSeconds: DAY_SECONDS,
      },
    },
  );
}

/**
 * Someone who may not start jobs asked. A person's request, in a comment or a review comment (not a
 * bot's, not a stop, an approval or an evaluation), waits for someone who may approve it.
 */
function refuseSender(
  trigger: Trigger,
  config: RepoConfig,
  instruction: string,
  cancel: boolean,
  who: Extract<Permission, { allowed: false }>,
): Plan {
  const person = trigger.sender.type !== 'Bot' && !trigger.sender.login.endsWith('[bot]');
  const waits =
    person &&
    (trigger.kind === 'mention' || trigger.kind === 'review_comment') &&
    !cancel &&
    !APPROVE.test(instruction) &&
    !EVALUATE.test(instruction) &&
    !(trigger.kind === 'mention' && VERIFY.test(instruction)) &&
    instruction !== '';
  const conversation = issueKey(trigger.repo.id, trigger.issue.number);
  const approve = waits
    ? `\n\n${waitingReply(config, trigger.kind === 'review_comment' ? 'review_comment' : 'request')}`
    : '';
  return refuse(
    { code: 'sender_not_allowed', detail: who.reason },
    waits ? { trigger, answers: null, ttlSeconds: config.approvalDays * 86_400 } : null,
    {
      body: `${who.reply}${approve}`,
      once: { key: `refused:${conversation}:${trigger.sender.id}`, ttlSeconds: DAY_SECONDS },
    },
  );
}

/**
 * `@agent approve` by someone who may: the request it covers runs as approved (its text at the
 * approval, quoted in the conversation once it starts); or the reply says why nothing starts.
 */
function decideApproved(approve: Trigger, config: RepoConfig, facts: Facts): Decision {
  if (facts.approval === undefined) return need(approve, 'delivered', { fact: 'approval' });
  const taken = facts.approval;
  if (taken.kind === 'refused') {
    return {
      kind: 'ignore',
      reason: { code: 'approval_refused', detail: taken.reason },
      say: { body: taken.reply, once: null },
      react: null,
    };
  }
  const decided = decideRun(taken.request, config, facts.approved ?? {}, {
    phase: 'approved',
    approval: taken.approval,
    ci: null,
  });
  if (decided.kind !== 'enqueue') return decided;
  return {
    ...decided,
    approved: {
      approval: taken.approval,
      requester: taken.request.sender.login,
      quote: {
        body: approvedQuote(taken.request, taken.approval, taken.editedBefore),
        once: { key: `approval-quote:${approve.deliveryId}`, ttlSeconds: DAY_SECONDS },
      },
    },
  };
}

/**
 * `@agent verify` by someone who may start jobs: a verify job for the pull request it was asked on,
 * or the App's open one for the issue, on a queue target of its own (ids.ts' verifyKey). A fork's
 * pull request is verified too: its head runs only in a sandbox, with no setup secret (verify-job.ts).
 */
function decideVerify(trigger: Trigger, config: RepoConfig, facts: RunFacts, run: RunContext): Decision {
  if (facts.target === undefined) return need(trigger, run.phase, { fact: 'target' });
  const target = facts.target;
  const repoId = trigger.repo.id;
  if (target.kind !== 'pull') {
    return {
      ...refuse({ code: 'verify_no_pull' }, null, { body: VERIFY_NO_PULL, once: null }),
      react: trigger,
    };
  }
  if (facts.pull === undefined) return need(trigger, run.phase, { fact: 'pull', pull: target.number });
  if (facts.pull.state !== 'open') return { ...ignore({ code: 'pull_closed' }), react: trigger };
  return {
    kind: 'enqueue',
    clearQuestion: null,
    enqueue: {
      target,
      targetKey: verifyKey(repoId, target.number),
      jobId: fixJobId(repoId, target.number, trigger.deliveryId),
      job: buildVerifyJob(trigger, config, target.number),
      shown: {},
      // A reproduction replaces nothing: it only reads the PR, and a second one is a duplicate.
      mayReplace: false,
      onBusy: config.onBusy,
      repositoryAttempts: config.attempts,
    },
    react: trigger,
    approved: null,
    answers: null,
  };
}

/** An accepted request: a stop, or the job it asks for, on its target. */
function decideAccepted(
  trigger: Trigger,
  config: RepoConfig,
  facts: RunFacts,
  run: RunContext,
  request: {
    readonly instruction: string;
    readonly answer: Answer | null;
    readonly cancel: boolean;
    readonly evaluate: EvaluateRequest | null;
    readonly review: boolean;
  },
): Decision {
  const { answer, evaluate } = request;
  if (request.review) return decideReview(trigger, config, facts, run, request.instruction);
  // The target: a PR's own conversation, or the App's open PR for an issue (a follow-up there, never
  // a second PR), or the issue itself. An evaluation reports in the conversation that asked,
  // whatever it is; it opens no pull request. An answer continues a conversation on the issue
  // itself, never on a PR opened since.
  let target: Target = { kind: 'issue', number: trigger.issue.number };
  if (evaluate === null && answer === null) {
    if (facts.target === undefined) return need(trigger, run.phase, { fact: 'target' });
    target = facts.target;
  }
  const repoId = trigger.repo.id;
  const targetKey = evaluate === null ? issueKey(repoId, target.number) : evaluateKey(repoId, target.number);
  // A stop, or any other request on the issue, ends the wait for an answer to an earlier question.
  const clearQuestion =
    answer === null && evaluate === null && target.kind === 'issue'
      ? issueKey(repoId, trigger.issue.number)
      : null;
  if (request.cancel) {
    return {
      kind: 'cancel',
      clearQuestion,
      targets: [
        targetKey,
        ...(target.number === trigger.issue.number ? [] : [issueKey(repoId, trigger.issue.number)]),
        // An evaluation, a review or a verification asked for here stops too.
        evaluateKey(repoId, trigger.issue.number),
        ...(trigger.issue.isPullRequest
          ? [reviewKey(repoId, trigger.issue.number), verifyKey(repoId, trigger.issue.number)]
          : []),
      ],
      by: trigger.sender.login,
      sayIfNone:
        trigger.kind === 'unlabel'
          ? null
          : { body: 'Nothing to stop: no job of mine is queued or running here.', once: null },
      react: trigger,
    };
  }

  let reviewComments: readonly ReviewContext[] = [];
  let human: HumanPull | null = null;
  if (target.kind === 'pull') {
    if (facts.pull === undefined) return need(trigger, run.phase, { fact: 'pull', pull: target.number });
    if (facts.pull.state !== 'open') return { ...ignore({ code: 'pull_closed' }), react: trigger };
    const owner = facts.pull.ownership;
    // A request asked on a person's pull request itself (not an issue whose branch a person took).
    const onThatPull =
      !owner.ours &&
      trigger.issue.isPullRequest &&
      target.number === trigger.issue.number &&
      trigger.kind !== 'ci_failure';
    if (onThatPull) {
      const decided = decideHumanPull(trigger, facts, run, target.number, owner);
      if (decided.kind !== 'human') return decided;
      human = decided.human;
    } else if (!owner.ours) {
      // Pushing to someone else's branch (or a fork, or `main` behind a PR from it) is never done.
      return {
        ...refuse({ code: owner.fork ? 'pull_from_fork' : 'pull_not_ours' }, null, {
          body: notOursReply(owner),
          once: { key: `not-mine:${issueKey(repoId, target.number)}`, ttlSeconds: DAY_SECONDS },
        }),
        react: trigger,
      };
    }
    if (facts.reviewComments === undefined)
      return need(trigger, run.phase, { fact: 'reviewComments', pull: target.number });
    reviewComments = facts.reviewComments;
  }

  const approval = run.approval;
  const approvedBy =
    approval === null ? null : { ...approval.by, covers: { ...approval.covers }, at: approval.at };
  const built = buildJob(trigger, target, config, request.instruction, reviewComments, {
    ci: run.ci,
    answer,
    evaluate,
    approvedBy,
  });
  const job = human === null || built.pull === null ? built : { ...built, pull: { ...built.pull, human } };
  return {
    kind: 'enqueue',
    clearQuestion,
    enqueue: {
      target,
      targetKey,
      jobId: fixJobId(repoId, target.number, trigger.deliveryId),
      job,
      shown: {
        ...(approvedBy === null
          ? {}
          : { approval: { requestedBy: trigger.sender.login, approvedBy: approvedBy.login } }),
        ...(run.ci === null ? {} : { ciRound: { round: run.ci.round, of: run.ci.of } }),
        ...(human === null
          ? {}
          : {
              pushTo: {
                author: human.author,
                branch: human.headRef,
                requester: trigger.sender.login,
                ...(human.fork === undefined ? {} : { fork: human.headRepo }),
              },
            }),
      },
      mayReplace: answer === null && run.ci === null,
      onBusy: config.onBusy,
      repositoryAttempts: config.attempts,
    },
    react: trigger,
    approved: null,
    answers: answer?.jobId ?? null,
  };
}

type HumanPull = NonNullable<NonNullable<FixJob['pull']>['human']>;

/**
 * A request on a pull request a person opened: commits go on its branch when the requester may push
 * to this repository themselves (GitHub's own rule for a collaborator's push), so the App never
 * pushes for someone who could not. A fork's branch is written only where its author allowed edits
 * by maintainers (GitHub's rule for pushing to a fork's head branch): the job clones the fork and
 * pushes there with git (see docs/github-app.md).
 */
function decideHumanPull(
  trigger: Trigger,
  facts: RunFacts,
  run: RunContext,
  pull: number,
  owner: PullOwnership,
): Decision | { readonly kind: 'human'; readonly human: HumanPull } {
  const said = (code: 'pull_fork_locked' | 'pull_push_denied', body: string): Plan => ({
    ...refuse({ code }, null, {
      body,
      once: {
        key: `human-pull:${code}:${issueKey(trigger.repo.id, pull)}:${trigger.sender.id}`,
        ttlSeconds: DAY_SECONDS,
      },
    }),
    react: trigger,
  });
  if (owner.fork) {
    if (owner.headRepo === null)
      return said('pull_fork_locked', humanPullReply('fork_gone', owner, trigger.sender.login));
    if (owner.maintainerCanModify !== true)
      return said('pull_fork_locked', humanPullReply('fork_locked', owner, trigger.sender.login));
    // Nowhere to clone it from: as good as gone.
    if (owner.headCloneUrl == null)
      return said('pull_fork_locked', humanPullReply('fork_gone', owner, trigger.sender.login));
  }
  if (facts.pushAccess === undefined) return need(trigger, run.phase, { fact: 'pushAccess' });
  if (!facts.pushAccess)
    return said('pull_push_denied', humanPullReply('no_push', owner, trigger.sender.login));
  return {
    kind: 'human',
    human: {
      author: owner.author ?? null,
      headRef: owner.headRef ?? '',
      headRepo: owner.headRepo ?? '',
      ...(owner.fork && owner.headCloneUrl != null ? { fork: { cloneUrl: owner.headCloneUrl } } : {}),
    },
  };
}

/** `@agent review` on a pull request: its review job, on a queue target of its own. */
function decideReview(
  trigger: Trigger,
  config: RepoConfig,
  facts: RunFacts,
  run: RunContext,
  instruction: string,
): Decision {
  const number = trigger.issue.number;
  if (facts.pull === undefined) return need(trigger, run.phase, { fact: 'pull', pull: number });
  if (facts.pull.state !== 'open') return { ...ignore({ code: 'pull_closed' }), react: trigger };
  const repoId = trigger.repo.id;
  return {
    kind: 'enqueue',
    clearQuestion: null,
    enqueue: {
      target: { kind: 'pull', number },
      targetKey: reviewKey(repoId, number),
      jobId: fixJobId(repoId, number, trigger.deliveryId),
      job: buildReviewJob(trigger, config, instruction),
      shown: {},
      mayReplace: false,
      onBusy: config.onBusy,
      repositoryAttempts: config.attempts,
    },
    react: trigger,
    approved: null,
    answers: null,
  };
}

/** The job a request asks for: a CI round, an answer's continuation, an evaluation or a fix. */
function buildJob(
  trigger: Trigger,
  target: Target,
  config: RepoConfig,
  instruction: string,
  reviewComments: readonly ReviewContext[],
  how: {
    readonly ci: CiRound | null;
    readonly answer: Answer | null;
    readonly evaluate: EvaluateRequest | null;
    readonly approvedBy: NonNullable<FixJob['trigger']['approvedBy']> | null;
  },
): FixJob {
  const { ci, answer, evaluate, approvedBy } = how;
  if (evaluate !== null) return buildEvaluateJob(trigger, config, instruction, evaluate);
  if (ci !== null) return { ...buildFixJob(trigger, target, config, '', []), ci };
  if (answer === null) return buildFixJob(trigger, target, config, instruction, reviewComments, approvedBy);
  return {
    // The answer continues the asking job's conversation; were its trajectory gone from the worker
    // hosts, a new run still gets the answer, as an instruction.
    ...buildFixJob(trigger, target, config, `Answer to the agent's question: ${answer.text}`, [], approvedBy),
    // The repository's settings, not any `(try N)` in the answer's text: an answer may come from an
    // outsider, who cannot ask for more attempts.
    config: { ...config },
    continues: { jobId: answer.jobId, answer: { by: trigger.sender.login, text: answer.text } },
  };
}

/** What the queue holds for a job's target, read under the target's lock. */
export interface QueueState {
  /** The job queued or running for the target, or null. */
  readonly live: string | null;
  /** How many attempts the live job makes (the repository's when it cannot be read). */
  readonly liveAttempts: number;
  /** Requests waiting behind the target's live job. */
  readonly waiting: number;
  /** This job already waits there (an intake retry). */
  readonly pendingAlready: boolean;
}

export type Placement =
  /** This job is the live one already (an intake retry). */
  | { readonly kind: 'live' }
  /** It asks nothing the live job does not: nothing new is queued. */
  | { readonly kind: 'duplicate'; readonly live: string }
  /**
   * It waits behind the live job or earlier requests (never dropped): `add` when not waiting yet,
   * `replace` when it also stops the live job, `handOff` when nothing runs to hand over to it.
   */
  | {
      readonly kind: 'behind';
      readonly live: string | null;
      readonly add: boolean;
      readonly replace: boolean;
      readonly handOff: boolean;
    }
  /** The target is free: the job is queued. */
  | { readonly kind: 'queue' };

/** Where a job goes on its target, given what the queue holds there (pure; see QueueState). */
export function placeJob(enqueue: Enqueue, queue: QueueState): Placement {
  const { live } = queue;
  if (live === enqueue.jobId) return { kind: 'live' };
  if (
    live !== null &&
    asksNothingNew(enqueue.job, { repository: enqueue.repositoryAttempts, live: queue.liveAttempts })
  )
    return { kind: 'duplicate', live };
  // Requests already waiting keep their turn even if nothing runs this instant (a job just ended and
  // its worker has not handed over yet).
  if (live !== null || queue.waiting > 0) {
    return {
      kind: 'behind',
      live,
      add: !queue.pendingAlready,
      replace: !queue.pendingAlready && enqueue.onBusy === 'replace' && live !== null && enqueue.mayReplace,
      handOff: live === null,
    };
  }
  return { kind: 'queue' };
}

function need(
  about: Trigger,
  phase: RunContext['phase'],
  what: DistributiveOmit<Need, 'kind' | 'about' | 'phase'>,
): Need {
  return { kind: 'need', about, phase, ...what };
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

function ignore(reason: IgnoreReason): Extract<Plan, { kind: 'ignore' }> {
  return { kind: 'ignore', reason, say: null, react: null };
}

function refuse(
  reason: Refusal,
  store: StoreRequest | null,
  say: Say | null,
): Extract<Plan, { kind: 'refuse' }> {
  return { kind: 'refuse', reason, store, say, react: null };
}

function hash(text: string): string {
  let h = 0;
  for (let i = 0; i < text.length; i++) h = (Math.imul(31, h) + text.charCodeAt(i)) | 0;
  return (h >>> 0).toString(36);
}
