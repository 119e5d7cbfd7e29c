import type { Logger } from 'pino';

export type RepoPermission = 'admin' | 'maintain' | 'write' | 'triage' | 'read' | 'none';

export type WebhookEvent =
  | 'issues'
  | 'issue_comment'
  | 'pull_request'
  | 'pull_request_review'
  | 'pull_request_review_comment'
  | 'check_run'
  | 'workflow_run';

export type CheckStatus = 'queued' | 'in_progress' | 'completed';

export type CheckConclusion =
  'success' | 'failure' | 'neutral' | 'cancelled' | 'skipped' | 'timed_out' | 'action_required';

/** An annotation of a check run: a line range of a file, with GitHub's levels. */
export interface SimCheckAnnotation {
  readonly path: string;
  readonly startLine: number;
  /** Default: `startLine`. */
  readonly endLine?: number;
  readonly level: 'notice' | 'warning' | 'failure';
  readonly message: string;
  readonly title?: string;
  readonly rawDetails?: string;
}

/** What the check's `output` says; each part null (GitHub's default) when not given. */
export interface SimCheckOutput {
  readonly title?: string | null;
  readonly summary?: string | null;
  readonly text?: string | null;
}

/** A check run as a GitHub Actions job reports it (see GitHubSim.addCheckRun). */
export interface CheckRunSpec {
  /** The full sha of a commit of the repository. */
  readonly headSha: string;
  /** The job's name, as Actions names its check run. */
  readonly name: string;
  /** Default `completed`. */
  readonly status?: CheckStatus;
  /** Required when the status is `completed`; not allowed otherwise. */
  readonly conclusion?: CheckConclusion;
  readonly output?: SimCheckOutput;
  readonly annotations?: readonly SimCheckAnnotation[];
  /** The job's raw log, served by actions/download-job-logs-for-workflow-run. Default empty. */
  readonly log?: string;
  /** Default: the job's page, `<sim>/<owner>/<repo>/actions/runs/<run id>/job/<id>`. */
  readonly detailsUrl?: string;
  /**
   * The check suite's `head_branch`. Default: the head branch of an open pull request whose head is
   * `headSha`, else a branch whose tip it is (the default branch first), else a branch containing it
   * (the default branch first), else null.
   */
  readonly headBranch?: string;
  /**
   * The webhook's sender: who triggered the workflow. Default: the author of an open pull request
   * whose head is `headSha`, else the repository's owner.
   */
  readonly sender?: string;
  /**
   * Default true: deliver `check_run.completed` (`check_run.created` for a run not completed yet).
   * False records the run only, e.g. for the history of the base branch.
   */
  readonly deliver?: boolean;
}

/**
 * A workflow run's conclusion, rolled up from its jobs (the latest attempt of each) as GitHub does:
 * `failure` when a job failed or timed out (even if others were cancelled, as fail-fast cancels
 * them), else `cancelled` when a job was cancelled (the run was: by a person, a concurrency group,
 * a timeout), else `action_required` when one is, else `skipped` when every job was, else `success`.
 */
export type WorkflowRunConclusion = 'success' | 'failure' | 'cancelled' | 'skipped' | 'action_required';

/** What completes the workflow run of a commit's Actions check suite (see GitHubSim.completeWorkflowRun). */
export interface WorkflowRunCompletionSpec {
  /** The full sha of a commit that has GitHub Actions check runs (addCheckRun), all completed. */
  readonly headSha: string;
  /**
   * The workflow's name (the `name:` of its file), as `on: workflow_run: { workflows: [...] }` names
   * it. Default: the name the run already has, `CI` until one is given.
   */
  readonly name?: string;
  /**
   * The workflow's file. Default: the one it has; `.github/workflows/<name in kebab case>.yml` for a
   * workflow new to the repository. Throws when the workflow of that name has another file.
   */
  readonly path?: string;
  /**
   * The webhook's sender and the run's actor: who triggered the workflow. Default: the author of an
   * open pull request whose head is `headSha`, else the repository's owner.
   */
  readonly sender?: string;
  /** Default true: deliver the payload as a signed `workflow_run` webhook. False only returns it. */
  readonly deliver?: boolean;
}

