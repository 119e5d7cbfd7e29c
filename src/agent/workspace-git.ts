import type { Sandbox } from '../sandbox/sandbox.js';
import { shellQuote } from '../sandbox/shell-session.js';

/** Git with every repo-controlled hook that could run code switched off. */
const GIT = 'git -c core.fsmonitor=false -c core.hooksPath=/dev/null -c core.quotepath=off -c color.ui=never';

export class WorkspaceGitError extends Error {
  override readonly name = 'WorkspaceGitError';
}

export interface Snapshot {
  readonly tree: string;
}

/**
 * Checkpoints of the workspace as git trees, taken inside the sandbox by the harness shell (so
 * repository content, and the repository's own git config, is only ever interpreted where
 * untrusted code already runs; what comes out is data). A private index file keeps `git add -A` cheap:
 * only files whose stat data changed are hashed again. Ignored files (build output, node_modules)
 * are not part of a checkpoint.
 */
export class WorkspaceGit {
  private constructor(
    private readonly sandbox: Sandbox,
    private readonly indexFile: string,
  ) {}

  static async open(sandbox: Sandbox): Promise<WorkspaceGit> {
    const r = await run(sandbox, `${GIT} rev-parse --absolute-git-dir`);
    const gitDir = r.trim();
    const indexFile = `${gitDir}/issue-agent-index`;
    await run(
      sandbox,
      `[ -f ${shellQuote(indexFile)} ] || { [ -f ${shellQuote(`${gitDir}/index`)} ] && cp ${shellQuote(`${gitDir}/index`)} ${shellQuote(indexFile)}; } || true`,
    );
    return new WorkspaceGit(sandbox, indexFile);
  }

  async head(): Promise<{ commit: string; tree: string }> {
    const out = (await run(this.sandbox, `${GIT} rev-parse HEAD 'HEAD^{tree}'`)).trim().split('\n');
    const [commit, tree] = out;
    if (commit === undefined || tree === undefined)
      throw new WorkspaceGitError('the repository has no commit yet');
    return { commit, tree };
  }

