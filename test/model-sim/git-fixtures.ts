import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

/** Outcome of applying a patch: the texts of the paths it touches (null: deleted), or an error. */
export type ApplyOutcome = Map<string, string | null> | { error: string };

/** Real git in throwaway repositories under one temp dir: diffs to make patches, `git apply` to judge. */
export class GitScratch {
  private readonly root = mkdtempSync(join(tmpdir(), 'ia-git-scratch-'));
  private dirs = 0;

  cleanup(): void {
    rmSync(this.root, { recursive: true, force: true });
  }

  /** A fresh repository holding `files`. */
  repo(files: ReadonlyMap<string, string>): string {
    const dir = join(this.root, `r${this.dirs++}`);
    mkdirSync(dir);
    assert.equal(git(dir, ['init', '-q']).code, 0);
    for (const [path, text] of files) writeFile(dir, path, text);
    return dir;
  }

  /** `git diff` of one file from `before` to `after` (null: absent), with `context` lines of context. */
  diff(path: string, before: string | null, after: string | null, context = 3): string {
    const dir = this.repo(before === null ? new Map() : new Map([[path, before]]));
    git(dir, ['add', '-A']);
    git(dir, [
      '-c',
      'user.name=t',
      '-c',
      'user.email=t@example.invalid',
      'commit',
      '-q',
      '--allow-empty',
      '-m',
      'before',
    ]);
    if (after === null) rmSync(join(dir, path));
    else writeFile(dir, path, after);
    git(dir, ['add', '-A']);
    return git(dir, ['diff', '--cached', `-U${context}`]).stdout;
  }

  /** What real `git apply` makes of `patch` on `files`. */
  apply(files: ReadonlyMap<string, string>, patch: string, paths: readonly string[]): ApplyOutcome {
    const dir = this.repo(files);
    writeFileSync(join(dir, '.patch'), patch);
    const r = git(dir, ['apply', '.patch']);
    if (r.code !== 0) return { error: r.stderr };
    return new Map(
      paths.map((p) => [p, existsSync(join(dir, p)) ? readFileSync(join(dir, p), 'utf8') : null] as const),
    );
  }

  /**
   * A generated case: a file of few distinct lines (so context repeats), a `git diff` of random edits
   * to it, sometimes with hunk headers that drift from the truth, applied to the file itself or to the
   * file with unrelated edits (so hunks move, or stop applying).
   */
  generated(seed: number): { files: Map<string, string>; patch: string } | null {
    const next = rng(seed);
    const base = randomLines(next, 5 + Math.floor(next() * 40));
    const baseNewline = next() < 0.8;
    const changed = mutate(next, base, 1 + Math.floor(next() * 3));
    const changedNewline = next() < 0.2 ? !baseNewline : baseNewline;
    const context = next() < 0.15 ? 1 : 3;
    let patch = this.diff('f.txt', joinLines(base, baseNewline), joinLines(changed, changedNewline), context);
    if (patch === '') return null;
    if (next() < 0.3) {
      const drift = Math.floor(next() * 7) - 3;
      const shift = (v: string): number => Math.max(Number(v) === 0 ? 0 : 2, Number(v) + drift);
      patch = patch.replace(
        /^@@ -(\d+)(,\d+)? \+(\d+)/gm,
        (_m, o: string, c: string | undefined, n: string) => `@@ -${shift(o)}${c ?? ''} +${shift(n)}`,
      );
    }
    const target = next() < 0.6 ? mutate(next, base, 1 + Math.floor(next() * 2)) : base;
    return { files: new Map([['f.txt', joinLines(target, baseNewline)]]), patch };
  }
}

function git(cwd: string, args: readonly string[]): { code: number; stdout: string; stderr: string } {
  const r = spawnSync('git', ['-c', 'core.autocrlf=false', '-c', 'apply.whitespace=nowarn', ...args], {
    cwd,
    encoding: 'utf8',
  });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

function writeFile(dir: string, path: string, text: string): void {
  mkdirSync(dirname(join(dir, path)), { recursive: true });
  writeFileSync(join(dir, path), text);
}

/** A small deterministic PRNG (mulberry32), so a failing case can be replayed from its seed. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Few distinct lines, so context repeats often; non-ASCII text, a blank line, one of only whitespace.
const VOCAB = ['{', '}', '  return x;', '', 'x = 1', '  // é ü', 'end', '\t  ', 'if (a) {'];

function randomLines(next: () => number, count: number): string[] {
  return Array.from({ length: count }, () => VOCAB[Math.floor(next() * VOCAB.length)] ?? '');
}

export function joinLines(lines: readonly string[], finalNewline: boolean): string {
  return lines.length === 0 ? '' : lines.join('\n') + (finalNewline ? '\n' : '');
}

/** Random edits: replace, delete or insert a few runs of lines. */
function mutate(next: () => number, lines: readonly string[], edits: number): string[] {
  const out = [...lines];
  for (let e = 0; e < edits; e++) {
    const at = Math.floor(next() * (out.length + 1));
    const del = Math.floor(next() * 3);
    const add = randomLines(next, Math.floor(next() * 3));
    if (del === 0 && add.length === 0) add.push(`new ${e}`);
    out.splice(at, del, ...add.map((l) => (next() < 0.5 ? `${l} #${e}` : l)));
  }
  return out;
}
