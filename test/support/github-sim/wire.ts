/**
 * GitHub's JSON shapes, built from the simulator's records. Field names, nesting and null-vs-absent
 * follow the OpenAPI description's response schemas (checked by spec.ts when `checkResponses` is on).
 * The simulator is both the API and the web host: API URLs are `${base}/repos/…`, web URLs
 * `${base}/${owner}/${repo}/…`, as on a GitHub Enterprise Server whose API lives at the root.
 */
import type { CommitInfo } from './git.js';
import {
  jobAttempt,
  runAttempt,
  type CheckAnnotationRecord,
  type CheckRunRecord,
  type CheckSuiteRecord,
  type CommentRecord,
  type IssueRecord,
  type LabelRecord,
  type ReactionRecord,
  type RepoRecord,
  type ReviewCommentRecord,
  type ReviewRecord,
  type UserRecord,
  type WorkflowRecord,
  type World,
} from './state.js';
import type { RepoPermission } from './types.js';

export type JsonObject = Record<string, unknown>;

export interface AppInfo {
  readonly id: number;
  readonly slug: string;
  readonly name: string;
  readonly clientId: string;
  readonly owner: UserRecord;
  readonly createdAt: string;
  readonly permissions: Readonly<Record<string, string>>;
  readonly events: readonly string[];
}

/** Numbers a change to a pull request: commits and line counts, computed from the bare repository. */
export interface DiffStats {
  readonly commits: number;
  readonly additions: number;
  readonly deletions: number;
  readonly changedFiles: number;
}

/** GitHub Actions as an app, as check runs and `performed_via_github_app` show it on github.com. */
export const ACTIONS_APP = {
  id: 15368,
  slug: 'github-actions',
  ownerLogin: 'github',
  ownerId: 9919,
} as const;

const ACTIONS_APP_PERMISSIONS: Readonly<Record<string, string>> = {
  actions: 'write',
  administration: 'read',
  checks: 'write',
  contents: 'write',
  deployments: 'write',
  discussions: 'write',
  issues: 'write',
  merge_queues: 'write',
  metadata: 'read',
  packages: 'write',
  pages: 'write',
  pull_requests: 'write',
  repository_hooks: 'write',
  repository_projects: 'write',
  security_events: 'write',
  statuses: 'write',
  vulnerability_alerts: 'read',
};

const ACTIONS_APP_EVENTS: readonly string[] = [
  'branch_protection_rule',
  'check_run',
  'check_suite',
  'create',
  'delete',
  'deployment',
  'deployment_status',
  'discussion',
  'discussion_comment',
  'fork',
  'gollum',
  'issues',
  'issue_comment',
  'label',
  'merge_group',
  'milestone',
  'page_build',
  'project',
  'project_card',
  'project_column',
  'public',
  'pull_request',
  'pull_request_review',
  'pull_request_review_comment',
  'push',
  'registry_package',
  'release',
  'repository',
  'repository_dispatch',
  'status',
  'watch',
  'workflow_dispatch',
  'workflow_run',
];

/** How GitHub rolls a suite's conclusions up: the first of these any run has. */
const SUITE_CONCLUSIONS = [
  'action_required',
  'cancelled',
  'timed_out',
  'failure',
  'neutral',
  'success',
  'skipped',
] as const;

const REACTIONS = ['+1', '-1', 'laugh', 'hooray', 'confused', 'heart', 'rocket', 'eyes'] as const;

/** GitHub's legacy global node id: base64 of `0<len>:<Type><id>`. */
export function nodeId(type: string, id: number): string {
  return Buffer.from(`0${type.length}:${type}${id}`).toString('base64');
}

export class Wire {
  constructor(
    readonly base: string,
    private readonly world: World,
    private readonly app: AppInfo,
  ) {}

