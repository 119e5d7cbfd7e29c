import { randomBytes, randomUUID, type KeyObject } from 'node:crypto';
import { rmSync } from 'node:fs';
import { appendFile, mkdir, mkdtemp, rm } from 'node:fs/promises';
import {
  createServer,
  STATUS_CODES,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { Logger } from 'pino';
import { checkAppJwt, generateAppKey, isJwtShaped, TokenStore } from './auth.js';
import { GitService, GIT_PATH } from './git-service.js';
import { PRE_RECEIVE_PATH, writeHooks } from './hooks.js';
import { forgetRepos } from './object-memo.js';
import { refuseRefUpdates, type Pusher } from './push-rules.js';
import type { RefUpdate } from './protection.js';
import { CommitSigner } from './signing.js';
import { OAuthService, OAUTH_PATH } from './oauth.js';
import { AttachmentService, ATTACHMENT_PATH, PRIVATE_IMAGE_PATH } from './attachments.js';
import { HttpError } from './errors.js';
import {
  branchesContaining,
  createBareRepo,
  diffStats,
  git,
  readRefs,
  readRefsSync,
  resolveCommit,
  writePullRef,
  writePullRefSync,
} from './git.js';
import { buildPayload } from './payloads.js';
import { mergePull, openPull } from './pulls.js';
import { NATIVE_HANDLERS } from './rest-native.js';
import { allows, HANDLERS, openPullsAt, type Caller, type Handler, type Host, type Reply } from './rest.js';
import { loadSpec, type OpenApiSpec, type Operation } from './spec.js';
import {
  isoNow,
  syncPull,
  World,
  type CheckAnnotationRecord,
  type CheckRunRecord,
  type IssueRecord,
  type ReactionRecord,
  type RepoRecord,
  type UserRecord,
} from './state.js';
import {
  checkRunSnapshot,
  commentSnapshot,
  issueSnapshot,
  pullSnapshot,
  reactionSnapshot,
  repoSnapshot,
  reviewCommentSnapshot,
} from './snapshots.js';
import type {
  CheckConclusion,
  CheckRunSpec,
  Delivery,
  DeliveryResult,
  FaultSpec,
  GitHubSim,
  GitHubSimulatorOptions,
  Push,
  RecordedRequest,
  RepoPermission,
  ResponseViolation,
  SimApp,
  SimCheckAnnotation,
  SimCheckOutput,
  SimCheckRun,
  SimComment,
  SimIssue,
  SimPull,
  SimReaction,
  SimRepo,
  SimReviewComment,
  SimUser,
  Violation,
  Webhook,
  WebhookEvent,
  WebhookParams,
  WorkflowPermissions,
  WorkflowRunCompletionSpec,
} from './types.js';
import { deliveryHeaders, newDeliveryId, post, signBody, type HookIdentity } from './webhooks.js';
import { Wire, type AppInfo } from './wire.js';

const APP_ID = 314_159;
const INSTALLATION_ID = 27_182_818;
const BOT_USER_ID = 141_421_356;
/** The account a workflow's GITHUB_TOKEN acts as, with its id on github.com. */
const ACTIONS_BOT = { login: 'github-actions[bot]', id: 41898282 } as const;
const HOOK: Omit<HookIdentity, 'appId'> = { hookId: 4_242_424, userAgent: 'GitHub-Hookshot/5a1c0e3' };
/**
 * The app's permissions and events: app.yml's, plus what reading the checks of its pull requests
 * needs (checks and actions read, the check_run event).
 */
const APP_PERMISSIONS = {
  actions: 'read',
  checks: 'read',
  contents: 'write',
  issues: 'write',
  metadata: 'read',
  pull_requests: 'write',
} as const;
/** The App's permissions: the default set with the test's changes (`none` removes one). */
function appPermissions(
  changes: Readonly<Record<string, 'read' | 'write' | 'admin' | 'none'>> = {},
): Readonly<Record<string, string>> {
  const merged: Record<string, string> = { ...APP_PERMISSIONS, ...changes };
  return Object.fromEntries(Object.entries(merged).filter(([, level]) => level !== 'none'));
}

const APP_EVENTS = [
  'check_run',
  'issues',
  'issue_comment',
  'pull_request',
  'pull_request_review',
  'pull_request_review_comment',
  'push',
];
/** Where job logs are served from: GitHub redirects to a signed blob-storage URL, valid a minute. */
const LOG_PATH = /^\/_blobs\/job-logs\/([0-9a-f]{32})\.txt$/;
const LOG_URL_TTL_MS = 60_000;
const RATE_LIMIT = 5000;
const SECONDARY_RATE_LIMIT_MESSAGE =
  'You have exceeded a secondary rate limit. Please wait a few minutes before you try again.';
const SECONDARY_RATE_LIMIT_DOCS =
  'https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits';

/**
 * A loopback HTTP server that is GitHub for one app: the REST API (routes, bodies and responses per
 * GitHub's OpenAPI description), app and installation-token authentication, git smart HTTP over bare
 * repositories, and signed webhook deliveries built from real example payloads.
 */
export async function startGitHubSimulator(options: GitHubSimulatorOptions = {}): Promise<GitHubSim> {
  const started = performance.now();
  const [spec, key, root] = await Promise.all([
    loadSpec(),
    generateAppKey(),
    mkdtemp(join(tmpdir(), 'github-sim-')),
  ]);
  removeAtExit(root);
  await writeHooks(join(root, 'hooks'));
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const sim = new Simulator(`http://127.0.0.1:${port}`, server, spec, key, root, options);
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    sim.dispatch(req, res);
  });
  options.logger?.debug({ url: sim.url, ms: Math.round(performance.now() - started) }, 'github-sim started');
  return sim;
}

/** Temp dirs of simulators not yet closed, removed when the process exits without closing them. */
const openRoots = new Set<string>();
let exitHookInstalled = false;

function removeAtExit(root: string): void {
  openRoots.add(root);
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const dir of openRoots) rmSync(dir, { recursive: true, force: true });
  });
}

interface MutableRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  headers: Record<string, string>;
  body: string;
  status: number;
  operationId: string | null;
  at: number;
}

interface ActiveFault {
  readonly spec: FaultSpec;
  remaining: number;
}

