/**
 * Push-time policy: what a repository allows the App to push. Checked on the host against the diff
 * between the base commit and the agent's commit (`git diff --numstat -z -M base HEAD`), never
 * against anything the sandbox reports.
 *
 * Path rules:
 * - A rename or copy counts with both paths: moving a workflow out of `.github/workflows/` changes
 *   the workflows as surely as editing one.
 * - `.github/workflows/**` (and `.github/workflows` itself) is blocked unless allowWorkflowChanges.
 * - `.github/` is compared case-insensitively at the repository root (GitHub treats `.GitHub/` as
 *   `.github/`); everything else is case-sensitive, as git is.
 * - Globs: `*` and `?` stay within a path segment, `**` spans segments (`a/**` = everything under
 *   a; `**` alone = everything). A pattern with no `/` except a trailing one matches at any depth
 *   (`*.pem`, `secrets/`), like .gitignore; a pattern with a `/` is anchored at the root (a leading
 *   `/` anchors too). A pattern that matches a directory blocks everything under it; a trailing `/`
 *   makes it match directories only (`docs/` blocks `docs/a.md`, not a file named `docs`).
 * - Binary files count as a changed file with 0 changed lines (git gives no line counts for them).
 */
import { z } from 'zod';

export const repoPolicySchema = z.object({
  /** Globs of paths the App may not push changes to. Default: none. */
  blockedPaths: z.array(z.string().regex(/[^/\s]/, 'a pattern needs a name, not only slashes')).default([]),
  /** Whether the App may change `.github/workflows/**`. Default: false. */
  allowWorkflowChanges: z.boolean().default(false),
  /** Most lines added + deleted in one push. Default: 2000. */
  maxChangedLines: z.number().int().nonnegative().default(2000),
  /** Most files changed (added, deleted, modified, renamed) in one push. Default: 50. */
  maxChangedFiles: z.number().int().nonnegative().default(50),
});
export type RepoPolicy = z.output<typeof repoPolicySchema>;
/** What a repository writes (every field optional); parse with repoPolicySchema to get a RepoPolicy. */
export type RepoPolicyInput = z.input<typeof repoPolicySchema>;

export interface FileChange {
  readonly path: string;
  /** The path before a rename or copy. */
  readonly oldPath?: string;
  readonly added: number;
  readonly deleted: number;
  readonly binary?: boolean;
}

export type PolicyRule = 'workflow' | 'blocked_path' | 'max_lines' | 'max_files';

export interface PolicyViolation {
  readonly rule: PolicyRule;
  readonly path?: string;
  /** A sentence for the maintainer. */
  readonly detail: string;
}

export type PolicyResult =
  { readonly ok: true } | { readonly ok: false; readonly violations: PolicyViolation[] };

