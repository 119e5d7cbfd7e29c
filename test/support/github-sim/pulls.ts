/**
 * Opening and merging pull requests, shared by the REST handlers (pulls/create, pulls/merge) and the
 * test-facing methods (openPull, mergePull): the same checks, records and git writes for both. The
 * callers send webhooks; these functions only change state.
 */
import { HttpError, validationFailed } from './errors.js';
import {
  commitMessages,
  compareAndSwapRef,
  git,
  diffStats,
  mergeTree,
  resolveCommit,
  writePullRef,
} from './git.js';
import type { Host } from './rest.js';
import { rawCommit } from './signing.js';
import { isoNow, type IssueRecord, type RepoRecord, type UserRecord } from './state.js';
import type { DiffStats } from './wire.js';

export interface OpenPullInput {
  /**
   * The owner of the head branch's repository: the base repository's owner, or the owner of a fork
   * of it (`head: "user:branch"`), which makes a cross-repository pull request.
   */
  readonly headOwner: string;
  readonly headRef: string;
  readonly baseRef: string;
  readonly title: string;
  readonly body: string;
  readonly draft: boolean;
  readonly maintainerCanModify: boolean;
}

/**
 * Opens a pull request as GitHub's pulls/create does: the branches must exist, differ and not already
 * have an open pull request between them. Writes `refs/pull/<n>/head`. Throws HttpError (422).
 */
export async function openPull(
  host: Host,
  repo: RepoRecord,
  user: UserRecord,
  input: OpenPullInput,
): Promise<{ issue: IssueRecord; stats: DiffStats }> {
  const { headRef, baseRef } = input;
  const headRepo = headRepository(host, repo, input.headOwner);
  const headSha = headRepo === null ? null : await resolveCommit(headRepo.bareDir, `refs/heads/${headRef}`);
  if (headRepo === null || headSha === null)
    throw validationFailed([{ resource: 'PullRequest', field: 'head', code: 'invalid' }]);
  const baseSha = await resolveCommit(repo.bareDir, `refs/heads/${baseRef}`);
  if (baseSha === null) throw validationFailed([{ resource: 'PullRequest', field: 'base', code: 'invalid' }]);
  // Checked again after the await, so that two requests at once cannot both pass it.
  const duplicate = (): HttpError | null =>
    [...repo.issues.values()].some(
      (i) =>
        i.state === 'open' &&
        i.pull?.head.ref === headRef &&
        i.pull.headRepo === headRepo &&
        i.pull.base.ref === baseRef,
    )
      ? validationFailed([
          {
            resource: 'PullRequest',
            code: 'custom',
            message: `A pull request already exists for ${headRepo.owner.login}:${headRef}.`,
          },
        ])
      : null;
  const before = duplicate();
  if (before !== null) throw before;
  const stats = await diffStats(repo.bareDir, baseSha, headSha);
  if (stats.commits === 0)
    throw validationFailed([
      { resource: 'PullRequest', code: 'custom', message: `No commits between ${baseRef} and ${headRef}` },
    ]);
  const after = duplicate();
  if (after !== null) throw after;
  const now = isoNow();
  const issue: IssueRecord = {
    id: host.world.nextId('issue'),
    number: host.world.nextNumber(repo),
    repo,
    title: input.title,
    body: input.body,
    user,
    state: 'open',
    stateReason: null,
    labels: [],
    comments: [],
    reactions: [],
    createdAt: now,
    updatedAt: now,
    closedAt: null,
    closedBy: null,
    pull: {
      head: { ref: headRef, sha: headSha },
      headRepo,
      base: { ref: baseRef, sha: baseSha },
      previousHeadSha: null,
      draft: input.draft,
      merged: false,
      mergedAt: null,
      mergeCommitSha: null,
      mergedBy: null,
      // Only a fork's branch can be opened to the base repository's maintainers, as on GitHub.
      maintainerCanModify: headRepo !== repo && input.maintainerCanModify,
      reviewComments: [],
      reviews: [],
    },
  };
  repo.issues.set(issue.number, issue);
  await writePullRef(repo.bareDir, issue.number, headSha);
  return { issue, stats };
}

/** The first repository of a fork network (the one every fork in it descends from). */
export function networkRoot(repo: RepoRecord): RepoRecord {
  let root = repo;
  while (root.parent !== null) root = root.parent;
  return root;
}

/** The repository `owner` holds in `repo`'s fork network: `repo` itself for its owner, else their fork. */
function headRepository(host: Host, repo: RepoRecord, owner: string): RepoRecord | null {
  if (owner.toLowerCase() === repo.owner.login.toLowerCase()) return repo;
  const root = networkRoot(repo);
  for (const candidate of host.world.repos.values())
    if (candidate.owner.login.toLowerCase() === owner.toLowerCase() && networkRoot(candidate) === root)
      return candidate;
  return null;
}

export interface MergeInput {
  readonly method: 'merge' | 'squash' | 'rebase';
  /** The head sha the caller saw; the merge is refused (409) when the head has moved since. */
  readonly sha?: string | undefined;
  readonly commitTitle?: string | undefined;
  readonly commitMessage?: string | undefined;
}

export interface MergeOutcome {
  /** The commit the base branch now points at. */
  readonly sha: string;
  /** Issues the pull request's body closed with a closing keyword, in the order it names them. */
  readonly closedIssues: readonly IssueRecord[];
}

/**
 * Merges an open pull request in the bare repository, as GitHub's merge button does: a merge commit
 * (parents base, head) or a squashed one (parent base) of the tree `git merge-tree` makes, by the
 * merging user, moving the base branch only if nobody moved it meanwhile. Closes the pull request,
 * and, on the default branch, the issues its body references with a closing keyword. Runs under the
 * repository's push lock. Throws HttpError: 405 not mergeable (closed, merged, draft, conflicting,
 * rebase), 409 when `sha` is not the head or the base branch moved.
 */
