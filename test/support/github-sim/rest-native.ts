/**
 * The REST operations a GitHub-native bot uses beyond issues and pull requests: check runs it makes
 * itself, branch protection, commits with their signature verification, the git database API
 * (blobs, trees, commits, refs), reviews with comments, and forks. Same conventions as rest.ts:
 * the server routes, validates bodies against the OpenAPI description and authenticates first.
 */
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HttpError, notFound, validationFailed } from './errors.js';
import { compareAndSwapRef, git, readBlob, readRefs, resolveCommit } from './git.js';
import { protectionFromBody, protectionJson, type RefUpdate } from './protection.js';
import type { Pusher } from './push-rules.js';
import { FULL_SHA, MemoTable } from './object-memo.js';
import { networkRoot } from './pulls.js';
import {
  actor,
  field,
  flag,
  list,
  numberParam,
  ok,
  openPullsAt,
  paginate,
  pullOf,
  repoOf,
  text,
  type Handler,
  type HandlerContext,
  type Host,
  type Need,
  type Reply,
} from './rest.js';
import { gitStdin, rawCommit, type Person } from './signing.js';
import {
  isoNow,
  type CheckAnnotationRecord,
  type CheckRunRecord,
  type CheckSuiteRecord,
  type IssueRecord,
  type RepoRecord,
  type ReviewRecord,
  type UserRecord,
} from './state.js';
import type { CheckConclusion, CheckStatus } from './types.js';
import { nodeId, type JsonObject } from './wire.js';

const CHECKS_WRITE: Need = [['checks', 'write']];
const CONTENTS_READ: Need = [['contents', 'read']];
const CONTENTS_WRITE: Need = [['contents', 'write']];
const PULLS_READ: Need = [['pull_requests', 'read']];
const PULLS_WRITE: Need = [['pull_requests', 'write']];
const ADMIN_READ: Need = [['administration', 'read']];
const ADMIN_WRITE: Need = [['administration', 'write']];

const CONCLUSIONS: readonly string[] = [
  'success',
  'failure',
  'neutral',
  'cancelled',
  'skipped',
  'timed_out',
  'action_required',
];

function obj(value: unknown): Record<string, unknown> | null {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : null;
}

/** The caller as the pusher the ref rules know. */
function pusherOf(ctx: HandlerContext): Pusher {
  if (ctx.caller.kind === 'installation')
    return { kind: 'installation', token: ctx.caller.token, user: ctx.caller.user };
  if (ctx.caller.kind === 'user') return { kind: 'user', user: ctx.caller.user };
  throw new HttpError(401, 'Bad credentials');
}

function apiBase(host: Host, repo: RepoRecord): string {
  return `${host.url}/repos/${repo.owner.login}/${repo.name}`;
}

// ---- check runs ---------------------------------------------------------------------------------

/** Which App a caller's check runs belong to: a workflow's token makes GitHub Actions' runs. */
function checkAppOf(ctx: HandlerContext): 'actions' | 'app' {
  return ctx.caller.kind === 'installation' && ctx.caller.token.actor === 'github-actions[bot]'
    ? 'actions'
    : 'app';
}

function annotationsOf(output: Record<string, unknown> | null): CheckAnnotationRecord[] {
  const items = Array.isArray(output?.annotations) ? (output.annotations as unknown[]) : [];
  if (items.length > 50)
    throw validationFailed([
      {
        resource: 'CheckRun',
        field: 'output.annotations',
        code: 'invalid',
        message: 'Only 50 annotations may be sent per request',
      },
    ]);
  return items.map((item) => {
    const a = obj(item) ?? {};
    const startLine = Number(a.start_line);
    const endLine = Number(a.end_line);
    if (endLine < startLine)
      throw validationFailed([
        {
          resource: 'CheckRun',
          field: 'output.annotations',
          code: 'invalid',
          message: 'end_line must be at or after start_line',
        },
      ]);
    const level = a.annotation_level;
    return {
      path: String(a.path),
      startLine,
      endLine,
      level: level === 'warning' || level === 'failure' ? level : 'notice',
      message: String(a.message),
      title: typeof a.title === 'string' ? a.title : null,
      rawDetails: typeof a.raw_details === 'string' ? a.raw_details : null,
    };
  });
}

/** Status and conclusion after a create or update body: a conclusion completes the run, as on GitHub. */
function statusOf(
  body: unknown,
  current: { status: CheckStatus; conclusion: CheckConclusion | null },
): { status: CheckStatus; conclusion: CheckConclusion | null } {
  const conclusion = text(body, 'conclusion');
  const status = text(body, 'status');
  if (conclusion !== undefined) {
    if (!CONCLUSIONS.includes(conclusion))
      throw validationFailed([{ resource: 'CheckRun', field: 'conclusion', code: 'invalid' }]);
    return { status: 'completed', conclusion: conclusion as CheckConclusion };
  }
  if (status === 'completed' || (status === undefined && text(body, 'completed_at') !== undefined))
    throw validationFailed([
      {
        resource: 'CheckRun',
        field: 'conclusion',
        code: 'missing_field',
        message: 'conclusion is required when status is completed',
      },
    ]);
  if (status === 'queued' || status === 'in_progress')
    return current.status === 'completed' ? current : { status, conclusion: null };
  if (status !== undefined)
    throw validationFailed([
      {
        resource: 'CheckRun',
        field: 'status',
        code: 'invalid',
        message: `${status} is not a status a check run can be given here`,
      },
    ]);
  return current;
}

function appSuite(host: Host, repo: RepoRecord, sha: string, branch: string | null): CheckSuiteRecord {
  const existing = repo.appCheckSuites.get(sha);
  if (existing !== undefined) return existing;
  const now = isoNow();
  const suite: CheckSuiteRecord = {
    id: host.world.nextId('checkSuite'),
    workflowRunId: 0,
    headSha: sha,
    headBranch: branch,
    before: null,
    createdAt: now,
    updatedAt: now,
    workflow: { id: 0, name: '', path: '', createdAt: now },
    completion: null,
  };
  repo.appCheckSuites.set(sha, suite);
  return suite;
}

