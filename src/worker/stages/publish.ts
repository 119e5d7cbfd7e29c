import type { Outcome } from '../../agent/run-agent.js';
import type { EventStore } from '../../events/event-store.js';
import { reduceState } from '../../events/reduce-state.js';
import type { GitHubClient } from '../../github/app-client.js';
import { HostGitError } from '../../github/host-git.js';
import { findTrajectoryMarker } from '../../publish/markers.js';
import { checkPolicy, parseRawNumstat } from '../../publish/policy.js';
import { renderPullRequest } from '../../publish/pr-body.js';
import { githubHosts, publishable as publishableText, type Publishable } from '../../publish/publishable.js';
import { openPullOn } from '../../app/trigger-rules.js';
import type { FixJobResult } from '../fix-runtime.js';
import { PermanentJobError } from '../permanent-job-error.js';
import { audienceOf, oneParagraph, type JobEnd } from './report.js';
import { issueNumberOf, priorRoundsById, roundsMarker } from './rounds.js';
import type { AttemptRow } from './attempt-run.js';
import { postCheckRun } from './check-run.js';
import type { JobContext, PullInfo, RepoInfo } from './types.js';

export const branchFor = (issue: number): string => `issue-agent/issue-${issue}`;

export interface PublishInput {
  readonly ctx: JobContext;
  readonly store: EventStore;
  readonly outcome: Outcome;
  readonly repo: RepoInfo;
  readonly pull: PullInfo | null;
  /** Who asked to stop the job since it started, or null. */
  readonly cancelled: () => Promise<string | null>;
  /** Best-of-N: every attempt (the winner marked), for the PR body's table. */
  readonly attempts?: readonly AttemptRow[] | undefined;
}

/** What publishing did, and how the job ended (for `reportEnd`, which says so). */
export interface Published {
  readonly result: FixJobResult;
  readonly end: JobEnd;
}

/**
 * On the host, after the sandbox is gone: the agent's change comes back as the diff recorded in the
 * event log (data, never the workspace's .git), is applied to the pristine clone, checked against
 * the repo's policy, committed as the App's bot and pushed; then the PR is opened or updated.
 */
