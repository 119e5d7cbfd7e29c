import type { Octokit } from '@octokit/rest';
import { CHECK_RUN_NAME } from '../publish/check-run.js';
import { VERIFY_EXTERNAL_ID } from '../publish/reproduction.js';

/**
 * What a reproduction of a verdict reads of GitHub (`issue-agent verify`, `@agent verify`): a pull
 * request's change, and the verdict recorded on it, the **Issue Agent** check run. REST reads only,
 * with whatever client the caller has (the CLI's token, the worker's installation token).
 */

/** The REST surface both the CLI's Octokit and the worker's client offer. */
export type ChangeReader = Pick<Octokit, 'rest' | 'paginate'>;

type Where = { readonly owner: string; readonly repo: string };

export interface PullChange {
  readonly state: string;
  readonly base: string;
  readonly head: string;
  readonly headRef: string;
  /**
   * The repository the head's branch is in when it is not this one (`owner/name`; `a deleted fork`
   * when GitHub no longer names it), else null. GitHub keeps the head here as `pull/<n>/head`.
   */
  readonly fork: string | null;
  /** The PR's commits, newest first. */
  readonly commits: readonly string[];
}

export async function pullChange(gh: ChangeReader, where: Where, pr: number): Promise<PullChange> {
  const { data: pull } = await gh.rest.pulls.get({ ...where, pull_number: pr });
  const listed = await gh.paginate(gh.rest.pulls.listCommits, { ...where, pull_number: pr, per_page: 100 });
  return {
    state: pull.state,
    base: pull.base.sha,
    head: pull.head.sha,
    headRef: pull.head.ref,
    fork: forkOf(pull.head.repo, pull.base.repo.full_name),
    commits: listed.map((c) => c.sha).reverse(),
  };
}

/** The head's repository when it is not the base's; GitHub answers null for a deleted fork. */
export function forkOf(head: { readonly full_name: string } | null, base: string): string | null {
  if (head === null) return 'a deleted fork';
  return head.full_name === base ? null : head.full_name;
}

/** An **Issue Agent** check run, as far as a reproduction needs it. */
export interface AgentCheckRun {
  readonly id: number;
  /** The App that made it (its slug, as GitHub reports it; `github-actions` for a workflow's), or null. */
  readonly app: string | null;
  readonly sha: string;
  readonly externalId: string;
  readonly conclusion: string | null;
  readonly title: string;
  readonly summary: string;
  readonly text: string;
  readonly url: string;
}

/**
 * The **Issue Agent** check runs on one commit, newest first: of the App `appId` only when given
 * (the App reads its own; the CLI takes the Action's too).
 */
export async function agentCheckRuns(
  gh: ChangeReader,
  where: Where,
  sha: string,
  appId: number | null,
): Promise<AgentCheckRun[]> {
  const { data } = await gh.rest.checks.listForRef({
    ...where,
    ref: sha,
    check_name: CHECK_RUN_NAME,
    filter: 'all',
    per_page: 100,
  });
  return data.check_runs
    .filter((c) => c.name === CHECK_RUN_NAME && (appId === null || c.app?.id === appId))
    .sort((a, b) => b.id - a.id)
    .map((c) => ({
      id: c.id,
      app: c.app?.slug ?? null,
      sha: c.head_sha,
      externalId: c.external_id ?? '',
      conclusion: c.conclusion,
      title: c.output.title ?? '',
      summary: c.output.summary ?? '',
      text: c.output.text ?? '',
      url: c.html_url ?? '',
    }));
}

/** A check run that records a verdict: the agent's table, not a reproduction's. */
export function recordsVerdict(run: AgentCheckRun): boolean {
  return run.text !== '' && !run.externalId.startsWith(VERIFY_EXTERNAL_ID);
}

/**
 * Whose check runs may record a verdict: the App with this id (the worker reads its own), or the
 * Apps with these slugs (the CLI: `--app`, default the App's). A run of that name by any other App
 * is not a record: anyone who can install an App on the repository could have made it.
 */
export type RecordingApps = { readonly id: number } | { readonly slugs: readonly string[] };

/**
 * The recorded verdict of a change: on its newest commit (of `commits`, newest first) that has an
 * **Issue Agent** check run recording one by one of `from`, the newest such run; null when none
 * does. Runs of that name by other Apps that would have recorded one go to `ignored`.
 */
export async function recordedVerdict(
  gh: ChangeReader,
  where: Where,
  commits: readonly string[],
  from: RecordingApps,
  ignored?: (run: AgentCheckRun) => void,
): Promise<AgentCheckRun | null> {
  for (const sha of commits) {
    const runs = await agentCheckRuns(gh, where, sha, 'id' in from ? from.id : null);
    for (const run of runs) {
      if (!recordsVerdict(run)) continue;
      if ('id' in from || (run.app !== null && from.slugs.includes(run.app))) return run;
      ignored?.(run);
    }
  }
  return null;
}
