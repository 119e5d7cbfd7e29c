import { createAppAuth } from '@octokit/auth-app';
import { retry } from '@octokit/plugin-retry';
import { throttling } from '@octokit/plugin-throttling';
import { request as baseRequest } from '@octokit/request';
import { Octokit } from '@octokit/rest';
import type { Logger } from 'pino';

export const WorkerOctokit = Octokit.plugin(throttling, retry);
export type GitHubClient = InstanceType<typeof WorkerOctokit>;

export interface AppCredentials {
  readonly appId: number;
  readonly privateKey: string;
  readonly baseUrl: string;
}

export interface InstallationToken {
  readonly token: string;
  readonly expiresAt: number;
}

/**
 * Installation tokens scoped to one repository, minted from the App's key and refreshed before they
 * expire. @octokit/auth-app caches tokens for most of an hour without looking at `expires_at`, so the
 * lifetime is tracked here: a token is renewed once less than a fifth of its life (at most 5 min)
 * is left, which keeps long jobs working when a server hands out short-lived tokens.
 */
export class InstallationTokens {
  private current: InstallationToken | null = null;
  private pending: Promise<InstallationToken> | null = null;
  private readonly auth: ReturnType<typeof createAppAuth>;
  /** Every token this process held, so the redactor can scrub them from anything posted. */
  readonly issued = new Set<string>();

  constructor(
    credentials: AppCredentials,
    readonly installationId: number,
    private readonly repositoryIds: readonly number[],
  ) {
    this.auth = createAppAuth({
      appId: credentials.appId,
      privateKey: credentials.privateKey,
      request: baseRequest.defaults({ baseUrl: credentials.baseUrl }),
    });
  }

  async get(now = Date.now()): Promise<InstallationToken> {
    const c = this.current;
    if (c !== null && c.expiresAt - now > this.margin(c, now)) return c;
    this.pending ??= this.mint().finally(() => {
      this.pending = null;
    });
    return this.pending;
  }

  private margin(c: InstallationToken, now: number): number {
    const life = Math.max(0, c.expiresAt - (this.mintedAt ?? now));
    return Math.min(5 * 60_000, life / 5);
  }

  private mintedAt: number | null = null;

  private async mint(): Promise<InstallationToken> {
    const r = await this.auth({
      type: 'installation',
      installationId: this.installationId,
      repositoryIds: [...this.repositoryIds],
      refresh: true,
    });
    this.mintedAt = Date.now();
    const token = { token: r.token, expiresAt: Date.parse(r.expiresAt) };
    this.issued.add(token.token);
    this.current = token;
    return token;
  }
}

/**
 * A REST client for one installation with GitHub's recommended throttling (primary and secondary
 * rate limits wait for `retry-after` / the reset time, a bounded number of times) and retries of
 * 5xx and connection errors. Authentication is a request hook, so every request carries the token
 * that is valid at that moment.
 */
export function installationClient(
  credentials: AppCredentials,
  tokens: InstallationTokens,
  logger: Logger,
  options: ClientOptions = {},
): GitHubClient {
  return tokenClient(credentials.baseUrl, async () => (await tokens.get()).token, logger, {
    ...options,
    lane: options.lane ?? `installation-${tokens.installationId}`,
  });
}

export interface ClientOptions {
  readonly maxRateLimitRetries?: number;
  readonly retryBaseMs?: number;
  readonly userAgent?: string;
  /**
   * The write lane: writes in one lane go one at a time, a second apart, as GitHub asks of a token;
   * clients of the same lane in this process share that pacing, other lanes do not wait for it.
   * Default: one lane per installation (installationClient), `issue-agent` otherwise. The progress
   * comment has a lane of its own (see ProgressReporter), so that editing it never delays the work.
   */
  readonly lane?: string;
}

/** The same client for a token from elsewhere (the Action's GITHUB_TOKEN, or an App token input). */
export function tokenClient(
  baseUrl: string,
  token: () => Promise<string>,
  logger: Logger,
  options: ClientOptions = {},
): GitHubClient {
  const maxRetries = options.maxRateLimitRetries ?? 3;
  const octokit = new WorkerOctokit({
    baseUrl,
    userAgent: options.userAgent ?? 'issue-agent-worker',
    log: {
      debug: () => undefined,
      info: () => undefined,
      warn: (message: string) => {
        logger.warn(message);
      },
      error: (message: string) => {
        logger.error(message);
      },
    },
    throttle: {
      id: options.lane ?? 'issue-agent',
      onRateLimit: (retryAfter, opts, _octokit, retryCount) => {
        logger.warn({ retryAfter, url: opts.url, retryCount }, 'GitHub rate limit');
        return retryCount < maxRetries;
      },
      onSecondaryRateLimit: (retryAfter, opts, _octokit, retryCount) => {
        logger.warn({ retryAfter, url: opts.url, retryCount }, 'GitHub secondary rate limit');
        return retryCount < maxRetries;
      },
    },
    // Waits (n+1)² × base between attempts: 1 s, 4 s, 9 s by default.
    retry: {
      doNotRetry: [400, 401, 403, 404, 410, 422, 451],
      retryAfterBaseValue: options.retryBaseMs ?? 1000,
    },
  });
  octokit.hook.before('request', async (opts) => {
    opts.headers.authorization = `token ${await token()}`;
  });
  return octokit;
}

/** The App's bot account, whose name and noreply address sign the commits. */
export interface BotIdentity {
  readonly login: string;
  readonly id: number;
  readonly name: string;
  readonly email: string;
}

export async function botIdentity(credentials: AppCredentials, client: GitHubClient): Promise<BotIdentity> {
  const auth = createAppAuth({
    appId: credentials.appId,
    privateKey: credentials.privateKey,
    request: baseRequest.defaults({ baseUrl: credentials.baseUrl }),
  });
  const { token: jwt } = await auth({ type: 'app' });
  const { data: app } = await baseRequest('GET /app', {
    baseUrl: credentials.baseUrl,
    headers: { authorization: `bearer ${jwt}` },
  });
  const slug = app?.slug;
  if (slug === undefined) throw new Error('GET /app returned no slug');
  return botUser(client, `${slug}[bot]`);
}

/** A bot account by login (`<slug>[bot]`), with the noreply address GitHub attributes its commits to. */
export async function botUser(client: GitHubClient, login: string): Promise<BotIdentity> {
  const { data: user } = await client.rest.users.getByUsername({ username: login });
  return { login, id: user.id, name: login, email: `${user.id}+${login}@users.noreply.github.com` };
}
