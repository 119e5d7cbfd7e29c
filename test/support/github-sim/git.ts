/**
 * The git side: bare repositories on disk, reads of refs, trees and blobs for the REST handlers, and
 * smart HTTP served by `git http-backend` as a CGI program.
 */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { BLOB_LIMIT, FULL_SHA, MemoTable } from './object-memo.js';
import type { DiffStats } from './wire.js';

const run = promisify(execFile);

/** Git runs with an environment of its own: nothing of the host's GIT_* variables leaks in. */
function gitEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? '/tmp',
    GIT_CONFIG_NOSYSTEM: '1',
    LC_ALL: 'C',
    ...extra,
  };
}

export async function git(
  cwd: string,
  args: readonly string[],
  env: Record<string, string> = {},
): Promise<string> {
  const { stdout } = await run('git', args, { cwd, env: gitEnv(env), maxBuffer: 64 * 1024 * 1024 });
  return stdout;
}

/** For webhook building, which is synchronous: small, fast commands only. */
export function gitSync(cwd: string, args: readonly string[]): string {
  return execFileSync('git', args, {
    cwd,
    env: gitEnv(),
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
  });
}

async function gitBuffer(cwd: string, args: readonly string[]): Promise<Buffer> {
  const { stdout } = await run('git', args, {
    cwd,
    env: gitEnv(),
    maxBuffer: 256 * 1024 * 1024,
    encoding: 'buffer',
  });
  return stdout;
}

/**
 * Makes `bareDir` a bare clone of `sourceDir` whose default branch points at the source's HEAD commit.
 * Returns the default branch's name: the one given, else the source's current branch, else `main`.
 */
export async function createBareRepo(
  sourceDir: string,
  bareDir: string,
  defaultBranch?: string,
): Promise<string> {
  const head = (await git(sourceDir, ['rev-parse', 'HEAD'])).trim();
  const current = await git(sourceDir, ['symbolic-ref', '--quiet', '--short', 'HEAD']).then(
    (out) => out.trim(),
    () => '',
  );
  const branch = defaultBranch ?? (current === '' ? 'main' : current);
  await git(sourceDir, ['clone', '--quiet', '--bare', '--no-hardlinks', sourceDir, bareDir]);
  await git(bareDir, ['update-ref', `refs/heads/${branch}`, head]);
  await git(bareDir, ['symbolic-ref', 'HEAD', `refs/heads/${branch}`]);
  await git(bareDir, ['config', 'http.receivepack', 'true']);
  // Pushed objects are kept loose and nothing is auto-packed, so `git log` in tests sees a quiet repo.
  await git(bareDir, ['config', 'gc.auto', '0']);
  // Pull request refs are GitHub's to write: fetchable, but a push to one is refused, as on GitHub.
  await git(bareDir, ['config', 'receive.hideRefs', 'refs/pull/']);
  // The simulator writes them from more than one place; a writer waits for another's lock.
  await git(bareDir, ['config', 'core.filesRefLockTimeout', '2000']);
  return branch;
}

/** Where GitHub keeps a pull request's head commit, for as long as the pull request exists. */
export function pullHeadRef(number: number): string {
  return `refs/pull/${number}/head`;
}

/** Refs a client can push: everything but GitHub's own `refs/pull/…`. */
export function pushableRefs(refs: ReadonlyMap<string, string>): Map<string, string> {
  return new Map([...refs].filter(([name]) => !name.startsWith('refs/pull/')));
}

/**
 * Points `refs/pull/<n>/head` at `sha` unless `refs` (the repository's refs, read just before)
 * shows it there already.
 */
export async function writePullRef(
  bareDir: string,
  number: number,
  sha: string,
  refs?: ReadonlyMap<string, string>,
): Promise<void> {
  const ref = pullHeadRef(number);
  if (refs?.get(ref) === sha) return;
  await git(bareDir, ['update-ref', '-m', 'github-sim: pull request head', ref, sha]);
}

/** writePullRef, synchronously (for webhook building and the synchronous test-facing reads). */
export function writePullRefSync(
  bareDir: string,
  number: number,
  sha: string,
  refs: ReadonlyMap<string, string>,
): void {
  const ref = pullHeadRef(number);
  if (refs.get(ref) === sha) return;
  gitSync(bareDir, ['update-ref', '-m', 'github-sim: pull request head', ref, sha]);
}