/**
 * A workflow's GITHUB_TOKEN permissions beyond the simulator's default set (contents, issues and
 * pull-requests write), by the API's names (`pull_requests`, not `pull-requests`); `none` removes one.
 */
export type WorkflowPermissions = Readonly<
  Partial<
    Record<
      | 'actions'
      | 'attestations'
      | 'checks'
      | 'contents'
      | 'deployments'
      | 'discussions'
      | 'issues'
      | 'packages'
      | 'pages'
      | 'pull_requests'
      | 'repository_projects'
      | 'security_events'
      | 'statuses',
      'read' | 'write' | 'none'
    >
  >
>;

export interface SimCheckRun {
  /** Also the Actions job id (actions/download-job-logs-for-workflow-run's `job_id`). */
  readonly id: number;
  readonly name: string;
  readonly headSha: string;
  readonly headBranch: string | null;
  readonly status: CheckStatus;
  readonly conclusion: CheckConclusion | null;
  readonly checkSuiteId: number;
  /** The workflow run the job belongs to (one per check suite here). */
  readonly workflowRunId: number;
  readonly annotations: readonly SimCheckAnnotation[];
  readonly log: string;
}

export interface GitHubSimulatorOptions {
  /** Lifetime of installation access tokens. Default 3600 (GitHub's one hour). */
  tokenTtlSeconds?: number;
  /** URL webhooks are POSTed to. Default: none; `deliver` throws until one is set. */
  webhookTarget?: string;
  /** Receives one debug line per request and git's stderr. Default: silent. */
  logger?: Logger;
  /** Default 0: a free port. */
  port?: number;
  /**
   * The App's permissions, over the simulator's default set (app.yml's: contents, issues and
   * pull_requests write, metadata, checks and actions read); `none` removes one. A test that creates
   * check runs gives `checks: 'write'`; one that protects branches `administration: 'write'`.
   */
  appPermissions?: Readonly<Record<string, 'read' | 'write' | 'admin' | 'none'>>;
  /** The app's slug and display name. Default `issue-agent-sim` / `Issue Agent (simulated)`. */
  app?: { slug?: string; name?: string };
  /**
   * When true, writes made through the API or git by the app (comments, labels, pull requests, pushes
   * to a pull request's branch) are followed by the webhook GitHub would send about them, as GitHub
   * does — with the bot as sender. Default false: only deliveries the test asks for are sent.
   */
  echoWebhooks?: boolean;
  /**
   * When true, every JSON response and every built webhook payload is checked against the OpenAPI
   * description's schema for it; mismatches go to `responseViolations`. Default true. Each schema is
   * compiled once per process, on first use (~100–200 ms each).
   */
  checkResponses?: boolean;
  /**
   * Git over HTTP is served at most this many bytes per second (fetches and clones), as a real
   * network would; default: as fast as loopback. For benchmarks whose question is the transfer.
   */
  gitBytesPerSecond?: number;
}

export interface SimUser {
  readonly login: string;
  readonly id: number;
  readonly type: 'User' | 'Bot';
}

export interface SimRepo {
  readonly owner: string;
  readonly name: string;
  readonly fullName: string;
  readonly id: number;
  readonly defaultBranch: string;
  readonly private: boolean;
  readonly cloneUrl: string;
  readonly bareRepoPath: string;
}

export interface SimReaction {
  readonly id: number;
  readonly content: string;
  readonly user: string;
}

export interface SimIssue {
  readonly number: number;
  readonly id: number;
  readonly title: string;
  readonly body: string;
  readonly user: string;
  readonly state: 'open' | 'closed';
  readonly labels: readonly string[];
  readonly isPullRequest: boolean;
  readonly reactions: readonly SimReaction[];
}

