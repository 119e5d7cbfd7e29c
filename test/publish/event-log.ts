// Event logs built by hand for the publishing tests. Every event goes through the real zod schemas,
// so a log here is one the agent could have written.
import {
  agentEvent,
  baseState,
  SCHEMA_VERSION,
  type AgentEvent,
  type BaseState,
  type NewEvent,
} from '../../src/events/schema.js';
import { DEFAULT_LIMITS } from '../../src/config/agent-env.js';

export function makeBase(overrides: Partial<BaseState> = {}): BaseState {
  return baseState.parse({
    schemaVersion: SCHEMA_VERSION,
    conversationId: 'conv-1',
    createdAt: '2025-01-01T00:00:00.000Z',
    task: { title: 'Parser crashes on empty input', body: 'b', instructions: [], source: 'octo/repo#7' },
    workspace: { path: '/w', baseCommit: 'a'.repeat(40), baseTree: 'b'.repeat(40) },
    model: 'claude-sonnet-4-6',
    sandbox: 'docker',
    testCommand: 'npm test',
    testCommandSource: 'package.json scripts.test',
    limits: DEFAULT_LIMITS,
    ...overrides,
  });
}

export interface TestCounts {
  passed: number | null;
  failed: number | null;
  skipped?: number | null;
  passedNames?: string[];
  failedNames?: string[];
}

export class EventLog {
  readonly events: AgentEvent[] = [];
  private clock = Date.parse('2025-01-01T00:00:00.000Z');
  private uses = 0;

  add(e: NewEvent, advanceMs = 1000): AgentEvent {
    this.clock += advanceMs;
    const event = agentEvent.parse({
      ...e,
      id: this.events.length + 1,
      ts: new Date(this.clock).toISOString(),
    });
    this.events.push(event);
    return event;
  }

  testRun(phase: 'baseline' | 'agent' | 'final', c: TestCounts, exitCode?: number): AgentEvent {
    return this.add({
      kind: 'test_run',
      phase,
      command: 'npm test',
      exitCode: exitCode ?? ((c.failed ?? 0) > 0 ? 1 : 0),
      killed: null,
      durationMs: 4200,
      summary: {
        runner: 'node',
        passed: c.passed,
        failed: c.failed,
        skipped: c.skipped ?? 0,
        passedNames: c.passedNames ?? [],
        failedNames: c.failedNames ?? [],
      },
      output: 'test output',
      outputBytes: 11,
    });
  }

  /** One model turn with text and one tool call, its action and its observation. */
  step(o: {
    text?: string;
    tool?: string;
    input?: unknown;
    output?: string;
    exitCode?: number;
    isError?: boolean;
  }): void {
    this.uses += 1;
    const id = `toolu_${this.uses}`;
    const tool = o.tool ?? 'bash';
    const input = o.input ?? { command: 'ls' };
    this.add({
      kind: 'model_response',
      model: 'claude-sonnet-4-6',
      requestId: `req_${this.uses}`,
      content: [
        ...(o.text === undefined ? [] : [{ type: 'text' as const, text: o.text }]),
        { type: 'tool_use', id, name: tool, input },
      ],
      stopReason: 'tool_use',
      usage: { inputTokens: 1200, outputTokens: 80, cacheReadTokens: 3000, cacheWriteTokens: 100 },
      usd: 0.0123,
      latencyMs: 1500,
      attempts: 1,
      promptTokensEstimate: 4300,
    });
    this.add({ kind: 'action', toolUseId: id, tool, input }, 10);
    this.add(
      {
        kind: 'observation',
        toolUseId: id,
        tool,
        isError: o.isError ?? false,
        content: o.output ?? '',
        exitCode: o.exitCode ?? 0,
        killed: null,
        durationMs: 250,
      },
      250,
    );
  }

  checkpoint(filesChanged: number, diff: string | null = null): void {
    this.add({ kind: 'checkpoint', tree: 'c'.repeat(40), diff, filesChanged });
  }

  outcome(o: Partial<Extract<NewEvent, { kind: 'outcome' }>> = {}): void {
    this.add({
      kind: 'outcome',
      outcome: 'resolved',
      reason: 'before: 1 failed; after: all passed',
      summary: 'Handled the empty input in `parse` and added a test.',
      diffStat:
        ' src/parse.ts      | 4 +++-\n test/parse.test.ts | 6 ++++++\n 2 files changed, 9 insertions(+), 1 deletion(-)\n',
      ...o,
    });
  }
}

// ---- Markdown structure checks ----

/** Removes inline code spans (a backtick run up to the next run of the same length). */
function stripCodeSpans(line: string): string {
  let out = '';
  let i = 0;
  while (i < line.length) {
    if (line[i] !== '`') {
      out += line.charAt(i);
      i += 1;
      continue;
    }
    let j = i;
    while (line[j] === '`') j += 1;
    const run = line.slice(i, j);
    let k = j;
    let close = -1;
    while (k < line.length) {
      const next = line.indexOf(run, k);
      if (next === -1) break;
      let end = next + run.length;
      if (line[end] !== '`' && line[next - 1] !== '`') {
        close = next;
        break;
      }
      while (line[end] === '`') end += 1;
      k = end;
    }
    if (close === -1) {
      out += run;
      i = j;
    } else {
      i = close + run.length;
    }
  }
  return out;
}

export interface MarkdownShape {
  /** Every fenced block is closed (fence state tracked through blockquote prefixes). */
  readonly fencesBalanced: boolean;
  /** `<details>` / `</details>` outside code nest properly and end closed. */
  readonly detailsBalanced: boolean;
  /** Text outside fenced blocks and code spans, where HTML, mentions and references are live. */
  readonly live: string;
}

export function markdownShape(md: string): MarkdownShape {
  let open: { ch: string; len: number } | null = null;
  let depth = 0;
  let detailsOk = true;
  const live: string[] = [];
  for (const raw of md.split('\n')) {
    const line = raw.replace(/^(?: {0,3}> ?)+/, '');
    const m = /^ {0,3}(`{3,}|~{3,})(.*)$/.exec(line);
    const run = m?.[1] ?? '';
    const rest = m?.[2] ?? '';
    if (open !== null) {
      if (m !== null && run.startsWith(open.ch) && run.length >= open.len && rest.trim() === '') open = null;
      continue;
    }
    if (m !== null && !(run.startsWith('`') && rest.includes('`'))) {
      open = { ch: run.charAt(0), len: run.length };
      continue;
    }
    const text = stripCodeSpans(line);
    live.push(text);
    for (const tag of text.matchAll(/<(\/?)details\b/gi)) {
      depth += tag[1] === '/' ? -1 : 1;
      if (depth < 0) detailsOk = false;
    }
  }
  return { fencesBalanced: open === null, detailsBalanced: detailsOk && depth === 0, live: live.join('\n') };
}