export async function publish(input: PublishInput): Promise<Published> {
  const { ctx, store, outcome, repo, pull } = input;
  const { p, gh, git, tokens, paths, bot, progress, log, where } = ctx;
  const state = reduceState(store.events);
  const checkpoint = state.lastCheckpoint;
  const none = {
    outcome: outcome.outcome,
    pullRequest: null,
    pushed: false,
    trajectory: ctx.storage.locationOf(ctx.jobId),
    runId: ctx.jobId,
    branch: null,
  } as const;
  // `publishable` is this stage's word for an outcome that may open a PR.
  const publishable = outcome.outcome === 'resolved' || outcome.outcome === 'unverified';
  if (!publishable || checkpoint === null || checkpoint.tree === store.base.workspace.baseTree) {
    return { result: none, end: { kind: 'nothing_to_publish', outcome } };
  }
  if (checkpoint.diff === null) {
    return { result: none, end: { kind: 'change_too_large', outcome } };
  }
  // A secret this job holds (a token, the model key) must never be committed, whatever put it in
  // the change: nothing is pushed, and the refusal says why without quoting it.
  if (ctx.redactor().containsKnownSecret(checkpoint.diff)) {
    log.warn('the change contains a secret of this job; not pushing');
    return { result: { ...none, outcome: 'failed' }, end: { kind: 'change_has_secret', outcome } };
  }
  progress.post({ kind: 'publishing' });
  const branch = pull?.headRef ?? branchFor(p.issue.number);
  const baseCommit = store.base.workspace.baseCommit;
  // Every git call below checks the clone's seal first (PristineTamperedError: permanent).
  await git.ensurePristine(paths.pristine, {
    url: repo.clone_url,
    branch: pull?.headRef ?? repo.default_branch,
    token: async () => (await tokens.get()).token,
  });
  await git.resetTo(paths.pristine, branch, baseCommit);
  await git.applyDiff(paths.pristine, checkpoint.diff);
  // The index is what will be committed: its modes (gitlinks) and paths, not the diff's text, are judged.
  const changes = await git.stagedChanges(paths.pristine, baseCommit);
  const verdict = checkPolicy(parseRawNumstat(changes), p.config.policy);
  if (!verdict.ok) {
    log.warn({ violations: verdict.violations }, 'push refused by policy');
    return { result: none, end: { kind: 'refused_by_policy', violations: verdict.violations } };
  }
  const message = commitMessage(ctx, pull, outcome);
  // The commit is a function of the run (author, dates, message, tree, parent), so a retry after a
  // crash produces the same commit id and its push is a no-op.
  const at = store.events.at(-1)?.ts ?? store.base.createdAt;
  const head = await git.commit(paths.pristine, message, bot, at);
  // A stop that arrived after the agent finished still wins: the push is the last thing to undo.
  const stoppedBy = await input.cancelled();
  if (stoppedBy !== null) {
    return { result: { ...none, outcome: 'cancelled' }, end: { kind: 'cancelled', by: stoppedBy } };
  }
  const token = (await tokens.get()).token;
  const remoteTip = await git.remoteBranch(paths.pristine, branch, token);
  if (remoteTip !== head) {
    if (pull !== null) {
      // A follow-up builds on the branch as it was when the job started. Anything else on it now was
      // pushed by someone else: never overwrite it.
      if (remoteTip !== baseCommit) {
        log.warn({ remoteTip, baseCommit }, 'branch moved during the follow-up; not pushing');
        return { result: none, end: { kind: 'branch_moved', outcome, branch, remoteTip, baseCommit } };
      }
      await pushOrExplain(ctx, branch, head, token, undefined);
    } else {
      const open = await openPullOn(gh, where, branch);
      if (remoteTip !== null && open !== null && open.author !== bot.login) {
        throw new PermanentJobError(`branch ${branch} already has an open pull request by someone else`);
      }
      // The branch is the App's namespace: an earlier run's branch with no open PR is replaced, but
      // only if nobody pushed to it since we looked (lease).
      await pushOrExplain(ctx, branch, head, token, remoteTip ?? undefined);
    }
    log.info({ branch, commit: head }, 'pushed');
  }

  // A person's pull request's body is theirs: no rounds are read from it (it could name any run).
  const priorById =
    pull === null || pull.human === true
      ? []
      : (await priorRoundsById(ctx.storage, pull.body, p.repo.id, pull.number)).filter(
          (r) => r.id !== ctx.jobId,
        );
  const prior = priorById.map((r) => r.store);
  const rounds = [...prior, store];
  const runs = rounds.map((r, i) => ({
    base: r.base,
    events: r.events,
    label: roundLabel(i + 1, r.base.task),
  }));
  const trajectoryLink = ctx.trajectoryLink(ctx.storage.locationOf(ctx.jobId), ctx.jobId);
  const rendered = renderPullRequest({
    runs,
    issue: {
      number: pull === null ? p.issue.number : issueNumberOf(pull.body, p.issue.number),
      title: pull?.title ?? p.issue.title,
    },
    redactor: ctx.redactor(),
    trustedHosts: githubHosts(gh.request.endpoint.DEFAULTS.baseUrl),
    conversationId: rounds[0]?.base.conversationId ?? store.base.conversationId,
    trajectoryLink,
    ...(input.attempts === undefined ? {} : { attempts: input.attempts }),
    ...(p.trigger.approvedBy == null
      ? {}
      : { approval: { requestedBy: p.trigger.sender.login, approvedBy: p.trigger.approvedBy.login } }),
  });
  const marker = roundsMarker([...priorById.map((r) => r.id), ctx.jobId]);
  const title = pull?.title ?? ctx.redactor().redact(rendered.title);
  const body = publishableText(`${rendered.body}\n${marker}\n`, audienceOf(ctx));
  const draft = p.config.draft === 'always' || outcome.outcome !== 'resolved';
  let pr: { number: number; html_url: string };
  if (pull?.human === true) {
    // A person's pull request keeps their text: what the round did and its proof (what the App's
    // own pull requests carry in their body) is a comment of its own, and the check run.
    pr = { number: pull.number, html_url: pull.url };
    await gh.rest.issues.createComment({ ...where, issue_number: pull.number, body });
  } else if (pull !== null) {
    const { data } = await gh.rest.pulls.update({ ...where, pull_number: pull.number, body });
    pr = data;
  } else {
    const found = await openPullOn(gh, where, branch);
    if (found !== null) {
      const { data } = await gh.rest.pulls.update({ ...where, pull_number: found.number, title, body });
      pr = data;
    } else {
      const { data } = await gh.rest.pulls.create({
        ...where,
        title,
        body,
        head: branch,
        base: repo.default_branch,
        draft,
      });
      pr = data;
    }
  }
  await postTrajectoryComments(
    gh,
    where,
    pr.number,
    store.base.conversationId,
    rendered.trajectoryComments
      .filter(
        (c) => findTrajectoryMarker(c)?.conversationId === store.base.conversationId || rounds.length === 1,
      )
      .map((c) => publishableText(c, audienceOf(ctx))),
    bot.login,
  );
  await postCheckRun(
    { gh, where, permissionKey: `installation ${p.installationId}`, jobId: ctx.jobId, log },
    { head, runs, audience: audienceOf(ctx), trajectoryLink },
  );
  return {
    result: {
      outcome: outcome.outcome,
      pullRequest: { number: pr.number, url: pr.html_url },
      pushed: true,
      trajectory: ctx.storage.locationOf(ctx.jobId),
      runId: ctx.jobId,
      branch,
    },
    end: { kind: 'pr_ready', outcome, pr, draft, updated: pull !== null, head, branch },
  };
}

