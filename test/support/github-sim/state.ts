/**
 * The simulator's world: users, repositories, issues and pull requests (one number sequence per
 * repository, as on GitHub), comments, reactions, labels, reviews, and check runs with their check
 * suites and job logs. Plain records, mutated in place by the REST handlers and the test-facing
 * methods; wire.ts turns them into GitHub's JSON.
 */
import { readRefsSync } from './git.js';
import type { BranchProtectionRecord } from './protection.js';
import type { CheckConclusion, CheckStatus, RepoPermission, WorkflowRunConclusion } from './types.js';

export interface UserRecord {
  readonly login: string;
  readonly id: number;
  readonly type: 'User' | 'Bot';
  readonly createdAt: string;
}

export interface LabelRecord {
  readonly id: number;
  readonly name: string;
  readonly color: string;
  readonly description: string | null;
  readonly isDefault: boolean;
}

export interface ReactionRecord {
  readonly id: number;
  readonly content: string;
  readonly user: UserRecord;
  readonly createdAt: string;
}

export interface CommentRecord {
  readonly id: number;
  readonly repo: RepoRecord;
  readonly issueNumber: number;
  readonly user: UserRecord;
  body: string;
  readonly edits: string[];
  readonly reactions: ReactionRecord[];
  readonly createdAt: string;
  updatedAt: string;
}

export interface ReviewCommentRecord extends CommentRecord {
  readonly path: string;
  readonly line: number | null;
  readonly commitId: string;
  readonly diffHunk: string;
  readonly inReplyToId: number | null;
  readonly reviewId: number;
}

export interface ReviewRecord {
  readonly id: number;
  readonly user: UserRecord;
  readonly body: string;
  state: 'PENDING' | 'COMMENTED' | 'APPROVED' | 'CHANGES_REQUESTED' | 'DISMISSED';
  readonly commitId: string;
  /** Null while the review is pending (not submitted). */
  submittedAt: string | null;
}

export interface PullRecord {
  head: { ref: string; sha: string };
  /** The repository the head branch is in: the base repository, or a fork of it. */
  readonly headRepo: RepoRecord;
  base: { ref: string; sha: string };
  /** The head sha before the last push to the branch (a synchronize event's `before`). */
  previousHeadSha: string | null;
  draft: boolean;
  merged: boolean;
  mergedAt: string | null;
  /** The commit a merge made on the base branch (the merge commit, or the squashed one). */
  mergeCommitSha: string | null;
  mergedBy: UserRecord | null;
  maintainerCanModify: boolean;
  readonly reviewComments: ReviewCommentRecord[];
  readonly reviews: ReviewRecord[];
}

export interface IssueRecord {
  readonly id: number;
  readonly number: number;
  readonly repo: RepoRecord;
  title: string;
  body: string;
  readonly user: UserRecord;
  state: 'open' | 'closed';
  stateReason: 'completed' | 'not_planned' | 'reopened' | null;
  readonly labels: LabelRecord[];
  readonly comments: CommentRecord[];
  readonly reactions: ReactionRecord[];
  readonly createdAt: string;
  updatedAt: string;
  closedAt: string | null;
  closedBy: UserRecord | null;
  /** Present exactly when the issue is a pull request. */
  pull: PullRecord | null;
}

export interface CheckAnnotationRecord {
  readonly path: string;
  readonly startLine: number;
  readonly endLine: number;
  readonly level: 'notice' | 'warning' | 'failure';
  readonly message: string;
  readonly title: string | null;
  readonly rawDetails: string | null;
}

/** A workflow file of a repository, as the Actions API lists it. */
export interface WorkflowRecord {
  readonly id: number;
  /** The `name:` of the file: what `on: workflow_run: { workflows: [...] }` matches. */
  readonly name: string;
  readonly path: string;
  readonly createdAt: string;
}

/** How a workflow run's attempt ended. */
export interface WorkflowRunCompletion {
  readonly conclusion: WorkflowRunConclusion;
  readonly completedAt: string;
  /** Who triggered the run: its `actor`, and the sender of `workflow_run.completed`. */
  readonly actor: UserRecord;
}

/**
 * The check suite of GitHub Actions on one commit; here also its one workflow run, whose jobs are
 * the suite's check runs.
 */
