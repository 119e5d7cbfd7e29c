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
 * - The reproduction runs the base's test command (never one read from the record or the head).
 *   The command a record ran is read only from the marker the check-run renderer writes as the
 *   first line of its text (`recordedCommands`); a record whose command is not the one reproduced,
 *   or that does not say, never "matches", whatever its rows.
 * - What the texts quote of the repository (test names, the command) is shown as code, never as
 *   markdown; callers still pass everything through `publishable`.
 */
import { codeSpan, neutralizeInline, truncateEnd } from './markdown.js';

export type Mark = '✅' | '❌' | '—';
export type Row = readonly [Mark, Mark];

/** The start of the `external_id` of a check run that a reproduction made (see the invariants). */
export const VERIFY_EXTERNAL_ID = 'verify-';

/**
 * The per-test rows of a rendered table: name (as shown) → before and after. A row is one `\n`
 * line; `.` also takes the other line separators (`s`), which a test name may hold and a code span
 * keeps: without it such a test's row would be dropped from both tables, and a test that differs
 * would go unseen.
 */
export function rowsOf(table: string): Map<string, [Mark, Mark]> {
  const rows = new Map<string, [Mark, Mark]>();
  for (const line of table.split('\n')) {
    const m = /^\| (.+) \| (✅|❌|—) \| (✅|❌|—) \|$/s.exec(line);
    if (m === null) continue;
    rows.set((m[1] ?? '').replace(/^(`+) ?(.*?) ?\1$/s, '$2'), [m[2] as Mark, m[3] as Mark]);
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

/**
 * The test commands a recorded verdict ran, as its check run says them in the one place only the
 * renderer writes: a hidden marker that is the first line of the check run's `text`
 * (`testCommandMarker`, emitted by check-run.ts). Commands are percent-encoded, so the marker is one
 * line and no command can end it early. Nothing below the first line is read: test names, output
 * and file names the pull request chooses are rendered further down (and made inert there), so
 * none of them can stand in for the command, whatever line separator it holds.
 */
export interface RecordedCommands {
  /** The baseline's command (the base, before the change), or null when no baseline ran. */
  readonly before: string | null;
  /** The final run's command (the change), or null when no final run was made. */
  readonly after: string | null;
}

/** The marker recording `commands`, as the first line of a check run's text. */
export function testCommandMarker(commands: RecordedCommands): string {
  const value = (c: string | null): string => (c === null ? '' : encodeURIComponent(c));
  return `<!-- issue-agent:testcommand before=${value(commands.before)} after=${value(commands.after)} -->`;
}

const TEST_COMMAND_MARKER = /^<!-- issue-agent:testcommand before=(\S*) after=(\S*) -->\r?$/;

/**
 * The commands a recorded verdict ran, read from its check run's text by `testCommandMarker`'s
 * marker on the first line; null when the first line is not one (a check run made before the
 * marker existed, or not by this renderer).
 */
export function recordedCommands(text: string): RecordedCommands | null {
  const nl = text.indexOf('\n');
  const m = TEST_COMMAND_MARKER.exec(nl === -1 ? text : text.slice(0, nl));
  if (m === null) return null;
  const decode = (v: string): string | null | undefined => {
    if (v === '') return null;
    try {
      return decodeURIComponent(v);
    } catch {
      return undefined;
    }
  };
  const before = decode(m[1] ?? '');
  const after = decode(m[2] ?? '');
  if (before === undefined || after === undefined || (before === null && after === null)) return null;
  return { before, after };
}

/**
 * Why the recorded verdict is not the proof of `command` (the base's, which the reproduction ran),
 * in words (commands as code); null when it ran that command. A record that does not say what it
 * ran cannot be shown to be the same proof, so it does not match either.
 */
export function commandMismatch(
  recorded: RecordedCommands | null,
  command: string,
  source: string,
): string | null {
  const cmd = (c: string): string => codeSpan(truncateEnd(c, 200));
  const ours = `${cmd(command)} (${neutralizeInline(truncateEnd(source, 200))})`;
  if (recorded === null)
    return `the recorded verdict does not say which test command it ran (its check run's text does not start with the marker the renderer writes), so it cannot be shown to be the proof of ${ours}`;
  const ran = [...new Set([recorded.before, recorded.after].filter((c) => c !== null))];
  if (ran.every((c) => c === command)) return null;
  return `the recorded verdict ran ${ran.map(cmd).join(' then ')}, not ${ours}`;
}

/** What a reproduction found, as the check run and the reply say it. */
export interface ReproductionResult {
  readonly base: string;
  readonly head: string;
  /** The command both runs used: the base's (or the one given to the CLI), never the record's. */
  readonly command: string;
  /** Where `command` came from, in words (e.g. "detected on the base: package.json scripts.test"). */
  readonly commandSource: string;
  /** What the recorded verdict says it ran (its marker), or null (nothing recorded, or no marker). */
  readonly recordedCommands: RecordedCommands | null;
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

/** A recorded verdict matches only when it ran the same command and every row is the same. */
export function reproductionVerdict(r: ReproductionResult): ReproductionVerdict {
  if (r.recordedOn === null) return 'unrecorded';
  return r.differ.length === 0 && mismatchOf(r) === null ? 'matches' : 'differs';
}

/** Why the record's command is not the one reproduced, or null (see commandMismatch). */
export function mismatchOf(r: ReproductionResult): string | null {
  return r.recordedOn === null ? null : commandMismatch(r.recordedCommands, r.command, r.commandSource);
}

const short = (sha: string): string => sha.slice(0, 12);
const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? '' : 's'}`;

/** The check run title's words for the result (a title made by a reproduction, or a suffix). */
export function reproductionTitle(r: ReproductionResult): string {
  switch (reproductionVerdict(r)) {
    case 'matches':
      return `Reproduced: matches the verdict recorded on ${short(r.recordedOn ?? '')}`;
    case 'differs': {
      const on = `the verdict recorded on ${short(r.recordedOn ?? '')}`;
      const tests = `${plural(r.differ.length, 'test')} ${r.differ.length === 1 ? 'differs' : 'differ'}`;
      if (mismatchOf(r) === null) return `Not reproduced: ${tests} from ${on}`;
      return r.differ.length === 0
        ? `Not reproduced: the test command is not the one of ${on}`
        : `Not reproduced: the test command is not the one of ${on}, and ${tests}`;
    }
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
    `Asked by ${codeSpan(r.by)}: the tests of the base ${codeSpan(short(r.base))} and of the head ${codeSpan(short(r.head))} were run again, each in a fresh sandbox (${codeSpan(r.sandbox)}), with ${codeSpan(truncateEnd(r.command, 200))} (${neutralizeInline(truncateEnd(r.commandSource, 200))}).`,
    '',
    verdict === 'matches'
      ? `✅ **Matches** the verdict recorded on ${codeSpan(short(r.recordedOn ?? ''))}: every test has the same row.`
      : verdict === 'differs'
        ? differsLines(r)
        : '➖ No verdict was recorded on this change (no **Issue Agent** check run of mine on its commits) to compare with.',
  ];
  return lines.join('\n');
}

/** The "differs" paragraph: the command first (it decides what the rows mean), then the rows. */
function differsLines(r: ReproductionResult): string {
  const mismatch = mismatchOf(r);
  const lines = [`❌ **Differs** from the verdict recorded on ${codeSpan(short(r.recordedOn ?? ''))}:`];
  if (mismatch !== null) lines.push('', `- **Test command:** ${mismatch}.`);
  if (r.differ.length > 0) lines.push('', differenceList(r.differ));
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