export interface SimComment {
  readonly id: number;
  readonly body: string;
  readonly user: string;
  /** Every body the comment has had, oldest first; the last one equals `body`. */
  readonly edits: readonly string[];
  readonly reactions: readonly SimReaction[];
  readonly createdAt: string;
  readonly updatedAt: string;
}

export interface SimReviewComment extends SimComment {
  readonly path: string;
  readonly line: number | null;
  readonly inReplyToId: number | null;
}

export interface SimPull {
  readonly number: number;
  readonly title: string;
  readonly body: string;
  readonly head: { readonly ref: string; readonly sha: string };
  readonly base: { readonly ref: string; readonly sha: string };
  readonly draft: boolean;
  readonly state: 'open' | 'closed';
  readonly merged: boolean;
  /** When it was merged (GitHub's timestamp format), or null. */
  readonly mergedAt: string | null;
  /** The commit the merge put on the base branch (merge or squash commit), or null. */
  readonly mergeCommitSha: string | null;
  readonly user: string;
  readonly labels: readonly string[];
}

export interface RecordedRequest {
  readonly method: string;
  /** The path without the query string, as sent (percent-encoding kept). */
  readonly path: string;
  readonly query: Readonly<Record<string, string>>;
  readonly headers: Readonly<Record<string, string>>;
  /** The request body as text; empty for git's binary pack bodies. */
  readonly body: string;
  /** 0 until the response has been sent. */
  readonly status: number;
  /** The OpenAPI operation the request matched; null for git and unknown routes. */
  readonly operationId: string | null;
  /** Arrival time, epoch ms. */
  readonly at: number;
}

/** A request the real GitHub would refuse or could not route: a client bug worth failing a test on. */
export interface Violation {
  readonly method: string;
  readonly path: string;
  readonly operationId: string | null;
  readonly errors: string;
}

/** A response or webhook payload of the simulator's own that does not match the OpenAPI description. */
export interface ResponseViolation {
  readonly what: string;
  readonly errors: string;
}

export type FaultSpec =
  | {
      readonly method?: string;
      /** The request path (no query), or the OpenAPI template it matches, or a pattern on the path. */
      readonly path: string | RegExp;
      readonly kind: 'status';
      readonly status: number;
      /** How many matching requests get the fault. Default 1. */
      readonly times?: number;
    }
  | {
      readonly method?: string;
      readonly path: string | RegExp;
      readonly kind: 'secondary-rate-limit';
      /** Sent as `retry-after`. Default 60, as GitHub's documentation suggests waiting a minute. */
      readonly retryAfterSeconds?: number;
      readonly times?: number;
    };

export interface WebhookParams {
  readonly owner: string;
  readonly repo: string;
  readonly issue?: number;
  readonly pull?: number;
  readonly sender: string;
  readonly label?: string;
  /**
   * For comment events: without `id` a new comment with this body is stored (by `sender`); with `id`
   * the stored comment is used, and for `edited` its body is changed to `body`.
   */
  readonly comment?: { readonly body: string; readonly id?: number };
  /** Review comment file path and line (pull_request_review_comment). Default: the first changed file, line 1. */
  readonly path?: string;
  readonly line?: number;
  /** The check run a `check_run` event is about (its id). */
  readonly checkRun?: number;
  /**
   * The workflow run a `workflow_run` event is about (its id: a check suite's `workflowRunId`). For
   * `completed`, a run not completed yet is first completed, its conclusion rolled up from its jobs.
   */
  readonly workflowRun?: number;
}

export interface Webhook {
  readonly name: string;
  /** The X-GitHub-Delivery uuid. */
  readonly id: string;
  readonly payload: Record<string, unknown>;
  /** The exact bytes that are signed and sent. */
  readonly body: string;
  readonly headers: Record<string, string>;
}

