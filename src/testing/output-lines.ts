import { stripAnsi } from './parse-test-output.js';

/** Lines longer than this are not matched (no tool prints a setup error that long). */
const MAX_LINE = 4096;
/** Longest line quoted from a run's output. */
const MAX_QUOTE = 200;

/**
 * A test run's output as the setup-problem rules read it (verdict.ts, python-import-problem.ts):
 * trimmed, non-empty lines without ANSI escapes; overlong lines are skipped, so every rule's cost
 * stays linear in the output.
 */
export function* outputLines(output: string): Generator<string> {
  let start = 0;
  while (start < output.length) {
    let end = output.indexOf('\n', start);
    if (end === -1) end = output.length;
    if (end - start <= MAX_LINE) {
      const line = stripAnsi(output.slice(start, end)).replace(/\r$/, '').trim();
      if (line !== '') yield line;
    }
    start = end + 1;
  }
}

/** A line as a reason quotes it: cut to 200 characters. */
export function clipLine(line: string): string {
  return line.length > MAX_QUOTE ? `${line.slice(0, MAX_QUOTE - 1)}…` : line;
}
