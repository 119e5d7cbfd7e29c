import type { AgentEvent, EventOf } from '../events/schema.js';

const MAX_LINE = 240;

function oneLine(text: string, max = MAX_LINE): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

function describeInput(tool: string, input: unknown): string {
  const o = (typeof input === 'object' && input !== null ? input : {}) as Record<string, unknown>;
  const s = (k: string): string => (typeof o[k] === 'string' ? o[k] : '');
  switch (tool) {
    case 'bash':
      return `bash \`${oneLine(s('command'), 160)}\``;
    case 'editor':
      return `editor ${s('command')} ${s('path')}`;
    case 'search':
      return `search /${oneLine(s('pattern'), 80)}/ ${s('path')}`.trimEnd();
    default:
      return tool;
  }
}

/**
 * Picks where to cut: the id of the last event before the turn that starts the kept tail. The tail
 * keeps the newest turns whose estimated size fits `keepTokens` (always at least the newest turn), so
 * tool_use / tool_result pairs are never split.
 */
export function chooseCondensationPoint(
  events: readonly AgentEvent[],
  after: number,
  keepTokens: number,
): number | null {
  const turnStarts: number[] = [];
  for (const e of events) if (e.id > after && e.kind === 'model_response') turnStarts.push(e.id);
  if (turnStarts.length < 2) return null;
  let kept = 0;
  let cut = turnStarts[turnStarts.length - 1] ?? 0;
  for (let i = turnStarts.length - 1; i >= 1; i--) {
    const start = turnStarts[i] ?? 0;
    const end = turnStarts[i + 1] ?? Number.POSITIVE_INFINITY;
    const size = events
      .filter((e) => e.id >= start && e.id < end)
      .reduce((n, e) => n + JSON.stringify(e).length / 3, 0);
    if (kept + size > keepTokens && i < turnStarts.length - 1) break;
    kept += size;
    cut = start;
  }
  return cut - 1;
}

/**
 * A deterministic digest of condensed turns: what was done, with what result, in one line per step,
 * plus the model's own notes. Deterministic on purpose: it costs no model call, replays identically,
 * and keeps what matters for the rest of the run (files touched, commands and their exit codes, test
 * results). Older detail is dropped first when the digest passes `maxChars`.
 */
export function summarizeTurns(
  events: readonly AgentEvent[],
  from: number,
  through: number,
  previous: EventOf<'condensation'> | null,
  maxChars: number,
): { summary: string; turns: number } {
  const lines: string[] = [];
  const touched = new Set<string>();
  const actions = new Map<string, string>();
  let turns = 0;
  let lastTests: string | null = null;
  for (const e of events) {
    if (e.id <= from || e.id > through) continue;
    if (e.kind === 'model_response') {
      turns += 1;
      const note = e.content.find((b) => b.type === 'text');
      if (note !== undefined && note.text.trim() !== '') lines.push(`- note: ${oneLine(note.text)}`);
    } else if (e.kind === 'action') {
      actions.set(e.toolUseId, describeInput(e.tool, e.input));
      const input = e.input as Record<string, unknown> | null;
      if (e.tool === 'editor' && typeof input?.path === 'string' && input.command !== 'view')
        touched.add(input.path);
    } else if (e.kind === 'observation') {
      const what = actions.get(e.toolUseId) ?? e.tool;
      let result: string;
      if (e.testSummary !== undefined) {
        result = oneLine(e.content.split('\n').slice(0, 2).join(' '), 160);
        lastTests = result;
      } else if (e.exitCode !== undefined && e.exitCode !== null) {
        result = `exit ${e.exitCode}: ${oneLine(e.content, 120)}`;
      } else {
        result = `${e.isError ? 'error: ' : ''}${oneLine(e.content, 120)}`;
      }
      lines.push(`- ${what} → ${result}`);
    }
  }
  const header = [
    `[harness] Context condensed: ${turns} earlier turns are summarized here; the full record is kept in the trajectory.`,
  ];
  if (previous !== null)
    header.push(`Earlier summary:\n${previous.summary.replace(/^\[harness\][^\n]*\n/, '')}`);
  if (touched.size > 0) header.push(`Files edited in the condensed turns: ${[...touched].join(', ')}`);
  if (lastTests !== null) header.push(`Last test run in the condensed turns: ${lastTests}`);
  header.push('Steps:');
  let body = lines;
  let dropped = 0;
  const size = (): number => header.join('\n').length + body.join('\n').length + 60;
  while (body.length > 0 && size() > maxChars) {
    body = body.slice(1);
    dropped += 1;
  }
  if (dropped > 0) body = [`- (${dropped} older steps omitted)`, ...body];
  let summary = `${header.join('\n')}\n${body.join('\n')}`;
  if (summary.length > maxChars) summary = `${summary.slice(0, maxChars - 1)}…`;
  return { summary, turns };
}
