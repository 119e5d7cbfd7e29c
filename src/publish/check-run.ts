/**
 * The check run the App (or the Action) puts on every commit it pushes: GitHub's own place for "did
 * the tests pass on this commit". Rendered from the event logs alone, as a pure function, with the
 * same verification section as the pull request's body (verification.ts), never a copy of it.
 *
 * Invariants:
 * - The conclusion is the verdict's: `failure` when the change broke tests that passed before (or the
 *   test setup, where the baseline ran), else `success` for a resolved run, else `neutral`.
 * - Summary and text stay within GitHub's 65,535 characters each; the table is shortened first.
 * - At most 50 annotations (GitHub's limit per request), each on the line of the test's definition
 *   where the runner's report gave it (the harness's pytest plugin and node:test reporter), else on
 *   the file's first line, saying so (runners read from their output name files, not lines); a test
 *   whose file is not known gets none.
 * - Every text goes through `publishable`, as everything else the App posts.
 * - The text's first line is the hidden marker of the test commands the verdict ran
 *   (reproduction.ts `testCommandMarker`): the one place a reproduction reads them from. Everything
 *   the pull request chooses (test names, output) comes after it.
 */
import { reduceState } from '../events/reduce-state.js';
import { factsOf } from '../testing/compare.js';
import { verdict } from '../testing/verdict.js';
import { neutralizeInline, truncateEnd } from './markdown.js';
import { describeOutcome, outcomeIcon } from './outcome-words.js';
import { verificationOf } from './pr-body.js';
import { publishable, type Audience, type Publishable } from './publishable.js';
import { testCommandMarker } from './reproduction.js';
import type { PublishedRun } from './trajectory.js';
import { renderVerification } from './verification.js';

/** The check run's name on every commit: the project's. */
export const CHECK_RUN_NAME = 'Issue Agent';
/** GitHub's limit for a check run's summary and for its text, in characters. */
export const CHECK_OUTPUT_LIMIT = 65_535;
/** GitHub's limit of annotations per create or update request. */
export const MAX_CHECK_ANNOTATIONS = 50;

export type CheckConclusion = 'success' | 'neutral' | 'failure';

export interface CheckAnnotation {
  readonly path: string;
  readonly start_line: number;
  readonly end_line: number;
  readonly annotation_level: 'notice' | 'warning' | 'failure';
  readonly title: string;
  readonly message: string;
}

export interface RenderedCheckRun {
  readonly conclusion: CheckConclusion;
  readonly title: string;
  readonly summary: Publishable;
  readonly text: Publishable;
  readonly annotations: readonly CheckAnnotation[];
}

export interface CheckRunInput {
  /** The rounds of the pull request, in order; the last one made the commit. */
  readonly runs: readonly PublishedRun[];
  readonly audience: Audience;
  /** Where the full trajectory is read (as the PR body says it), or null. */
  readonly trajectoryLink: string | null;
}

/** Rows of the per-test table tried in turn until the text fits. */
const ROW_TIERS = [500, 100, 20] as const;
const ON_FIRST_LINE =
  'The test runner reports which file this test is in but not its line, so this note is on the first line of the file.';