class Simulator implements GitHubSim {
  readonly app: SimApp;
  readonly installationId = INSTALLATION_ID;
  readonly requests: RecordedRequest[] = [];
  readonly violations: Violation[] = [];
  readonly responseViolations: ResponseViolation[] = [];
  readonly deliveries: Delivery[] = [];
  readonly pushes: Push[] = [];

  get gitBytesServed(): number {
    return this.git.bytesServed;
  }
  readonly oauth: OAuthService;
  private readonly world = new World();
  private readonly signer = new CommitSigner(randomBytes(32).toString('hex'));
  private readonly wire: Wire;
  private readonly host: Host;
  private readonly tokens: TokenStore;
  private readonly publicKey: KeyObject;
  private readonly log: Logger | undefined;
  private readonly git: GitService;
  private readonly faults: ActiveFault[] = [];
  private readonly pending = new Set<Promise<unknown>>();
  private readonly abort = new AbortController();
  private readonly checkResponses: boolean;
  private webhookTarget: string | undefined;
  private rate = { used: 0, reset: 0 };
  /** Job logs behind short-lived URLs (see LOG_PATH), by the URL's key. */
  private readonly logBlobs = new Map<string, { readonly text: string; readonly expiresAt: number }>();
  private readonly attachments: AttachmentService;
  private closing: Promise<void> | undefined;

  constructor(
    readonly url: string,
    private readonly server: Server,
    private readonly spec: OpenApiSpec,
    key: { privateKeyPem: string; publicKey: KeyObject },
    private readonly root: string,
    private readonly options: GitHubSimulatorOptions,
  ) {
    this.publicKey = key.publicKey;
    this.tokens = new TokenStore(options.tokenTtlSeconds ?? 3600);
    this.log = options.logger?.child({ name: 'github-sim' });
    this.webhookTarget = options.webhookTarget;
    this.checkResponses = options.checkResponses ?? true;
    const slug = options.app?.slug ?? 'issue-agent-sim';
    this.app = {
      id: APP_ID,
      slug,
      name: options.app?.name ?? 'Issue Agent (simulated)',
      privateKeyPem: key.privateKeyPem,
      webhookSecret: randomBytes(20).toString('hex'),
      botLogin: `${slug}[bot]`,
      botUserId: BOT_USER_ID,
      clientId: `Iv1.${randomBytes(8).toString('hex')}`,
      clientSecret: randomBytes(20).toString('hex'),
    };
    this.oauth = new OAuthService(this.world, this.app);
    this.attachments = new AttachmentService(url);
    this.world.addUser(this.app.botLogin, 'Bot', BOT_USER_ID);
    const appInfo: AppInfo = {
      id: APP_ID,
      slug,
      name: this.app.name,
      clientId: this.app.clientId,
      owner: this.world.addUser('github-sim-apps', 'User'),
      createdAt: isoNow(),
      permissions: appPermissions(options.appPermissions),
      events: APP_EVENTS,
    };
    this.wire = new Wire(url, this.world, appInfo);
    this.git = new GitService({
      world: this.world,
      projectRoot: join(root, 'repos'),
      botLogin: this.app.botLogin,
      baseUrl: url,
      lookupToken: (credential) => {
        const lookup = this.tokens.lookup(credential, this.world.nowMs());
        return lookup.kind === 'valid' ? lookup.token : null;
      },
      lookupUser: (credential) => this.oauth.userFor(credential),
      tokenUser: (token) => this.world.ensureUser(token.actor ?? this.app.botLogin),
      onPush: (repo, before, after, pusher) => this.recordPush(repo, before, after, pusher),
      log: this.log,
      bytesPerSecond: options.gitBytesPerSecond,
    });
    this.host = {
      url,
      world: this.world,
      wire: this.wire,
      app: appInfo,
      installationId: INSTALLATION_ID,
      rateLimit: () => this.rateLimit(false),
      issueToken: (ids, permissions) =>
        this.tokens.issue(INSTALLATION_ID, ids, permissions, this.world.nowMs()),
      refreshPull: (issue) => this.refreshPull(issue),
      exclusive: (repo, fn) => this.git.exclusive(repo, fn),
      diffStats: (issue) =>
        issue.pull === null
          ? Promise.resolve({ commits: 0, additions: 0, deletions: 0, changedFiles: 0 })
          : diffStats(issue.repo.bareDir, issue.pull.base.sha, issue.pull.head.sha),
      echo: (event, action, p) => {
        this.echo(event, action, p);
      },
      signedLogUrl: (text) => this.signedLogUrl(text),
      signer: this.signer,
      refuseRefUpdates: (repo, pusher, updates) =>
        refuseRefUpdates({ world: this.world, signer: this.signer }, repo, pusher, updates),
      refsChanged: (repo, before, after, pusher) => this.recordPush(repo, before, after, pusher),
      fork: (source, owner, name, defaultBranchOnly, installed) =>
        this.forkRepo(source, owner, name, defaultBranchOnly, installed),
    };
  }

  // ---- test-facing state ------------------------------------------------------------------------

  setWebhookTarget(url: string): void {
    this.webhookTarget = url;
  }

  addUser(u: { login: string; type?: 'User' | 'Bot'; id?: number }): SimUser {
    const user = this.world.addUser(u.login, u.type ?? 'User', u.id);
    return { login: user.login, id: user.id, type: user.type };
  }

  async createRepo(r: {
    owner: string;
    name: string;
    sourceDir: string;
    defaultBranch?: string;
    private?: boolean;
  }): Promise<SimRepo> {
    if (this.world.repo(r.owner, r.name) !== undefined)
      throw new Error(`github-sim: repository ${r.owner}/${r.name} already exists`);
    if (!/^[\w.-]+$/.test(r.owner) || !/^[\w.-]+$/.test(r.name))
      throw new Error(`github-sim: not a valid repository name: ${r.owner}/${r.name}`);
    const owner = this.world.ensureUser(r.owner);
    const bareDir = join(this.root, 'repos', owner.login, `${r.name}.git`);
    await mkdir(dirname(bareDir), { recursive: true });
    const defaultBranch = await createBareRepo(r.sourceDir, bareDir, r.defaultBranch);
    await git(bareDir, ['config', 'core.hooksPath', join(this.root, 'hooks')]);
    const now = isoNow();
    const repo: RepoRecord = {
      id: this.world.nextId('repo'),
      owner,
      name: r.name,
      defaultBranch,
      private: r.private ?? false,
      bareDir,
      createdAt: now,
      pushedAt: now,
      issues: new Map(),
      labels: new Map(),
      permissions: new Map(),
      checkRuns: [],
      checkSuites: new Map(),
      appCheckSuites: new Map(),
      protections: new Map(),
      parent: null,
      installed: true,
      workflows: new Map(),
    };
    this.world.repos.set(`${owner.login}/${r.name}`.toLowerCase(), repo);
    return repoSnapshot(repo, this.url);
  }

