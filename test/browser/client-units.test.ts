import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseAnsi, stripAnsi } from '../../src/server/web/ansi.js';
import { classifyDiff, diffFiles, editAsDiff } from '../../src/server/web/diff.js';
import { countLines, formatDuration, formatTokens, formatUsd } from '../../src/server/web/format.js';
import { StepGrouper } from '../../src/server/web/steps.js';
import type { AgentEvent } from '../../src/events/schema.js';

const ESC = '\u001b';

describe('browser client: ANSI', () => {
  it('turns SGR colours into classes from a fixed set and drops every other escape', () => {
    const spans = parseAnsi(
      `${ESC}[1;31mFAIL${ESC}[0m plain ${ESC}[38;5;10mbright${ESC}[39m ${ESC}[38;2;1;2;3mtrue${ESC}[m`,
    );
    assert.deepEqual(spans, [
      { text: 'FAIL', classes: 'a-fg-1 a-b' },
      { text: ' plain ', classes: '' },
      { text: 'bright', classes: 'a-fg-10' },
      { text: ' true', classes: '' },
    ]);
    for (const s of spans)
      assert.match(s.classes, /^(a-(fg|bg)-\d{1,2}|a-[bdiu])?( a-(fg|bg)-\d{1,2}| a-[bdiu])*$/);
  });

  it('removes cursor moves, OSC hyperlinks and titles, and control characters', () => {
    const text = `${ESC}[2K${ESC}[1Gok ${ESC}]8;;https://x.test\u0007link${ESC}]8;;\u0007 ${ESC}]0;title${ESC}\\done\u0000\u0008${ESC}`;
    assert.equal(stripAnsi(text), 'ok link done');
  });

  it('a bare carriage return overwrites the line; CRLF is a newline', () => {
    assert.equal(stripAnsi('10%\r50%\r100%\nnext\r\nlast'), '100%\nnext\nlast');
  });

  it('markup in the text stays text (the spans carry it verbatim)', () => {
    const spans = parseAnsi(`${ESC}[31m<img src=x onerror=alert(1)>${ESC}[0m`);
    assert.deepEqual(spans, [{ text: '<img src=x onerror=alert(1)>', classes: 'a-fg-1' }]);
  });
});

describe('browser client: diffs', () => {
  it('classifies a git diff into file, hunk, added, removed and context lines', () => {
    const diff =
      'diff --git a/src/a.js b/src/a.js\nindex 1..2 100644\n--- a/src/a.js\n+++ b/src/a.js\n@@ -1,2 +1,2 @@\n-old\n+new\n same\n';
    assert.deepEqual(
      classifyDiff(diff).map((l) => l.kind),
      ['file', 'meta', 'file', 'file', 'hunk', 'del', 'add', 'ctx'],
    );
    assert.deepEqual(diffFiles(diff), ['src/a.js']);
  });

  it('shows editor calls as diffs: str_replace, create, insert; nothing for view', () => {
    const replace = editAsDiff({ command: 'str_replace', path: 'a.js', old_str: 'x\ny', new_str: 'z' });
    assert.deepEqual(
      replace?.filter((l) => l.kind === 'del' || l.kind === 'add').map((l) => l.text),
      ['-x', '-y', '+z'],
    );
    assert.equal(
      editAsDiff({ command: 'create', path: 'b.js', file_text: 'one\ntwo\n' })?.filter(
        (l) => l.kind === 'add',
      ).length,
      2,
    );
    assert.match(
      editAsDiff({ command: 'insert', path: 'c.js', insert_line: 3, new_str: 'q' })?.[2]?.text ?? '',
      /after line 3/,
    );
    assert.equal(editAsDiff({ command: 'view', path: 'a.js' }), null);
    assert.equal(editAsDiff('not an object'), null);
  });
});