/**
 * Moves a ref from `old` to `sha` (both full shas); false when it no longer points at `old`, so
 * that a concurrent change is not overwritten.
 */
export async function compareAndSwapRef(
  bareDir: string,
  ref: string,
  sha: string,
  old: string,
): Promise<boolean> {
  try {
    await git(bareDir, ['update-ref', '-m', 'github-sim: merge', ref, sha, old]);
    return true;
  } catch {
    return false;
  }
}

/**
 * The tree of merging `head` into `base` (git merge-tree --write-tree, no work tree), or null when
 * the merge conflicts.
 */
export async function mergeTree(bareDir: string, base: string, head: string): Promise<string | null> {
  const key = immutablePair(base, head);
  const known = key === null ? undefined : merges.of(bareDir).get(key);
  if (known !== undefined) return known === '' ? null : known;
  let tree: string | null;
  try {
    const out = await git(bareDir, ['merge-tree', '--write-tree', '--no-messages', base, head]);
    tree = out.split('\n')[0]?.trim() ?? null;
  } catch (error) {
    // Exit status 1 means conflicts; anything else is a failure of git.
    if ((error as { code?: unknown }).code !== 1) throw error;
    tree = null;
  }
  if (key !== null) merges.of(bareDir).set(key, tree ?? '');
  return tree;
}

/** mergeTree's answers by `base head`: the tree, or '' for a conflict. */
const merges = new MemoTable<string>(500);

/** `base head` when both are full shas (an answer about them never changes), else null. */
function immutablePair(base: string, head: string): string | null {
  return FULL_SHA.test(base) && FULL_SHA.test(head) ? `${base} ${head}` : null;
}

export interface Identity {
  readonly name: string;
  readonly email: string;
  /** Epoch milliseconds. */
  readonly at: number;
}

/** A commit of `tree` with these parents, authored and committed by `who`; returns its sha. */
export async function commitTree(
  bareDir: string,
  tree: string,
  parents: readonly string[],
  message: string,
  who: Identity,
): Promise<string> {
  const date = `${Math.floor(who.at / 1000)} +0000`;
  const out = await git(
    bareDir,
    ['commit-tree', '--no-gpg-sign', ...parents.flatMap((p) => ['-p', p]), '-m', message, tree],
    {
      GIT_AUTHOR_NAME: who.name,
      GIT_AUTHOR_EMAIL: who.email,
      GIT_AUTHOR_DATE: date,
      GIT_COMMITTER_NAME: who.name,
      GIT_COMMITTER_EMAIL: who.email,
      GIT_COMMITTER_DATE: date,
    },
  );
  return out.trim();
}

/** The full messages of the commits in `base..head`, oldest first. */
export async function commitMessages(bareDir: string, base: string, head: string): Promise<string[]> {
  const key = immutablePair(base, head);
  const known = key === null ? undefined : messages.of(bareDir).get(key);
  if (known !== undefined) return [...known];
  const out = await git(bareDir, ['log', '--reverse', '--format=%B%x00', `${base}..${head}`]);
  const found = out
    .split('\0')
    .map((m) => m.trim())
    .filter((m) => m !== '');
  if (key !== null) messages.of(bareDir).set(key, found);
  return [...found];
}

const messages = new MemoTable<readonly string[]>(500);

/** Every ref and the object it points at (see readRefsSync: read from the files, else from git). */
export async function readRefs(bareDir: string): Promise<Map<string, string>> {
  return (
    readRefFiles(bareDir) ??
    parseRefs(await git(bareDir, ['for-each-ref', '--format=%(refname) %(objectname)']))
  );
}

function parseRefs(out: string): Map<string, string> {
  const refs = new Map<string, string>();
  for (const line of out.split('\n')) {
    const [name, sha] = line.split(' ');
    if (name !== undefined && sha !== undefined) refs.set(name, sha);
  }
  return refs;
}