  /**
   * A fork: a bare repository of its own (its branches copied, its refs its own) that shares the
   * parent's objects, and whose objects the parent sees too (GitHub keeps a fork network's objects
   * together): a cross-repository pull request's head is fetchable from the base repository.
   */
  private async forkRepo(
    source: RepoRecord,
    owner: UserRecord,
    name: string,
    defaultBranchOnly: boolean,
    installed: boolean,
  ): Promise<RepoRecord> {
    const bareDir = join(this.root, 'repos', owner.login, `${name}.git`);
    await mkdir(dirname(bareDir), { recursive: true });
    await git(source.bareDir, [
      'clone',
      '--quiet',
      '--bare',
      '--shared',
      ...(defaultBranchOnly ? ['--single-branch', '--branch', source.defaultBranch] : []),
      source.bareDir,
      bareDir,
    ]);
    for (const [key, value] of [
      ['http.receivepack', 'true'],
      ['gc.auto', '0'],
      ['receive.hideRefs', 'refs/pull/'],
      ['core.filesRefLockTimeout', '2000'],
      ['core.hooksPath', join(this.root, 'hooks')],
    ] as const)
      await git(bareDir, ['config', key, value]);
    await git(bareDir, ['remote', 'remove', 'origin']).catch(() => '');
    await appendFile(join(source.bareDir, 'objects', 'info', 'alternates'), `${join(bareDir, 'objects')}\n`);
    const now = isoNow();
    const repo: RepoRecord = {
      id: this.world.nextId('repo'),
      owner,
      name,
      defaultBranch: source.defaultBranch,
      private: source.private,
      bareDir,
      createdAt: now,
      pushedAt: now,
      issues: new Map(),
      labels: new Map(),
      permissions: new Map(),
      checkRuns: [],
      checkSuites: new Map(),
      appCheckSuites: new Map(),
      protections: new Map(),
      parent: source,
      installed,
      workflows: new Map(),
    };
    this.world.repos.set(`${owner.login}/${name}`.toLowerCase(), repo);
    return repo;
  }

  actionsToken(owner: string, repo: string, permissions: WorkflowPermissions = {}): string {
    const record = this.world.requireRepo(owner, repo);
    if (this.world.user(ACTIONS_BOT.login) === undefined)
      this.world.addUser(ACTIONS_BOT.login, 'Bot', ACTIONS_BOT.id);
    // A workflow's GITHUB_TOKEN: one repository, the permissions of a `permissions:` block that asks
    // for contents, issues and pull-requests write (and whatever else `permissions` lists; a block
    // leaves every scope it does not list at none), acting as github-actions[bot].
    const merged: Record<string, string> = {
      contents: 'write',
      issues: 'write',
      pull_requests: 'write',
      metadata: 'read',
      ...permissions,
    };
    const granted = Object.fromEntries(Object.entries(merged).filter(([, level]) => level !== 'none'));
    return this.tokens.issue(
      INSTALLATION_ID,
      new Set([record.id]),
      granted,
      this.world.nowMs(),
      ACTIONS_BOT.login,
    ).token;
  }

  setPermission(owner: string, repo: string, login: string, permission: RepoPermission): void {
    const record = this.world.requireRepo(owner, repo);
    this.world.ensureUser(login);
    record.permissions.set(login.toLowerCase(), permission);
  }

  createIssue(
    owner: string,
    repo: string,
    i: { title: string; body: string; author: string; labels?: string[] },
  ): SimIssue {
    const record = this.world.requireRepo(owner, repo);
    const now = isoNow();
    const issue: IssueRecord = {
      id: this.world.nextId('issue'),
      number: this.world.nextNumber(record),
      repo: record,
      title: i.title,
      body: i.body,
      user: this.world.ensureUser(i.author),
      state: 'open',
      stateReason: null,
      labels: (i.labels ?? []).map((name) => this.world.ensureLabel(record, name)),
      comments: [],
      reactions: [],
      createdAt: now,
      updatedAt: now,
      closedAt: null,
      closedBy: null,
      pull: null,
    };
    record.issues.set(issue.number, issue);
    return issueSnapshot(issue);
  }

  advanceClock(ms: number): void {
    this.world.advanceClock(ms);
  }

  editComment(owner: string, repo: string, commentId: number, body: string): void {
    const record = this.world.requireRepo(owner, repo);
    const comment = this.world.comments.get(commentId) ?? this.world.reviewComments.get(commentId);
    if (comment?.repo !== record) throw new Error(`github-sim: no comment ${commentId} in ${owner}/${repo}`);
    this.world.editComment(comment, body);
  }

  issue(owner: string, repo: string, n: number): SimIssue {
    return issueSnapshot(this.world.requireIssue(owner, repo, n));
  }

  comments(owner: string, repo: string, issueOrPullNumber: number): SimComment[] {
    return this.world.requireIssue(owner, repo, issueOrPullNumber).comments.map(commentSnapshot);
  }

  reviewComments(owner: string, repo: string, pull: number): SimReviewComment[] {
    const issue = this.world.requireIssue(owner, repo, pull);
    return (issue.pull?.reviewComments ?? []).map(reviewCommentSnapshot);
  }

  reactions(owner: string, repo: string, target: number | { issue: number }): SimReaction[] {
    const record = this.world.requireRepo(owner, repo);
    let list: readonly ReactionRecord[];
    if (typeof target === 'number') {
      const comment = this.world.comments.get(target) ?? this.world.reviewComments.get(target);
      if (comment?.repo !== record) throw new Error(`github-sim: no comment ${target} in ${owner}/${repo}`);
      list = comment.reactions;
    } else {
      list = this.world.requireIssue(owner, repo, target.issue).reactions;
    }
    return list.map(reactionSnapshot);
  }

