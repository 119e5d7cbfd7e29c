import type { Logger } from 'pino';
import { startMcpServers } from '../agent/mcp/servers.js';
import { runAgent, type Outcome } from '../agent/run-agent.js';
import { defaultTools } from '../agent/tools/index.js';
import type { AgentEnv } from '../config/agent-env.js';
import type { FileEventStore } from '../events/file-event-store.js';
import type { AgentEvent } from '../events/schema.js';
import type { Model } from '../model/model.js';
import { Redactor } from '../publish/redact.js';
import type { ProvisionedWorkspace } from './provision.js';

/**
 * The agent's run in a provisioned workspace: its MCP servers started (a warning each for one that
 * is not available) and closed after; known secrets (the model key, MCP header values, the setup
 * secrets) redacted from everything the run records.
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
  },
): Promise<Outcome> {
  const redactor = new Redactor([
    ...(env.anthropicApiKey === null ? [] : [env.anthropicApiKey]),
    ...(env.mcp?.secrets ?? []),
    ...ws.setupSecrets,
  ]);
  const mcp = await startMcpServers(ws.sandbox, ws.mcp, {
    allowCidrs: env.environment.allowCidrs,
    trusted: new Set(Object.keys(env.mcp?.config.mcpServers ?? {})),
    extraCaPem: env.environment.extraCaPem,
    logger: options.logger,
  });
  try {
    return await runAgent({
      store,
      sandbox: ws.sandbox,
      model,
      prices: env.prices,
      signal: options.signal,
      logger: options.logger,
      tools: new Map([...defaultTools(), ...mcp.tools.map((t) => [t.name, t] as const)]),
      notices: mcp.warnings.map((message) => ({ code: 'mcp_unavailable', message })),
      scrub: (text) => redactor.redact(text),
      onEvent: options.onEvent,
    });
  } finally {
    await mcp.close();
  }
}
