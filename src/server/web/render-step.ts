/**
 * DOM for one step of the run view. Everything from the log is untrusted text: it goes into text
 * nodes only (see dom.ts), and terminal colours become classes from a fixed set (ansi.ts).
 * Long outputs are cut to a head and a tail; the whole text is built only when asked for, so a
 * 1,000-step run does not build megabytes of DOM up front.
 */
import { toolArgument } from '../../events/tool-argument.js';
import { contextEditLine } from '../../events/context-edit.js';
import { parseAnsi } from './ansi.js';
import { classifyDiff, diffFiles, editAsDiff, type DiffLine } from './diff.js';
import { h, type Child } from './dom.js';
import { countLines, formatBytes, formatDuration, formatInt, formatTokens, formatUsd } from './format.js';
import { tokensOf, type Step, type StepItem, type SubAgentItem, type ToolCall } from './steps.js';
import type { EventOf } from './types.js';

/** Outputs longer than this many lines (or characters) are collapsed to a head and a tail. */
const COLLAPSE_LINES = 24;
const COLLAPSE_CHARS = 4000;
const HEAD_LINES = 10;
const TAIL_LINES = 8;
/** Test names listed before "show all". */
const NAMES_SHOWN = 10;
/** Diff lines shown before "show all". */
const DIFF_LINES_SHOWN = 80;

type TestSummary = EventOf<'test_run'>['summary'];

function record(input: unknown): Record<string, unknown> {
  return typeof input === 'object' && input !== null ? (input as Record<string, unknown>) : {};
}

/** Appends `text` to `el` as spans (colours) and text nodes. */
export function appendAnsi(el: HTMLElement, text: string): void {
  for (const span of parseAnsi(text)) {
    if (span.classes === '') el.appendChild(document.createTextNode(span.text));
    else el.appendChild(h('span', { class: span.classes }, span.text));
  }
}

function lineSlices(text: string): string[] {
  return (text.endsWith('\n') ? text.slice(0, -1) : text).split('\n');
}

/**
 * A block of terminal output: whole when short; otherwise head and tail around a button that shows
 * everything (built on click).
 */
export function outputBlock(
  text: string,
  options: { readonly label?: string; readonly className?: string } = {},
): HTMLElement {
  const pre = h('pre', { class: `output ${options.className ?? ''}`.trim() });
  const lines = countLines(text);
  if (lines <= COLLAPSE_LINES && text.length <= COLLAPSE_CHARS) {
    appendAnsi(pre, text);
    return pre;
  }
  const all = lineSlices(text);
  const head = all
    .slice(0, HEAD_LINES)
    .join('\n')
    .slice(0, COLLAPSE_CHARS / 2);
  const tail = all
    .slice(Math.max(HEAD_LINES, all.length - TAIL_LINES))
    .join('\n')
    .slice(-COLLAPSE_CHARS / 2);
  const hidden = Math.max(0, all.length - HEAD_LINES - TAIL_LINES);
  const wrap = h('div', { class: 'collapsible collapsed' });
  appendAnsi(pre, head);
  const gap = h('div', { class: 'gap' });
  const button = h(
    'button',
    {
      type: 'button',
      class: 'show-all',
      onClick: () => {
        pre.replaceChildren();
        appendAnsi(pre, text);
        wrap.classList.remove('collapsed');
        gap.remove();
        tailPre.remove();
      },
    },
    `show all (${formatInt(lines)} lines, ${formatBytes(text.length)})`,
  );
  gap.append(h('span', null, hidden > 0 ? `⋯ ${formatInt(hidden)} more lines ⋯ ` : '⋯ '), button);
  const tailPre = h('pre', { class: `output tail ${options.className ?? ''}`.trim() });
  appendAnsi(tailPre, tail);
  wrap.append(pre, gap, tailPre);
  return wrap;
}

function diffLinesInto(el: HTMLElement, lines: readonly DiffLine[]): void {
  for (const l of lines) el.appendChild(h('span', { class: `dl dl-${l.kind}` }, `${l.text}\n`));
}