  pulls(owner: string, repo: string): SimPull[] {
    const record = this.world.requireRepo(owner, repo);
    const refs = readRefsSync(record.bareDir);
    return [...record.issues.values()].flatMap((issue) => {
      if (issue.pull === null) return [];
      syncPull(issue, refs);
      writePullRefSync(record.bareDir, issue.number, issue.pull.head.sha, refs);
      const snapshot = pullSnapshot(issue);
      return snapshot === null ? [] : [snapshot];
    });
  }

  async openPull(
    owner: string,
    repo: string,
    p: { head: string; base?: string; title: string; body?: string; author: string },
  ): Promise<SimPull> {
    const record = this.world.requireRepo(owner, repo);
    const { issue } = await openPull(this.host, record, this.world.ensureUser(p.author), {
      headOwner: record.owner.login,
      headRef: p.head,
      baseRef: p.base ?? record.defaultBranch,
      title: p.title,
      body: p.body ?? '',
      draft: false,
      maintainerCanModify: true,
    }).catch((error: unknown) => {
      throw refusal(error, `cannot open a pull request from ${p.head} in ${owner}/${repo}`);
    });
    const snapshot = pullSnapshot(issue);
    if (snapshot === null) throw new Error('unreachable');
    return snapshot;
  }

  async mergePull(
    owner: string,
    repo: string,
    number: number,
    o: { by: string; method?: 'merge' | 'squash' },
  ): Promise<{ sha: string }> {
    const issue = this.world.requireIssue(owner, repo, number);
    if (issue.pull === null)
      throw new Error(`github-sim: #${number} in ${owner}/${repo} is not a pull request`);
    const { sha } = await mergePull(this.host, issue, this.world.ensureUser(o.by), {
      method: o.method ?? 'merge',
    }).catch((error: unknown) => {
      throw refusal(error, `cannot merge ${owner}/${repo}#${number}`);
    });
    return { sha };
  }

  closeIssue(
    owner: string,
    repo: string,
    number: number,
    o: { by: string; reason?: 'completed' | 'not_planned' },
  ): SimIssue {
    const issue = this.world.requireIssue(owner, repo, number);
    if (issue.state === 'open') {
      this.world.setState(issue, 'closed', this.world.ensureUser(o.by));
      if (issue.pull === null) issue.stateReason = o.reason ?? 'completed';
    }
    return issueSnapshot(issue);
  }

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
  async addCheckRun(
    owner: string,
    repo: string,
    r: CheckRunSpec,
  ): Promise<{ id: number; delivery: DeliveryResult | null }> {
    const record = this.world.requireRepo(owner, repo);
    const deliver = r.deliver ?? true;
    if (deliver) this.requireTarget();
    const status = r.status ?? 'completed';
    if (status === 'completed' && r.conclusion === undefined)
      throw new Error(`github-sim: check run ${r.name}: a completed check run needs a conclusion`);
    if (status !== 'completed' && r.conclusion !== undefined)
      throw new Error(`github-sim: check run ${r.name}: only a completed check run has a conclusion`);
    if (!/^[0-9a-f]{40}$/.test(r.headSha))
      throw new Error(`github-sim: check run ${r.name}: headSha must be a full commit sha, got ${r.headSha}`);
    if ((await resolveCommit(record.bareDir, r.headSha)) !== r.headSha)
      throw new Error(`github-sim: no commit ${r.headSha} in ${owner}/${repo}`);
    const annotations = (r.annotations ?? []).map(annotationRecord);
    const pulls = await openPullsAt(record, r.headSha, this.host);
    const suite =
      record.checkSuites.get(r.headSha) ??
      this.world.ensureCheckSuite(
        record,
        r.headSha,
        r.headBranch ?? (await headBranchOf(record, r.headSha, pulls)),
        await resolveCommit(record.bareDir, `${r.headSha}^`),
      );
    const now = isoNow();
    const run: CheckRunRecord = {
      id: this.world.nextId('checkRun'),
      repo: record,
      app: 'actions',
      suite,
      name: r.name,
      externalId: randomUUID(),
      status,
      conclusion: r.conclusion ?? null,
      startedAt: now,
      completedAt: status === 'completed' ? now : null,
      output: {
        title: r.output?.title ?? null,
        summary: r.output?.summary ?? null,
        text: r.output?.text ?? null,
      },
      annotations,
      detailsUrl: r.detailsUrl ?? null,
      log: r.log ?? '',
    };
    this.world.addCheckRun(run);
    if (!deliver) return { id: run.id, delivery: null };
    const hook = this.buildWebhook('check_run', status === 'completed' ? 'completed' : 'created', {
      owner: record.owner.login,
      repo: record.name,
      sender: r.sender ?? pulls[0]?.user.login ?? record.owner.login,
      checkRun: run.id,
    });
    return { id: run.id, delivery: await this.deliver(hook) };
  }

  async completeCheckRun(
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
  ): Promise<DeliveryResult> {
    const record = this.world.requireRepo(owner, repo);
    const run = this.world.checkRuns.get(id);
    if (run?.repo !== record) throw new Error(`github-sim: no check run ${id} in ${owner}/${repo}`);
    if (run.status === 'completed') throw new Error(`github-sim: check run ${id} is already completed`);
    this.requireTarget();
    const annotations = (c.annotations ?? []).map(annotationRecord);
    const pulls = await openPullsAt(record, run.suite.headSha, this.host);
    run.status = 'completed';
    run.conclusion = c.conclusion;
    run.completedAt = isoNow();
    run.output = {
      title: c.output?.title !== undefined ? c.output.title : run.output.title,
      summary: c.output?.summary !== undefined ? c.output.summary : run.output.summary,
      text: c.output?.text !== undefined ? c.output.text : run.output.text,
    };
    run.annotations.push(...annotations);
    if (c.log !== undefined) run.log = c.log;
    run.suite.updatedAt = run.completedAt;
    const hook = this.buildWebhook('check_run', 'completed', {
      owner: record.owner.login,
      repo: record.name,
      sender: c.sender ?? pulls[0]?.user.login ?? record.owner.login,
      checkRun: run.id,
    });
    return this.deliver(hook);
  }

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
  async completeWorkflowRun(
    owner: string,
    repo: string,
    c: WorkflowRunCompletionSpec,
  ): Promise<{ event: 'workflow_run'; payload: Record<string, unknown>; delivery: DeliveryResult | null }> {
    const record = this.world.requireRepo(owner, repo);
    const deliver = c.deliver ?? true;
    if (deliver) this.requireTarget();
    const suite = record.checkSuites.get(c.headSha);
    if (suite === undefined)
      throw new Error(
        `github-sim: no GitHub Actions check runs on ${c.headSha} in ${owner}/${repo} (add its jobs with addCheckRun)`,
      );
    const pulls = await openPullsAt(record, suite.headSha, this.host);
    const workflow =
      c.name === undefined && c.path === undefined
        ? undefined
        : this.world.ensureWorkflow(record, c.name ?? suite.workflow.name, c.path);
    const sender = this.world.ensureUser(c.sender ?? pulls[0]?.user.login ?? record.owner.login);
    this.world.completeWorkflowRun(suite, sender, workflow);
    const hook = this.buildWebhook('workflow_run', 'completed', {
      owner: record.owner.login,
      repo: record.name,
      sender: sender.login,
      workflowRun: suite.workflowRunId,
    });
    return {
      event: 'workflow_run',
      payload: hook.payload,
      delivery: deliver ? await this.deliver(hook) : null,
    };
  }