  user(user: UserRecord): JsonObject {
    const api = `${this.base}/users/${encodeURIComponent(user.login)}`;
    const html =
      user.type === 'Bot' && user.login.endsWith('[bot]')
        ? `${this.base}/apps/${user.login.slice(0, -'[bot]'.length)}`
        : `${this.base}/${user.login}`;
    return {
      login: user.login,
      id: user.id,
      node_id: nodeId(user.type, user.id),
      avatar_url: `${this.base}/avatars/u/${user.id}?v=4`,
      gravatar_id: '',
      url: api,
      html_url: html,
      followers_url: `${api}/followers`,
      following_url: `${api}/following{/other_user}`,
      gists_url: `${api}/gists{/gist_id}`,
      starred_url: `${api}/starred{/owner}{/repo}`,
      subscriptions_url: `${api}/subscriptions`,
      organizations_url: `${api}/orgs`,
      repos_url: `${api}/repos`,
      events_url: `${api}/events{/privacy}`,
      received_events_url: `${api}/received_events`,
      type: user.type,
      user_view_type: 'public',
      site_admin: false,
    };
  }

  /** `GET /users/{username}`: the public-user shape. */
  publicUser(user: UserRecord): JsonObject {
    const owned = [...this.world.repos.values()].filter((r) => r.owner.id === user.id && !r.private);
    return {
      ...this.user(user),
      name: user.type === 'Bot' ? null : user.login,
      company: null,
      blog: '',
      location: null,
      email: null,
      hireable: null,
      bio: null,
      twitter_username: null,
      public_repos: owned.length,
      public_gists: 0,
      followers: 0,
      following: 0,
      created_at: user.createdAt,
      updated_at: user.createdAt,
    };
  }

  /** The full-repository shape, which is also a superset of the webhook `repository` object. */
  repository(repo: RepoRecord, permission?: RepoPermission, withParents = false): JsonObject {
    const full = `${repo.owner.login}/${repo.name}`;
    const api = `${this.base}/repos/${full}`;
    const host = new URL(this.base).host;
    const open = [...repo.issues.values()].filter((i) => i.state === 'open').length;
    const out: JsonObject = {
      id: repo.id,
      node_id: nodeId('Repository', repo.id),
      name: repo.name,
      full_name: full,
      private: repo.private,
      owner: this.user(repo.owner),
      html_url: `${this.base}/${full}`,
      description: null,
      fork: repo.parent !== null,
      url: api,
      archive_url: `${api}/{archive_format}{/ref}`,
      assignees_url: `${api}/assignees{/user}`,
      blobs_url: `${api}/git/blobs{/sha}`,
      branches_url: `${api}/branches{/branch}`,
      collaborators_url: `${api}/collaborators{/collaborator}`,
      comments_url: `${api}/comments{/number}`,
      commits_url: `${api}/commits{/sha}`,
      compare_url: `${api}/compare/{base}...{head}`,
      contents_url: `${api}/contents/{+path}`,
      contributors_url: `${api}/contributors`,
      deployments_url: `${api}/deployments`,
      downloads_url: `${api}/downloads`,
      events_url: `${api}/events`,
      forks_url: `${api}/forks`,
      git_commits_url: `${api}/git/commits{/sha}`,
      git_refs_url: `${api}/git/refs{/sha}`,
      git_tags_url: `${api}/git/tags{/sha}`,
      git_url: `git://${host}/${full}.git`,
      issue_comment_url: `${api}/issues/comments{/number}`,
      issue_events_url: `${api}/issues/events{/number}`,
      issues_url: `${api}/issues{/number}`,
      keys_url: `${api}/keys{/key_id}`,
      labels_url: `${api}/labels{/name}`,
      languages_url: `${api}/languages`,
      merges_url: `${api}/merges`,
      milestones_url: `${api}/milestones{/number}`,
      notifications_url: `${api}/notifications{?since,all,participating}`,
      pulls_url: `${api}/pulls{/number}`,
      releases_url: `${api}/releases{/id}`,
      ssh_url: `git@${new URL(this.base).hostname}:${full}.git`,
      stargazers_url: `${api}/stargazers`,
      statuses_url: `${api}/statuses/{sha}`,
      subscribers_url: `${api}/subscribers`,
      subscription_url: `${api}/subscription`,
      tags_url: `${api}/tags`,
      teams_url: `${api}/teams`,
      trees_url: `${api}/git/trees{/sha}`,
      clone_url: `${this.base}/${full}.git`,
      mirror_url: null,
      hooks_url: `${api}/hooks`,
      svn_url: `${this.base}/${full}`,
      homepage: null,
      language: null,
      forks_count: this.forksOf(repo),
      stargazers_count: 0,
      watchers_count: 0,
      size: 0,
      default_branch: repo.defaultBranch,
      open_issues_count: open,
      is_template: false,
      topics: [],
      has_issues: true,
      has_projects: true,
      has_wiki: true,
      has_pages: false,
      has_downloads: true,
      has_discussions: false,
      archived: false,
      disabled: false,
      visibility: repo.private ? 'private' : 'public',
      pushed_at: repo.pushedAt,
      created_at: repo.createdAt,
      updated_at: repo.pushedAt,
      allow_forking: true,
      web_commit_signoff_required: false,
      license: null,
      forks: this.forksOf(repo),
      open_issues: open,
      watchers: 0,
      network_count: 0,
      subscribers_count: 0,
    };
    if (permission !== undefined) out.permissions = permissionFlags(permission);
    if (withParents && repo.parent !== null) {
      let source = repo.parent;
      while (source.parent !== null) source = source.parent;
      out.parent = this.repository(repo.parent);
      out.source = this.repository(source);
    }
    return out;
  }