/** The commit's message: what it fixes, the agent's summary, and trailers naming the job. */
function commitMessage(ctx: JobContext, pull: PullInfo | null, outcome: Outcome): string {
  const { p } = ctx;
  const subject =
    pull === null
      ? `Fix #${p.issue.number}: ${oneLine(p.issue.title)}`
      : p.ci != null
        ? `Fix CI on #${pull.number} (round ${p.ci.round} of ${p.ci.of}): ${oneLine(p.ci.checks.map((c) => c.name).join(', '))}`
        : `Follow-up on #${pull.number}: ${oneLine(p.instructions[0] ?? p.reviewComments[0]?.body ?? 'review comments')}`;
  return ctx
    .redactor()
    .redact(
      [
        subject.slice(0, 200),
        '',
        oneParagraph(outcome.summary ?? ''),
        '',
        ...(pull === null ? [`Fixes #${p.issue.number}`, ''] : []),
        `Issue-Agent-Job: ${ctx.jobId}`,
        `Issue-Agent-Outcome: ${outcome.outcome}`,
      ].join('\n'),
    );
}

async function pushOrExplain(
  ctx: JobContext,
  branch: string,
  head: string,
  token: string,
  lease: string | undefined,
): Promise<void> {
  try {
    await ctx.git.push(ctx.paths.pristine, branch, token, lease);
  } catch (error) {
    // Rejected as non-fast-forward: someone pushed between our check and our push.
    if (
      error instanceof HostGitError &&
      /rejected|non-fast-forward|fetch first|stale info/i.test(error.message)
    ) {
      throw new PermanentJobError(
        `the push of ${head.slice(0, 12)} to ${branch} was refused because the branch moved; nothing was overwritten`,
      );
    }
    throw error;
  }
}

/** The trajectory parts that did not fit the PR body; each part once, found again by its marker. */
async function postTrajectoryComments(
  gh: GitHubClient,
  where: { owner: string; repo: string },
  pr: number,
  conversationId: string,
  parts: readonly Publishable[],
  botLogin: string,
): Promise<void> {
  if (parts.length === 0) return;
  const posted = new Set<number>();
  for await (const page of gh.paginate.iterator(gh.rest.issues.listComments, {
    ...where,
    issue_number: pr,
    per_page: 100,
  })) {
    for (const c of page.data) {
      if (c.user?.login !== botLogin) continue;
      const m = findTrajectoryMarker(c.body ?? '');
      if (m?.conversationId === conversationId) posted.add(m.part);
    }
  }
  for (const part of parts) {
    const m = findTrajectoryMarker(part);
    if (m !== null && posted.has(m.part)) continue;
    await gh.rest.issues.createComment({ ...where, issue_number: pr, body: part });
  }
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

/** A round's label in the PR body: `Round n`, or for an automatic CI round which one of how many. */
function roundLabel(n: number, task: { readonly title: string; readonly source: string }): string {
  // Only a follow-up round (its source is the PR) can be a CI round: an issue's title is not trusted.
  const ci =
    n === 1 ? null : /^Fix the failing CI of pull request #\d+ \(round (\d+) of (\d+)\)/.exec(task.title);
  return ci === null ? `Round ${n}` : `CI fix ${ci[1] ?? '?'} of ${ci[2] ?? '?'}`;
}
