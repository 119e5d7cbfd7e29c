/**
 * Protected branches: the rules repos/update-branch-protection sets, their JSON, and the check GitHub
 * runs on every update of a protected branch, by git push (the pre-receive hook, hooks.ts) and by the
 * git refs API alike. Refusals carry GitHub's messages (GH006 and the rule's own line).
 */
import { validationFailed } from './errors.js';
import type { RepoRecord } from './state.js';

export interface BranchProtectionRecord {
  requiredStatusChecks: { strict: boolean; contexts: string[] } | null;
  enforceAdmins: boolean;
  requiredPullRequestReviews: {
    dismissStaleReviews: boolean;
    requireCodeOwnerReviews: boolean;
    requiredApprovingReviewCount: number;
    requireLastPushApproval: boolean;
  } | null;
  requiredLinearHistory: boolean;
  allowForcePushes: boolean;
  allowDeletions: boolean;
  blockCreations: boolean;
  requiredConversationResolution: boolean;
  lockBranch: boolean;
  requiredSignatures: boolean;
}

type Body = Record<string, unknown>;

function obj(value: unknown): Body | null {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Body) : null;
}

function bool(value: unknown, otherwise = false): boolean {
  return typeof value === 'boolean' ? value : otherwise;
}

/**
 * The record a PUT body (already checked against the OpenAPI schema) sets. Keeps required signatures
 * as they were: GitHub sets them through their own endpoint. Throws GitHub's 422 for what the schema
 * lets through and GitHub does not: restrictions on a repository of a user account (only
 * organizations have them), a status-check rule naming no check.
 */
export function protectionFromBody(
  body: unknown,
  previous: BranchProtectionRecord | undefined,
): BranchProtectionRecord {
  const b = obj(body) ?? {};
  if (b.restrictions !== null && b.restrictions !== undefined)
    throw validationFailed([
      {
        resource: 'ProtectedBranch',
        field: 'restrictions',
        code: 'invalid',
        message: 'Only organization repositories can have users and team restrictions',
      },
    ]);
  const checks = obj(b.required_status_checks);
  let requiredStatusChecks: BranchProtectionRecord['requiredStatusChecks'] = null;
  if (checks !== null) {
    const contexts = Array.isArray(checks.contexts) ? checks.contexts.map(String) : [];
    const named = Array.isArray(checks.checks)
      ? checks.checks.flatMap((c) => {
          const context = obj(c)?.context;
          return typeof context === 'string' ? [context] : [];
        })
      : [];
    requiredStatusChecks = { strict: bool(checks.strict), contexts: [...new Set([...contexts, ...named])] };
  }
  const reviews = obj(b.required_pull_request_reviews);
  return {
    requiredStatusChecks,
    enforceAdmins: bool(b.enforce_admins),
    requiredPullRequestReviews:
      reviews === null
        ? null
        : {
            dismissStaleReviews: bool(reviews.dismiss_stale_reviews),
            requireCodeOwnerReviews: bool(reviews.require_code_owner_reviews),
            requiredApprovingReviewCount:
              typeof reviews.required_approving_review_count === 'number'
                ? reviews.required_approving_review_count
                : 1,
            requireLastPushApproval: bool(reviews.require_last_push_approval),
          },
    requiredLinearHistory: bool(b.required_linear_history),
    allowForcePushes: bool(b.allow_force_pushes),
    allowDeletions: bool(b.allow_deletions),
    blockCreations: bool(b.block_creations),
    requiredConversationResolution: bool(b.required_conversation_resolution),
    lockBranch: bool(b.lock_branch),
    requiredSignatures: previous?.requiredSignatures ?? false,
  };
}