export interface CheckSuiteRecord {
  readonly id: number;
  readonly workflowRunId: number;
  readonly headSha: string;
  readonly headBranch: string | null;
  /** The commit before `headSha` (its first parent), or null for a root commit. */
  readonly before: string | null;
  readonly createdAt: string;
  updatedAt: string;
  /** The workflow the run is of: `CI` until its completion names another. */
  workflow: WorkflowRecord;
  /**
   * Set when the run's current attempt completes; null while it runs. Adding a job to a completed
   * run (a re-run) starts its next attempt, which clears it.
   */
  completion: WorkflowRunCompletion | null;
}

/**
 * A check run: made by GitHub Actions (a workflow job, whose job id is the check run id) or by the
 * simulated App through checks/create.
 */
export interface CheckRunRecord {
  readonly id: number;
  readonly repo: RepoRecord;
  /** Which App made it: GitHub Actions, or the simulator's App (checks/create with its token). */
  readonly app: 'actions' | 'app';
  readonly suite: CheckSuiteRecord;
  name: string;
  externalId: string;
  status: CheckStatus;
  conclusion: CheckConclusion | null;
  startedAt: string;
  completedAt: string | null;
  output: { title: string | null; summary: string | null; text: string | null };
  readonly annotations: CheckAnnotationRecord[];
  detailsUrl: string | null;
  /** The job's raw log. */
  log: string;
}

export interface RepoRecord {
  readonly id: number;
  readonly owner: UserRecord;
  readonly name: string;
  readonly defaultBranch: string;
  readonly private: boolean;
  readonly bareDir: string;
  readonly createdAt: string;
  pushedAt: string;
  readonly issues: Map<number, IssueRecord>;
  readonly labels: Map<string, LabelRecord>;
  readonly permissions: Map<string, RepoPermission>;
  /** Check runs in creation order. */
  readonly checkRuns: CheckRunRecord[];
  /** GitHub Actions' check suite per head sha. */
  readonly checkSuites: Map<string, CheckSuiteRecord>;
  /** The simulated App's check suite per head sha (its check runs made through checks/create). */
  readonly appCheckSuites: Map<string, CheckSuiteRecord>;
  /** Branch protection by branch name (repos/update-branch-protection). */
  readonly protections: Map<string, BranchProtectionRecord>;
  /** The repository this one is a fork of; null for a repository of its own. */
  readonly parent: RepoRecord | null;
  /**
   * Whether the App's installation covers it: every repository the test creates; not a fork a
   * person makes (GitHub installs an App on an account's repositories, not on its users' forks).
   */
  readonly installed: boolean;
  /** Workflows by name, added as runs name them. */
  readonly workflows: Map<string, WorkflowRecord>;
}

/** Ids in separate ranges per kind, deterministic per simulator, so fixtures can mention them. */
export class World {
  readonly users = new Map<string, UserRecord>();
  readonly repos = new Map<string, RepoRecord>();
  readonly comments = new Map<number, CommentRecord>();
  readonly reviewComments = new Map<number, ReviewCommentRecord>();
  readonly checkRuns = new Map<number, CheckRunRecord>();
  private readonly sequences = new Map<string, number>();
  /** How far the simulator's clock runs ahead of the real one (GitHubSim.advanceClock). */
  private clockOffsetMs = 0;

  /** The time comments are created and edited at: GitHub's whole seconds, on the simulator's clock. */
  now(): string {
    return isoNow(this.nowMs());
  }

  /** The simulator's clock in milliseconds: comments and installation tokens are dated by it. */
  nowMs(): number {
    return Date.now() + this.clockOffsetMs;
  }

  advanceClock(ms: number): void {
    if (!(ms >= 0)) throw new Error('github-sim: the clock only moves forward');
    this.clockOffsetMs += ms;
  }

  nextId(
    kind:
      | 'user'
      | 'repo'
      | 'issue'
      | 'comment'
      | 'label'
      | 'reaction'
      | 'review'
      | 'checkRun'
      | 'checkSuite'
      | 'workflowRun'
      | 'workflow',
  ): number {
    const start = {
      user: 5_001,
      repo: 700_000_001,
      issue: 1_500_000_001,
      comment: 2_000_000_001,
      label: 6_000_000_001,
      reaction: 300_000_001,
      review: 1_800_000_001,
      // Actions' job (check run) ids are past 2^32 on github.com; the simulator's are too.
      checkRun: 20_000_000_001,
      checkSuite: 18_000_000_001,
      workflowRun: 9_000_000_001,
      workflow: 60_000_001,
    }[kind];
    const value = this.sequences.get(kind) ?? start;
    this.sequences.set(kind, value + 1);
    return value;
  }

