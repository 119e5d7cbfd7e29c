import type { RunStorage } from '../../events/run-storage.js';
import type { SpendBudget, SpendRefusal } from '../../agent/spend-budget.js';
import type { Logger } from 'pino';
import type { BotIdentity, GitHubClient } from '../../github/app-client.js';
import type { HostGit } from '../../github/host-git.js';
import type { Redactor } from '../../publish/redact.js';
import type { FixJob } from '../../queue/payloads.js';
import type { TokenSource } from '../fix-runtime.js';
import type { ProgressReporter } from '../progress-reporter.js';

/** The folders of one job. */
export interface JobPaths {
  readonly trajectory: string;
  /** Outside the job folder (which holds the workspace): see pristine-clone.ts. */
  readonly pristine: string;
  readonly workspace: string;
}

/** The repository as a job uses it: where to clone from and the branch new PRs start from and target. */
export interface RepoInfo {
  /** What the pristine clone is made from and pushed to: the fork, for a person's PR from one. */
  readonly clone_url: string;
  readonly default_branch: string;
  /**
   * Set when `clone_url` is a fork's (a person's PR whose author allows edits by maintainers): this
   * repository's URL, where `default_branch` is read from (a fork's own `main` is not the base).
   */
  readonly base_clone_url?: string;
  /** The fork `clone_url` is (`owner/name`): no mirror, no API commits, pushed with git. */
  readonly fork?: string;
}

/** The App's own pull request a follow-up job works on. */
export interface PullInfo {
  readonly number: number;
  readonly title: string;
  readonly body: string;
  readonly headRef: string;
  readonly headSha: string;
  readonly url: string;
  /** A person's pull request (not the App's): its title and body are theirs, never rewritten. */
  readonly human?: true;
}

/** What every stage of one job shares; built once by `runFix`. */
export interface JobContext {
  readonly p: FixJob;
  readonly jobId: string;
  /** The folder holding every job's folder; earlier rounds are found here. */
  readonly jobsDir: string;
  /** Where every run's log, the job's record and its documents are kept (job folders or PostgreSQL). */
  readonly storage: RunStorage;
  readonly where: { readonly owner: string; readonly repo: string };
  readonly paths: JobPaths;
  readonly gh: GitHubClient;
  readonly git: HostGit;
  readonly tokens: TokenSource;
  readonly bot: BotIdentity;
  readonly progress: ProgressReporter;
  /** A redactor for every secret known now (tokens are remembered as they are handed out). */
  readonly redactor: () => Redactor;
  /** Where people read a trajectory: the job's own, or one attempt's (`runId`). */
  readonly trajectoryLink: (trajectoryDir: string, runId: string) => string;
  readonly log: Logger;
  /**
   * How the branch's commits are made: `api`, through GitHub's git database API, which GitHub signs
   * (the App; a change the API cannot carry is still pushed, and the PR says why); `push`, committed
   * on the host and pushed with git (the Action's GITHUB_TOKEN). Default: `push`.
   */
  readonly commitVia?: 'api' | 'push';
  /** The month's spending limits of the repository and its owner (absent: none are kept). */
  readonly spend?: JobSpend | undefined;
}

/** A job's side of the month's spending limits (events/spend-ledger.ts). */
export interface JobSpend {
  /** What the agent's runs hold each model call against. */
  readonly budget: SpendBudget;
  /** Why the job may not start (the month's spend leaves no room for `callUsd`), or null. */
  startRefusal(callUsd: number): Promise<SpendRefusal | null>;
}
