import type { Outcome } from '../../agent/run-agent.js';
import type { EventStore } from '../../events/event-store.js';
import { reduceState } from '../../events/reduce-state.js';
import type { GitHubClient } from '../../github/app-client.js';
import {
  createApiCommit,
  isOwnCommit,
  parseRawEntries,
  planApiCommit,
  type ApiPlan,
} from '../../github/api-commit.js';
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
 * the repo's policy, and committed as the App's bot (through GitHub's API, or pushed: putOnBranch);
 * then the PR is opened or updated.
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
  // The index is what will be committed (pushed, or sent through the API: putOnBranch takes this same
  // index): its modes (gitlinks) and paths, not the diff's text, are judged.
  const changes = await git.stagedChanges(paths.pristine, baseCommit);
  const verdict = checkPolicy(parseRawNumstat(changes), p.config.policy);
  if (!verdict.ok) {
    log.warn({ violations: verdict.violations }, 'push refused by policy');
    return { result: none, end: { kind: 'refused_by_policy', violations: verdict.violations } };
  }
  const message = commitMessage(ctx, pull, outcome);
  const placed = await putOnBranch(ctx, input, { branch, baseCommit, message });
  if ('end' in placed) return { result: { ...none, outcome: placed.outcome }, end: placed.end };
  const { head, fallback } = placed;

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
  // Said in the PR: its newest commit is not GitHub-signed, and why (the App's commits normally are).
  const note =
    fallback === null
      ? ''
      : `> [!NOTE]\n> The last commit was pushed with git, not made through GitHub's API, so GitHub did not sign it: ${fallback}.\n`;
  const body = publishableText(`${rendered.body}\n${note}${marker}\n`, audienceOf(ctx));
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

/** Where the change went: its commit on the branch (and why it was pushed with git, if it was), or how the job ends. */
type Placed =
  | { readonly head: string; readonly fallback: string | null }
  | { readonly end: JobEnd; readonly outcome: Outcome['outcome'] | 'cancelled' };

/**
 * Commits the judged index onto `branch`: through GitHub's git database API (signed by GitHub) when
 * the runtime says so and the API can carry the change, else committed on the host and pushed. The
 * checks before this (secret refusal, policy on the index) hold for both ways: both take the same
 * index, and the API way refuses a tree that is not that index's.
 */
async function putOnBranch(
  ctx: JobContext,
  input: PublishInput,
  target: { readonly branch: string; readonly baseCommit: string; readonly message: string },
): Promise<Placed> {
  const { git, paths, bot, log, gh, where, tokens } = ctx;
  const { pull, outcome, store } = input;
  const { branch, baseCommit, message } = target;
  // A fork's branch: the App is not installed on the fork, so GitHub's API cannot write there; git
  // can, for the head branch of a pull request whose author allows edits by maintainers.
  const fork = input.repo.fork;
  const api = ctx.commitVia === 'api' && fork === undefined ? await apiPlan(ctx, baseCommit) : null;
  const viaApi = api?.plan.kind === 'api' ? { plan: api.plan, tree: api.tree } : null;
  const fallback =
    ctx.commitVia === 'api' && fork !== undefined
      ? `the branch is in the fork \`${fork}\`, where the App is not installed, so its API cannot write there`
      : api?.plan.kind === 'push'
        ? api.plan.why
        : null;
  if (fallback !== null)
    log.info({ why: fallback }, 'the change is pushed with git, not made through the API');
  // The pushed commit is a function of the run (author, dates, message, tree, parent), so a retry
  // after a crash produces the same commit id and its push is a no-op. An API commit is not (GitHub
  // dates it): a retry finds it by its parent, tree and job trailer instead.
  const at = store.events.at(-1)?.ts ?? store.base.createdAt;
  const local = viaApi === null ? await git.commit(paths.pristine, message, bot, at) : null;
  // A stop that arrived after the agent finished still wins: moving the branch is the last thing to undo.
  const stoppedBy = await input.cancelled();
  if (stoppedBy !== null) return { end: { kind: 'cancelled', by: stoppedBy }, outcome: 'cancelled' };
  const token = (await tokens.get()).token;
  const remoteTip = await git.remoteBranch(paths.pristine, branch, token);
  if (remoteTip !== null && remoteTip === local) return { head: local, fallback };
  if (
    viaApi !== null &&
    remoteTip !== null &&
    remoteTip !== baseCommit &&
    (await isOwnCommit(gh, where, remoteTip, {
      parent: baseCommit,
      tree: viaApi.tree,
      jobTrailer: `Issue-Agent-Job: ${ctx.jobId}`,
    }))
  )
    return { head: remoteTip, fallback: null };
  if (pull !== null && remoteTip !== baseCommit) {
    // A follow-up builds on the branch as it was when the job started. Anything else on it now was
    // pushed by someone else: never overwrite it.
    log.warn({ remoteTip, baseCommit }, 'branch moved during the follow-up; not pushing');
    return {
      end: { kind: 'branch_moved', outcome, branch, remoteTip, baseCommit },
      outcome: outcome.outcome,
    };
  }
  if (pull === null && remoteTip !== null) {
    const open = await openPullOn(gh, where, branch);
    if (open !== null && open.author !== bot.login)
      throw new PermanentJobError(`branch ${branch} already has an open pull request by someone else`);
  }
  let head: string;
  if (viaApi !== null) {
    head = await createApiCommit(gh, where, {
      plan: viaApi.plan,
      readBlob: (sha) => git.readBlob(paths.pristine, sha),
      parent: baseCommit,
      tree: viaApi.tree,
      message,
    });
    await moveRef(ctx, branch, head, remoteTip, pull !== null);
  } else {
    head = local ?? (await git.commit(paths.pristine, message, bot, at));
    // The branch is the App's namespace: an earlier run's branch with no open PR is replaced, but
    // only if nobody pushed to it since we looked (lease). A follow-up's push is a fast-forward.
    const refused = await pushOrExplain(
      ctx,
      branch,
      head,
      token,
      pull === null ? (remoteTip ?? undefined) : undefined,
      fork,
    );
    if (refused !== null) {
      log.warn({ branch, fork, reason: refused }, 'the fork refused the push');
      return {
        end: { kind: 'fork_push_refused', outcome, branch, fork: fork ?? '', reason: refused },
        outcome: outcome.outcome,
      };
    }
  }
  log.info({ branch, commit: head, via: viaApi === null ? 'push' : 'api' }, 'pushed');
  return { head, fallback };
}

/** The API way for the staged change (or why it is pushed), and the id of the index's tree. */
async function apiPlan(ctx: JobContext, baseCommit: string): Promise<{ plan: ApiPlan; tree: string }> {
  const { git, paths } = ctx;
  const entries = parseRawEntries(await git.stagedEntries(paths.pristine, baseCommit));
  const written = [...new Set(entries.filter((e) => !/^0+$/.test(e.newMode)).map((e) => e.newSha))];
  const plan = planApiCommit(entries, await git.blobSizes(paths.pristine, written));
  return { plan, tree: await git.writeTree(paths.pristine) };
}

/**
 * Points `branch` at the API-made `head`. Creating refuses if the branch appeared meanwhile; a
 * follow-up's update is a fast-forward (refused if the branch moved); replacing an earlier run's
 * branch is forced, after reading that it is still at `remoteTip` (the REST API has no lease, so
 * this narrows the window to one request). A refusal (moved, or a rule of a protected branch) is
 * permanent, with GitHub's words.
 */
async function moveRef(
  ctx: JobContext,
  branch: string,
  head: string,
  remoteTip: string | null,
  fastForward: boolean,
): Promise<void> {
  const { gh, where } = ctx;
  const moved = new PermanentJobError(
    `the update of ${branch} to ${head.slice(0, 12)} was refused because the branch moved; nothing was overwritten`,
  );
  try {
    if (remoteTip === null) {
      await gh.rest.git.createRef({ ...where, ref: `refs/heads/${branch}`, sha: head });
    } else if (fastForward) {
      await gh.rest.git.updateRef({ ...where, ref: `heads/${branch}`, sha: head, force: false });
    } else {
      const now = await gh.rest.git.getRef({ ...where, ref: `heads/${branch}` });
      if (now.data.object.sha !== remoteTip) throw moved;
      await gh.rest.git.updateRef({ ...where, ref: `heads/${branch}`, sha: head, force: true });
    }
  } catch (error) {
    const status =
      typeof error === 'object' && error !== null && 'status' in error ? Number(error.status) : null;
    if (status === 422 && error instanceof Error) {
      if (/already exists|not a fast forward/i.test(error.message)) throw moved;
      throw new PermanentJobError(`GitHub refused to update ${branch}: ${oneLine(error.message)}`);
    }
    throw error;
  }
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
        ...coAuthor(p.trigger.sender, ctx.bot.login),
      ].join('\n'),
    );
}

