/** The server's JSON API, same origin; the session cookie authenticates every call. */
import type { EventsPage, Me, RunDetail, RunsPage, RunStateName, RunSummary } from './types.js';

export class ApiError extends Error {
  override readonly name = 'ApiError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** The error response's whole JSON body, for the fields some errors carry besides `error`. */
    readonly body: unknown = null,
  ) {
    super(message);
  }
}

async function request<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
  const init: RequestInit = {
    method,
    credentials: 'same-origin',
    headers:
      body === undefined
        ? { accept: 'application/json' }
        : { accept: 'application/json', 'content-type': 'application/json' },
  };
  if (body !== undefined) init.body = JSON.stringify(body);
  const res = await fetch(path, init);
  if (!res.ok) {
    let code = `http_${res.status}`;
    let message = `${method} ${path}: HTTP ${res.status}`;
    let body: unknown = null;
    try {
      const json = (await res.json()) as { error?: { code?: unknown; message?: unknown } };
      body = json;
      if (typeof json.error?.code === 'string') code = json.error.code;
      if (typeof json.error?.message === 'string') message = json.error.message;
    } catch {
      // Not JSON: keep the status line.
    }
    throw new ApiError(res.status, code, message, body);
  }
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  return (text === '' ? undefined : JSON.parse(text)) as T;
}

export function getMe(): Promise<Me> {
  return request<Me>('GET', '/api/me');
}

export function listRuns(options: {
  state?: RunStateName | '';
  before?: string | null;
  limit?: number;
}): Promise<RunsPage> {
  const q = new URLSearchParams();
  if (options.state !== undefined && options.state !== '') q.set('state', options.state);
  q.set('limit', String(options.limit ?? 50));
  if (options.before !== undefined && options.before !== null) q.set('before', options.before);
  return request<RunsPage>('GET', `/api/runs?${q.toString()}`);
}

export function getRun(id: string): Promise<RunDetail> {
  return request<RunDetail>('GET', `/api/runs/${encodeURIComponent(id)}`);
}

export function getEvents(id: string, after: number, limit = 1000): Promise<EventsPage> {
  return request<EventsPage>(
    'GET',
    `/api/runs/${encodeURIComponent(id)}/events?after=${after}&limit=${limit}`,
  );
}

export function cancelRun(id: string): Promise<{ run: RunSummary }> {
  return request<{ run: RunSummary }>('POST', `/api/runs/${encodeURIComponent(id)}/cancel`);
}

/** The month's model spend per repository the caller can read (GET /api/spend). */
export interface MonthSpend {
  readonly month: string;
  readonly ownerLimitUsd: number | null;
  readonly repositories: readonly { readonly repo: string; readonly usd: number }[];
}

export function getSpend(): Promise<MonthSpend> {
  return request<MonthSpend>('GET', '/api/spend');
}

export function signInWithToken(token: string): Promise<void> {
  return request<undefined>('POST', '/auth/token', { token });
}

export function signOut(): Promise<void> {
  return request<undefined>('POST', '/auth/logout');
}