async function createCheckRun(ctx: HandlerContext, host: Host): Promise<Reply> {
  const repo = repoOf(ctx, host);
  const user = actor(ctx);
  const headSha = text(ctx.body, 'head_sha') ?? '';
  const sha = /^[0-9a-f]{40}$/.test(headSha) ? await resolveCommit(repo.bareDir, headSha) : null;
  if (sha !== headSha) throw new HttpError(422, `No commit found for SHA: ${headSha}`);
  const output = obj(field(ctx.body, 'output'));
  const annotations = annotationsOf(output);
  const { status, conclusion } = statusOf(ctx.body, { status: 'queued', conclusion: null });
  const app = checkAppOf(ctx);
  const pulls = await openPullsAt(repo, sha, host);
  const branch = pulls[0]?.pull?.head.ref ?? null;
  const suite =
    app === 'actions'
      ? host.world.ensureCheckSuite(repo, sha, branch, await resolveCommit(repo.bareDir, `${sha}^`))
      : appSuite(host, repo, sha, branch);
  const now = isoNow();
  const run: CheckRunRecord = {
    id: host.world.nextId('checkRun'),
    repo,
    app,
    suite,
    name: text(ctx.body, 'name') ?? '',
    externalId: text(ctx.body, 'external_id') ?? '',
    status,
    conclusion,
    startedAt: text(ctx.body, 'started_at') ?? now,
    completedAt: status === 'completed' ? (text(ctx.body, 'completed_at') ?? now) : null,
    output: {
      title: typeof output?.title === 'string' ? output.title : null,
      summary: typeof output?.summary === 'string' ? output.summary : null,
      text: typeof output?.text === 'string' ? output.text : null,
    },
    annotations,
    detailsUrl: text(ctx.body, 'details_url') ?? null,
    log: '',
  };
  host.world.addCheckRun(run);
  const body = host.wire.checkRun(run, pulls);
  host.echo('check_run', 'created', {
    owner: repo.owner.login,
    repo: repo.name,
    sender: user.login,
    checkRun: run.id,
  });
  return ok(body, 201);
}

async function updateCheckRun(ctx: HandlerContext, host: Host): Promise<Reply> {
  const repo = repoOf(ctx, host);
  const user = actor(ctx);
  const run = host.world.checkRuns.get(numberParam(ctx, 'check_run_id'));
  if (run?.repo !== repo) throw notFound();
  // Only the App that made a check run may change it.
  if (run.app !== checkAppOf(ctx)) throw new HttpError(403, 'Resource not accessible by integration');
  const output = obj(field(ctx.body, 'output'));
  const annotations = annotationsOf(output);
  const wasCompleted = run.status === 'completed';
  const { status, conclusion } = statusOf(ctx.body, run);
  const name = text(ctx.body, 'name');
  if (name !== undefined) run.name = name;
  const externalId = text(ctx.body, 'external_id');
  if (externalId !== undefined) run.externalId = externalId;
  const detailsUrl = text(ctx.body, 'details_url');
  if (detailsUrl !== undefined) run.detailsUrl = detailsUrl;
  const startedAt = text(ctx.body, 'started_at');
  if (startedAt !== undefined) run.startedAt = startedAt;
  run.status = status;
  run.conclusion = conclusion;
  if (status === 'completed' && !wasCompleted) run.completedAt = text(ctx.body, 'completed_at') ?? isoNow();
  if (output !== null)
    run.output = {
      title: typeof output.title === 'string' ? output.title : run.output.title,
      summary: typeof output.summary === 'string' ? output.summary : run.output.summary,
      text: typeof output.text === 'string' ? output.text : run.output.text,
    };
  // Annotations of each update are added to the run's, as GitHub does.
  run.annotations.push(...annotations);
  run.suite.updatedAt = isoNow();
  if (status === 'completed' && !wasCompleted)
    host.echo('check_run', 'completed', {
      owner: repo.owner.login,
      repo: repo.name,
      sender: user.login,
      checkRun: run.id,
    });
  return ok(host.wire.checkRun(run, await openPullsAt(repo, run.suite.headSha, host)));
}

// ---- commits and the git database ---------------------------------------------------------------

interface ParsedCommit {
  readonly sha: string;
  readonly tree: string;
  readonly parents: string[];
  readonly author: Person;
  readonly committer: Person;
  readonly message: string;
  readonly raw: string;
}

function parsePerson(value: string): Person {
  const match = /^(.*) <([^>]*)> (\d+) ([+-]\d{4})$/.exec(value);
  return match === null
    ? { name: value, email: '', at: 0, tz: '+0000' }
    : { name: match[1] ?? '', email: match[2] ?? '', at: Number(match[3]), tz: match[4] ?? '+0000' };
}

async function parsedCommit(repo: RepoRecord, sha: string): Promise<ParsedCommit | null> {
  const raw = await rawCommit(repo.bareDir, sha);
  if (raw === null) return null;
  const split = raw.indexOf('\n\n');
  const header = split < 0 ? raw : raw.slice(0, split);
  let tree = '';
  const parents: string[] = [];
  let author = parsePerson('');
  let committer = parsePerson('');
  for (const line of header.split('\n')) {
    if (line.startsWith('tree ')) tree = line.slice(5);
    else if (line.startsWith('parent ')) parents.push(line.slice(7));
    else if (line.startsWith('author ')) author = parsePerson(line.slice(7));
    else if (line.startsWith('committer ')) committer = parsePerson(line.slice(10));
  }
  return { sha, tree, parents, author, committer, message: split < 0 ? '' : raw.slice(split + 2), raw };
}

function personJson(p: Person): JsonObject {
  return { name: p.name, email: p.email, date: isoNow(p.at * 1000) };
}