  private forksOf(repo: RepoRecord): number {
    return [...this.world.repos.values()].filter((r) => r.parent === repo).length;
  }

  label(repo: RepoRecord, label: LabelRecord): JsonObject {
    return {
      id: label.id,
      node_id: nodeId('Label', label.id),
      url: `${this.base}/repos/${repo.owner.login}/${repo.name}/labels/${encodeURIComponent(label.name)}`,
      name: label.name,
      color: label.color,
      default: label.isDefault,
      description: label.description,
    };
  }

  reaction(reaction: ReactionRecord): JsonObject {
    return {
      id: reaction.id,
      node_id: nodeId('Reaction', reaction.id),
      user: this.user(reaction.user),
      content: reaction.content,
      created_at: reaction.createdAt,
    };
  }

  /** The reaction-rollup object embedded in issues and comments. */
  rollup(url: string, reactions: readonly ReactionRecord[]): JsonObject {
    const out: JsonObject = { url, total_count: reactions.length };
    for (const content of REACTIONS) out[content] = reactions.filter((r) => r.content === content).length;
    return out;
  }

  /** The issue shape (REST and webhook); pull requests carry the `pull_request` key and `draft`. */
  issue(issue: IssueRecord): JsonObject {
    const { repo } = issue;
    const full = `${repo.owner.login}/${repo.name}`;
    const api = `${this.base}/repos/${full}/issues/${issue.number}`;
    const html = `${this.base}/${full}/${issue.pull === null ? 'issues' : 'pull'}/${issue.number}`;
    const out: JsonObject = {
      url: api,
      repository_url: `${this.base}/repos/${full}`,
      labels_url: `${api}/labels{/name}`,
      comments_url: `${api}/comments`,
      events_url: `${api}/events`,
      html_url: html,
      id: issue.id,
      node_id: nodeId(issue.pull === null ? 'Issue' : 'PullRequest', issue.id),
      number: issue.number,
      title: issue.title,
      user: this.user(issue.user),
      labels: issue.labels.map((l) => this.label(repo, l)),
      state: issue.state,
      locked: false,
      assignee: null,
      assignees: [],
      milestone: null,
      comments: issue.comments.length,
      created_at: issue.createdAt,
      updated_at: issue.updatedAt,
      closed_at: issue.closedAt,
      author_association: this.world.association(repo, issue.user),
      active_lock_reason: null,
      body: issue.body === '' ? null : issue.body,
      closed_by: issue.closedBy === null ? null : this.user(issue.closedBy),
      reactions: this.rollup(`${api}/reactions`, issue.reactions),
      timeline_url: `${api}/timeline`,
      performed_via_github_app: null,
      state_reason: issue.stateReason,
    };
    if (issue.pull !== null) {
      const pulls = `${this.base}/repos/${full}/pulls/${issue.number}`;
      out.draft = issue.pull.draft;
      out.pull_request = {
        url: pulls,
        html_url: html,
        diff_url: `${html}.diff`,
        patch_url: `${html}.patch`,
        merged_at: issue.pull.mergedAt,
      };
    }
    return out;
  }

