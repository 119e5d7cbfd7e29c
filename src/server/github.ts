import { randomUUID } from 'node:crypto';
import { createAppAuth } from '@octokit/auth-app';
import { Octokit } from '@octokit/rest';
import type { Queue } from 'bullmq';
import type { IntakeResult } from '../app/intake.js';
import { capIssueBody, type Trigger } from '../queue/trigger.js';
import { intakeJobOptions, intakeJobId } from '../queue/queues.js';
import { accessFromPermissions, type RepoAccess } from './auth.js';

const API_HEADERS = {
  accept: 'application/vnd.github+json',
  'x-github-api-version': '2022-11-28',
  'user-agent': 'issue-agent-server',
};

export class GitHubAuthError extends Error {
  override readonly name = 'GitHubAuthError';
}

/** The OAuth web flow's last step: the code GitHub handed the browser → a user access token. */
export async function exchangeCode(options: {
  readonly webUrl: string;
  readonly clientId: string;
  readonly clientSecret: string;
  readonly code: string;
  readonly redirectUri: string;
}): Promise<string> {
  const res = await fetch(`${options.webUrl}/login/oauth/access_token`, {
    method: 'POST',
    headers: {
      accept: 'application/json',
      'content-type': 'application/json',
      'user-agent': 'issue-agent-server',
    },
    body: JSON.stringify({
      client_id: options.clientId,
      client_secret: options.clientSecret,
      code: options.code,
      redirect_uri: options.redirectUri,
    }),
    signal: AbortSignal.timeout(15_000),
  });
  const body: unknown = await res.json().catch(() => null);
  const token =
    typeof body === 'object' &&
    body !== null &&
    'access_token' in body &&
    typeof body.access_token === 'string'
      ? body.access_token
      : null;
  if (!res.ok || token === null) {
    const error =
      typeof body === 'object' && body !== null && 'error' in body && typeof body.error === 'string'
        ? body.error
        : `HTTP ${res.status}`;
    throw new GitHubAuthError(`GitHub refused the sign-in code (${error})`);
  }
  return token;
}

/** GET /user with a user token. */
export async function fetchUser(apiUrl: string, token: string): Promise<{ login: string; id: number }> {
  const res = await fetch(`${apiUrl}/user`, {
    headers: { ...API_HEADERS, authorization: `Bearer ${token}` },
    signal: AbortSignal.timeout(15_000),
  });
  const body: unknown = await res.json().catch(() => null);
  if (
    !res.ok ||
    typeof body !== 'object' ||
    body === null ||
    !('login' in body) ||
    typeof body.login !== 'string' ||
    !('id' in body) ||
    typeof body.id !== 'number'
  ) {
    throw new GitHubAuthError(`GET /user failed (HTTP ${res.status})`);
  }
  return { login: body.login, id: body.id };
}

/**
 * What a user may do in a repository, asked of GitHub with their own token: `none` when the
 * repository is invisible to them (404/403), `write` with push access, else `read`.
 * `unauthorized` when the token itself is no longer valid.
 */
export async function repoAccess(
  apiUrl: string,
  token: string,
  repo: string,
  /** The repository's id when the run recorded it: a repository re-created under the old name is another one. */
  expectedId: number | null = null,
): Promise<RepoAccess | 'unauthorized'> {
  const [owner, name] = repo.split('/');
  if (owner === undefined || name === undefined || owner === '' || name === '') return 'none';
  const res = await fetch(`${apiUrl}/repos/${encodeURIComponent(owner)}/${encodeURIComponent(name)}`, {
    headers: { ...API_HEADERS, authorization: `Bearer ${token}` },
    signal: AbortSignal.timeout(15_000),
  });
  if (res.status === 401) return 'unauthorized';
  if (!res.ok) {
    await res.body?.cancel();
    return 'none';
  }
  const body: unknown = await res.json().catch(() => null);
  if (
    expectedId !== null &&
    !(typeof body === 'object' && body !== null && 'id' in body && body.id === expectedId)
  )
    return 'none';
  return accessFromPermissions(
    typeof body === 'object' && body !== null && 'permissions' in body ? body.permissions : null,
  );
}

export interface AppCredentials {
  readonly appId: number;
  readonly privateKey: string;
  readonly apiUrl: string;
}