export interface DeliveryResult {
  /** The delivery's id (X-GitHub-Delivery). */
  readonly id: string;
  /** The receiver's status; 0 when it could not be reached (the error is then the body). */
  readonly status: number;
  readonly body: string;
  readonly ms: number;
}

export interface Delivery extends DeliveryResult {
  readonly name: string;
  readonly action: string | null;
}

export interface Push {
  readonly owner: string;
  readonly repo: string;
  /**
   * Who pushed: the login the token belongs to — the App's bot, `github-actions[bot]` for a
   * workflow's token, or the person whose user token it is.
   */
  readonly user: string;
  /** Full ref names whose value changed (created, updated or deleted). */
  readonly refs: readonly string[];
}

export interface SimApp {
  readonly id: number;
  readonly slug: string;
  readonly name: string;
  readonly privateKeyPem: string;
  readonly webhookSecret: string;
  readonly botLogin: string;
  readonly botUserId: number;
  readonly clientId: string;
  /** The App's OAuth client secret (its user authorization: sign-in with GitHub). */
  readonly clientSecret: string;
}

/** The App's user authorization (OAuth web flow); see oauth.ts. */
export interface SimOAuth {
  /** Whose browser session approves `GET /login/oauth/authorize` (null: nobody is signed in). */
  authorizeAs(login: string | null): void;
  /** redirect_uri must start with this (as GitHub checks the registered callback URL). */
  setCallbackUrl(url: string | null): void;
  /** A user token (`ghu_…`) for the login, without the browser flow. */
  issueToken(login: string): string;
  revoke(token: string): void;
  readonly authorizations: readonly {
    readonly clientId: string;
    readonly redirectUri: string;
    readonly login: string | null;
  }[];
  readonly exchanges: readonly {
    readonly code: string;
    readonly ok: boolean;
    readonly error: string | null;
  }[];
}

