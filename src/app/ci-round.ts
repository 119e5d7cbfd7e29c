import type { Logger } from 'pino';
import { stripHiddenText } from '../agent/untrusted-text.js';
import { CHECK_RUN_NAME } from '../publish/check-run.js';
import { codeSpan } from '../publish/markdown.js';
import type { RepoConfig } from '../config/repo-config.js';
import type { FixJob } from '../queue/payloads.js';
import { pullOwnership, type RestClient } from './trigger-rules.js';
import type { Trigger } from '../queue/trigger.js';

type Where = { readonly owner: string; readonly repo: string };

/** Failing checks a round is told about at most, and the log tail each carries. */
const MAX_CHECKS = 5;
/** Pre-existing failures named in a round (the log has them all). */
const MAX_PRE_EXISTING = 20;
const LOG_TAIL_LINES = 80;
const LOG_TAIL_CHARS = 6000;
const MAX_ANNOTATIONS = 20;

export type CiDecision =
  | { readonly kind: 'round'; readonly ci: NonNullable<FixJob['ci']> }
  /** No round: `reason` for the log; `comment` (if any) is said once on the PR. */
  | { readonly kind: 'none'; readonly reason: string; readonly comment: string | null };

/**
 * Where the decisions about one pull request's rounds are remembered: Redis for the App (see
 * src/app/ci-ledger.ts), the pull request's own comments for the Action, which keeps nothing between
 * workflow runs (src/action/ci-ledger.ts).
 */
export interface CiLedger {
  /** False when another delivery already decided this head (one round per head). */
  claimHead(headSha: string): Promise<boolean>;
  /**
   * Whether this kind of "no round" is still unsaid on the pull request; `marker` (a hidden marker
   * line, may be empty) opens the comment that says it.
   */
  unsaid(kind: string): Promise<{ readonly say: boolean; readonly marker: string }>;
  /**
   * The round for this head: the number this delivery already holds (a retry), else the next one,
   * else `used` when `max` rounds were started on the pull request. `taken`: another delivery won
   * the head meanwhile. `failing` names the checks, for a ledger that says the round starts.
   */
  round(
    headSha: string,
    max: number,
    failing: readonly string[],
  ): Promise<
    | { readonly kind: 'round'; readonly round: number }
    | { readonly kind: 'used' }
    | { readonly kind: 'taken' }
  >;
}

/** The failed run a `ci_failure` is about: a check run (App) or a workflow run (Action). */
function failedRun(
  trigger: Trigger,
): { readonly headSha: string; readonly firstCheck: number | null } | null {
  if (trigger.checkRun !== undefined)
    return { headSha: trigger.checkRun.headSha, firstCheck: trigger.checkRun.id };
  if (trigger.workflowRun !== undefined) return { headSha: trigger.workflowRun.headSha, firstCheck: null };
  return null;
}

/**
 * A check failed on a pull request's head: does the agent start a round to fix it? Only on its own
 * open PR (others are ignored without a word), only for the PR's current head, once per head (the
 * first failing check's delivery collects every check that failed there by then), never past
 * `ciFixRounds`, and not for a check that also fails on the base branch's latest commit (that one is
 * pre-existing, said so once). The failing checks' output, annotations and log tails go into the
 * round's payload: untrusted text, fenced when the model reads it.
 */
