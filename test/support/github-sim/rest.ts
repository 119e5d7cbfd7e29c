/**
 * The REST operations the simulator implements, keyed by OpenAPI operationId. Each declares the
 * credential it needs and the installation permission GitHub checks; the server does routing, body
 * validation, authentication and faults before a handler runs.
 */
import type { InstallationToken } from './auth.js';
import { HttpError, notFound, validationFailed } from './errors.js';
import { listTree, readBlob, readCommit, resolveCommit, treeEntry, type TreeEntry } from './git.js';
import { mergePull, openPull } from './pulls.js';
import type { RefUpdate } from './protection.js';
import type { Pusher } from './push-rules.js';
import type { CommitSigner } from './signing.js';
import type { Operation } from './spec.js';
import {
  isoNow,
  latestJobs,
  type CheckRunRecord,
  type CheckSuiteRecord,
  type IssueRecord,
  type RepoRecord,
  type UserRecord,
  type World,
} from './state.js';
import type { RepoPermission, WebhookEvent, WebhookParams } from './types.js';
import {
  ACTIONS_APP,
  permissionFlags,
  type AppInfo,
  type DiffStats,
  type JsonObject,
  type Wire,
} from './wire.js';

export type Caller =
  | { readonly kind: 'anonymous' }
  | { readonly kind: 'app' }
  | { readonly kind: 'installation'; readonly token: InstallationToken; readonly user: UserRecord }
  /** A user access token from the OAuth web flow (`ghu_…`), acting as that user. */
  | { readonly kind: 'user'; readonly user: UserRecord };

export interface Reply {
  readonly status: number;
  /** JSON-serialised unless `raw` is set. */
  readonly body?: unknown;
  readonly raw?: { readonly contentType: string; readonly data: Buffer; readonly mediaType: string };
  readonly headers?: Readonly<Record<string, string>>;
}

export { HttpError } from './errors.js';
export { ISSUES_READ, PULLS_READ, PULLS_WRITE, CONTENTS_WRITE, CHECKS_READ, METADATA };

export interface HandlerContext {
  readonly operation: Operation;
  readonly params: Readonly<Record<string, string>>;
  readonly query: Readonly<Record<string, string>>;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: unknown;
  readonly caller: Caller;
}

/** What handlers need from the simulator. */
export interface Host {
  readonly url: string;
  readonly world: World;
  readonly wire: Wire;
  readonly app: AppInfo;
  readonly installationId: number;
  readonly rateLimit: () => { limit: number; used: number; remaining: number; reset: number };
  issueToken(
    repositoryIds: ReadonlySet<number> | null,
    permissions: Readonly<Record<string, string>>,
  ): InstallationToken;
  /**
   * Brings an open pull request's head and base shas in line with its branches, and its
   * `refs/pull/<n>/head` in line with its head.
   */
  refreshPull(issue: IssueRecord): Promise<void>;
  /** Runs `fn` holding the repository's push lock: no push over HTTP starts or ends meanwhile. */
  exclusive<T>(repo: RepoRecord, fn: () => Promise<T>): Promise<T>;
  diffStats(issue: IssueRecord): Promise<DiffStats>;
  /** Sends the webhook GitHub would send about an API write, when the simulator echoes them. */
  echo(event: WebhookEvent, action: string, p: WebhookParams): void;
  /**
   * A short-lived URL, on the simulator and needing no credentials, that serves `text` as
   * text/plain: where GitHub redirects a job-log download to (a signed blob-storage URL there).
   */
  signedLogUrl(text: string): string;
  /** Signs the commits the git database API makes, and verifies any commit. */
  readonly signer: CommitSigner;
  /** GitHub's refusal of ref updates (a fork the caller may not write, protected-branch rules), or null. */
  refuseRefUpdates(repo: RepoRecord, pusher: Pusher, updates: readonly RefUpdate[]): Promise<string[] | null>;
  /** Records ref changes made through the API as a push by `pusher` would be (pushes, PR heads, webhooks). */
  refsChanged(
    repo: RepoRecord,
    before: ReadonlyMap<string, string>,
    after: ReadonlyMap<string, string>,
    pusher: Pusher,
  ): Promise<void>;
  /** Creates a fork of `source` owned by `owner` named `name`. */
  fork(
    source: RepoRecord,
    owner: UserRecord,
    name: string,
    defaultBranchOnly: boolean,
    installed: boolean,
  ): Promise<RepoRecord>;
}

type Level = 'read' | 'write';
export type Need = readonly (readonly [permission: string, level: Level])[];

export interface Handler {
  readonly auth: 'app' | 'installation' | 'any';
  /** Installation permissions of which the token needs at least one (any-of). */
  readonly needs?: Need;
  /** Whether user tokens may call it (otherwise they get 403, as most App-only routes here). */
  readonly users?: boolean;
  run(ctx: HandlerContext, host: Host): Reply | Promise<Reply>;
}

const PERMISSION_RANK: Readonly<Record<string, number>> = { read: 1, write: 2, admin: 3 };

/** Whether a token's permissions satisfy any of the needs. */
export function allows(token: InstallationToken, need: Need): boolean {
  if (need.length === 0) return true;
  return need.some(([permission, level]) => {
    const granted = token.permissions[permission];
    return granted !== undefined && (PERMISSION_RANK[granted] ?? 0) >= (PERMISSION_RANK[level] ?? 0);
  });
}

const ISSUES_READ: Need = [
  ['issues', 'read'],
  ['pull_requests', 'read'],
];
const ISSUES_WRITE: Need = [
  ['issues', 'write'],
  ['pull_requests', 'write'],
];
const PULLS_READ: Need = [['pull_requests', 'read']];
const PULLS_WRITE: Need = [['pull_requests', 'write']];
const CONTENTS_WRITE: Need = [['contents', 'write']];
const CHECKS_READ: Need = [['checks', 'read']];
const ACTIONS_READ: Need = [['actions', 'read']];
const METADATA: Need = [['metadata', 'read']];