export interface GitHubSim {
  /** `http://127.0.0.1:<port>`: REST base URL and git base (`${url}/${owner}/${repo}.git`). */
  readonly url: string;
  readonly app: SimApp;
  /** Sign-in with GitHub: the authorize page, the code exchange and user tokens the REST API accepts. */
  readonly oauth: SimOAuth;
  /** The app's single installation; every created repository belongs to it. */
  readonly installationId: number;
  setWebhookTarget(url: string): void;
  /** Adds a user (or returns the existing one with that login). Unknown logins used elsewhere are added as Users. */
  addUser(u: { login: string; type?: 'User' | 'Bot'; id?: number }): SimUser;
  createRepo(r: {
    owner: string;
    name: string;
    sourceDir: string;
    defaultBranch?: string;
    private?: boolean;
  }): Promise<SimRepo>;
  setPermission(owner: string, repo: string, login: string, permission: RepoPermission): void;
  /**
   * A token like a workflow's GITHUB_TOKEN: limited to this repository, contents/issues/pull-requests
   * write (and metadata read), acting as `github-actions[bot]` (id 41898282) in the API and in git.
   * `permissions` are merged in, as a workflow whose `permissions:` block also lists them: without
   * `checks: read` and `actions: read` the checks and Actions endpoints answer 403, as on GitHub.
   */
  actionsToken(owner: string, repo: string, permissions?: WorkflowPermissions): string;
  /**
   * A file uploaded into an issue or comment of the repository (drag and drop in the editor): its
   * URL, `<sim>/user-attachments/assets/<uuid>`, as GitHub's markdown links it. Of a private
   * repository it is served only with a token that can read the repository, else 404, by a 302 to a
   * signed URL that lasts five minutes. `contentType` is served as given (not checked).
   */
  addAttachment(
    owner: string,
    repo: string,
    a: { readonly bytes: Uint8Array; readonly contentType: string; readonly uploader: string },
  ): string;
  createIssue(
    owner: string,
    repo: string,
    i: { title: string; body: string; author: string; labels?: string[] },
  ): SimIssue;
  /**
   * A delivery for the event, from the @octokit/webhooks-examples payload for that action with the
   * simulator's state in it. The state is first made to agree with the event: a `labeled` issue gets
   * the label, a `closed` one is closed, a comment without an id is stored, an `edited` one edited.
   */
  buildWebhook(event: WebhookEvent, action: string, p: WebhookParams): Webhook;
  deliver(webhook: Webhook, opts?: { secret?: string }): Promise<DeliveryResult>;
  /** POSTs exactly these headers and body to the webhook target, for malformed-delivery tests. */
  sendRaw(headers: Record<string, string>, body: string): Promise<{ status: number; body: string }>;
  /** Stores a comment by `author` and delivers issue_comment.created for it. */
  comment(
    owner: string,
    repo: string,
    issue: number,
    author: string,
    body: string,
  ): Promise<{ commentId: number; delivery: DeliveryResult }>;
  /** Edits a conversation or review comment as its author would (no webhook is sent). */
  editComment(owner: string, repo: string, commentId: number, body: string): void;
  /**
   * Moves the simulator's clock forward by `ms`. It dates comments (created_at, updated_at; a review
   * comment's review) and installation tokens (issued, expires_at, and the check on each request).
   * GitHub dates comments in whole seconds; a test that needs two of them in a known order, or a
   * token past its expiry, moves the clock rather than waiting for the time to pass.
   */
  advanceClock(ms: number): void;
  /** Labels the issue and delivers issues.labeled (pull_request.labeled for a pull request, as GitHub does). */
  label(owner: string, repo: string, issue: number, label: string, sender: string): Promise<DeliveryResult>;
  /** Faults are matched in the order injected and answered before routing and authentication. */
  injectFault(f: FaultSpec): void;
  /** Every request (REST and git), in arrival order. */
  readonly requests: readonly RecordedRequest[];
  readonly violations: readonly Violation[];
  readonly responseViolations: readonly ResponseViolation[];
  /** Every webhook delivered (by `deliver`, `comment`, `label` or an echo), in order. */
  readonly deliveries: readonly Delivery[];
  /** Pushes over HTTP that changed refs, recorded before git is told the push succeeded. */
  readonly pushes: readonly Push[];
  /** Bytes of git responses served (upload-pack: clones and fetches), since the start. */
  readonly gitBytesServed: number;
  issue(owner: string, repo: string, n: number): SimIssue;
  comments(owner: string, repo: string, issueOrPullNumber: number): SimComment[];
  reviewComments(owner: string, repo: string, pull: number): SimReviewComment[];
  reactions(owner: string, repo: string, target: number | { issue: number }): SimReaction[];
  /** Pull requests, with the shas of open ones read from their branches now. */
  pulls(owner: string, repo: string): SimPull[];
  /**
   * Opens a pull request by `author` from `head` (a branch of this repository) into `base` (default:
   * the default branch), as REST pulls/create does: same checks (it throws where that answers 422),
   * same record, `refs/pull/<n>/head` written. No webhook is sent.
   */
  openPull(
    owner: string,
    repo: string,
    p: { head: string; base?: string; title: string; body?: string; author: string },
  ): Promise<SimPull>;
  /**
   * Merges a pull request as `by`, as REST pulls/merge does (method default `merge`): a real merge or
   * squash commit on the base branch; closes the pull request and, on the default branch, the open
   * issues its body names with a closing keyword. Throws where pulls/merge refuses (not mergeable,
   * conflicts). No webhook is sent (buildWebhook + deliver `pull_request` `closed` reports it).
   */
  mergePull(
    owner: string,
    repo: string,
    number: number,
    o: { by: string; method?: 'merge' | 'squash' },
  ): Promise<{ sha: string }>;
  /**
   * Closes an issue (or pull request) as `by`, with state_reason `reason` for an issue (default
   * `completed`). No webhook is sent; an issue already closed is left as it is.
   */
  closeIssue(
    owner: string,
    repo: string,
    number: number,
    o: { by: string; reason?: 'completed' | 'not_planned' },
  ): SimIssue;
  /**
   * Records a check run made by GitHub Actions (app id 15368, `github-actions`) on a commit, with its
   * job log, and delivers `check_run.completed` about it (`check_run.created` when `status` is not
   * `completed`), its `pull_requests` being the open pull requests whose head is `headSha`. With
   * `deliver: false` nothing is sent and `delivery` is null. Throws for an unknown commit.
   */
  addCheckRun(
    owner: string,
    repo: string,
    r: CheckRunSpec & { readonly deliver: false },
  ): Promise<{ id: number; delivery: null }>;
  addCheckRun(
    owner: string,
    repo: string,
    r: CheckRunSpec & { readonly deliver?: true },
  ): Promise<{ id: number; delivery: DeliveryResult }>;
  addCheckRun(
    owner: string,
    repo: string,
    r: CheckRunSpec,
  ): Promise<{ id: number; delivery: DeliveryResult | null }>;
  /**
   * Completes a queued or in-progress check run (output, annotations and log are added to or
   * replace what it had) and delivers `check_run.completed`. Throws for a run already completed.
   */
  completeCheckRun(
    owner: string,
    repo: string,
    id: number,
    c: {
      conclusion: CheckConclusion;
      output?: SimCheckOutput;
      annotations?: readonly SimCheckAnnotation[];
      log?: string;
      sender?: string;
    },
  ): Promise<DeliveryResult>;
  /**
   * Completes the workflow run of the commit's GitHub Actions check suite (whose jobs are the suite's
   * check runs, every one completed), its conclusion rolled up from its jobs (WorkflowRunConclusion),
   * and returns the `workflow_run.completed` payload GitHub would send — what a workflow with
   * `on: workflow_run: { workflows: [<name>], types: [completed] }` reads as its event. Its
   * `pull_requests` are the open pull requests whose head is the commit; `event` is `pull_request`
   * when there is one, else `push`. Unless `deliver` is false it is also delivered, signed, as an
   * app subscribed to `workflow_run` receives it. Throws for a commit without Actions check runs, a
   * run with a job not completed, or one completed already (a job added since is a re-run: the next
   * attempt, which may be completed in turn).
   */
  completeWorkflowRun(
    owner: string,
    repo: string,
    c: WorkflowRunCompletionSpec & { readonly deliver: false },
  ): Promise<{ event: 'workflow_run'; payload: Record<string, unknown>; delivery: null }>;
  completeWorkflowRun(
    owner: string,
    repo: string,
    c: WorkflowRunCompletionSpec & { readonly deliver?: true },
  ): Promise<{ event: 'workflow_run'; payload: Record<string, unknown>; delivery: DeliveryResult }>;
  completeWorkflowRun(
    owner: string,
    repo: string,
    c: WorkflowRunCompletionSpec,
  ): Promise<{ event: 'workflow_run'; payload: Record<string, unknown>; delivery: DeliveryResult | null }>;
  /** The repository's check runs, oldest first. */
  checkRuns(owner: string, repo: string): SimCheckRun[];
  bareRepoPath(owner: string, repo: string): string;
  /**
   * The commit a branch points at now, or null when there is no such branch: read from the bare
   * repository's ref files, with no git process, so a test may poll it while a job pushes.
   */
  branchTip(owner: string, repo: string, branch: string): string | null;
  /** Resolves once `predicate` holds, polling every 20 ms; rejects with `what` in the message on timeout. */
  waitFor(
    predicate: () => boolean | Promise<boolean>,
    timeoutMs?: number,
    what?: string | (() => string),
  ): Promise<void>;
  /** Stops the server, ends git processes and deletes the temp dirs. Idempotent. */
  close(): Promise<void>;
}