/** A diff with +/- lines coloured; long diffs show their first lines and a "show all" button. */
export function diffBlock(lines: readonly DiffLine[]): HTMLElement {
  const pre = h('pre', { class: 'diff' });
  if (lines.length <= DIFF_LINES_SHOWN) {
    diffLinesInto(pre, lines);
    return pre;
  }
  diffLinesInto(pre, lines.slice(0, DIFF_LINES_SHOWN));
  const wrap = h('div', { class: 'collapsible' }, pre);
  const button = h(
    'button',
    {
      type: 'button',
      class: 'show-all',
      onClick: () => {
        diffLinesInto(pre, lines.slice(DIFF_LINES_SHOWN));
        button.remove();
      },
    },
    `show all (${formatInt(lines.length)} lines)`,
  );
  wrap.append(button);
  return wrap;
}

/** A button that builds its content the first time it is opened, then toggles it. */
function lazySection(label: string, build: () => HTMLElement): HTMLElement {
  const wrap = h('div', { class: 'lazy' });
  let content: HTMLElement | null = null;
  const button = h('button', { type: 'button', class: 'link', aria: { expanded: 'false' } }, `▸ ${label}`);
  button.addEventListener('click', () => {
    if (content === null) {
      content = build();
      wrap.appendChild(content);
    } else content.hidden = !content.hidden;
    const open = !content.hidden;
    button.textContent = `${open ? '▾' : '▸'} ${label}`;
    button.setAttribute('aria-expanded', String(open));
  });
  wrap.prepend(button);
  return wrap;
}

function counts(s: TestSummary): string {
  if (s.passed === null && s.failed === null && s.skipped === null) return 'counts unknown';
  const n = (x: number | null): string => (x === null ? '?' : formatInt(x));
  return `${n(s.passed)} passed, ${n(s.failed)} failed, ${n(s.skipped)} skipped`;
}

/** Passed and failed tests as a table, failures first; long lists show their first rows. */
export function testTable(s: TestSummary): HTMLElement {
  const rows: [string, boolean][] = [
    ...s.failedNames.map((n): [string, boolean] => [n, false]),
    ...s.passedNames.map((n): [string, boolean] => [n, true]),
  ];
  const row = ([name, ok]: [string, boolean]): HTMLTableRowElement =>
    h(
      'tr',
      { class: ok ? 'pass' : 'fail' },
      h('td', { class: 'result' }, ok ? '✓ pass' : '✗ fail'),
      h('td', { class: 'name' }, name),
    );
  const tbody = h('tbody', null, ...rows.slice(0, NAMES_SHOWN).map(row));
  const table = h(
    'table',
    { class: 'tests' },
    h(
      'caption',
      null,
      h('span', { class: 'runner' }, s.runner),
      ' · ',
      h('span', { class: 'count pass' }, `${s.passed ?? '?'} passed`),
      ', ',
      h('span', { class: `count ${(s.failed ?? 0) > 0 ? 'fail' : ''}`.trim() }, `${s.failed ?? '?'} failed`),
      ', ',
      h('span', { class: 'count' }, `${s.skipped ?? '?'} skipped`),
    ),
    h('thead', null, h('tr', null, h('th', null, 'result'), h('th', null, 'test'))),
    tbody,
  );
  if (rows.length <= NAMES_SHOWN) return table;
  const button = h(
    'button',
    {
      type: 'button',
      class: 'show-all',
      onClick: () => {
        tbody.append(...rows.slice(NAMES_SHOWN).map(row));
        button.remove();
      },
    },
    `show all ${formatInt(rows.length)} tests`,
  );
  return h('div', { class: 'collapsible' }, table, button);
}

function statusOf(o: EventOf<'observation'>): { text: string; ok: boolean } {
  if (o.killed !== undefined && o.killed !== null) return { text: `killed (${o.killed})`, ok: false };
  if (o.exitCode !== undefined && o.exitCode !== null)
    return { text: `exit ${o.exitCode}`, ok: o.exitCode === 0 };
  return o.isError ? { text: 'error', ok: false } : { text: 'ok', ok: true };
}

