import { grantedTo } from '../config/grants.js';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { AgentEnv } from '../config/agent-env.js';
import { buildTasksFromRepo, FromRepoError } from '../eval/from-repo.js';
import { markdownReport, summarize, writeReport } from '../eval/report.js';
import { runEval } from '../eval/run-eval.js';
import type { GitHubClient, InstallationTokens } from '../github/app-client.js';
import { codeSpan, neutralizeInline, neutralizeProse } from '../publish/markdown.js';
import { progressMarker } from '../publish/markers.js';
import { githubHosts, publishable } from '../publish/publishable.js';
import { Redactor } from '../publish/redact.js';
import type { SandboxChoice } from '../execution/provision.js';
import type { FixJob } from '../queue/payloads.js';
import type { FixJobResult } from './fix-runtime.js';
import { aborted, watchStop } from './watch-stop.js';

/**
 * `@agent evaluate`: the eval of this repository's own history (eval/from-repo.ts) run by a worker,
 * with the deployment's model (or the oracle) in the deployment's sandbox, one task at a time (the
 * job holds one of the worker's slots), reported by editing the job's progress comment. Its folder
 * (`<work>/evals/<job>`) holds the clone, the task set, every trajectory and the report; a retried
 * job continues from it (finished tasks are not run again).
 *
 * The installation token reads the issues and pull requests and fetches the repository in this
 * process only (the REST client and host git); no sandbox, trajectory or comment gets it.
 */

export interface EvaluateContext {
  readonly jobId: string;
  readonly workDir: string;
  readonly apiUrl: string;
  /** Where the tasks' sandboxes are made: the worker's backend (chosen in fix-job.ts). */
  readonly sandbox: SandboxChoice;
  /** What a sandbox on the worker's host hides and masks (see local-isolation.ts). */
  readonly isolation?: { readonly hide: readonly string[]; readonly mask: readonly string[] };
  readonly gh: GitHubClient;
  readonly tokens: InstallationTokens;
  readonly agent: AgentEnv;
  /** Everything the worker holds that must never be posted. */
  readonly secrets: readonly string[];
  readonly cancelled: () => Promise<string | null>;
  /** The job's last attempt: a failure now is final (the comment says so). */
  readonly final: boolean;
  readonly logger: Logger;
}

/** The most of a report a comment holds (GitHub's limit is 65,536 characters). */
const COMMENT_MAX = 60_000;

