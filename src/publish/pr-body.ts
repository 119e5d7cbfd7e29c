/**
 * The pull request the App opens for an issue: title, body and the comments that carry the rest of
 * the trajectory. Rendered from event logs alone (principle 1), as pure functions.
 *
 * Invariants:
 * - Body and every comment stay within `budget` UTF-8 bytes (default 60,000; GitHub refuses more than
 *   65,536 characters). The sections above the trajectory are capped field by field, so they leave
 *   room for it; the trajectory takes what is left and continues in `trajectoryComments`.
 * - Every text from the log is redacted, then shortened, then made inert (see markdown.ts); the
 *   assembled body and comments go through `publishable` as a safety net (links may lead to GitHub's
 *   own host, given as `trustedHosts`, and to the hosts of `trajectoryLink`).
 * - The body's first line is the hidden marker `<!-- issue-agent:pr conversation=<id> -->`.
 */
import { reduceState, type RunState } from '../events/reduce-state.js';
import type { AgentEvent, BaseState, EventOf, OutcomeKind } from '../events/schema.js';
import {
  balanceFences,
  byteLength,
  codeSpan,
  fenced,
  formatDuration,
  formatInt,
  formatUsd,
  neutralizeInline,
  neutralizeProse,
  stripControls,
  tableCell,
  truncateEnd,
  truncateInline,
  truncateMiddle,
} from './markdown.js';
import { pullRequestMarker, trajectoryMarker } from './markers.js';
import { describeOutcome, outcomeIcon } from './outcome-words.js';
import { hostsIn, publishable, type Publishable } from './publishable.js';
import type { Redactor } from './redact.js';
import {
  DETAIL_LEVELS,
  PART_OVERHEAD,
  packUnits,
  placeholder,
  trajectoryUnits,
  wrapPart,
  type PublishedRun,
  type TrajectoryUnit,
} from './trajectory.js';
import { renderEnvironment } from './environment.js';
import { appliesFromStart } from '../agent/instructions.js';
import { renderVerification } from './verification.js';
import { describeLeftOut } from '../sandbox/generated-files.js';

export type { PublishedRun } from './trajectory.js';

/** GitHub's limit for an issue or PR body and for a comment, in characters. */
export const GITHUB_BODY_LIMIT = 65_536;
/** Default budget per body or comment, in UTF-8 bytes: well under the limit, for the safety-net pass. */
export const DEFAULT_BODY_BUDGET = 60_000;
/** GitHub's limit for a PR title. */
export const TITLE_LIMIT = 256;

interface PullRequestCommon {
  readonly issue: { readonly number: number; readonly title: string };
  /** Where the full JSON trajectory can be fetched (a URL or a sentence); shown as given, redacted. */
  readonly trajectoryLink: string;
  /** Holds the secrets of this job (installation token, model key); patterns apply in any case. */
  readonly redactor: Redactor;
  /** Hosts links may lead to besides those in `trajectoryLink` (GitHub's: see `githubHosts`). */
  readonly trustedHosts?: Iterable<string>;
  /** The id in the body's hidden marker; default: the first run's conversation id. */
  readonly conversationId?: string;
  /** Bytes per body and per comment (default DEFAULT_BODY_BUDGET). */
  readonly budget?: number;
  /**
   * Trajectory comments wanted at most (default 5). Outputs are shortened to fit this many; every
   * step still appears, so a very long run may need more.
   */
  readonly maxTrajectoryComments?: number;
  /** An outsider's request a maintainer approved (`@agent approve`): both are named. */
  readonly approval?: { readonly requestedBy: string; readonly approvedBy: string };
  /** Best-of-N: every attempt of the job, the published one marked, shown as a table. */
  readonly attempts?: readonly AttemptTableRow[];
}

/** One attempt of a best-of-N job as the PR body's table shows it. */
export interface AttemptTableRow {
  readonly number: number;
  readonly outcome: OutcomeKind | 'crashed';
  readonly reason: string;
  readonly newlyPassing: number;
  readonly failing: number | null;
  readonly changedLines: number | null;
  readonly filesChanged: number;
  readonly usd: number;
  readonly winner: boolean;
  /** Where its trajectory is read: a URL is linked, other text shown as is. */
  readonly link: string;
}