export function mergePull(
  host: Host,
  issue: IssueRecord,
  by: UserRecord,
  input: MergeInput,
): Promise<MergeOutcome> {
  return host.exclusive(issue.repo, async () => {
    // Brings the head in line with its branch and writes refs/pull/<n>/head for it.
    await host.refreshPull(issue);
    const pull = issue.pull;
    if (pull === null) throw new Error(`github-sim: #${issue.number} is not a pull request`);
    if (issue.state !== 'open' || pull.merged) throw new HttpError(405, 'Pull Request is not mergeable');
    if (pull.draft) throw new HttpError(405, 'Pull Request is still a draft');
    if (input.method === 'rebase')
      throw new HttpError(405, 'Rebase merges are not allowed on this repository.');
    if (input.sha !== undefined && input.sha !== pull.head.sha)
      throw new HttpError(409, 'Head branch was modified. Review and try the merge again.');
    const { repo } = issue;
    const baseRef = `refs/heads/${pull.base.ref}`;
    const base = await resolveCommit(repo.bareDir, baseRef);
    if (base === null) throw new HttpError(405, 'Pull Request is not mergeable');
    const head = pull.head.sha;
    const tree = await mergeTree(repo.bareDir, base, head);
    if (tree === null) throw new HttpError(405, 'Pull Request is not mergeable');

    let title: string;
    let body: string;
    if (input.method === 'merge') {
      title =
        input.commitTitle ??
        `Merge pull request #${issue.number} from ${pull.headRepo.owner.login}/${pull.head.ref}`;
      body = input.commitMessage ?? issue.title;
    } else {
      title = input.commitTitle ?? `${issue.title} (#${issue.number})`;
      body =
        input.commitMessage ??
        (await commitMessages(repo.bareDir, base, head)).map((m) => `* ${m}`).join('\n\n');
    }
    const message = body.trim() === '' ? title : `${title}\n\n${body}`;
    // A branch that requires signatures takes a merge commit only when every commit it brings is
    // verified; a squash is one new commit, GitHub's own.
    if (input.method === 'merge' && repo.protections.get(pull.base.ref)?.requiredSignatures === true) {
      const brought = (await git(repo.bareDir, ['rev-list', `${base}..${head}`]))
        .split('\n')
        .filter((c) => c !== '');
      for (const c of brought) {
        const raw = await rawCommit(repo.bareDir, c);
        if (raw === null || !host.signer.verify(raw, isoNow()).verified)
          throw new HttpError(405, 'Commits must have verified signatures.');
      }
    }
    const at = Date.now();
    // GitHub signs the merge and squash commits it makes (web-flow), as it does the API's.
    const who = {
      name: by.login,
      email: `${by.id}+${by.login}@users.noreply.github.com`,
      at: Math.floor(at / 1000),
      tz: '+0000',
    };
    const sha = await host.signer.write(repo.bareDir, {
      tree,
      parents: input.method === 'merge' ? [base, head] : [base],
      author: who,
      committer: who,
      message,
      sign: true,
    });
    if (!(await compareAndSwapRef(repo.bareDir, baseRef, sha, base)))
      throw new HttpError(409, 'Base branch was modified. Review and try the merge again.');
    // The head stays fetchable after the branch goes, as on GitHub.
    await writePullRef(repo.bareDir, issue.number, head);

    const now = isoNow(at);
    pull.base.sha = base;
    pull.merged = true;
    pull.mergedAt = now;
    pull.mergeCommitSha = sha;
    pull.mergedBy = by;
    host.world.setState(issue, 'closed', by);
    issue.closedAt = now;
    issue.updatedAt = now;
    repo.pushedAt = now;

    const closedIssues: IssueRecord[] = [];
    if (pull.base.ref === repo.defaultBranch) {
      for (const number of closingReferences(issue.body, repo, host.url)) {
        const target = repo.issues.get(number);
        if (target === undefined || target.pull !== null || target.state !== 'open') continue;
        host.world.setState(target, 'closed', by);
        target.stateReason = 'completed';
        target.closedAt = now;
        target.updatedAt = now;
        closedIssues.push(target);
      }
    }
    return { sha, closedIssues };
  });
}

const KEYWORD = '(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)';

/**
 * The numbers a pull request body references in this repository with one of GitHub's closing
 * keywords (close, closes, closed, fix, fixes, fixed, resolve, resolves, resolved; any case; an
 * optional colon): `#N`, `owner/repo#N` naming this repository, or its issue URL. Each once, in order.
 */
export function closingReferences(body: string, repo: RepoRecord, baseUrl: string): number[] {
  const nwo = '[\\w.-]+/[\\w.-]+';
  const url = `${escapeRegExp(baseUrl.replace(/\/+$/, ''))}/(${nwo})/issues/(\\d+)`;
  const pattern = new RegExp(
    `(?<![\\w/-])${KEYWORD}(?::\\s*|\\s+)(?:#(\\d+)|(${nwo})#(\\d+)|${url})(?![\\w-])`,
    'gi',
  );
  const self = `${repo.owner.login}/${repo.name}`.toLowerCase();
  const numbers: number[] = [];
  for (const match of body.matchAll(pattern)) {
    const [, plain, named, namedNumber, linked, linkedNumber] = match;
    let number: string | undefined;
    if (plain !== undefined) number = plain;
    else if (named?.toLowerCase() === self) number = namedNumber;
    else if (linked?.toLowerCase() === self) number = linkedNumber;
    if (number === undefined) continue;
    const n = Number(number);
    if (!numbers.includes(n)) numbers.push(n);
  }
  return numbers;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
