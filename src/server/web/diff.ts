/**
 * Diff lines for display: a unified diff (a checkpoint's `git diff`) or an editor call
 * (create / str_replace / insert) as added and removed lines. Pure: also unit-tested under Node.
 */

export type DiffLineKind = 'file' | 'hunk' | 'add' | 'del' | 'ctx' | 'meta';

export interface DiffLine {
  readonly kind: DiffLineKind;
  readonly text: string;
}

export function classifyDiff(diff: string): DiffLine[] {
  const lines = diff.endsWith('\n') ? diff.slice(0, -1).split('\n') : diff.split('\n');
  const out: DiffLine[] = [];
  let inHunk = false;
  for (const text of lines) {
    let kind: DiffLineKind;
    if (text.startsWith('diff --git ')) {
      inHunk = false;
      kind = 'file';
    } else if (text.startsWith('@@')) {
      inHunk = true;
      kind = 'hunk';
    } else if (inHunk && text.startsWith('+')) kind = 'add';
    else if (inHunk && text.startsWith('-')) kind = 'del';
    else if (inHunk && (text.startsWith(' ') || text === '')) kind = 'ctx';
    else if (!inHunk && (text.startsWith('--- ') || text.startsWith('+++ '))) kind = 'file';
    else kind = 'meta';
    out.push({ kind, text });
  }
  return out;
}

/** Files named by `diff --git a/x b/x` headers, in order. */
export function diffFiles(diff: string): string[] {
  const files: string[] = [];
  for (const m of diff.matchAll(/^diff --git a\/(.*) b\/(.*)$/gm)) files.push(m[2] ?? m[1] ?? '');
  return files;
}

function record(input: unknown): Record<string, unknown> {
  return typeof input === 'object' && input !== null ? (input as Record<string, unknown>) : {};
}

function linesOf(text: string): string[] {
  if (text === '') return [];
  return (text.endsWith('\n') ? text.slice(0, -1) : text).split('\n');
}

/**
 * What an editor call changes, as diff lines; null when the call changes nothing (view, undo) or
 * its input is not an edit.
 */
export function editAsDiff(input: unknown): DiffLine[] | null {
  const o = record(input);
  const str = (k: string): string | null => (typeof o[k] === 'string' ? o[k] : null);
  const path = str('path') ?? '?';
  const command = str('command');
  const header = (from: string, to: string): DiffLine[] => [
    { kind: 'file', text: `--- ${from}` },
    { kind: 'file', text: `+++ ${to}` },
  ];
  const added = (text: string): DiffLine[] => linesOf(text).map((l) => ({ kind: 'add', text: `+${l}` }));
  const removed = (text: string): DiffLine[] => linesOf(text).map((l) => ({ kind: 'del', text: `-${l}` }));
  switch (command) {
    case 'create': {
      const text = str('file_text') ?? '';
      return [...header('/dev/null', `b/${path}`), { kind: 'hunk', text: '@@ new file @@' }, ...added(text)];
    }
    case 'str_replace': {
      const before = str('old_str');
      if (before === null) return null;
      return [
        ...header(`a/${path}`, `b/${path}`),
        { kind: 'hunk', text: '@@ replace @@' },
        ...removed(before),
        ...added(str('new_str') ?? ''),
      ];
    }
    case 'insert': {
      const line = typeof o.insert_line === 'number' ? o.insert_line : null;
      return [
        ...header(`a/${path}`, `b/${path}`),
        { kind: 'hunk', text: `@@ insert after line ${line === null ? '?' : line} @@` },
        ...added(str('new_str') ?? ''),
      ];
    }
    default:
      return null;
  }
}
