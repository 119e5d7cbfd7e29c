import { existsSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { newBaseState } from '../agent/new-run.js';
import { runAgent, type Outcome } from '../agent/run-agent.js';
import { stripHiddenText } from '../agent/untrusted-text.js';
import type { AgentEnv } from '../config/agent-env.js';
import { FileEventStore } from '../events/file-event-store.js';
import { reduceState } from '../events/reduce-state.js';
import type { Limits, Task } from '../events/schema.js';
import type { BotIdentity, GitHubClient } from '../github/app-client.js';
import { HostGit, HostGitError } from '../github/host-git.js';
import { pristineDir, pristineRoot } from '../github/pristine-clone.js';
import type { Model } from '../model/model.js';
import { checkPolicy, parseRawNumstat } from '../publish/policy.js';
import { findTrajectoryMarker } from '../publish/markers.js';
import { neutralizeInline, truncateEnd } from '../publish/markdown.js';
// `publishable` is also this file's word for an outcome that may open a PR.
import {
  githubHosts,
  hostsIn,
  publishable as publishableText,
  type Audience,
  type Publishable,
} from '../publish/publishable.js';
import { renderPullRequest } from '../publish/pr-body.js';
import { Redactor } from '../publish/redact.js';
import type { FixJob } from '../queue/payloads.js';
import { createSandbox } from '../sandbox/create-sandbox.js';
import type { Sandbox } from '../sandbox/sandbox.js';
import { approvedIssueText, openPullOn, pullOwnership } from '../app/trigger-rules.js';
import { ProgressReporter } from './progress-reporter.js';

/**
 * Where a fix run gets what the App and the Action provide differently: the GitHub client and the
 * token for git (an installation token the App mints, or the workflow's token), who the bot is, how
 * a stop request arrives (a Redis flag, or the runner's signal), and whether a failure is final.
 * Nothing here knows about BullMQ, Redis or App credentials.
 */
export interface FixRuntime {
  readonly jobId: string;
  /** The folder holding every job's folder (`<jobsDir>/<jobId>/…`); earlier rounds are found here. */
  readonly jobsDir: string;
  readonly gh: GitHubClient;
  readonly tokens: TokenSource;
  /** Secrets beside the GitHub tokens that must never be posted (keys, webhook secret). */
  readonly secrets: readonly string[];
  readonly bot: BotIdentity;
  readonly agent: AgentEnv;
  readonly model: (name: string) => Model;
  readonly sandbox: 'docker' | 'local';
  /**
   * For a `local` sandbox: run it in namespaces (no host processes, no network) with these host
   * paths hidden, beside the job's own pristine clone and trajectory, which are always hidden then.
   * Unset: a plain child process (the App's workers use Docker for untrusted code).
   */
  readonly isolateLocal?: { readonly hide: readonly string[] };
  /** Where people read the full trajectory (the run view), or null. */
  readonly runLink: string | null;
  /** The PR's text for the full trajectory (with `runLink` or, without one, where the log is kept). */
  readonly trajectoryLink: (trajectoryDir: string) => string;
  /** Who asked to stop this job, or null. Polled every 500 ms while the job runs, and before the push. */
  readonly cancelled: () => Promise<string | null>;
  /** 1-based attempt number, and whether a failure now is final (no retry will follow). */
  readonly attempt: { readonly number: number; readonly final: boolean };
  readonly logger: Logger;
  /** Step updates of the progress comment are at most this often. */
  readonly progressIntervalMs?: number;
  /** The branch new PRs start from and target; default: the repository's default branch. */
  readonly baseBranch?: string | null;
}

/** GitHub tokens for git over HTTPS; every token handed out is remembered for redaction. */
export interface TokenSource {
  get(): Promise<{ readonly token: string }>;
  readonly issued: Iterable<string>;
}

export interface FixJobResult {
  readonly outcome: Outcome['outcome'];
  readonly pullRequest: { readonly number: number; readonly url: string } | null;
  readonly pushed: boolean;
  readonly trajectory: string;
  /** The branch pushed to (or that would have been), and the progress comment's id. */
  readonly branch: string | null;
}

/** A failure no retry can fix (refused by policy, not the App's PR, branch moved under us…). */
export class PermanentJobError extends Error {
  override readonly name = 'PermanentJobError';
}

/** The job failed; `permanent` says whether retrying can help. The progress comment already says so. */
export class FixRunError extends Error {
  override readonly name = 'FixRunError';
  constructor(
    message: string,
    readonly permanent: boolean,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export const branchFor = (issue: number): string => `issue-agent/issue-${issue}`;

/** Job ids are made of [A-Za-z0-9-] (see queues.ts); anything else is refused rather than escaped. */
export function jobFolder(jobsDir: string, jobId: string): string {
  if (!/^[A-Za-z0-9-]+$/.test(jobId)) throw new PermanentJobError(`unexpected job id ${jobId}`);
  return join(jobsDir, jobId);
}

/**
 * One fix job, start to PR. Every stage can be re-entered after a crash: the trajectory folder is
 * keyed by the job id, so a second worker (after BullMQ's stall detection) resumes the event log
 * instead of starting again; publishing finds its commit (deterministic), its branch and its PR
 * again instead of duplicating them. Failures are reported on the progress comment and thrown as
 * FixRunError.
 */
export async function runFix(p: FixJob, rt: FixRuntime, signal?: AbortSignal): Promise<FixJobResult> {
  const jobId = rt.jobId;
  const dir = jobFolder(rt.jobsDir, jobId);
  const paths = {
    trajectory: join(dir, 'trajectory'),
    // Outside the job folder (which holds the workspace): see pristine-clone.ts.
    pristine: pristineDir(rt.jobsDir, jobId),
    workspace: join(dir, 'workspace'),
  };
  const log = rt.logger.child({
    job: jobId,
    repo: `${p.repo.owner}/${p.repo.name}`,
    issue: p.issue.number,
  });
  const { gh, tokens, bot } = rt;
  const redactor = (): Redactor => new Redactor([...tokens.issued, ...rt.secrets]);
  const git = new HostGit(rt.agent.sandboxPath, (t) => redactor().redact(t));
  const where = { owner: p.repo.owner, repo: p.repo.name };

  const progress = new ProgressReporter(
    gh,
    where,
    p.issue.number,
    p.progressCommentId,
    jobId,
    redactor,
    log,
    rt.runLink,
    bot.login,
    rt.progressIntervalMs,
  );
  const none = (outcome: Outcome['outcome']): FixJobResult => ({
    outcome,
    pullRequest: null,
    pushed: false,
    trajectory: paths.trajectory,
    branch: null,
  });

  // A stop request reaches the job through `rt.cancelled`: the agent stops at its next step boundary
  // (the running command and a pending model call are aborted through the same signal).
  const cancel = new AbortController();
  let cancelledBy: string | null = await rt.cancelled();
  const poll = setInterval(() => {
    void rt.cancelled().then(
      (by) => {
        if (by !== null && !cancel.signal.aborted) {
          cancelledBy = by;
          cancel.abort(new Error(`cancelled by ${by}`));
        }
      },
      () => undefined,
    );
  }, 500);
  const runSignal = signal === undefined ? cancel.signal : AbortSignal.any([signal, cancel.signal]);

  try {
    await mkdir(dir, { recursive: true });
    // Who and what this job is for, beside its trajectory: the run index reads it without the queue.
    // Written once: a resumed attempt keeps the first start time.
    if (!existsSync(join(dir, 'job.json'))) {
      const record = { schemaVersion: 1, id: jobId, payload: p, startedAt: new Date().toISOString() };
      await writeFile(join(dir, 'job.json'), `${JSON.stringify(record, null, 2)}\n`);
    }
    const { data: repoData } = await gh.rest.repos.get(where);
    // The branch a new PR starts from and targets: the repository's default unless the runtime names one.
    const repo = { clone_url: repoData.clone_url, default_branch: rt.baseBranch ?? repoData.default_branch };
    let store = openStore(paths.trajectory);
    let outcome = store === null ? null : reduceState(store.events).outcome;
    if (outcome === null && cancelledBy !== null) {
      await progress.update({ kind: 'cancelled', by: cancelledBy });
      return none('cancelled');
    }
    let pull: PullInfo | null = null;
    if (p.kind === 'follow-up' && p.pull !== null) {
      const { data: pr } = await gh.rest.pulls.get({ ...where, pull_number: p.pull.number });
      if (!pullOwnership(pr, bot.id).ours) {
        throw new PermanentJobError(`pull request #${pr.number} is not one of the App's own pull requests`);
      }
      pull = {
        number: pr.number,
        title: pr.title,
        body: pr.body ?? '',
        headRef: pr.head.ref,
        headSha: pr.head.sha,
        url: pr.html_url,
      };
      if (outcome === null && pr.state !== 'open') {
        await progress.update({
          kind: 'ended',
          outcome: 'cancelled',
          reason: `pull request #${pr.number} was ${pr.merged ? 'merged' : 'closed'} before the job started, so the request was dropped`,
          summary: '',
        });
        return none('cancelled');
      }
    }
    if (outcome === null) {
      const { data: issue } = await gh.rest.issues.get({ ...where, issue_number: p.issue.number });
      if (store === null && issue.state !== 'open') {
        await progress.update({
          kind: 'ended',
          outcome: 'cancelled',
          reason: 'the issue was closed before the job started, so the request was dropped',
          summary: '',
        });
        return none('cancelled');
      }
      // A new run works from the issue's text as it was when the job was asked for.
      const approved = pull === null && store === null ? await approvedIssueText(gh, p, issue) : null;
      if (approved?.ok === false) {
        log.warn({ reason: approved.reason }, 'the issue changed since the request; not starting');
        await progress.update({ kind: 'ended', outcome: 'cancelled', reason: approved.reason, summary: '' });
        return none('cancelled');
      }
      if (approved?.ok === true && approved.note !== null) log.info({ note: approved.note }, 'task text');
      await progress.update({ kind: 'working', step: 0, tokens: 0, costUsd: 0, elapsedMs: 0 });
      const branch = pull?.headRef ?? repo.default_branch;
      await git.ensurePristine(paths.pristine, {
        url: repo.clone_url,
        branch,
        token: async () => (await tokens.get()).token,
      });
      const baseCommit = store?.base.workspace.baseCommit ?? (await git.revParse(paths.pristine, 'HEAD'));
      await git.copyForSandbox(paths.pristine, paths.workspace, baseCommit, repo.clone_url);
      const sandbox: Sandbox = await createSandbox({
        kind: rt.sandbox,
        workspace: paths.workspace,
        path: rt.agent.sandboxPath,
        jobId,
        limits: rt.agent.sandboxLimits,
        ...(rt.isolateLocal === undefined
          ? {}
          : { isolate: { hide: [pristineRoot(rt.jobsDir), paths.trajectory, ...rt.isolateLocal.hide] } }),
      });
      try {
        // A container got its own copy of the files (the host copy was never seen by any sandbox
        // process, so removing it by name is safe); a local sandbox works in the copy itself.
        if (sandbox.kind === 'docker') await rm(paths.workspace, { recursive: true, force: true });
        if (store === null) {
          // A half-written folder (crash before base_state.json) holds nothing worth keeping.
          await rm(paths.trajectory, { recursive: true, force: true });
          const task =
            pull === null
              ? {
                  title: stripHiddenText(approved?.ok === true ? approved.title : issue.title),
                  body: stripHiddenText(approved?.ok === true ? approved.body : (issue.body ?? '')),
                  instructions: p.instructions,
                  source: `${p.repo.owner}/${p.repo.name}#${p.issue.number}`,
                }
              : followUpTask(p, pull, priorRounds(rt.jobsDir, pull.body, p.repo.id, pull.number));
          const base = await newBaseState({
            task,
            sandbox,
            model: rt.agent.model,
            limits: limitsFor(rt.agent.limits, p.config.budgets),
            testCommand: p.config.testCommand,
            conversationId: jobId,
          });
          store = FileEventStore.create(paths.trajectory, base);
        }
        const s = store;
        outcome = await runAgent({
          store: s,
          sandbox,
          model: rt.model(s.base.model),
          prices: rt.agent.prices,
          signal: runSignal,
          logger: log,
          // Known secrets never reach the model or the log, even if a command saw one.
          scrub: (text) => redactor().redact(text),
          onEvent: (e) => {
            progress.onEvent(e, s);
          },
        });
      } finally {
        await sandbox.close();
      }
    }
    if (store === null) throw new Error('no trajectory after the run');
    if (outcome.outcome === 'cancelled') {
      await progress.update({ kind: 'cancelled', by: cancelledBy });
      return none('cancelled');
    }
    return await publish({
      p,
      jobId,
      store,
      outcome,
      gh,
      git,
      tokens,
      repo,
      pull,
      paths,
      bot,
      progress,
      redactor,
      jobsDir: rt.jobsDir,
      trajectoryLink: rt.trajectoryLink,
      log,
      cancelled: rt.cancelled,
    });
  } catch (error) {
    const permanent = isPermanent(error);
    const reason = redactor().redact(error instanceof Error ? error.message : String(error));
    log.error({ err: error, attempt: rt.attempt.number }, 'fix job failed');
    if (permanent || rt.attempt.final) {
      await progress.update({ kind: 'ended', outcome: 'failed', reason, summary: '' });
    } else {
      await progress.update({ kind: 'retrying', attempt: rt.attempt.number, reason });
    }
    throw new FixRunError(reason, permanent, { cause: error });
  } finally {
    clearInterval(poll);
  }
}

interface PullInfo {
  readonly number: number;
  readonly title: string;
  readonly body: string;
  readonly headRef: string;
  readonly headSha: string;
  readonly url: string;
}

/** The rounds a PR already holds, by conversation id, from the hidden marker in its body. */
const ROUNDS_MARKER = /<!-- issue-agent:rounds ([A-Za-z0-9,-]+) -->/;

function roundIds(body: string): string[] {
  return (
    ROUNDS_MARKER.exec(body)?.[1]
      ?.split(',')
      .filter((id) => /^[A-Za-z0-9-]+$/.test(id)) ?? []
  );
}

/** The stores of the PR's earlier rounds that this host still has (trajectories live with the workers). */
function priorRounds(jobsDir: string, body: string, repoId: number, pull: number): FileEventStore[] {
  // Only rounds of this PR (follow-ups) or of the issue it fixes (the first round): a marker edited
  // to name another repository's job must not pull that job's trajectory in.
  const issue = /^Fixes #(\d+)$/m.exec(body)?.[1];
  const allowed = [`r${repoId}-i${pull}-`, ...(issue === undefined ? [] : [`r${repoId}-i${issue}-`])];
  return roundIds(body)
    .filter((id) => allowed.some((prefix) => id.startsWith(prefix)))
    .flatMap((id) => {
      const store = openStore(join(jobsDir, id, 'trajectory'));
      return store === null ? [] : [store];
    });
}

/**
 * The task of a follow-up round: the request, the review comments it refers to with their file, line
 * and diff hunk, and what earlier rounds did. All of it is untrusted text and is fenced as such.
 */
function followUpTask(p: FixJob, pull: PullInfo, prior: readonly FileEventStore[]): Task {
  const parts: string[] = [
    `This is pull request #${pull.number} ("${stripHiddenText(pull.title)}"), opened earlier by this agent. ` +
      `A maintainer (@${p.trigger.sender.login}) asked for more changes on its branch \`${pull.headRef}\`, ` +
      'which is checked out in the workspace.',
  ];
  for (const [i, store] of prior.entries()) {
    const o = reduceState(store.events).outcome;
    parts.push(
      `Round ${i + 1} (${o?.outcome ?? 'unfinished'}): ${stripHiddenText(o?.summary ?? store.base.task.title)}`,
    );
  }
  for (const c of p.reviewComments) {
    parts.push(
      [
        `Review comment by @${c.author} on ${c.path}${c.line === null ? '' : `, line ${c.line}`}:`,
        '```diff',
        c.diffHunk.replace(/```/g, '``\u200b`'),
        '```',
        stripHiddenText(c.body),
      ].join('\n'),
    );
  }
  return {
    title: `Follow-up on pull request #${pull.number}: ${stripHiddenText(pull.title)}`,
    body: parts.join('\n\n'),
    instructions: p.instructions,
    source: `${p.repo.owner}/${p.repo.name}#${pull.number}`,
  };
}

/**
 * Failures a retry cannot fix: a refused request (4xx other than timeouts, conflicts and rate limits,
 * which the client has already waited out), a git error that is not about the network, anything
 * marked unrecoverable. Everything else (5xx after the client's own retries, connection errors) is
 * retried by BullMQ with backoff.
 */
function isPermanent(error: unknown): boolean {
  if (error instanceof PermanentJobError) return true;
  if (error instanceof HostGitError) return !error.transient;
  const status = typeof error === 'object' && error !== null && 'status' in error ? error.status : undefined;
  return typeof status === 'number' && status >= 400 && status < 500 && ![408, 409, 429].includes(status);
}

function openStore(dir: string): FileEventStore | null {
  if (!existsSync(join(dir, 'base_state.json'))) return null;
  return FileEventStore.open(dir);
}

function limitsFor(
  defaults: Limits,
  budgets: { maxSteps?: number | undefined; maxUsd?: number | undefined; maxMinutes?: number | undefined },
): Limits {
  return {
    ...defaults,
    ...(budgets.maxSteps === undefined ? {} : { maxSteps: budgets.maxSteps }),
    ...(budgets.maxUsd === undefined ? {} : { maxUsd: budgets.maxUsd }),
    ...(budgets.maxMinutes === undefined ? {} : { maxWallMs: Math.round(budgets.maxMinutes * 60_000) }),
  };
}

interface PublishInput {
  readonly p: FixJob;
  readonly jobId: string;
  readonly store: FileEventStore;
  readonly outcome: Outcome;
  readonly gh: GitHubClient;
  readonly git: HostGit;
  readonly tokens: TokenSource;
  readonly repo: { clone_url: string; default_branch: string };
  readonly pull: PullInfo | null;
  readonly paths: { trajectory: string; pristine: string; workspace: string };
  readonly bot: BotIdentity;
  readonly progress: ProgressReporter;
  readonly redactor: () => Redactor;
  readonly jobsDir: string;
  readonly trajectoryLink: (trajectoryDir: string) => string;
  readonly log: Logger;
  /** Who asked to stop the job since it started, or null. */
  readonly cancelled: () => Promise<string | null>;
}

/**
 * On the host, after the sandbox is gone: the agent's change comes back as the diff recorded in the
 * event log (data, never the workspace's .git), is applied to the pristine clone, checked against
 * the repo's policy, committed as the App's bot and pushed; then the PR is opened or updated.
 */
async function publish(input: PublishInput): Promise<FixJobResult> {
  const { p, store, outcome, gh, git, tokens, repo, pull, paths, bot, progress, log } = input;
  const where = { owner: p.repo.owner, repo: p.repo.name };
  const state = reduceState(store.events);
  const checkpoint = state.lastCheckpoint;
  const none = {
    outcome: outcome.outcome,
    pullRequest: null,
    pushed: false,
    trajectory: paths.trajectory,
    branch: null,
  } as const;
  const publishable = outcome.outcome === 'resolved' || outcome.outcome === 'unverified';
  if (!publishable || checkpoint === null || checkpoint.tree === store.base.workspace.baseTree) {
    await progress.update({
      kind: 'ended',
      outcome: outcome.outcome,
      reason: outcome.reason,
      summary: outcome.summary ?? '',
      ...(outcome.limit === undefined ? {} : { limit: outcome.limit }),
      ...(outcome.cause === undefined ? {} : { cause: outcome.cause }),
    });
    await replyInThread(
      input,
      `I made no change this time: ${neutralizeInline(input.redactor().redact(outcome.reason))}`,
    );
    return none;
  }
  if (checkpoint.diff === null) {
    await progress.update({
      kind: 'ended',
      outcome: 'failed',
      reason: 'the change was too large to record in the trajectory, so it cannot be published',
      summary: outcome.summary,
    });
    return none;
  }
  // A secret this job holds (a token, the model key) must never be committed, whatever put it in
  // the change: nothing is pushed, and the refusal says why without quoting it.
  if (input.redactor().containsKnownSecret(checkpoint.diff)) {
    log.warn('the change contains a secret of this job; not pushing');
    await progress.update({
      kind: 'ended',
      outcome: 'failed',
      reason: 'the change contains a secret this job holds (a token or key), so nothing was pushed',
      summary: outcome.summary ?? '',
    });
    await replyInThread(input, 'I did not push: the change contained a secret of this job.');
    return { ...none, outcome: 'failed' };
  }
  await progress.update({ kind: 'publishing' });
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
    await progress.update({
      kind: 'refused',
      reason: "the change breaks this repository's push policy, so nothing was pushed",
      violations: verdict.violations,
    });
    await replyInThread(
      input,
      "I did not push: the change breaks this repository's push policy (see the progress comment).",
    );
    return none;
  }
  const subject =
    pull === null
      ? `Fix #${p.issue.number}: ${oneLine(p.issue.title)}`
      : `Follow-up on #${pull.number}: ${oneLine(p.instructions[0] ?? p.reviewComments[0]?.body ?? 'review comments')}`;
  const message = input
    .redactor()
    .redact(
      [
        subject.slice(0, 200),
        '',
        oneParagraph(outcome.summary ?? ''),
        '',
        ...(pull === null ? [`Fixes #${p.issue.number}`, ''] : []),
        `Issue-Agent-Job: ${input.jobId}`,
        `Issue-Agent-Outcome: ${outcome.outcome}`,
      ].join('\n'),
    );
  // The commit is a function of the run (author, dates, message, tree, parent), so a retry after a
  // crash produces the same commit id and its push is a no-op.
  const at = store.events.at(-1)?.ts ?? store.base.createdAt;
  const head = await git.commit(paths.pristine, message, bot, at);
  // A stop that arrived after the agent finished still wins: the push is the last thing to undo.
  const stoppedBy = await input.cancelled();
  if (stoppedBy !== null) {
    await progress.update({ kind: 'cancelled', by: stoppedBy });
    return { ...none, outcome: 'cancelled' };
  }
  const token = (await tokens.get()).token;
  const remoteTip = await git.remoteBranch(paths.pristine, branch, token);
  if (remoteTip !== head) {
    if (pull !== null) {
      // A follow-up builds on the branch as it was when the job started. Anything else on it now was
      // pushed by someone else: never overwrite it.
      if (remoteTip !== baseCommit) {
        const reason =
          remoteTip === null
            ? `the branch \`${branch}\` was deleted while I worked, so I did not push`
            : `someone pushed to \`${branch}\` while I worked (it is now at ${remoteTip.slice(0, 12)}, I started from ${baseCommit.slice(0, 12)}); I did not push, so nothing of theirs is lost. Ask again to build on top of their commits`;
        log.warn({ remoteTip, baseCommit }, 'branch moved during the follow-up; not pushing');
        await progress.update({ kind: 'ended', outcome: outcome.outcome, reason, summary: outcome.summary });
        await replyInThread(input, `I did not push: ${reason}.`);
        return none;
      }
      await pushOrExplain(input, branch, head, token, undefined);
    } else {
      const open = await openPullOn(gh, where, branch);
      if (remoteTip !== null && open !== null && open.author !== bot.login) {
        throw new PermanentJobError(`branch ${branch} already has an open pull request by someone else`);
      }
      // The branch is the App's namespace: an earlier run's branch with no open PR is replaced, but
      // only if nobody pushed to it since we looked (lease).
      await pushOrExplain(input, branch, head, token, remoteTip ?? undefined);
    }
    log.info({ branch, commit: head }, 'pushed');
  }

  const prior =
    pull === null
      ? []
      : priorRounds(input.jobsDir, pull.body, p.repo.id, pull.number).filter(
          (r) => r.base.conversationId !== store.base.conversationId,
        );
  const rounds = [...prior, store];
  const rendered = renderPullRequest({
    runs: rounds.map((r, i) => ({ base: r.base, events: r.events, label: `Round ${i + 1}` })),
    issue: {
      number: pull === null ? p.issue.number : issueNumberOf(pull.body, p.issue.number),
      title: pull?.title ?? p.issue.title,
    },
    redactor: input.redactor(),
    trustedHosts: githubHosts(gh.request.endpoint.DEFAULTS.baseUrl),
    conversationId: rounds[0]?.base.conversationId ?? store.base.conversationId,
    trajectoryLink: input.trajectoryLink(paths.trajectory),
  });
  const roundsMarker = `<!-- issue-agent:rounds ${rounds.map((r) => r.base.conversationId).join(',')} -->`;
  const title = pull?.title ?? input.redactor().redact(rendered.title);
  const body = publishableText(`${rendered.body}\n${roundsMarker}\n`, audienceOf(input));
  const draft = p.config.draft === 'always' || outcome.outcome !== 'resolved';
  let pr: { number: number; html_url: string };
  if (pull !== null) {
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
      .map((c) => publishableText(c, audienceOf(input))),
    bot.login,
  );
  await progress.update({
    kind: 'pr_opened',
    url: pr.html_url,
    number: pr.number,
    outcome: outcome.outcome,
    draft,
    ...(pull === null ? {} : { updated: true }),
  });
  await replyInThread(
    input,
    `Pushed ${head.slice(0, 12)} to \`${branch}\` (${outcome.outcome}). ${neutralizeInline(truncateEnd(input.redactor().redact(oneParagraph(outcome.summary ?? '')), 500))}`,
  );
  log.info({ pr: pr.number }, 'pull request ready');
  return {
    outcome: outcome.outcome,
    pullRequest: { number: pr.number, url: pr.html_url },
    pushed: true,
    trajectory: paths.trajectory,
    branch,
  };
}

async function pushOrExplain(
  input: PublishInput,
  branch: string,
  head: string,
  token: string,
  lease: string | undefined,
): Promise<void> {
  try {
    await input.git.push(input.paths.pristine, branch, token, lease);
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

/** The issue a PR fixes, from its body's `Fixes #n` line (the PR's own number if none). */
function issueNumberOf(body: string, fallback: number): number {
  const m = /^Fixes #(\d+)$/m.exec(body);
  return m?.[1] === undefined ? fallback : Number(m[1]);
}

/**
 * The answer in the thread that asked: a reply in the review thread for a review comment. For a PR
 * conversation request the progress comment is that reply (it is edited to the result).
 */
async function replyInThread(input: PublishInput, text: string): Promise<void> {
  const to = input.p.trigger.replyTo;
  if (to?.kind !== 'review_thread' || input.pull === null) return;
  try {
    await input.gh.rest.pulls.createReplyForReviewComment({
      owner: input.p.repo.owner,
      repo: input.p.repo.name,
      pull_number: input.pull.number,
      comment_id: to.commentId,
      body: publishableText(text, audienceOf(input)),
    });
  } catch (error) {
    input.log.warn({ err: error }, 'could not reply in the review thread');
  }
}

/** Who a posted text is for: the job's secrets are redacted, links may lead to GitHub and the run view. */
function audienceOf(input: PublishInput): Audience {
  return {
    redactor: input.redactor(),
    trustedHosts: [
      ...githubHosts(input.gh.request.endpoint.DEFAULTS.baseUrl),
      ...hostsIn(input.trajectoryLink(input.paths.trajectory)),
    ],
  };
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

function oneParagraph(text: string): string {
  return text.trim().slice(0, 2000);
}