/** The GitHub account a commit identity belongs to: a noreply address names it, else a known login. */
function accountOf(host: Host, p: Person): UserRecord | null {
  const noreply = /^(\d+)\+([^@]+)@users\.noreply\.github\.com$/.exec(p.email);
  if (noreply !== null) return host.world.user(noreply[2] ?? '') ?? null;
  return null;
}

function verification(host: Host, c: ParsedCommit): JsonObject {
  return { ...host.signer.verify(c.raw, isoNow()) };
}

/** git/get-commit's shape. */
function gitCommitJson(host: Host, repo: RepoRecord, c: ParsedCommit): JsonObject {
  const api = apiBase(host, repo);
  const html = `${host.url}/${repo.owner.login}/${repo.name}/commit`;
  return {
    sha: c.sha,
    node_id: nodeId('Commit', parseInt(c.sha.slice(0, 8), 16)),
    url: `${api}/git/commits/${c.sha}`,
    html_url: `${html}/${c.sha}`,
    author: personJson(c.author),
    committer: personJson(c.committer),
    tree: { sha: c.tree, url: `${api}/git/trees/${c.tree}` },
    message: c.message.replace(/\n$/, ''),
    parents: c.parents.map((p) => ({ sha: p, url: `${api}/git/commits/${p}`, html_url: `${html}/${p}` })),
    verification: verification(host, c),
  };
}

/** repos/get-commit's and pulls/list-commits' shape (the former with stats and files). */
async function commitJson(
  host: Host,
  repo: RepoRecord,
  c: ParsedCommit,
  withFiles: boolean,
): Promise<JsonObject> {
  const api = apiBase(host, repo);
  const html = `${host.url}/${repo.owner.login}/${repo.name}/commit`;
  const who = (p: Person): JsonObject | null => {
    const user = accountOf(host, p);
    return user === null ? null : host.wire.user(user);
  };
  const out: JsonObject = {
    sha: c.sha,
    node_id: nodeId('Commit', parseInt(c.sha.slice(0, 8), 16)),
    commit: {
      author: personJson(c.author),
      committer: personJson(c.committer),
      message: c.message.replace(/\n$/, ''),
      tree: { sha: c.tree, url: `${api}/git/trees/${c.tree}` },
      url: `${api}/git/commits/${c.sha}`,
      comment_count: 0,
      verification: verification(host, c),
    },
    url: `${api}/commits/${c.sha}`,
    html_url: `${html}/${c.sha}`,
    comments_url: `${api}/commits/${c.sha}/comments`,
    author: who(c.author),
    committer: who(c.committer),
    parents: c.parents.map((p) => ({ sha: p, url: `${api}/commits/${p}`, html_url: `${html}/${p}` })),
  };
  if (!withFiles) return out;
  const base = c.parents[0] ?? (await git(repo.bareDir, ['hash-object', '-t', 'tree', '/dev/null'])).trim();
  const numstat = await git(repo.bareDir, ['diff', '--numstat', '-z', '--no-renames', base, c.sha]);
  const status = await git(repo.bareDir, ['diff', '--name-status', '--no-renames', base, c.sha]);
  const kinds = new Map<string, string>();
  for (const line of status.split('\n')) {
    const [kind, path] = line.split('\t');
    if (kind !== undefined && path !== undefined) kinds.set(path, kind);
  }
  const files: JsonObject[] = [];
  let additions = 0;
  let deletions = 0;
  for (const record of numstat.split('\0')) {
    const [added, deleted, path] = record.split('\t');
    if (added === undefined || deleted === undefined || path === undefined || path === '') continue;
    const a = Number(added) || 0;
    const d = Number(deleted) || 0;
    additions += a;
    deletions += d;
    const kind = kinds.get(path) ?? 'M';
    const blob = kind === 'D' ? base : c.sha;
    files.push({
      sha: (await git(repo.bareDir, ['rev-parse', `${blob}:${path}`]).catch(() => '')).trim() || null,
      filename: path,
      status: kind === 'A' ? 'added' : kind === 'D' ? 'removed' : 'modified',
      additions: a,
      deletions: d,
      changes: a + d,
      blob_url: `${host.url}/${repo.owner.login}/${repo.name}/blob/${c.sha}/${path}`,
      raw_url: `${host.url}/${repo.owner.login}/${repo.name}/raw/${c.sha}/${path}`,
      contents_url: `${api}/contents/${path}?ref=${c.sha}`,
    });
  }
  return { ...out, stats: { additions, deletions, total: additions + deletions }, files };
}

async function getCommit(ctx: HandlerContext, host: Host): Promise<Reply> {
  const repo = repoOf(ctx, host);
  const ref = ctx.params.ref ?? '';
  const sha = await resolveCommit(repo.bareDir, ref);
  if (sha === null) throw new HttpError(422, `No commit found for SHA: ${ref}`);
  const c = await parsedCommit(repo, sha);
  if (c === null) throw new HttpError(422, `No commit found for SHA: ${ref}`);
  return ok(await commitJson(host, repo, c, true));
}

async function listPullCommits(ctx: HandlerContext, host: Host): Promise<Reply> {
  const issue = pullOf(ctx, host);
  const pull = issue.pull;
  if (pull === null) throw notFound();
  await host.refreshPull(issue);
  const { repo } = issue;
  const shas = (await git(repo.bareDir, ['rev-list', '--reverse', `${pull.base.sha}..${pull.head.sha}`]))
    .split('\n')
    .filter((s) => s !== '')
    .slice(0, 250);
  const { page, headers } = paginate(
    shas,
    ctx,
    host,
    `/repos/${repo.owner.login}/${repo.name}/pulls/${issue.number}/commits`,
  );
  const out: JsonObject[] = [];
  for (const sha of page) {
    const c = await parsedCommit(repo, sha);
    if (c !== null) out.push(await commitJson(host, repo, c, false));
  }
  return ok(out, 200, headers);
}