  checkRuns(owner: string, repo: string): SimCheckRun[] {
    return this.world.requireRepo(owner, repo).checkRuns.map(checkRunSnapshot);
  }

  bareRepoPath(owner: string, repo: string): string {
    return this.world.requireRepo(owner, repo).bareDir;
  }

  branchTip(owner: string, repo: string, branch: string): string | null {
    return readRefsSync(this.world.requireRepo(owner, repo).bareDir).get(`refs/heads/${branch}`) ?? null;
  }

  injectFault(f: FaultSpec): void {
    this.faults.push({ spec: f, remaining: f.times ?? 1 });
  }

  async waitFor(
    predicate: () => boolean | Promise<boolean>,
    timeoutMs = 5000,
    /** What is awaited; a function is called at the timeout (logs as they are then). */
    what: string | (() => string) = 'condition',
  ): Promise<void> {
    const started = Date.now();
    const deadline = started + timeoutMs;
    for (;;) {
      if (await predicate()) return;
      if (Date.now() >= deadline)
        throw new Error(
          `github-sim: timed out after ${timeoutMs} ms waiting for ${typeof what === 'string' ? what : what()} ` +
            `(${this.requests.length} requests, ${this.deliveries.length} deliveries, ${this.pushes.length} pushes so far)`,
        );
      // Often at first (most conditions come within a second), then less: a predicate may read git
      // or scan every request, and a whole job's wait polled every 20 ms cost the suite minutes of
      // CPU in this process, which also serves the pipeline.
      const waited = Date.now() - started;
      await new Promise((resolve) => setTimeout(resolve, waited < 1000 ? 20 : waited < 10_000 ? 100 : 250));
    }
  }

  // ---- webhooks ---------------------------------------------------------------------------------

  buildWebhook(event: WebhookEvent, action: string, p: WebhookParams): Webhook {
    const payload = buildPayload(this.host, event, action, p);
    if (this.checkResponses) {
      const errors = this.spec.checkWebhook(event, action, payload);
      if (errors !== null) this.responseViolations.push({ what: `webhook ${event}.${action}`, errors });
    }
    const body = JSON.stringify(payload);
    const id = newDeliveryId();
    const headers = deliveryHeaders(event, id, body, this.app.webhookSecret, { ...HOOK, appId: APP_ID });
    return { name: event, id, payload, body, headers };
  }

  async deliver(webhook: Webhook, opts: { secret?: string } = {}): Promise<DeliveryResult> {
    const target = this.requireTarget();
    const headers =
      opts.secret === undefined
        ? webhook.headers
        : {
            ...webhook.headers,
            'x-hub-signature': signBody(opts.secret, webhook.body, 'sha1'),
            'x-hub-signature-256': signBody(opts.secret, webhook.body),
          };
    const result = { id: webhook.id, ...(await post(target, headers, webhook.body, this.abort.signal)) };
    const action = webhook.payload.action;
    this.deliveries.push({
      name: webhook.name,
      action: typeof action === 'string' ? action : null,
      ...result,
    });
    this.log?.debug(
      { event: webhook.name, action, delivery: webhook.id, status: result.status, ms: result.ms },
      'delivered',
    );
    return result;
  }

  async sendRaw(headers: Record<string, string>, body: string): Promise<{ status: number; body: string }> {
    const result = await post(this.requireTarget(), headers, body, this.abort.signal);
    return { status: result.status, body: result.body };
  }

  async comment(
    owner: string,
    repo: string,
    issue: number,
    author: string,
    body: string,
  ): Promise<{ commentId: number; delivery: DeliveryResult }> {
    const hook = this.buildWebhook('issue_comment', 'created', {
      owner,
      repo,
      issue,
      sender: author,
      comment: { body },
    });
    const comment = hook.payload.comment as { id: number };
    return { commentId: comment.id, delivery: await this.deliver(hook) };
  }

  /** Labels an issue and delivers `issues.labeled` — or `pull_request.labeled` for a pull request, as GitHub does. */
  addAttachment(
    owner: string,
    repo: string,
    a: { readonly bytes: Uint8Array; readonly contentType: string; readonly uploader: string },
  ): string {
    const record = this.world.repo(owner, repo);
    if (record === undefined) throw new Error(`github-sim: no repository ${owner}/${repo}`);
    return this.attachments.add(record, this.world.ensureUser(a.uploader).id, a.bytes, a.contentType);
  }

  label(owner: string, repo: string, issue: number, label: string, sender: string): Promise<DeliveryResult> {
    const record = this.world.requireIssue(owner, repo, issue);
    const hook =
      record.pull === null
        ? this.buildWebhook('issues', 'labeled', { owner, repo, issue, sender, label })
        : this.buildWebhook('pull_request', 'labeled', { owner, repo, pull: issue, sender, label });
    return this.deliver(hook);
  }

  private requireTarget(): string {
    if (this.webhookTarget === undefined)
      throw new Error('github-sim: no webhook target; pass webhookTarget or call setWebhookTarget first');
    return this.webhookTarget;
  }

  private echo(event: WebhookEvent, action: string, p: WebhookParams): void {
    if (this.options.echoWebhooks !== true || this.webhookTarget === undefined || this.closing !== undefined)
      return;
    const delivery = this.deliver(this.buildWebhook(event, action, p)).catch((error: unknown) => {
      this.log?.warn({ event, action, error: describe(error) }, 'echo delivery failed');
    });
    this.pending.add(delivery);
    void delivery.finally(() => this.pending.delete(delivery));
  }

