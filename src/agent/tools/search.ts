import { shellQuote } from '../../sandbox/shell-session.js';
import { FileOpFailed, PathRefused } from '../../sandbox/sandbox-files.js';
import { searchInput } from './schemas.js';
import { defineTool, truncateMiddle } from './tool.js';

export const searchTool = defineTool({
  name: 'search',
  description:
    'Search file contents with a regular expression (ripgrep). Returns matching lines as path:line:text. ' +
    'Respects .gitignore. Use it to find definitions and usages before editing.',
  schema: searchInput,
  async run(input, ctx) {
    let dir = '.';
    if (input.path !== undefined) {
      try {
        dir = (await ctx.files.stat(input.path)).rel;
      } catch (error) {
        if (error instanceof PathRefused || error instanceof FileOpFailed)
          return { content: error.message, isError: true, mutates: false };
        throw error;
      }
    }
    const max = input.max_results ?? 200;
    const rg = [
      // --sort path: the same search gives the same lines in the same order (rg walks in parallel otherwise).
      'rg --line-number --no-heading --color never --max-columns 300 --max-columns-preview --sort path',
      input.ignore_case === true ? '--ignore-case' : '',
      input.glob !== undefined ? `--glob ${shellQuote(input.glob)}` : '',
      '-e',
      shellQuote(input.pattern),
      '--',
      shellQuote(dir),
    ]
      .filter((s) => s !== '')
      .join(' ');
    const grep = [
      'grep -rnIE --exclude-dir=.git --exclude-dir=node_modules',
      input.ignore_case === true ? '-i' : '',
      input.glob !== undefined ? `--include=${shellQuote(input.glob)}` : '',
      '-e',
      shellQuote(input.pattern),
      '--',
      shellQuote(dir),
    ]
      .filter((s) => s !== '')
      .join(' ');
    // A subshell, so the search neither moves the persistent shell's cwd nor leaves state behind.
    const command = `(cd ${shellQuote(ctx.sandbox.workdir)} && if command -v rg >/dev/null 2>&1; then ${rg}; else ${grep}; fi) | head -n ${max + 1}`;
    const r = await ctx.sandbox.exec(command, { timeoutMs: ctx.limits.commandTimeoutMs, signal: ctx.signal });
    const lines = r.output
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => (l.startsWith('./') ? l.slice(2) : l));
    if (lines.length === 0)
      return {
        content: `No matches for /${input.pattern}/ in ${dir === '.' ? 'the workspace' : dir}.`,
        isError: false,
        mutates: false,
      };
    const shown = lines.slice(0, max);
    const more = lines.length > max ? `\n[more than ${max} matches; narrow the pattern or the path]` : '';
    return {
      content: truncateMiddle(shown.join('\n'), ctx.limits.observationChars) + more,
      isError: false,
      mutates: false,
    };
  },
});