function renderCall(call: ToolCall): HTMLElement {
  const o = call.observation;
  // finish's summary is shown as the step's conclusion, not as an argument.
  const arg = call.tool === 'finish' ? '' : toolArgument(call.tool, call.input);
  const multiline = arg.includes('\n') || arg.length > 160;
  const status = o === null ? null : statusOf(o);
  const line = h(
    'div',
    { class: 'call-line' },
    h('span', { class: 'arrow' }, '→ '),
    h('span', { class: 'tool' }, call.tool),
    arg !== '' && !multiline ? h('code', { class: 'arg' }, arg) : null,
    status === null
      ? h('span', { class: 'status running' }, 'running…')
      : h('span', { class: `status ${status.ok ? 'ok' : 'err'}` }, status.text),
    o === null ? null : h('span', { class: 'dur' }, formatDuration(o.durationMs)),
  );
  const parts: Child[] = [line];
  if (multiline) parts.push(outputBlock(call.tool === 'bash' ? `$ ${arg}` : arg, { className: 'cmd' }));
  if (call.tool === 'editor') {
    const edit = editAsDiff(call.input);
    if (edit !== null) parts.push(diffBlock(edit));
  }
  if (call.tool === 'finish') {
    const summary = record(call.input).summary;
    if (typeof summary === 'string') parts.push(h('div', { class: 'said finish' }, summary));
  }
  if (o !== null) {
    if (o.testSummary !== undefined) parts.push(testTable(o.testSummary));
    const output = o.fullContent ?? o.content;
    const quiet =
      o.finishSummary !== undefined ||
      (call.tool === 'editor' && !o.isError && editAsDiff(call.input) !== null);
    if (output.trim() === '') parts.push(h('div', { class: 'muted' }, '(no output)'));
    else if (o.testSummary !== undefined || quiet)
      parts.push(lazySection('output', () => outputBlock(output)));
    else parts.push(outputBlock(output, o.isError ? { className: 'error' } : {}));
    if (o.fullContentFile !== undefined)
      parts.push(
        h(
          'div',
          { class: 'muted' },
          `The complete output is kept in ${o.fullContentFile} of the trajectory.`,
        ),
      );
  }
  return h(
    'div',
    { class: `item call${o?.isError === true ? ' is-error' : ''}`, data: { tool: call.tool } },
    ...parts,
  );
}

function testRunPhase(e: EventOf<'test_run'>): string {
  return e.phase === 'baseline'
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
}