/** The type of the object `sha` names, or null when there is none (or `sha` is not a full sha). */
async function objectType(repo: RepoRecord, sha: string): Promise<string | null> {
  if (!FULL_SHA.test(sha)) return null;
  const known = objectTypes.of(repo.bareDir).get(sha);
  if (known !== undefined) return known;
  const type = (await git(repo.bareDir, ['cat-file', '-t', sha]).catch(() => '')).trim() || null;
  // An object's type never changes; its absence may (the object can arrive with the next push).
  if (type !== null) objectTypes.of(repo.bareDir).set(sha, type);
  return type;
}

/** Object types by sha: those git named, and those the handlers here just wrote. */
const objectTypes = new MemoTable<string>(5000);

async function createBlob(ctx: HandlerContext, host: Host): Promise<Reply> {
  const repo = repoOf(ctx, host);
  const content = text(ctx.body, 'content') ?? '';
  const encoding = text(ctx.body, 'encoding') ?? 'utf-8';
  if (encoding !== 'utf-8' && encoding !== 'utf8' && encoding !== 'base64')
    throw validationFailed([
      { resource: 'Blob', field: 'encoding', code: 'invalid', message: `encoding must be utf-8 or base64` },
    ]);
  const data = encoding === 'base64' ? Buffer.from(content, 'base64') : Buffer.from(content, 'utf8');
  const sha = (await gitStdin(repo.bareDir, ['hash-object', '-t', 'blob', '-w', '--stdin'], data)).trim();
  objectTypes.of(repo.bareDir).set(sha, 'blob');
  return ok({ url: `${apiBase(host, repo)}/git/blobs/${sha}`, sha }, 201, {
    location: `${apiBase(host, repo)}/git/blobs/${sha}`,
  });
}

async function getBlob(ctx: HandlerContext, host: Host): Promise<Reply> {
  const repo = repoOf(ctx, host);
  const sha = ctx.params.file_sha ?? '';
  if ((await objectType(repo, sha)) !== 'blob') throw notFound();
  const data = await readBlob(repo.bareDir, sha);
  const base64 = data.toString('base64').replace(/.{60}/g, '$&\n');
  return ok({
    sha,
    node_id: nodeId('Blob', parseInt(sha.slice(0, 8), 16)),
    size: data.length,
    url: `${apiBase(host, repo)}/git/blobs/${sha}`,
    content: base64.endsWith('\n') || base64 === '' ? base64 : `${base64}\n`,
    encoding: 'base64',
  });
}

async function treeJson(host: Host, repo: RepoRecord, sha: string, recursive: boolean): Promise<JsonObject> {
  const out = await git(repo.bareDir, ['ls-tree', '-l', '-z', ...(recursive ? ['-r', '-t'] : []), sha]);
  const tree: JsonObject[] = [];
  for (const record of out.split('\0')) {
    const match = /^(\d+) (blob|tree|commit) ([0-9a-f]+)\s+(-|\d+)\t(.*)$/s.exec(record);
    if (match === null) continue;
    const [, mode = '', type = '', entry = '', size = '-', path = ''] = match;
    const item: JsonObject = { path, mode, type, sha: entry };
    if (type === 'blob') {
      item.size = Number(size);
      item.url = `${apiBase(host, repo)}/git/blobs/${entry}`;
    } else if (type === 'tree') {
      item.url = `${apiBase(host, repo)}/git/trees/${entry}`;
    }
    tree.push(item);
  }
  return { sha, url: `${apiBase(host, repo)}/git/trees/${sha}`, tree, truncated: false };
}

async function getTree(ctx: HandlerContext, host: Host): Promise<Reply> {
  const repo = repoOf(ctx, host);
  const name = ctx.params.tree_sha ?? '';
  if (name.startsWith('-')) throw notFound();
  const sha = (
    await git(repo.bareDir, ['rev-parse', '--verify', '--quiet', `${name}^{tree}`]).catch(() => '')
  ).trim();
  if (sha === '') throw notFound();
  return ok(await treeJson(host, repo, sha, ctx.query.recursive !== undefined));
}

/**
 * git/create-tree: `base_tree` (or an empty tree) read into a scratch index, each entry applied
 * (content written as a blob, `sha: null` deleting the path or the folder), the index written.
 */
async function createTree(ctx: HandlerContext, host: Host): Promise<Reply> {
  const repo = repoOf(ctx, host);
  const invalid = (message: string): HttpError =>
    validationFailed([{ resource: 'Tree', field: 'tree', code: 'invalid', message }]);
  const baseTree = text(ctx.body, 'base_tree');
  const index = join(tmpdir(), `github-sim-index-${randomBytes(8).toString('hex')}`);
  const env = { GIT_INDEX_FILE: index };
  try {
    if (baseTree !== undefined) {
      const type = await objectType(repo, baseTree);
      if (type !== 'tree' && type !== 'commit') throw new HttpError(422, 'base_tree is not a valid tree oid');
      await git(repo.bareDir, ['read-tree', baseTree], env);
    } else {
      await git(repo.bareDir, ['read-tree', '--empty'], env);
    }
    for (const item of list(ctx.body, 'tree') ?? []) {
      const path = text(item, 'path') ?? '';
      const mode = text(item, 'mode') ?? '100644';
      const type = text(item, 'type') ?? 'blob';
      const content = text(item, 'content');
      const sha = field(item, 'sha');
      if (path === '' || path.startsWith('/') || path.endsWith('/') || path.split('/').includes('..'))
        throw invalid(`tree.path ${JSON.stringify(path)} is not a valid path`);
      const under = (await git(repo.bareDir, ['ls-files', '-z', '--', path], env))
        .split('\0')
        .filter((p) => p !== '');
      // Mode 0 removes a path (update-index --index-info); --force-remove would need a work tree.
      if (under.length > 0)
        await gitStdin(
          repo.bareDir,
          ['update-index', '--index-info'],
          under.map((p) => `0 ${'0'.repeat(40)}\t${p}\n`).join(''),
          env,
        );
      if (sha === null) continue;
      let object: string;
      if (content !== undefined) {
        if (type !== 'blob') throw invalid('tree.content is only for blobs');
        object = (
          await gitStdin(repo.bareDir, ['hash-object', '-t', 'blob', '-w', '--stdin'], content)
        ).trim();
      } else if (typeof sha === 'string') {
        const actual = await objectType(repo, sha);
        if (actual !== type && !(type === 'commit' && mode === '160000'))
          throw invalid(`tree.sha ${sha} is not a valid ${type}`);
        object = sha;
      } else {
        throw invalid('Must supply either tree.sha or tree.content');
      }
      if (type === 'tree') await git(repo.bareDir, ['read-tree', `--prefix=${path}/`, object], env);
      else
        await git(repo.bareDir, ['update-index', '--add', '--cacheinfo', `${mode},${object},${path}`], env);
    }
    const sha = (await git(repo.bareDir, ['write-tree'], env)).trim();
    objectTypes.of(repo.bareDir).set(sha, 'tree');
    const body = await treeJson(host, repo, sha, false);
    return ok(body, 201, { location: String(body.url) });
  } finally {
    await rm(index, { force: true });
  }
}

