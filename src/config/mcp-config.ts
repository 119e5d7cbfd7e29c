import { z } from 'zod';

/**
 * MCP servers in the common `{"mcpServers": {name: {command, args, env} | {url, headers}}}` shape,
 * with a per-server `tools:` allowlist. The same shape per repository (`mcp:` in
 * `.github/issue-agent.yml`) and for the deployment (`ISSUE_AGENT_MCP_CONFIG`, JSON).
 */
const serverName = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,24}$/, 'a server name is 1-24 letters, digits, `_` or `-`');
const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name');
const tools = z
  .array(z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'a tool name'))
  .max(200)
  .optional()
  .describe('Only these tools of the server are given to the agent; absent: all of them.');

export const stdioServer = z
  .object({
    command: z.string().min(1).max(500),
    args: z.array(z.string().max(2000)).max(50).default([]),
    /** Plain variables (they are visible in the sandbox: never a secret). */
    env: z.record(envName, z.string().max(4000)).default({}),
    tools,
  })
  .strict();

export const remoteServer = z
  .object({
    url: z.url(),
    headers: z.record(z.string(), z.string()).default({}),
    tools,
  })
  .strict();

export const mcpConfig = z
  .object({
    mcpServers: z.record(serverName, z.union([stdioServer, remoteServer])).default({}),
  })
  .strict();

export type McpConfig = z.infer<typeof mcpConfig>;
export type McpServerConfig = McpConfig['mcpServers'][string];

/**
 * The servers a job gets: the deployment's and the repository's; a repository cannot replace a
 * deployment server of the same name.
 */
export function mergeMcp(deployment: McpConfig | null, repository: McpConfig | undefined): McpConfig {
  return { mcpServers: { ...(repository?.mcpServers ?? {}), ...(deployment?.mcpServers ?? {}) } };
}
