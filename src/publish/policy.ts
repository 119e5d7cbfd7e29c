/**
 * Push-time policy: what a repository allows the App to push. Checked on the host against the
 * pristine clone's index after the agent's diff is applied (`git diff --cached --raw --numstat -z -M
 * base`), never against anything the sandbox reports: the index is exactly what gets committed, file
 * modes included, whereas the diff text is what the agent wrote.
 *
 * Why the defaults are strict: the App pushes its branch into the base repository, and a branch there
 * runs the repository's `push` and same-repository `pull_request` workflows with its secrets. So what
 * decides what CI runs, or who must review, is refused unless the repository opts in:
 * - `.github/workflows/**` (and `.github/workflows` itself) unless allowWorkflowChanges;
 * - everything else GitHub reads from `.github/` (local actions, CODEOWNERS, dependabot.yml, …) and
 *   `CODEOWNERS` at the root or in `docs/` unless allowGithubChanges;
 * - a gitlink (submodule) that is added, moved or pointed at another commit unless allowGitlinks: it
 *   makes a checkout with submodules fetch code the diff never shows. Removing one is allowed.
 *
 * Path rules:
 * - A rename or copy counts with both paths: moving a workflow out of `.github/workflows/` changes
 *   the workflows as surely as editing one.
 * - `.github/` is compared case-insensitively at the repository root (GitHub treats `.GitHub/` as
 *   `.github/`); so is the name `CODEOWNERS`; everything else is case-sensitive, as git is.
 * - Globs: `*` and `?` stay within a path segment, `**` spans segments (`a/**` = everything under
 *   a; `**` alone = everything). A pattern with no `/` except a trailing one matches at any depth
 *   (`*.pem`, `secrets/`), like .gitignore; a pattern with a `/` is anchored at the root (a leading
 *   `/` anchors too). A pattern that matches a directory blocks everything under it; a trailing `/`
 *   makes it match directories only (`docs/` blocks `docs/a.md`, not a file named `docs`).
 * - Binary files count as a changed file with 0 changed lines (git gives no line counts for them).
 */
import type { RepoPolicy } from '../config/repo-policy.js';

/** The git mode of a gitlink: an entry that names a commit of another repository (a submodule). */
export const GITLINK_MODE = '160000';

export interface FileChange {
  readonly path: string;
  /** The path before a rename or copy. */
  readonly oldPath?: string;
  /**
   * The git mode of `path` after the change (`100644`, `100755`, `120000` for a symlink, `160000` for
   * a gitlink; `000000` when deleted). Required: without it a new gitlink could not be told apart.
   */
  readonly mode: string;
  readonly added: number;
  readonly deleted: number;
  readonly binary?: boolean;
}

export type PolicyRule =
  'workflow' | 'github_config' | 'gitlink' | 'blocked_path' | 'max_lines' | 'max_files';

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

/**
 * What GitHub itself reads with the repository's authority, workflows aside: all of `.github/` (local
 * actions, CODEOWNERS, dependabot.yml, this App's own settings) and CODEOWNERS at the other two places
 * GitHub looks for it.
 */
function isGithubConfigPath(path: string): boolean {
  const p = foldGithub(path.replace(/^\/+/, ''));
  return /^\.github(?:\/|$)/.test(p) || /^(?:docs\/)?codeowners$/i.test(p);
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
      if (isWorkflowPath(path)) {
        if (!policy.allowWorkflowChanges) {
          add({
            rule: 'workflow',
            path,
            detail: `changes to GitHub Actions workflows are not allowed${role}; set allowWorkflowChanges to allow them`,
          });
        }
      } else if (!policy.allowGithubChanges && isGithubConfigPath(path)) {
        add({
          rule: 'github_config',
          path,
          detail: `changes to files GitHub reads (.github/, CODEOWNERS) are not allowed${role}; set allowGithubChanges to allow them`,
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
    if (!policy.allowGitlinks && change.mode === GITLINK_MODE) {
      add({
        rule: 'gitlink',
        path: change.path,
        detail:
          'adding, moving or retargeting a submodule (gitlink) is not allowed; set allowGitlinks to allow it',
      });
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

/**
 * One record of `git diff --raw -z`: `:srcmode dstmode srcsha dstsha status[score]` then the path,
 * or for a rename or copy (R, C) the old and the new path.
 */
const RAW_HEADER = /^:([0-7]{6}) ([0-7]{6}) [0-9a-f]+(?:\.\.\.)? [0-9a-f]+(?:\.\.\.)? ([ACDMRTUX])(\d*)$/;

/**
 * Parses `git diff --raw --numstat -z [-M]`: git writes every raw record, then every numstat record,
 * for the same file pairs in the same order. The raw half gives each file's new mode (which numstat
 * lacks: a new gitlink looks like a one-line text file there); the numstat half gives line counts.
 * The two halves must name the same paths one for one, or this throws NumstatParseError: a record
 * the policy never saw would be let through.
 */
export function parseRawNumstat(text: string): FileChange[] {
  if (text === '') return [];
  const fields = text.split('\0');
  if (fields.at(-1) !== '') {
    throw new NumstatParseError('diff output does not end with NUL: run git with -z, and pass all of it');
  }
  const raw: { path: string; oldPath?: string; mode: string }[] = [];
  let i = 0;
  for (; i < fields.length - 1; i++) {
    const m = RAW_HEADER.exec(fields[i] ?? '');
    if (m === null) break;
    const [, , mode = '', status = ''] = m;
    const twoPaths = status === 'R' || status === 'C';
    const first = fields[i + 1];
    const second = twoPaths ? fields[i + 2] : undefined;
    if (first === undefined || first === '' || (twoPaths && (second === undefined || second === ''))) {
      throw new NumstatParseError('a raw diff record without its path: the output was cut short');
    }
    raw.push(
      twoPaths && second !== undefined ? { path: second, oldPath: first, mode } : { path: first, mode },
    );
    i += twoPaths ? 2 : 1;
  }
  const numstat = parseNumstat(fields.slice(i).join('\0'));
  if (numstat.length !== raw.length) {
    throw new NumstatParseError(
      `${raw.length} raw records but ${numstat.length} numstat records: run git diff with both --raw and --numstat`,
    );
  }
  return numstat.map((n, k) => {
    const r = raw[k];
    if (r === undefined || r.path !== n.path || r.oldPath !== n.oldPath) {
      throw new NumstatParseError(
        `raw and numstat records disagree at ${JSON.stringify((r?.path ?? '').slice(0, 200))} / ${JSON.stringify(n.path.slice(0, 200))}`,
      );
    }
    return { ...n, mode: r.mode };
  });
}
