/**
 * The pieces every console-output reader shares (parse-test-output.ts feeds each line, with ANSI
 * escapes removed and carriage returns resolved, to every reader; the one with the most evidence
 * wins).
 */
import type { RunnerKind } from './detect-test-command.js';
import type { FactList } from './test-run.js';

export interface Counts {
  passed: number | null;
  failed: number | null;
  skipped: number | null;
}

export interface ParseResult {
  readonly counts: Counts;
  readonly facts: FactList;
  /**
   * The reader saw the runner's end-of-run summary and every test it counted is in `facts`, named
   * or under a file-level fact.
   */
  readonly whole: boolean;
  /** A file that was running when the output ended (the run hung or crashed in it). */
  readonly running: string | null;
  /** Files that hung, as the output says (a timeout dump, a runner's own file timeout). */
  readonly hung: readonly string[];
}

export interface LineParser {
  readonly runner: RunnerKind;
  /** How sure the parser is that this output is its runner's: summary lines weigh most. */
  readonly evidence: number;
  feed(line: string): void;
  finish(): ParseResult;
}

/** Evidence a summary line gives: more than any number of lines a look-alike could match. */
export const STRONG = 10;

export class Tally {
  passed = 0;
  failed = 0;
  skipped = 0;
  seen = false;
}

/** Summary counts when seen, else per-test line counts when seen, else unknown. */
export function pickCounts(summary: Tally, lines: Tally): Counts {
  const source = summary.seen ? summary : lines.seen ? lines : null;
  if (source === null) return { passed: null, failed: null, skipped: null };
  return { passed: source.passed, failed: source.failed, skipped: source.skipped };
}

export function indentOf(line: string): number {
  let i = 0;
  while (i < line.length && (line[i] === ' ' || line[i] === '\t')) i++;
  return i;
}

/** "name (1.23ms)" / "name (12 ms)" / "name (0.1s)" → "name"; otherwise unchanged. */
export function stripParenDuration(text: string): string {
  const match = / \(\d+(?:\.\d+)? ?m?s\)$/.exec(text);
  return match === null ? text : text.slice(0, match.index);
}