  comment(comment: CommentRecord): JsonObject {
    const { repo } = comment;
    const full = `${repo.owner.login}/${repo.name}`;
    const issue = repo.issues.get(comment.issueNumber);
    const kind = issue?.pull === null ? 'issues' : 'pull';
    const url = `${this.base}/repos/${full}/issues/comments/${comment.id}`;
    return {
      url,
      html_url: `${this.base}/${full}/${kind}/${comment.issueNumber}#issuecomment-${comment.id}`,
      issue_url: `${this.base}/repos/${full}/issues/${comment.issueNumber}`,
      id: comment.id,
      node_id: nodeId('IssueComment', comment.id),
      user: this.user(comment.user),
      created_at: comment.createdAt,
      updated_at: comment.updatedAt,
      author_association: this.world.association(repo, comment.user),
      body: comment.body,
      reactions: this.rollup(`${url}/reactions`, comment.reactions),
      performed_via_github_app: null,
    };
  }

  /** The full pull-request shape (also the webhook `pull_request`); `simple` drops what list responses lack. */
  pull(issue: IssueRecord, stats: DiffStats, simple = false): JsonObject {
    const pull = issue.pull;
    if (pull === null) throw new Error(`github-sim: #${issue.number} is not a pull request`);
    const { repo } = issue;
    const full = `${repo.owner.login}/${repo.name}`;
    const api = `${this.base}/repos/${full}/pulls/${issue.number}`;
    const issueApi = `${this.base}/repos/${full}/issues/${issue.number}`;
    const html = `${this.base}/${full}/pull/${issue.number}`;
    const statuses = `${this.base}/repos/${full}/statuses/${pull.head.sha}`;
    const repository = this.repository(repo);
    const out: JsonObject = {
      url: api,
      id: this.pullId(issue),
      node_id: nodeId('PullRequest', this.pullId(issue)),
      html_url: html,
      diff_url: `${html}.diff`,
      patch_url: `${html}.patch`,
      issue_url: issueApi,
      commits_url: `${api}/commits`,
      review_comments_url: `${api}/comments`,
      review_comment_url: `${this.base}/repos/${full}/pulls/comments{/number}`,
      comments_url: `${issueApi}/comments`,
      statuses_url: statuses,
      number: issue.number,
      state: issue.state,
      locked: false,
      title: issue.title,
      user: this.user(issue.user),
      body: issue.body === '' ? null : issue.body,
      labels: issue.labels.map((l) => this.label(repo, l)),
      milestone: null,
      active_lock_reason: null,
      created_at: issue.createdAt,
      updated_at: issue.updatedAt,
      closed_at: issue.closedAt,
      merged_at: pull.mergedAt,
      merge_commit_sha: pull.mergeCommitSha,
      assignee: null,
      assignees: [],
      requested_reviewers: [],
      requested_teams: [],
      head: {
        label: `${pull.headRepo.owner.login}:${pull.head.ref}`,
        ref: pull.head.ref,
        sha: pull.head.sha,
        user: this.user(pull.headRepo.owner),
        repo: pull.headRepo === repo ? repository : this.repository(pull.headRepo),
      },
      base: {
        label: `${repo.owner.login}:${pull.base.ref}`,
        ref: pull.base.ref,
        sha: pull.base.sha,
        user: this.user(repo.owner),
        repo: repository,
      },
      _links: {
        self: { href: api },
        html: { href: html },
        issue: { href: issueApi },
        comments: { href: `${issueApi}/comments` },
        review_comments: { href: `${api}/comments` },
        review_comment: { href: `${this.base}/repos/${full}/pulls/comments{/number}` },
        commits: { href: `${api}/commits` },
        statuses: { href: statuses },
      },
      author_association: this.world.association(repo, issue.user),
      auto_merge: null,
      draft: pull.draft,
    };
    if (simple) return out;
    return {
      ...out,
      merged: pull.merged,
      mergeable: issue.state === 'open' ? true : null,
      rebaseable: issue.state === 'open' ? true : null,
      mergeable_state: issue.state === 'open' ? (pull.draft ? 'draft' : 'clean') : 'unknown',
      merged_by: pull.mergedBy === null ? null : this.user(pull.mergedBy),
      comments: issue.comments.length,
      review_comments: pull.reviewComments.length,
      maintainer_can_modify: pull.maintainerCanModify,
      commits: stats.commits,
      additions: stats.additions,
      deletions: stats.deletions,
      changed_files: stats.changedFiles,
    };
  }