  // ---- HTTP -------------------------------------------------------------------------------------

  dispatch(req: IncomingMessage, res: ServerResponse): void {
    this.handle(req, res).catch((error: unknown) => {
      this.log?.error({ error: describe(error), url: req.url }, 'github-sim handler failed');
      if (res.headersSent) res.destroy();
      else sendJson(res, 500, { message: `github-sim failed: ${describe(error)}` });
    });
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const method = req.method ?? 'GET';
    const target = new URL(req.url ?? '/', this.url);
    const path = target.pathname;
    const query: Record<string, string> = {};
    for (const [name, value] of target.searchParams) query[name] = value;
    const headers = flattenHeaders(req);
    const gitMatch = GIT_PATH.exec(path);
    const oauthMatch = OAUTH_PATH.test(path);
    const logMatch = LOG_PATH.exec(path);
    const assetMatch = ATTACHMENT_PATH.exec(path);
    const imageMatch = PRIVATE_IMAGE_PATH.exec(path);
    const hookMatch = method === 'POST' ? PRE_RECEIVE_PATH.exec(path) : null;
    if (hookMatch !== null) {
      await this.preReceive(req, res, hookMatch[1] ?? '');
      return;
    }
    const route =
      gitMatch === null && !oauthMatch && logMatch === null && assetMatch === null && imageMatch === null
        ? this.spec.match(method, path)
        : null;
    const entry: MutableRequest = {
      method,
      path,
      query,
      headers,
      body: '',
      status: 0,
      operationId: route?.operation.operationId ?? null,
      at: Date.now(),
    };
    this.requests.push(entry);
    res.once('finish', () => {
      entry.status = res.statusCode;
      this.log?.debug({ method, path, status: res.statusCode, operationId: entry.operationId }, 'request');
    });

    const fault = this.takeFault(method, path, route?.operation);
    if (fault !== null) {
      req.resume();
      this.sendFault(res, fault);
      return;
    }
    if (gitMatch !== null) {
      await this.git.serve(req, res, gitMatch, target.search.slice(1), query);
      return;
    }
    if (oauthMatch) {
      await this.oauth.serve(req, res, target);
      return;
    }
    if (logMatch !== null) {
      req.resume();
      this.serveLog(res, method, logMatch[1] ?? '');
      return;
    }
    if (assetMatch !== null) {
      req.resume();
      const caller = this.authenticate(headers.authorization);
      const token = caller instanceof HttpError || caller.kind !== 'installation' ? null : caller.token;
      this.attachments.serveAsset(res, method, assetMatch[1] ?? '', token);
      return;
    }
    if (imageMatch !== null) {
      req.resume();
      this.attachments.serveSigned(res, method, imageMatch[3] ?? '', query.jwt);
      return;
    }

    entry.body = await readBody(req);
    this.setApiHeaders(res);
    if (route === null) {
      this.violations.push({
        method,
        path,
        operationId: null,
        errors: 'no such route in the OpenAPI description',
      });
      sendJson(res, 404, errorBody(404, 'Not Found', 'https://docs.github.com/rest'));
      return;
    }
    const { operation } = route;
    const handler = HANDLERS[operation.operationId] ?? NATIVE_HANDLERS[operation.operationId];
    if (handler === undefined) {
      this.violations.push({
        method,
        path,
        operationId: operation.operationId,
        errors: `${operation.operationId} is in the OpenAPI description but not implemented by the simulator`,
      });
      sendJson(res, 404, errorBody(404, 'Not Found', operation.docsUrl));
      return;
    }

    const fail = (error: HttpError): void => {
      let extra = error.extra;
      // Where GitHub's 422 lists errors as strings, an error object is said by its message.
      if (error.status === 422 && Array.isArray(extra.errors) && this.spec.stringErrors(operation))
        extra = {
          ...extra,
          errors: (extra.errors as unknown[]).map((e) => {
            if (typeof e === 'string') return e;
            const o = (typeof e === 'object' && e !== null ? e : {}) as Record<string, unknown>;
            return typeof o.message === 'string' ? o.message : `${String(o.field)} ${String(o.code)}`;
          }),
        };
      this.respond(res, operation, {
        status: error.status,
        body: errorBody(error.status, error.message, operation.docsUrl, extra),
      });
    };
    const caller = this.authenticate(headers.authorization);
    if (caller instanceof HttpError) {
      fail(caller);
      return;
    }
    const refusal = refuse(handler, caller);
    if (refusal !== null) {
      fail(refusal);
      return;
    }

    let body: unknown = undefined;
    if (this.spec.hasJsonBody(operation)) {
      if (entry.body.trim() !== '') {
        try {
          body = JSON.parse(entry.body) as unknown;
        } catch {
          this.violations.push({
            method,
            path,
            operationId: operation.operationId,
            errors: 'body is not JSON',
          });
          fail(new HttpError(400, 'Problems parsing JSON'));
          return;
        }
      }
      if (body !== undefined || this.spec.bodyRequired(operation)) {
        const errors = this.spec.checkRequestBody(operation, body ?? {});
        if (errors.length > 0) {
          this.violations.push({
            method,
            path,
            operationId: operation.operationId,
            errors: errors.map((e) => e.message).join(' '),
          });
          fail(
            new HttpError(422, ['Invalid request.', '', ...errors.map((e) => e.message)].join('\n'), {
              errors,
            }),
          );
          return;
        }
      }
    }

    const ctx = { operation, params: route.params, query, headers, body, caller };
    if (caller.kind === 'installation' && handler.needs !== undefined) {
      if (!allows(caller.token, handler.needs)) {
        fail(new HttpError(403, 'Resource not accessible by integration'));
        return;
      }
    }
    let reply: Reply;
    try {
      reply = await handler.run(ctx, this.host);
    } catch (error) {
      if (!(error instanceof HttpError)) throw error;
      fail(error);
      return;
    }
    this.respond(res, operation, reply);
  }

  private signedLogUrl(text: string): string {
    const now = Date.now();
    // Keys expired long ago are forgotten; recently expired ones still answer as expired.
    for (const [key, blob] of this.logBlobs)
      if (blob.expiresAt + 10 * LOG_URL_TTL_MS < now) this.logBlobs.delete(key);
    const key = randomBytes(16).toString('hex');
    this.logBlobs.set(key, { text, expiresAt: now + LOG_URL_TTL_MS });
    return `${this.url}/_blobs/job-logs/${key}.txt`;
  }

