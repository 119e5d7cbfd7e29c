import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { DEFAULT_LIMITS } from '../../src/config/agent-env.js';
import { parseRepoConfig } from '../../src/config/repo-config.js';
import { FileEventStore } from '../../src/events/file-event-store.js';
import { SCHEMA_VERSION, type BaseState, type NewEvent } from '../../src/events/schema.js';
import type { FixJob } from '../../src/queue/payloads.js';
import type { GitHubSim } from '../support/github-sim/index.js';
import type { AgentServerOptions } from '../../src/server/options.js';
import { startAgentServer } from '../../src/server/server.js';

export const ADMIN_TOKEN = 'admin-token-0123456789abcdef';
export const quiet = pino({ level: 'silent' });

export function fixJob(repo: string, issue: number, overrides: Partial<FixJob> = {}): FixJob {
  const [owner = 'acme', name = 'calc'] = repo.split('/');
  return {
    v: 1,
    kind: 'fix-issue',
    installationId: 27_182_818,
    repo: { id: 1000 + name.length, owner, name },
    issue: { number: issue, title: `Issue ${issue} of ${repo}` },
    pull: null,
    instructions: [],
    reviewComments: [],
    trigger: {
      kind: 'label',
      deliveryId: `d-${repo}-${issue}`,
      sender: { login: 'maria', id: 7 },
      commentId: null,
      replyTo: null,
    },
    config: { ...parseRepoConfig(null, { label: 'agent', handle: '@agent' }) },
    progressCommentId: null,
    requestedAt: new Date().toISOString(),
    ...overrides,
  };
}

function baseState(id: string, repo: string, issue: number): BaseState {
  return {
    schemaVersion: SCHEMA_VERSION,
    conversationId: id,
    createdAt: new Date().toISOString(),
    task: { title: `Issue ${issue}`, body: 'body', instructions: [], source: `${repo}#${issue}` },
    workspace: { path: '/tmp/ws', baseCommit: 'a'.repeat(40), baseTree: 'b'.repeat(40) },
    model: 'claude-sim',
    sandbox: 'local',
    testCommand: 'npm test',
    testCommandSource: 'package.json',
    limits: DEFAULT_LIMITS,
  };
}

/** One model turn with a bash call and its observation (three events). */
export function step(n: number, text = `step ${n}`): NewEvent[] {
  const toolUseId = `toolu_${n}`;
  return [
    {
      kind: 'model_response',
      model: 'claude-sim',
      requestId: `req_${n}`,
      content: [
        { type: 'text', text },
        { type: 'tool_use', id: toolUseId, name: 'bash', input: { command: `echo ${n}` } },
      ],
      stopReason: 'tool_use',
      usage: { inputTokens: 100, outputTokens: 20, cacheReadTokens: 5, cacheWriteTokens: 0 },
      usd: 0.001,
      latencyMs: 250,
      attempts: 1,
      promptTokensEstimate: 100,
    },
    { kind: 'action', toolUseId, tool: 'bash', input: { command: `echo ${n}` } },
    {
      kind: 'observation',
      toolUseId,
      tool: 'bash',
      isError: false,
      content: `${n}\n`,
      exitCode: 0,
      durationMs: 5,
    },
  ];
}

export const outcomeEvent = (outcome: 'resolved' | 'cancelled' = 'resolved', reason = 'done'): NewEvent => ({
  kind: 'outcome',
  outcome,
  reason,
  summary: 'fixed',
  diffStat: '1 file changed',
});

/** A job folder as a worker leaves it: job.json and a trajectory with `steps` steps. */
export function makeRun(
  workDir: string,
  id: string,
  options: {
    repo: string;
    issue: number;
    steps: number;
    finished: boolean;
    requestedAt?: string;
    /** The repository's id on GitHub (default: a made-up one). */
    repoId?: number;
  },
): FileEventStore {
  const dir = join(workDir, 'jobs', id);
  mkdirSync(dir, { recursive: true });
  const base = fixJob(options.repo, options.issue);
  const payload = fixJob(options.repo, options.issue, {
    requestedAt: options.requestedAt ?? new Date().toISOString(),
    ...(options.repoId === undefined ? {} : { repo: { ...base.repo, id: options.repoId } }),
  });
  writeFileSync(
    join(dir, 'job.json'),
    JSON.stringify({ schemaVersion: 1, id, payload, startedAt: new Date().toISOString() }),
  );
  const store = FileEventStore.create(join(dir, 'trajectory'), baseState(id, options.repo, options.issue));
  for (let i = 1; i <= options.steps; i++) for (const e of step(i)) store.appendSync(e);
  if (options.finished) store.appendSync(outcomeEvent());
  return store;
}