  reviewComment(issue: IssueRecord, comment: ReviewCommentRecord): JsonObject {
    const { repo } = issue;
    const full = `${repo.owner.login}/${repo.name}`;
    const url = `${this.base}/repos/${full}/pulls/comments/${comment.id}`;
    const html = `${this.base}/${full}/pull/${issue.number}#discussion_r${comment.id}`;
    const pullUrl = `${this.base}/repos/${full}/pulls/${issue.number}`;
    const out: JsonObject = {
      url,
      pull_request_review_id: comment.reviewId,
      id: comment.id,
      node_id: nodeId('PullRequestReviewComment', comment.id),
      diff_hunk: comment.diffHunk,
      path: comment.path,
      position: comment.line,
      original_position: comment.line,
      commit_id: comment.commitId,
      original_commit_id: comment.commitId,
      user: this.user(comment.user),
      body: comment.body,
      created_at: comment.createdAt,
      updated_at: comment.updatedAt,
      html_url: html,
      pull_request_url: pullUrl,
      author_association: this.world.association(repo, comment.user),
      _links: { self: { href: url }, html: { href: html }, pull_request: { href: pullUrl } },
      reactions: this.rollup(`${url}/reactions`, comment.reactions),
      start_line: null,
      original_start_line: null,
      start_side: null,
      line: comment.line,
      original_line: comment.line,
      side: 'RIGHT',
      subject_type: comment.line === null ? 'file' : 'line',
    };
    if (comment.inReplyToId !== null) out.in_reply_to_id = comment.inReplyToId;
    // A comment on a whole file has no line: GitHub leaves the line and position keys out.
    if (comment.line === null)
      for (const key of ['position', 'original_position', 'line', 'original_line'])
        Reflect.deleteProperty(out, key);
    return out;
  }

  review(issue: IssueRecord, review: ReviewRecord): JsonObject {
    const { repo } = issue;
    const full = `${repo.owner.login}/${repo.name}`;
    const html = `${this.base}/${full}/pull/${issue.number}#pullrequestreview-${review.id}`;
    const pullUrl = `${this.base}/repos/${full}/pulls/${issue.number}`;
    return {
      id: review.id,
      node_id: nodeId('PullRequestReview', review.id),
      user: this.user(review.user),
      body: review.body,
      state: review.state,
      html_url: html,
      pull_request_url: pullUrl,
      author_association: this.world.association(repo, review.user),
      _links: { html: { href: html }, pull_request: { href: pullUrl } },
      ...(review.submittedAt === null ? {} : { submitted_at: review.submittedAt }),
      commit_id: review.commitId,
    };
  }

  /** The GitHub Actions app, the author of every check run here. */
  actionsApp(): JsonObject {
    const owner = this.user({
      login: ACTIONS_APP.ownerLogin,
      id: ACTIONS_APP.ownerId,
      type: 'User',
      createdAt: '2008-05-11T04:37:31Z',
    });
    return {
      id: ACTIONS_APP.id,
      slug: ACTIONS_APP.slug,
      node_id: nodeId('App', ACTIONS_APP.id),
      owner: { ...owner, node_id: nodeId('Organization', ACTIONS_APP.ownerId), type: 'Organization' },
      name: 'GitHub Actions',
      description: 'Automate your workflow from idea to production',
      external_url: 'https://help.github.com/en/actions',
      html_url: `${this.base}/apps/${ACTIONS_APP.slug}`,
      created_at: '2018-07-30T09:30:17Z',
      updated_at: '2024-04-10T20:33:16Z',
      permissions: { ...ACTIONS_APP_PERMISSIONS },
      events: [...ACTIONS_APP_EVENTS],
    };
  }