export function renderItem(item: StepItem): HTMLElement {
  if (item.kind === 'call') return renderCall(item);
  if (item.kind === 'sub') return renderSubAgent(item);
  const e = item.event;
  switch (e.kind) {
    case 'test_run': {
      const result =
        e.killed !== null ? `killed (${e.killed})` : `exit ${e.exitCode === null ? '?' : e.exitCode}`;
      const ok = e.killed === null && e.exitCode === 0;
      return h(
        'div',
        { class: `item test-run phase-${e.phase}` },
        h(
          'div',
          { class: 'call-line' },
          h('span', { class: 'arrow' }, '▸ '),
          h('strong', null, testRunPhase(e)),
          h('code', { class: 'arg' }, e.command),
          h('span', { class: `status ${ok ? 'ok' : 'err'}` }, result),
          h('span', null, counts(e.summary)),
          h('span', { class: 'dur' }, formatDuration(e.durationMs)),
        ),
        testTable(e.summary),
        lazySection(`output (${formatBytes(e.outputBytes)})`, () => outputBlock(e.output)),
      );
    }
    case 'checkpoint': {
      const files = e.diff === null ? [] : diffFiles(e.diff);
      const diff = e.diff;
      return h(
        'div',
        { class: 'item checkpoint' },
        h(
          'div',
          { class: 'call-line' },
          h('span', { class: 'arrow' }, '◆ '),
          `Checkpoint: ${e.filesChanged} file${e.filesChanged === 1 ? '' : 's'} changed so far`,
          files.length > 0
            ? h(
                'span',
                { class: 'muted' },
                ` (${files.slice(0, 5).join(', ')}${files.length > 5 ? ', …' : ''})`,
              )
            : null,
        ),
        diff === null
          ? h('div', { class: 'muted' }, 'The diff was too large to keep in the event.')
          : diff === ''
            ? null
            : lazySection('diff from the base', () => diffBlock(classifyDiff(diff))),
      );
    }
    case 'model_retry':
      return h(
        'div',
        { class: 'item note retry' },
        `↻ Model call retried (attempt ${e.attempt}${e.status === null ? '' : `, HTTP ${e.status}`}, waited ${formatDuration(e.waitMs)}): `,
        e.reason,
      );
    case 'warning':
      return h('div', { class: 'item note warning' }, '⚠ Warning ', h('code', null, e.code), ': ', e.message);
    case 'syntax_check':
      return h(
        'div',
        { class: `item note ${e.failures.length > 0 ? 'warning' : 'syntax'}` },
        e.failures.length === 0
          ? `Syntax check of the changed files: ${e.checked} parse${e.unchecked > 0 ? `, ${e.unchecked} not checked` : ''}.`
          : `⚠ Syntax check: ${e.failures.length} changed file(s) do not parse: ${e.failures.map((f) => `${f.path} (${f.checker}: ${f.message})`).join('; ')}`,
      );
    case 'guidance_added':
      return h(
        'div',
        { class: 'item note guidance' },
        '📖 Repository instructions added (working on ',
        h('code', null, e.touched),
        '): ',
        e.paths.join(', '),
      );
    case 'condensation':
      return h(
        'div',
        { class: 'item note condensation' },
        `Context condensed: ${e.condensedTurns} earlier turns were summarised for the model. `,
        lazySection('summary', () => h('div', { class: 'said' }, e.summary)),
      );
    case 'context_edited':
      return h('div', { class: 'item note condensation' }, `✂ ${contextEditLine(e.edits)}`);
    case 'run_resumed':
      return h(
        'div',
        { class: 'item note resumed' },
        'The run was interrupted and resumed from its event log.',
      );
    case 'round_started':
      return h(
        'div',
        { class: 'item note round' },
        `💬 A new round: @${e.by} answered the agent’s question.`,
        h('div', { class: 'said' }, e.text),
      );
    case 'note':
      return h('div', { class: `item note note-${e.topic}` }, e.text);
    case 'outcome':
      return h(
        'div',
        { class: `item outcome outcome-${e.outcome}` },
        h(
          'div',
          { class: 'call-line' },
          h('span', { class: 'arrow' }, '■ '),
          h('strong', null, `Outcome: ${e.outcome}`),
          e.limit === undefined ? null : ` (${e.limit})`,
          e.cause === undefined ? null : ` (${e.cause})`,
        ),
        h('div', null, e.reason),
        e.summary === null ? null : h('div', { class: 'said' }, e.summary),
        e.diffStat === '' ? null : h('pre', { class: 'output' }, e.diffStat),
      );
  }
}

/**
 * The model's thinking of a turn, folded: only signed-in readers get events at all (every run route
 * answers 401 without a session or the admin token, src/server/context.ts), and a PR shows only
 * "n thinking tokens". Encrypted (redacted) thinking is named, not shown.
 */
function thinkingSection(e: EventOf<'model_response'>): HTMLElement | null {
  const blocks = e.content.filter((c) => c.type === 'thinking' || c.type === 'redacted_thinking');
  if (blocks.length === 0) return null;
  const tokens = e.thinkingTokens === undefined ? '' : `, ${formatInt(e.thinkingTokens)} tokens`;
  return lazySection(`thinking${tokens}`, () =>
    h(
      'div',
      { class: 'said thinking' },
      blocks
        .map((b) => (b.type === 'thinking' ? b.thinking.trim() : '(thinking the API returned encrypted)'))
        .join('\n\n'),
    ),
  );
}

/**
 * The model's text of a step (plain text: shown as written, never as markup), its thinking folded
 * above it and what the API cleared from its prompt below it.
 */