/** GitHub's branch-protection JSON for a branch's record. */
export function protectionJson(
  base: string,
  repo: RepoRecord,
  branch: string,
  p: BranchProtectionRecord,
): Record<string, unknown> {
  const url = `${base}/repos/${repo.owner.login}/${repo.name}/branches/${encodeURIComponent(branch)}/protection`;
  const out: Record<string, unknown> = {
    url,
    required_signatures: { url: `${url}/required_signatures`, enabled: p.requiredSignatures },
    enforce_admins: { url: `${url}/enforce_admins`, enabled: p.enforceAdmins },
    required_linear_history: { enabled: p.requiredLinearHistory },
    allow_force_pushes: { enabled: p.allowForcePushes },
    allow_deletions: { enabled: p.allowDeletions },
    block_creations: { enabled: p.blockCreations },
    required_conversation_resolution: { enabled: p.requiredConversationResolution },
    lock_branch: { enabled: p.lockBranch },
    allow_fork_syncing: { enabled: false },
  };
  if (p.requiredStatusChecks !== null)
    out.required_status_checks = {
      url: `${url}/required_status_checks`,
      strict: p.requiredStatusChecks.strict,
      contexts: p.requiredStatusChecks.contexts,
      checks: p.requiredStatusChecks.contexts.map((context) => ({ context, app_id: null })),
      contexts_url: `${url}/required_status_checks/contexts`,
    };
  if (p.requiredPullRequestReviews !== null)
    out.required_pull_request_reviews = {
      url: `${url}/required_pull_request_reviews`,
      dismiss_stale_reviews: p.requiredPullRequestReviews.dismissStaleReviews,
      require_code_owner_reviews: p.requiredPullRequestReviews.requireCodeOwnerReviews,
      required_approving_review_count: p.requiredPullRequestReviews.requiredApprovingReviewCount,
      require_last_push_approval: p.requiredPullRequestReviews.requireLastPushApproval,
    };
  return out;
}

/** One ref update of a push or a refs API call. */
export interface RefUpdate {
  readonly ref: string;
  /** The full sha before, or null when the ref is created. */
  readonly old: string | null;
  /** The full sha after, or null when the ref is deleted. */
  readonly new: string | null;
}

/** What the rules need to know about an update, worked out by the caller with git. */
export interface UpdateFacts {
  /** Whether `old` is an ancestor of `new` (true for creations and deletions). */
  readonly fastForward: boolean;
  /** The commits the update brings to the branch that no ref of the repository had, with their verification. */
  readonly newCommits: readonly { readonly sha: string; readonly verified: boolean }[];
  /** Whether any of the new commits is a merge commit. */
  readonly hasMerge: boolean;
  /** Names of check runs that completed successfully on `new`. */
  readonly passedChecks: ReadonlySet<string>;
  /** Whether the pusher is an administrator of the repository (a person with the admin role). */
  readonly admin: boolean;
}

/**
 * The lines GitHub prints when it refuses an update of a protected branch, or null when the rules
 * let it through. The first line is always GH006's; each broken rule adds its own.
 */
export function protectedBranchRefusal(
  p: BranchProtectionRecord,
  update: RefUpdate,
  facts: UpdateFacts,
): string[] | null {
  const bypass = facts.admin && !p.enforceAdmins;
  const problems: string[] = [];
  if (p.lockBranch) problems.push('Cannot change this locked branch');
  if (update.new === null) {
    if (!p.allowDeletions) problems.push('Cannot delete this branch');
  } else {
    if (!facts.fastForward && !p.allowForcePushes) problems.push('Cannot force-push to this branch');
    if (!bypass) {
      if (p.requiredPullRequestReviews !== null)
        problems.push('Changes must be made through a pull request.');
      for (const context of p.requiredStatusChecks?.contexts ?? [])
        if (!facts.passedChecks.has(context))
          problems.push(`Required status check "${context}" is expected.`);
      if (p.requiredSignatures && facts.newCommits.some((c) => !c.verified))
        problems.push('Commits must have verified signatures.');
      if (p.requiredLinearHistory && facts.hasMerge)
        problems.push('This branch must not contain merge commits.');
    }
  }
  if (problems.length === 0) return null;
  return [`GH006: Protected branch update failed for ${update.ref}.`, ...problems];
}