  /** GitHub's "Pull Request Minimal", as check runs and check suites list their pull requests. */
  pullMinimal(issue: IssueRecord): JsonObject {
    const pull = issue.pull;
    if (pull === null) throw new Error(`github-sim: #${issue.number} is not a pull request`);
    const { repo } = issue;
    const api = `${this.base}/repos/${repo.owner.login}/${repo.name}`;
    const repoRef = { id: repo.id, url: api, name: repo.name };
    const headRepo = pull.headRepo;
    const headRef = {
      id: headRepo.id,
      url: `${this.base}/repos/${headRepo.owner.login}/${headRepo.name}`,
      name: headRepo.name,
    };
    return {
      url: `${api}/pulls/${issue.number}`,
      id: this.pullId(issue),
      number: issue.number,
      head: { ref: pull.head.ref, sha: pull.head.sha, repo: headRef },
      base: { ref: pull.base.ref, sha: pull.base.sha, repo: repoRef },
    };
  }

  /**
   * A check run (checks/get, checks/list-for-ref); `suite` replaces the `{ id }` of REST responses
   * with the full check suite webhooks carry. `pulls` are the open pull requests at its head sha.
   */
  checkRun(run: CheckRunRecord, pulls: readonly IssueRecord[], suite?: JsonObject): JsonObject {
    const { repo } = run;
    const full = `${repo.owner.login}/${repo.name}`;
    const url = `${this.base}/repos/${full}/check-runs/${run.id}`;
    const html =
      run.app === 'actions'
        ? `${this.base}/${full}/actions/runs/${run.suite.workflowRunId}/job/${run.id}`
        : `${this.base}/${full}/runs/${run.id}`;
    return {
      id: run.id,
      name: run.name,
      node_id: nodeId('CheckRun', run.id),
      head_sha: run.suite.headSha,
      external_id: run.externalId,
      url,
      html_url: html,
      details_url: run.detailsUrl ?? html,
      status: run.status,
      conclusion: run.conclusion,
      started_at: run.startedAt,
      completed_at: run.completedAt,
      output: {
        title: run.output.title,
        summary: run.output.summary,
        text: run.output.text,
        annotations_count: run.annotations.length,
        annotations_url: `${url}/annotations`,
      },
      check_suite: suite ?? { id: run.suite.id },
      app: run.app === 'actions' ? this.actionsApp() : this.integration(),
      pull_requests: pulls.map((p) => this.pullMinimal(p)),
    };
  }

  /** The check suite as webhooks carry it inside `check_run`, its status rolled up from `runs`. */
  checkSuite(
    repo: RepoRecord,
    suite: CheckSuiteRecord,
    runs: readonly CheckRunRecord[],
    pulls: readonly IssueRecord[],
  ): JsonObject {
    const completed = runs.length > 0 && runs.every((r) => r.status === 'completed');
    const status = completed
      ? 'completed'
      : runs.some((r) => r.status === 'in_progress')
        ? 'in_progress'
        : 'queued';
    const conclusion = completed
      ? (SUITE_CONCLUSIONS.find((c) => runs.some((r) => r.conclusion === c)) ?? null)
      : null;
    return {
      id: suite.id,
      node_id: nodeId('CheckSuite', suite.id),
      head_branch: suite.headBranch,
      head_sha: suite.headSha,
      status,
      conclusion,
      url: `${this.base}/repos/${repo.owner.login}/${repo.name}/check-suites/${suite.id}`,
      before: suite.before,
      after: suite.headSha,
      pull_requests: pulls.map((p) => this.pullMinimal(p)),
      app: runs.some((r) => r.app === 'app') ? this.integration() : this.actionsApp(),
      created_at: suite.createdAt,
      updated_at: suite.updatedAt,
      repository: this.repository(repo),
    };
  }