/** One run (`base` + `events`), or several rounds on the same pull request (`runs`, in order). */
export type PullRequestInput = PullRequestCommon &
  (
    | { readonly base: BaseState; readonly events: readonly AgentEvent[] }
    | { readonly runs: readonly PublishedRun[] }
  );

export interface RenderedPullRequest {
  readonly title: string;
  readonly body: Publishable;
  /** Comments to post on the PR after it is opened, in order (empty when the body holds everything). */
  readonly trajectoryComments: Publishable[];
}

export class PublishInputError extends Error {
  override readonly name = 'PublishInputError';
}

/** `Fix #<n>: <issue title>` on one line, redacted, at most 256 characters. */
export function pullRequestTitle(issue: { number: number; title: string }, redactor: Redactor): string {
  const title = stripControls(redactor.redact(issue.title)).replace(/\s+/g, ' ').trim();
  return truncateEnd(`Fix #${issue.number}: ${title}`, TITLE_LIMIT);
}

/** Field limits of the sections above the trajectory, in characters (rows, files: counts). */
interface HeadCaps {
  readonly summary: number;
  readonly reason: number;
  readonly rows: number;
  readonly name: number;
  /** Files listed (a diff stat keeps about 100 characters per file); 0 keeps only the totals line. */
  readonly files: number;
  readonly label: number;
}

/**
 * Tried in order until the head takes at most HEAD_SHARE of the budget; the last one is small in any
 * case (a few short fields and a counts table), so the head always fits.
 */
const HEAD_TIERS: readonly HeadCaps[] = [
  { summary: 3000, reason: 1500, rows: 50, name: 150, files: 40, label: 80 },
  { summary: 1000, reason: 500, rows: 15, name: 80, files: 10, label: 40 },
  { summary: 300, reason: 200, rows: 0, name: 0, files: 0, label: 20 },
];
const HEAD_SHARE = 0.6;

interface RunView {
  readonly run: PublishedRun;
  readonly state: RunState;
}

function changedFilesFromDiff(diff: string): string[] {
  const files: string[] = [];
  for (const m of diff.matchAll(/^diff --git a\/(.*?) b\/(.*)$/gm)) {
    const [, a, b] = m;
    if (a === undefined || b === undefined) continue;
    files.push(a === b ? b : `${a} → ${b}`);
  }
  return files;
}

function filesSection(view: RunView, redactor: Redactor, caps: HeadCaps): string {
  const files = changedFilesList(view, redactor, caps);
  const leftOut = describeLeftOut(view.state.lastCheckpoint?.leftOut ?? []);
  if (leftOut === '') return files;
  return `${files}\n\nLeft out of the change as generated by test runs (this repository tracks no such files): ${leftOut}.`;
}

function changedFilesList(view: RunView, redactor: Redactor, caps: HeadCaps): string {
  const outcome = view.state.outcome;
  const cp = view.state.lastCheckpoint;
  const count =
    cp === null || cp.filesChanged === 0
      ? 'No file was changed.'
      : `${cp.filesChanged} file${cp.filesChanged === 1 ? '' : 's'} changed.`;
  if (outcome !== null && outcome.diffStat.trim() !== '') {
    const stat = redactor.redact(outcome.diffStat.replace(/\n+$/, ''));
    if (caps.files > 0) return fenced(truncateMiddle(stat, caps.files * 100));
    // `git diff --stat` ends with "N files changed, X insertions(+), Y deletions(-)".
    return neutralizeInline(truncateEnd(stat.slice(stat.lastIndexOf('\n') + 1), 200));
  }
  if (cp === null || cp.filesChanged === 0 || cp.diff === null || caps.files === 0) return count;
  const files = changedFilesFromDiff(cp.diff);
  if (files.length === 0) return count;
  const shown = files
    .slice(0, caps.files)
    .map((f) => `- ${codeSpan(truncateInline(redactor.redact(f), 200))}`);
  if (files.length > caps.files) shown.push(`- … and ${files.length - caps.files} more`);
  return shown.join('\n');
}

