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

const headerName = z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$/, 'an HTTP header name');

/**
 * A Streamable HTTP server, reached by the worker (never the sandbox) through the egress proxy. In
 * the deployment's config a header value may name the worker's variables as `${NAME}` (a token that
 * never enters the sandbox, the trajectory or a PR); a repository's headers are literal text.
 */
export const remoteServer = z
  .object({
    url: z.url({ protocol: /^https?$/, error: 'an http(s) URL' }).refine((u) => {
      const parsed = new URL(u);
      return parsed.username === '' && parsed.password === '';
    }, 'no credentials in the URL: put them in headers'),
    headers: z
      .record(
        headerName,
        z
          .string()
          .max(8000)
          .regex(/^[^\r\n\0]*$/, 'no line breaks or NUL in a header value'),
      )
      .refine((h) => Object.keys(h).length <= 20, 'at most 20 headers')
      .default({}),
    tools,
  })
  .strict();

export const mcpConfig = z
  .object({
    mcpServers: z
      .record(serverName, z.union([stdioServer, remoteServer]))
      .refine((m) => Object.keys(m).length <= 20, 'at most 20 servers')
      .default({}),
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

const REFERENCE = /\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

/** A repository's servers: header values are literal, a `${NAME}` reference is refused. */
export const repositoryMcpConfig = mcpConfig.superRefine((config, ctx) => {
  for (const [name, server] of Object.entries(config.mcpServers)) {
    if (!('url' in server)) continue;
    for (const [header, value] of Object.entries(server.headers)) {
      if (value.includes('${')) {
        ctx.addIssue({
          code: 'custom',
          path: ['mcpServers', name, 'headers', header],
          message:
            'a repository cannot name deployment variables in headers (`${…}`); the deployment declares servers that need secrets (ISSUE_AGENT_MCP_CONFIG)',
        });
      }
    }
  }
});

/**
 * The deployment's servers with every `${NAME}` in a remote server's header values replaced by the
 * variable's value, and those values, which are secrets to redact wherever the job writes. A
 * variable that is unset or empty is an error naming it (a server that silently gets no token
 * fails later, and less clearly).
 */
export function expandDeploymentMcp(
  config: McpConfig,
  env: Readonly<Record<string, string | undefined>>,
): { readonly config: McpConfig; readonly secrets: readonly string[]; readonly missing: readonly string[] } {
  const secrets = new Set<string>();
  const missing = new Set<string>();
  const servers: Record<string, McpServerConfig> = {};
  for (const [name, server] of Object.entries(config.mcpServers)) {
    if (!('url' in server)) {
      servers[name] = server;
      continue;
    }
    const headers: Record<string, string> = {};
    for (const [header, value] of Object.entries(server.headers)) {
      const expanded = value.replace(REFERENCE, (_, variable: string) => {
        // A token read from a file often ends with a newline, which HTTP would drop and redaction miss.
        const v = env[variable]?.trim();
        if (v === undefined || v === '' || /[\r\n\0]/.test(v)) {
          missing.add(
            `${variable} (in ${name}'s ${header} header${v === undefined || v === '' ? '' : '; it holds a line break'})`,
          );
          return '';
        }
        secrets.add(v);
        return v;
      });
      // A value written into the config itself is as secret as one named by a variable.
      if (expanded.length >= 8) secrets.add(expanded);
      headers[header] = expanded;
    }
    servers[name] = { ...server, headers };
  }
  return { config: { mcpServers: servers }, secrets: [...secrets], missing: [...missing] };
}
