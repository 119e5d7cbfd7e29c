/**
 * The single progress comment on an issue, edited in place as a job moves. Its first line is the
 * hidden marker `<!-- issue-agent:progress job=<jobId> -->` so a worker that resumes a job finds and
 * edits the same comment (findProgressMarker) instead of posting a second one.
 */
import type { OutcomeKind } from '../events/schema.js';
import {
  balanceFences,
  codeSpan,
  fenced,
  formatDuration,
  formatInt,
  formatUsd,
  neutralizeInline,
  neutralizeProse,
  truncateEnd,
  truncateMiddle,
} from './markdown.js';
import { progressMarker } from './markers.js';
import {
  describeOutcome,
  ENVIRONMENT,
  ENVIRONMENT_HINT,
  outcomeIcon,
  type BudgetLimit,
} from './outcome-words.js';
import type { PolicyViolation } from './policy.js';
import { hostsIn, publishable, type Publishable } from './publishable.js';
import { Redactor } from './redact.js';

export { findProgressMarker } from './markers.js';

export interface ProgressCommon {
  readonly jobId: string;
  /** Where to follow the job (logs, a run page): a URL is linked, other text shown as is. */
  readonly runLink?: string;
  /**
   * How the job's environment was made (runtime, setup and why, cache), in Markdown made by
   * describeEnvironment; shown under every state once known.
   */
  readonly environment?: string;
  /** An outsider's request a maintainer approved (`@agent approve`): shown under every state. */
  readonly approval?: {
    readonly requestedBy: string;
    readonly approvedBy: string;
    /** The request the approval covers (its comment and the digest of its text when approved). */
    readonly covers?: { readonly commentId: number; readonly digest: string } | undefined;
  };
  /**
   * Commits go on a pull request a person opened: its author and branch, who asked, and the fork
   * (`owner/name`) the branch is in, if it is one.
   */
  readonly pushTo?: {
    readonly author: string | null;
    readonly branch: string;
    readonly requester: string;
    readonly fork?: string | undefined;
  };
  /** An automatic round fixing the App's PR's failing CI: which, of at most how many. */
  readonly ciRound?: {
    readonly round: number;
    readonly of: number;
    /** Checks failing on the base branch too (pre-existing): named, not fixed. */
    readonly preExisting?: readonly string[];
    readonly baseRef?: string;
  };
}

/** One attempt of a best-of-N job, as the progress comment shows it. */
export interface AttemptProgress {
  readonly number: number;
  readonly of: number;
  readonly step: number;
  readonly costUsd: number;
  /** Its outcome once it ended, or null while it works. */
  readonly outcome: OutcomeKind | null;
}

export type ProgressState = ProgressCommon &
  (
    | {
        readonly kind: 'queued';
        readonly position: number | null;
        /** Waits for this running job of the same issue or PR to end first. */
        readonly after?: string;
        /** Cancels this running job and runs next (the repo's `onBusy: replace`). */
        readonly replaces?: string;
      }
    | {
        readonly kind: 'working';
        readonly step: number;
        readonly tokens: number;
        readonly costUsd: number;
        readonly elapsedMs: number;
        /** Best-of-N: each attempt's own state (the totals above are the job's). */
        readonly attempts?: readonly AttemptProgress[];
      }
    | { readonly kind: 'preparing' }
    | { readonly kind: 'publishing' }
    | {
        readonly kind: 'pr_opened';
        readonly url: string;
        readonly number: number;
        readonly outcome: OutcomeKind;
        readonly draft: boolean;
        /** A follow-up: new commits pushed to an existing pull request. */
        readonly updated?: boolean;
        /** The outcome's cause (`environment`: the tests could not run), for its wording. */
        readonly cause?: string;
      }
    | {
        /** The run ended without a pull request (no_change, stuck, budget_exhausted, failed, …). */
        readonly kind: 'ended';
        readonly outcome: OutcomeKind;
        readonly reason: string;
        readonly summary: string | null;
        readonly limit?: BudgetLimit;
        readonly cause?: string;
        /** Output that explains the end (a failed setup command's tail), shown fenced. */
        readonly details?: string;
      }
    | {
        /** The change was not pushed: it breaks the repository's policy. */
        readonly kind: 'refused';
        /** Extra words on top of the violations (e.g. which push was refused). */
        readonly reason?: string;
        readonly violations: readonly PolicyViolation[];
      }
    | {
        readonly kind: 'cancelled';
        /** Who cancelled (a login), or null when the system did. */ readonly by: string | null;
      }
    | { readonly kind: 'retrying'; readonly attempt: number; readonly reason: string }
  );