export function renderCheckRun(input: CheckRunInput): RenderedCheckRun {
  const last = input.runs[input.runs.length - 1];
  const outcome = last === undefined ? null : reduceState(last.events).outcome;
  const shown = verificationOf(input.runs);
  const redact = (t: string): string => input.audience.redactor.redact(t);
  const v = shown.after === null ? null : verdict(shown.before, shown.after, shown.withoutFix ?? undefined);
  const regressed = v?.comparison.regressed ?? [];
  const brokeSetup =
    v !== null && v.finalProblem !== null && v.baselineProblem === null && shown.before !== null;
  const conclusion: CheckConclusion =
    regressed.length > 0 || brokeSetup ? 'failure' : outcome?.outcome === 'resolved' ? 'success' : 'neutral';

  const proofs =
    v === null
      ? []
      : [...v.comparison.fixed, ...v.comparison.newPassing].filter((n) => !v.passWithoutFix.includes(n));
  const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? '' : 's'}`;
  const title =
    conclusion === 'failure'
      ? regressed.length > 0
        ? `Broke ${plural(regressed.length, 'test')} that passed before`
        : 'The change broke the test setup'
      : conclusion === 'success'
        ? `Resolved: ${plural(proofs.length, 'test')} failing before and passing now, none broken`
        : `Unverified: ${truncateEnd(redact(outcome?.reason ?? 'the run did not finish').replace(/\s+/g, ' '), 200)}`;

  const summaryLines = [
    outcome === null
      ? '**Outcome:** the run has not finished.'
      : `**Outcome:** ${outcomeIcon(outcome.outcome)} ${describeOutcome(outcome)}\n\n**Why:** ${neutralizeInline(truncateEnd(redact(outcome.reason), 2000))}`,
  ];
  if (input.trajectoryLink !== null) {
    summaryLines.push(
      `📄 The full trajectory, step by step: ${truncateEnd(redact(input.trajectoryLink), 2000)}`,
    );
  }
  summaryLines.push('Reproduce this verdict in a fresh sandbox with `issue-agent verify` (see the README).');
  const summary = fit(summaryLines.join('\n\n'), input.audience);

  // Redacted as the table's command is, so the marker never holds what the table may not show.
  const marker = testCommandMarker({
    before: shown.before === null ? null : redact(shown.before.command),
    after: shown.after === null ? null : redact(shown.after.command),
  });
  let text = '';
  for (const rows of ROW_TIERS) {
    text = renderVerification(shown.before, shown.after, {
      withoutFix: shown.withoutFix,
      noTestsReason: shown.noTestsReason,
      maxRows: rows,
      redact,
    });
    if (text.length <= CHECK_OUTPUT_LIMIT - 1000) break;
  }
  return {
    conclusion,
    title: truncateEnd(title, 250),
    summary,
    text: fit(`${marker}\n${text}`, input.audience),
    annotations: v === null ? [] : annotationsOf(shown.before, shown.after, regressed, proofs, redact),
  };
}

/** `publishable`, then cut to GitHub's limit (the cut is made inert again by a second pass). */
function fit(text: string, audience: Audience): Publishable {
  const once = publishable(text, audience);
  return once.length <= CHECK_OUTPUT_LIMIT
    ? once
    : publishable(truncateEnd(once, CHECK_OUTPUT_LIMIT - 100), audience);
}

type Run = NonNullable<ReturnType<typeof verificationOf>['after']>;

/** The tests that decide the verdict, on their files: what the change broke first, then its proof. */
function annotationsOf(
  before: Run | null,
  after: Run | null,
  regressed: readonly string[],
  proofs: readonly string[],
  redact: (t: string) => string,
): CheckAnnotation[] {
  // Where each test is: the run after the change first (its file may have moved the test).
  const placeOf = new Map<string, { readonly path: string; readonly line: number | undefined }>();
  for (const run of [after, before]) {
    if (run === null) continue;
    for (const f of factsOf(run)) {
      if (f.file !== null && safePath(f.file) && !placeOf.has(f.id))
        placeOf.set(f.id, { path: f.file, line: f.line });
    }
  }
  const out: CheckAnnotation[] = [];
  const add = (ids: readonly string[], level: CheckAnnotation['annotation_level'], what: string): void => {
    for (const id of ids) {
      if (out.length >= MAX_CHECK_ANNOTATIONS) return;
      const place = placeOf.get(id);
      if (place === undefined) continue;
      const line = place.line ?? 1;
      out.push({
        path: place.path,
        start_line: line,
        end_line: line,
        annotation_level: level,
        title: truncateEnd(redact(id), 250),
        message: `${truncateEnd(redact(id), 500)}: ${what}.${place.line === undefined ? ` ${ON_FIRST_LINE}` : ''}`,
      });
    }
  };
  add(regressed, 'failure', 'passing before this change, failing after it');
  add(proofs, 'notice', 'failing (or absent) before this change, passing after it: the proof of the fix');
  return out;
}

/** A repository-relative path GitHub can place an annotation on. */
function safePath(path: string): boolean {
  return path !== '' && !path.startsWith('/') && !/^[A-Za-z]:/.test(path) && !path.split('/').includes('..');
}
