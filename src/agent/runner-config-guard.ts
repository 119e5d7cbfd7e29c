import type { EventOf } from '../events/schema.js';
import {
  findRunnerConfig,
  MAX_SCANNED_BYTES,
  runnerConfigNote,
  type RunnerConfigChange,
  type RunnerConfigSource,
} from '../testing/runner-config.js';
import { WorkspaceGitError, type WorkspaceGit } from './workspace-git.js';

/** The most runner-configuration files a test_run event names (the count is kept whole). */
const MAX_RECORDED = 50;

/**
 * The tree a verdict's final run tests: the change's, with its runner configuration taken from the
 * base (testing/runner-config.ts), so the change does not decide how its own proof runs.
 */
export type ProofTree =
  | {
      readonly ok: true;
      /** The tree to test; the change's own tree when it touches no runner configuration. */
      readonly tree: string;
      readonly config: RunnerConfigChange;
      /** The paths taken from the base: never among the change's test files run without its code. */
      readonly fromBase: ReadonlySet<string>;
    }
  /** The change's runner configuration could not be established: nothing may be proven. */
  | { readonly ok: false; readonly reason: string };

/** What the harness reads of the two trees, through git in the sandbox. */
export function gitSource(git: WorkspaceGit, baseTree: string, tree: string): RunnerConfigSource {
  return {
    changes: () => git.treeChanges(baseTree, tree),
    listBase: (globs) => git.listTree(baseTree, globs),
    findBase: (paths) => git.findInTree(baseTree, paths),
    readBlobs: (blobs) => git.readBlobs(blobs, MAX_SCANNED_BYTES),
  };
}

/**
 * The proof tree of a change (`tree` over `baseTree`) in the sandbox `git` works in; the tree
 * object is written there, nothing is checked out. A git failure (a path that is not UTF-8, a
 * tree that could not be built) ends in `ok: false`: without knowing which files decide how the
 * tests run, no run can be proof.
 */
export async function proofTree(
  git: WorkspaceGit,
  baseTree: string,
  tree: string,
  testCommand: string | null,
): Promise<ProofTree> {
  try {
    const config = await findRunnerConfig(gitSource(git, baseTree, tree), testCommand);
    const made = await git.treeWith(tree, config.entries);
    return { ok: true, tree: made, config, fromBase: new Set(config.entries.map((e) => e.path)) };
  } catch (error) {
    if (!(error instanceof WorkspaceGitError)) throw error;
    return {
      ok: false,
      reason: `the change's test runner configuration could not be checked, so its tests could not be run as the base commit runs them: ${error.message}`,
    };
  }
}

/** The optional `runnerConfig` field of the final run's event. */
export function runnerConfigField(
  proof: ProofTree,
): Pick<EventOf<'test_run'>, 'runnerConfig'> | Record<string, never> {
  if (!proof.ok || proof.config.touched.length === 0) return {};
  return {
    runnerConfig: {
      files: proof.config.touched.slice(0, MAX_RECORDED).map((t) => ({ path: t.path, why: t.why })),
      total: proof.config.touched.length,
    },
  };
}

/** A verdict's reason, saying which of the change's files the final run took from the base. */
export function withRunnerConfigNote<T extends { readonly reason: string }>(
  stop: T,
  final: EventOf<'test_run'>,
): T {
  const rc = final.runnerConfig;
  if (rc === undefined) return stop;
  const note = runnerConfigNote(
    rc.files.map((f) => f.path),
    rc.total,
  );
  return { ...stop, reason: `${stop.reason}; ${note}` };
}
