/**
 * The trajectory as Markdown for GitHub: every step of every run, in order, split into parts that
 * each fit in one PR body or comment.
 *
 * Invariants:
 * - The trajectory is a list of units (a step's model text, one tool call with its result, a test
 *   run, a warning…). Each unit is balanced Markdown on its own: fences closed, no raw HTML, untrusted
 *   text neutralised. Parts are cut only between units, so no part ends inside a fenced block or a
 *   tag, and each part is wrapped in its own `<details>`.
 * - Every unit is bounded in size (truncation limits per field), and a unit that still does not fit
 *   an empty part is replaced by a one-line note: packing always terminates within the budget.
 * - Every step keeps its header in every detail level: the parts together name every step. When the
 *   whole does not fit in the wanted number of parts, outputs and texts are shortened (DETAIL_LEVELS)
 *   before more parts are used; the least detailed level may still need more parts than wanted.
 * - Text is redacted before it is truncated (a secret cut in two matches nothing) and after terminal
 *   escapes are stripped (a colour code inside a token would hide it).
 */
import type { AgentEvent, BaseState, EventOf } from '../events/schema.js';
import { stripAnsi } from '../testing/parse-test-output.js';
import { toolArgument } from '../events/tool-argument.js';
import { contextEditLine } from '../events/context-edit.js';
import {
  balanceFences,
  blockquote,
  byteLength,
  codeSpan,
  fenced,
  formatDuration,
  formatInt,
  formatUsd,
  neutralizeInline,
  neutralizeProse,
  truncateEnd,
  truncateInline,
  truncateMiddle,
} from './markdown.js';
import { describeOutcome, outcomeIcon } from './outcome-words.js';
import type { Redactor } from './redact.js';

/** One run of the agent as published; a pull request may carry several (rounds). */
export interface PublishedRun {
  readonly base: BaseState;
  readonly events: readonly AgentEvent[];
  /** Shown as the round's heading when there is more than one run (e.g. "Initial fix", "Review by @x"). */
  readonly label: string;
}

export interface TrajectoryUnit {
  readonly markdown: string;
  /** 1-based index of the run. */
  readonly round: number;
  /** The step the unit belongs to; 0 before the first model turn. */
  readonly step: number;
  /** True for a unit a reader can start at without context (a step header or a round header). */
  readonly startsStep: boolean;
}

export interface TrajectoryDetail {
  /** Characters of a tool's output shown (head + tail); 0 shows only its size. */
  readonly outputChars: number;
  /** Characters of the model's text per step. */
  readonly textChars: number;
  /** Test names listed per test run. */
  readonly names: number;
  /** Characters of a tool call's short argument. */
  readonly argumentChars: number;
}

/** From most to least detailed; the renderer takes the first that fits in the wanted number of parts. */
export const DETAIL_LEVELS: readonly TrajectoryDetail[] = [
  { outputChars: 3000, textChars: 4000, names: 10, argumentChars: 160 },
  { outputChars: 1500, textChars: 2000, names: 10, argumentChars: 120 },
  { outputChars: 600, textChars: 1000, names: 5, argumentChars: 100 },
  { outputChars: 200, textChars: 400, names: 3, argumentChars: 80 },
  { outputChars: 0, textChars: 160, names: 0, argumentChars: 60 },
];

function testCounts(s: EventOf<'test_run'>['summary']): string {
  if (s.passed === null && s.failed === null && s.skipped === null) return 'counts unknown';
  const n = (x: number | null): string => (x === null ? '?' : String(x));
  return `${n(s.passed)} passed, ${n(s.failed)} failed, ${n(s.skipped)} skipped`;
}

function nameList(names: readonly string[], max: number, redactor: Redactor): string | null {
  if (names.length === 0 || max === 0) return null;
  const shown = names.slice(0, max).map((n) => codeSpan(truncateInline(redactor.redact(n), 150)));
  const more = names.length > max ? ` and ${names.length - max} more` : '';
  return `Failing: ${shown.join(', ')}${more}`;
}

function status(o: EventOf<'observation'>): string {
  if (o.killed !== undefined && o.killed !== null) return `killed (${o.killed})`;
  if (o.exitCode !== undefined && o.exitCode !== null) return `exit ${o.exitCode}`;
  return o.isError ? 'error' : 'ok';
}

/** A run's first line: its model, sandbox, base and test command. */
function runFacts(b: PublishedRun['base'], redactor: Redactor): string {
  return [
    `model ${codeSpan(b.model)}`,
    `sandbox ${codeSpan(b.sandbox)}`,
    `base ${codeSpan(b.workspace.baseCommit.slice(0, 12))}`,
    `tests ${b.testCommand === null ? 'none detected' : codeSpan(truncateEnd(redactor.redact(b.testCommand), 200))}`,
  ].join(' · ');
}

