import { posix } from 'node:path';
import type { RepoInstruction } from '../events/schema.js';
import type { WorkspaceProbe } from '../testing/detect-test-command.js';

/**
 * The repository's own guidance for agents, read from the base branch (never from the agent's
 * workspace or a PR head, so nothing the agent or a PR writes can change what it is told):
 * `AGENTS.md` and `CLAUDE.md` at the root and in any folder, `.github/copilot-instructions.md`, and
 * `.github/instructions/*.instructions.md` with their `applyTo` globs. Root files and `applyTo: "**"`
 * apply from the start; a nested file, or one whose globs match only some paths, is added when the
 * agent first works on a path it covers.
 */

/** Bytes of one file that reach the prompt; the rest is cut with a note. */
export const MAX_FILE_BYTES = 16 * 1024;
/** Bytes of all files together; files past it are listed but not included. */
export const MAX_TOTAL_BYTES = 48 * 1024;
/** Folders deeper than this are not searched for nested files (and paths longer than this are ignored). */
const MAX_PATH_CHARS = 400;

/** What the collector reads: the base commit's file list and a file's text (null: unreadable). */
export interface InstructionSource {
  /** Every file path of the tree (relative, `/`-separated); symlinks and submodules excluded. */
  listFiles(): Promise<readonly string[]>;
  readText(path: string): Promise<string | null>;
}

/** Which files are instruction files, and how they apply. */
function classify(path: string): { readonly scope: string; readonly kind: RepoInstruction['kind'] } | null {
  if (path.length > MAX_PATH_CHARS) return null;
  if (path === '.github/copilot-instructions.md') return { scope: '.', kind: 'copilot' };
  if (/^\.github\/instructions\/[^/]+\.instructions\.md$/.test(path))
    return { scope: '.', kind: 'copilot-scoped' };
  const name = posix.basename(path);
  if (name !== 'AGENTS.md' && name !== 'CLAUDE.md') return null;
  const dir = posix.dirname(path);
  return { scope: dir, kind: name === 'AGENTS.md' ? 'agents' : 'claude' };
}