function statsRow(state: RunState): string[] {
  return [
    String(state.steps),
    formatInt(state.usage.inputTokens),
    formatInt(state.usage.outputTokens),
    formatInt(state.usage.cacheReadTokens),
    formatInt(state.usage.cacheWriteTokens),
    formatUsd(state.usd),
    formatDuration(state.elapsedMs),
  ];
}

function statsSection(views: readonly RunView[], redactor: Redactor, caps: HeadCaps): string {
  const header = '| Steps | Input tokens | Output tokens | Cache read | Cache write | Cost | Wall time |';
  const align = '| ---: | ---: | ---: | ---: | ---: | ---: | ---: |';
  const models = [...new Set(views.map((v) => v.run.base.model))].map((m) => codeSpan(m)).join(', ');
  const only = views.length === 1 ? views[0] : undefined;
  // Thinking is never shown here, only how much there was (it is in the output tokens and the cost).
  const thought = views.reduce(
    (n, v) =>
      n + v.run.events.reduce((m, e) => m + (e.kind === 'model_response' ? (e.thinkingTokens ?? 0) : 0), 0),
    0,
  );
  const thinking =
    thought > 0 ? [`${formatInt(thought)} thinking tokens (in the output tokens and the cost).`, ''] : [];
  if (only !== undefined) {
    return [
      `Model: ${models}`,
      '',
      ...thinking,
      header,
      align,
      `| ${statsRow(only.state).join(' | ')} |`,
    ].join('\n');
  }
  const total: RunState = reduceState(views.flatMap((v) => v.run.events));
  const rows = views.map(
    (v, i) =>
      `| ${tableCell(`${i + 1}. ${neutralizeInline(truncateEnd(redactor.redact(v.run.label), caps.label))}`)} | ${statsRow(v.state).join(' | ')} |`,
  );
  // Wall time of the total is the sum of the rounds: each run's log measures its own lifetimes.
  const sum = views.reduce((ms, v) => ms + v.state.elapsedMs, 0);
  const totalRow = statsRow(total);
  totalRow[6] = formatDuration(sum);
  return [
    `Model: ${models}`,
    '',
    ...thinking,
    `| Round ${header}`,
    `| --- ${align}`,
    ...rows,
    `| **Total** | ${totalRow.join(' | ')} |`,
  ].join('\n');
}

/**
 * The table of a best-of-N job: what each attempt came to, in the terms the harness ranked them by
 * (resolved, then unverified, then the rest; more newly passing tests, fewer changed lines, lower
 * cost), with a link to each one's trajectory.
 */
function attemptsSection(rows: readonly AttemptTableRow[], redactor: Redactor, caps: HeadCaps): string {
  const link = (text: string): string => {
    const url = /^(https?:\/\/[^\s<>()[\]]+)/.exec(text)?.[1];
    return url === undefined
      ? neutralizeInline(truncateEnd(redactor.redact(text), 400))
      : `[trajectory](${url})`;
  };
  const table = [...rows]
    .sort((a, b) => a.number - b.number)
    .map((r) =>
      [
        `${r.number}${r.winner ? ' ✅ **published**' : ''}`,
        r.outcome === 'crashed' ? '💥 `crashed`' : `${outcomeIcon(r.outcome)} ${codeSpan(r.outcome)}`,
        String(r.newlyPassing),
        r.failing === null ? '–' : String(r.failing),
        r.changedLines === null
          ? r.filesChanged === 0
            ? '–'
            : `${r.filesChanged} file${r.filesChanged === 1 ? '' : 's'} (too large to count)`
          : `${formatInt(r.changedLines)} line${r.changedLines === 1 ? '' : 's'} in ${r.filesChanged} file${r.filesChanged === 1 ? '' : 's'}`,
        formatUsd(r.usd),
        link(r.link),
        neutralizeInline(truncateEnd(redactor.redact(r.reason), caps.label)),
      ]
        .map(tableCell)
        .join(' | '),
    )
    .map((row) => `| ${row} |`);
  const total = rows.reduce((sum, r) => sum + r.usd, 0);
  return [
    `${rows.length} independent attempts, each in its own sandbox; the published one ranked first (resolved, then unverified, then the rest; then more newly passing tests, fewer changed lines, lower cost).`,
    '',
    '| Attempt | Outcome | Newly passing tests | Failing tests | Change | Cost | Trajectory | Why it ended |',
    '| --- | --- | ---: | ---: | --- | ---: | --- | --- |',
    ...table,
    `| **Total** | | | | | ${formatUsd(total)} | | |`,
  ].join('\n');
}

