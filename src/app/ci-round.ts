import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { stripHiddenText } from '../agent/untrusted-text.js';
import { codeSpan } from '../publish/markdown.js';
import type { RepoConfig } from '../config/repo-config.js';
import type { FixJob } from '../queue/payloads.js';
import { firstTime } from '../queue/issue-lock.js';
import { issueKey } from '../queue/ids.js';
import { pullOwnership } from './trigger-rules.js';
import type { Trigger } from './triggers.js';
import type { ProbotOctokit } from 'probot';

type Octokit = InstanceType<typeof ProbotOctokit>;
type Where = { readonly owner: string; readonly repo: string };

/** Failing checks a round is told about at most, and the log tail each carries. */
const MAX_CHECKS = 5;
const LOG_TAIL_LINES = 80;
const LOG_TAIL_CHARS = 6000;
const MAX_ANNOTATIONS = 20;

export type CiDecision =
  | { readonly kind: 'round'; readonly ci: NonNullable<FixJob['ci']> }
  /** No round: `reason` for the log; `comment` (if any) is said once on the PR. */
  | { readonly kind: 'none'; readonly reason: string; readonly comment: string | null };

/**
 * A check failed on a pull request's head: does the App start a round to fix it? Only on its own
 * open PR (others are ignored without a word), only for the PR's current head, once per head (the
 * first failing check's delivery collects every check that failed there by then), never past
 * `ciFixRounds`, and not for a check that also fails on the base branch's latest commit (that one is
 * pre-existing, said so once). The failing checks' output, annotations and log tails go into the
 * round's payload: untrusted text, fenced when the model reads it.
 */
export async function decideCiRound(
  trigger: Trigger,
  config: RepoConfig,
  octokit: Octokit,
  redis: Redis,
  prefix: string,
  botId: number,
  log: Logger,
): Promise<CiDecision> {
  const run = trigger.checkRun;
  if (run === undefined) return { kind: 'none', reason: 'no check run', comment: null };
  const where: Where = { owner: trigger.repo.owner, repo: trigger.repo.name };
  const { data: pr } = await octokit.rest.pulls.get({ ...where, pull_number: trigger.issue.number });
  if (!pullOwnership(pr, botId).ours)
    return { kind: 'none', reason: 'not one of the App PRs', comment: null };
  if (pr.state !== 'open') return { kind: 'none', reason: 'the pull request is closed', comment: null };
  if (pr.head.sha !== run.headSha)
    return { kind: 'none', reason: 'a check of an earlier head of the pull request', comment: null };
  const target = issueKey(trigger.repo.id, pr.number);
  if (config.ciFixRounds === 0) return { kind: 'none', reason: 'ciFixRounds is 0', comment: null };
  // One round per head: the first failing check's delivery speaks for every check of that commit
  // (the same delivery again, an intake retry, goes on with the same decision).
  const headKey = `${prefix}:ci-head:${target}:${run.headSha}`;
  const claimed = await redis.set(headKey, trigger.deliveryId, 'EX', 30 * 24 * 3600, 'NX');
  if (claimed !== 'OK' && (await redis.get(headKey)) !== trigger.deliveryId) {
    return { kind: 'none', reason: 'a round for this head was already decided', comment: null };
  }

  const failing = await failingChecks(octokit, where, run.headSha, run.id);
  const preExisting: string[] = [];
  const toFix: typeof failing = [];
  for (const check of failing) {
    if (await failsOn(octokit, where, pr.base.ref, check.name)) preExisting.push(check.name);
    else toFix.push(check);
  }
  const said = (names: readonly string[]): string => names.map((n) => codeSpan(n)).join(', ');
  // Each kind of "no round" is said once per pull request, not again on every new head.
  const once = async (kind: string): Promise<boolean> =>
    firstTime(redis, `${prefix}:ci-said:${target}:${kind}`, 30 * 24 * 3600);
  if (toFix.length === 0) {
    const say = await once(`pre-existing:${preExisting.join(',')}`);
    return {
      kind: 'none',
      reason: 'every failing check also fails on the base branch',
      comment: !say
        ? null
        : `CI fails on this pull request in ${said(preExisting)}, but ${preExisting.length === 1 ? 'that check fails' : 'those checks fail'} on \`${pr.base.ref}\` too: the failure is pre-existing, not caused by this change, so I am not trying to fix it here.`,
    };
  }
  // The round's number is kept per head, so an intake retry of this delivery reuses it.
  const roundsKey = `${prefix}:ci-rounds:${target}`;
  const roundKey = `${headKey}:round`;
  const decided = await redis.get(roundKey);
  const used = Number((await redis.get(roundsKey)) ?? '0');
  if (decided === null && used >= config.ciFixRounds) {
    const say = await once('rounds-used');
    return {
      kind: 'none',
      reason: `ciFixRounds (${config.ciFixRounds}) used`,
      comment: !say
        ? null
        : `CI still fails (${said(toFix.map((c) => c.name))}) after ${config.ciFixRounds} automatic round${config.ciFixRounds === 1 ? '' : 's'} of fixes, the most this repository allows (\`ciFixRounds\`). I am not trying again on my own; \`@agent\` with what to change starts another round.`,
    };
  }
  let round = Number(decided);
  if (decided === null) {
    round = await redis.incr(roundsKey);
    await redis.expire(roundsKey, 90 * 24 * 3600);
    await redis.set(roundKey, String(round), 'EX', 30 * 24 * 3600);
  }
  const checks = [];
  for (const check of toFix.slice(0, MAX_CHECKS)) {
    checks.push({
      name: check.name,
      conclusion: check.conclusion,
      summary: bound(
        stripHiddenText([check.title, check.summary, check.text].filter((t) => t !== '').join('\n\n')),
        3000,
      ),
      annotations: (await annotations(octokit, where, check.id)).slice(0, MAX_ANNOTATIONS),
      logTail: check.actions ? await logTail(octokit, where, check.id, log) : '',
    });
  }
  if (preExisting.length > 0)
    log.info({ checks: preExisting }, 'failing on the base branch too: not part of the round');
  return { kind: 'round', ci: { round, of: config.ciFixRounds, headSha: run.headSha, checks } };
}