  user(login: string): UserRecord | undefined {
    return this.users.get(login.toLowerCase());
  }

  /** The user with this login, added as a plain User when unknown. */
  ensureUser(login: string): UserRecord {
    return this.user(login) ?? this.addUser(login, 'User');
  }

  addUser(login: string, type: 'User' | 'Bot', id?: number): UserRecord {
    const existing = this.user(login);
    if (existing !== undefined) {
      if (id !== undefined && existing.id !== id)
        throw new Error(`github-sim: user ${login} already exists with id ${existing.id}`);
      return existing;
    }
    const record: UserRecord = { login, id: id ?? this.nextId('user'), type, createdAt: isoNow() };
    this.users.set(login.toLowerCase(), record);
    return record;
  }

  repo(owner: string, name: string): RepoRecord | undefined {
    return this.repos.get(`${owner}/${name}`.toLowerCase());
  }

  /** The repository, or an Error naming it (for the test-facing methods, which throw). */
  requireRepo(owner: string, name: string): RepoRecord {
    const repo = this.repo(owner, name);
    if (repo === undefined) throw new Error(`github-sim: no repository ${owner}/${name}`);
    return repo;
  }

  requireIssue(owner: string, name: string, number: number): IssueRecord {
    const issue = this.requireRepo(owner, name).issues.get(number);
    if (issue === undefined)
      throw new Error(`github-sim: no issue or pull request #${number} in ${owner}/${name}`);
    return issue;
  }

  nextNumber(repo: RepoRecord): number {
    return repo.issues.size + 1;
  }

  /** The repository's label with that name (case-insensitive), created with GitHub's default colour when new. */
  ensureLabel(repo: RepoRecord, name: string): LabelRecord {
    const existing = repo.labels.get(name.toLowerCase());
    if (existing !== undefined) return existing;
    const label: LabelRecord = {
      id: this.nextId('label'),
      name,
      color: 'ededed',
      description: null,
      isDefault: false,
    };
    repo.labels.set(name.toLowerCase(), label);
    return label;
  }

  addComment(issue: IssueRecord, user: UserRecord, body: string): CommentRecord {
    const now = this.now();
    const comment: CommentRecord = {
      id: this.nextId('comment'),
      repo: issue.repo,
      issueNumber: issue.number,
      user,
      body,
      edits: [body],
      reactions: [],
      createdAt: now,
      updatedAt: now,
    };
    issue.comments.push(comment);
    this.comments.set(comment.id, comment);
    issue.updatedAt = now;
    return comment;
  }

  editComment(comment: CommentRecord, body: string): void {
    comment.body = body;
    comment.edits.push(body);
    comment.updatedAt = this.now();
  }

  deleteComment(comment: CommentRecord): void {
    this.comments.delete(comment.id);
    const issue = comment.repo.issues.get(comment.issueNumber);
    if (issue === undefined) return;
    const at = issue.comments.indexOf(comment);
    if (at >= 0) issue.comments.splice(at, 1);
  }

  /** Opens or closes an issue or pull request, keeping closed_at, closed_by and state_reason in step. */
  setState(issue: IssueRecord, state: 'open' | 'closed', user: UserRecord): void {
    if (issue.state === state) return;
    issue.state = state;
    issue.updatedAt = isoNow();
    if (state === 'closed') {
      issue.closedAt = issue.updatedAt;
      issue.closedBy = user;
      issue.stateReason = issue.pull === null ? 'completed' : null;
    } else {
      issue.closedAt = null;
      issue.closedBy = null;
      issue.stateReason = issue.pull === null ? 'reopened' : null;
    }
  }