export async function runEvaluateJob(
  p: FixJob,
  ctx: EvaluateContext,
  signal?: AbortSignal,
): Promise<FixJobResult> {
  const request = p.evaluate;
  if (request === null || request === undefined) throw new Error('an evaluate job without its request');
  const repo = `${p.repo.owner}/${p.repo.name}`;
  const out = join(ctx.workDir, 'evals', ctx.jobId);
  const log = ctx.logger.child({ job: ctx.jobId, evaluate: repo });
  const token = (await ctx.tokens.get()).token;
  const redactor = new Redactor([...ctx.secrets, token]);
  const where = { owner: p.repo.owner, repo: p.repo.name };
  const hosts = githubHosts(ctx.apiUrl);
  let commentId = p.progressCommentId;
  // Everything in the report may carry the repository's text (reasons with test output, test ids):
  // besides publishable's rules, no `#123` reference (it would link, and put a mention on every
  // listed issue's timeline) and no link anywhere.
  const post = async (lines: readonly string[]): Promise<void> => {
    const body = publishable(
      [
        progressMarker(ctx.jobId),
        '**Issue Agent: evaluation**',
        ...lines.map((l) => neutralizeProse(l)),
        `<sub>job ${codeSpan(ctx.jobId)}</sub>`,
      ]
        .join('\n\n')
        .slice(0, COMMENT_MAX),
      { redactor, trustedHosts: hosts },
    );
    if (commentId === null) {
      commentId = (await ctx.gh.rest.issues.createComment({ ...where, issue_number: p.issue.number, body }))
        .data.id;
    } else {
      await ctx.gh.rest.issues.updateComment({ ...where, comment_id: commentId, body });
    }
  };
  const { controller, dispose } = watchStop(ctx, signal);
  const sandbox = ctx.sandbox;
  const model = request.model === 'oracle' ? 'oracle' : ctx.agent.model;
  // The tasks' setups get only what this repository was granted (config/grants.ts).
  const env = { ...ctx.agent, environment: grantedTo(ctx.agent.environment, repo) };
  const result = (outcome: FixJobResult['outcome']): FixJobResult => ({
    outcome,
    pullRequest: null,
    pushed: false,
    trajectory: out,
    runId: ctx.jobId,
    branch: null,
  });
  try {
    await post([
      `Building tasks from the closed issues of ${codeSpan(repo)} that merged pull requests fixed with tests (at most ${request.limit}${request.since === null ? '' : `, closed since ${request.since}`}), by running their tests before and after each fix…`,
    ]);
    let built;
    try {
      built = await buildTasksFromRepo({
        repo,
        apiUrl: ctx.apiUrl,
        token,
        since: request.since === null ? null : new Date(`${request.since}T00:00:00Z`),
        limit: request.limit,
        testCommand: null,
        out,
        sandbox,
        env,
        setup: true,
        hide: ctx.isolation?.hide ?? [],
        mask: ctx.isolation?.mask ?? [],
        concurrency: 1,
        logger: log,
        signal: controller.signal,
      });
    } catch (error) {
      if (!(error instanceof FromRepoError)) throw error;
      await post([`I could not build the tasks: ${error.message}`]);
      return result('failed');
    }
    stoppedByWorker(signal);
    if (controller.signal.aborted) {
      await post(['Stopped while building the tasks.']);
      return result('cancelled');
    }
    if (built.tasks.length === 0) {
      await post([
        `No closed issue of ${codeSpan(repo)} made a task, so there is nothing to evaluate:`,
        built.skipped.map((s) => `- #${s.issue}: ${neutralizeInline(s.reason)}`).join('\n') ||
          '- no closed issue was found',
      ]);
      return result('no_change');
    }
    await post([
      `Running ${built.tasks.length} task(s) with ${model === 'oracle' ? 'the oracle (each fix as the model)' : codeSpan(model)}, one at a time…`,
    ]);
    const run = await runEval({
      tasks: built.tasks,
      out,
      concurrency: 1,
      attempts: 1,
      sandbox,
      setup: true,
      env,
      model: request.model,
      reposDir: null,
      tasksFile: built.file,
      ...(ctx.isolation === undefined ? {} : { isolation: ctx.isolation }),
      signal: controller.signal,
      logger: log,
    });
    stoppedByWorker(signal);
    const summary = summarize(run, {
      total: built.tasks.length,
      attempts: 1,
      model,
      sandbox: sandbox.backend.kind,
      source: { repo, skipped: built.skipped },
    });
    await writeReport(out, run.results, summary);
    if (run.interrupted.length > 0 && aborted(controller.signal)) {
      await post([`Stopped after ${run.results.length} of ${built.tasks.length} task(s).`]);
      return result('cancelled');
    }
    // The report's own title is this comment's heading.
    const report = markdownReport(run.results, summary).replace(/^# /, '### ').replace(/^## /gm, '#### ');
    await post([
      report,
      `The trajectories, the task set and \`results.jsonl\` are in ${codeSpan(out)} on the worker's host.`,
    ]);
    log.info({ resolved: summary.resolved, tasks: summary.tasks, usd: summary.usd }, 'evaluation reported');
    return result(summary.resolved === summary.tasks ? 'resolved' : 'unverified');
  } catch (error) {
    // The worker stopping is not a failure: the next attempt continues from the job's folder.
    if (signal?.aborted !== true) {
      const message = error instanceof Error ? error.message : String(error);
      log.error({ err: message, final: ctx.final }, 'evaluation failed');
      await post([
        ctx.final
          ? `The evaluation failed: ${neutralizeInline(message.slice(0, 500))}`
          : `The evaluation failed and will be tried again (finished tasks are kept): ${neutralizeInline(message.slice(0, 500))}`,
      ]).catch(() => undefined);
    }
    throw error;
  } finally {
    dispose();
  }
}

/**
 * The worker is shutting down (BullMQ's signal): the job fails so that it is tried again, and the
 * next attempt continues from the job's folder. A stop request by a person ends it instead.
 */
function stoppedByWorker(signal: AbortSignal | undefined): void {
  if (signal?.aborted === true)
    throw new Error('the worker stopped; the evaluation continues in the next attempt');
}
