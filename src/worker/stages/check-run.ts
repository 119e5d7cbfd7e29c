import type { Logger } from 'pino';
import type { GitHubClient } from '../../github/app-client.js';
import { CHECK_RUN_NAME, renderCheckRun, type RenderedCheckRun } from '../../publish/check-run.js';
import type { Audience } from '../../publish/publishable.js';
import type { PublishedRun } from '../../publish/trajectory.js';

/**
 * Installations (or repositories, for a token without one) already told in the log that they gave no
 * `checks: write`: said once per process, not once per job.
 */
const saidNoPermission = new Set<string>();

export interface CheckRunTarget {
  readonly gh: GitHubClient;
  readonly where: { readonly owner: string; readonly repo: string };
  /**
   * Whom the "no permission" line is said once for: `installation <id>`, where installation 0 is the
   * Action's (its payloads have no installation), whose line asks the workflow for `checks: write`.
   */
  readonly permissionKey: string;
  /** The job: a retry that finds its own check run on the commit makes none again. */
  readonly jobId: string;
  readonly log: Logger;
}

/**
 * A completed check run on `head`, the commit just pushed, with the verdict of `runs` (the PR's
 * rounds, the last one made `head`). A check run of an earlier head is never touched: a follow-up
 * round's commit gets a new one. Never fails the job: the pull request's body already holds the
 * verdict, so a missing `checks: write` (403) is said once in the log and anything else is a warning.
 */
export async function postCheckRun(
  target: CheckRunTarget,
  input: {
    readonly head: string;
    readonly runs: readonly PublishedRun[];
    readonly audience: Audience;
    readonly trajectoryLink: string;
  },
): Promise<RenderedCheckRun | null> {
  const { gh, where, log } = target;
  try {
    const rendered = renderCheckRun({
      runs: input.runs,
      audience: input.audience,
      trajectoryLink: input.trajectoryLink,
    });
    const { data } = await gh.rest.checks.listForRef({
      ...where,
      ref: input.head,
      check_name: CHECK_RUN_NAME,
      filter: 'all',
      per_page: 100,
    });
    if (data.check_runs.some((c) => c.external_id === target.jobId)) return rendered;
    // The run's page, which the PR body links: the first web address of the trajectory link.
    const details = /https?:\/\/[^\s<>()[\]`]+/.exec(input.trajectoryLink)?.[0];
    const { data: run } = await gh.rest.checks.create({
      ...where,
      name: CHECK_RUN_NAME,
      head_sha: input.head,
      external_id: target.jobId,
      status: 'completed',
      conclusion: rendered.conclusion,
      ...(details === undefined ? {} : { details_url: details }),
      output: {
        title: rendered.title,
        summary: rendered.summary,
        text: rendered.text,
        annotations: [...rendered.annotations],
      },
    });
    log.info({ checkRun: run.id, head: input.head, conclusion: rendered.conclusion }, 'check run created');
    return rendered;
  } catch (error) {
    if (noChecksPermission(target, error)) return null;
    log.warn(
      { err: error, head: input.head },
      'could not create the check run; the verdict is in the pull request body',
    );
    return null;
  }
}

/**
 * Whether `error` is GitHub refusing the token checks (403), said once per `permissionKey` in the
 * log: the App's installation did not grant `checks: write`, or the workflow did not give it.
 */
export function noChecksPermission(target: CheckRunTarget, error: unknown): boolean {
  if (statusOf(error) !== 403) return false;
  if (!saidNoPermission.has(target.permissionKey)) {
    saidNoPermission.add(target.permissionKey);
    target.log.warn(
      { installation: target.permissionKey },
      target.permissionKey === 'installation 0'
        ? 'no check runs: the token may not write checks (add "checks: write" to the workflow job\'s permissions:, or grant it to the App whose token this is); the verdict is in the pull request body only'
        : 'no check runs: the App may not write checks here (grant "checks: write"); the verdict is in the pull request body only',
    );
  }
  return true;
}

function statusOf(error: unknown): number | undefined {
  return typeof error === 'object' && error !== null && 'status' in error && typeof error.status === 'number'
    ? error.status
    : undefined;
}
