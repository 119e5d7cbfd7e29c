/**
 * Whether a bash command certainly leaves the workspace as it was, so the checkpoint after it can be
 * skipped (a checkpoint costs two git processes). Deliberately narrow: a single pipeline of
 * well-known reading commands, with no redirection, substitution, subshell or command list. Anything
 * else counts as a possible change.
 */
const READERS = new Set([
  'cat',
  'head',
  'tail',
  'ls',
  'pwd',
  'echo',
  'printf',
  'wc',
  'grep',
  'egrep',
  'rg',
  'nl',
  'stat',
  'file',
  'du',
  'tree',
  'true',
  'false',
  'which',
  'type',
  'env',
  'date',
  'cut',
  'sort',
  'uniq',
  'diff',
  'basename',
  'dirname',
  'realpath',
  'readlink',
  'seq',
]);
const GIT_READERS = new Set(['status', 'log', 'diff', 'show', 'blame', 'grep', 'ls-files', 'rev-parse']);
const UNSAFE = /[;&<>`$(){}\n\\]|\|\|/;

export function isReadOnlyCommand(command: string): boolean {
  if (UNSAFE.test(command)) return false;
  for (const stage of command.split('|')) {
    const words = stage.trim().split(/\s+/);
    const [cmd, sub] = words;
    if (cmd === undefined || cmd === '') return false;
    if (cmd === 'git') {
      if (sub === undefined || !GIT_READERS.has(sub)) return false;
    } else if (!READERS.has(cmd)) {
      return false;
    }
    if (writes(cmd, words.slice(1))) return false;
  }
  return true;
}

/**
 * The options and forms by which a reader writes a file or runs another program: `env CMD`, `sort -o`,
 * `sort --compress-program`, `tree -o`, `uniq IN OUT`, `rg --pre`, `file -C`, and git's `--output`,
 * `-O`/`--open-files-in-pager` and `--ext-diff`.
 */
function writes(cmd: string, args: readonly string[]): boolean {
  const has = (...prefixes: string[]): boolean =>
    args.some((a) => prefixes.some((p) => a === p || (p.startsWith('--') && a.startsWith(p))));
  switch (cmd) {
    case 'env':
      return args.length > 0;
    case 'sort':
      return has('-o', '--output', '--compress-program') || args.some((a) => /^-[a-zA-Z]*o/.test(a));
    case 'tree':
      return has('-o');
    case 'uniq':
      return args.filter((a) => !a.startsWith('-')).length > 1;
    case 'rg':
      return has('--pre');
    case 'file':
      return has('-C', '--compile');
    case 'git':
      return (
        has('--output', '-O', '--open-files-in-pager', '--ext-diff') || args.some((a) => a.startsWith('-O'))
      );
    default:
      return false;
  }
}