  checkAnnotation(run: CheckRunRecord, annotation: CheckAnnotationRecord): JsonObject {
    const { repo } = run;
    const path = annotation.path.split('/').map(encodeURIComponent).join('/');
    return {
      path: annotation.path,
      start_line: annotation.startLine,
      end_line: annotation.endLine,
      start_column: null,
      end_column: null,
      annotation_level: annotation.level,
      title: annotation.title,
      message: annotation.message,
      raw_details: annotation.rawDetails,
      blob_href: `${this.base}/${repo.owner.login}/${repo.name}/blob/${run.suite.headSha}/${path}`,
    };
  }

  /** A workflow (the webhook's `workflow`, the Actions API's workflow shape). */
  workflow(repo: RepoRecord, workflow: WorkflowRecord): JsonObject {
    const full = `${repo.owner.login}/${repo.name}`;
    return {
      id: workflow.id,
      node_id: nodeId('Workflow', workflow.id),
      name: workflow.name,
      path: workflow.path,
      state: 'active',
      created_at: workflow.createdAt,
      updated_at: workflow.createdAt,
      url: `${this.base}/repos/${full}/actions/workflows/${workflow.id}`,
      html_url: `${this.base}/${full}/blob/${repo.defaultBranch}/${workflow.path}`,
      badge_url: `${this.base}/${full}/workflows/${encodeURIComponent(workflow.name)}/badge.svg`,
    };
  }

  /**
   * A suite's workflow run (actions/get-workflow-run, the webhook's `workflow_run`); `runs` are the
   * suite's check runs (its jobs, every attempt), `pulls` the open pull requests at its head: they
   * make its `event` (`pull_request` when there is one, else `push`) and, unless `excludePulls`, its
   * `pull_requests`. Before it completes its status is `queued` while every job is, else `in_progress`.
   */
  workflowRun(
    repo: RepoRecord,
    suite: CheckSuiteRecord,
    runs: readonly CheckRunRecord[],
    pulls: readonly IssueRecord[],
    head: CommitInfo,
    excludePulls = false,
  ): JsonObject {
    const api = `${this.base}/repos/${repo.owner.login}/${repo.name}`;
    const url = `${api}/actions/runs/${suite.workflowRunId}`;
    const attempt = runAttempt(runs);
    const status =
      suite.completion !== null
        ? 'completed'
        : runs.every((r) => r.status === 'queued')
          ? 'queued'
          : 'in_progress';
    const actor = this.user(suite.completion?.actor ?? pulls[0]?.user ?? repo.owner);
    const [pull] = pulls;
    const repository = this.repository(repo);
    return {
      id: suite.workflowRunId,
      name: suite.workflow.name,
      node_id: nodeId('WorkflowRun', suite.workflowRunId),
      check_suite_id: suite.id,
      check_suite_node_id: nodeId('CheckSuite', suite.id),
      head_branch: suite.headBranch,
      head_sha: suite.headSha,
      path: suite.workflow.path,
      display_title: pull?.title ?? head.message.split('\n')[0] ?? '',
      run_number: [...repo.checkSuites.values()].filter(
        (s) => s.workflow === suite.workflow && s.id <= suite.id,
      ).length,
      event: pull === undefined ? 'push' : 'pull_request',
      status,
      conclusion: suite.completion?.conclusion ?? null,
      workflow_id: suite.workflow.id,
      url,
      html_url: `${this.base}/${repo.owner.login}/${repo.name}/actions/runs/${suite.workflowRunId}`,
      pull_requests: excludePulls ? [] : pulls.map((p) => this.pullMinimal(p)),
      created_at: suite.createdAt,
      updated_at: suite.updatedAt,
      actor,
      triggering_actor: actor,
      run_attempt: attempt,
      referenced_workflows: [],
      run_started_at: suite.createdAt,
      jobs_url: `${url}/jobs`,
      logs_url: `${url}/logs`,
      check_suite_url: `${api}/check-suites/${suite.id}`,
      artifacts_url: `${url}/artifacts`,
      cancel_url: `${url}/cancel`,
      rerun_url: `${url}/rerun`,
      previous_attempt_url: attempt > 1 ? `${url}/attempts/${attempt - 1}` : null,
      workflow_url: `${api}/actions/workflows/${suite.workflow.id}`,
      head_commit: {
        id: head.sha,
        tree_id: head.treeId,
        message: head.message,
        timestamp: head.timestamp,
        author: { ...head.author },
        committer: { ...head.committer },
      },
      repository,
      head_repository: repository,
    };
  }