describe('browser client: formats', () => {
  it('formats tokens, dollars, durations and line counts', () => {
    assert.equal(formatTokens(950), '950');
    assert.equal(formatTokens(12_345), '12.3k');
    assert.equal(formatTokens(4_560_000), '4.56M');
    assert.equal(formatUsd(0.0123), '$0.012');
    assert.equal(formatUsd(0.001), '$0.0010');
    assert.equal(formatDuration(850), '850 ms');
    assert.equal(formatDuration(125_000), '2m 05s');
    assert.equal(formatDuration(null), '—');
    assert.equal(countLines('a\nb\n'), 2);
    assert.equal(countLines(''), 0);
  });
});

const usage = { inputTokens: 100, outputTokens: 10, cacheReadTokens: 50, cacheWriteTokens: 0 };
let nextId = 1;
const at = (s: number): string => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();
/** An event without its id (distributive over the union, so each kind keeps its own fields). */
type Draft = AgentEvent extends infer E ? (E extends AgentEvent ? Omit<E, 'id'> : never) : never;
function ev(e: Draft): AgentEvent {
  return { ...e, id: nextId++ };
}

describe('browser client: steps', () => {
  it('groups events into steps with calls joined to their results and running totals', () => {
    nextId = 1;
    const events: AgentEvent[] = [
      ev({
        kind: 'test_run',
        ts: at(0),
        phase: 'baseline',
        command: 'npm test',
        exitCode: 1,
        killed: null,
        durationMs: 5,
        summary: { runner: 'node', passed: 1, failed: 1, skipped: 0, failedNames: ['a'], passedNames: ['b'] },
        output: '',
        outputBytes: 0,
      }),
      ev({
        kind: 'model_response',
        ts: at(2),
        model: 'm',
        requestId: null,
        content: [
          { type: 'text', text: 'look' },
          { type: 'tool_use', id: 't1', name: 'bash', input: { command: 'ls' } },
        ],
        stopReason: 'tool_use',
        usage,
        usd: 0.5,
        latencyMs: 900,
        attempts: 1,
        promptTokensEstimate: 1,
      }),
      ev({ kind: 'action', ts: at(2), toolUseId: 't1', tool: 'bash', input: { command: 'ls' } }),
      ev({
        kind: 'observation',
        ts: at(3),
        toolUseId: 't1',
        tool: 'bash',
        isError: false,
        content: 'x',
        exitCode: 0,
        killed: null,
        durationMs: 1000,
      }),
      ev({ kind: 'run_resumed', ts: at(100), pid: 1 }),
      ev({
        kind: 'model_response',
        ts: at(104),
        model: 'm',
        requestId: null,
        content: [{ type: 'tool_use', id: 't2', name: 'finish', input: { summary: 'done' } }],
        stopReason: 'tool_use',
        usage,
        usd: 0.25,
        latencyMs: 900,
        attempts: 1,
        promptTokensEstimate: 1,
      }),
      ev({ kind: 'action', ts: at(104), toolUseId: 't2', tool: 'finish', input: { summary: 'done' } }),
    ];
    const g = new StepGrouper();
    for (const e of events) g.add(e);
    // A repeat (a stream replaying what a page brought) changes nothing.
    assert.equal(g.add(events[2] as AgentEvent), null);
    assert.deepEqual(
      g.steps.map((s) => [
        s.index,
        s.items.map((i) =>
          i.kind === 'call'
            ? `${i.tool}:${i.observation === null ? 'pending' : 'done'}`
            : i.kind === 'sub'
              ? `sub:${i.entries.length}`
              : i.event.kind,
        ),
      ]),
      [
        [0, ['test_run']],
        [1, ['bash:done', 'run_resumed']],
        [2, ['finish:pending']],
      ],
    );
    const last = g.steps[2];
    assert.ok(last);
    assert.equal(last.totals.tokens, 320);
    assert.equal(last.totals.usd, 0.75);
    // 3 s before the resume and 4 s after it: the gap while the run was down does not count.
    assert.equal(last.totals.elapsedMs, 7000);
    assert.equal(g.steps[1]?.durationMs, 3000);
    assert.equal(g.steps[2]?.durationMs, 4000);
  });
});