/** Reads every instruction file of the tree, with the caps applied, in a stable order. */
export async function collectInstructions(source: InstructionSource): Promise<RepoInstruction[]> {
  const found = (await source.listFiles())
    .map((path) => ({ path, c: classify(path) }))
    .filter((x): x is { path: string; c: NonNullable<ReturnType<typeof classify>> } => x.c !== null)
    // The root's files first (they survive the total cap), then Copilot's, then nested ones by depth.
    .sort((a, b) => rank(a) - rank(b) || (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  const out: RepoInstruction[] = [];
  let total = 0;
  for (const { path, c } of found) {
    const raw = await source.readText(path);
    if (raw === null) continue;
    let text = raw;
    let applyTo: string[] | null = null;
    if (c.kind === 'copilot-scoped') {
      const parsed = frontMatter(raw);
      text = parsed.body;
      applyTo = parsed.applyTo;
    }
    const bytes = Buffer.byteLength(text);
    const room = Math.max(0, Math.min(MAX_FILE_BYTES, MAX_TOTAL_BYTES - total));
    const kept = bytes <= room ? text : cutToBytes(text, room);
    total += Buffer.byteLength(kept);
    out.push({
      path,
      kind: c.kind,
      scope: c.scope,
      applyTo,
      bytes,
      included: kept.length > 0 || bytes === 0,
      truncated: kept.length < text.length,
      text: kept,
    });
  }
  return out;
}

/** Whether an instruction applies from the start (root scope, no globs or a match-everything glob). */
export function appliesFromStart(i: RepoInstruction): boolean {
  if (i.applyTo !== null) return i.applyTo.some((g) => g === '**' || g === '**/*' || g === '*');
  return i.scope === '.';
}

/** Whether an instruction covers a workspace path (relative, normalized). */
export function covers(i: RepoInstruction, rel: string): boolean {
  if (i.applyTo !== null) return i.applyTo.some((g) => globToRegExp(g).test(rel));
  return i.scope === '.' || rel === i.scope || rel.startsWith(`${i.scope}/`);
}

/**
 * A tool's path argument as a workspace path (relative, `/`-separated, no `..` above the root), or
 * null when it points outside the workspace.
 */
export function workspaceRelative(path: string, workdir: string): string | null {
  const abs = posix.isAbsolute(path) ? posix.normalize(path) : posix.normalize(posix.join(workdir, path));
  const root = posix.normalize(workdir).replace(/\/$/, '');
  if (abs === root) return '.';
  if (!abs.startsWith(`${root}/`)) return null;
  return abs.slice(root.length + 1).replace(/\/$/, '');
}

/** The guidance text of instruction files, fenced: maintainers' words, below the rules, above the issue. */
export function guidanceText(files: readonly RepoInstruction[], when: 'start' | 'added'): string {
  const parts: string[] = [];
  parts.push(
    when === 'start'
      ? "The repository's instructions for agents (from its base branch):"
      : 'You are now working where more of the repository’s instructions apply (from its base branch):',
  );
  for (const f of files) {
    const where =
      f.applyTo !== null
        ? `files matching ${f.applyTo.join(', ')}`
        : f.scope === '.'
          ? 'the whole repository'
          : `${f.scope}/ and below`;
    if (!f.included) {
      parts.push(`(${f.path}, for ${where}, is not included: the instructions' total size cap was reached)`);
      continue;
    }
    const note = f.truncated ? `\n[cut at ${Buffer.byteLength(f.text)} of ${f.bytes} bytes]` : '';
    parts.push(
      `<repository-guidance path="${f.path.replace(/["<>&]/g, '_')}" applies-to="${where.replace(/["<>&]/g, '_')}">\n${neutralize(f.text)}${note}\n</repository-guidance>`,
    );
  }
  return parts.join('\n\n');
}

/** A file cannot close its own fence (or open another kind of tag the prompt gives meaning to). */
function neutralize(text: string): string {
  return text.replace(/<(\/?)(repository-guidance|untrusted-[a-z-]*)/gi, '<$1\u200b$2');
}

function rank(f: {
  readonly path: string;
  readonly c: { readonly scope: string; readonly kind: string };
}): number {
  if (f.c.kind === 'copilot') return 1;
  if (f.c.kind === 'copilot-scoped') return 2;
  return f.c.scope === '.' ? 0 : 2 + f.path.split('/').length;
}

function cutToBytes(text: string, max: number): string {
  if (max <= 0) return '';
  const buf = Buffer.from(text);
  if (buf.length <= max) return text;
  // Back off to a character boundary.
  let end = max;
  while (end > 0 && ((buf[end] ?? 0) & 0xc0) === 0x80) end--;
  return buf.subarray(0, end).toString('utf8');
}

/**
 * `---\napplyTo: "src/**\/*.ts,docs/**"\n---\n…` → the globs and the body. No front matter or no
 * `applyTo`: applies everywhere (as Copilot reads such a file).
 */
export function frontMatter(raw: string): { readonly applyTo: string[]; readonly body: string } {
  const m = /^---\r?\n([\s\S]*?)\r?\n---\r?\n?/.exec(raw);
  if (m === null) return { applyTo: ['**'], body: raw };
  const line = /^applyTo:\s*(.*)$/m.exec(m[1] ?? '');
  const value = (line?.[1] ?? '').trim().replace(/^(['"])(.*)\1$/, '$2');
  const globs = value
    .split(',')
    .map((g) => g.trim())
    .filter((g) => g !== '');
  return { applyTo: globs.length === 0 ? ['**'] : globs, body: raw.slice(m[0].length) };
}

/** A glob (`**`, `*`, `?`, `{a,b}`) as a RegExp over a whole relative path. */
export function globToRegExp(glob: string): RegExp {
  let re = '';
  let braces = 0;
  const g = glob.replace(/^\.\//, '').replace(/^\//, '');
  for (let i = 0; i < g.length; i++) {
    const ch = g[i] ?? '';
    if (ch === '*') {
      if (g[i + 1] === '*') {
        const slash = g[i + 2] === '/';
        re += slash ? '(?:.*/)?' : '.*';
        i += slash ? 2 : 1;
      } else re += '[^/]*';
    } else if (ch === '?') re += '[^/]';
    else if (ch === '{') {
      braces++;
      re += '(?:';
    } else if (ch === '}' && braces > 0) {
      braces--;
      re += ')';
    } else if (ch === ',' && braces > 0) re += '|';
    else re += ch.replace(/[.+^$()|[\]\\]/g, '\\$&');
  }
  // A glob naming a folder covers what is inside it.
  return new RegExp(`^${re}(?:/.*)?$`);
}

/** Folders never searched for instruction files, and the most entries a walk looks at. */
const SKIP_DIRS = new Set([
  '.git',
  'node_modules',
  '.venv',
  'venv',
  '__pycache__',
  'dist',
  'build',
  'target',
  'vendor',
]);
const MAX_WALK_ENTRIES = 50_000;

/**
 * An InstructionSource over a probe of a host copy that no sandbox process has seen yet (the CLI's
 * copy of a checkout): a walk of its folders (links are never followed: the probe refuses them).
 */
export function probeInstructionSource(probe: WorkspaceProbe): InstructionSource {
  return {
    listFiles: async () => {
      const out: string[] = [];
      const queue = ['.'];
      let seen = 0;
      while (queue.length > 0 && seen < MAX_WALK_ENTRIES) {
        const dir = queue.shift() ?? '.';
        for (const name of (await probe.listDir(dir)) ?? []) {
          seen++;
          const rel = dir === '.' ? name : `${dir}/${name}`;
          if (classify(rel) !== null) out.push(rel);
          else if (
            !SKIP_DIRS.has(name) &&
            rel.length < MAX_PATH_CHARS &&
            (await probe.listDir(rel)) !== null
          ) {
            queue.push(rel);
          }
        }
      }
      return out;
    },
    readText: (path) => probe.readText(path),
  };
}