function modelText(e: EventOf<'model_response'>): HTMLElement | null {
  const thinking = thinkingSection(e);
  const text = modelSaid(e);
  const edits =
    e.contextEdits === undefined || e.contextEdits.length === 0
      ? null
      : h('div', { class: 'item note condensation' }, `✂ ${contextEditLine(e.contextEdits)}`);
  const parts = [thinking, text, edits].filter((p): p is HTMLElement => p !== null);
  if (parts.length <= 1) return parts[0] ?? null;
  return h('div', null, ...parts);
}

function modelSaid(e: EventOf<'model_response'>): HTMLElement | null {
  const said = e.content
    .filter((c) => c.type === 'text')
    .map((c) => c.text.trim())
    .filter((t) => t !== '')
    .join('\n\n');
  if (said === '') {
    return e.content.some((c) => c.type === 'tool_use')
      ? null
      : h('div', { class: 'muted' }, '(no text and no tool call)');
  }
  if (said.length <= COLLAPSE_CHARS) return h('div', { class: 'said' }, said);
  const div = h('div', { class: 'said' }, `${said.slice(0, COLLAPSE_CHARS / 2)}…`);
  const button = h(
    'button',
    {
      type: 'button',
      class: 'show-all',
      onClick: () => {
        div.textContent = said;
        button.remove();
      },
    },
    `show all (${formatInt(said.length)} characters)`,
  );
  return h('div', null, div, button);
}

export function stepTitle(step: Step): string {
  return step.index === 0 ? 'Before the first step' : `Step ${step.index}`;
}

function stepTools(step: Step): string {
  const tools = step.items.filter((i): i is ToolCall => i.kind === 'call').map((c) => c.tool);
  return tools.join(' · ');
}

function stepFailed(step: Step): boolean {
  return step.items.some((i) => i.kind === 'call' && i.observation !== null && !statusOf(i.observation).ok);
}

/** The header line: what the step did and what it cost, with the running totals after it. */
export function renderStepHeaderContent(step: Step): HTMLElement[] {
  const r = step.response;
  const meta: string[] = [];
  if (r !== null) {
    const tokensIn = r.usage.inputTokens + r.usage.cacheReadTokens + r.usage.cacheWriteTokens;
    meta.push(
      `${formatTokens(tokensIn)} in / ${formatTokens(r.usage.outputTokens)} out`,
      formatUsd(r.usd),
      `model ${formatDuration(r.latencyMs)}`,
    );
  }
  meta.push(`step ${formatDuration(step.durationMs)}`);
  const pending = step.items.some((i) => i.kind === 'call' && i.observation === null);
  return [
    h('span', { class: 'step-tools' }, stepTools(step)),
    ...(pending
      ? [h('span', { class: 'status running' }, 'running…')]
      : stepFailed(step)
        ? [h('span', { class: 'status err' }, 'error')]
        : []),
    h('span', { class: 'step-meta' }, meta.join(' · ')),
    h(
      'span',
      { class: 'step-totals', title: 'running totals after this step' },
      `Σ ${formatTokens(step.totals.tokens)} tokens · ${formatUsd(step.totals.usd)} · ${formatDuration(step.totals.elapsedMs)}`,
    ),
  ];
}

export function renderModelText(step: Step): HTMLElement | null {
  return step.response === null ? null : modelText(step.response);
}

/** A delegate call's sub-agent: its turns and tool calls (paired by the StepGrouper), nested and folded. */
function renderSubAgent(item: SubAgentItem): HTMLElement {
  const rows: HTMLElement[] = [];
  let turns = 0;
  let calls = 0;
  let tokens = 0;
  let usd = 0;
  for (const e of item.entries) {
    if (e.kind === 'call') {
      calls++;
      rows.push(renderCall(e));
      continue;
    }
    turns++;
    tokens += tokensOf(e);
    usd += e.usd;
    const said = modelText(e);
    if (said !== null) rows.push(said);
  }
  return h(
    'details',
    { class: 'item sub-agent' },
    h(
      'summary',
      null,
      `🔎 Explorer (delegate): ${turns} turn${turns === 1 ? '' : 's'}, ${calls} tool call${calls === 1 ? '' : 's'}, ${tokens.toLocaleString('en')} tokens, $${usd.toFixed(4)}`,
    ),
    h('div', { class: 'nested' }, ...rows),
  );
}
