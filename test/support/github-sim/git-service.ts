/**
 * Git smart HTTP for the simulated repositories: GitHub's access rules (anonymous reads of public
 * repositories; installation tokens as the Basic password for everything else, with a challenge that
 * makes git ask its credential helper), then `git http-backend`. Pushes are reported with the refs
 * they changed.
 */
import type { ChildProcess } from 'node:child_process';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { InstallationToken } from './auth.js';
import { pushableRefs, readRefs, serveGitHttp } from './git.js';
import { allows } from './rest.js';
import type { RepoRecord, World } from './state.js';

export const GIT_PATH = /^\/([^/]+)\/([^/]+?)(?:\.git)?\/(info\/refs|git-upload-pack|git-receive-pack)$/;

export interface GitServiceOptions {
  readonly world: World;
  /** GIT_PROJECT_ROOT: bare repositories live at `<root>/<owner>/<name>.git`. */
  readonly projectRoot: string;
  /** Who a valid token acts as: the app's bot. */
  readonly botLogin: string;
  readonly lookupToken: (credential: string) => InstallationToken | null;
  /**
   * Called with the repository's pushable refs (no `refs/pull/…`, which only the simulator writes)
   * before and after a push, before its response ends.
   */
  readonly onPush: (
    repo: RepoRecord,
    before: ReadonlyMap<string, string>,
    after: ReadonlyMap<string, string>,
  ) => Promise<void>;
  readonly log: Logger | undefined;
  /** Responses are paced to this rate (see GitHubSimulatorOptions.gitBytesPerSecond). */
  readonly bytesPerSecond?: number | undefined;
}

export class GitService {
  private readonly children = new Set<ChildProcess>();
  private readonly pushLocks = new Map<number, Promise<void>>();
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
    const token = this.token(req.headers.authorization);
    const challenge = { 'www-authenticate': 'Basic realm="GitHub"' };
    if (token === 'invalid') {
      text(
        401,
        'Invalid username or token. Password authentication is not supported for Git operations.',
        challenge,
      );
      return;
    }
    if (token === null && (writing || repo.private)) {
      text(401, 'Authentication required.', challenge);
      return;
    }
    if (token !== null) {
      if (token.repositoryIds !== null && !token.repositoryIds.has(repo.id)) {
        text(404, 'Repository not found.');
        return;
      }
      if (!allows(token, [['contents', writing ? 'write' : 'read']])) {
        text(
          403,
          `Permission to ${repo.owner.login}/${repo.name}.git denied to ${token.actor ?? this.options.botLogin}.`,
        );
        return;
      }
    }
    const cgi = {
      projectRoot: this.options.projectRoot,
      pathInfo: `/${repo.owner.login}/${repo.name}.git/${action}`,
      query: rawQuery,
      remoteUser: token === null ? null : (token.actor ?? this.options.botLogin),
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
    await this.exclusive(repo, async () => {
      const before = pushableRefs(await readRefs(repo.bareDir));
      await serveGitHttp(req, res, cgi, {
        ...hooks,
        beforeEnd: async () => {
          await this.options.onPush(repo, before, pushableRefs(await readRefs(repo.bareDir)));
        },
      });
    });
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

  /** The token in git's Basic credentials: null when none were sent, 'invalid' when they don't work. */
  private token(header: string | undefined): InstallationToken | null | 'invalid' {
    if (header === undefined) return null;
    const match = /^basic\s+(\S+)$/i.exec(header.trim());
    if (match === null) return 'invalid';
    const decoded = Buffer.from(match[1] ?? '', 'base64').toString('utf8');
    return this.options.lookupToken(decoded.slice(decoded.indexOf(':') + 1)) ?? 'invalid';
  }
}
