import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { AgentEnv } from '../../config/agent-env.js';
import { hostProbe } from '../../environment/host-probe.js';
import { planEnvironment, type RepoEnvironmentConfig } from '../../environment/plan.js';
import type { TreeOrigin } from '../../environment/setup-trust.js';
import type { SandboxPool } from '../../environment/prepare.js';
import type { RunStorage } from '../../events/run-storage.js';
import type { EventStore } from '../../events/event-store.js';
import type { Task } from '../../events/schema.js';
import {
  attachmentUrls,
  fetchIssueImages,
  type IssueImage,
  type UnavailableImage,
} from '../../github/issue-images.js';
import { HostGitError, type HostGit } from '../../github/host-git.js';
import { grantedTo, ungranted } from '../../config/grants.js';
import { REPO_CONFIG_PATH } from '../../config/repo-config.js';
import { historyCacheDir } from '../../github/history-cache.js';
import { mirrorRoot, pristineRoot } from '../../github/pristine-clone.js';
import type { FixJob } from '../../queue/payloads.js';
import type { ProvisionedSandbox } from '../../sandbox/backend.js';
import { throwIfCancelled } from '../../sandbox/sandbox.js';
import type { WorkspaceProbe } from '../../testing/detect-test-command.js';
import { approvedIssueText, pullOwnership } from '../../app/trigger-rules.js';
import type { FixRuntime, TokenSource } from '../fix-runtime.js';
import { forkOnHost } from '../fork-on-host.js';
import { PermanentJobError } from '../permanent-job-error.js';
import type { JobEnd } from './report.js';
import type { JobContext, JobPaths, PullInfo, RepoInfo } from './types.js';

/**
 * Who and what this job is for, beside its trajectory: the run index reads it without the queue.
 * Written once: a resumed attempt keeps the first start time.
 */
export async function recordJob(
  storage: RunStorage,
  jobId: string,
  p: FixJob,
  /** For a later attempt of a best-of-N job: the job it belongs to (the run index shows it so). */
  attemptOf?: string,
): Promise<void> {
  await storage.recordJob(jobId, {
    schemaVersion: 1,
    id: jobId,
    payload: p,
    startedAt: new Date().toISOString(),
    ...(attemptOf === undefined ? {} : { attemptOf }),
  });
}

export async function fetchRepo(ctx: JobContext, baseBranch: string | null | undefined): Promise<RepoInfo> {
  const { data: repoData } = await ctx.gh.rest.repos.get(ctx.where);
  // The branch a new PR starts from and targets: the repository's default unless the runtime names one.
  const base = { clone_url: repoData.clone_url, default_branch: baseBranch ?? repoData.default_branch };
  const human = ctx.p.pull?.human;
  if (human?.fork === undefined) return base;
  // A person's PR from a fork: its branch is cloned from, and pushed to, the fork itself.
  return {
    ...base,
    clone_url: human.fork.cloneUrl,
    base_clone_url: repoData.clone_url,
    fork: human.headRepo,
  };
}

/**
 * The follow-up's pull request, which must be one of the App's own (else PermanentJobError), and,
 * when it is no longer open, the end that drops a job that has not run yet.
 */
export async function fetchPull(
  ctx: JobContext,
  number: number,
  sandbox: { readonly kind: string; readonly isolated: boolean },
): Promise<{ readonly pull: PullInfo; readonly closed: JobEnd | null }> {
  const { data: pr } = await ctx.gh.rest.pulls.get({ ...ctx.where, pull_number: number });
  const owner = pullOwnership(pr, ctx.bot.id);
  const human = ctx.p.pull?.human;
  if (human !== undefined) {
    // A person's pull request, as intake decided: the same branch in the same repository, and a
    // fork's author still allows edits by maintainers (else GitHub would refuse the push anyway).
    const where = human.fork === undefined ? 'this repository' : `the fork \`${human.headRepo}\``;
    if (
      owner.fork !== (human.fork !== undefined) ||
      owner.headRepo !== human.headRepo ||
      pr.head.ref !== human.headRef
    ) {
      throw new PermanentJobError(
        `pull request #${pr.number} no longer has its branch \`${human.headRef}\` in ${where}, so I push nothing to it`,
      );
    }
    if (human.fork !== undefined && !sandbox.isolated) {
      throw new PermanentJobError(forkOnHost(human.headRepo, sandbox.kind, 'change'));
    }
    if (human.fork !== undefined && !owner.maintainerCanModify) {
      throw new PermanentJobError(
        `the author of pull request #${pr.number} no longer allows edits by maintainers, so I cannot push to \`${human.headRef}\` in ${where}; nothing was changed`,
      );
    }
  } else if (!owner.ours) {
    throw new PermanentJobError(`pull request #${pr.number} is not one of the App's own pull requests`);
  }
  const pull = {
    number: pr.number,
    title: pr.title,
    body: pr.body ?? '',
    headRef: pr.head.ref,
    headSha: pr.head.sha,
    url: pr.html_url,
    ...(human === undefined ? {} : { human: true as const }),
  };
  return {
    pull,
    closed: pr.state !== 'open' ? { kind: 'pull_closed', number: pr.number, merged: pr.merged } : null,
  };
}