  /**
   * A review comment, in a review of its own (GitHub creates a COMMENTED review for each), or in
   * `inReview` (pulls/create-review's `comments[]`).
   */
  addReviewComment(
    issue: IssueRecord,
    user: UserRecord,
    body: string,
    where: {
      path: string;
      line: number | null;
      commitId: string;
      diffHunk: string;
      inReplyToId: number | null;
    },
    inReview?: ReviewRecord,
  ): ReviewCommentRecord {
    const pull = issue.pull;
    if (pull === null) throw new Error(`github-sim: #${issue.number} is not a pull request`);
    const now = this.now();
    const review: ReviewRecord = inReview ?? {
      id: this.nextId('review'),
      user,
      body: '',
      state: 'COMMENTED',
      commitId: where.commitId,
      submittedAt: now,
    };
    if (inReview === undefined) pull.reviews.push(review);
    const comment: ReviewCommentRecord = {
      id: this.nextId('comment'),
      repo: issue.repo,
      issueNumber: issue.number,
      user,
      body,
      edits: [body],
      reactions: [],
      createdAt: now,
      updatedAt: now,
      reviewId: review.id,
      ...where,
    };
    pull.reviewComments.push(comment);
    this.reviewComments.set(comment.id, comment);
    issue.updatedAt = now;
    return comment;
  }

  /** GitHub Actions' check suite for a commit, created (with its workflow run) when new. */
  ensureCheckSuite(
    repo: RepoRecord,
    headSha: string,
    headBranch: string | null,
    before: string | null,
  ): CheckSuiteRecord {
    const existing = repo.checkSuites.get(headSha);
    if (existing !== undefined) return existing;
    const now = isoNow();
    const suite: CheckSuiteRecord = {
      id: this.nextId('checkSuite'),
      workflowRunId: this.nextId('workflowRun'),
      headSha,
      headBranch,
      before,
      createdAt: now,
      updatedAt: now,
      workflow: this.ensureWorkflow(repo, 'CI'),
      completion: null,
    };
    repo.checkSuites.set(headSha, suite);
    return suite;
  }

  /**
   * The repository's workflow with that name, added when new (its file at `path`, by default
   * `.github/workflows/<name in kebab case>.yml`). Throws when `path` names another file than it has.
   */
  ensureWorkflow(repo: RepoRecord, name: string, path?: string): WorkflowRecord {
    const existing = repo.workflows.get(name);
    if (existing !== undefined) {
      if (path !== undefined && path !== existing.path)
        throw new Error(`github-sim: workflow ${name} of ${repo.name} is ${existing.path}, not ${path}`);
      return existing;
    }
    const file =
      name
        .toLowerCase()
        .replace(/[^a-z0-9]+/g, '-')
        .replace(/^-+|-+$/g, '') || 'workflow';
    const workflow: WorkflowRecord = {
      id: this.nextId('workflow'),
      name,
      path: path ?? `.github/workflows/${file}.yml`,
      createdAt: isoNow(),
    };
    repo.workflows.set(name, workflow);
    return workflow;
  }

  /** The check suite whose workflow run has this id. */
  workflowRun(repo: RepoRecord, id: number): CheckSuiteRecord | undefined {
    for (const suite of repo.checkSuites.values()) if (suite.workflowRunId === id) return suite;
    return undefined;
  }

  addCheckRun(run: CheckRunRecord): void {
    run.repo.checkRuns.push(run);
    this.checkRuns.set(run.id, run);
    run.suite.updatedAt = run.completedAt ?? run.startedAt;
    // A job added to a completed run is a re-run: the run's next attempt is under way.
    run.suite.completion = null;
  }

  /**
   * Completes the current attempt of a suite's workflow run (as `actor`, of `workflow` when given),
   * its conclusion rolled up from the latest attempt of each job. Throws for a run without jobs, with
   * a job not completed, or already completed.
   */
  completeWorkflowRun(suite: CheckSuiteRecord, actor: UserRecord, workflow?: WorkflowRecord): void {
    const runs = this.checkRunsOf(suite);
    const what = `the workflow run ${suite.workflowRunId} on ${suite.headSha}`;
    if (runs.length === 0) throw new Error(`github-sim: ${what} has no jobs`);
    if (suite.completion !== null) throw new Error(`github-sim: ${what} is already completed`);
    const jobs = latestJobs(runs);
    const running = jobs.filter((j) => j.status !== 'completed');
    if (running.length > 0)
      throw new Error(
        `github-sim: ${what} still has jobs running: ${running.map((j) => `${j.name} (${j.status})`).join(', ')}`,
      );
    const completedAt = isoNow();
    if (workflow !== undefined) suite.workflow = workflow;
    suite.completion = { conclusion: workflowRunConclusion(jobs), completedAt, actor };
    suite.updatedAt = completedAt;
  }