/** Lower-cases a leading `.github` segment: the only case-insensitive part of path matching. */
function foldGithub(path: string): string {
  return path.replace(/^\.github(?=\/|$)/i, '.github');
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Compiles one glob to a regex over repository-relative paths (no leading `/`). */
export function compileGlob(pattern: string): RegExp {
  let p = pattern.trim();
  const dirOnly = p.endsWith('/');
  p = p.replace(/\/+$/, '');
  const anchored = p.startsWith('/') || p.includes('/');
  p = foldGithub(p.replace(/^\/+/, ''));
  const segments = p.split('/');
  let body = '';
  segments.forEach((seg, i) => {
    const last = i === segments.length - 1;
    if (seg === '**') {
      // `**/` spans zero or more whole segments; a final `**` spans one or more.
      body += last ? '.+' : '(?:[^/]+/)*';
      return;
    }
    body += seg
      .split(/(\*+|\?)/)
      .map((part) => (part === '?' ? '[^/]' : part.startsWith('*') ? '[^/]*' : escapeRegExp(part)))
      .join('');
    if (!last) body += '/';
  });
  const prefix = anchored ? '' : '(?:[^/]+/)*';
  // Matching a directory covers what is under it; dirOnly requires something under it.
  const suffix = dirOnly ? '/.+' : '(?:/.+)?';
  return new RegExp(`^${prefix}${body}${suffix}$`);
}

export function matchesGlob(path: string, pattern: string): boolean {
  return compileGlob(pattern).test(foldGithub(path.replace(/^\/+/, '')));
}

function isWorkflowPath(path: string): boolean {
  return /^\.github\/workflows(?:\/|$)/.test(foldGithub(path));
}

export function checkPolicy(changes: readonly FileChange[], policy: RepoPolicy): PolicyResult {
  const violations: PolicyViolation[] = [];
  const seen = new Set<string>();
  const add = (v: PolicyViolation): void => {
    const key = `${v.rule}\0${v.path ?? ''}`;
    if (seen.has(key)) return;
    seen.add(key);
    violations.push(v);
  };
  const globs = policy.blockedPaths.map((g) => ({ glob: g, re: compileGlob(g) }));
  for (const change of changes) {
    const paths =
      change.oldPath === undefined || change.oldPath === change.path
        ? [change.path]
        : [change.oldPath, change.path];
    for (const path of paths) {
      const role = path === change.oldPath && path !== change.path ? ' (the source of a rename or copy)' : '';
      if (!policy.allowWorkflowChanges && isWorkflowPath(path)) {
        add({
          rule: 'workflow',
          path,
          detail: `changes to GitHub Actions workflows are not allowed${role}; set allowWorkflowChanges to allow them`,
        });
      }
      const normalized = foldGithub(path.replace(/^\/+/, ''));
      const hit = globs.find((g) => g.re.test(normalized));
      if (hit !== undefined) {
        add({
          rule: 'blocked_path',
          path,
          detail: `the path matches the blocked pattern "${hit.glob}"${role}`,
        });
      }
    }
  }
  const lines = changes.reduce((n, c) => n + c.added + c.deleted, 0);
  if (lines > policy.maxChangedLines) {
    add({
      rule: 'max_lines',
      detail: `${lines} lines changed (added + deleted), more than the limit of ${policy.maxChangedLines}`,
    });
  }
  if (changes.length > policy.maxChangedFiles) {
    add({
      rule: 'max_files',
      detail: `${changes.length} files changed, more than the limit of ${policy.maxChangedFiles}`,
    });
  }
  return violations.length === 0 ? { ok: true } : { ok: false, violations };
}

export interface NumstatEntry {
  readonly path: string;
  readonly oldPath?: string;
  readonly added: number;
  readonly deleted: number;
  readonly binary: boolean;
}

export class NumstatParseError extends Error {
  override readonly name = 'NumstatParseError';
}

/**
 * Parses `git diff --numstat -z [-M]`: `added\tdeleted\tpath\0` per file, `added\tdeleted\t\0old\0new\0`
 * for a rename or copy, and `-\t-\t` counts for a binary file. Paths are raw bytes as git wrote them
 * (no quoting in -z mode) and may hold tabs or newlines. Anything else throws NumstatParseError: a
 * policy check that silently skipped a record would let that file through.
 */
export function parseNumstat(text: string): NumstatEntry[] {
  const fields = text.split('\0');
  // The output ends with a NUL, so the last field is empty; text without it was cut short.
  if (fields.pop() !== '') {
    if (text === '') return [];
    throw new NumstatParseError('numstat output does not end with NUL: run git with -z, and pass all of it');
  }
  const out: NumstatEntry[] = [];
  for (let i = 0; i < fields.length; i++) {
    const record = fields[i] ?? '';
    const m = /^(-|\d+)\t(-|\d+)\t([\s\S]*)$/.exec(record);
    if (m === null)
      throw new NumstatParseError(`unexpected numstat record ${JSON.stringify(record.slice(0, 200))}`);
    const [, a = '', d = '', path = ''] = m;
    const binary = a === '-' || d === '-';
    if (binary && a !== d) throw new NumstatParseError(`unexpected numstat counts ${a}/${d}`);
    const counts = { added: binary ? 0 : Number(a), deleted: binary ? 0 : Number(d), binary };
    if (path !== '') {
      out.push({ path, ...counts });
      continue;
    }
    const oldPath = fields[i + 1];
    const newPath = fields[i + 2];
    if (oldPath === undefined || newPath === undefined || oldPath === '' || newPath === '') {
      throw new NumstatParseError('a rename record without its two paths: the output was cut short');
    }
    out.push({ path: newPath, oldPath, ...counts });
    i += 2;
  }
  return out;
}