/** The branches (short names) whose history contains the commit. */
export async function branchesContaining(bareDir: string, sha: string): Promise<string[]> {
  try {
    const out = await git(bareDir, ['for-each-ref', '--contains', sha, '--format=%(refname)', 'refs/heads/']);
    return out
      .split('\n')
      .filter((name) => name.startsWith('refs/heads/'))
      .map((name) => name.slice('refs/heads/'.length));
  } catch {
    return [];
  }
}

/**
 * The commit a branch, tag or sha names, or null. A full branch name is read from the ref files (git
 * writes only commits under refs/heads/); a sha, or a sha's ancestor (`<sha>^`, `<sha>~2`), is asked
 * of git once and remembered (only when it names a commit: its objects may arrive later).
 */
export async function resolveCommit(bareDir: string, ref: string): Promise<string | null> {
  if (ref.startsWith('-')) return null;
  if (ref.startsWith('refs/heads/')) {
    const refs = readRefFiles(bareDir);
    if (refs !== null) return refs.get(ref) ?? null;
  }
  const immutable = IMMUTABLE_NAME.test(ref);
  const known = immutable ? resolved.of(bareDir).get(ref) : undefined;
  if (known !== undefined) return known;
  let sha: string | null;
  try {
    sha = (await git(bareDir, ['rev-parse', '--verify', '--quiet', `${ref}^{commit}`])).trim() || null;
  } catch {
    return null;
  }
  if (sha !== null && immutable) resolved.of(bareDir).set(ref, sha);
  return sha;
}

/** A full sha, optionally followed by ancestry steps: a name whose commit never changes. */
const IMMUTABLE_NAME = /^[0-9a-f]{40}(?:[~^]\d*)*$/;
const resolved = new MemoTable<string>(2000);

export async function diffStats(bareDir: string, base: string, head: string): Promise<DiffStats> {
  const key = immutablePair(base, head);
  const known = key === null ? undefined : stats.of(bareDir).get(key);
  if (known !== undefined) return known;
  try {
    const count = await git(bareDir, ['rev-list', '--count', `${base}..${head}`]);
    const found = parseStats(count, await git(bareDir, ['diff', '--numstat', `${base}...${head}`]));
    return key === null ? found : stats.of(bareDir).set(key, found);
  } catch {
    return { commits: 0, additions: 0, deletions: 0, changedFiles: 0 };
  }
}

export function diffStatsSync(bareDir: string, base: string, head: string): DiffStats {
  const key = immutablePair(base, head);
  const known = key === null ? undefined : stats.of(bareDir).get(key);
  if (known !== undefined) return known;
  try {
    const count = gitSync(bareDir, ['rev-list', '--count', `${base}..${head}`]);
    const found = parseStats(count, gitSync(bareDir, ['diff', '--numstat', `${base}...${head}`]));
    return key === null ? found : stats.of(bareDir).set(key, found);
  } catch {
    return { commits: 0, additions: 0, deletions: 0, changedFiles: 0 };
  }
}

/** diffStats by `base head`; a failure (a missing object, say) is not kept. */
const stats = new MemoTable<DiffStats>(1000);

function parseStats(count: string, numstat: string): DiffStats {
  let additions = 0;
  let deletions = 0;
  let changedFiles = 0;
  for (const line of numstat.split('\n')) {
    const [added, deleted] = line.split('\t');
    if (added === undefined || deleted === undefined) continue;
    changedFiles++;
    // Binary files count as changed with `-` for both numbers, as GitHub counts them.
    additions += Number(added) || 0;
    deletions += Number(deleted) || 0;
  }
  return { commits: Number(count.trim()), additions, deletions, changedFiles };
}

/** The first file a change touches, or null. */
export function firstChangedFileSync(bareDir: string, base: string, head: string): string | null {
  const key = immutablePair(base, head);
  const known = key === null ? undefined : firstChanged.of(bareDir).get(key);
  if (known !== undefined) return known === '' ? null : known;
  let found: string;
  try {
    found =
      gitSync(bareDir, ['diff', '--name-only', `${base}...${head}`])
        .split('\n')
        .find((n) => n !== '') ?? '';
  } catch {
    return null;
  }
  if (key !== null) firstChanged.of(bareDir).set(key, found);
  return found === '' ? null : found;
}