/** The identity a caller commits as when the body names none: the App's bot or the person. */
function callerIdentity(ctx: HandlerContext): { name: string; email: string } {
  const user = actor(ctx);
  return { name: user.login, email: `${user.id}+${user.login}@users.noreply.github.com` };
}

function personFrom(value: unknown, fallback: { name: string; email: string }, at: number): Person {
  const p = obj(value);
  const date = typeof p?.date === 'string' ? Date.parse(p.date) : NaN;
  return {
    name: typeof p?.name === 'string' ? p.name : fallback.name,
    email: typeof p?.email === 'string' ? p.email : fallback.email,
    at: Number.isNaN(date) ? Math.floor(at / 1000) : Math.floor(date / 1000),
    tz: '+0000',
  };
}

/**
 * git/create-commit. GitHub signs a commit the API makes for a GitHub App (installation token)
 * with its own key when the request names no author, committer or signature: such commits are
 * `verified: true, reason: "valid"`. One with a custom identity is unsigned; one with a client's
 * `signature` carries it (unverifiable here: `unknown_key`).
 */
async function createCommit(ctx: HandlerContext, host: Host): Promise<Reply> {
  const repo = repoOf(ctx, host);
  const tree = text(ctx.body, 'tree') ?? '';
  if ((await objectType(repo, tree)) !== 'tree') throw new HttpError(422, 'Tree SHA does not exist');
  const parents = (list(ctx.body, 'parents') ?? []).map(String);
  for (const parent of parents)
    if ((await objectType(repo, parent)) !== 'commit')
      throw new HttpError(422, 'Parent SHA does not exist or is not a commit object');
  const now = Date.now();
  const identity = callerIdentity(ctx);
  const authorBody = field(ctx.body, 'author');
  const committerBody = field(ctx.body, 'committer');
  const author = personFrom(authorBody, identity, now);
  const committer = committerBody === undefined ? { ...author } : personFrom(committerBody, identity, now);
  const signature = text(ctx.body, 'signature');
  const sign =
    ctx.caller.kind === 'installation' &&
    authorBody === undefined &&
    committerBody === undefined &&
    signature === undefined;
  const sha = await host.signer.write(repo.bareDir, {
    tree,
    parents,
    author,
    committer,
    message: text(ctx.body, 'message') ?? '',
    sign,
    signature,
  });
  objectTypes.of(repo.bareDir).set(sha, 'commit');
  const c = await parsedCommit(repo, sha);
  if (c === null) throw new Error(`github-sim: the commit ${sha} just written is missing`);
  const body = gitCommitJson(host, repo, c);
  return ok(body, 201, { location: String(body.url) });
}

async function getGitCommit(ctx: HandlerContext, host: Host): Promise<Reply> {
  const repo = repoOf(ctx, host);
  const sha = ctx.params.commit_sha ?? '';
  if ((await objectType(repo, sha)) !== 'commit') throw notFound();
  const c = await parsedCommit(repo, sha);
  if (c === null) throw notFound();
  return ok(gitCommitJson(host, repo, c));
}

async function refJson(host: Host, repo: RepoRecord, ref: string, sha: string): Promise<JsonObject> {
  const type = (await objectType(repo, sha)) ?? 'commit';
  const kind = type === 'tag' ? 'tags' : type === 'commit' ? 'commits' : `${type}s`;
  return {
    ref,
    node_id: nodeId('Ref', parseInt(sha.slice(0, 8), 16)),
    url: `${apiBase(host, repo)}/git/${ref}`,
    object: { type, sha, url: `${apiBase(host, repo)}/git/${kind}/${sha}` },
  };
}

/**
 * Applies one ref change made through the API, under the repository's push lock, after the rules a
 * push meets (fork access, protected branches): refusals are 422 with GitHub's lines as the message.
 */