/** The issue's title and body a new run's task is made of (not yet stripped of hidden text). */
export interface IssueText {
  readonly title: string;
  readonly body: string;
}

/**
 * The issue as a job that has not finished reads it: closed before a new run started, or changed
 * since the request by someone not allowed to (see approvedIssueText), ends the job.
 */
export async function readIssue(
  ctx: Pick<JobContext, 'p' | 'log' | 'gh' | 'where'>,
  run: { readonly resumed: boolean; readonly followUp: boolean },
): Promise<{ readonly ok: true; readonly text: IssueText } | { readonly ok: false; readonly end: JobEnd }> {
  const { p, log } = ctx;
  const { data: issue } = await ctx.gh.rest.issues.get({ ...ctx.where, issue_number: p.issue.number });
  if (!run.resumed && issue.state !== 'open') return { ok: false, end: { kind: 'issue_closed' } };
  // A new run works from the issue's text as it was when the job was asked for. So does a run that
  // starts in a resumed job (best-of-N's attempts that had not begun when the worker stopped): the
  // job began on that text, and an edit made since (by anyone) is not what was asked for or approved.
  const captured = p.issue.body;
  if (run.resumed && !run.followUp && captured !== null && captured !== undefined) {
    return { ok: true, text: { title: p.issue.title, body: captured } };
  }
  const approved = !run.followUp && !run.resumed ? await approvedIssueText(ctx.gh, p, issue) : null;
  if (approved?.ok === false) {
    log.warn({ reason: approved.reason }, 'the issue changed since the request; not starting');
    return { ok: false, end: { kind: 'issue_changed', reason: approved.reason } };
  }
  if (approved?.ok === true && approved.note !== null) log.info({ note: approved.note }, 'task text');
  return {
    ok: true,
    text: {
      title: approved?.ok === true ? approved.title : issue.title,
      body: approved?.ok === true ? approved.body : (issue.body ?? ''),
    },
  };
}

/** The images a new run's task links, fetched (see fetchTaskImages). */
export interface TaskImages {
  readonly images: readonly IssueImage[];
  readonly unavailable: readonly UnavailableImage[];
}

/** How long fetching a task's images may take in all; past it the rest are named, not fetched. */
const IMAGES_TIMEOUT_MS = 60_000;

/**
 * The user attachments (`<webOrigin>/user-attachments/assets/…`) the task's texts link (the issue's
 * body and the request's comment, as the model reads them), fetched by the worker with the
 * installation's token, which goes to those URLs alone (issue-images.ts): never by the sandbox.
 * Capped in count and bytes, image types only (by their bytes); one that cannot be had is named
 * with why, never fatal.
 */
export async function fetchTaskImages(
  ctx: Pick<JobContext, 'tokens' | 'log'>,
  texts: readonly string[],
  webOrigin: string,
  signal?: AbortSignal,
): Promise<TaskImages> {
  const urls = [...new Set(texts.flatMap((t) => attachmentUrls(t, webOrigin)))];
  if (urls.length === 0) return { images: [], unavailable: [] };
  const { token } = await ctx.tokens.get();
  const timeout = AbortSignal.timeout(IMAGES_TIMEOUT_MS);
  const fetched = await fetchIssueImages(urls, {
    token,
    signal: signal === undefined ? timeout : AbortSignal.any([signal, timeout]),
  });
  // A stop meanwhile ends the job as a stop during setup does, not with images named as aborted.
  throwIfCancelled(signal);
  ctx.log.info(
    { images: fetched.images.length, unavailable: fetched.unavailable },
    "the task's images, fetched",
  );
  return fetched;
}

