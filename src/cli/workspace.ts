import type { AgentEnv } from '../config/agent-env.js';
import {
  LocalSandboxUnavailableError,
  provision,
  ProvisionInputError,
  type ProvisionedWorkspace,
  type SandboxChoice,
} from '../execution/provision.js';
import { backendKinds, isBackendKind, loadBackend } from '../sandbox/backends.js';

/**
 * The CLI's side of provisioning (src/execution does the work): the `--sandbox` flag, the setup
 * line on the terminal, and input problems as usage errors.
 */

/** Bad usage or bad input: exit 2, one line, nothing touched. */
export class UsageError extends Error {}

/** How the CLI's flag turns setup off, as a failed setup's message names it. */
export const SETUP_OFF_FLAG = '--setup off';

/** The `--sandbox` flag's value: a backend of the table (sandbox/backends.ts), `local` by default. */
export function sandboxKind(raw: string | undefined): string {
  const kind = raw ?? 'local';
  if (isBackendKind(kind)) return kind;
  const kinds = backendKinds();
  const named = `${kinds.slice(0, -1).join(', ')} or ${kinds[kinds.length - 1] ?? ''}`;
  throw new UsageError(`--sandbox must be ${named}, got "${raw ?? ''}"`);
}

/** The CLI's choice of where runs' sandboxes are made: the flag's backend, chosen once per command. */
export async function chooseSandbox(kind: string, env: AgentEnv): Promise<SandboxChoice> {
  return { backend: await loadBackend(kind), home: env.hostHome, setupOff: SETUP_OFF_FLAG };
}

/** A copy of the user's checkout and a sandbox over it (see execution/provision.ts). */
export async function openWorkspace(
  repo: string,
  sandbox: SandboxChoice,
  env: AgentEnv,
  trajectory: string,
  /** The run's id (its conversation): the containers' `job` label is `cli-<runId>`. */
  runId: string,
  setup: boolean,
  more: {
    /** Cancels the opening (Ctrl-C): what was made is removed, SandboxCancelledError is thrown. */
    readonly signal?: AbortSignal | undefined;
  } = {},
): Promise<ProvisionedWorkspace> {
  try {
    return await provision({
      repo,
      sandbox,
      env,
      trajectory,
      runId,
      setup,
      signal: more.signal,
      onSetupPlan: (plan) => {
        process.stderr.write(`setup: ${plan.commands.map((c) => c.command).join(' && ')} (${plan.reason})\n`);
      },
    });
  } catch (error) {
    if (error instanceof LocalSandboxUnavailableError)
      throw new UsageError(
        `${error.message}. Use --sandbox docker, or --sandbox unconfined to run without isolation (trusted work only).`,
      );
    if (error instanceof ProvisionInputError) throw new UsageError(error.message);
    throw error;
  }
}