  /** A job log behind a signed URL: no credentials needed, refused once expired, as blob storage does. */
  private serveLog(res: ServerResponse, method: string, key: string): void {
    const xml = (status: number, code: string, message: string): void => {
      const body = `<?xml version="1.0" encoding="utf-8"?><Error><Code>${code}</Code><Message>${message}</Message></Error>`;
      res.writeHead(status, {
        'content-type': 'application/xml',
        'content-length': Buffer.byteLength(body),
      });
      res.end(body);
    };
    if (method !== 'GET' && method !== 'HEAD') {
      xml(405, 'UnsupportedHttpVerb', 'The resource does not support the specified HTTP verb.');
      return;
    }
    const blob = this.logBlobs.get(key);
    if (blob === undefined) {
      xml(404, 'BlobNotFound', 'The specified blob does not exist.');
      return;
    }
    if (Date.now() >= blob.expiresAt) {
      xml(
        403,
        'AuthenticationFailed',
        'Server failed to authenticate the request. Make sure the value of Authorization header is formed correctly including the signature.',
      );
      return;
    }
    const data = Buffer.from(blob.text, 'utf8');
    res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'content-length': data.length });
    res.end(method === 'HEAD' ? undefined : data);
  }

  private authenticate(header: string | undefined): Caller | HttpError {
    if (header === undefined || header.trim() === '') return { kind: 'anonymous' };
    const match = /^(bearer|token|basic)\s+(\S+)$/i.exec(header.trim());
    if (match === null) return new HttpError(401, 'Bad credentials');
    const scheme = (match[1] ?? '').toLowerCase();
    let credential = match[2] ?? '';
    if (scheme === 'basic') {
      const decoded = Buffer.from(credential, 'base64').toString('utf8');
      credential = decoded.slice(decoded.indexOf(':') + 1);
    }
    if (scheme === 'bearer' && isJwtShaped(credential)) {
      const check = checkAppJwt(credential, this.publicKey, APP_ID, Date.now());
      return check.ok ? { kind: 'app' } : new HttpError(401, check.message);
    }
    const user = this.oauth.userFor(credential);
    if (user !== null) return { kind: 'user', user };
    const lookup = this.tokens.lookup(credential, this.world.nowMs());
    if (lookup.kind !== 'valid') return new HttpError(401, 'Bad credentials');
    return {
      kind: 'installation',
      token: lookup.token,
      user: this.world.ensureUser(lookup.token.actor ?? this.app.botLogin),
    };
  }

  private respond(res: ServerResponse, operation: Operation, reply: Reply): void {
    for (const [name, value] of Object.entries(reply.headers ?? {})) res.setHeader(name, value);
    if (reply.raw !== undefined) {
      res.setHeader('x-github-media-type', reply.raw.mediaType);
      res.writeHead(reply.status, {
        'content-type': reply.raw.contentType,
        'content-length': reply.raw.data.length,
      });
      res.end(reply.raw.data);
      return;
    }
    if (reply.body === undefined) {
      res.writeHead(reply.status);
      res.end();
      return;
    }
    if (this.checkResponses) {
      const errors = this.spec.checkResponse(operation, reply.status, reply.body);
      if (errors !== null)
        this.responseViolations.push({ what: `response ${operation.operationId} ${reply.status}`, errors });
    }
    sendJson(res, reply.status, reply.body);
  }

  private setApiHeaders(res: ServerResponse): void {
    const rate = this.rateLimit(true);
    res.setHeader('x-github-api-version-selected', '2022-11-28');
    res.setHeader('x-github-media-type', 'github.v3; format=json');
    res.setHeader('x-github-request-id', randomBytes(8).toString('hex').toUpperCase());
    res.setHeader('x-ratelimit-limit', String(rate.limit));
    res.setHeader('x-ratelimit-remaining', String(rate.remaining));
    res.setHeader('x-ratelimit-reset', String(rate.reset));
    res.setHeader('x-ratelimit-used', String(rate.used));
    res.setHeader('x-ratelimit-resource', 'core');
  }

  /** The primary (core) rate limit window: 5000 requests an hour; `count` charges one request. */
  private rateLimit(count: boolean): { limit: number; used: number; remaining: number; reset: number } {
    const now = Math.floor(Date.now() / 1000);
    if (now >= this.rate.reset) this.rate = { used: 0, reset: now + 3600 };
    if (count) this.rate.used = Math.min(this.rate.used + 1, RATE_LIMIT);
    return {
      limit: RATE_LIMIT,
      used: this.rate.used,
      remaining: RATE_LIMIT - this.rate.used,
      reset: this.rate.reset,
    };
  }

  private takeFault(method: string, path: string, operation: Operation | undefined): FaultSpec | null {
    const index = this.faults.findIndex(({ spec }) => {
      if (spec.method !== undefined && spec.method.toUpperCase() !== method.toUpperCase()) return false;
      if (spec.path instanceof RegExp) return spec.path.test(path);
      return spec.path === path || spec.path === operation?.template;
    });
    const fault = this.faults[index];
    if (fault === undefined) return null;
    fault.remaining -= 1;
    if (fault.remaining <= 0) this.faults.splice(index, 1);
    return fault.spec;
  }

  private sendFault(res: ServerResponse, fault: FaultSpec): void {
    this.setApiHeaders(res);
    if (fault.kind === 'secondary-rate-limit') {
      const requestId = String(res.getHeader('x-github-request-id'));
      res.setHeader('retry-after', String(fault.retryAfterSeconds ?? 60));
      sendJson(res, 403, {
        message: `${SECONDARY_RATE_LIMIT_MESSAGE} If you reach out to GitHub Support for help, please include the request ID ${requestId}.`,
        documentation_url: SECONDARY_RATE_LIMIT_DOCS,
        status: '403',
      });
      return;
    }
    sendJson(
      res,
      fault.status,
      errorBody(fault.status, STATUS_CODES[fault.status] ?? 'Error', 'https://docs.github.com/rest'),
    );
  }

  // ---- git ------------------------------------------------------------------------------------

  private async recordPush(
    repo: RepoRecord,
    before: ReadonlyMap<string, string>,
    after: ReadonlyMap<string, string>,
    pusher: Pusher,
  ): Promise<void> {
    const changed = [...new Set([...before.keys(), ...after.keys()])].filter(
      (ref) => before.get(ref) !== after.get(ref),
    );
    if (changed.length === 0) return;
    this.pushes.push({
      owner: repo.owner.login,
      repo: repo.name,
      user: pusher.user.login,
      refs: changed.sort(),
    });
    repo.pushedAt = isoNow();
    // Pull requests of this repository, and those of other repositories whose head is here (a fork's).
    const moved: IssueRecord[] = [];
    for (const base of this.world.repos.values()) {
      const pulls = [...base.issues.values()].filter(
        (i) => i.pull !== null && (base === repo || i.pull.headRepo === repo),
      );
      if (pulls.length === 0) continue;
      const refs = base === repo ? after : await readRefs(base.bareDir);
      moved.push(...pulls.filter((issue) => syncPull(issue, refs)));
    }
    for (const issue of moved) {
      if (issue.pull !== null) await writePullRef(issue.repo.bareDir, issue.number, issue.pull.head.sha);
      this.echo('pull_request', 'synchronize', {
        owner: issue.repo.owner.login,
        repo: issue.repo.name,
        pull: issue.number,
        sender: pusher.user.login,
      });
    }
  }

  /** A push's pre-receive hook asks whether its ref updates may go ahead; answers with GitHub's refusal. */
  private async preReceive(req: IncomingMessage, res: ServerResponse, pushId: string): Promise<void> {
    const push = this.git.activePushes.get(pushId);
    const text = await readBody(req);
    if (push === undefined) {
      sendJson(res, 404, { ok: false, lines: ['github-sim: no such push'] });
      return;
    }
    const parsed = JSON.parse(text) as { updates: RefUpdate[]; env: Record<string, string> };
    const lines = await refuseRefUpdates(
      { world: this.world, signer: this.signer },
      push.repo,
      push.pusher,
      parsed.updates,
      parsed.env,
    );
    sendJson(res, 200, { ok: lines === null, lines: lines ?? [] });
  }

  /** Syncs an open pull request's shas with its branches, and `refs/pull/<n>/head` with its head. */
  private async refreshPull(issue: IssueRecord): Promise<void> {
    // A closed pull request's head no longer moves; its ref was written when it last did.
    if (issue.pull === null || issue.state !== 'open') return;
    const refs = await readRefs(issue.repo.bareDir);
    syncPull(issue, refs);
    await writePullRef(issue.repo.bareDir, issue.number, issue.pull.head.sha, refs);
  }

  // ---- lifecycle --------------------------------------------------------------------------------

  close(): Promise<void> {
    this.closing ??= this.shutDown();
    return this.closing;
  }

  private async shutDown(): Promise<void> {
    this.abort.abort();
    this.git.killAll();
    const closed = new Promise<void>((resolve) => {
      this.server.close(() => {
        resolve();
      });
    });
    this.server.closeAllConnections();
    await Promise.allSettled([closed, ...this.pending]);
    await rm(this.root, { recursive: true, force: true });
    forgetRepos(this.root);
    openRoots.delete(this.root);
  }
}