async function changeRef(
  ctx: HandlerContext,
  host: Host,
  repo: RepoRecord,
  update: RefUpdate,
  force: boolean,
): Promise<void> {
  await host.exclusive(repo, async () => {
    const before = await readRefs(repo.bareDir);
    const current = before.get(update.ref) ?? null;
    if (current !== update.old) throw new HttpError(422, 'Reference cannot be updated');
    if (update.old !== null && update.new !== null && !force) {
      const ff = await git(repo.bareDir, ['merge-base', '--is-ancestor', update.old, update.new]).then(
        () => true,
        () => false,
      );
      if (!ff) throw new HttpError(422, 'Update is not a fast forward');
    }
    const pusher = pusherOf(ctx);
    const refusal = await host.refuseRefUpdates(repo, pusher, [update]);
    if (refusal !== null) throw new HttpError(422, refusal.join('\n'));
    if (update.new === null) await git(repo.bareDir, ['update-ref', '-d', update.ref, update.old ?? '']);
    else if (update.old === null)
      await git(repo.bareDir, [
        'update-ref',
        update.ref,
        update.new,
        '0000000000000000000000000000000000000000',
      ]);
    else if (!(await compareAndSwapRef(repo.bareDir, update.ref, update.new, update.old)))
      throw new HttpError(422, 'Reference cannot be updated');
    const strip = (refs: ReadonlyMap<string, string>) =>
      new Map([...refs].filter(([name]) => !name.startsWith('refs/pull/')));
    await host.refsChanged(repo, strip(before), strip(await readRefs(repo.bareDir)), pusher);
  });
}

