import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { AgentEnv } from '../config/agent-env.js';
import { grantedTo, withoutSetupSecrets } from '../config/grants.js';
import { fetchRepository } from '../eval/fetch-repo.js';
import type { SandboxChoice } from '../execution/provision.js';
import { ReproduceError, reproduceVerdict } from '../execution/reproduce.js';
import type { GitHubClient, InstallationTokens } from '../github/app-client.js';
import {
  agentCheckRuns,
  pullChange,
  recordedVerdict,
  recordsVerdict,
  type AgentCheckRun,
} from '../github/recorded-verdict.js';
import { CHECK_RUN_NAME, type CheckConclusion } from '../publish/check-run.js';
import { codeSpan, neutralizeInline, truncateEnd } from '../publish/markdown.js';
import { progressMarker } from '../publish/markers.js';
import { githubHosts, publishable, type Audience } from '../publish/publishable.js';
import { Redactor } from '../publish/redact.js';
import {
  differences,
  mismatchOf,
  recordedCommands,
  recordedTitle,
  reproductionSection,
  reproductionTitle,
  reproductionVerdict,
  rowsOf,
  VERIFY_EXTERNAL_ID,
  withReproduction,
  type ReproductionResult,
} from '../publish/reproduction.js';
import type { FixJob } from '../queue/payloads.js';
import type { FixJobResult } from './fix-runtime.js';
import { noChecksPermission, type CheckRunTarget } from './stages/check-run.js';
import { forkOnHost } from './fork-on-host.js';
import { aborted, watchStop } from './watch-stop.js';

/**
 * `@agent verify`: a pull request's verdict reproduced by a worker, as `issue-agent verify` does it
 * (execution/reproduce.ts: the base and the head tested again, each in a fresh sandbox of the
 * worker's backend), and compared with the verdict recorded on the change (the App's own **Issue
 * Agent** check run on its newest commit that has one). The tests run with the base's command, as a
 * fix job finds it; the command the record ran is only compared with it (read from the marker its
 * renderer wrote, never from its table), and a record that ran another one does not match. The
 * result goes on the check run of the PR's head: the App's run there gets the result on top of its
 * summary (its verdict and table stay as they were recorded); a head without one (a person pushed
 * since) gets a new check run with the reproduced table. The job's progress comment becomes the reply, linking the check run.
 *
 * A fork's pull request is verified as any other (its head fetched from this repository's
 * `pull/<n>/head`), because nothing of the head runs outside a sandbox or with a secret: setup runs
 * on the merge base (history of the base branch) with no setup secret at all (withoutSetupSecrets),
 * the head's change is applied inside the sandbox after setup with its runner configuration put
 * back to the base's, the test command is the base's settings' or the one detected on the base, and
 * the tests run with no network and no token. On the host the head is only git data (fetched and
 * diffed). A worker whose backend is not isolated (`unconfined`) refuses a fork's head (forkOnHost).
 *
 * The installation token reads the PR and fetches the repository in this process only (the REST
 * client and host git); no sandbox or comment gets it. The job's folder (`<work>/verify/<job>`) is
 * removed at the end: nothing of it is needed again (a retry starts over).
 */

export interface VerifyContext {
  readonly jobId: string;
  readonly workDir: string;
  readonly apiUrl: string;
  /** The App's id: only its own check runs record a verdict here, and only those are updated. */
  readonly appId: number;
  /** Where the tests run: the worker's backend (chosen in fix-job.ts). */
  readonly sandbox: SandboxChoice;
  /** What a sandbox on the worker's host hides and masks (see local-isolation.ts). */
  readonly isolation?: { readonly hide: readonly string[]; readonly mask: readonly string[] };
  readonly gh: GitHubClient;
  readonly tokens: InstallationTokens;
  readonly agent: AgentEnv;
  /** Everything the worker holds that must never be posted. */
  readonly secrets: readonly string[];
  /** Who asked to stop this job (`@agent stop`), read from Redis; null while nobody has. */
  readonly cancelled: () => Promise<string | null>;
  /** The job's last attempt: a failure now is final (the comment says so). */
  readonly final: boolean;
  readonly logger: Logger;
}