const EXTENSIONS = { 'image/png': 'png', 'image/jpeg': 'jpg', 'image/gif': 'gif', 'image/webp': 'webp' };

/** The base state's record of the images: each under the file name attachTaskImages attaches it as. */
export function taskImageFields(fetched: TaskImages): Pick<Task, 'images' | 'unavailableImages'> {
  return {
    ...(fetched.images.length === 0
      ? {}
      : {
          images: fetched.images.map((image, i) => ({
            url: image.url,
            mediaType: image.mediaType,
            file: `files/task-image-${i + 1}.${EXTENSIONS[image.mediaType]}`,
            bytes: Buffer.byteLength(image.data, 'base64'),
          })),
        }),
    ...(fetched.unavailable.length === 0
      ? {}
      : { unavailableImages: fetched.unavailable.map((u) => ({ url: u.url, reason: u.reason })) }),
  };
}

/**
 * The images' bytes, attached to the new run under the names its base state records: the run's
 * first files, so the attachment budget (which cuts later command outputs) never cuts one.
 */
export async function attachTaskImages(
  store: EventStore,
  fetched: TaskImages,
  /** For one image: the name the base state records for it (`files/<name>`). */
  as?: string,
): Promise<void> {
  if (fetched.images.length === 0) return;
  const dir = await mkdtemp(join(tmpdir(), 'ia-task-images-'));
  try {
    for (const [i, image] of fetched.images.entries()) {
      const name = as?.replace(/^files\//, '') ?? `task-image-${i + 1}.${EXTENSIONS[image.mediaType]}`;
      const path = join(dir, name);
      await writeFile(path, Buffer.from(image.data, 'base64'), { mode: 0o600 });
      await store.attachFile(path, name);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * A run whose base state names images whose files are missing (its worker died between writing the
 * base state and attaching them) and that has no event yet, so the model has seen nothing: the
 * missing ones are fetched again and attached under the names recorded. One that cannot be had now
 * is logged and left out (loadTaskImages leaves out a missing file).
 */
export async function reattachTaskImages(
  ctx: Pick<JobContext, 'tokens' | 'log'>,
  store: EventStore,
  signal?: AbortSignal,
): Promise<void> {
  if (store.events.length > 0) return;
  for (const image of store.base.task.images ?? []) {
    if ((await store.readAttachment(image.file)) !== null) continue;
    const { token } = await ctx.tokens.get();
    const got = await fetchIssueImages([image.url], {
      token,
      signal: AbortSignal.any([
        ...(signal === undefined ? [] : [signal]),
        AbortSignal.timeout(IMAGES_TIMEOUT_MS),
      ]),
    });
    throwIfCancelled(signal);
    const [again] = got.images;
    if (again === undefined || again.mediaType !== image.mediaType) {
      ctx.log.warn(
        { url: image.url, unavailable: got.unavailable },
        'an image of the task could not be fetched again',
      );
      continue;
    }
    await attachTaskImages(store, { images: [again], unavailable: [] }, image.file);
  }
}

/**
 * What a sandbox is prepared from. Everything the preparation reads is here, so a step added to it
 * takes its inputs from this object.
 */
export interface PrepareSandboxInput {
  readonly jobId: string;
  /** The folder holding every job's folder; its pristine clones are hidden from an isolated sandbox. */
  readonly jobsDir: string;
  readonly paths: JobPaths;
  readonly git: HostGit;
  readonly tokens: TokenSource;
  readonly repo: RepoInfo;
  /** `owner/name`: what the deployment's grants are checked against. */
  readonly repository: string;
  /** The branch the pristine clone follows: the PR's head for a follow-up, else the base branch. */
  readonly branch: string;
  /** The repository's mirror on this host (pristine clones are made from it), or undefined. */
  readonly mirror?: string | undefined;
  /** The host keeps mirrors (other jobs' too), even if this job uses none: they are hidden as well. */
  readonly mirrorsKept?: boolean | undefined;
  /** The commit a resumed run started from; null for a new run (the clone's HEAD). */
  readonly baseCommit: string | null;
  readonly backend: FixRuntime['backend'];
  readonly hostIsolation: FixRuntime['hostIsolation'];
  readonly agent: Pick<AgentEnv, 'sandboxPath' | 'sandboxLimits' | 'environment' | 'workspaceHistory'>;
  /** The repository's environment settings (`.github/issue-agent.yml`). */
  readonly config: RepoEnvironmentConfig & { readonly history?: number | 'full' | undefined };
  /** Names the repository for the environment cache (entries never cross repositories). */
  readonly repoKey: string;
  /**
   * The workspace holds the agent's earlier changes (a follow-up round on its PR): setup may still
   * run and reuse the cache, but never writes it, so nothing the agent wrote reaches other jobs.
   */
  readonly followUp: boolean;
  /** Removes the job's secrets from recorded text. */
  readonly scrub: (text: string) => string;
  /** The worker's warm sandboxes, for jobs that can use one (see BackendRequest.pool). */
  readonly pool?: SandboxPool | undefined;
  /** Names the repository, per installation, for the warm pool's prepared containers. */
  readonly poolRepository?: string | undefined;
  /** Only the harness runs commands in it (the verdict's sandbox): see DockerSandboxOptions.lazyAgentShell. */
  readonly lazyAgentShell?: boolean | undefined;
  /**
   * The job's stop (`@agent stop`, a lost lock): setup stops at once, what was made for the sandbox
   * is removed, and prepareSandbox throws SandboxCancelledError (see PrepareInput.signal).
   */
  readonly signal?: AbortSignal | undefined;
  readonly logger?: Logger | undefined;
}

/**
 * The pristine clone (fetched or checked), the workspace made from it at the base commit (a `.git`
 * alone for a backend that checks out inside, else a copy of the files), and the runtime's backend's
 * sandbox on it with the repository's environment (its plan read from the commit). The sandbox
 * returned is ready for the agent; the caller closes it. If anything after its creation fails, it
 * is closed here first.
 */
export async function prepareSandbox(input: PrepareSandboxInput): Promise<ProvisionedSandbox> {
  const { git, paths, repo, backend } = input;
  // Before anything of the repository is fetched or run: what it asks of the deployment must be its.
  const grants = input.agent.environment.grants;
  if (grants !== null) {
    const problems = ungranted(input.config, grants, input.repository);
    if (problems.length > 0) throw new ConfigGrantError(problems);
  }
  // And from here on, nothing but what is granted to it is in reach.
  const settings = grantedTo(input.agent.environment, input.repository);
  const made = await git
    .ensurePristine(paths.pristine, {
      url: repo.clone_url,
      branch: input.branch,
      token: async () => (await input.tokens.get()).token,
      mirror: input.mirror,
    })
    .catch((error: unknown) => {
      // A fork the installation cannot read (a private one: the token covers this repository only)
      // answers as if it were not there; retrying cannot change that.
      if (repo.fork !== undefined && error instanceof HostGitError && !error.transient)
        throw new ForkUnreadableError(repo.fork, input.branch, error.message);
      throw error;
    });
  if (typeof made !== 'string') {
    input.logger?.info({ fetched: made.fetched, rebuilt: made.rebuilt }, 'pristine clone from the mirror');
  }
  const baseCommit = input.baseCommit ?? (await git.revParse(paths.pristine, 'HEAD'));
  throwIfCancelled(input.signal);
  const inside = backend.checksOutInside;
  let probe: WorkspaceProbe;
  if (inside) {
    // The host writes no file of the repository: the workspace is a `.git` with `history` commits,
    // checked out by the sandbox user inside the sandbox, and the planner reads the commit's tree
    // from the pristine clone (which no sandbox process ever sees).
    const history =
      input.config.history === undefined
        ? input.agent.workspaceHistory
        : input.config.history === 'full'
          ? null
          : input.config.history;
    const historyUse = await git.historyForSandbox(
      paths.pristine,
      paths.workspace,
      baseCommit,
      repo.clone_url,
      history,
      input.mirror === undefined ? undefined : historyCacheDir(input.mirror),
    );
    if (historyUse.onto !== null) {
      input.logger?.info({ onto: historyUse.onto }, "the sandbox's history: fetched onto a kept one");
    }
    if (historyUse.notStored !== null) {
      input.logger?.warn({ reason: historyUse.notStored }, "the sandbox's history was not kept in the cache");
    }
    probe = git.treeProbe(paths.pristine, baseCommit);
  } else {
    await git.copyForSandbox(paths.pristine, paths.workspace, baseCommit, repo.clone_url);
    // Read before any sandbox process exists.
    probe = hostProbe(paths.workspace);
  }
  const prepared = await backend.provision({
    workspace: paths.workspace,
    checkout: inside,
    probe,
    plan: async () => planEnvironment(probe, input.config, await treeOrigin(input, baseCommit)),
    settings,
    jobId: input.jobId,
    repoKey: input.repoKey,
    // A follow-up's tree holds the agent's earlier changes: they must not reach other jobs.
    mayStoreCache: !input.followUp,
    limits: input.agent.sandboxLimits,
    path: input.agent.sandboxPath,
    hide: [
      pristineRoot(input.jobsDir),
      ...(input.mirror === undefined && input.mirrorsKept !== true ? [] : [mirrorRoot(input.jobsDir)]),
      paths.trajectory,
      ...(input.hostIsolation?.hide ?? []),
    ],
    mask: input.hostIsolation?.mask ?? [],
    pool: input.pool,
    poolRepository: input.poolRepository,
    lazyAgentShell: input.lazyAgentShell,
    signal: input.signal,
    scrub: input.scrub,
    logger: input.logger,
  });
  if (inside) {
    try {
      // The sandbox got its own copy of the files (the host copy was never seen by any sandbox
      // process, so removing it by name is safe).
      await rm(paths.workspace, { recursive: true, force: true });
    } catch (error) {
      await prepared.close();
      throw error;
    }
  }
  return prepared;
}

/**
 * Where the job's commit stands against the base branch (`repo.default_branch`: the branch new pull
 * requests target, whose config the job runs on): one of its commits, or the paths in which it
 * differs from its tip. Decides whether setup may have the setup secrets (setup-trust.ts).
 */
async function treeOrigin(input: PrepareSandboxInput, commit: string): Promise<TreeOrigin> {
  const { git, paths } = input;
  const ref = input.repo.default_branch;
  // A fork's branch is anyone's code (and the clone's `main` is the fork's, not the base branch):
  // never trusted with the setup secrets, whatever it has in common with the base branch.
  if (input.repo.fork !== undefined) {
    return {
      kind: 'unknown',
      why: `it is a branch of the fork \`${input.repo.fork}\`, whose code never gets the setup secrets`,
    };
  }
  if (input.branch === ref) {
    // The clone follows the base branch: its HEAD is the tip it fetched.
    const tip = await git.revParse(paths.pristine, 'HEAD');
    if (await git.isAncestor(paths.pristine, commit, tip)) return { kind: 'base', ref };
  }
  let tip: string;
  try {
    tip = await git.fetchBranch(paths.pristine, ref, (await input.tokens.get()).token);
  } catch (error) {
    if (error instanceof HostGitError && !error.transient) {
      return { kind: 'unknown', why: `the base branch \`${ref}\` could not be fetched: ${error.message}` };
    }
    throw error;
  }
  if (await git.isAncestor(paths.pristine, commit, tip)) return { kind: 'base', ref };
  return { kind: 'changed', ref, paths: await git.changedPaths(paths.pristine, tip, commit) };
}

/**
 * A person's pull request from a fork whose branch could not be cloned: the App's installation token
 * covers this repository only, so a private fork (every fork of a private repository is one) cannot
 * be read, and GitHub answers as if it were not there. The job ends before anything runs; the
 * comment says why and what to do instead.
 */
export class ForkUnreadableError extends PermanentJobError {
  override readonly name: string = 'ForkUnreadableError';
  readonly code = 'fork_unreadable';
  constructor(
    readonly fork: string,
    readonly branch: string,
    readonly gitMessage: string,
  ) {
    super(
      `I could not read the fork \`${fork}\` to work on its branch \`${branch}\`: this App's access covers this repository, not the fork (a private fork is readable only by its owner and the people and Apps they let in), and git answered: ${gitMessage.split('\n')[0] ?? ''}. Nothing was changed. The author can push the branch to this repository, or ask me on the issue and I'll open a pull request of my own.`,
    );
  }
}

/**
 * The repository's config names a setup secret or an egress host the deployment did not grant to it
 * (config/grants.ts): the job ends before anything runs, and the issue says what to change.
 */
export class ConfigGrantError extends PermanentJobError {
  override readonly name: string = 'ConfigGrantError';
  constructor(readonly problems: readonly string[]) {
    super(
      `${REPO_CONFIG_PATH} asks for what this deployment does not grant to this repository: ${problems.join('; ')}. Remove it from the config, or ask the deployment's administrators to grant it.`,
    );
  }
}