function annotationRecord(a: SimCheckAnnotation): CheckAnnotationRecord {
  const endLine = a.endLine ?? a.startLine;
  if (
    !Number.isInteger(a.startLine) ||
    a.startLine < 1 ||
    !Number.isInteger(endLine) ||
    endLine < a.startLine
  )
    throw new Error(`github-sim: annotation of ${a.path}: bad line range ${a.startLine}-${endLine}`);
  return {
    path: a.path,
    startLine: a.startLine,
    endLine,
    level: a.level,
    message: a.message,
    title: a.title ?? null,
    rawDetails: a.rawDetails ?? null,
  };
}

/**
 * The branch a check suite on `sha` is for: the head of an open pull request at it, else a branch
 * whose tip it is, else one containing it; the default branch first among branches.
 */
async function headBranchOf(
  repo: RepoRecord,
  sha: string,
  pulls: readonly IssueRecord[],
): Promise<string | null> {
  const fromPull = pulls[0]?.pull?.head.ref;
  if (fromPull !== undefined) return fromPull;
  const first = (names: readonly string[]): string | null =>
    names.includes(repo.defaultBranch) ? repo.defaultBranch : ([...names].sort()[0] ?? null);
  const tips = [...(await readRefs(repo.bareDir))]
    .filter(([name, at]) => name.startsWith('refs/heads/') && at === sha)
    .map(([name]) => name.slice('refs/heads/'.length));
  return first(tips) ?? first(await branchesContaining(repo.bareDir, sha));
}

/** Why a caller may not use an operation needing that credential, or null. */
function refuse(handler: Handler, caller: Caller): HttpError | null {
  const auth = handler.auth;
  // User tokens (OAuth) work only where the handler says it serves users.
  if (caller.kind === 'user')
    return handler.users === true ? null : new HttpError(403, 'Resource not accessible by integration');
  if (auth === 'any' || caller.kind === auth) return null;
  if (auth === 'app') return new HttpError(401, 'A JSON web token could not be decoded');
  return new HttpError(401, caller.kind === 'anonymous' ? 'Requires authentication' : 'Bad credentials');
}

function errorBody(
  status: number,
  message: string,
  docs: string,
  extra: Readonly<Record<string, unknown>> = {},
): Record<string, unknown> {
  return { message, ...extra, documentation_url: docs, status: String(status) };
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

function flattenHeaders(req: IncomingMessage): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value !== undefined) out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const parts: Buffer[] = [];
  for await (const part of req) parts.push(part as Buffer);
  return Buffer.concat(parts).toString('utf8');
}

/** A refusal of the shared REST logic as the Error a test-facing method throws. */
function refusal(error: unknown, what: string): Error {
  if (!(error instanceof HttpError)) return error instanceof Error ? error : new Error(String(error));
  const errors = (error.extra.errors ?? []) as readonly {
    message?: unknown;
    field?: unknown;
    code?: unknown;
  }[];
  const details = errors.map((e) =>
    typeof e.message === 'string' ? e.message : `${String(e.field)} ${String(e.code)}`,
  );
  return new Error(`github-sim: ${what}: ${[error.message, ...details].join('; ')} (${error.status})`);
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
