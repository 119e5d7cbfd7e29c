import { createAppAuth } from '@octokit/auth-app';
import { Octokit } from '@octokit/rest';
import { renderProgress } from '../../publish/progress.js';
import { handOffLocked, lockKey, pendingKey, requestCancel } from '../../queue/control.js';
import { withIssueLock } from '../../queue/issue-lock.js';
import type { FixJob } from '../../queue/payloads.js';
import { jobTarget } from '../../queue/queues.js';
import type { ServerContext } from '../context.js';
import { manualTrigger, StartRunError, submitTrigger } from '../github.js';
import {
  ApiError,
  decodeURIComponentSafe,
  intParam,
  readJson,
  type Route,
  type RouteRequest,
} from '../http.js';
import { compareRuns, sortKey, type RunPosition, type RunSummary } from '../runs.js';

const MAX_INSTRUCTIONS = 20_000;

/**
 * Runs as resources: the list (paged by an opaque cursor, only the repositories the caller can
 * read), one run, starting one (`POST /api/runs`, through the same intake as a webhook) and
 * cancelling one. The old trajectory URL of PR bodies stays answered.
 */
export function runRoutes(ctx: ServerContext): Route[] {
  return [
    { method: 'GET', path: '/api/runs', handle: (r) => listRuns(ctx, r) },
    { method: 'POST', path: '/api/runs', handle: (r) => startRun(ctx, r) },
    { method: 'GET', path: /^\/api\/runs\/([^/]+)$/, handle: (r) => getRun(ctx, r) },
    { method: 'POST', path: /^\/api\/runs\/([^/]+)\/cancel$/, handle: (r) => cancelRun(ctx, r) },
    // The trajectory link of PR bodies written before the run view existed.
    {
      method: 'GET',
      path: /^\/issue-agent\/runs\/([A-Za-z0-9-]+)\/trajectory\.json$/,
      handle: (r) => legacyTrajectory(ctx, r),
    },
  ];
}

async function listRuns(ctx: ServerContext, { req, res, url }: RouteRequest): Promise<unknown> {
  const { index, json } = ctx;
  const p = ctx.requireAuth(req);
  const state = url.searchParams.get('state');
  if (state !== null && state !== 'queued' && state !== 'active' && state !== 'finished')
    throw new ApiError(400, 'bad_request', 'state must be queued, active or finished');
  const limit = intParam(url, 'limit', 50, 1, 500);
  const before = decodeCursor(url.searchParams.get('before'));
  await index.fresh();
  let runs = index.list().filter((r) => state === null || r.state === state);
  if (before !== null) runs = runs.filter((r) => compareRuns(r, before) > 0);
  runs = await ctx.visible(p, runs);
  const page = runs.slice(0, limit);
  const last = page.at(-1);
  return json(res, 200, {
    runs: page,
    next: runs.length > limit && last !== undefined ? encodeCursor(last) : null,
  });
}

