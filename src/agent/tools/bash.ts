import { bashInput } from './schemas.js';
import { defineTool, truncateMiddle } from './tool.js';

export const bashTool = defineTool({
  name: 'bash',
  description:
    'Run a bash command in the repository sandbox. The shell persists between calls: cd and export ' +
    'carry over. stdin is empty (no interactive programs). Output is stdout and stderr interleaved; ' +
    'long output is cut in the middle, so filter it (grep, head, tail). A command past its timeout is ' +
    'killed with all its child processes. There is no network access.',
  schema: bashInput,
  async run(input, ctx) {
    const timeoutMs = Math.min(
      input.timeout_s !== undefined ? input.timeout_s * 1000 : ctx.limits.commandTimeoutMs,
      ctx.limits.commandTimeoutMs * 10,
    );
    const r = await ctx.sandbox.exec(input.command, { timeoutMs, signal: ctx.signal });
    const notes: string[] = [];
    if (r.killed === 'timeout')
      notes.push(
        `[killed: the command ran past its ${Math.round(timeoutMs / 1000)} s timeout; it and its children were stopped]`,
      );
    if (r.killed === 'memory') notes.push('[killed: the command used too much memory]');
    if (r.killed === 'cancelled') notes.push('[killed: the run was cancelled]');
    if (r.shellRestarted)
      notes.push('[the shell exited and was restarted; cwd and exported variables were restored]');
    const status = r.exitCode === null ? '' : `[exit code ${r.exitCode}]`;
    const body = r.output === '' ? '(no output)' : r.output;
    return {
      content: [truncateMiddle(body, ctx.limits.observationChars), ...notes, status]
        .filter((s) => s !== '')
        .join('\n'),
      isError: false,
      mutates: true,
      exitCode: r.exitCode,
      killed: r.killed,
      fullOutputPath: r.fullOutputPath,
      ...(body.length > ctx.limits.observationChars ? { fullText: r.output } : {}),
    };
  },
});