/** A model turn: its cost line, then what it said (`shown` redacts and bounds the text). */
function turnMarkdown(e: EventOf<'model_response'>, title: string, shown: (said: string) => string): string {
  const tokensIn = e.usage.inputTokens + e.usage.cacheReadTokens + e.usage.cacheWriteTokens;
  const head = `${title} · ${formatInt(tokensIn)} tokens in, ${formatInt(e.usage.outputTokens)} out · ${formatUsd(e.usd)} · ${formatDuration(e.latencyMs)}`;
  const said = e.content
    .filter((c) => c.type === 'text')
    .map((c) => c.text.trim())
    .filter((t) => t !== '')
    .join('\n\n');
  if (said !== '') return `${head}\n\n${blockquote(balanceFences(neutralizeProse(shown(said))))}`;
  return e.content.some((c) => c.type === 'tool_use') ? head : `${head}\n\n*(no text and no tool call)*`;
}

/** Renders one run's events as units. */
function runUnits(
  run: PublishedRun,
  round: number,
  rounds: number,
  detail: TrajectoryDetail,
  redactor: Redactor,
): TrajectoryUnit[] {
  const units: TrajectoryUnit[] = [];
  let step = 0;
  const push = (markdown: string, startsStep = false): void => {
    units.push({ markdown, round, step, startsStep });
  };
  const text = (raw: string, max: number): string => truncateMiddle(redactor.redact(raw), max);
  const inline = (raw: string, max: number): string =>
    neutralizeInline(truncateEnd(redactor.redact(raw), max));

  const facts = runFacts(run.base, redactor);
  push(rounds > 1 ? `#### Round ${round}: ${inline(run.label, 200)}\n\n${facts}` : `Run: ${facts}`, true);

  const pending = new Map<string, EventOf<'action'>>();
  const callLine = (tool: string, input: unknown): string => {
    const arg = truncateEnd(redactor.redact(toolArgument(tool, input)), detail.argumentChars);
    return `→ ${codeSpan(tool)}${arg.trim() === '' ? '' : ` ${codeSpan(arg)}`}`;
  };
  const flushPending = (): void => {
    for (const a of pending.values()) {
      push(`${callLine(a.tool, a.input)} · no result recorded (the run stopped during this call)`);
    }
    pending.clear();
  };

  for (const e of run.events) {
    switch (e.kind) {
      case 'model_response': {
        const nested = e.parent !== undefined;
        if (!nested) {
          flushPending();
          step += 1;
        }
        // A sub-agent's turn (delegate) is nested under the step that called it, not a step of its own.
        push(
          turnMarkdown(e, nested ? '↳ 🔎 *Explorer*' : `**Step ${step}**`, (said) =>
            text(said, detail.textChars),
          ),
          true,
        );
        if (e.contextEdits !== undefined && e.contextEdits.length > 0)
          push(`✂️ ${contextEditLine(e.contextEdits)}`);
        break;
      }
      case 'action':
        pending.set(e.toolUseId, e);
        break;
      case 'observation': {
        const action = pending.get(e.toolUseId);
        pending.delete(e.toolUseId);
        const line = `${e.parent !== undefined ? '↳ ' : ''}${callLine(e.tool, action?.input)} · ${status(e)} · ${formatDuration(e.durationMs)}`;
        const parts = [line];
        const summary = e.testSummary;
        const output = stripAnsi(e.fullContent ?? e.content);
        if (summary !== undefined) {
          parts.push(`Tests: ${testCounts(summary)}`);
          const failing = nameList(summary.failedNames, detail.names, redactor);
          if (failing !== null) parts.push(failing);
        }
        // Parsed test counts stand for the test output, and a finish summary is shown with the outcome.
        const countsKnown = summary !== undefined && (summary.passed !== null || summary.failed !== null);
        if (e.finishSummary === undefined && !countsKnown) {
          if (output.trim() === '') parts.push('*(no output)*');
          else if (detail.outputChars === 0)
            parts.push(`*(${formatInt(output.length)} characters of output)*`);
          else parts.push(fenced(text(output, detail.outputChars)));
        }
        push(parts.join('\n\n'));
        break;
      }
      case 'test_run': {
        const phase =
          e.phase === 'baseline'
            ? 'Tests before any change (baseline)'
            : e.phase === 'final'
              ? e.sandbox === 'fresh'
                ? 'Tests after the change (final, in a fresh sandbox)'
                : 'Tests after the change (final)'
              : e.phase === 'without_fix'
                ? e.changeFiles?.total === 0
                  ? 'The tests again on the code before the change (without the fix; the change has no test file)'
                  : "The change's test files on the code before it (without the fix)"
                : 'Tests';
        const result =
          e.killed !== null ? `killed (${e.killed})` : `exit ${e.exitCode === null ? '?' : e.exitCode}`;
        const parts = [
          `🧪 **${phase}** · ${codeSpan(truncateEnd(redactor.redact(e.command), detail.argumentChars))} · ${result} · ${testCounts(e.summary)} · ${formatDuration(e.durationMs)}`,
        ];
        const failing = nameList(e.summary.failedNames, detail.names, redactor);
        if (failing !== null) parts.push(failing);
        push(parts.join('\n\n'));
        break;
      }
      case 'model_retry':
        push(
          `↻ Model call retried (attempt ${e.attempt}${e.status === null ? '' : `, HTTP ${e.status}`}, waited ${formatDuration(e.waitMs)}): ${inline(e.reason, 300)}`,
        );
        break;
      case 'warning':
        push(`⚠️ **Warning** ${codeSpan(e.code)}: ${inline(e.message, 500)}`);
        break;
      case 'syntax_check':
        push(
          e.failures.length === 0
            ? `🔎 Syntax check: ${e.checked} changed file${e.checked === 1 ? '' : 's'} parse.`
            : `⚠️ **Syntax check:** ${e.failures.map((f) => `${codeSpan(f.path)} does not parse (${inline(`${f.checker}: ${f.message}`, 300)})`).join('; ')}`,
        );
        break;
      case 'guidance_added':
        push(
          `📖 Repository instructions added (working on ${codeSpan(e.touched)}): ${e.paths.map(codeSpan).join(', ')}`,
        );
        break;
      case 'condensation':
        push(condensedLine(e, inline));
        break;
      case 'context_edited':
        push(`✂️ ${contextEditLine(e.edits)}`);
        break;
      case 'checkpoint':
        push(`📌 Checkpoint: ${e.filesChanged} file${e.filesChanged === 1 ? '' : 's'} changed so far.`);
        break;
      case 'run_resumed':
        push('⏯️ The run was interrupted and resumed from its event log.');
        break;
      case 'round_started':
        push(
          `💬 **A new round:** @${inline(e.by, 100)} answered the agent’s question: ${inline(e.text, 2000)}`,
        );
        break;
      case 'note':
        push(`📝 ${inline(e.text, 2000)}`);
        break;
      case 'outcome':
        flushPending();
        push(
          `🏁 **Outcome** · ${outcomeIcon(e.outcome)} ${describeOutcome(e)}\n\nReason: ${inline(e.reason, 1000)}`,
        );
        break;
    }
  }
  flushPending();
  return units;
}

