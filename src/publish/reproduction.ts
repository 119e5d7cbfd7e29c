/**
 * A reproduced verdict, compared with the one recorded on the change (`issue-agent verify`, and
 * `@agent verify` in the App): the per-test rows of two tables rendered by verification.ts, read
 * back and compared row by row, and the words the check run and the reply say about it. Pure.
 *
 * Invariants:
 * - Rows are compared by the test's name as the table shows it; a test in one table only differs.
 * - A check run made by a reproduction carries an `external_id` starting with VERIFY_EXTERNAL_ID:
 *   it is never taken as a recorded verdict, so reproducing a change someone broke by hand keeps
 *   saying that it differs from what the agent recorded.
 * - What the texts quote of the repository (test names, the command) is shown as code, never as
 *   markdown; callers still pass everything through `publishable`.
 */
import { codeSpan, neutralizeInline, truncateEnd } from './markdown.js';

export type Mark = '✅' | '❌' | '—';
export type Row = readonly [Mark, Mark];

/** The start of the `external_id` of a check run that a reproduction made (see the invariants). */
export const VERIFY_EXTERNAL_ID = 'verify-';

/** The per-test rows of a rendered table: name (as shown) → before and after. */
export function rowsOf(table: string): Map<string, [Mark, Mark]> {
  const rows = new Map<string, [Mark, Mark]>();
  for (const line of table.split('\n')) {
    const m = /^\| (.+) \| (✅|❌|—) \| (✅|❌|—) \|$/.exec(line);
    if (m === null) continue;
    rows.set((m[1] ?? '').replace(/^(`+) ?(.*?) ?\1$/, '$2'), [m[2] as Mark, m[3] as Mark]);
  }
  return rows;
}

/** One test whose row differs: as recorded and as reproduced (undefined: not in that table). */
export interface RowDifference {
  readonly name: string;
  readonly recorded: Row | undefined;
  readonly reproduced: Row | undefined;
}

/** Each test whose row differs, in the recorded table's order, then the new ones. */
export function differences(
  recorded: ReadonlyMap<string, Row>,
  now: ReadonlyMap<string, Row>,
): RowDifference[] {
  const out: RowDifference[] = [];
  for (const name of new Set([...recorded.keys(), ...now.keys()])) {
    const a = recorded.get(name);
    const b = now.get(name);
    if (a?.[0] === b?.[0] && a?.[1] === b?.[1]) continue;
    out.push({ name, recorded: a, reproduced: b });
  }
  return out;
}

function rowWords(r: Row | undefined): string {
  return r === undefined ? 'not in the table' : `${r[0]} before, ${r[1]} after`;
}

/** A difference in words, as the CLI prints it. */
export function describeDifference(d: RowDifference): string {
  return `${d.name}: recorded ${rowWords(d.recorded)}, reproduced ${rowWords(d.reproduced)}`;
}

/** Each test whose row differs, in words. */
export function compareRows(recorded: ReadonlyMap<string, Row>, now: ReadonlyMap<string, Row>): string[] {
  return differences(recorded, now).map(describeDifference);
}

/** The command the recorded table names ("Test command: `x`", the last one when two). */
export function recordedCommand(text: string): string | null {
  const line = /^Test command: (.*)$/m.exec(text)?.[1];
  if (line === undefined) return null;
  const spans = [...line.matchAll(/(`+) ?(.*?) ?\1/g)].map((m) => m[2] ?? '');
  return spans.at(-1) ?? null;
}

/** What a reproduction found, as the check run and the reply say it. */
export interface ReproductionResult {
  readonly base: string;
  readonly head: string;
  readonly command: string;
  /** The reproduced per-test table (renderVerification's). */
  readonly table: string;
  /** The commit whose check run recorded the verdict compared with, or null when none did. */
  readonly recordedOn: string | null;
  /** The rows that differ from the recorded ones (empty: it matches, or nothing was recorded). */
  readonly differ: readonly RowDifference[];
  /** Who asked, and which sandbox backend ran it. */
  readonly by: string;
  readonly sandbox: string;
}

export type ReproductionVerdict = 'matches' | 'differs' | 'unrecorded';

export function reproductionVerdict(r: ReproductionResult): ReproductionVerdict {
  return r.recordedOn === null ? 'unrecorded' : r.differ.length === 0 ? 'matches' : 'differs';
}

const short = (sha: string): string => sha.slice(0, 12);
const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? '' : 's'}`;

/** The check run title's words for the result (a title made by a reproduction, or a suffix). */
export function reproductionTitle(r: ReproductionResult): string {
  switch (reproductionVerdict(r)) {
    case 'matches':
      return `Reproduced: matches the verdict recorded on ${short(r.recordedOn ?? '')}`;
    case 'differs':
      return `Not reproduced: ${plural(r.differ.length, 'test')} ${r.differ.length === 1 ? 'differs' : 'differ'} from the verdict recorded on ${short(r.recordedOn ?? '')}`;
    case 'unrecorded':
      return 'Reproduced: no verdict was recorded on this change to compare with';
  }
}

/** A title a reproduction suffixed earlier, back to the recorded one. */
export function recordedTitle(title: string): string {
  return title.replace(/ · (?:Reproduced|Not reproduced): [^·]*$/, '');
}

/** The differing tests as a markdown list (test names as code), at most `max` of them. */
export function differenceList(differ: readonly RowDifference[], max = 20): string {
  const lines = differ
    .slice(0, max)
    .map(
      (d) =>
        `- ${codeSpan(truncateEnd(d.name, 200))}: recorded ${rowWords(d.recorded)}; reproduced ${rowWords(d.reproduced)}`,
    );
  if (differ.length > max) lines.push(`- … and ${differ.length - max} more`);
  return lines.join('\n');
}

/**
 * The reproduction's section of a check run's summary: what was run where, and the result. A
 * summary that already starts with one (an earlier reproduction) gets it replaced, not stacked.
 */
export function reproductionSection(r: ReproductionResult, at: string): string {
  const verdict = reproductionVerdict(r);
  const lines = [
    `${SECTION_HEADING} (${neutralizeInline(at)})`,
    '',
    `Asked by ${codeSpan(r.by)}: the tests of the base ${codeSpan(short(r.base))} and of the head ${codeSpan(short(r.head))} were run again, each in a fresh sandbox (${codeSpan(r.sandbox)}), with ${codeSpan(truncateEnd(r.command, 200))}.`,
    '',
    verdict === 'matches'
      ? `✅ **Matches** the verdict recorded on ${codeSpan(short(r.recordedOn ?? ''))}: every test has the same row.`
      : verdict === 'differs'
        ? `❌ **Differs** from the verdict recorded on ${codeSpan(short(r.recordedOn ?? ''))}:\n\n${differenceList(r.differ)}`
        : '➖ No verdict was recorded on this change (no **Issue Agent** check run of mine on its commits) to compare with.',
  ];
  return lines.join('\n');
}

const SECTION_HEADING = '### Reproduced in a fresh sandbox';
const SECTION_END = '\n\n---\n\n';

/** `summary` with `section` on top, in place of an earlier reproduction's section. */
export function withReproduction(summary: string, section: string): string {
  const rest =
    summary.startsWith(SECTION_HEADING) && summary.includes(SECTION_END)
      ? summary.slice(summary.indexOf(SECTION_END) + SECTION_END.length)
      : summary;
  return `${section}${SECTION_END}${rest}`;
}
