import { gitOutput } from './fixture-repo.js';
import type { GitHubSim } from './github-sim/index.js';

/**
 * A reader of `git log --format=<format> <branch>` in one of the simulator's repositories: its lines,
 * newest first. A branch's history is a function of its tip, and the tip is read from the
 * simulator's ref files (no process), so git runs once per tip the branch has had, not once per call:
 * a test that polls the log while a job pushes forks one `git log` per push instead of one per poll.
 * A missing branch goes to git, which fails as `git log` of it always did.
 */
export function branchLogReader(
  sim: GitHubSim,
  owner: string,
  repo: string,
  format: string,
): (branch: string) => string[] {
  const byTip = new Map<string, readonly string[]>();
  return (branch) => {
    const tip = sim.branchTip(owner, repo, branch);
    const known = tip === null ? undefined : byTip.get(tip);
    if (known !== undefined) return [...known];
    const lines = gitOutput(sim.bareRepoPath(owner, repo), 'log', `--format=${format}`, tip ?? branch)
      .trim()
      .split('\n');
    if (tip !== null) byTip.set(tip, lines);
    return [...lines];
  };
}
