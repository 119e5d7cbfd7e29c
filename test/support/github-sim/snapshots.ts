/** Copies of the simulator's records for tests: plain data, detached from the live state. */
import type {
  CheckRunRecord,
  CommentRecord,
  IssueRecord,
  ReactionRecord,
  RepoRecord,
  ReviewCommentRecord,
} from './state.js';
import type {
  SimCheckRun,
  SimComment,
  SimIssue,
  SimPull,
  SimReaction,
  SimRepo,
  SimReviewComment,
} from './types.js';

export function repoSnapshot(repo: RepoRecord, base: string): SimRepo {
  return {
    owner: repo.owner.login,
    name: repo.name,
    fullName: `${repo.owner.login}/${repo.name}`,
    id: repo.id,
    defaultBranch: repo.defaultBranch,
    private: repo.private,
    cloneUrl: `${base}/${repo.owner.login}/${repo.name}.git`,
    bareRepoPath: repo.bareDir,
  };
}

export function issueSnapshot(issue: IssueRecord): SimIssue {
  return {
    number: issue.number,
    id: issue.id,
    title: issue.title,
    body: issue.body,
    user: issue.user.login,
    state: issue.state,
    labels: issue.labels.map((l) => l.name),
    isPullRequest: issue.pull !== null,
    reactions: issue.reactions.map(reactionSnapshot),
  };
}

/** Null for an issue that is not a pull request. */
export function pullSnapshot(issue: IssueRecord): SimPull | null {
  const pull = issue.pull;
  if (pull === null) return null;
  return {
    number: issue.number,
    title: issue.title,
    body: issue.body,
    head: { ...pull.head },
    base: { ...pull.base },
    draft: pull.draft,
    state: issue.state,
    merged: pull.merged,
    mergedAt: pull.mergedAt,
    mergeCommitSha: pull.mergeCommitSha,
    user: issue.user.login,
    labels: issue.labels.map((l) => l.name),
  };
}

export function commentSnapshot(comment: CommentRecord): SimComment {
  return {
    id: comment.id,
    body: comment.body,
    user: comment.user.login,
    edits: [...comment.edits],
    reactions: comment.reactions.map(reactionSnapshot),
    createdAt: comment.createdAt,
    updatedAt: comment.updatedAt,
  };
}

export function reviewCommentSnapshot(comment: ReviewCommentRecord): SimReviewComment {
  return {
    ...commentSnapshot(comment),
    path: comment.path,
    line: comment.line,
    inReplyToId: comment.inReplyToId,
  };
}

export function reactionSnapshot(reaction: ReactionRecord): SimReaction {
  return { id: reaction.id, content: reaction.content, user: reaction.user.login };
}

export function checkRunSnapshot(run: CheckRunRecord): SimCheckRun {
  return {
    id: run.id,
    name: run.name,
    headSha: run.suite.headSha,
    headBranch: run.suite.headBranch,
    status: run.status,
    conclusion: run.conclusion,
    checkSuiteId: run.suite.id,
    workflowRunId: run.suite.workflowRunId,
    annotations: run.annotations.map((a) => ({
      path: a.path,
      startLine: a.startLine,
      endLine: a.endLine,
      level: a.level,
      message: a.message,
      ...(a.title === null ? {} : { title: a.title }),
      ...(a.rawDetails === null ? {} : { rawDetails: a.rawDetails }),
    })),
    log: run.log,
  };
}