function summaryOf(state: RunState): string | null {
  const s = state.outcome?.summary ?? state.finishSummary;
  return s === null || s.trim() === '' ? null : s.trim();
}

function outcomeSection(outcome: EventOf<'outcome'> | null, redactor: Redactor, caps: HeadCaps): string {
  if (outcome === null) return '**Outcome:** the run has not finished.';
  const reason = neutralizeInline(truncateEnd(redactor.redact(outcome.reason), caps.reason));
  return `**Outcome:** ${outcomeIcon(outcome.outcome)} ${describeOutcome(outcome)}\n\n**Why:** ${reason}`;
}

function firstOf<T>(items: readonly (T | null)[]): T | null {
  for (const x of items) if (x !== null) return x;
  return null;
}

function runsOf(input: PullRequestInput): readonly PublishedRun[] {
  if ('runs' in input) return input.runs;
  return [{ base: input.base, events: input.events, label: 'Run' }];
}

/**
 * Renders the PR for one run or several rounds. With rounds, the summary, outcome and the "after"
 * column come from the latest run that has them, "before" from the earliest baseline, files changed
 * and the trajectory are per round.
 */
export function renderPullRequest(input: PullRequestInput): RenderedPullRequest {
  const runs = runsOf(input);
  const first = runs[0];
  if (first === undefined) throw new PublishInputError('a pull request needs at least one run');
  const redactor = input.redactor;
  const budget = input.budget ?? DEFAULT_BODY_BUDGET;
  if (budget < 10_000 || budget > GITHUB_BODY_LIMIT) {
    throw new PublishInputError(
      `budget must be between 10,000 and ${GITHUB_BODY_LIMIT} bytes, got ${budget}`,
    );
  }
  if (!Number.isSafeInteger(input.issue.number) || input.issue.number <= 0) {
    throw new PublishInputError(`not an issue number: ${input.issue.number}`);
  }
  const maxComments = input.maxTrajectoryComments ?? 5;
  const conversationId = input.conversationId ?? first.base.conversationId;
  if (conversationId === '' || conversationId.length > 200) {
    throw new PublishInputError('the conversation id must have 1 to 200 characters');
  }
  const views: RunView[] = runs.map((run) => ({ run, state: reduceState(run.events) }));

  let headText = '';
  for (const caps of HEAD_TIERS) {
    headText = renderHead(input, views, conversationId, caps);
    if (byteLength(headText) <= budget * HEAD_SHARE) break;
  }

  const { bodyPart, comments } = renderTrajectoryParts(runs, {
    redactor,
    conversationId,
    firstCapacity: budget - byteLength(headText) - 2 - PART_OVERHEAD,
    // A comment also carries its marker, whose length depends on the conversation id.
    capacity: budget - PART_OVERHEAD - byteLength(trajectoryMarker(conversationId, 999_999)),
    maxComments,
  });
  const audience = {
    redactor,
    trustedHosts: [...(input.trustedHosts ?? []), ...hostsIn(input.trajectoryLink)],
  };
  return {
    title: pullRequestTitle(input.issue, redactor),
    body: publishable(`${headText}\n\n${bodyPart}`, audience),
    trajectoryComments: comments.map((c) => publishable(c, audience)),
  };
}