export async function runVerifyJob(
  p: FixJob,
  ctx: VerifyContext,
  signal?: AbortSignal,
): Promise<FixJobResult> {
  const pull = p.pull?.number ?? p.issue.number;
  const repo = `${p.repo.owner}/${p.repo.name}`;
  const where = { owner: p.repo.owner, repo: p.repo.name };
  const work = join(ctx.workDir, 'verify', ctx.jobId);
  const log = ctx.logger.child({ job: ctx.jobId, verify: `${repo}#${pull}` });
  const token = (await ctx.tokens.get()).token;
  const audience: Audience = {
    redactor: new Redactor([...ctx.secrets, token]),
    trustedHosts: githubHosts(ctx.apiUrl),
  };
  let commentId = p.progressCommentId;
  const post = async (lines: readonly string[]): Promise<void> => {
    const body = publishable(
      [
        progressMarker(ctx.jobId),
        '**Issue Agent: verification**',
        ...lines,
        `<sub>job ${codeSpan(ctx.jobId)}</sub>`,
      ].join('\n\n'),
      audience,
    );
    if (commentId === null) {
      commentId = (await ctx.gh.rest.issues.createComment({ ...where, issue_number: pull, body })).data.id;
    } else {
      await ctx.gh.rest.issues.updateComment({ ...where, comment_id: commentId, body });
    }
  };
  const result = (outcome: FixJobResult['outcome']): FixJobResult => ({
    outcome,
    pullRequest: null,
    pushed: false,
    trajectory: work,
    runId: ctx.jobId,
    branch: null,
  });
  const stop = watchStop(ctx, signal);
  try {
    await post(['⏳ Testing the base and the head of this pull request again, each in a fresh sandbox…']);
    const change = await pullChange(ctx.gh, where, pull);
    if (change.state !== 'open') {
      await post(['The pull request was closed before I could verify it.']);
      return result('no_change');
    }
    if (change.fork !== null && !ctx.sandbox.backend.isolated) {
      log.warn(
        { fork: change.fork, sandbox: ctx.sandbox.backend.kind },
        'fork not verified: sandbox not isolated',
      );
      await post([forkOnHost(change.fork, ctx.sandbox.backend.kind)]);
      return result('failed');
    }
    const recorded = await recordedVerdict(ctx.gh, where, change.commits, { id: ctx.appId });
    const { data: meta } = await ctx.gh.rest.repos.get(where);
    await rm(work, { recursive: true, force: true });
    await mkdir(work, { recursive: true });
    const clone = join(work, 'clone.git');
    await fetchRepository({
      url: meta.clone_url,
      token,
      clone,
      // A fork's head is fetched from this repository, where GitHub keeps it as pull/N/head.
      refspecs: [
        `+refs/heads/${meta.default_branch}:refs/heads/${meta.default_branch}`,
        `+refs/pull/${pull}/head:refs/heads/verify-head`,
      ],
      commits: [change.base, change.head],
    });
    stoppedByWorker(signal);
    let reproduced;
    try {
      reproduced = await reproduceVerdict({
        repo: clone,
        base: change.base,
        head: change.head,
        // As a fix job finds it: the repository's settings (read from the default branch when the
        // request was queued), else the one detected on the base. Never the record's or the head's.
        command: p.config.testCommand ?? null,
        commandSource: `\`testCommand\` in the repository's settings`,
        sandbox: ctx.sandbox,
        // Setup of the merge base gets no secret (see withoutSetupSecrets), only the egress this
        // repository was granted.
        env: { ...ctx.agent, environment: withoutSetupSecrets(grantedTo(ctx.agent.environment, repo)) },
        setup: true,
        work: join(work, 'run'),
        hide: ctx.isolation?.hide ?? [],
        mask: ctx.isolation?.mask ?? [],
        cacheKey: `verify:${repo}`,
        signal: stop.controller.signal,
      });
    } catch (error) {
      if (!(error instanceof ReproduceError)) throw error;
      await post([
        `I could not reproduce the verdict: ${neutralizeInline(truncateEnd(error.message, 500))}.`,
        error.code === 'no_test_command'
          ? 'Set `testCommand` in `.github/issue-agent.yml` and ask again.'
          : 'Nothing was changed on the check run.',
      ]);
      return result('failed');
    }
    stoppedByWorker(signal);
    // A stop that came as the reproduction ended still wins: nothing is put on the check run.
    if (aborted(stop.controller.signal)) throw new Error('stopped');
    const found: ReproductionResult = {
      base: reproduced.base,
      head: reproduced.head,
      command: reproduced.command,
      commandSource: reproduced.commandSource,
      recordedCommands: recorded === null ? null : recordedCommands(recorded.text),
      table: reproduced.table,
      recordedOn: recorded?.sha ?? null,
      differ: recorded === null ? [] : differences(rowsOf(recorded.text), rowsOf(reproduced.table)),
      by: p.trigger.sender.login,
      sandbox: ctx.sandbox.backend.kind,
    };
    const check = await putReproduction(
      { gh: ctx.gh, where, permissionKey: `installation ${p.installationId}`, jobId: ctx.jobId, log },
      { result: found, recorded, appId: ctx.appId, audience },
    );
    await post(replyLines(found, check));
    const verdict = reproductionVerdict(found);
    log.info(
      { verdict, differ: found.differ.length, command: mismatchOf(found) === null, checkRun: check.made },
      'verification reported',
    );
    return result(verdict === 'differs' ? 'unverified' : 'resolved');
  } catch (error) {
    // A stop request ends the job as asked: nothing is changed on the check run.
    if (stop.controller.signal.aborted && signal?.aborted !== true) {
      log.info({ reason: String(stop.controller.signal.reason) }, 'verification stopped');
      await post([
        `⏹️ Stopped (${neutralizeInline(String(stop.controller.signal.reason))}) before the verification finished; nothing was changed on the check run.`,
      ]).catch(() => undefined);
      return result('cancelled');
    }
    // The worker stopping is not a failure: the next attempt starts over.
    if (signal?.aborted !== true) {
      const message = error instanceof Error ? error.message : String(error);
      log.error({ err: message, final: ctx.final }, 'verification failed');
      await post([
        ctx.final
          ? `The verification failed: ${neutralizeInline(truncateEnd(message, 500))}`
          : `The verification failed and will be tried again: ${neutralizeInline(truncateEnd(message, 500))}`,
      ]).catch(() => undefined);
    }
    throw error;
  } finally {
    stop.dispose();
    await rm(work, { recursive: true, force: true }).catch(() => undefined);
  }
}