async function startRun(ctx: ServerContext, { req, res }: RouteRequest): Promise<unknown> {
  const { options, index, json } = ctx;
  const p = ctx.requireAuth(req);
  ctx.checkSameOrigin(req, p);
  const body = await readJson(req);
  const fields = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {};
  const repo = fields.repo;
  const issue = fields.issue;
  const instructions = fields.instructions ?? '';
  if (typeof repo !== 'string' || !/^[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+$/.test(repo))
    throw new ApiError(400, 'bad_request', 'repo must be "owner/name"');
  if (typeof issue !== 'number' || !Number.isInteger(issue) || issue <= 0)
    throw new ApiError(400, 'bad_request', 'issue must be a positive integer');
  if (typeof instructions !== 'string' || instructions.length > MAX_INSTRUCTIONS)
    throw new ApiError(400, 'bad_request', 'instructions must be a string (at most 20,000 characters)');
  const a = await ctx.access(p, repo, null);
  if (a === 'none') throw new ApiError(404, 'not_found', `no repository ${repo}`);
  if (a !== 'write') throw new ApiError(403, 'forbidden', `starting runs needs write access to ${repo}`);
  if (options.app === null || options.queues === null)
    throw new ApiError(
      503,
      'unavailable',
      "starting runs needs the App's credentials (APP_ID, PRIVATE_KEY, WEBHOOK_SECRET) and Redis; this server runs without them",
    );
  const [owner = '', name = ''] = repo.split('/');
  let result;
  try {
    const trigger = await manualTrigger(options.app, {
      owner,
      name,
      issue,
      instructions,
      sender: p.kind === 'user' ? { login: p.login, id: p.id } : 'admin',
    });
    result = await submitTrigger(options.queues.intake, trigger, options.intakeTimeoutMs ?? 20_000);
  } catch (error) {
    if (error instanceof StartRunError) throw new ApiError(error.status, error.code, error.message);
    throw error;
  }
  if (result === null) return json(res, 202, { id: null, status: 'pending' });
  switch (result.status) {
    case 'queued':
    case 'queued_after':
    case 'duplicate':
      await index.refresh();
      return json(res, 202, { id: result.jobId, status: result.status });
    case 'refused':
      throw new ApiError(403, 'refused', result.reason);
    case 'ignored':
      throw new ApiError(409, 'ignored', result.reason);
    case 'config_error':
      throw new ApiError(422, 'config_error', result.problems.join('; '));
    case 'cancelled':
      throw new ApiError(409, 'ignored', 'the request was read as a cancel');
  }
}

async function getRun(ctx: ServerContext, { req, res, params }: RouteRequest): Promise<unknown> {
  const { index, json } = ctx;
  const id = decodeURIComponentSafe(params[0] ?? '');
  const run = await ctx.runFor(ctx.requireAuth(req), id);
  const reader = await index.reader(id);
  return json(res, 200, { run, base: reader?.base ?? null, state: reader?.state ?? null });
}

/**
 * A queued run is taken off its issue's line (and the next one handed the lock); an active one is
 * flagged, and its worker stops at its next step.
 */
async function cancelRun(ctx: ServerContext, { req, res, params }: RouteRequest): Promise<unknown> {
  const { options, index, json, log } = ctx;
  const id = decodeURIComponentSafe(params[0] ?? '');
  const p = ctx.requireAuth(req);
  ctx.checkSameOrigin(req, p);
  const run = await ctx.runFor(p, id, 'write');
  if (run.state === 'finished') throw new ApiError(409, 'finished', `run ${id} already finished`);
  const { queues, redis } = options;
  if (queues === null || redis === null) throw new ApiError(503, 'unavailable', 'the queue is not reachable');
  const by = p.kind === 'user' ? p.login : 'admin';
  const payload = index.payload(id);
  const prefix = options.settings.prefix;
  const cancelLocked = async (): Promise<'removed' | 'flagged' | 'finished'> => {
    if (payload !== null) {
      const key = pendingKey(prefix, jobTarget(payload));
      for (const raw of await redis.lrange(key, 0, -1)) {
        if (raw.includes(`"jobId":"${id}"`) && (await redis.lrem(key, 1, raw)) > 0) return 'removed';
      }
    }
    const job = await queues.fix.getJob(id);
    const state = job === undefined ? 'unknown' : await job.getState();
    if (state === 'completed' || state === 'failed') return 'finished';
    // The flag first: a worker that takes the job in the meantime stops at once.
    await requestCancel(redis, prefix, id, by);
    if (state === 'active' || job === undefined) return 'flagged';
    try {
      await job.remove();
    } catch {
      return 'flagged';
    }
    if (payload !== null) {
      await handOffLocked(redis, queues.fix, options.settings, jobTarget(payload));
    }
    return 'removed';
  };
  const outcome =
    payload === null
      ? await cancelLocked()
      : await withIssueLock(redis, lockKey(prefix, jobTarget(payload)), cancelLocked);
  if (outcome === 'finished') throw new ApiError(409, 'finished', `run ${id} already finished`);
  if (outcome === 'removed') {
    await index.recordCancelled(id, {
      at: new Date().toISOString(),
      by,
      payload,
      queuedAt: run.queuedAt,
    });
    await markCancelledOnGitHub(ctx, id, payload, by);
  }
  log.info({ job: id, by, how: outcome }, 'run cancel requested');
  await index.refresh();
  return json(res, 202, { run: index.get(id) ?? run });
}

async function legacyTrajectory(ctx: ServerContext, { req, res, params }: RouteRequest): Promise<unknown> {
  const { index, json } = ctx;
  const id = params[0] ?? '';
  await ctx.runFor(ctx.requireAuth(req), id);
  const reader = await index.reader(id);
  if (reader === null) throw new ApiError(404, 'not_found', 'no trajectory for this run on this host');
  return json(res, 200, {
    base: reader.base,
    events: reader.eventsAfter(0, Number.MAX_SAFE_INTEGER),
    state: reader.state,
  });
}

async function markCancelledOnGitHub(
  ctx: ServerContext,
  id: string,
  payload: FixJob | null,
  by: string,
): Promise<void> {
  const { options, log, redactor } = ctx;
  const app = options.app;
  if (app === null || payload?.progressCommentId == null) return;
  try {
    const octokit = new Octokit({
      authStrategy: createAppAuth,
      auth: { appId: app.appId, privateKey: app.privateKey, installationId: payload.installationId },
      baseUrl: app.apiUrl,
    });
    await octokit.rest.issues.updateComment({
      owner: payload.repo.owner,
      repo: payload.repo.name,
      comment_id: payload.progressCommentId,
      body: redactor.redact(renderProgress({ kind: 'cancelled', jobId: id, by }, redactor)),
    });
  } catch (error) {
    log.warn({ err: error, job: id }, 'could not mark the progress comment cancelled');
  }
}

/** Cursors are opaque: base64url of [sortKey, id] of the last run of the previous page. */
function encodeCursor(run: RunSummary): string {
  return Buffer.from(JSON.stringify([sortKey(run), run.id])).toString('base64url');
}

function decodeCursor(raw: string | null): RunPosition | null {
  if (raw === null || raw === '') return null;
  try {
    const value = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as unknown;
    if (Array.isArray(value) && typeof value[0] === 'string' && typeof value[1] === 'string') {
      return { queuedAt: value[0] === '' ? null : value[0], startedAt: null, id: value[1] };
    }
  } catch {
    // fall through
  }
  throw new ApiError(400, 'bad_request', 'before is not a cursor this server issued');
}
