import type { AgentEnv } from '../config/agent-env.js';
import {
  LocalSandboxUnavailableError,
  provision,
  ProvisionInputError,
  type ProvisionedWorkspace,
  type SandboxChoice,
} from '../execution/provision.js';

/**
 * The CLI's side of provisioning (src/execution does the work): the `--sandbox` flag, the setup
 * line on the terminal, and input problems as usage errors.
 */

/** Bad usage or bad input: exit 2, one line, nothing touched. */
export class UsageError extends Error {}

export function sandboxKind(raw: string | undefined): SandboxChoice {
  if (raw === undefined || raw === 'local') return 'local';
  if (raw === 'docker' || raw === 'unconfined') return raw;
  throw new UsageError(`--sandbox must be local, docker or unconfined, got "${raw}"`);
}

/** A copy of the user's checkout and a sandbox over it (see execution/provision.ts). */
export async function openWorkspace(
  repo: string,
  kind: SandboxChoice,
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
      kind,
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
