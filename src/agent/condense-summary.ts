import type { EventOf } from '../events/schema.js';
import {
  ModelError,
  type ConversationMessage,
  type Model,
  type ModelRequest,
  type ModelResponse,
  type UserBlock,
} from '../model/model.js';
import { costUsd, type ModelPrice } from '../model/pricing.js';
import type { SpendBudget } from './spend-budget.js';
import { fenceUntrusted } from './untrusted-text.js';

/**
 * The first words of the request for a summary. The model simulator's policies recognise a summary
 * request by them (src/model-sim/policies/summary.ts repeats the string), as a real model reads the
 * instruction that follows.
 */
export const SUMMARY_REQUEST_MARKER = '[harness] Context summary request.';

/** The summary's sections, in order: each is a level-2 heading the answer must have. */
export const SUMMARY_SECTIONS = [
  'Task understanding',
  'Files and functions involved',
  'Changes made and why',
  'Test status',
  'Open hypotheses',
  'Next step',
] as const;

const SECTION_HINTS: Readonly<Record<(typeof SUMMARY_SECTIONS)[number], string>> = {
  'Task understanding': 'what the issue asks, in your own words, and what done means.',
  'Files and functions involved': 'each file (exact path) and function that matters, and why.',
  'Changes made and why': 'every edit so far, by file, and its reason; say so if one was undone.',
  'Test status': 'which tests fail and why, which pass now, and how you last ran them.',
  'Open hypotheses': 'what you suspect and have not confirmed, and what you ruled out.',
  'Next step': 'the one thing to do next.',
};

/** What the summary call needs from the run: the model, its price, and what bounds the call. */
export interface Summarizer {
  readonly model: Model;
  readonly price: ModelPrice | null;
  /** The run's cancel signal: a cancelled summary call cancels the run, it does not fall back. */
  readonly signal?: AbortSignal | undefined;
  /** Wall time the run has left, in ms; the call is bounded by it. */
  readonly wallLeftMs?: (() => number) | undefined;
  /**
   * The month's shared limits (AgentDeps.budget): the summary call is held at its worst cost and
   * settled at its real one, as a step's call; a refused hold means no call, and the line list.
   */
  readonly budget?: SpendBudget | undefined;
}

export type SummaryCall = NonNullable<EventOf<'condensation'>['call']>;

export type SummaryResult =
  | { readonly ok: true; readonly text: string; readonly call: SummaryCall }
  | { readonly ok: false; readonly reason: string; readonly call?: SummaryCall };

/**
 * The instruction that ends a summary request. Anthropic's guidance for long agentic runs is a
 * structured summary that keeps what the run learned (decisions, unresolved problems, the state of
 * the work) and drops raw tool output; the sections are that, for fixing an issue.
 */
export function summaryInstruction(maxWords: number): string {
  return [
    `${SUMMARY_REQUEST_MARKER} The conversation has grown past its budget: its older turns will be`,
    'replaced by a summary you write now, and only the newest turns stay as they are. Do not call any',
    'tool. Answer with the summary only, in Markdown, with exactly these sections, in this order, each',
    'a level-2 heading:',
    ...SUMMARY_SECTIONS.map((s) => `## ${s} — ${SECTION_HINTS[s]}`),
    'If the conversation starts with an earlier summary, carry its facts forward: drop nothing it',
    'records unless it is now wrong. Be concrete: exact paths, function names, test names, error',
    `messages. At most ${maxWords} words.`,
  ].join('\n');
}

/**
 * The summary request: the next turn's request as it stands (same tools, system prompt and
 * messages, so the API reads all of it but the newest turn from the prompt cache) with the
 * instruction appended as the last user text. The tools stay defined and tool_choice is left
 * alone, because changing either invalidates the cached messages; the instruction says not to call
 * them, and a call in the answer is ignored.
 */
export function summaryRequest(request: ModelRequest, maxOutputTokens: number): ModelRequest {
  const maxWords = Math.max(100, Math.min(1500, Math.floor(maxOutputTokens * 0.6)));
  const instruction: UserBlock = { type: 'text', text: summaryInstruction(maxWords) };
  const messages: ConversationMessage[] = [...request.messages];
  const last = messages.at(-1);
  if (last?.role === 'user')
    messages[messages.length - 1] = { role: 'user', content: [...last.content, instruction] };
  else messages.push({ role: 'user', content: [instruction] });
  return { ...request, messages, maxOutputTokens };
}

/** The summary in the answer, or why it cannot be used. */
export function readSummary(
  response: Pick<ModelResponse, 'content' | 'stopReason'>,
  maxChars: number,
): { ok: true; text: string } | { ok: false; reason: string } {
  const text = response.content
    .flatMap((b) => (b.type === 'text' ? [b.text] : []))
    .join('\n')
    .trim();
  if (response.stopReason === 'max_tokens')
    return { ok: false, reason: 'the summary was cut off at its token limit' };
  if (text === '') return { ok: false, reason: 'the answer had no text' };
  const missing = SUMMARY_SECTIONS.filter(
    (s) => !new RegExp(`^#{1,4}\\s*${s.replace(/ /g, '\\s+')}\\b`, 'im').test(text),
  );
  if (missing.length > 0)
    return { ok: false, reason: `the summary lacks the section(s): ${missing.join(', ')}` };
  if (text.length > maxChars)
    return { ok: false, reason: `the summary is ${text.length} characters, over its budget of ${maxChars}` };
  return { ok: true, text };
}

/** The summary as the model sees it in later requests, first in the conversation after the task. */
export function modelSummaryText(text: string, turns: number): string {
  return [
    `[harness] Context condensed: ${turns} earlier turns are replaced by the summary below, which you wrote`,
    'when they were condensed (it carries forward any summary before it). The full record is kept in',
    'the trajectory.',
    fenceUntrusted('summary', text),
  ].join('\n');
}

/**
 * Asks the model for the summary. Never throws for a failed call (the caller falls back to the
 * line list), except when the run itself was cancelled.
 */
export async function askForSummary(
  summarizer: Summarizer,
  request: ModelRequest,
  maxOutputTokens: number,
  maxChars: number,
): Promise<SummaryResult> {
  const wallLeft = summarizer.wallLeftMs?.() ?? Number.POSITIVE_INFINITY;
  if (wallLeft <= 0) return { ok: false, reason: 'no wall time was left for a summary call' };
  const timeout = Number.isFinite(wallLeft) ? AbortSignal.timeout(Math.max(1, wallLeft)) : undefined;
  const signals = [summarizer.signal, timeout].filter((s): s is AbortSignal => s !== undefined);
  const started = performance.now();
  let response: ModelResponse;
  try {
    response = await summarizer.model.complete(summaryRequest(request, maxOutputTokens), {
      signal: signals.length === 0 ? undefined : AbortSignal.any(signals),
    });
  } catch (error) {
    if (summarizer.signal?.aborted === true) throw error;
    const why = error instanceof ModelError ? error.message : String(error);
    return { ok: false, reason: `the summary call failed: ${why}` };
  }
  const call: SummaryCall = {
    model: response.model,
    requestId: response.requestId,
    usage: response.usage,
    usd: costUsd(summarizer.price, response.usage),
    latencyMs: performance.now() - started,
  };
  const read = readSummary(response, maxChars);
  return read.ok ? { ok: true, text: read.text, call } : { ok: false, reason: read.reason, call };
}