function refParam(ctx: HandlerContext): string {
  const ref = (ctx.params.ref ?? '').replace(/^refs\//, '');
  if (ref === '') throw notFound();
  return `refs/${ref}`;
}

async function createRef(ctx: HandlerContext, host: Host): Promise<Reply> {
  const repo = repoOf(ctx, host);
  const ref = text(ctx.body, 'ref') ?? '';
  const sha = text(ctx.body, 'sha') ?? '';
  if (!/^refs\/[^/]+\/.+/.test(ref) || ref.includes('..') || ref.endsWith('/') || ref.endsWith('.lock'))
    throw new HttpError(422, `${ref} is not a valid ref name.`);
  if ((await objectType(repo, sha)) === null) throw new HttpError(422, 'Object does not exist');
  if ((await readRefs(repo.bareDir)).has(ref)) throw new HttpError(422, 'Reference already exists');
  await changeRef(ctx, host, repo, { ref, old: null, new: sha }, false);
  const body = await refJson(host, repo, ref, sha);
  return ok(body, 201, { location: String(body.url) });
}

async function getRef(ctx: HandlerContext, host: Host): Promise<Reply> {
  const repo = repoOf(ctx, host);
  const ref = refParam(ctx);
  const sha = (await readRefs(repo.bareDir)).get(ref);
  if (sha === undefined) throw notFound();
  return ok(await refJson(host, repo, ref, sha));
}

async function updateRef(ctx: HandlerContext, host: Host): Promise<Reply> {
  const repo = repoOf(ctx, host);
  const ref = refParam(ctx);
  const sha = text(ctx.body, 'sha') ?? '';
  const old = (await readRefs(repo.bareDir)).get(ref);
  if (old === undefined || ref.startsWith('refs/pull/')) throw new HttpError(422, 'Reference does not exist');
  if ((await objectType(repo, sha)) === null) throw new HttpError(422, 'Object does not exist');
  if (old !== sha) await changeRef(ctx, host, repo, { ref, old, new: sha }, flag(ctx.body, 'force') ?? false);
  return ok(await refJson(host, repo, ref, sha));
}

async function deleteRef(ctx: HandlerContext, host: Host): Promise<Reply> {
  const repo = repoOf(ctx, host);
  const ref = refParam(ctx);
  const old = (await readRefs(repo.bareDir)).get(ref);
  if (old === undefined || ref.startsWith('refs/pull/')) throw new HttpError(422, 'Reference does not exist');
  await changeRef(ctx, host, repo, { ref, old, new: null }, true);
  return { status: 204 };
}

// ---- branch protection ------------------------------------------------------------------------

/** The repository and an existing branch of it, for a caller who administers it. */
async function protectedBranchOf(
  ctx: HandlerContext,
  host: Host,
): Promise<{ repo: RepoRecord; branch: string }> {
  const repo = repoOf(ctx, host);
  // A person needs the admin role; GitHub hides the settings from others behind a 404.
  if (ctx.caller.kind === 'user' && host.world.permission(repo, ctx.caller.user.login) !== 'admin')
    throw notFound();
  const branch = ctx.params.branch ?? '';
  if ((await resolveCommit(repo.bareDir, `refs/heads/${branch}`)) === null)
    throw new HttpError(404, 'Branch not found');
  return { repo, branch };
}

function existingProtection(repo: RepoRecord, branch: string) {
  const p = repo.protections.get(branch);
  if (p === undefined) throw new HttpError(404, 'Branch not protected');
  return p;
}

function signaturesJson(host: Host, repo: RepoRecord, branch: string, enabled: boolean): JsonObject {
  return {
    url: `${apiBase(host, repo)}/branches/${encodeURIComponent(branch)}/protection/required_signatures`,
    enabled,
  };
}

// ---- reviews ------------------------------------------------------------------------------------

interface DiffFile {
  /** Right-side line numbers a comment may be on, with the hunk text up to each. */
  readonly lines: Map<number, string>;
}

/** The pull request's diff (merge base to head), by file: which lines of the new side are in it. */
async function pullDiff(issue: IssueRecord): Promise<Map<string, DiffFile>> {
  const pull = issue.pull;
  if (pull === null) return new Map();
  const out = await git(issue.repo.bareDir, ['diff', '--no-renames', `${pull.base.sha}...${pull.head.sha}`]);
  const files = new Map<string, DiffFile>();
  let current: DiffFile | null = null;
  let hunk: string[] = [];
  let right = 0;
  for (const line of out.split('\n')) {
    if (line.startsWith('diff --git ')) {
      current = null;
      continue;
    }
    if (line.startsWith('+++ ')) {
      const path = line.slice(4);
      if (path !== '/dev/null') {
        current = { lines: new Map() };
        files.set(path.replace(/^b\//, ''), current);
      } else {
        current = null;
      }
      continue;
    }
    if (line.startsWith('--- ')) {
      const path = line.slice(4);
      if (path !== '/dev/null') files.set(path.replace(/^a\//, ''), { lines: new Map() });
      continue;
    }
    const header = /^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(line);
    if (header !== null) {
      right = Number(header[1]);
      hunk = [line];
      continue;
    }
    if (current === null || hunk.length === 0) continue;
    if (line.startsWith('+') || line.startsWith(' ')) {
      hunk.push(line);
      current.lines.set(right, hunk.join('\n'));
      right++;
    } else if (line.startsWith('-')) {
      hunk.push(line);
    }
  }
  return files;
}

function unprocessable(...errors: string[]): HttpError {
  return new HttpError(422, 'Unprocessable Entity', { errors });
}

async function createReview(ctx: HandlerContext, host: Host): Promise<Reply> {
  const issue = pullOf(ctx, host);
  const pull = issue.pull;
  if (pull === null) throw notFound();
  const user = actor(ctx);
  await host.refreshPull(issue);
  const event = text(ctx.body, 'event');
  const body = text(ctx.body, 'body') ?? '';
  const comments = list(ctx.body, 'comments') ?? [];
  if (issue.state !== 'open' && event !== undefined)
    throw unprocessable('Can not review a closed pull request');
  if (issue.user.id === user.id && event === 'APPROVE')
    throw unprocessable('Can not approve your own pull request');
  if (issue.user.id === user.id && event === 'REQUEST_CHANGES')
    throw unprocessable('Can not request changes on your own pull request');
  if (event === 'REQUEST_CHANGES' && body.trim() === '')
    throw unprocessable('Body is required when using REQUEST_CHANGES or COMMENT events');
  if (event === 'COMMENT' && body.trim() === '' && comments.length === 0)
    throw unprocessable('Body is required when using REQUEST_CHANGES or COMMENT events');
  if (event === undefined && pull.reviews.some((r) => r.user.id === user.id && r.state === 'PENDING'))
    throw unprocessable('User can only have one pending review per pull request');
  const commitId = text(ctx.body, 'commit_id') ?? pull.head.sha;
  if ((await objectType(issue.repo, commitId)) !== 'commit') throw unprocessable('Commit not found');
  const diff = await pullDiff(issue);
  const placed = comments.map((c) => place(diff, c));
  const now = host.world.now();
  const review: ReviewRecord = {
    id: host.world.nextId('review'),
    user,
    body,
    state:
      event === 'APPROVE'
        ? 'APPROVED'
        : event === 'REQUEST_CHANGES'
          ? 'CHANGES_REQUESTED'
          : event === 'COMMENT'
            ? 'COMMENTED'
            : 'PENDING',
    commitId,
    submittedAt: event === undefined ? null : now,
  };
  pull.reviews.push(review);
  for (const p of placed)
    host.world.addReviewComment(
      issue,
      user,
      p.body,
      { path: p.path, line: p.line, commitId, diffHunk: p.hunk, inReplyToId: null },
      review,
    );
  issue.updatedAt = now;
  return ok(host.wire.review(issue, review));
}

/** Where a review comment goes in the diff; 422 with GitHub's reasons when it is not in it. */
function place(
  diff: ReadonlyMap<string, DiffFile>,
  c: unknown,
): { path: string; line: number | null; body: string; hunk: string } {
  const path = text(c, 'path') ?? '';
  const body = text(c, 'body') ?? '';
  const file = diff.get(path);
  if (file === undefined) throw unprocessable('Path could not be resolved');
  if (text(c, 'subject_type') === 'file') return { path, line: null, body, hunk: '' };
  if (text(c, 'side') === 'LEFT')
    throw unprocessable('github-sim: comments on the LEFT side of a diff are not simulated');
  const line = field(c, 'line');
  const position = field(c, 'position');
  let target: number | undefined;
  if (typeof line === 'number') target = line;
  else if (typeof position === 'number') target = [...file.lines.keys()][position - 1];
  if (target === undefined) throw unprocessable('Line could not be resolved');
  const hunk = file.lines.get(target);
  if (hunk === undefined) throw unprocessable('Pull request review thread line must be part of the diff');
  return { path, line: target, body, hunk };
}

async function createReviewComment(ctx: HandlerContext, host: Host): Promise<Reply> {
  const issue = pullOf(ctx, host);
  const pull = issue.pull;
  if (pull === null) throw notFound();
  const user = actor(ctx);
  await host.refreshPull(issue);
  const commitId = text(ctx.body, 'commit_id') ?? '';
  if ((await objectType(issue.repo, commitId)) !== 'commit')
    throw validationFailed([{ resource: 'PullRequestReviewComment', field: 'commit_id', code: 'invalid' }]);
  const replyTo = field(ctx.body, 'in_reply_to');
  let comment;
  if (typeof replyTo === 'number') {
    const target = host.world.reviewComments.get(replyTo);
    if (target === undefined || target.repo !== issue.repo || target.issueNumber !== issue.number)
      throw notFound();
    comment = host.world.addReviewComment(issue, user, text(ctx.body, 'body') ?? '', {
      path: target.path,
      line: target.line,
      commitId: target.commitId,
      diffHunk: target.diffHunk,
      inReplyToId: target.inReplyToId ?? target.id,
    });
  } else {
    const p = place(await pullDiff(issue), ctx.body);
    comment = host.world.addReviewComment(issue, user, p.body, {
      path: p.path,
      line: p.line,
      commitId,
      diffHunk: p.hunk,
      inReplyToId: null,
    });
  }
  const body = host.wire.reviewComment(issue, comment);
  host.echo('pull_request_review_comment', 'created', {
    owner: issue.repo.owner.login,
    repo: issue.repo.name,
    pull: issue.number,
    sender: user.login,
    comment: { id: comment.id, body: comment.body },
  });
  return ok(body, 201, { location: String(body.url) });
}

// ---- forks --------------------------------------------------------------------------------------

/**
 * repos/create-fork: a person's token forks into their account; an installation token only into an
 * account named by `organization` (GitHub Apps have no account of their own to fork into). An
 * existing fork of the network by that owner is returned as it is.
 */
async function createFork(ctx: HandlerContext, host: Host): Promise<Reply> {
  const source = repoOf(ctx, host);
  const organization = text(ctx.body, 'organization');
  let owner: UserRecord;
  if (organization !== undefined) {
    const account = host.world.user(organization);
    if (account === undefined)
      throw validationFailed([{ resource: 'Repository', field: 'organization', code: 'invalid' }]);
    owner = account;
  } else if (ctx.caller.kind === 'user') {
    owner = ctx.caller.user;
  } else {
    throw new HttpError(403, 'Resource not accessible by integration');
  }
  const root = networkRoot(source);
  const existing = [...host.world.repos.values()].find(
    (r) => r.owner.id === owner.id && r !== root && networkRoot(r) === root,
  );
  if (owner.id === source.owner.id && existing === undefined)
    throw validationFailed([
      { resource: 'Repository', code: 'custom', message: 'You cannot fork a repository you own' },
    ]);
  const fork =
    existing ??
    (await host.fork(
      source,
      owner,
      freeName(host, owner, text(ctx.body, 'name') ?? source.name),
      flag(ctx.body, 'default_branch_only') ?? false,
      ctx.caller.kind === 'installation',
    ));
  const permission =
    ctx.caller.kind === 'user' ? host.world.permission(fork, ctx.caller.user.login) : 'admin';
  return ok(host.wire.repository(fork, permission, true), 202);
}

function freeName(host: Host, owner: UserRecord, name: string): string {
  if (host.world.repo(owner.login, name) === undefined) return name;
  for (let n = 1; ; n++)
    if (host.world.repo(owner.login, `${name}-${n}`) === undefined) return `${name}-${n}`;
}

// ---- the table ----------------------------------------------------------------------------------

export const NATIVE_HANDLERS: Readonly<Record<string, Handler>> = {
  'checks/create': { auth: 'installation', needs: CHECKS_WRITE, run: createCheckRun },
  'checks/update': { auth: 'installation', needs: CHECKS_WRITE, run: updateCheckRun },
  'repos/get-commit': { auth: 'installation', users: true, needs: CONTENTS_READ, run: getCommit },
  'pulls/list-commits': { auth: 'installation', users: true, needs: PULLS_READ, run: listPullCommits },
  'git/create-blob': { auth: 'installation', users: true, needs: CONTENTS_WRITE, run: createBlob },
  'git/get-blob': { auth: 'installation', users: true, needs: CONTENTS_READ, run: getBlob },
  'git/create-tree': { auth: 'installation', users: true, needs: CONTENTS_WRITE, run: createTree },
  'git/get-tree': { auth: 'installation', users: true, needs: CONTENTS_READ, run: getTree },
  'git/create-commit': { auth: 'installation', users: true, needs: CONTENTS_WRITE, run: createCommit },
  'git/get-commit': { auth: 'installation', users: true, needs: CONTENTS_READ, run: getGitCommit },
  'git/create-ref': { auth: 'installation', users: true, needs: CONTENTS_WRITE, run: createRef },
  'git/get-ref': { auth: 'installation', users: true, needs: CONTENTS_READ, run: getRef },
  'git/update-ref': { auth: 'installation', users: true, needs: CONTENTS_WRITE, run: updateRef },
  'git/delete-ref': { auth: 'installation', users: true, needs: CONTENTS_WRITE, run: deleteRef },
  'repos/get-branch-protection': {
    auth: 'installation',
    users: true,
    needs: ADMIN_READ,
    async run(ctx, host) {
      const { repo, branch } = await protectedBranchOf(ctx, host);
      return ok(protectionJson(host.url, repo, branch, existingProtection(repo, branch)));
    },
  },
  'repos/update-branch-protection': {
    auth: 'installation',
    users: true,
    needs: ADMIN_WRITE,
    async run(ctx, host) {
      const { repo, branch } = await protectedBranchOf(ctx, host);
      const record = protectionFromBody(ctx.body, repo.protections.get(branch));
      repo.protections.set(branch, record);
      return ok(protectionJson(host.url, repo, branch, record));
    },
  },
  'repos/delete-branch-protection': {
    auth: 'installation',
    users: true,
    needs: ADMIN_WRITE,
    async run(ctx, host) {
      const { repo, branch } = await protectedBranchOf(ctx, host);
      existingProtection(repo, branch);
      repo.protections.delete(branch);
      return { status: 204 };
    },
  },
  'repos/get-commit-signature-protection': {
    auth: 'installation',
    users: true,
    needs: ADMIN_READ,
    async run(ctx, host) {
      const { repo, branch } = await protectedBranchOf(ctx, host);
      const p = existingProtection(repo, branch);
      return ok(signaturesJson(host, repo, branch, p.requiredSignatures));
    },
  },
  'repos/create-commit-signature-protection': {
    auth: 'installation',
    users: true,
    needs: ADMIN_WRITE,
    async run(ctx, host) {
      const { repo, branch } = await protectedBranchOf(ctx, host);
      const p = existingProtection(repo, branch);
      p.requiredSignatures = true;
      return ok(signaturesJson(host, repo, branch, true));
    },
  },
  'repos/delete-commit-signature-protection': {
    auth: 'installation',
    users: true,
    needs: ADMIN_WRITE,
    async run(ctx, host) {
      const { repo, branch } = await protectedBranchOf(ctx, host);
      existingProtection(repo, branch).requiredSignatures = false;
      return { status: 204 };
    },
  },
  'pulls/create-review': { auth: 'installation', users: true, needs: PULLS_WRITE, run: createReview },
  'pulls/create-review-comment': {
    auth: 'installation',
    users: true,
    needs: PULLS_WRITE,
    run: createReviewComment,
  },
  'repos/create-fork': { auth: 'installation', users: true, needs: CONTENTS_READ, run: createFork },
};
