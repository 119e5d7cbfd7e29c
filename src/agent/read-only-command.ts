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
      continue;
    }
    if (cmd === 'sort' && words.some((w) => w === '-o' || w.startsWith('--output'))) return false;
    if (!READERS.has(cmd)) return false;
  }
  return true;
}
