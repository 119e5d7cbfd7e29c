import type { AgentEvent, BaseState } from '../events/schema.js';
import { reduceState, totalTokens } from '../events/reduce-state.js';
import { shortArgument } from './progress.js';
import { contextEditLine } from '../events/context-edit.js';

function indent(text: string, max = 2000): string {
  const cut =
    text.length > max
      ? `${text.slice(0, max)}\n[... ${text.length - max} more characters in the event file]`
      : text;
  return cut
    .split('\n')
    .map((l) => `    ${l}`)
    .join('\n');
}

/** A readable account of a run, rendered from its log alone. */
export function renderTrajectory(base: BaseState, events: readonly AgentEvent[]): string {
  const out: string[] = [];
  out.push(`Run ${base.conversationId} (${base.task.source}), model ${base.model}, sandbox ${base.sandbox}`);
  out.push(`Task: ${base.task.title}`);
  out.push(`Base: ${base.workspace.baseCommit}  tests: ${base.testCommand ?? '(none detected)'}`);
  out.push('');
  let step = 0;
  for (const e of events) {
    switch (e.kind) {
      case 'model_response': {
        if (e.parent !== undefined) {
          out.push(
            `    ↳ explorer turn: ${e.usage.inputTokens + e.usage.cacheReadTokens + e.usage.cacheWriteTokens} in / ${e.usage.outputTokens} out tokens, $${e.usd.toFixed(4)}`,
          );
          break;
        }
        step += 1;
        out.push(
          `── step ${step} ── ${e.usage.inputTokens + e.usage.cacheReadTokens + e.usage.cacheWriteTokens} in / ${e.usage.outputTokens} out tokens, $${e.usd.toFixed(4)}, ${(e.latencyMs / 1000).toFixed(1)}s`,
        );
        for (const b of e.content)
          if (b.type === 'text' && b.text.trim() !== '') out.push(indent(b.text.trim()));
        if (e.contextEdits !== undefined && e.contextEdits.length > 0)
          out.push(`  ✂ ${contextEditLine(e.contextEdits)}`);
        break;
      }
      case 'action':
        out.push(
          `${e.parent !== undefined ? '    ↳' : ' '} → ${e.tool} ${shortArgument(e.tool, e.input, 200)}`,
        );
        break;
      case 'observation':
        out.push(
          `  ← ${e.isError ? 'error' : e.exitCode !== undefined && e.exitCode !== null ? `exit ${e.exitCode}` : 'ok'} (${(e.durationMs / 1000).toFixed(2)}s)`,
        );
        out.push(indent(e.content, 1200));
        break;
      case 'test_run':
        out.push(
          `── tests (${e.phase}) ── ${e.command}: exit ${String(e.exitCode)}${e.killed === null ? '' : ` killed (${e.killed})`}, passed ${String(e.summary.passed)}, failed ${String(e.summary.failed)}`,
        );
        if (e.summary.failedNames.length > 0) out.push(`    failing: ${e.summary.failedNames.join(', ')}`);
        break;
      case 'model_retry':
        out.push(
          `  ! model retry ${e.attempt} (${String(e.status)}): ${e.reason}; waited ${(e.waitMs / 1000).toFixed(1)}s`,
        );
        break;
      case 'warning':
        out.push(`  ! ${e.code}: ${e.message}`);
        break;
      case 'syntax_check':
        out.push(
          e.failures.length === 0
            ? `  ✓ syntax: ${e.checked} changed files parse`
            : `  ! syntax: ${e.failures.map((f) => `${f.path} (${f.checker}: ${f.message})`).join('; ')}`,
        );
        break;
      case 'guidance_added':
        out.push(`  + instructions ${e.paths.join(', ')} (working on ${e.touched})`);
        break;
      case 'condensation':
        out.push(`── context condensed (${e.condensedTurns} turns) ──`);
        break;
      case 'context_edited':
        out.push(`  ✂ ${contextEditLine(e.edits)}`);
        break;
      case 'checkpoint':
        out.push(`  ✓ checkpoint ${e.tree.slice(0, 12)} (${e.filesChanged} files changed)`);
        break;
      case 'run_resumed':
        out.push(`── resumed (pid ${e.pid}) ──`);
        break;
      case 'round_started':
        out.push(`── new round: ${e.by} answered ──`);
        out.push(`  ${e.text}`);
        break;
      case 'note':
        out.push(`  · ${e.topic}: ${e.text}`);
        break;
      case 'outcome':
        out.push('');
        out.push(`Outcome: ${e.outcome}${e.limit === undefined ? '' : ` (${e.limit})`} — ${e.reason}`);
        if (e.summary !== null) out.push(`Summary: ${e.summary}`);
        if (e.diffStat !== '') out.push(e.diffStat);
        break;
    }
  }
  const s = reduceState(events);
  out.push(
    `Totals: ${s.steps} steps, ${totalTokens(s.usage)} tokens, $${s.usd.toFixed(4)}, ${(s.elapsedMs / 1000).toFixed(1)}s`,
  );
  return `${out.join('\n')}\n`;
}