export function ok(body: unknown, status = 200, headers?: Record<string, string>): Reply {
  return headers === undefined ? { status, body } : { status, body, headers };
}

/** The repository named by the path, if the caller may see it (404 otherwise, as GitHub hides repos). */
export function repoOf(ctx: HandlerContext, host: Host): RepoRecord {
  const repo = host.world.repo(ctx.params.owner ?? '', ctx.params.repo ?? '');
  if (repo === undefined) throw notFound();
  if (ctx.caller.kind === 'installation') {
    const ids = ctx.caller.token.repositoryIds;
    if (ids !== null && !ids.has(repo.id)) throw notFound();
    // A repository outside the installation (a person's fork): public ones can be read, nothing more.
    if (!repo.installed && (repo.private || ctx.operation.method !== 'GET')) throw notFound();
  }
  // A user sees a private repository only with some role on it; GitHub answers 404, not 403.
  if (ctx.caller.kind === 'user' && host.world.permission(repo, ctx.caller.user.login) === 'none')
    throw notFound();
  return repo;
}

export function numberParam(ctx: HandlerContext, name: string): number {
  const value = ctx.params[name] ?? '';
  if (!/^\d+$/.test(value)) throw notFound();
  return Number(value);
}

function issueOf(ctx: HandlerContext, host: Host): IssueRecord {
  const issue = repoOf(ctx, host).issues.get(numberParam(ctx, 'issue_number'));
  if (issue === undefined) throw notFound();
  return issue;
}

export function pullOf(ctx: HandlerContext, host: Host): IssueRecord {
  const issue = repoOf(ctx, host).issues.get(numberParam(ctx, 'pull_number'));
  if (issue?.pull == null) throw notFound();
  return issue;
}

function commentOf(ctx: HandlerContext, host: Host) {
  const repo = repoOf(ctx, host);
  const comment = host.world.comments.get(numberParam(ctx, 'comment_id'));
  if (comment?.repo !== repo) throw notFound();
  return comment;
}

/** The user a write is attributed to: the token's actor (the app's bot) or the user of a user token. */
export function actor(ctx: HandlerContext): UserRecord {
  if (ctx.caller.kind === 'user') return ctx.caller.user;
  if (ctx.caller.kind !== 'installation') throw new HttpError(401, 'Bad credentials');
  return ctx.caller.user;
}

/** A member of a request body (or of an item in one). Bodies have passed the operation's schema. */
export function field(body: unknown, name: string): unknown {
  return typeof body === 'object' && body !== null ? (body as Record<string, unknown>)[name] : undefined;
}

export function text(body: unknown, name: string): string | undefined {
  const value = field(body, name);
  return typeof value === 'string' ? value : undefined;
}

export function flag(body: unknown, name: string): boolean | undefined {
  const value = field(body, name);
  return typeof value === 'boolean' ? value : undefined;
}

function openOrClosed(body: unknown): 'open' | 'closed' | undefined {
  const value = field(body, 'state');
  return value === 'open' || value === 'closed' ? value : undefined;
}

export function list(body: unknown, name: string): unknown[] | undefined {
  const value = field(body, name);
  return Array.isArray(value) ? (value as unknown[]) : undefined;
}

/**
 * One page of a list and its Link header, with GitHub's defaults (30 per page, at most 100) and
 * links that keep the request's other query parameters.
 */
export function paginate<T>(
  items: readonly T[],
  ctx: HandlerContext,
  host: Host,
  path: string,
): { page: T[]; headers: Record<string, string> } {
  const perPage = Math.min(Math.max(Number(ctx.query.per_page ?? 30) || 30, 1), 100);
  const page = Math.max(Number(ctx.query.page ?? 1) || 1, 1);
  const last = Math.max(Math.ceil(items.length / perPage), 1);
  const link = (n: number): string => {
    const params = new URLSearchParams({ ...ctx.query, per_page: String(perPage), page: String(n) });
    return `<${host.url}${path}?${params.toString()}>`;
  };
  const links: string[] = [];
  if (page > 1) links.push(`${link(page - 1)}; rel="prev"`);
  if (page < last) links.push(`${link(page + 1)}; rel="next"`, `${link(last)}; rel="last"`);
  if (page > 1) links.push(`${link(1)}; rel="first"`);
  return {
    page: items.slice((page - 1) * perPage, page * perPage),
    headers: links.length > 0 ? { link: links.join(', ') } : {},
  };
}

/** The `permission` GitHub reports beside the fine-grained `role_name`. */
const LEGACY_PERMISSION: Readonly<Record<RepoPermission, string>> = {
  admin: 'admin',
  maintain: 'write',
  write: 'write',
  triage: 'read',
  read: 'read',
  none: 'none',
};

const RAW_MEDIA = /application\/vnd\.github(?:\.v3)?\.raw/;

