import { gitSource } from '../agent/runner-config-guard.js';
import { WorkspaceGit, WorkspaceGitError } from '../agent/workspace-git.js';
import type { Sandbox } from '../sandbox/sandbox.js';
import { findRunnerConfig, type RunnerConfigTouch } from '../testing/runner-config.js';

/**
 * Grading's half of "a change never decides how its own proof runs" (testing/runner-config.ts):
 * in a grading sandbox whose working tree is the base commit with `patch` applied, the files of the
 * patch that decide how tests run are put back as the base commit has them (a file the patch added
 * is removed; package.json gets the base's runner fields), before the test patch goes in and the
 * listed tests run. SWE-bench's harness runs a patch's `conftest.py` as it comes; ours does not.
 *
 * Which paths the patch touches is read from the patch applied to the base tree in an index of its
 * own, not from the working tree, so an ignore rule in the patch cannot hide a file from the check.
 * Every other file of the working tree (what the environment's setup made) is left as it is.
 */
export async function baseRunnerConfig(
  sandbox: Sandbox,
  patch: string | null,
  testCommand: string,
): Promise<
  | { readonly ok: true; readonly touched: readonly RunnerConfigTouch[] }
  | { readonly ok: false; readonly reason: string }
> {
  if (patch === null || patch.trim() === '') return { ok: true, touched: [] };
  try {
    const git = await WorkspaceGit.open(sandbox);
    const base = (await git.head()).tree;
    const applied = await git.appliedTree(base, patch);
    if ('error' in applied)
      return { ok: false, reason: `the patch could not be read against the base commit: ${applied.error}` };
    const config = await findRunnerConfig(gitSource(git, base, applied.tree), testCommand);
    if (config.entries.length === 0) return { ok: true, touched: [] };
    const proof = await git.treeWith(applied.tree, config.entries);
    await git.writePaths(proof, config.entries);
    return { ok: true, touched: config.touched };
  } catch (error) {
    if (!(error instanceof WorkspaceGitError)) throw error;
    return { ok: false, reason: `its test runner configuration could not be checked: ${error.message}` };
  }
}
