import type { MessageParam } from '@anthropic-ai/sdk/resources/messages/messages';
import { reply } from '../replies.js';
import type { MessagesRequest, Policy, Reply } from '../types.js';
import { isRecord } from '../validate.js';

/**
 * How the agent's summary request begins (src/agent/condense-summary.ts says it; a real model reads
 * the instruction after it). Repeated here rather than imported: the simulator knows the agent only
 * through what it sends.
 */
export const SUMMARY_REQUEST_MARKER = '[harness] Context summary request.';

/** Whether the request asks for a summary of the conversation: its last user text begins with the marker. */
export function isSummaryRequest(request: MessagesRequest): boolean {
  const last = request.messages.at(-1);
  if (last?.role !== 'user') return false;
  const texts = textsOf(last.content);
  return texts.at(-1)?.startsWith(SUMMARY_REQUEST_MARKER) === true;
}

/**
 * Wraps a policy so that summary requests are answered with `summaryReply` and never reach it: the
 * wrapped policy's `requestIndex` counts only the other requests, so a script written for the
 * agent's turns does not change when condensation asks for summaries in between.
 */
export function answeringSummaries(policy: Policy): Policy {
  let summaries = 0;
  return (request, ctx) => {
    if (isSummaryRequest(request)) {
      summaries += 1;
      return summaryReply(request);
    }
    return policy(request, { ...ctx, requestIndex: ctx.requestIndex - summaries });
  };
}

/**
 * The summary a careful model would write, built from what the request holds: the task (the issue's
 * title in the first message), the files the agent's calls read and changed, the failing tests in
 * the last test output it saw, and, carried forward, what an earlier summary at the start of the
 * conversation recorded (files changed, failing tests). Deterministic, in the six sections asked for.
 */
export function summaryReply(request: MessagesRequest): Reply {
  const first = request.messages[0];
  const firstTexts = first === undefined ? [] : textsOf(first.content);
  const task = taskTitle(firstTexts.join('\n'));
  const earlier = firstTexts.find((t) => t.startsWith('[harness] Context condensed')) ?? '';
  const changed = new Set(backticked(section(earlier, 'Changes made and why')));
  const read = new Set(backticked(section(earlier, 'Files and functions involved')));
  let failing: string[] | null = null;
  for (const message of request.messages) {
    if (typeof message.content === 'string') continue;
    for (const block of message.content) {
      if (block.type === 'tool_use') noteCall(block.name, block.input, changed, read);
      if (block.type === 'tool_result') failing = failingTests(resultText(block.content)) ?? failing;
    }
  }
  failing ??= backticked(section(earlier, 'Test status'));
  for (const path of changed) read.delete(path);
  const list = (xs: Iterable<string>, none: string): string =>
    [...xs].map((x) => `- \`${x}\``).join('\n') || none;
  const text = [
    '## Task understanding',
    `Resolve the issue "${task}": make the failing tests pass without breaking the others.`,
    '## Files and functions involved',
    list([...changed, ...read], '- (none read yet)'),
    '## Changes made and why',
    list(changed, '- (no change yet)'),
    '## Test status',
    failing.length > 0
      ? `Failing: ${failing.map((n) => `\`${n}\``).join(', ')}.`
      : 'No failing test in the last run seen.',
    '## Open hypotheses',
    '- The failure comes from the code in the files changed so far.',
    '## Next step',
    'Run the tests again and read the first failure.',
  ].join('\n');
  return reply().text(text);
}

function textsOf(content: MessageParam['content']): string[] {
  if (typeof content === 'string') return [content];
  return content.flatMap((b) => (b.type === 'text' ? [b.text] : []));
}

function resultText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((b) => (isRecord(b) && typeof b['text'] === 'string' ? b['text'] : '')).join('\n');
}

function taskTitle(text: string): string {
  return /<untrusted-issue>\s*\n#\s*(.+)/.exec(text)?.[1]?.trim() ?? '(unknown task)';
}

const EDITORS = new Set(['editor', 'str_replace_based_edit_tool']);

function noteCall(name: string, input: unknown, changed: Set<string>, read: Set<string>): void {
  if (!EDITORS.has(name) || !isRecord(input)) return;
  const path = input['path'];
  if (typeof path !== 'string' || path === '') return;
  if (input['command'] === 'view') read.add(path);
  else changed.add(path);
}

/** Failing test names in a test run's output (TAP `not ok`, the spec reporter's ✖), or null if it is none. */
function failingTests(text: string): string[] | null {
  const tap = [...text.matchAll(/^\s*not ok \d+ - (.+?)\s*$/gm)].map((m) => m[1] ?? '');
  const spec = [...text.matchAll(/^\s*✖ (.+?)(?: \([\d.]+m?s\))?\s*$/gm)].map((m) => m[1] ?? '');
  const ran = /^\s*ok \d+ - |^# (pass|fail) \d+|^ℹ (pass|fail) \d+/m.test(text);
  if (tap.length === 0 && spec.length === 0 && !ran) return null;
  return [...new Set([...tap, ...spec])].filter((n) => n !== '' && !/^(tests|failing tests):?$/i.test(n));
}

function section(text: string, name: string): string {
  const at = text.search(new RegExp(`^#{1,4}\\s*${name}`, 'm'));
  if (at < 0) return '';
  const rest = text.slice(at).split('\n').slice(1);
  const end = rest.findIndex((line) => /^#{1,4}\s/.test(line));
  return (end < 0 ? rest : rest.slice(0, end)).join('\n');
}

function backticked(text: string): string[] {
  return [...text.matchAll(/`([^`\n]+)`/g)].map((m) => m[1] ?? '').filter((x) => x !== '');
}