async function getContent(ctx: HandlerContext, host: Host): Promise<Reply> {
  const repo = repoOf(ctx, host);
  const ref = ctx.query.ref ?? repo.defaultBranch;
  const commit = await resolveCommit(repo.bareDir, ref);
  if (commit === null) throw new HttpError(404, `No commit found for the ref ${ref}`);
  const path = (ctx.params.path ?? '').replace(/^\/+|\/+$/g, '');
  const entry = await treeEntry(repo.bareDir, commit, path);
  if (entry === null) throw notFound();
  const full = `${repo.owner.login}/${repo.name}`;
  const describe = (e: TreeEntry): JsonObject => {
    const self = `${host.url}/repos/${full}/contents/${e.path}?ref=${encodeURIComponent(ref)}`;
    const kind = e.type === 'tree' ? 'tree' : 'blob';
    const gitUrl = `${host.url}/repos/${full}/git/${e.type === 'tree' ? 'trees' : 'blobs'}/${e.sha}`;
    const html = `${host.url}/${full}/${kind}/${ref}/${e.path}`;
    const type =
      e.type === 'tree'
        ? 'dir'
        : e.type === 'commit'
          ? 'submodule'
          : e.mode === '120000'
            ? 'symlink'
            : 'file';
    return {
      type,
      size: e.size,
      name: e.path.split('/').pop() ?? e.path,
      path: e.path,
      sha: e.sha,
      url: self,
      git_url: e.type === 'commit' ? null : gitUrl,
      html_url: e.type === 'commit' ? null : html,
      download_url: type === 'file' ? `${host.url}/${full}/raw/${ref}/${e.path}` : null,
      _links: { self, git: e.type === 'commit' ? null : gitUrl, html: e.type === 'commit' ? null : html },
    };
  };
  if (entry.type === 'tree') {
    // A directory is JSON whatever the Accept header; the config plugin relies on that to tell it apart.
    return ok((await listTree(repo.bareDir, commit, path)).map(describe));
  }
  if (entry.type === 'commit') return ok({ ...describe(entry), submodule_git_url: '' });
  const data = await readBlob(repo.bareDir, entry.sha);
  const accept = ctx.headers.accept ?? '';
  const raw = RAW_MEDIA.exec(accept);
  if (raw !== null) {
    return {
      status: 200,
      raw: { contentType: `${raw[0]}; charset=utf-8`, data, mediaType: 'github.v3; param=raw' },
    };
  }
  if (entry.mode === '120000') return ok({ ...describe(entry), target: data.toString('utf8') });
  const base64 = data.toString('base64').replace(/.{60}/g, '$&\n');
  return ok({
    ...describe(entry),
    encoding: 'base64',
    content: base64.endsWith('\n') ? base64 : `${base64}\n`,
  });
}

function labelNames(body: unknown): string[] {
  const list: unknown = Array.isArray(body)
    ? body
    : typeof body === 'string'
      ? [body]
      : field(body, 'labels');
  const items = Array.isArray(list) ? (list as unknown[]) : typeof list === 'string' ? [list] : [];
  return items.flatMap((item) => {
    if (typeof item === 'string') return [item];
    const name = field(item, 'name');
    return typeof name === 'string' ? [name] : [];
  });
}

function emitLabel(
  host: Host,
  issue: IssueRecord,
  action: 'labeled' | 'unlabeled',
  label: string,
  sender: UserRecord,
): void {
  const p = { owner: issue.repo.owner.login, repo: issue.repo.name, sender: sender.login, label };
  if (issue.pull === null) host.echo('issues', action, { ...p, issue: issue.number });
  else host.echo('pull_request', action, { ...p, pull: issue.number });
}

async function pullBody(issue: IssueRecord, host: Host): Promise<JsonObject> {
  await host.refreshPull(issue);
  return host.wire.pull(issue, await host.diffStats(issue));
}

async function createPull(ctx: HandlerContext, host: Host): Promise<Reply> {
  const repo = repoOf(ctx, host);
  const user = actor(ctx);
  const head = text(ctx.body, 'head') ?? '';
  const title = text(ctx.body, 'title');
  const [headOwner, headRef] = head.includes(':')
    ? (head.split(':', 2) as [string, string])
    : [repo.owner.login, head];
  if (field(ctx.body, 'issue') !== undefined)
    throw validationFailed([
      {
        resource: 'PullRequest',
        code: 'custom',
        message: 'github-sim: converting an issue is not simulated',
      },
    ]);
  if (title === undefined)
    throw validationFailed([{ resource: 'PullRequest', field: 'title', code: 'missing_field' }]);
  const { issue, stats } = await openPull(host, repo, user, {
    headOwner,
    headRef,
    baseRef: text(ctx.body, 'base') ?? '',
    title,
    body: text(ctx.body, 'body') ?? '',
    draft: flag(ctx.body, 'draft') ?? false,
    maintainerCanModify: flag(ctx.body, 'maintainer_can_modify') ?? true,
  });
  const body = host.wire.pull(issue, stats);
  host.echo('pull_request', 'opened', {
    owner: repo.owner.login,
    repo: repo.name,
    pull: issue.number,
    sender: user.login,
  });
  return ok(body, 201, { location: String(body.url) });
}

async function mergePullRequest(ctx: HandlerContext, host: Host): Promise<Reply> {
  const issue = pullOf(ctx, host);
  const user = actor(ctx);
  const method = text(ctx.body, 'merge_method') ?? 'merge';
  if (method !== 'merge' && method !== 'squash' && method !== 'rebase')
    throw validationFailed([{ resource: 'PullRequest', field: 'merge_method', code: 'invalid' }]);
  const { sha, closedIssues } = await mergePull(host, issue, user, {
    method,
    sha: text(ctx.body, 'sha'),
    commitTitle: text(ctx.body, 'commit_title'),
    commitMessage: text(ctx.body, 'commit_message'),
  });
  const { repo } = issue;
  host.echo('pull_request', 'closed', {
    owner: repo.owner.login,
    repo: repo.name,
    pull: issue.number,
    sender: user.login,
  });
  for (const closed of closedIssues)
    host.echo('issues', 'closed', {
      owner: repo.owner.login,
      repo: repo.name,
      issue: closed.number,
      sender: user.login,
    });
  return ok({ sha, merged: true, message: 'Pull Request successfully merged' });
}

