/*
 * The one argument that says what a tool call did, for people reading a trajectory: the PR body,
 * the CLI and the browser client show the same words. No imports: the browser bundle uses it too.
 */

function record(input: unknown): Record<string, unknown> {
  return typeof input === 'object' && input !== null ? (input as Record<string, unknown>) : {};
}

/** The command, the file (and lines viewed), the pattern (and where), the test filter, the summary. */
export function toolArgument(tool: string, input: unknown): string {
  const o = record(input);
  const str = (k: string): string => (typeof o[k] === 'string' ? o[k] : '');
  switch (tool) {
    case 'bash':
      return str('command');
    case 'editor': {
      const range = Array.isArray(o.view_range) ? ` [${o.view_range.map(String).join(', ')}]` : '';
      return `${str('command')} ${str('path')}${range}`.trim();
    }
    case 'search':
      return `/${str('pattern')}/${str('path') === '' ? '' : ` ${str('path')}`}${str('glob') === '' ? '' : ` (${str('glob')})`}`;
    case 'run_tests':
      return str('filter');
    case 'finish':
      return str('summary');
    default:
      // Inputs come from JSON (the event log), so stringify always gives a string for them.
      return input === undefined ? '' : JSON.stringify(input);
  }
}
