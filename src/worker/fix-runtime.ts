import type { Logger } from 'pino';
import type { Outcome } from '../agent/run-agent.js';
import type { AgentEnv } from '../config/agent-env.js';
import type { SandboxPool } from '../environment/prepare.js';
import type { RunStorage } from '../events/run-storage.js';
import type { BotIdentity, GitHubClient } from '../github/app-client.js';
import type { Model } from '../model/model.js';
import type { SandboxBackend } from '../sandbox/backend.js';
import type { SpendLedger } from '../events/spend-ledger.js';

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
  /**
   * Keep a mirror of each repository on this host and make pristine clones from it (the App's
   * workers, whose sandboxes never see the host's disk). Off for the Action, whose runner is new each time.
   */
  readonly mirrors?: boolean;
  /** The client of the progress comment (a write lane of its own); `gh` when absent. */
  readonly progressGh?: GitHubClient;
  readonly tokens: TokenSource;
  /** Secrets beside the GitHub tokens that must never be posted (keys, webhook secret). */
  readonly secrets: readonly string[];
  readonly bot: BotIdentity;
  readonly agent: AgentEnv;
  readonly model: (name: string) => Model;
  /**
   * Where runs are kept beyond this worker (ISSUE_AGENT_STORE_URL): default the job folders under
   * `jobsDir`. The workspace and the pristine clone stay under `jobsDir` either way: a worker that
   * continues another's job rebuilds them from the clone and the last checkpoint's diff.
   */
  readonly storage?: RunStorage;
  /** Where the agent's commands run: the backend the App worker or the Action chose. */
  readonly backend: SandboxBackend;
  /**
   * What an isolated sandbox on this host hides beyond the job's own pristine clone and trajectory
   * (always hidden), and the folders it masks (see BackendRequest.hide and mask).
   */
  readonly hostIsolation?: { readonly hide: readonly string[]; readonly mask?: readonly string[] };
  /** Warm sandboxes to start jobs in (the worker's pool), when a job can use one. */
  readonly warmPool?: SandboxPool | undefined;
  /** Where people read the full trajectory (the run view), or null. */
  readonly runLink: string | null;
  /**
   * The PR's text for a full trajectory (with `runLink` or, without one, where the log is kept):
   * the job's own, or one attempt's of a best-of-N job (`runId`).
   */
  readonly trajectoryLink: (trajectoryDir: string, runId: string) => string;
  /**
   * Whether this runtime can continue a conversation when someone answers the agent's question (the
   * App can; the Action, which keeps no trajectory between workflow runs, cannot): pre-flight triage
   * (`triage:` in the config) applies only then. Default: true.
   */
  readonly canContinue?: boolean;
  /**
   * Called when the run asks a question (`needs_info`), before the question is posted, with the run
   * whose conversation an answer continues (a best-of-N job's asking attempt): the App marks the
   * issue as waiting for an answer.
   */
  readonly onQuestion?: (runId: string) => Promise<void>;
  /** Best-of-N: attempts of one job run side by side, at most this many at once (default: all). */
  readonly attemptParallelism?: number;
  /** Who asked to stop this job, or null. Polled every 500 ms while the job runs, and before the push. */
  readonly cancelled: () => Promise<string | null>;
  /**
   * True once this worker lost the job's lock (BullMQ may have handed the job to another worker):
   * the run then ends without reporting or publishing anything (see lostTheJob).
   */
  readonly lost?: () => boolean;
  /**
   * Asks the queue whether this worker still holds the job (renewing its lock), for when the event
   * log says another run wrote to it: the holder goes on to a retry, a worker that lost it stops.
   */
  readonly holdsJob?: () => Promise<boolean>;
  /**
   * How many runs of this job were interrupted before this one (their worker killed, crashed or
   * frozen past the lock), when that is more than the App allows: a job that still has work to do
   * then only ends, failed, with that said on the issue, instead of running (and maybe taking its
   * worker down) once more. A job whose work is done still publishes.
   */
  readonly interruptedTooOften?: number;
  /** 1-based attempt number, and whether a failure now is final (no retry will follow). */
  readonly attempt: { readonly number: number; readonly final: boolean };
  readonly logger: Logger;
  /** Step updates of the progress comment are at most this often. */
  readonly progressIntervalMs?: number;
  /** The branch new PRs start from and target; default: the repository's default branch. */
  readonly baseBranch?: string | null;
  /** How the branch's commits are made (see JobContext.commitVia); default `push`. */
  readonly commitVia?: 'api' | 'push';
  /**
   * Where the month's spend of every owner and repository is kept for all workers (the App: Redis
   * or the PostgreSQL run store), and the owner's limit (ISSUE_AGENT_MONTHLY_USD, null: none). The
   * repository's `budgets.monthlyUsd` applies beside it. Absent (the Action): no monthly limits.
   */
  readonly spending?: { readonly ledger: SpendLedger; readonly ownerUsd: number | null };
  /**
   * A new run fetches the images its issue and request link (user attachments of this GitHub web
   * origin) with the job's token and gives them to the model (stages/prepare.ts). Absent: none.
   */
  readonly images?: { readonly webOrigin: string };
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
  /** Where the run's log is read (a folder, or the run's id in the database). */
  readonly trajectory: string;
  /** The run whose log that is (the job's own, or the winning attempt's). */
  readonly runId: string;
  /** The branch pushed to (or that would have been), and the progress comment's id. */
  readonly branch: string | null;
}