/** firstChangedFileSync by `base head`: the path, or '' when the change touches none. */
const firstChanged = new MemoTable<string>(1000);

/** A commit as a workflow run's `head_commit` shows it. */
export interface CommitInfo {
  readonly sha: string;
  readonly treeId: string;
  readonly message: string;
  /** The committer date, in GitHub's timestamp format. */
  readonly timestamp: string;
  readonly author: { readonly name: string; readonly email: string };
  readonly committer: { readonly name: string; readonly email: string };
}

const COMMIT_FORMAT = '--format=%T%x00%an%x00%ae%x00%cn%x00%ce%x00%ct%x00%B';

export async function readCommit(bareDir: string, sha: string): Promise<CommitInfo> {
  const known = commits.of(bareDir).get(sha);
  if (known !== undefined) return known;
  return keepCommit(bareDir, parseCommit(sha, await git(bareDir, ['show', '-s', COMMIT_FORMAT, sha, '--'])));
}

export function readCommitSync(bareDir: string, sha: string): CommitInfo {
  const known = commits.of(bareDir).get(sha);
  if (known !== undefined) return known;
  return keepCommit(bareDir, parseCommit(sha, gitSync(bareDir, ['show', '-s', COMMIT_FORMAT, sha, '--'])));
}

/** readCommit's answers by full commit sha. */
const commits = new MemoTable<CommitInfo>(2000);

function keepCommit(bareDir: string, info: CommitInfo): CommitInfo {
  return FULL_SHA.test(info.sha) ? commits.of(bareDir).set(info.sha, info) : info;
}