async function updatePull(ctx: HandlerContext, host: Host): Promise<Reply> {
  const issue = pullOf(ctx, host);
  const pull = issue.pull;
  if (pull === null) throw notFound();
  const user = actor(ctx);
  // A person edits a pull request they opened, or one in a repository they may write to.
  if (
    ctx.caller.kind === 'user' &&
    issue.user !== user &&
    !['admin', 'maintain', 'write'].includes(host.world.permission(issue.repo, user.login))
  )
    throw new HttpError(403, 'Resource not accessible by integration');
  const title = text(ctx.body, 'title');
  const body = text(ctx.body, 'body');
  const state = openOrClosed(ctx.body);
  const base = text(ctx.body, 'base');
  const canModify = flag(ctx.body, 'maintainer_can_modify');
  if (base !== undefined) {
    const sha = await resolveCommit(issue.repo.bareDir, `refs/heads/${base}`);
    if (sha === null) throw validationFailed([{ resource: 'PullRequest', field: 'base', code: 'invalid' }]);
    pull.base = { ref: base, sha };
  }
  const edited =
    (title !== undefined && title !== issue.title) || (body !== undefined && body !== issue.body);
  if (title !== undefined) issue.title = title;
  if (body !== undefined) issue.body = body;
  if (canModify !== undefined && pull.headRepo !== issue.repo) pull.maintainerCanModify = canModify;
  const p = { owner: issue.repo.owner.login, repo: issue.repo.name, pull: issue.number, sender: user.login };
  if (state !== undefined && state !== issue.state) {
    if (state === 'open') {
      const clash = [...issue.repo.issues.values()].some(
        (i) =>
          i !== issue &&
          i.state === 'open' &&
          i.pull?.head.ref === pull.head.ref &&
          i.pull.headRepo === pull.headRepo &&
          i.pull.base.ref === pull.base.ref,
      );
      if (clash)
        throw validationFailed([
          {
            resource: 'PullRequest',
            code: 'custom',
            message: `A pull request already exists for ${pull.headRepo.owner.login}:${pull.head.ref}.`,
          },
        ]);
    }
    host.world.setState(issue, state, user);
    host.echo('pull_request', state === 'closed' ? 'closed' : 'reopened', p);
  }
  issue.updatedAt = isoNow();
  if (edited) host.echo('pull_request', 'edited', p);
  return ok(await pullBody(issue, host));
}

function sortedPulls(repo: RepoRecord, ctx: HandlerContext): IssueRecord[] {
  const state = ctx.query.state ?? 'open';
  const head = ctx.query.head;
  const base = ctx.query.base;
  const byCreation = ctx.query.sort === undefined || ctx.query.sort === 'created';
  const direction = ctx.query.direction ?? (byCreation ? 'desc' : 'asc');
  const pulls = [...repo.issues.values()].filter((i) => {
    if (i.pull === null) return false;
    if (state !== 'all' && i.state !== state) return false;
    if (base !== undefined && i.pull.base.ref !== base) return false;
    if (head !== undefined) {
      const [owner, ref] = head.includes(':') ? head.split(':', 2) : [head, undefined];
      if (owner.toLowerCase() !== i.pull.headRepo.owner.login.toLowerCase()) return false;
      if (ref !== undefined && i.pull.head.ref !== ref) return false;
    }
    return true;
  });
  const key =
    ctx.query.sort === 'updated'
      ? (i: IssueRecord) => i.updatedAt
      : (i: IssueRecord) => String(i.number).padStart(12, '0');
  pulls.sort((a, b) => key(a).localeCompare(key(b)));
  return direction === 'asc' ? pulls : pulls.reverse();
}

/**
 * GET /repos/{owner}/{repo}/issues: issues and pull requests (as GitHub lists them), filtered by
 * state, labels (all of them), creator, since (updated at or after), and GitHub's milestone and
 * assignee filters as far as they apply here (nothing has either); sorted by created, updated or
 * comments, newest first by default.
 */
function listedIssues(repo: RepoRecord, ctx: HandlerContext): IssueRecord[] {
  const q = ctx.query;
  const invalid = (name: string): HttpError =>
    validationFailed([{ resource: 'Issue', field: name, code: 'invalid' }]);
  const state = q.state ?? 'open';
  if (state !== 'open' && state !== 'closed' && state !== 'all') throw invalid('state');
  const sort = q.sort ?? 'created';
  if (sort !== 'created' && sort !== 'updated' && sort !== 'comments') throw invalid('sort');
  const direction = q.direction ?? 'desc';
  if (direction !== 'asc' && direction !== 'desc') throw invalid('direction');
  let since: number | undefined;
  if (q.since !== undefined) {
    since = Date.parse(q.since);
    if (Number.isNaN(since)) throw invalid('since');
  }
  const labels = (q.labels ?? '')
    .split(',')
    .map((l) => l.trim().toLowerCase())
    .filter((l) => l !== '');
  const creator = q.creator?.toLowerCase();
  // Nothing in the simulator has a milestone or an assignee: only `none` (or no filter) keeps issues.
  const unassigned = (value: string | undefined) => value === undefined || value.toLowerCase() === 'none';
  const mention =
    q.mentioned === undefined
      ? null
      : new RegExp(`(?<![\\w@])@${q.mentioned.replace(/[^\w-]/g, '')}(?![\\w-])`, 'i');
  const issues = [...repo.issues.values()].filter((i) => {
    if (state !== 'all' && i.state !== state) return false;
    if (since !== undefined && Date.parse(i.updatedAt) < since) return false;
    if (creator !== undefined && i.user.login.toLowerCase() !== creator) return false;
    if (!labels.every((name) => i.labels.some((l) => l.name.toLowerCase() === name))) return false;
    if (!unassigned(q.milestone) || !unassigned(q.assignee)) return false;
    if (mention !== null && !mention.test(i.body) && !i.comments.some((c) => mention.test(c.body)))
      return false;
    return true;
  });
  const key = (i: IssueRecord): number =>
    sort === 'updated'
      ? Date.parse(i.updatedAt)
      : sort === 'comments'
        ? i.comments.length
        : Date.parse(i.createdAt);
  // Ties (timestamps are in whole seconds) go by number, which follows creation.
  issues.sort((a, b) => key(a) - key(b) || a.number - b.number);
  return direction === 'asc' ? issues : issues.reverse();
}

