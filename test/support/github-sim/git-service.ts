/**
 * Git smart HTTP for the simulated repositories: GitHub's access rules (anonymous reads of public
 * repositories; installation tokens as the Basic password for everything else, with a challenge that
 * makes git ask its credential helper), then `git http-backend`. Pushes are reported with the refs
 * they changed.
 */
import type { ChildProcess } from 'node:child_process';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { randomBytes } from 'node:crypto';
import type { InstallationToken } from './auth.js';
import { pushableRefs, readRefs, serveGitHttp } from './git.js';
import { HOOK_URL_VARIABLE } from './hooks.js';
import { modifiablePulls, tokenCovers, writesDirectly, type Pusher } from './push-rules.js';
import { allows } from './rest.js';
import type { RepoRecord, UserRecord, World } from './state.js';

export const GIT_PATH = /^\/([^/]+)\/([^/]+?)(?:\.git)?\/(info\/refs|git-upload-pack|git-receive-pack)$/;

export interface GitServiceOptions {
  readonly world: World;
  /** GIT_PROJECT_ROOT: bare repositories live at `<root>/<owner>/<name>.git`. */
  readonly projectRoot: string;
  /** Who a valid token acts as: the app's bot. */
  readonly botLogin: string;
  readonly lookupToken: (credential: string) => InstallationToken | null;
  /** The person a user token (`ghu_…`) belongs to, or null. */
  readonly lookupUser: (credential: string) => UserRecord | null;
  /** The user record of an installation token's actor (the App's bot, or github-actions[bot]). */
  readonly tokenUser: (token: InstallationToken) => UserRecord;
  /** The simulator's base URL: pushes' pre-receive hooks call back to it. */
  readonly baseUrl: string;
  /**
   * Called with the repository's pushable refs (no `refs/pull/…`, which only the simulator writes)
   * before and after a push, before its response ends.
   */
  readonly onPush: (
    repo: RepoRecord,
    before: ReadonlyMap<string, string>,
    after: ReadonlyMap<string, string>,
    pusher: Pusher,
  ) => Promise<void>;
  readonly log: Logger | undefined;
  /** Responses are paced to this rate (see GitHubSimulatorOptions.gitBytesPerSecond). */
  readonly bytesPerSecond?: number | undefined;
}

export class GitService {
  private readonly children = new Set<ChildProcess>();
  private readonly pushLocks = new Map<number, Promise<void>>();
  /** Pushes under way, by the id their pre-receive hook calls back with. */
  readonly activePushes = new Map<string, { readonly repo: RepoRecord; readonly pusher: Pusher }>();
  /** Bytes of upload-pack responses (what clones and fetches received). */
  bytesServed = 0;

  constructor(private readonly options: GitServiceOptions) {}