  /** A check run as the Actions job it is (actions/list-jobs-for-workflow-run); `suiteRuns` as in workflowRun. */
  job(run: CheckRunRecord, suiteRuns: readonly CheckRunRecord[]): JsonObject {
    const { repo, suite } = run;
    const api = `${this.base}/repos/${repo.owner.login}/${repo.name}`;
    return {
      id: run.id,
      run_id: suite.workflowRunId,
      workflow_name: suite.workflow.name,
      head_branch: suite.headBranch,
      run_url: `${api}/actions/runs/${suite.workflowRunId}`,
      run_attempt: jobAttempt(run, suiteRuns),
      node_id: nodeId('CheckRun', run.id),
      head_sha: suite.headSha,
      url: `${api}/actions/jobs/${run.id}`,
      html_url: `${this.base}/${repo.owner.login}/${repo.name}/actions/runs/${suite.workflowRunId}/job/${run.id}`,
      status: run.status,
      conclusion: run.conclusion,
      created_at: run.startedAt,
      started_at: run.startedAt,
      completed_at: run.completedAt,
      name: run.name,
      // The job's work as one step; a job no runner has picked up yet has none.
      steps:
        run.status === 'queued'
          ? []
          : [
              {
                name: run.name,
                status: run.status,
                conclusion: run.conclusion,
                number: 1,
                started_at: run.startedAt,
                completed_at: run.completedAt,
              },
            ],
      check_run_url: `${api}/check-runs/${run.id}`,
      labels: ['ubuntu-latest'],
      runner_id: null,
      runner_name: null,
      runner_group_id: null,
      runner_group_name: null,
    };
  }

  /** `GET /app`: the integration shape. */
  integration(): JsonObject {
    return {
      id: this.app.id,
      slug: this.app.slug,
      client_id: this.app.clientId,
      node_id: nodeId('Integration', this.app.id),
      owner: this.user(this.app.owner),
      name: this.app.name,
      description: '',
      external_url: `${this.base}/apps/${this.app.slug}`,
      html_url: `${this.base}/apps/${this.app.slug}`,
      created_at: this.app.createdAt,
      updated_at: this.app.createdAt,
      permissions: { ...this.app.permissions },
      events: [...this.app.events],
      installations_count: 1,
    };
  }

  installation(id: number, account: UserRecord): JsonObject {
    return {
      id,
      account: this.user(account),
      repository_selection: 'all',
      access_tokens_url: `${this.base}/app/installations/${id}/access_tokens`,
      repositories_url: `${this.base}/installation/repositories`,
      html_url: `${this.base}/settings/installations/${id}`,
      app_id: this.app.id,
      client_id: this.app.clientId,
      app_slug: this.app.slug,
      target_id: account.id,
      target_type: account.type === 'Bot' ? 'User' : account.type,
      permissions: { ...this.app.permissions },
      events: [...this.app.events],
      created_at: this.app.createdAt,
      updated_at: this.app.createdAt,
      single_file_name: null,
      has_multiple_single_files: false,
      single_file_paths: [],
      suspended_by: null,
      suspended_at: null,
    };
  }

  /** Pull requests have an id of their own, distinct from the issue id GitHub also gives them. */
  private pullId(issue: IssueRecord): number {
    return issue.id + 400_000_000;
  }
}

/** The `permissions` flags of a repository as seen by a user with that role. */
export function permissionFlags(permission: RepoPermission): Record<string, boolean> {
  const rank = ['none', 'read', 'triage', 'write', 'maintain', 'admin'].indexOf(permission);
  return { admin: rank >= 5, maintain: rank >= 4, push: rank >= 3, triage: rank >= 2, pull: rank >= 1 };
}