export class StartRunError extends Error {
  override readonly name = 'StartRunError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * A "manual" trigger for the intake path, built from GitHub's answers now: the App's installation
 * on the repository (App JWT), the repository and the issue (installation token). Who asked is the
 * signed-in user (intake checks their role as for a comment) or, for the admin, the App's own bot
 * with `manual.admin` set (which intake accepts without a role check: only this server writes it).
 */
export async function manualTrigger(
  creds: AppCredentials,
  request: {
    readonly owner: string;
    readonly name: string;
    readonly issue: number;
    readonly instructions: string;
    readonly sender: { readonly login: string; readonly id: number } | 'admin';
  },
): Promise<Trigger> {
  const app = new Octokit({
    authStrategy: createAppAuth,
    auth: { appId: creds.appId, privateKey: creds.privateKey },
    baseUrl: creds.apiUrl,
  });
  let installationId: number;
  try {
    const { data } = await app.rest.apps.getRepoInstallation({ owner: request.owner, repo: request.name });
    installationId = data.id;
  } catch (error) {
    if (statusOf(error) === 404)
      throw new StartRunError(
        404,
        'not_installed',
        `the App is not installed on ${request.owner}/${request.name}`,
      );
    throw error;
  }
  const inst = new Octokit({
    authStrategy: createAppAuth,
    auth: { appId: creds.appId, privateKey: creds.privateKey, installationId },
    baseUrl: creds.apiUrl,
  });
  const { data: repo } = await inst.rest.repos.get({ owner: request.owner, repo: request.name });
  let issue: {
    number: number;
    title: string;
    body?: string | null;
    state: string;
    pull_request?: unknown;
  };
  try {
    ({ data: issue } = await inst.rest.issues.get({
      owner: request.owner,
      repo: request.name,
      issue_number: request.issue,
    }));
  } catch (error) {
    if (statusOf(error) === 404 || statusOf(error) === 410)
      throw new StartRunError(
        404,
        'no_issue',
        `${request.owner}/${request.name}#${request.issue} does not exist`,
      );
    throw error;
  }
  let sender: Trigger['sender'];
  if (request.sender === 'admin') {
    const { data: me } = await app.rest.apps.getAuthenticated();
    const { data: bot } = await inst.rest.users.getByUsername({ username: `${me?.slug ?? ''}[bot]` });
    sender = { login: bot.login, id: bot.id, type: 'Bot' };
  } else {
    sender = { login: request.sender.login, id: request.sender.id, type: 'User' };
  }
  return {
    v: 1,
    kind: 'manual',
    deliveryId: `manual-${randomUUID()}`,
    installationId,
    repo: { id: repo.id, owner: repo.owner.login, name: repo.name, private: repo.private },
    issue: {
      number: issue.number,
      title: issue.title,
      state: issue.state,
      isPullRequest: issue.pull_request != null,
      // The text the person starting the run sees now is the task (a later edit is checked at job
      // start, as for a label).
      ...(issue.pull_request != null ? {} : { body: capIssueBody(issue.body) }),
    },
    sender,
    manual: { instructions: request.instructions, admin: request.sender === 'admin' },
    receivedAt: new Date().toISOString(),
  };
}

/**
 * Hands a trigger to the App's intake processor (the same queue webhooks go to) and waits for its
 * answer, so the caller learns the job id. null when intake did not answer within the timeout (the
 * request stays queued and is processed later).
 */
export async function submitTrigger(
  intake: Queue<Trigger>,
  trigger: Trigger,
  timeoutMs = 20_000,
): Promise<IntakeResult | null> {
  await intake.add('trigger', trigger, intakeJobOptions(trigger));
  const id = intakeJobId(trigger.deliveryId);
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    // The state is read before the job's record: a job that finishes between two reads of a
    // record-then-state order reads as completed with the return value it did not have yet. BullMQ
    // writes the record's result and moves the job to `completed` in one script, so a record read
    // after `completed` was seen holds the result.
    const state = await intake.getJobState(id);
    if (state === 'completed' || state === 'failed') {
      const job = await intake.getJob(id);
      if (job === undefined)
        throw new StartRunError(502, 'intake_failed', 'the request was removed before it was answered');
      if (state === 'completed') {
        const result: unknown = job.returnvalue;
        return result as IntakeResult;
      }
      throw new StartRunError(
        502,
        'intake_failed',
        `the request could not be processed: ${job.failedReason}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return null;
}

function statusOf(error: unknown): number | null {
  return typeof error === 'object' && error !== null && 'status' in error && typeof error.status === 'number'
    ? error.status
    : null;
}