export function serverOptions(
  workDir: string,
  overrides: Partial<AgentServerOptions> = {},
): AgentServerOptions & { port: number; host: string } {
  return {
    port: 0,
    host: '127.0.0.1',
    workDir,
    publicUrl: null,
    adminToken: ADMIN_TOKEN,
    sessionSecret: null,
    github: {
      apiUrl: 'http://127.0.0.1:9',
      webUrl: 'http://127.0.0.1:9',
      clientId: null,
      clientSecret: null,
    },
    app: null,
    queues: null,
    redis: null,
    settings: { redisUrl: 'redis://127.0.0.1:9', prefix: 'srv', jobAttempts: 1, retryBackoffMs: 10 },
    secrets: [ADMIN_TOKEN],
    logger: quiet,
    pollMs: 100,
    webAssetsDir: join(workDir, 'no-web'),
    ...overrides,
  };
}

export const startServer = startAgentServer;

export const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

/** Reads an SSE response until `stop` says so; returns the parsed messages. */
export async function readSse(
  res: Response,
  stop: (messages: SseMessage[]) => boolean,
  controller: AbortController,
): Promise<SseMessage[]> {
  const messages: SseMessage[] = [];
  const body = res.body;
  if (body === null) throw new Error('no body');
  const decoder = new TextDecoder();
  let buffer = '';
  const reader = (body as ReadableStream<Uint8Array>).getReader();
  try {
    for (;;) {
      const chunk = await reader.read();
      if (chunk.done) break;
      buffer += decoder.decode(chunk.value, { stream: true });
      let cut = buffer.indexOf('\n\n');
      while (cut !== -1) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const m: SseMessage = { event: 'message', data: '', id: null, comment: false };
        const data: string[] = [];
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) m.comment = true;
          else if (line.startsWith('event: ')) m.event = line.slice(7);
          else if (line.startsWith('data: ')) data.push(line.slice(6));
          else if (line.startsWith('id: ')) m.id = line.slice(4);
        }
        m.data = data.join('\n');
        if (!m.comment && (data.length > 0 || m.id !== null)) messages.push(m);
        if (stop(messages)) {
          controller.abort();
          return messages;
        }
        cut = buffer.indexOf('\n\n');
      }
    }
  } catch (error) {
    if (!controller.signal.aborted) throw error;
  }
  return messages;
}

export interface SseMessage {
  event: string;
  data: string;
  id: string | null;
  comment: boolean;
}

/** The cookies a response sets, as a Cookie header (cleared ones left out). */
export function cookiesOf(res: Response): string {
  return res.headers
    .getSetCookie()
    .map((c) => c.split(';')[0] ?? '')
    .filter((c) => !c.endsWith('='))
    .join('; ');
}

/**
 * "Sign in with GitHub" the way a browser does it, against the GitHub simulator: the server's
 * redirect, the simulator's approval as `login`, the callback with the state cookie. Returns the
 * session cookie and where the server sends the browser next.
 */
export async function signInWithGitHub(
  serverUrl: string,
  sim: GitHubSim,
  login: string,
  next: string,
): Promise<{ cookie: string; location: string }> {
  const start = await fetch(`${serverUrl}/auth/github/login?next=${encodeURIComponent(next)}`, {
    redirect: 'manual',
  });
  assert.equal(start.status, 302);
  const authorize = new URL(start.headers.get('location') ?? '');
  assert.equal(`${authorize.origin}${authorize.pathname}`, `${sim.url}/login/oauth/authorize`);
  assert.equal(authorize.searchParams.get('client_id'), sim.app.clientId);
  assert.equal(authorize.searchParams.get('redirect_uri'), `${serverUrl}/auth/github/callback`);
  const stateCookie = cookiesOf(start);
  assert.match(stateCookie, /^ia_oauth_state=/);
  sim.oauth.authorizeAs(login);
  const approved = await fetch(authorize, { redirect: 'manual' });
  assert.equal(approved.status, 302);
  const callback = await fetch(approved.headers.get('location') ?? '', {
    redirect: 'manual',
    headers: { cookie: stateCookie },
  });
  assert.equal(callback.status, 302, await callback.clone().text());
  return { cookie: cookiesOf(callback), location: callback.headers.get('location') ?? '' };
}
