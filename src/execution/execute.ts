import { providerSecrets } from '../model/provider-config.js';
import type { Logger } from 'pino';
import { startMcpServers } from '../agent/mcp/servers.js';
import { runAgent, type AgentDeps, type Outcome } from '../agent/run-agent.js';
import { defaultTools } from '../agent/tools/index.js';
import type { AgentEnv } from '../config/agent-env.js';
import type { McpConfig } from '../config/mcp-config.js';
import type { EventStore } from '../events/event-store.js';
import type { FileEventStore } from '../events/file-event-store.js';
import type { AgentEvent } from '../events/schema.js';
import type { Model } from '../model/model.js';
import { Redactor } from '../publish/redact.js';
import type { Sandbox } from '../sandbox/sandbox.js';
import type { ProvisionedWorkspace } from './provision.js';

/** What one agent run in a ready sandbox needs, whichever entry point made the sandbox. */
export interface AgentRunInput {
  readonly store: EventStore;
  readonly sandbox: Sandbox;
  readonly model: Model;
  /** The deployment's and the repository's MCP servers, started in `sandbox` for this run. */
  readonly mcp: McpConfig;
  readonly env: Pick<AgentEnv, 'prices' | 'mcp' | 'environment'>;
  /** Removes every secret the run knows of from what it records (the model key, MCP headers, tokens). */
  readonly scrub: (text: string) => string;
  readonly signal?: AbortSignal | undefined;
  readonly logger: Logger;
  readonly onEvent?: ((e: AgentEvent) => void) | undefined;
  /** Where the verdict's final run happens (AgentDeps.verifier). */
  readonly verifier?: AgentDeps['verifier'];
  /** Test baselines kept between runs (AgentDeps.baselines): only where no run can write them. */
  readonly baselines?: AgentDeps['baselines'];
  /** The month's shared spending limits (AgentDeps.budget). */
  readonly budget?: AgentDeps['budget'];
}

/**
 * The agent's run in a ready sandbox: its MCP servers started (a warning each for one that is not
 * available, which the model and the trajectory see once, also across a resume) and closed after,
 * whatever happens. Remote servers are reached from this process through an egress proxy with the
 * deployment's address ranges. The CLI, eval and the App worker run the agent here.
 */
export async function runAgentIn(input: AgentRunInput): Promise<Outcome> {
  const mcp = await startMcpServers(input.sandbox, input.mcp, {
    allowCidrs: input.env.environment.allowCidrs,
    trusted: new Set(Object.keys(input.env.mcp?.config.mcpServers ?? {})),
    extraCaPem: input.env.environment.extraCaPem,
    logger: input.logger,
  });
  if (mcp.servers.length > 0) input.logger.info({ servers: mcp.servers }, 'MCP servers');
  // try/finally, not .finally(): building the run's arguments may throw, and the servers (and their
  // egress proxies) must end with the run either way.
  try {
    return await runAgent({
      store: input.store,
      sandbox: input.sandbox,
      model: input.model,
      prices: input.env.prices,
      signal: input.signal,
      logger: input.logger,
      tools: new Map([...defaultTools(), ...mcp.tools.map((t) => [t.name, t] as const)]),
      notices: mcp.warnings.map((message) => ({ code: 'mcp_unavailable', message })),
      scrub: input.scrub,
      onEvent: input.onEvent,
      verifier: input.verifier,
      baselines: input.baselines,
      budget: input.budget,
    });
  } finally {
    await mcp.close();
  }
}

/**
 * The agent's run in a provisioned workspace (see runAgentIn), with the secrets it knows of (the
 * model key, MCP header values, the setup secrets) redacted from everything the run records.
 */
export async function executeRun(
  store: FileEventStore,
  ws: ProvisionedWorkspace,
  model: Model,
  env: AgentEnv,
  options: {
    readonly signal?: AbortSignal | undefined;
    readonly logger: Logger;
    readonly onEvent?: ((e: AgentEvent) => void) | undefined;
    /** Test baselines kept between runs (AgentDeps.baselines): only where no run can write them. */
    readonly baselines?: AgentDeps['baselines'];
  },
): Promise<Outcome> {
  const redactor = new Redactor([
    ...providerSecrets(env.provider),
    ...(env.mcp?.secrets ?? []),
    ...ws.setupSecrets,
  ]);
  return runAgentIn({
    store,
    sandbox: ws.sandbox,
    model,
    mcp: ws.mcp,
    env,
    scrub: (text) => redactor.redact(text),
    signal: options.signal,
    logger: options.logger,
    onEvent: options.onEvent,
    baselines: options.baselines,
  });
}
