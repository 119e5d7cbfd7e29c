import type { AgentEvent } from '../events/schema.js';

/** One short argument per tool call, for progress lines and trajectory listings. */
export function shortArgument(tool: string, input: unknown, max = 60): string {
  const o = (typeof input === 'object' && input !== null ? input : {}) as Record<string, unknown>;
  const str = (k: string): string => (typeof o[k] === 'string' ? o[k] : '');
  let text: string;
  switch (tool) {
    case 'bash':
      text = str('command');
      break;
    case 'editor':
      text = `${str('command')} ${str('path')}`;
      break;
    case 'search':
      text = `/${str('pattern')}/${str('path') === '' ? '' : ` ${str('path')}`}`;
      break;
    case 'run_tests':
      text = str('filter');
      break;
    case 'finish':
      text = str('summary');
      break;
    default:
      text = JSON.stringify(input);
  }
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

/**
 * Turns events into one line per tool call while a run goes on:
 * `step 3  bash  npm test  exit 1  1.2s  in 1200/out 80 tokens`.
 */
export class ProgressPrinter {
  private step = 0;
  private tokens = { input: 0, output: 0 };
  private readonly actions = new Map<string, { tool: string; input: unknown }>();

  constructor(private readonly write: (line: string) => void) {}

  onEvent(e: AgentEvent): void {
    switch (e.kind) {
      case 'model_response':
        // A sub-agent's turn is not a step; its tool calls print with the explorer's mark below.
        if (e.parent !== undefined) break;
        this.step += 1;
        this.tokens = {
          input: e.usage.inputTokens + e.usage.cacheReadTokens + e.usage.cacheWriteTokens,
          output: e.usage.outputTokens,
        };
        if (!e.content.some((b) => b.type === 'tool_use')) {
          this.write(
            `step ${this.step}  (no tool call)  in ${this.tokens.input}/out ${this.tokens.output} tokens`,
          );
        }
        break;
      case 'action':
        this.actions.set(e.toolUseId, { tool: e.tool, input: e.input });
        break;
      case 'observation': {
        const a = this.actions.get(e.toolUseId);
        const arg = a === undefined ? '' : shortArgument(a.tool, a.input);
        const status =
          e.killed !== undefined && e.killed !== null
            ? `killed (${e.killed})`
            : e.exitCode !== undefined && e.exitCode !== null
              ? `exit ${e.exitCode}`
              : e.isError
                ? 'error'
                : 'ok';
        this.write(
          `step ${this.step}${e.parent !== undefined ? ' ↳ explorer' : ''}  ${e.tool}  ${arg}  ${status}  ${(e.durationMs / 1000).toFixed(1)}s  in ${this.tokens.input}/out ${this.tokens.output} tokens`,
        );
        break;
      }
      case 'test_run':
        this.write(
          `tests (${e.phase})  ${e.command}  ${e.exitCode === null ? `killed (${String(e.killed)})` : `exit ${e.exitCode}`}  ${(e.durationMs / 1000).toFixed(1)}s`,
        );
        break;
      case 'model_retry':
        this.write(`model retry ${e.attempt}  ${e.reason}  waiting ${(e.waitMs / 1000).toFixed(1)}s`);
        break;
      case 'warning':
        this.write(`warning  ${e.code}: ${e.message}`);
        break;
      case 'condensation':
        this.write(
          `context condensed  ${e.condensedTurns} turns summarized${e.method === 'model' ? ' by the model' : ''}${e.fallback === undefined ? '' : ` (lines: ${e.fallback})`}`,
        );
        break;
      case 'run_resumed':
        this.write('resumed from the event log');
        break;
      case 'round_started':
        this.write(`new round: ${e.by} answered`);
        break;
      case 'checkpoint':
      case 'outcome':
        break;
    }
  }
}