export type ProgressKind = ProgressState['kind'];

const PATTERNS_ONLY = new Redactor([]);
const MAX_VIOLATIONS = 50;

function safeUrl(url: string): string | null {
  return /^https:\/\/[^\s<>()]+$/.test(url) ? url : null;
}

function line(p: ProgressState, r: Redactor): string {
  const inline = (text: string, max: number): string => neutralizeInline(truncateEnd(r.redact(text), max));
  switch (p.kind) {
    case 'queued':
      if (p.replaces !== undefined) {
        return `⏳ **Queued** — replaces the running job ${codeSpan(p.replaces)}, which is being stopped; this one runs next.`;
      }
      if (p.after !== undefined) {
        return `⏳ **Queued** — runs after the job already working here (${codeSpan(p.after)}) ends; nothing is lost.`;
      }
      return p.position === null
        ? '⏳ **Queued** — waiting for a free worker.'
        : `⏳ **Queued** — number ${p.position} in line.`;
    case 'working':
      if (p.attempts !== undefined && p.attempts.length > 0) {
        const rows = [...p.attempts]
          .sort((a, b) => a.number - b.number)
          .map(
            (a) =>
              `- Attempt ${a.number} of ${a.of}: ${
                a.outcome === null
                  ? `working, step ${a.step}`
                  : `${outcomeIcon(a.outcome)} ended ${codeSpan(a.outcome)} after ${a.step} step${a.step === 1 ? '' : 's'}`
              } · ${formatUsd(a.costUsd)}`,
          );
        return [
          `🛠️ **Working** — ${p.attempts[0]?.of ?? p.attempts.length} independent attempts; the tests pick the one to publish · ${formatInt(p.tokens)} tokens · ${formatUsd(p.costUsd)} · ${formatDuration(p.elapsedMs)} so far.`,
          '',
          ...rows,
        ].join('\n');
      }
      return `🛠️ **Working** — step ${p.step} · ${formatInt(p.tokens)} tokens · ${formatUsd(p.costUsd)} · ${formatDuration(p.elapsedMs)} so far.`;
    case 'preparing':
      return '⚙️ **Preparing the environment** — image, runtime and dependencies, before the agent starts.';
    case 'publishing':
      return '📤 **Publishing** — pushing the change and opening a pull request.';
    case 'pr_opened': {
      const url = safeUrl(p.url);
      const link = url === null ? `#${p.number}` : `[#${p.number}](${url})`;
      const draft = p.draft ? ' as a draft' : '';
      const what =
        p.updated === true ? `Pushed new commits to ${link}.` : `Pull request ${link} opened${draft}.`;
      const words = describeOutcome({ outcome: p.outcome, cause: p.cause });
      const hint = p.outcome === 'unverified' && p.cause === ENVIRONMENT ? `\n\n${ENVIRONMENT_HINT}` : '';
      return `${outcomeIcon(p.outcome)} **${what}**\n\n${words}${hint}`;
    }
    case 'ended': {
      if (p.outcome === 'needs_info') {
        // The questions themselves are in their own comment, the one people answer under.
        return [
          `${outcomeIcon(p.outcome)} **Waiting for an answer.** ${describeOutcome(p)}`,
          `**What is missing:** ${inline(p.reason, 1500)}`,
          'The questions are in the comment below.',
        ].join('\n\n');
      }
      const parts = [
        `${outcomeIcon(p.outcome)} **Finished without a pull request.** ${describeOutcome(p)}`,
        `**Why:** ${inline(p.reason, 1500)}`,
      ];
      if (p.outcome === 'unverified' && p.cause === ENVIRONMENT) parts.push(ENVIRONMENT_HINT);
      if (p.details !== undefined && p.details.trim() !== '') {
        parts.push(
          `<details><summary>Output</summary>\n\n${fenced(truncateMiddle(r.redact(p.details), 6000))}\n\n</details>`,
        );
      }
      if (p.summary !== null && p.summary.trim() !== '') {
        parts.push(
          `**The agent's summary:**\n\n${balanceFences(neutralizeProse(truncateMiddle(r.redact(p.summary.trim()), 4000)))}`,
        );
      }
      return parts.join('\n\n');
    }
    case 'refused': {
      const rows = p.violations
        .slice(0, MAX_VIOLATIONS)
        .map(
          (v) =>
            `- ${v.path === undefined ? '' : `${codeSpan(truncateEnd(r.redact(v.path), 300))}: `}${inline(v.detail, 300)}`,
        );
      if (p.violations.length > MAX_VIOLATIONS)
        rows.push(`- … and ${p.violations.length - MAX_VIOLATIONS} more`);
      return [
        "🚫 **Not pushed: the change breaks this repository's policy** (`.github/issue-agent.yml`).",
        ...(p.reason === undefined ? [] : [`**Why:** ${inline(p.reason, 1000)}`]),
        ...(rows.length === 0 ? [] : [rows.join('\n')]),
      ].join('\n\n');
    }
    case 'cancelled':
      // The login is shown as code: a mention would ping the person who just cancelled.
      return p.by === null
        ? '⏹️ **Cancelled.**'
        : `⏹️ **Cancelled** by ${codeSpan(truncateEnd(r.redact(p.by), 100))}.`;
    case 'retrying':
      return `🔁 **Retrying** (attempt ${p.attempt}) — ${inline(p.reason, 1000)}`;
  }
}