/**
 * Pushes `head` to `branch`; a push that lost a race is permanent. A fork that refuses the App (its
 * author turned edits by maintainers off, or closed the pull request) returns GitHub's words: the
 * job ends saying so, with the change still in its trajectory.
 */
async function pushOrExplain(
  ctx: JobContext,
  branch: string,
  head: string,
  token: string,
  lease: string | undefined,
  fork: string | undefined,
): Promise<string | null> {
  try {
    await ctx.git.push(ctx.paths.pristine, branch, token, lease);
    return null;
  } catch (error) {
    if (
      fork !== undefined &&
      error instanceof HostGitError &&
      /permission|denied|403|not found|404/i.test(error.message)
    ) {
      return "GitHub refused it (it lets the App push to a fork's branch only while the pull request is open and its author allows edits by maintainers)";
    }
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

/**
 * The requester as a co-author (GitHub credits the commit to them too), by their noreply address so
 * no private address is needed; none for a bot (a CI round, another App).
 */
function coAuthor(sender: { readonly login: string; readonly id: number }, botLogin: string): string[] {
  if (sender.login === botLogin || sender.login.endsWith('[bot]') || !/^[A-Za-z0-9-]+$/.test(sender.login))
    return [];
  return [`Co-authored-by: ${sender.login} <${sender.id}+${sender.login}@users.noreply.github.com>`];
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