/** Every run's units, in order. */
export function trajectoryUnits(
  runs: readonly PublishedRun[],
  detail: TrajectoryDetail,
  redactor: Redactor,
): TrajectoryUnit[] {
  return runs.flatMap((run, i) => runUnits(run, i + 1, runs.length, detail, redactor));
}

export interface PackOptions {
  /** Bytes available for trajectory units in the first part (the PR body after its other sections). */
  readonly firstCapacity: number;
  /** Bytes available for units in each later part (a comment). */
  readonly capacity: number;
}

/** Separator between units. */
const GAP = '\n\n';

/**
 * Greedy packing in order: a part takes units while they fit. The first part may stay empty when
 * even the first unit does not fit there; a unit larger than `capacity` must not be passed in.
 */
export function packUnits(units: readonly TrajectoryUnit[], options: PackOptions): TrajectoryUnit[][] {
  const parts: TrajectoryUnit[][] = [[]];
  let used = 0;
  let capacity = options.firstCapacity;
  for (const unit of units) {
    const size = byteLength(unit.markdown) + GAP.length;
    let current = parts[parts.length - 1] ?? [];
    if (used + size > capacity && (current.length > 0 || parts.length === 1)) {
      current = [];
      parts.push(current);
      used = 0;
      capacity = options.capacity;
    }
    current.push(unit);
    used += size;
  }
  return parts;
}

/** The line opening a part that starts in the middle of a step. */
function continuation(unit: TrajectoryUnit, rounds: number): string | null {
  if (unit.startsStep) return null;
  const where = unit.step === 0 ? 'the start of the run' : `step ${unit.step}`;
  return `*(continued: ${where}${rounds > 1 ? ` of round ${unit.round}` : ''})*`;
}

/** Upper bound, in bytes, of everything a part adds around its units. */
export const PART_OVERHEAD = 400;

export function wrapPart(
  units: readonly TrajectoryUnit[],
  index: number,
  total: number,
  rounds: number,
  marker: string | null,
): string {
  const title = total === 1 ? 'Trajectory' : `Trajectory (part ${index} of ${total})`;
  const first = units[0];
  const cont = first === undefined ? null : continuation(first, rounds);
  const blocks = [
    ...(marker === null ? [] : [marker]),
    `<details>\n<summary>${title}</summary>`,
    ...(cont === null ? [] : [cont]),
    ...units.map((u) => u.markdown),
    '</details>',
  ];
  return `${blocks.join(GAP)}\n`;
}

/** A unit too large for any part (cannot happen with DETAIL_LEVELS, kept as a guarantee). */
export function placeholder(unit: TrajectoryUnit): TrajectoryUnit {
  return {
    ...unit,
    markdown: `*(step ${unit.step}: an entry too large to show here; see the full trajectory)*`,
  };
}

/** A condensation: who summarised the turns, and why the model's summary was not used when it was not. */
function condensedLine(e: EventOf<'condensation'>, inline: (raw: string, max: number) => string): string {
  const cost = e.call === undefined ? '' : `, ${formatUsd(e.call.usd)}`;
  const by =
    e.method === 'model'
      ? ` (by the model${cost})`
      : e.fallback !== undefined
        ? ` (one line per step: the model's summary was not used, ${inline(e.fallback, 300)}${cost})`
        : '';
  return `🗜️ Context condensed: ${e.condensedTurns} earlier turns were summarised for the model${by}.`;
}