/** Create and list reactions on a target (an issue or a comment): the same rules for both. */
function reactionHandlers(
  name: 'issue' | 'issue-comment',
  target: (
    ctx: Parameters<Handler['run']>[0],
    host: Parameters<Handler['run']>[1],
  ) => { reactions: Parameters<Host['world']['react']>[0]; path: string },
): Record<string, Handler> {
  return {
    [`reactions/create-for-${name}`]: {
      auth: 'installation',
      needs: ISSUES_WRITE,
      run(ctx, host) {
        const { reaction, created } = host.world.react(
          target(ctx, host).reactions,
          actor(ctx),
          text(ctx.body, 'content') ?? '',
        );
        return ok(host.wire.reaction(reaction), created ? 201 : 200);
      },
    },
    [`reactions/list-for-${name}`]: {
      auth: 'installation',
      needs: ISSUES_READ,
      run(ctx, host) {
        const { reactions, path } = target(ctx, host);
        const list = reactions.filter(
          (r) => ctx.query.content === undefined || r.content === ctx.query.content,
        );
        const { page, headers } = paginate(list, ctx, host, path);
        return ok(
          page.map((r) => host.wire.reaction(r)),
          200,
          headers,
        );
      },
    },
  };
}

/** The check run named by `check_run_id` (or `job_id`: an Actions job is its check run), in the repository. */
function checkRunOf(ctx: HandlerContext, host: Host, param: 'check_run_id' | 'job_id'): CheckRunRecord {
  const repo = repoOf(ctx, host);
  const run = host.world.checkRuns.get(numberParam(ctx, param));
  if (run?.repo !== repo) throw notFound();
  return run;
}

/** The workflow run named by `run_id` (a check suite's), in the repository. */
function workflowRunOf(ctx: HandlerContext, host: Host): { repo: RepoRecord; suite: CheckSuiteRecord } {
  const repo = repoOf(ctx, host);
  const suite = host.world.workflowRun(repo, numberParam(ctx, 'run_id'));
  if (suite === undefined) throw notFound();
  return { repo, suite };
}

/** The open pull requests whose head is `sha`, with their shas read from their branches first. */
export async function openPullsAt(repo: RepoRecord, sha: string, host: Host): Promise<IssueRecord[]> {
  const open = [...repo.issues.values()].filter((i) => i.pull !== null && i.state === 'open');
  for (const issue of open) await host.refreshPull(issue);
  return open.filter((i) => i.pull?.head.sha === sha).sort((a, b) => a.number - b.number);
}

/**
 * GET /repos/{owner}/{repo}/commits/{ref}/check-runs: the runs on the commit a sha, branch or tag
 * names; `filter=latest` (the default) keeps the most recent run of each name, then `check_name`,
 * `status` and `app_id` narrow the list; newest first.
 */
async function listCheckRunsForRef(ctx: HandlerContext, host: Host): Promise<Reply> {
  const repo = repoOf(ctx, host);
  const ref = ctx.params.ref ?? '';
  const q = ctx.query;
  const filter = q.filter ?? 'latest';
  if (filter !== 'latest' && filter !== 'all')
    throw validationFailed([{ resource: 'CheckRun', field: 'filter', code: 'invalid' }]);
  const status = q.status;
  if (status !== undefined && status !== 'queued' && status !== 'in_progress' && status !== 'completed')
    throw validationFailed([{ resource: 'CheckRun', field: 'status', code: 'invalid' }]);
  const sha = await resolveCommit(repo.bareDir, ref);
  if (sha === null) throw new HttpError(422, `No commit found for SHA: ${ref}`);
  let runs = repo.checkRuns.filter((r) => r.suite.headSha === sha);
  if (filter === 'latest') {
    const latest = new Map<string, CheckRunRecord>();
    for (const run of runs) {
      const seen = latest.get(run.name);
      if (seen === undefined || run.id > seen.id) latest.set(run.name, run);
    }
    runs = runs.filter((r) => latest.get(r.name) === r);
  }
  runs = runs
    .filter(
      (r) =>
        (q.check_name === undefined || r.name === q.check_name) &&
        (status === undefined || r.status === status) &&
        (q.app_id === undefined || Number(q.app_id) === (r.app === 'actions' ? ACTIONS_APP.id : host.app.id)),
    )
    .sort((a, b) => b.id - a.id);
  // The ref in one segment (a branch's slashes encoded), as Octokit sends it and the router needs.
  const path = `/repos/${repo.owner.login}/${repo.name}/commits/${encodeURIComponent(ref)}/check-runs`;
  const { page, headers } = paginate(runs, ctx, host, path);
  const pulls = page.length === 0 ? [] : await openPullsAt(repo, sha, host);
  return ok(
    { total_count: runs.length, check_runs: page.map((r) => host.wire.checkRun(r, pulls)) },
    200,
    headers,
  );
}

