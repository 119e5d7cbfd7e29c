import type { Logger } from 'pino';
import type { EventOf, Limits } from '../events/schema.js';
import type { Sandbox } from '../sandbox/sandbox.js';
import type { FreshVerifier } from './agent-run.js';
import { runTestCommand, type TestRunResult } from './run-test-command.js';
import { proofTree, type ProofTree } from './runner-config-guard.js';
import { WorkspaceGit, WorkspaceGitError } from './workspace-git.js';

/** What the final runs test: the change (the last checkpoint), and how. */
export interface FinalRunSpec {
  readonly baseTree: string;
  readonly baseCommit: string;
  /** The last checkpoint's tree and diff (null: too large to record). */
  readonly tree: string;
  readonly diff: string | null;
  readonly testCommand: string;
  readonly limits: Limits;
  /** Its durations bound the runs (testing/bounds.ts). */
  readonly baseline: EventOf<'test_run'> | null;
  readonly signal: AbortSignal | undefined;
}

/**
 * Where the verdict's runs happen: the agent's own sandbox, or a fresh one no agent process ran in
 * (FreshVerifier). final-verification.ts runs the same steps in either: `prepare`, then `run` (the
 * final run), then for the without-fix run `checkoutOnly` and `run` again, and `close` always.
 */
export interface FinalRunPlace {
  /** What every run here is recorded with: the sandbox it ran in, when not the agent's. */
  readonly recordedAs: { readonly sandbox?: 'fresh' };
  /** Makes the workspace the change's proof tree (runner-config-guard.ts), or says why it cannot be tested. */
  prepare(): Promise<ProofTree>;
  /** The test command through the harness shell, which the agent's commands never touch. */
  run(): Promise<TestRunResult>;
  /** `paths` (the change's test files) as the change has them, everything else the base's. */
  checkoutOnly(paths: readonly string[]): Promise<void>;
  /** The agent's workspace back at the change's tree (checked), or the fresh sandbox closed. */
  close(): Promise<void>;
}

/**
 * The agent's own sandbox: the workspace is made the proof tree (the change with the base's runner
 * configuration) and put back afterwards, checked to be the change's tree again. A workspace that
 * cannot be moved fails the run (`workspace`), as any workspace failure does.
 */
export function ownSandbox(sandbox: Sandbox, git: WorkspaceGit, spec: FinalRunSpec): FinalRunPlace {
  let moved = false;
  return {
    recordedAs: {},
    async prepare() {
      const proof = await proofTree(git, spec.baseTree, spec.tree, spec.testCommand);
      if (proof.ok && proof.tree !== spec.tree) {
        moved = true;
        await git.restore(spec.baseTree, proof.tree, null);
      }
      return proof;
    },
    run: () => testRun(sandbox, spec),
    async checkoutOnly(paths) {
      moved = true;
      await git.checkoutOnly(spec.baseTree, spec.tree, paths);
    },
    async close() {
      if (moved) await git.restore(spec.baseTree, spec.tree, spec.diff);
    },
  };
}

/**
 * A sandbox from `verifier`: the base commit there, the recorded change applied (from its diff: the
 * tree object exists only in the agent's repository) and checked to give the checkpoint's tree, its
 * runner configuration put back to the base's. Not testable, with the reason, when the change
 * cannot be rebuilt there (a diff too large to record, or one that does not reproduce the tree).
 * A sandbox that cannot be made throws, as any sandbox failure does (the job's retry resumes here).
 */
export function freshSandbox(
  verifier: FreshVerifier,
  spec: FinalRunSpec,
  logger: Logger | undefined,
): FinalRunPlace {
  let fresh: { readonly sandbox: Sandbox; close(): Promise<void> } | null = null;
  let git: WorkspaceGit | null = null;
  const opened = (): { readonly sandbox: Sandbox; readonly git: WorkspaceGit } => {
    if (fresh === null || git === null) throw new Error('the fresh sandbox is not prepared');
    return { sandbox: fresh.sandbox, git };
  };
  return {
    recordedAs: { sandbox: 'fresh' },
    async prepare() {
      if (spec.diff === null)
        return {
          ok: false,
          reason:
            'the change was too large to record, so it could not be rebuilt in a fresh sandbox and tested there',
        };
      const started = performance.now();
      fresh = await verifier.open(spec.baseCommit);
      git = await WorkspaceGit.open(fresh.sandbox);
      let proof: ProofTree;
      try {
        await git.restore(spec.baseTree, spec.tree, spec.diff);
        proof = await proofTree(git, spec.baseTree, spec.tree, spec.testCommand);
        if (proof.ok && proof.tree !== spec.tree) await git.restore(spec.baseTree, proof.tree, null);
      } catch (error) {
        if (!(error instanceof WorkspaceGitError)) throw error;
        return {
          ok: false,
          reason: `the change could not be rebuilt in a fresh sandbox to test it: ${error.message}`,
        };
      }
      if (proof.ok)
        logger?.info(
          { ms: Math.round(performance.now() - started) },
          'the change rebuilt in a fresh sandbox',
        );
      return proof;
    },
    run: () => testRun(opened().sandbox, spec),
    checkoutOnly: (paths) => opened().git.checkoutOnly(spec.baseTree, spec.tree, paths),
    async close() {
      await fresh?.close();
    },
  };
}

function testRun(sandbox: Sandbox, spec: FinalRunSpec): Promise<TestRunResult> {
  return runTestCommand(sandbox, spec.testCommand, spec.limits, spec.signal, 'harness', spec.baseline);
}
