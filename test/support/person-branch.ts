import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const AS_ALICE = ['-c', 'user.name=Alice', '-c', 'user.email=alice@example.invalid'];

/**
 * A person's branch: `files` committed on top of `main` of `source`, pushed straight into the bare
 * repository `bare` of the simulator (a fork's, or the same repository's), as a person's push.
 */
export function pushBranch(
  bare: string,
  source: string,
  branch: string,
  files: Readonly<Record<string, string>>,
  message = `${branch}: a change`,
): void {
  const dir = mkdtempSync(join(tmpdir(), 'ia-person-branch-'));
  const git = (...args: string[]): string =>
    execFileSync('git', [...AS_ALICE, ...args], { cwd: dir, encoding: 'utf8' });
  try {
    git('clone', '-q', '--branch', 'main', source, '.');
    git('checkout', '-q', '-b', branch);
    for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
    git('add', '-A');
    git('commit', '-q', '-m', message);
    git('push', '-q', bare, `HEAD:refs/heads/${branch}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A branch of `bare` whose one commit on top of `main` changes nothing (a pull request to ask about); its sha. */
export function emptyChangeBranch(bare: string, branch: string): string {
  const git = (...args: string[]): string =>
    execFileSync('git', ['-C', bare, ...AS_ALICE, ...args], { encoding: 'utf8' }).trim();
  const commit = git('commit-tree', 'main^{tree}', '-p', 'main', '-m', 'a change');
  git('update-ref', `refs/heads/${branch}`, commit);
  return commit;
}