export const HANDLERS: Readonly<Record<string, Handler>> = {
  'apps/create-installation-access-token': {
    auth: 'app',
    run(ctx, host) {
      if (numberParam(ctx, 'installation_id') !== host.installationId) throw notFound();
      const names = list(ctx.body, 'repositories')?.map(String);
      const ids = list(ctx.body, 'repository_ids')?.map(Number);
      let selected: Set<number> | null = null;
      if (names !== undefined || ids !== undefined) {
        selected = new Set<number>();
        const repos = [...host.world.repos.values()].filter((r) => r.installed);
        for (const name of names ?? []) {
          const repo = repos.find((r) => r.name.toLowerCase() === name.toLowerCase());
          if (repo === undefined)
            throw new HttpError(
              422,
              'There is at least one repository that does not exist or is not accessible to the parent installation.',
            );
          selected.add(repo.id);
        }
        for (const id of ids ?? []) {
          if (!repos.some((r) => r.id === id))
            throw new HttpError(
              422,
              'There is at least one repository that does not exist or is not accessible to the parent installation.',
            );
          selected.add(id);
        }
      }
      const requested = field(ctx.body, 'permissions');
      // A token asked for with permissions gets those (and metadata, which every token has) only.
      const permissions: Record<string, string> =
        typeof requested === 'object' && requested !== null
          ? { metadata: 'read' }
          : { ...host.app.permissions };
      if (typeof requested === 'object' && requested !== null) {
        for (const [name, value] of Object.entries(requested)) {
          const level = String(value);
          const granted = host.app.permissions[name];
          if (granted === undefined || (PERMISSION_RANK[level] ?? 9) > (PERMISSION_RANK[granted] ?? 0))
            throw new HttpError(422, 'The permissions requested are not granted to this installation.');
          permissions[name] = level;
        }
      }
      const token = host.issueToken(selected, permissions);
      const body: JsonObject = {
        token: token.token,
        expires_at: isoNow(token.expiresAt),
        permissions: token.permissions,
        repository_selection: selected === null ? 'all' : 'selected',
      };
      if (selected !== null)
        body.repositories = [...host.world.repos.values()]
          .filter((r) => selected.has(r.id))
          .map((r) => host.wire.repository(r));
      return ok(body, 201);
    },
  },
  'apps/get-authenticated': { auth: 'app', run: (_ctx, host) => ok(host.wire.integration()) },
  'apps/get-installation': {
    auth: 'app',
    run(ctx, host) {
      if (numberParam(ctx, 'installation_id') !== host.installationId) throw notFound();
      return ok(host.wire.installation(host.installationId, accountOf(host)));
    },
  },
  'apps/list-installations': {
    auth: 'app',
    run: (_ctx, host) => ok([host.wire.installation(host.installationId, accountOf(host))]),
  },
  'apps/get-repo-installation': {
    auth: 'app',
    run(ctx, host) {
      const repo = host.world.repo(ctx.params.owner ?? '', ctx.params.repo ?? '');
      if (repo === undefined) throw notFound();
      return ok(host.wire.installation(host.installationId, repo.owner));
    },
  },
  'users/get-by-username': {
    auth: 'any',
    run(ctx, host) {
      const user = host.world.user(ctx.params.username ?? '');
      if (user === undefined) throw notFound();
      return ok(host.wire.publicUser(user));
    },
  },
  'rate-limit/get': {
    auth: 'any',
    run(_ctx, host) {
      const core = host.rateLimit();
      const window = (limit: number) => ({ limit, used: 0, remaining: limit, reset: core.reset });
      return ok({
        resources: {
          core,
          search: window(30),
          graphql: window(5000),
          integration_manifest: window(5000),
          code_search: window(10),
        },
        rate: core,
      });
    },
  },
  'repos/get': {
    auth: 'installation',
    needs: METADATA,
    users: true,
    run(ctx, host) {
      const repo = repoOf(ctx, host);
      // For a user the permissions are theirs; for the App's installation, what the simulator has always sent.
      const permission =
        ctx.caller.kind === 'user' ? host.world.permission(repo, ctx.caller.user.login) : 'write';
      return ok(host.wire.repository(repo, permission));
    },
  },
  'users/get-authenticated': {
    auth: 'any',
    users: true,
    run(ctx, host) {
      if (ctx.caller.kind === 'anonymous') throw new HttpError(401, 'Requires authentication');
      if (ctx.caller.kind !== 'user') throw new HttpError(403, 'Resource not accessible by integration');
      return ok(host.wire.publicUser(ctx.caller.user));
    },
  },
  'repos/get-content': { auth: 'installation', needs: [['contents', 'read']], run: getContent },
  'repos/get-collaborator-permission-level': {
    auth: 'installation',
    needs: METADATA,
    run(ctx, host) {
      const repo = repoOf(ctx, host);
      const user = host.world.user(ctx.params.username ?? '');
      if (user === undefined) throw notFound();
      const role = host.world.permission(repo, user.login);
      return ok({
        permission: LEGACY_PERMISSION[role],
        role_name: role,
        user: { ...host.wire.user(user), permissions: permissionFlags(role), role_name: role },
      });
    },
  },
  'issues/list-for-repo': {
    auth: 'installation',
    needs: ISSUES_READ,
    run(ctx, host) {
      const repo = repoOf(ctx, host);
      const { page, headers } = paginate(
        listedIssues(repo, ctx),
        ctx,
        host,
        `/repos/${repo.owner.login}/${repo.name}/issues`,
      );
      return ok(
        page.map((i) => host.wire.issue(i)),
        200,
        headers,
      );
    },
  },
  'issues/get': {
    auth: 'installation',
    needs: ISSUES_READ,
    run: (ctx, host) => ok(host.wire.issue(issueOf(ctx, host))),
  },
  'issues/update': {
    auth: 'installation',
    needs: ISSUES_WRITE,
    run(ctx, host) {
      const issue = issueOf(ctx, host);
      const user = actor(ctx);
      const title = text(ctx.body, 'title');
      const body = field(ctx.body, 'body');
      const state = openOrClosed(ctx.body);
      if (title !== undefined) issue.title = title;
      if (body !== undefined) issue.body = typeof body === 'string' ? body : '';
      if (field(ctx.body, 'labels') !== undefined) {
        issue.labels.splice(
          0,
          issue.labels.length,
          ...labelNames(ctx.body).map((n) => host.world.ensureLabel(issue.repo, n)),
        );
      }
      if (state !== undefined) {
        host.world.setState(issue, state, user);
        const reason = field(ctx.body, 'state_reason');
        if (state === 'closed' && issue.pull === null && (reason === 'not_planned' || reason === 'completed'))
          issue.stateReason = reason;
      }
      issue.updatedAt = isoNow();
      return ok(host.wire.issue(issue));
    },
  },
  'issues/list-comments': {
    auth: 'installation',
    needs: ISSUES_READ,
    run(ctx, host) {
      const issue = issueOf(ctx, host);
      const since = ctx.query.since;
      const all = issue.comments.filter((c) => since === undefined || c.updatedAt >= since);
      const { page, headers } = paginate(
        all,
        ctx,
        host,
        `/repos/${issue.repo.owner.login}/${issue.repo.name}/issues/${issue.number}/comments`,
      );
      return ok(
        page.map((c) => host.wire.comment(c)),
        200,
        headers,
      );
    },
  },
  'issues/create-comment': {
    auth: 'installation',
    needs: ISSUES_WRITE,
    run(ctx, host) {
      const issue = issueOf(ctx, host);
      const user = actor(ctx);
      const comment = host.world.addComment(issue, user, text(ctx.body, 'body') ?? '');
      const body = host.wire.comment(comment);
      host.echo('issue_comment', 'created', {
        owner: issue.repo.owner.login,
        repo: issue.repo.name,
        issue: issue.number,
        sender: user.login,
        comment: { id: comment.id, body: comment.body },
      });
      return ok(body, 201, { location: String(body.url) });
    },
  },
  'issues/get-comment': {
    auth: 'installation',
    needs: ISSUES_READ,
    run: (ctx, host) => ok(host.wire.comment(commentOf(ctx, host))),
  },
  'issues/update-comment': {
    auth: 'installation',
    needs: ISSUES_WRITE,
    run(ctx, host) {
      const comment = commentOf(ctx, host);
      const user = actor(ctx);
      const body = text(ctx.body, 'body') ?? '';
      if (body !== comment.body) host.world.editComment(comment, body);
      host.echo('issue_comment', 'edited', {
        owner: comment.repo.owner.login,
        repo: comment.repo.name,
        issue: comment.issueNumber,
        sender: user.login,
        comment: { id: comment.id, body },
      });
      return ok(host.wire.comment(comment));
    },
  },
  'issues/delete-comment': {
    auth: 'installation',
    needs: ISSUES_WRITE,
    run(ctx, host) {
      const comment = commentOf(ctx, host);
      const user = actor(ctx);
      host.echo('issue_comment', 'deleted', {
        owner: comment.repo.owner.login,
        repo: comment.repo.name,
        issue: comment.issueNumber,
        sender: user.login,
        comment: { id: comment.id, body: comment.body },
      });
      host.world.deleteComment(comment);
      return { status: 204 };
    },
  },
  ...reactionHandlers('issue', (ctx, host) => {
    const issue = issueOf(ctx, host);
    return {
      reactions: issue.reactions,
      path: `/repos/${issue.repo.owner.login}/${issue.repo.name}/issues/${issue.number}/reactions`,
    };
  }),
  ...reactionHandlers('issue-comment', (ctx, host) => {
    const comment = commentOf(ctx, host);
    return {
      reactions: comment.reactions,
      path: `/repos/${comment.repo.owner.login}/${comment.repo.name}/issues/comments/${comment.id}/reactions`,
    };
  }),
  'issues/list-labels-on-issue': {
    auth: 'installation',
    needs: ISSUES_READ,
    run(ctx, host) {
      const issue = issueOf(ctx, host);
      const { page, headers } = paginate(
        issue.labels,
        ctx,
        host,
        `/repos/${issue.repo.owner.login}/${issue.repo.name}/issues/${issue.number}/labels`,
      );
      return ok(
        page.map((l) => host.wire.label(issue.repo, l)),
        200,
        headers,
      );
    },
  },
  'issues/add-labels': {
    auth: 'installation',
    needs: ISSUES_WRITE,
    run(ctx, host) {
      const issue = issueOf(ctx, host);
      const user = actor(ctx);
      for (const name of labelNames(ctx.body)) {
        const label = host.world.ensureLabel(issue.repo, name);
        if (issue.labels.some((l) => l.id === label.id)) continue;
        issue.labels.push(label);
        issue.updatedAt = isoNow();
        emitLabel(host, issue, 'labeled', label.name, user);
      }
      return ok(issue.labels.map((l) => host.wire.label(issue.repo, l)));
    },
  },
  'issues/remove-label': {
    auth: 'installation',
    needs: ISSUES_WRITE,
    run(ctx, host) {
      const issue = issueOf(ctx, host);
      const user = actor(ctx);
      const name = (ctx.params.name ?? '').toLowerCase();
      const at = issue.labels.findIndex((l) => l.name.toLowerCase() === name);
      if (at < 0) throw new HttpError(404, 'Label does not exist');
      const [removed] = issue.labels.splice(at, 1);
      issue.updatedAt = isoNow();
      if (removed !== undefined) emitLabel(host, issue, 'unlabeled', removed.name, user);
      return ok(issue.labels.map((l) => host.wire.label(issue.repo, l)));
    },
  },
  // People open pull requests too (user tokens); installation tokens need pull_requests: write.
  'pulls/create': { auth: 'installation', users: true, needs: PULLS_WRITE, run: createPull },
  'pulls/list': {
    auth: 'installation',
    needs: PULLS_READ,
    async run(ctx, host) {
      const repo = repoOf(ctx, host);
      const all = sortedPulls(repo, ctx);
      const { page, headers } = paginate(all, ctx, host, `/repos/${repo.owner.login}/${repo.name}/pulls`);
      const bodies: JsonObject[] = [];
      for (const issue of page) {
        await host.refreshPull(issue);
        bodies.push(host.wire.pull(issue, { commits: 0, additions: 0, deletions: 0, changedFiles: 0 }, true));
      }
      return ok(bodies, 200, headers);
    },
  },
  'pulls/get': {
    auth: 'installation',
    needs: PULLS_READ,
    run: async (ctx, host) => ok(await pullBody(pullOf(ctx, host), host)),
  },
  'pulls/update': { auth: 'installation', users: true, needs: PULLS_WRITE, run: updatePull },
  // Merging writes the base branch: GitHub asks for contents: write.
  'pulls/merge': { auth: 'installation', needs: CONTENTS_WRITE, run: mergePullRequest },
  'pulls/list-review-comments': {
    auth: 'installation',
    needs: PULLS_READ,
    run(ctx, host) {
      const issue = pullOf(ctx, host);
      const all = issue.pull?.reviewComments ?? [];
      const { page, headers } = paginate(
        all,
        ctx,
        host,
        `/repos/${issue.repo.owner.login}/${issue.repo.name}/pulls/${issue.number}/comments`,
      );
      return ok(
        page.map((c) => host.wire.reviewComment(issue, c)),
        200,
        headers,
      );
    },
  },
  'pulls/get-review-comment': {
    auth: 'installation',
    needs: PULLS_READ,
    run(ctx, host) {
      const repo = repoOf(ctx, host);
      const comment = host.world.reviewComments.get(numberParam(ctx, 'comment_id'));
      const issue = comment === undefined ? undefined : repo.issues.get(comment.issueNumber);
      if (comment?.repo !== repo || issue === undefined) throw notFound();
      return ok(host.wire.reviewComment(issue, comment));
    },
  },
  'pulls/create-reply-for-review-comment': {
    auth: 'installation',
    needs: PULLS_WRITE,
    run(ctx, host) {
      const issue = pullOf(ctx, host);
      const user = actor(ctx);
      const target = host.world.reviewComments.get(numberParam(ctx, 'comment_id'));
      if (target === undefined || target.repo !== issue.repo || target.issueNumber !== issue.number)
        throw notFound();
      const reply = host.world.addReviewComment(issue, user, text(ctx.body, 'body') ?? '', {
        path: target.path,
        line: target.line,
        commitId: target.commitId,
        diffHunk: target.diffHunk,
        // Replies to a reply attach to the thread's first comment, as on GitHub.
        inReplyToId: target.inReplyToId ?? target.id,
      });
      const body = host.wire.reviewComment(issue, reply);
      host.echo('pull_request_review_comment', 'created', {
        owner: issue.repo.owner.login,
        repo: issue.repo.name,
        pull: issue.number,
        sender: user.login,
        comment: { id: reply.id, body: reply.body },
      });
      return ok(body, 201, { location: String(body.url) });
    },
  },
  'checks/list-for-ref': { auth: 'installation', needs: CHECKS_READ, run: listCheckRunsForRef },
  'checks/get': {
    auth: 'installation',
    needs: CHECKS_READ,
    async run(ctx, host) {
      const run = checkRunOf(ctx, host, 'check_run_id');
      return ok(host.wire.checkRun(run, await openPullsAt(run.repo, run.suite.headSha, host)));
    },
  },
  'checks/list-annotations': {
    auth: 'installation',
    needs: CHECKS_READ,
    run(ctx, host) {
      const run = checkRunOf(ctx, host, 'check_run_id');
      const { page, headers } = paginate(
        run.annotations,
        ctx,
        host,
        `/repos/${run.repo.owner.login}/${run.repo.name}/check-runs/${run.id}/annotations`,
      );
      return ok(
        page.map((a) => host.wire.checkAnnotation(run, a)),
        200,
        headers,
      );
    },
  },
  // GitHub answers with a redirect to a signed URL of its blob storage that expires after a minute.
  'actions/download-job-logs-for-workflow-run': {
    auth: 'installation',
    needs: ACTIONS_READ,
    run(ctx, host) {
      const run = checkRunOf(ctx, host, 'job_id');
      return { status: 302, headers: { location: host.signedLogUrl(run.log) } };
    },
  },
  'actions/get-workflow-run': {
    auth: 'installation',
    needs: ACTIONS_READ,
    async run(ctx, host) {
      const { repo, suite } = workflowRunOf(ctx, host);
      const pulls = await openPullsAt(repo, suite.headSha, host);
      const head = await readCommit(repo.bareDir, suite.headSha);
      const runs = host.world.checkRunsOf(suite);
      const exclude = ctx.query.exclude_pull_requests === 'true';
      return ok(host.wire.workflowRun(repo, suite, runs, pulls, head, exclude));
    },
  },
  // `filter=latest` (the default): the latest attempt of each job; `all`: every attempt. Oldest first.
  'actions/list-jobs-for-workflow-run': {
    auth: 'installation',
    needs: ACTIONS_READ,
    run(ctx, host) {
      const { repo, suite } = workflowRunOf(ctx, host);
      const filter = ctx.query.filter ?? 'latest';
      if (filter !== 'latest' && filter !== 'all')
        throw validationFailed([{ resource: 'WorkflowJob', field: 'filter', code: 'invalid' }]);
      const runs = host.world.checkRunsOf(suite);
      const jobs = filter === 'latest' ? latestJobs(runs) : runs;
      const { page, headers } = paginate(
        jobs,
        ctx,
        host,
        `/repos/${repo.owner.login}/${repo.name}/actions/runs/${suite.workflowRunId}/jobs`,
      );
      return ok({ total_count: jobs.length, jobs: page.map((r) => host.wire.job(r, runs)) }, 200, headers);
    },
  },
  'pulls/list-reviews': {
    auth: 'installation',
    needs: PULLS_READ,
    run(ctx, host) {
      const issue = pullOf(ctx, host);
      const all = issue.pull?.reviews ?? [];
      const { page, headers } = paginate(
        all,
        ctx,
        host,
        `/repos/${issue.repo.owner.login}/${issue.repo.name}/pulls/${issue.number}/reviews`,
      );
      return ok(
        page.map((r) => host.wire.review(issue, r)),
        200,
        headers,
      );
    },
  },
};

/** The installation's account: the owner of the first repository, else the app's owner. */
function accountOf(host: Host): UserRecord {
  const [first] = host.world.repos.values();
  return first?.owner ?? host.app.owner;
}
