import { git } from '../execution/checkout-copy.js';

/** The paths a diff's headers name (both sides, renames and copies included). */
export function diffPaths(diff: string): string[] {
  const out = new Set<string>();
  for (const line of diff.split('\n')) {
    const m =
      /^diff --git a\/(.*) b\/(.*)$/.exec(line) ??
      /^(?:---|\+\+\+) [ab]\/(.*)$/.exec(line) ??
      /^(?:rename|copy) (?:from|to) (.*)$/.exec(line);
    if (m === null) continue;
    for (const p of m.slice(1)) out.add(p);
  }
  return [...out];
}

/** Whether a path names git's own data (`.git` as any component, in any case). */
export function touchesGitDir(path: string): boolean {
  return path.split(/[\\/]/).some((part) => part.toLowerCase() === '.git' || part.toLowerCase() === '.git.');
}

export type ApplyResult =
  { readonly applied: true; readonly files: number } | { readonly applied: false; readonly reason: string };

/**
 * Applies the agent's change to the user's working tree (never the index, never `.git`). A diff
 * naming anything under `.git` is refused outright (git apply refuses it too); a diff that no longer
 * applies (the user changed the same lines meanwhile) is left unapplied with the reason.
 */
export async function applyToCheckout(repo: string, diff: string): Promise<ApplyResult> {
  const paths = diffPaths(diff);
  const bad = paths.find(touchesGitDir);
  if (bad !== undefined) return { applied: false, reason: `the change touches ${bad}, inside .git` };
  const patch = Buffer.from(diff.endsWith('\n') ? diff : `${diff}\n`, 'utf8');
  try {
    await git(['-C', repo, 'apply', '--check', '--binary', '--whitespace=nowarn', '-'], { input: patch });
    await git(['-C', repo, 'apply', '--binary', '--whitespace=nowarn', '-'], { input: patch });
  } catch (error) {
    return { applied: false, reason: error instanceof Error ? error.message : String(error) };
  }
  return { applied: true, files: paths.length };
}
