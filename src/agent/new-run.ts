import { randomUUID } from 'node:crypto';
import {
  SCHEMA_VERSION,
  type BaseState,
  type EnvironmentRecord,
  type Limits,
  type ModelSetup,
  type Task,
} from '../events/schema.js';
import type { Sandbox } from '../sandbox/sandbox.js';
import { detectTestCommand } from '../testing/detect-test-command.js';
import { SandboxFiles } from '../sandbox/sandbox-files.js';
import { sandboxProbe } from '../testing/sandbox-probe.js';
import { WorkspaceGit } from './workspace-git.js';

export interface NewRunOptions {
  readonly task: Task;
  readonly sandbox: Sandbox;
  readonly model: string;
  readonly limits: Limits;
  /** A configured test command wins over detection. */
  readonly testCommand?: string | undefined;
  readonly conversationId?: string | undefined;
  /**
   * Where the repository the run works on lives, as a label for people and for `resume` (the CLI's
   * checkout). Default: the sandbox's workspace root.
   */
  readonly workspacePath?: string | undefined;
  /**
   * The sandbox as recorded: an entry point passes its backend's name (SandboxBackend.kind, e.g.
   * `unconfined` for a LocalSandbox without isolation). Default: the sandbox's kind.
   */
  readonly sandboxLabel?: string | undefined;
  /** How the sandbox's environment was made (image, runtime, setup, egress), when it had a setup phase. */
  readonly environment?: EnvironmentRecord | null | undefined;
  /** The repository's instruction files, read from its base branch (see instructions.ts). */
  readonly instructions?: BaseState['instructions'] | undefined;
  /** Tools and thinking (config/agent-env.ts runModelSetup). Absent: schema tools, no thinking. */
  readonly modelSetup?: ModelSetup | undefined;
}

/**
 * The frozen facts a run starts from: the task, the base the diff is measured against (a snapshot
 * of the working tree, so uncommitted changes that were allowed in are part of the base, not of the
 * agent's change), the test command and the limits.
 */
export async function newBaseState(options: NewRunOptions): Promise<BaseState> {
  const git = await WorkspaceGit.open(options.sandbox);
  const head = await git.head();
  const baseTree = await git.snapshot();
  let testCommand: string | null = null;
  let testCommandSource: string | null = null;
  if (options.testCommand !== undefined) {
    testCommand = options.testCommand;
    testCommandSource = 'configured';
  } else {
    const detected = await detectTestCommand(sandboxProbe(new SandboxFiles(options.sandbox)));
    if (detected !== null) {
      testCommand = detected.command;
      testCommandSource = detected.source;
    }
  }
  return {
    schemaVersion: SCHEMA_VERSION,
    conversationId: options.conversationId ?? randomUUID(),
    createdAt: new Date().toISOString(),
    task: options.task,
    workspace: {
      path: options.workspacePath ?? options.sandbox.workdir,
      baseCommit: head.commit,
      baseTree,
    },
    model: options.model,
    sandbox: options.sandboxLabel ?? options.sandbox.kind,
    testCommand,
    testCommandSource,
    limits: options.limits,
    ...(options.environment == null ? {} : { environment: options.environment }),
    ...(options.instructions === undefined ? {} : { instructions: options.instructions }),
    ...(options.modelSetup === undefined ? {} : { modelSetup: options.modelSetup }),
  };
}