function renderHead(
  input: PullRequestInput,
  views: readonly RunView[],
  conversationId: string,
  caps: HeadCaps,
): string {
  const redactor = input.redactor;
  const lastView = views[views.length - 1];
  if (lastView === undefined) throw new PublishInputError('a pull request needs at least one run');
  const head: string[] = [pullRequestMarker(conversationId)];
  const summary = firstOf([...views].reverse().map((v) => summaryOf(v.state)));
  head.push(
    summary === null
      ? '*The agent gave no summary.*'
      : balanceFences(neutralizeProse(truncateMiddle(redactor.redact(summary), caps.summary))),
  );
  head.push(outcomeSection(lastView.state.outcome, redactor, caps));

  const shown = verifiedRuns(views);
  const verification = renderVerification(shown.before, shown.after, {
    withoutFix: shown.withoutFix,
    noTestsReason: shown.noTestsReason,
    maxRows: caps.rows,
    maxNameChars: caps.name,
    redact: (t) => redactor.redact(t),
  });
  const syntax = syntaxLine(lastView.run.events, redactor);
  head.push(`### Verification\n\n${verification}${syntax === null ? '' : `\n\n${syntax}`}`);
  const environment = lastView.run.base.environment;
  if (environment !== undefined) {
    head.push(`### Environment\n\n${renderEnvironment(environment, (t) => redactor.redact(t))}`);
  }
  const instructions = instructionsSection(views);
  if (instructions !== null) head.push(`### Instructions used\n\n${instructions}`);
  const images = imagesSection(views, redactor);
  if (images !== null) head.push(`### Images\n\n${images}`);

  const files =
    views.length === 1
      ? filesSection(lastView, redactor, caps)
      : views
          .map(
            (v, i) =>
              `Round ${i + 1} (${neutralizeInline(truncateEnd(redactor.redact(v.run.label), caps.label))}):\n\n${filesSection(v, redactor, caps)}`,
          )
          .join('\n\n');
  head.push(`### Files changed\n\n${files}`);
  head.push(`### Run\n\n${statsSection(views, redactor, caps)}`);
  if (input.attempts !== undefined && input.attempts.length > 1) {
    head.push(`### Attempts\n\n${attemptsSection(input.attempts, redactor, caps)}`);
  }
  if (input.approval !== undefined) {
    head.push(
      `Requested by ${codeSpan(truncateEnd(input.approval.requestedBy, 100))}, who cannot start jobs here; approved by ${codeSpan(truncateEnd(input.approval.approvedBy, 100))} with \`approve\`, from the request as it read then.`,
    );
  }
  head.push(`Fixes #${input.issue.number}`);
  head.push(
    `📄 The full trajectory, step by step: ${truncateEnd(redactor.redact(input.trajectoryLink), 2000)}`,
  );
  return head.join('\n\n');
}

/** The runs one verification section shows (see verifiedRuns). */
export interface VerifiedRuns {
  readonly before: EventOf<'test_run'> | null;
  readonly after: EventOf<'test_run'> | null;
  readonly withoutFix: EventOf<'test_run'> | null;
  readonly noTestsReason: string;
}

/**
 * Which test runs a pull request's verification shows, for its body and its check run alike: the
 * earliest round's baseline ("before"), the latest round's final run ("after") and that round's
 * `without_fix` run, with why there is none when no test ran.
 */
export function verificationOf(runs: readonly PublishedRun[]): VerifiedRuns {
  return verifiedRuns(runs.map((run) => ({ run, state: reduceState(run.events) })));
}

function verifiedRuns(views: readonly RunView[]): VerifiedRuns {
  const last = views[views.length - 1];
  return {
    before: firstOf(views.map((v) => v.state.baseline)),
    after: firstOf([...views].reverse().map((v) => v.state.finalTest)),
    // From the run whose final run is shown: the two belong together.
    withoutFix: [...views].reverse().find((v) => v.state.finalTest !== null)?.state.withoutFix ?? null,
    noTestsReason:
      last?.run.base.testCommand === null
        ? 'No tests were run: no test command is known for this repository, so the change is not proven by tests.'
        : 'No test run was recorded: the run ended before the tests ran.',
  };
}