function parseCommit(sha: string, out: string): CommitInfo {
  const [
    treeId = '',
    authorName = '',
    authorEmail = '',
    committerName = '',
    committerEmail = '',
    time = '0',
    ...rest
  ] = out.split('\0');
  return {
    sha,
    treeId,
    message: rest.join('\0').trim(),
    timestamp: new Date(Number(time) * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z'),
    author: { name: authorName, email: authorEmail },
    committer: { name: committerName, email: committerEmail },
  };
}

/**
 * Every ref and the object it points at, read synchronously: what `git for-each-ref
 * --format='%(refname) %(objectname)'` prints, read from the files-backend layout itself. Tests poll
 * the simulator's state (`pulls()`) every 20 ms while a job runs in the same process; a `git` child per
 * poll blocked that process's event loop for most of a job and forked a large process thousands of
 * times per file. Loose refs are read before `packed-refs`, so a ref that `git pack-refs` moves between
 * the two (written to packed-refs first, then its loose file removed) is seen in one or the other.
 * Anything this reader does not model (a symbolic ref under refs/, an unreadable file, another ref
 * storage) goes to git.
 */
export function readRefsSync(bareDir: string): Map<string, string> {
  const refs = readRefFiles(bareDir);
  return refs ?? parseRefs(gitSync(bareDir, ['for-each-ref', '--format=%(refname) %(objectname)']));
}

const SHA = /^[0-9a-f]{40}$/;

function readRefFiles(bareDir: string): Map<string, string> | null {
  const loose = new Map<string, string>();
  try {
    if (/^\s*refstorage\s*=/im.test(readFileSync(join(bareDir, 'config'), 'utf8'))) return null;
    const walk = (dir: string, name: string): boolean => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        const ref = `${name}/${entry.name}`;
        if (entry.isDirectory()) {
          if (!walk(join(dir, entry.name), ref)) return false;
          continue;
        }
        if (entry.name.endsWith('.lock')) continue;
        let content: string;
        try {
          content = readFileSync(join(dir, entry.name), 'utf8').trim();
        } catch (e) {
          // Packed away between the listing and the read: packed-refs, read next, has it.
          if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue;
          throw e;
        }
        if (!SHA.test(content)) return false;
        loose.set(ref, content);
      }
      return true;
    };
    if (!walk(join(bareDir, 'refs'), 'refs')) return null;
    let packed = '';
    try {
      packed = readFileSync(join(bareDir, 'packed-refs'), 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
    const all = new Map<string, string>();
    for (const line of packed.split('\n')) {
      if (line === '' || line.startsWith('#') || line.startsWith('^')) continue;
      const [sha, ref] = line.split(' ');
      if (sha === undefined || ref === undefined || !SHA.test(sha)) return null;
      all.set(ref, sha);
    }
    for (const [ref, sha] of loose) all.set(ref, sha);
    return new Map([...all].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  } catch {
    return null;
  }
}

export interface TreeEntry {
  readonly mode: string;
  readonly type: 'blob' | 'tree' | 'commit';
  readonly sha: string;
  /** Bytes, for blobs. */
  readonly size: number;
  readonly path: string;
}

/** The entry at `path` in a commit (`''` for the root tree), or null when there is none. */
export async function treeEntry(bareDir: string, commit: string, path: string): Promise<TreeEntry | null> {
  const key = FULL_SHA.test(commit) ? `${commit}:${path}` : null;
  const known = key === null ? undefined : entries.of(bareDir).get(key);
  if (known !== undefined) return known.entry;
  let entry: TreeEntry | null;
  if (path === '') {
    const sha = (await git(bareDir, ['rev-parse', `${commit}^{tree}`])).trim();
    entry = { mode: '040000', type: 'tree', sha, size: 0, path: '' };
  } else {
    const [first] = parseLsTree(await git(bareDir, ['ls-tree', '-l', '-z', commit, '--', path]));
    entry = first?.path === path ? first : null;
  }
  if (key !== null) entries.of(bareDir).set(key, { entry });
  return entry;
}

/** treeEntry by `commit:path`, boxed so that "no entry there" is kept too. */
const entries = new MemoTable<{ readonly entry: TreeEntry | null }>(2000);

export async function listTree(bareDir: string, commit: string, path: string): Promise<TreeEntry[]> {
  const key = FULL_SHA.test(commit) ? `${commit}:${path}` : null;
  const known = key === null ? undefined : trees.of(bareDir).get(key);
  if (known !== undefined) return [...known];
  const spec = path === '' ? commit : `${commit}:${path}`;
  const found = parseLsTree(await git(bareDir, ['ls-tree', '-l', '-z', spec])).map((e) => ({
    ...e,
    path: path === '' ? e.path : `${path}/${e.path}`,
  }));
  if (key !== null) trees.of(bareDir).set(key, found);
  return [...found];
}

/** listTree by `commit:path`. */
const trees = new MemoTable<readonly TreeEntry[]>(500);

/** A blob's bytes; the caller gets its own copy (a kept blob is never handed out to be changed). */
export async function readBlob(bareDir: string, sha: string): Promise<Buffer> {
  const known = FULL_SHA.test(sha) ? blobs.of(bareDir).get(sha) : undefined;
  if (known !== undefined) return Buffer.from(known);
  const data = await gitBuffer(bareDir, ['cat-file', 'blob', sha]);
  if (FULL_SHA.test(sha) && data.length <= BLOB_LIMIT) blobs.of(bareDir).set(sha, Buffer.from(data));
  return data;
}

const blobs = new MemoTable<Buffer>(500);

function parseLsTree(out: string): TreeEntry[] {
  const entries: TreeEntry[] = [];
  for (const record of out.split('\0')) {
    const match = /^(\d+) (blob|tree|commit) ([0-9a-f]+)\s+(-|\d+)\t(.*)$/s.exec(record);
    if (match === null) continue;
    const [, mode = '', type = 'blob', sha = '', size = '-', path = ''] = match;
    entries.push({
      mode,
      type: type as TreeEntry['type'],
      sha,
      size: size === '-' ? 0 : Number(size),
      path,
    });
  }
  return entries;
}

export interface CgiRequest {
  readonly projectRoot: string;
  /** `/<owner>/<repo>.git/<service path>`, relative to the project root. */
  readonly pathInfo: string;
  readonly query: string;
  readonly remoteUser: string | null;
  /** More environment for the backend and the hooks it runs. */
  readonly env?: Readonly<Record<string, string>>;
}

/**
 * Runs `git http-backend` for one request: the request body streams to its stdin (git may gzip it;
 * the backend inflates when told HTTP_CONTENT_ENCODING), its CGI headers become the response status
 * and headers, and the rest of its stdout streams back. `beforeEnd` runs after the backend has exited
 * and before the response ends, so that a client which has seen the response sees its effects too.
 * Resolves with the status once the response has ended.
 */
export function serveGitHttp(
  req: IncomingMessage,
  res: ServerResponse,
  cgi: CgiRequest,
  hooks: {
    readonly track: (child: ChildProcess) => void;
    readonly onStderr: (text: string) => void;
    readonly beforeEnd?: () => Promise<void>;
    /** Counts bytes of the response body; returns how long to hold the next chunk back (ms). */
    readonly sent?: (bytes: number) => number;
  },
): Promise<number> {
  const env: Record<string, string> = {
    GIT_PROJECT_ROOT: cgi.projectRoot,
    GIT_HTTP_EXPORT_ALL: '1',
    PATH_INFO: cgi.pathInfo,
    REQUEST_METHOD: req.method ?? 'GET',
    QUERY_STRING: cgi.query,
    CONTENT_TYPE: req.headers['content-type'] ?? '',
    REMOTE_ADDR: req.socket.remoteAddress ?? '127.0.0.1',
  };
  const length = req.headers['content-length'];
  if (length !== undefined) env.CONTENT_LENGTH = length;
  const encoding = req.headers['content-encoding'];
  if (encoding !== undefined) env.HTTP_CONTENT_ENCODING = encoding;
  const protocol = req.headers['git-protocol'];
  if (typeof protocol === 'string') env.HTTP_GIT_PROTOCOL = protocol;
  if (cgi.remoteUser !== null) env.REMOTE_USER = cgi.remoteUser;
  Object.assign(env, cgi.env ?? {});

  const child = spawn('git', ['http-backend'], { env: gitEnv(env), stdio: ['pipe', 'pipe', 'pipe'] });
  hooks.track(child);
  req.pipe(child.stdin);
  child.stdin.on('error', () => undefined);
  child.stderr.on('data', (chunk: Buffer) => {
    hooks.onStderr(chunk.toString('utf8'));
  });

  let head = Buffer.alloc(0);
  let headersDone = false;
  const write = (chunk: Buffer): void => {
    res.write(chunk);
    const holdMs = hooks.sent?.(chunk.length) ?? 0;
    if (holdMs > 0) {
      // A paced network: the backend's output waits (its pipe fills and git blocks) meanwhile.
      child.stdout.pause();
      setTimeout(() => child.stdout.resume(), holdMs);
    }
  };
  child.stdout.on('data', (chunk: Buffer) => {
    if (headersDone) {
      write(chunk);
      return;
    }
    head = Buffer.concat([head, chunk]);
    const crlf = head.indexOf('\r\n\r\n');
    const lf = head.indexOf('\n\n');
    const end = crlf >= 0 && (lf < 0 || crlf < lf) ? crlf : lf;
    if (end < 0) return;
    const separator = end === crlf ? 4 : 2;
    const { status, headers } = parseCgiHeaders(head.subarray(0, end).toString('latin1'));
    res.writeHead(status, headers);
    headersDone = true;
    const rest = head.subarray(end + separator);
    if (rest.length > 0) write(rest);
  });

  return new Promise<number>((resolve, reject) => {
    let finished = false;
    const finish = async (code: number | null): Promise<void> => {
      if (finished) return;
      finished = true;
      await hooks.beforeEnd?.();
      if (!headersDone && !res.headersSent) {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(`git http-backend failed (exit ${code ?? 'signal'})\n`);
        resolve(500);
        return;
      }
      res.end();
      resolve(res.statusCode);
    };
    child.once('error', () => {
      finish(null).catch(reject);
    });
    child.once('close', (code) => {
      finish(code).catch(reject);
    });
  });
}

function parseCgiHeaders(text: string): { status: number; headers: Record<string, string> } {
  let status = 200;
  const headers: Record<string, string> = {};
  for (const line of text.split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim();
    const value = line.slice(colon + 1).trim();
    if (name.toLowerCase() === 'status') status = Number.parseInt(value, 10) || 200;
    else headers[name] = value;
  }
  return { status, headers };
}
