/**
 * Who may update which ref, checked for every ref a push or the git refs API changes: the App's
 * reach into a fork (only the head branch of a pull request that allows maintainers to modify it),
 * and the rules of protected branches. git pushes run this from the repository's pre-receive hook
 * (hooks.ts), with the push's quarantined objects visible through `env`.
 */
import type { InstallationToken } from './auth.js';
import { git } from './git.js';
import { protectedBranchRefusal, type RefUpdate } from './protection.js';
import { rawCommit, type CommitSigner } from './signing.js';
import type { IssueRecord, RepoRecord, UserRecord, World } from './state.js';

/** Who is pushing: the App (or a workflow) through an installation token, or a person. */
export type Pusher =
  | { readonly kind: 'installation'; readonly token: InstallationToken; readonly user: UserRecord }
  | { readonly kind: 'user'; readonly user: UserRecord };

const WRITE_ROLES = new Set(['admin', 'maintain', 'write']);

/** Whether the App's installation token reaches the repository through its installation. */
export function tokenCovers(token: InstallationToken, repo: RepoRecord): boolean {
  return repo.installed && (token.repositoryIds === null || token.repositoryIds.has(repo.id));
}

/**
 * The open pull requests whose head branch is in `fork` (another repository than their base) and
 * that let the base repository's maintainers push to it: for an installation token, those into a
 * repository it covers; for a person, those into a repository they may write to.
 */
export function modifiablePulls(world: World, fork: RepoRecord, pusher: Pusher): IssueRecord[] {
  const out: IssueRecord[] = [];
  for (const repo of world.repos.values()) {
    if (repo === fork) continue;
    const reaches =
      pusher.kind === 'installation'
        ? tokenCovers(pusher.token, repo)
        : WRITE_ROLES.has(world.permission(repo, pusher.user.login));
    if (!reaches) continue;
    for (const issue of repo.issues.values())
      if (
        issue.state === 'open' &&
        issue.pull !== null &&
        issue.pull.headRepo === fork &&
        issue.pull.maintainerCanModify
      )
        out.push(issue);
  }
  return out;
}

/** Whether the pusher may write to the repository at all (its own rights, not through a pull request). */
export function writesDirectly(world: World, repo: RepoRecord, pusher: Pusher): boolean {
  if (pusher.kind === 'installation') return tokenCovers(pusher.token, repo);
  return WRITE_ROLES.has(world.permission(repo, pusher.user.login));
}

/**
 * The lines git prints (as `remote: error: …`) when it refuses any of the updates, or null when
 * every update may go ahead. GitHub refuses a push as a whole when one ref is refused.
 */
export async function refuseRefUpdates(
  deps: { readonly world: World; readonly signer: CommitSigner },
  repo: RepoRecord,
  pusher: Pusher,
  updates: readonly RefUpdate[],
  env: Record<string, string> = {},
): Promise<string[] | null> {
  const direct = writesDirectly(deps.world, repo, pusher);
  const modifiable = direct ? [] : modifiablePulls(deps.world, repo, pusher);
  for (const update of updates) {
    if (!direct) {
      const branch = update.ref.startsWith('refs/heads/') ? update.ref.slice('refs/heads/'.length) : null;
      const allowed =
        branch !== null && update.new !== null && modifiable.some((i) => i.pull?.head.ref === branch);
      if (!allowed)
        return [`Permission to ${repo.owner.login}/${repo.name}.git denied to ${pusher.user.login}.`];
    }
    if (!update.ref.startsWith('refs/heads/')) continue;
    const protection = repo.protections.get(update.ref.slice('refs/heads/'.length));
    if (protection === undefined) continue;
    const lines = protectedBranchRefusal(protection, update, await facts(deps, repo, pusher, update, env));
    if (lines !== null) return lines;
  }
  return null;
}

async function facts(
  deps: { readonly world: World; readonly signer: CommitSigner },
  repo: RepoRecord,
  pusher: Pusher,
  update: RefUpdate,
  env: Record<string, string>,
) {
  const admin = pusher.kind === 'user' && deps.world.permission(repo, pusher.user.login) === 'admin';
  if (update.new === null)
    return { fastForward: true, newCommits: [], hasMerge: false, passedChecks: new Set<string>(), admin };
  let fastForward = true;
  if (update.old !== null) {
    fastForward = await git(repo.bareDir, ['merge-base', '--is-ancestor', update.old, update.new], env).then(
      () => true,
      () => false,
    );
  }
  const list = async (extra: readonly string[]): Promise<string[]> =>
    (await git(repo.bareDir, ['rev-list', ...extra, update.new ?? '', '--not', '--all'], env))
      .split('\n')
      .filter((s) => s !== '');
  const shas = await list([]);
  const merges = await list(['--min-parents=2']);
  const now = new Date().toISOString();
  const newCommits = [];
  for (const sha of shas) {
    const raw = await rawCommit(repo.bareDir, sha, env);
    newCommits.push({ sha, verified: raw !== null && deps.signer.verify(raw, now).verified });
  }
  const passedChecks = new Set(
    repo.checkRuns
      .filter(
        (r) =>
          r.suite.headSha === update.new &&
          r.status === 'completed' &&
          (r.conclusion === 'success' || r.conclusion === 'neutral' || r.conclusion === 'skipped'),
      )
      .map((r) => r.name),
  );
  return { fastForward, newCommits, hasMerge: merges.length > 0, passedChecks, admin };
}