/**
 * The whole comment for a state. Every text in it is redacted (pass a Redactor holding the job's
 * secrets; without one only the token patterns apply) and made inert; the comment as a whole goes
 * through `publishable`, with links allowed to the pull request's and the run link's hosts and to
 * `trustedHosts`.
 */
export function renderProgress(
  p: ProgressState,
  redactor: Redactor = PATTERNS_ONLY,
  trustedHosts: Iterable<string> = [],
): Publishable {
  const footer: string[] = [`job ${codeSpan(truncateEnd(p.jobId, 200))}`];
  if (p.ciRound !== undefined) {
    footer.push(`CI fix round ${p.ciRound.round} of ${p.ciRound.of}`);
    const pre = p.ciRound.preExisting ?? [];
    if (pre.length > 0) {
      footer.push(
        `${pre.map((n) => codeSpan(truncateEnd(n, 100))).join(', ')} ${pre.length === 1 ? 'fails' : 'fail'} on ${codeSpan(truncateEnd(p.ciRound.baseRef ?? 'the base branch', 100))} too: pre-existing, not fixed here`,
      );
    }
  }
  if (p.approval !== undefined) {
    // Logins without `@`: the footer names people, it does not notify them on every edit.
    footer.push(
      `requested by ${codeSpan(truncateEnd(p.approval.requestedBy, 100))}, approved by ${codeSpan(truncateEnd(p.approval.approvedBy, 100))}${
        p.approval.covers === undefined
          ? ''
          : ` (comment ${p.approval.covers.commentId} as it read then, sha256 ${codeSpan(p.approval.covers.digest.slice(0, 12))})`
      }`,
    );
  }
  if (p.runLink !== undefined) {
    const url = safeUrl(p.runLink);
    footer.push(
      url === null ? neutralizeInline(truncateEnd(redactor.redact(p.runLink), 300)) : `[details](${url})`,
    );
  }
  // The PR's author follows its conversation (GitHub subscribes them), and nothing the App posts
  // mentions anyone (publishable.ts): they are told by name, in every state of the comment.
  const told =
    p.pushTo === undefined
      ? []
      : [
          `${p.pushTo.author === null ? 'To the author of this pull request' : codeSpan(truncateEnd(p.pushTo.author, 100))}: ${codeSpan(truncateEnd(p.pushTo.requester, 100))} asked me to work on this pull request, so I push my commits to its branch ${codeSpan(truncateEnd(p.pushTo.branch, 200))}${p.pushTo.fork === undefined ? '' : ` in your fork ${codeSpan(truncateEnd(p.pushTo.fork, 200))} (you allow edits by maintainers; I push there with git, so the commits are not GitHub-signed)`}. Pull them before you push again.`,
        ];
  const text = [
    progressMarker(p.jobId),
    `**Issue Agent**`,
    line(p, redactor),
    ...told,
    ...(p.environment === undefined || p.environment === '' ? [] : [p.environment]),
    `<sub>${footer.join(' · ')}</sub>`,
  ].join('\n\n');
  return publishable(text, {
    redactor,
    trustedHosts: [...trustedHosts, ...hostsIn(p.runLink), ...(p.kind === 'pr_opened' ? hostsIn(p.url) : [])],
  });
}