  /** The check runs of a suite (its workflow run's jobs, every attempt), in creation order. */
  checkRunsOf(suite: CheckSuiteRecord): CheckRunRecord[] {
    return [...this.checkRuns.values()].filter((r) => r.suite === suite).sort((a, b) => a.id - b.id);
  }

  /** Adds a reaction unless that user already reacted with that content; returns it and whether it is new. */
  react(
    list: ReactionRecord[],
    user: UserRecord,
    content: string,
  ): { reaction: ReactionRecord; created: boolean } {
    const existing = list.find((r) => r.user.id === user.id && r.content === content);
    if (existing !== undefined) return { reaction: existing, created: false };
    const reaction: ReactionRecord = { id: this.nextId('reaction'), content, user, createdAt: isoNow() };
    list.push(reaction);
    return { reaction, created: true };
  }

  /** The permission GitHub reports: an explicit grant, else admin for the owner, else read on public repos. */
  permission(repo: RepoRecord, login: string): RepoPermission {
    const explicit = repo.permissions.get(login.toLowerCase());
    if (explicit !== undefined) return explicit;
    if (repo.owner.login.toLowerCase() === login.toLowerCase()) return 'admin';
    return repo.private ? 'none' : 'read';
  }

  /** GitHub's author_association for a user's issue or comment in a repository of a user account. */
  association(repo: RepoRecord, user: UserRecord): 'OWNER' | 'COLLABORATOR' | 'NONE' {
    if (repo.owner.id === user.id) return 'OWNER';
    const explicit = repo.permissions.get(user.login.toLowerCase());
    return explicit !== undefined && explicit !== 'none' ? 'COLLABORATOR' : 'NONE';
  }
}

/**
 * Moves an open pull request's shas to its branches' current commits (the refs of its repository);
 * returns true when the head moved, remembering the previous head for `synchronize` events.
 */
export function syncPull(issue: IssueRecord, refs: ReadonlyMap<string, string>): boolean {
  const pull = issue.pull;
  if (pull === null || issue.state !== 'open') return false;
  const base = refs.get(`refs/heads/${pull.base.ref}`);
  if (base !== undefined) pull.base.sha = base;
  const headRefs = pull.headRepo === issue.repo ? refs : readRefsSync(pull.headRepo.bareDir);
  const head = headRefs.get(`refs/heads/${pull.head.ref}`);
  if (head === undefined || head === pull.head.sha) return false;
  pull.previousHeadSha = pull.head.sha;
  pull.head.sha = head;
  issue.updatedAt = isoNow();
  return true;
}

/**
 * The latest attempt of each job (check run name), in creation order: a re-run job replaces the
 * earlier attempts of its name, as `filter=latest` shows jobs.
 */
export function latestJobs(runs: readonly CheckRunRecord[]): CheckRunRecord[] {
  const latest = new Map<string, CheckRunRecord>();
  for (const run of runs) {
    const seen = latest.get(run.name);
    if (seen === undefined || run.id > seen.id) latest.set(run.name, run);
  }
  return runs.filter((r) => latest.get(r.name) === r);
}

/** Which attempt of its job (1 for the first run of that name in its suite) a check run is. */
export function jobAttempt(run: CheckRunRecord, suiteRuns: readonly CheckRunRecord[]): number {
  return suiteRuns.filter((r) => r.name === run.name && r.id <= run.id).length;
}

/** A workflow run's attempt: a re-run of any of its jobs makes the next one. */
export function runAttempt(suiteRuns: readonly CheckRunRecord[]): number {
  return Math.max(1, ...suiteRuns.map((r) => jobAttempt(r, suiteRuns)));
}

/** The run's conclusion from its latest jobs, by GitHub's rules (see WorkflowRunConclusion). */
export function workflowRunConclusion(jobs: readonly CheckRunRecord[]): WorkflowRunConclusion {
  const has = (...c: CheckConclusion[]) =>
    jobs.some((j) => j.conclusion !== null && c.includes(j.conclusion));
  if (has('failure', 'timed_out')) return 'failure';
  if (has('cancelled')) return 'cancelled';
  if (has('action_required')) return 'action_required';
  if (jobs.length > 0 && jobs.every((j) => j.conclusion === 'skipped')) return 'skipped';
  return 'success';
}

/** GitHub's timestamp format: ISO 8601 in UTC without milliseconds. */
export function isoNow(ms: number = Date.now()): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}