  /** Serves a request whose path matched GIT_PATH; `rawQuery` is passed to the backend as sent. */
  async serve(
    req: IncomingMessage,
    res: ServerResponse,
    match: RegExpExecArray,
    rawQuery: string,
    query: Readonly<Record<string, string>>,
  ): Promise<void> {
    const [, ownerName = '', repoName = '', action = ''] = match;
    const text = (status: number, body: string, extra: Record<string, string> = {}): void => {
      req.resume();
      res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', ...extra });
      res.end(`${body}\n`);
    };
    const repo = this.options.world.repo(ownerName, repoName);
    if (repo === undefined) {
      text(404, 'Repository not found.');
      return;
    }
    const service = action === 'info/refs' ? query.service : action;
    if (service !== 'git-upload-pack' && service !== 'git-receive-pack') {
      text(403, 'The dumb HTTP protocol is not supported.');
      return;
    }
    const writing = service === 'git-receive-pack';
    const credential = this.credential(req.headers.authorization);
    const challenge = { 'www-authenticate': 'Basic realm="GitHub"' };
    if (credential === 'invalid') {
      text(
        401,
        'Invalid username or token. Password authentication is not supported for Git operations.',
        challenge,
      );
      return;
    }
    if (credential === null && (writing || repo.private)) {
      text(401, 'Authentication required.', challenge);
      return;
    }
    const pusher: Pusher | null =
      credential === null
        ? null
        : 'token' in credential
          ? { kind: 'installation', token: credential.token, user: this.options.tokenUser(credential.token) }
          : { kind: 'user', user: credential.user };
    if (pusher !== null) {
      const denied = (): void => {
        text(403, `Permission to ${repo.owner.login}/${repo.name}.git denied to ${pusher.user.login}.`);
      };
      const world = this.options.world;
      if (pusher.kind === 'installation') {
        const { token } = pusher;
        // A token reaches the installation's repositories, public ones to read, and a fork's head
        // branch of a pull request that lets the base repository's maintainers modify it.
        const covered = tokenCovers(token, repo);
        const throughPull = !covered && writing && modifiablePulls(world, repo, pusher).length > 0;
        const publicFork = !covered && !writing && !repo.private && !repo.installed;
        if (!covered && !throughPull && !publicFork) {
          if (writing && !repo.installed && !repo.private) denied();
          else text(404, 'Repository not found.');
          return;
        }
        if (!allows(token, [['contents', writing ? 'write' : 'read']])) {
          denied();
          return;
        }
      } else {
        const role = world.permission(repo, pusher.user.login);
        if (role === 'none') {
          text(404, 'Repository not found.');
          return;
        }
        if (
          writing &&
          !writesDirectly(world, repo, pusher) &&
          modifiablePulls(world, repo, pusher).length === 0
        ) {
          denied();
          return;
        }
      }
    }
    const cgi = {
      projectRoot: this.options.projectRoot,
      pathInfo: `/${repo.owner.login}/${repo.name}.git/${action}`,
      query: rawQuery,
      remoteUser: pusher === null ? null : pusher.user.login,
    };
    const rate = this.options.bytesPerSecond;
    const hooks = {
      ...(writing
        ? {}
        : {
            sent: (bytes: number): number => {
              this.bytesServed += bytes;
              return rate === undefined ? 0 : (bytes / rate) * 1000;
            },
          }),
      track: (child: ChildProcess): void => {
        this.children.add(child);
        child.once('close', () => this.children.delete(child));
      },
      onStderr: (line: string): void => {
        this.options.log?.debug(
          { repo: `${repo.owner.login}/${repo.name}`, stderr: line.trim() },
          'git http-backend',
        );
      },
    };
    if (!(writing && req.method === 'POST')) {
      await serveGitHttp(req, res, cgi, hooks);
      return;
    }
    // Pushes to one repository are serialised (with merges) so that each push's ref changes are its
    // own, and are reported before the response ends: once git says it pushed, `pushes` and PR heads
    // show it. `refs/pull/…` are left out: the simulator writes them, outside the lock too.
    if (pusher === null) throw new Error('unreachable: a push without credentials was let through');
    const pushId = randomBytes(16).toString('hex');
    this.activePushes.set(pushId, { repo, pusher });
    try {
      await this.exclusive(repo, async () => {
        const before = pushableRefs(await readRefs(repo.bareDir));
        await serveGitHttp(
          req,
          res,
          { ...cgi, env: { [HOOK_URL_VARIABLE]: `${this.options.baseUrl}/_sim/pre-receive/${pushId}` } },
          {
            ...hooks,
            beforeEnd: async () => {
              await this.options.onPush(repo, before, pushableRefs(await readRefs(repo.bareDir)), pusher);
            },
          },
        );
      });
    } finally {
      this.activePushes.delete(pushId);
    }
  }

  /**
   * Runs `fn` after the repository's earlier pushes and merges, holding later ones off until it has
   * finished: what a push reports as changed is then its own doing.
   */
  exclusive<T>(repo: RepoRecord, fn: () => Promise<T>): Promise<T> {
    const previous = this.pushLocks.get(repo.id) ?? Promise.resolve();
    const current = previous.then(fn);
    this.pushLocks.set(
      repo.id,
      current.then(
        () => undefined,
        () => undefined,
      ),
    );
    return current;
  }

  /** Ends every running backend. */
  killAll(): void {
    for (const child of this.children) child.kill('SIGKILL');
  }

  /**
   * The credential in git's Basic authorization: an installation token or a person's user token;
   * null when none was sent, 'invalid' when it does not work.
   */
  private credential(
    header: string | undefined,
  ): { readonly token: InstallationToken } | { readonly user: UserRecord } | null | 'invalid' {
    if (header === undefined) return null;
    const match = /^basic\s+(\S+)$/i.exec(header.trim());
    if (match === null) return 'invalid';
    const decoded = Buffer.from(match[1] ?? '', 'base64').toString('utf8');
    const secret = decoded.slice(decoded.indexOf(':') + 1);
    const token = this.options.lookupToken(secret);
    if (token !== null) return { token };
    const user = this.options.lookupUser(secret);
    return user === null ? 'invalid' : { user };
  }
}