  /** The working tree (tracked and untracked, minus ignored files) as a tree object. */
  async snapshot(): Promise<string> {
    const idx = `GIT_INDEX_FILE=${shellQuote(this.indexFile)}`;
    const out = await run(this.sandbox, `${idx} ${GIT} add -A && ${idx} ${GIT} write-tree`);
    // The tree id is write-tree's one line of output; `add` may warn (line endings, a nested
    // repository) on the same stream before it.
    const tree = out
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => /^[0-9a-f]{40}([0-9a-f]{24})?$/.test(l))
      .at(-1);
    if (tree === undefined)
      throw new WorkspaceGitError(`git write-tree gave no tree id: ${out.slice(0, 500)}`);
    return tree;
  }

  async diff(fromTree: string, toTree: string): Promise<{ diff: string; truncated: boolean; files: number }> {
    const r = await this.sandbox.harnessExec(
      `(cd ${shellQuote(this.sandbox.workdir)} && ${GIT} diff --no-ext-diff --no-textconv --binary ${fromTree} ${toTree})`,
      { timeoutMs: 60_000 },
    );
    if (r.exitCode !== 0) throw new WorkspaceGitError(`git diff failed: ${r.output.slice(0, 500)}`);
    const files = (
      await run(this.sandbox, `${GIT} diff --no-ext-diff --name-only ${fromTree} ${toTree} | wc -l`)
    ).trim();
    return { diff: r.output, truncated: r.truncated, files: Number(files) };
  }

  /** Paths added or changed (not deleted) between two trees. */
  async changedFiles(fromTree: string, toTree: string): Promise<string[]> {
    if (fromTree === toTree) return [];
    const out = await run(
      this.sandbox,
      `${GIT} diff --no-ext-diff --name-only --diff-filter=d -z ${fromTree} ${toTree}`,
    );
    return out.split('\0').filter((p) => p !== '');
  }

  async diffStat(fromTree: string, toTree: string): Promise<string> {
    if (fromTree === toTree) return '';
    return (await run(this.sandbox, `${GIT} diff --no-ext-diff --stat=100 ${fromTree} ${toTree}`)).trimEnd();
  }

  /**
   * Makes the working tree equal to a checkpoint: from the tree object when the repository still has
   * it (same machine), else from the base commit plus the recorded diff (a fresh clone elsewhere,
   * another worker host). Either way the result is checked: the working tree's snapshot must be the
   * checkpoint's tree, file for file, or the run stops rather than continue on other files.
   */
  async restore(baseTree: string, tree: string, diff: string | null): Promise<'object' | 'diff'> {
    const idx = `GIT_INDEX_FILE=${shellQuote(this.indexFile)}`;
    // A fresh copy of the same base (another host, the CLI's new copy) has the base's files but not
    // its tree object when the base held uncommitted changes: a snapshot writes it.
    await this.snapshot();
    const has = await this.sandbox.harnessExec(
      `(cd ${shellQuote(this.sandbox.workdir)} && ${GIT} cat-file -e ${tree}^{tree})`,
      {
        timeoutMs: 30_000,
      },
    );
    if (has.exitCode === 0) {
      await run(this.sandbox, `${idx} ${GIT} add -A && ${idx} ${GIT} read-tree --reset -u ${tree}`);
      await this.expectTree(tree, 'from its tree object');
      return 'object';
    }
    if (diff === null)
      throw new WorkspaceGitError(
        `checkpoint ${tree} is not in this repository and its diff was too large to record`,
      );
    await run(this.sandbox, `${idx} ${GIT} add -A && ${idx} ${GIT} read-tree --reset -u ${baseTree}`);
    // The diff is data from the event log: it travels on stdin, never inside the command text.
    const patch = Buffer.from(diff.endsWith('\n') ? diff : `${diff}\n`, 'utf8');
    const r = await this.sandbox.harnessExec(
      // `cat` drains what git apply left unread, so no patch byte is ever read as shell input.
      `head -c ${patch.length} | { (cd ${shellQuote(this.sandbox.workdir)} && ${GIT} apply --binary --whitespace=nowarn -); __ia_s=$?; cat >/dev/null; exit $__ia_s; }`,
      { timeoutMs: 60_000, stdin: patch },
    );
    if (r.exitCode !== 0)
      throw new WorkspaceGitError(`could not re-apply the checkpoint diff: ${r.output.slice(0, 500)}`);
    await this.expectTree(tree, 'from the checkpoint diff');
    return 'diff';
  }

  /**
   * Makes the working tree the base tree with only `paths` taken from `tree` (the change's test files
   * on the code before it). The paths are data from a diff in the sandbox: they travel on stdin as
   * NUL-separated literal pathspecs, never in the command text. Undo with `restore`.
   */
  async checkoutOnly(baseTree: string, tree: string, paths: readonly string[]): Promise<void> {
    const idx = `GIT_INDEX_FILE=${shellQuote(this.indexFile)}`;
    await run(this.sandbox, `${idx} ${GIT} add -A && ${idx} ${GIT} read-tree --reset -u ${baseTree}`);
    if (paths.length === 0) return;
    const list = Buffer.from(paths.map((p) => `${p}\0`).join(''), 'utf8');
    const r = await this.sandbox.harnessExec(
      // `cat` drains what git left unread, so no byte of the list is ever read as shell input.
      `head -c ${list.length} | { (cd ${shellQuote(this.sandbox.workdir)} && ${idx} GIT_LITERAL_PATHSPECS=1 ${GIT} checkout ${tree} --pathspec-from-file=- --pathspec-file-nul); __ia_s=$?; cat >/dev/null; exit $__ia_s; }`,
      { timeoutMs: 60_000, stdin: list },
    );
    if (r.exitCode !== 0)
      throw new WorkspaceGitError(`could not check out the change's test files: ${r.output.slice(0, 500)}`);
  }

  private async expectTree(tree: string, how: string): Promise<void> {
    const rebuilt = await this.snapshot();
    if (rebuilt !== tree)
      throw new WorkspaceGitError(
        `the workspace rebuilt ${how} is tree ${rebuilt}, not the checkpoint's ${tree}`,
      );
  }
}

async function run(sandbox: Sandbox, command: string): Promise<string> {
  const r = await sandbox.harnessExec(`(cd ${shellQuote(sandbox.workdir)} && ${command})`, {
    timeoutMs: 60_000,
  });
  if (r.exitCode !== 0)
    throw new WorkspaceGitError(
      `${command.split(' ').slice(0, 8).join(' ')} failed: ${r.output.slice(0, 500)}`,
    );
  return r.output;
}