function renderTrajectoryParts(
  runs: readonly PublishedRun[],
  o: {
    redactor: Redactor;
    conversationId: string;
    firstCapacity: number;
    capacity: number;
    maxComments: number;
  },
): { bodyPart: string; comments: string[] } {
  let parts: TrajectoryUnit[][] = [];
  for (const detail of DETAIL_LEVELS) {
    const units = trajectoryUnits(runs, detail, o.redactor).map((u) =>
      byteLength(u.markdown) + 2 > o.capacity ? placeholder(u) : u,
    );
    parts = packUnits(units, { firstCapacity: Math.max(0, o.firstCapacity), capacity: o.capacity });
    if (parts.length - 1 <= o.maxComments) break;
  }
  const inBody = parts[0] ?? [];
  const rest = parts.slice(1);
  const total = (inBody.length > 0 ? 1 : 0) + rest.length;
  const offset = inBody.length > 0 ? 1 : 0;
  const comments = rest.map((units, i) =>
    wrapPart(units, i + 1 + offset, total, runs.length, trajectoryMarker(o.conversationId, i + 1 + offset)),
  );
  let bodyPart: string;
  if (inBody.length === 0) {
    bodyPart = `*The trajectory is in the ${total} comment${total === 1 ? '' : 's'} below.*\n`;
  } else {
    bodyPart = wrapPart(inBody, 1, total, runs.length, null);
    if (total > 1) bodyPart += `\n*The trajectory continues in the comments below (parts 2–${total}).*\n`;
  }
  return { bodyPart, comments };
}

/**
 * The repository's instruction files the runs read (from the base branch), and when each was
 * given to the model: from the start, or when the agent first worked where it applies.
 */
function instructionsSection(views: readonly RunView[]): string | null {
  const lines: string[] = [];
  for (const v of views) {
    const given = v.run.base.instructions;
    if (given === undefined || given.files.length === 0) continue;
    const added = new Map<string, string>();
    for (const e of v.run.events) {
      if (e.kind === 'guidance_added') for (const p of e.paths) if (!added.has(p)) added.set(p, e.touched);
    }
    for (const f of given.files) {
      const when = !f.included
        ? 'not included (over the total size cap)'
        : appliesFromStart(f)
          ? 'from the start'
          : added.has(f.path)
            ? `added when the agent worked on ${codeSpan(added.get(f.path) ?? '')}`
            : 'not needed (the agent did not work where it applies)';
      const line = `- ${codeSpan(f.path)} (${codeSpan(given.ref)} at ${given.commit.slice(0, 7)}): ${when}${f.truncated ? `, cut at ${Buffer.byteLength(f.text)} of ${f.bytes} bytes` : ''}`;
      if (!lines.includes(line)) lines.push(line);
    }
  }
  return lines.length === 0 ? null : lines.join('\n');
}

/**
 * The issue's and the request's images: how many the model was given with the task, and each one
 * that could not be loaded, with why (the model was told the same).
 */
function imagesSection(views: readonly RunView[], redactor: Redactor): string | null {
  const lines: string[] = [];
  for (const v of views) {
    const { images = [], unavailableImages = [] } = v.run.base.task;
    if (images.length > 0) {
      const line = `- Given to the model with the task: ${images.map((i) => codeSpan(truncateEnd(redactor.redact(i.url), 300))).join(', ')}`;
      if (!lines.includes(line)) lines.push(line);
    }
    for (const u of unavailableImages.slice(0, 10)) {
      const line = `- An image could not be loaded: ${codeSpan(truncateEnd(redactor.redact(u.url), 300))} (${neutralizeInline(truncateEnd(redactor.redact(u.reason), 200))})`;
      if (!lines.includes(line)) lines.push(line);
    }
  }
  return lines.length === 0 ? null : lines.join('\n');
}

/** Changed files that do not parse as the last round ended, or null when all parsed (or none was checked). */
function syntaxLine(events: readonly AgentEvent[], redactor: Redactor): string | null {
  const check = [...events].reverse().find((e): e is EventOf<'syntax_check'> => e.kind === 'syntax_check');
  if (check === undefined || check.failures.length === 0) return null;
  const shown = check.failures
    .slice(0, 10)
    .map(
      (f) =>
        `${codeSpan(f.path)} (${neutralizeInline(truncateEnd(redactor.redact(`${f.checker}: ${f.message}`), 200))})`,
    );
  const more = check.failures.length > 10 ? ` and ${check.failures.length - 10} more` : '';
  return `⚠️ **${check.failures.length} changed file${check.failures.length === 1 ? ' does' : 's do'} not parse:** ${shown.join(', ')}${more}.`;
}