interface FailingCheck {
  readonly id: number;
  readonly name: string;
  readonly conclusion: string;
  readonly title: string;
  readonly summary: string;
  readonly text: string;
  /** Run by GitHub Actions: its job log can be read. */
  readonly actions: boolean;
}

/** The checks that failed on `sha` (the latest run of each name), the delivered one first. */
async function failingChecks(
  octokit: Octokit,
  where: Where,
  sha: string,
  first: number,
): Promise<FailingCheck[]> {
  const { data } = await octokit.rest.checks.listForRef({
    ...where,
    ref: sha,
    filter: 'latest',
    per_page: 100,
  });
  return data.check_runs
    .filter((c) => c.conclusion === 'failure' || c.conclusion === 'timed_out')
    .sort((a, b) => (a.id === first ? -1 : b.id === first ? 1 : a.name.localeCompare(b.name)))
    .map((c) => ({
      id: c.id,
      name: c.name,
      conclusion: c.conclusion ?? 'failure',
      title: c.output.title ?? '',
      summary: c.output.summary ?? '',
      text: c.output.text ?? '',
      actions: c.app?.slug === 'github-actions',
    }));
}

/** Whether the check `name` failed in its latest run on the tip of `branch`. */
async function failsOn(octokit: Octokit, where: Where, branch: string, name: string): Promise<boolean> {
  const { data } = await octokit.rest.checks.listForRef({
    ...where,
    ref: branch,
    check_name: name,
    filter: 'latest',
    per_page: 1,
  });
  const latest = data.check_runs[0];
  return latest !== undefined && (latest.conclusion === 'failure' || latest.conclusion === 'timed_out');
}

async function annotations(octokit: Octokit, where: Where, id: number): Promise<string[]> {
  const { data } = await octokit.rest.checks.listAnnotations({ ...where, check_run_id: id, per_page: 50 });
  return data.map((a) =>
    bound(
      stripHiddenText(
        `${a.path}:${a.start_line}: ${a.annotation_level ?? 'failure'}: ${a.title ?? ''} ${a.message ?? ''}`,
      ),
      500,
    ),
  );
}

/** The last lines of an Actions job's log (the API redirects to the log, which fetch follows). */
async function logTail(octokit: Octokit, where: Where, jobId: number, log: Logger): Promise<string> {
  try {
    const { data } = await octokit.rest.actions.downloadJobLogsForWorkflowRun({ ...where, job_id: jobId });
    const text =
      typeof data === 'string'
        ? data
        : data instanceof ArrayBuffer
          ? new TextDecoder().decode(data)
          : String(data);
    const lines = stripHiddenText(text).split('\n');
    return bound(lines.slice(-LOG_TAIL_LINES).join('\n'), LOG_TAIL_CHARS, 'tail');
  } catch (error) {
    log.warn({ err: error, job: jobId }, 'could not read the job log');
    return '';
  }
}

function bound(text: string, max: number, keep: 'head' | 'tail' = 'head'): string {
  if (text.length <= max) return text;
  return keep === 'head' ? `${text.slice(0, max)}…` : `…${text.slice(-max)}`;
}