/** The reply: the result, what ran, and where the check run says it. */
function replyLines(r: ReproductionResult, check: PutCheck): string[] {
  const section = reproductionSection(r, new Date().toISOString());
  // The section's heading is the check run's; the reply has its own.
  const body = section.slice(section.indexOf('\n') + 1).trim();
  const link = (url: string): string => `[${CHECK_RUN_NAME} on ${codeSpan(r.head.slice(0, 12))}](${url})`;
  switch (check.made) {
    case 'no_permission':
      return [
        body,
        'No check run: the App may not write checks in this repository (it needs `checks: write`), so the result is only here.',
      ];
    case 'failed':
      return [body, 'GitHub refused the check run, so the result is only here.'];
    case 'created':
      // A verdict of mine on an earlier commit: the head moved on since. None: a pull request the
      // App never judged (a person's), where nothing of mine was ever on it.
      return [
        body,
        r.recordedOn === null
          ? `The head had no check run of mine, so I added one: ${link(check.url)}.`
          : `The head had no check run of mine (it changed after my verdict on ${codeSpan(r.recordedOn.slice(0, 12))}), so I added one: ${link(check.url)}.`,
      ];
    case 'updated':
      return [body, `I put the result on the check run of the head: ${link(check.url)}.`];
  }
}

type PutCheck =
  | { readonly made: 'updated' | 'created'; readonly id: number; readonly url: string }
  | { readonly made: 'no_permission' | 'failed' };

/**
 * The result on the head's check run: the App's run there (the one recording a verdict, else one an
 * earlier reproduction made) is updated; a head without one gets a new run. Or why none: the App
 * may not write checks (said once in the log), or GitHub refused otherwise (a warning).
 */
async function putReproduction(
  target: CheckRunTarget,
  o: {
    readonly result: ReproductionResult;
    readonly recorded: AgentCheckRun | null;
    readonly appId: number;
    readonly audience: Audience;
  },
): Promise<PutCheck> {
  const { gh, where, log } = target;
  const r = o.result;
  const fit = (text: string, max: number): string => publishable(truncateEnd(text, max), o.audience);
  const section = reproductionSection(r, new Date().toISOString());
  try {
    const runs = await agentCheckRuns(gh, where, r.head, o.appId);
    const existing = runs.find(recordsVerdict) ?? runs[0];
    if (existing !== undefined && recordsVerdict(existing)) {
      // The recorded verdict stays (its conclusion, table and annotations); the result goes on top.
      const { data } = await gh.rest.checks.update({
        ...where,
        check_run_id: existing.id,
        output: {
          title: truncateEnd(`${recordedTitle(existing.title)} · ${reproductionTitle(r)}`, 250),
          summary: fit(withReproduction(existing.summary, section), 60_000),
          text: existing.text,
        },
      });
      log.info({ checkRun: data.id, head: r.head }, 'check run updated with the reproduction');
      return { id: data.id, url: data.html_url ?? '', made: 'updated' };
    }
    const verdict = reproductionVerdict(r);
    const recordedConclusion = o.recorded?.conclusion;
    const conclusion: CheckConclusion =
      verdict === 'differs'
        ? 'failure'
        : recordedConclusion === 'success' || recordedConclusion === 'failure'
          ? recordedConclusion
          : 'neutral';
    const output = {
      title: truncateEnd(reproductionTitle(r), 250),
      summary: fit(section, 60_000),
      text: fit(r.table, 60_000),
    };
    if (existing !== undefined) {
      // An earlier reproduction's run on this head: its result is replaced.
      const { data } = await gh.rest.checks.update({
        ...where,
        check_run_id: existing.id,
        conclusion,
        output,
      });
      return { id: data.id, url: data.html_url ?? '', made: 'updated' };
    }
    const { data } = await gh.rest.checks.create({
      ...where,
      name: CHECK_RUN_NAME,
      head_sha: r.head,
      external_id: `${VERIFY_EXTERNAL_ID}${target.jobId}`,
      status: 'completed',
      conclusion,
      output,
    });
    log.info({ checkRun: data.id, head: r.head, conclusion }, 'check run created with the reproduction');
    return { id: data.id, url: data.html_url ?? '', made: 'created' };
  } catch (error) {
    if (noChecksPermission(target, error)) return { made: 'no_permission' };
    log.warn({ err: error, head: r.head }, 'could not put the reproduction on a check run');
    return { made: 'failed' };
  }
}

/** The worker is shutting down (BullMQ's signal): the job fails so that it is tried again. */
function stoppedByWorker(signal: AbortSignal | undefined): void {
  if (signal?.aborted === true) throw new Error('the worker stopped; the verification starts again');
}