export async function decideCiRound(
  trigger: Trigger,
  config: RepoConfig,
  octokit: RestClient,
  ledger: (pr: number) => CiLedger,
  botId: number,
  log: Logger,
): Promise<CiDecision> {
  const run = failedRun(trigger);
  if (run === null) return { kind: 'none', reason: 'no failed run', comment: null };
  const where: Where = { owner: trigger.repo.owner, repo: trigger.repo.name };
  const { data: pr } = await octokit.rest.pulls.get({ ...where, pull_number: trigger.issue.number });
  if (!pullOwnership(pr, botId).ours)
    return { kind: 'none', reason: 'not one of the agent’s PRs', comment: null };
  if (pr.state !== 'open') return { kind: 'none', reason: 'the pull request is closed', comment: null };
  if (pr.head.sha !== run.headSha)
    return { kind: 'none', reason: 'a check of an earlier head of the pull request', comment: null };
  if (config.ciFixRounds === 0) return { kind: 'none', reason: 'ciFixRounds is 0', comment: null };
  const book = ledger(pr.number);
  if (!(await book.claimHead(run.headSha)))
    return { kind: 'none', reason: 'a round for this head was already decided', comment: null };

  const failing = await failingChecks(octokit, where, run.headSha, run.firstCheck);
  if (failing.length === 0)
    return { kind: 'none', reason: 'no failing check on the head (re-run since?)', comment: null };
  const preExisting: string[] = [];
  const toFix: typeof failing = [];
  for (const check of failing) {
    if (await failsOn(octokit, where, pr.base.ref, check.name)) preExisting.push(check.name);
    else toFix.push(check);
  }
  const said = (names: readonly string[]): string => names.map((n) => codeSpan(n)).join(', ');
  // Each kind of "no round" is said once per pull request, not again on every new head.
  const once = async (kind: string, text: string): Promise<string | null> => {
    const { say, marker } = await book.unsaid(kind);
    return say ? (marker === '' ? text : `${marker}\n${text}`) : null;
  };
  if (toFix.length === 0) {
    return {
      kind: 'none',
      reason: 'every failing check also fails on the base branch',
      comment: await once(
        `pre-existing:${preExisting.join(',')}`,
        `CI fails on this pull request in ${said(preExisting)}, but ${preExisting.length === 1 ? 'that check fails' : 'those checks fail'} on \`${pr.base.ref}\` too: the failure is pre-existing, not caused by this change, so I am not trying to fix it here.`,
      ),
    };
  }
  const claimed = await book.round(
    run.headSha,
    config.ciFixRounds,
    toFix.map((c) => c.name),
  );
  if (claimed.kind === 'taken')
    return { kind: 'none', reason: 'another run took the round for this head', comment: null };
  if (claimed.kind === 'used') {
    return {
      kind: 'none',
      reason: `ciFixRounds (${config.ciFixRounds}) used`,
      comment: await once(
        'rounds-used',
        `CI still fails (${said(toFix.map((c) => c.name))}) after ${config.ciFixRounds} automatic round${config.ciFixRounds === 1 ? '' : 's'} of fixes, the most this repository allows (\`ciFixRounds\`). I am not trying again on my own; \`${config.handle}\` with what to change starts another round.`,
      ),
    };
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
  return {
    kind: 'round',
    ci: {
      round: claimed.round,
      of: config.ciFixRounds,
      headSha: run.headSha,
      checks,
      ...(preExisting.length === 0
        ? {}
        : { preExisting: preExisting.slice(0, MAX_PRE_EXISTING), baseRef: pr.base.ref }),
    },
  };
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
  octokit: RestClient,
  where: Where,
  sha: string,
  first: number | null,
): Promise<FailingCheck[]> {
  const { data } = await octokit.rest.checks.listForRef({
    ...where,
    ref: sha,
    filter: 'latest',
    per_page: 100,
  });
  return (
    data.check_runs
      // The agent's own verdict (publish/check-run.ts) is not CI for a round to fix.
      .filter((c) => c.name !== CHECK_RUN_NAME)
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
      }))
  );
}

/** Whether the check `name` failed in its latest run on the tip of `branch`. */
async function failsOn(octokit: RestClient, where: Where, branch: string, name: string): Promise<boolean> {
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

async function annotations(octokit: RestClient, where: Where, id: number): Promise<string[]> {
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

/**
 * The last lines of an Actions job's log (the API redirects to the log, which fetch follows). The
 * body is streamed and only its last LOG_TAIL_WINDOW bytes are kept: a job log can be hundreds of
 * megabytes, and the App holds many of these at once.
 */
async function logTail(octokit: RestClient, where: Where, jobId: number, log: Logger): Promise<string> {
  try {
    const { data } = await octokit.rest.actions.downloadJobLogsForWorkflowRun({
      ...where,
      job_id: jobId,
      request: { parseSuccessResponseBody: false },
    });
    const text = await tailText(data, LOG_TAIL_WINDOW);
    const lines = stripHiddenText(text).split('\n');
    return bound(lines.slice(-LOG_TAIL_LINES).join('\n'), LOG_TAIL_CHARS, 'tail');
  } catch (error) {
    log.warn({ err: error, job: jobId }, 'could not read the job log');
    return '';
  }
}

/** Bytes of a job log kept while it streams by: well over LOG_TAIL_LINES lines of any real log. */
const LOG_TAIL_WINDOW = 256 * 1024;

/**
 * The text of the last `maxBytes` of a body: a web stream (read through, keeping a window of
 * chunks), or an already read string or buffer. A line cut by the window's start is dropped.
 */
export async function tailText(body: unknown, maxBytes: number): Promise<string> {
  if (typeof body === 'string') return body.length <= maxBytes ? body : dropFirstLine(body.slice(-maxBytes));
  if (body instanceof ArrayBuffer) return tailText(new TextDecoder().decode(body), maxBytes);
  if (!(body instanceof ReadableStream)) return '';
  const chunks: Uint8Array[] = [];
  let held = 0;
  let cut = false;
  const reader = (body as ReadableStream<Uint8Array>).getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    held += value.byteLength;
    // Whole chunks leave the window from the front while what remains still covers maxBytes.
    while (chunks.length > 1 && held - (chunks[0]?.byteLength ?? 0) >= maxBytes) {
      held -= chunks.shift()?.byteLength ?? 0;
      cut = true;
    }
  }
  let bytes = Buffer.concat(chunks);
  if (bytes.byteLength > maxBytes) {
    bytes = bytes.subarray(bytes.byteLength - maxBytes);
    cut = true;
  }
  const text = new TextDecoder().decode(bytes);
  return cut ? dropFirstLine(text) : text;
}

function dropFirstLine(text: string): string {
  const nl = text.indexOf('\n');
  return nl === -1 ? text : text.slice(nl + 1);
}

function bound(text: string, max: number, keep: 'head' | 'tail' = 'head'): string {
  if (text.length <= max) return text;
  return keep === 'head' ? `${text.slice(0, max)}…` : `…${text.slice(-max)}`;
}
