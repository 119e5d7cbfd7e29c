import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { McpConfig, McpServerConfig } from '../../config/mcp-config.js';
import { startHostEgress, type HostEgress } from '../../sandbox/egress/host-egress.js';
import type { Sandbox } from '../../sandbox/sandbox.js';
import { defineTool, truncateMiddle, type Tool, type ToolOutput } from '../tools/tool.js';
import { SandboxStdioTransport } from './sandbox-transport.js';

/**
 * The job's MCP servers. A stdio server runs inside the job's sandbox (Sandbox.openProcess: the same
 * user, limits and network as every command of the agent, never the host); the host speaks MCP to
 * it with the official SDK's client. Its tools are given to the model as `mcp__<server>__<tool>`
 * with their schemas, only those on the server's `tools:` allowlist when it has one. A server that
 * cannot start, answer or list its tools in time is a warning and the run goes on without it.
 *
 * A remote (url) server is reached by the worker over Streamable HTTP, never by the sandbox: its
 * headers (a deployment's token) stay in this process. Every request goes through an egress proxy
 * whose allowlist is exactly the remote servers' hosts and ports, with the sandbox's address policy
 * (no loopback, private, link-local or metadata address unless the deployment allows the range),
 * so a repository's config cannot point the worker at its own network. Redirects are not followed.
 * Header values are removed from everything a server returns before the model or the log sees it.
 */

const START_TIMEOUT_MS = 30_000;
const CALL_TIMEOUT_MS = 120_000;
/** Characters of a server's tool description given to the model (it is the repository's text). */
const MAX_DESCRIPTION = 1000;
const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;
/** A tool whose input schema is longer than this (as JSON) is held back: it goes into every request. */
const MAX_SCHEMA_CHARS = 8000;
/** Server text in a warning or a failed call (it reaches the model and the log). */
const MAX_WARNING_CHARS = 2000;

export interface McpStart {
  readonly tools: readonly Tool[];
  /** One line per server that is not available, and why. */
  readonly warnings: readonly string[];
  /** Servers started, with the tools given to the model and those its allowlist held back. */
  readonly servers: readonly {
    readonly name: string;
    readonly tools: readonly string[];
    readonly held: readonly string[];
  }[];
  close(): Promise<void>;
}

export interface McpOptions {
  readonly startTimeoutMs?: number;
  readonly callTimeoutMs?: number;
  /** Otherwise refused address ranges a deployment's remote server may be in (its egress setting). */
  readonly allowCidrs?: readonly string[];
  /** Names of the deployment's servers: only they get `allowCidrs` and ports other than 443 and 80. */
  readonly trusted?: ReadonlySet<string>;
  /** PEM of extra CA certificates for remote servers' TLS. */
  readonly extraCaPem?: string | null;
  readonly logger?: Logger;
}

export async function startMcpServers(
  sandbox: Sandbox,
  config: McpConfig,
  options: McpOptions = {},
): Promise<McpStart> {
  const tools: Tool[] = [];
  const warnings: string[] = [];
  const servers: { name: string; tools: string[]; held: string[] }[] = [];
  const clients: Client[] = [];
  const entries = Object.entries(config.mcpServers);
  const hide = hider(entries.flatMap(([, s]) => ('url' in s ? Object.values(s.headers) : [])));
  const egresses: HostEgress[] = [];
  for (const [name, server] of entries) {
    try {
      let egress: HostEgress | null = null;
      if ('url' in server) {
        egress = await remoteEgress(server.url, options.trusted?.has(name) === true, options);
        egresses.push(egress);
      }
      const started = await startOne(
        sandbox,
        name,
        server,
        egress,
        options.startTimeoutMs ?? START_TIMEOUT_MS,
      );
      clients.push(started.client);
      const allowed = server.tools === undefined ? null : new Set(server.tools);
      const given: string[] = [];
      const held: string[] = [];
      for (const t of started.tools) {
        const full = `mcp__${name}__${t.name}`;
        if (
          (allowed !== null && !allowed.has(t.name)) ||
          !TOOL_NAME.test(full) ||
          JSON.stringify(t.inputSchema).length > MAX_SCHEMA_CHARS
        ) {
          held.push(t.name);
          continue;
        }
        given.push(t.name);
        tools.push(
          mcpTool(started.client, name, 'url' in server ? new URL(server.url).host : null, t, {
            callTimeoutMs: options.callTimeoutMs ?? CALL_TIMEOUT_MS,
            hide,
            dropped: started.dropped,
          }),
        );
      }
      servers.push({ name, tools: given, held });
    } catch (error) {
      warnings.push(
        truncateMiddle(
          hide(
            `The MCP server "${name}" is not available: ${error instanceof Error ? error.message : String(error)}`,
          ),
          MAX_WARNING_CHARS,
        ),
      );
    }
  }
  return {
    tools,
    warnings,
    servers,
    close: async () => {
      await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
      await Promise.all(egresses.map((e) => e.close()));
    },
  };
}

/**
 * The egress of one remote server: its host and port only. A deployment's server (`trusted`) may be
 * in the deployment's private ranges and on any port; a repository's may not (its config would
 * otherwise reach whatever those ranges hold), and only on 443 or 80.
 */
async function remoteEgress(url: string, trusted: boolean, options: McpOptions): Promise<HostEgress> {
  const u = new URL(url);
  const port = portOf(u);
  if (!trusted && port !== 443 && port !== 80) {
    throw new Error(`a repository's remote server must be on port 443 or 80, not ${port}`);
  }
  return startHostEgress({
    allowHosts: [u.hostname.replace(/^\[(.*)\]$/, '$1')],
    allowedPorts: [port],
    allowCidrs: trusted ? (options.allowCidrs ?? []) : [],
    extraCaPem: options.extraCaPem,
    logger: options.logger,
  });
}

function portOf(u: URL): number {
  return u.port !== '' ? Number(u.port) : u.protocol === 'https:' ? 443 : 80;
}

/**
 * Replaces each header value (4 characters or more) in a text by `[redacted]`, and each word of 8
 * or more in one (the token of `Bearer <token>`, which a server may echo alone).
 */
function hider(values: readonly string[]): (text: string) => string {
  const secrets = [
    ...new Set([
      ...values.filter((v) => v.length >= 4),
      ...values.flatMap((v) => v.split(/\s+/)).filter((w) => w.length >= 8),
    ]),
  ].sort((a, b) => b.length - a.length);
  if (secrets.length === 0) return (text) => text;
  return (text) => secrets.reduce((t, secret) => t.split(secret).join('[redacted]'), text);
}

interface ListedTool {
  readonly name: string;
  readonly description?: string | undefined;
  readonly inputSchema: Record<string, unknown>;
}

async function startOne(
  sandbox: Sandbox,
  name: string,
  server: McpServerConfig,
  egress: HostEgress | null,
  timeoutMs: number,
): Promise<{
  readonly client: Client;
  readonly tools: readonly ListedTool[];
  /** Why the server was dropped while running, or null. */
  readonly dropped: () => string | null;
}> {
  let transport: Transport;
  let stderrTail = (): string => '';
  let dropped = (): string | null => null;
  if ('url' in server) {
    if (egress === null) throw new Error('no egress for remote servers');
    transport = new StreamableHTTPClientTransport(new URL(server.url), {
      fetch: egress.fetch,
      requestInit: { headers: server.headers },
      redirectPolicy: 'same-origin',
    });
  } else {
    if (sandbox.openProcess === undefined) {
      throw new Error(
        `the ${sandbox.kind} sandbox here cannot run an MCP server (it needs the Docker sandbox or the isolated local one)`,
      );
    }
    const process = await sandbox.openProcess([server.command, ...server.args], { env: server.env });
    const stdio = new SandboxStdioTransport(process);
    transport = stdio;
    stderrTail = () => process.stderrTail();
    dropped = () => stdio.droppedFor;
  }
  const client = new Client({ name: 'issue-agent', version: '1' });
  const timeout = <T>(p: Promise<T>, what: string): Promise<T> =>
    Promise.race([
      p,
      new Promise<never>((_, reject) =>
        setTimeout(() => {
          reject(new Error(`${what} took longer than ${Math.round(timeoutMs / 1000)} s`));
        }, timeoutMs).unref(),
      ),
    ]);
  try {
    await timeout(client.connect(transport, { timeout: timeoutMs }), 'starting it');
    const listed = await timeout(client.listTools(undefined, { timeout: timeoutMs }), 'listing its tools');
    return {
      client,
      dropped,
      tools: listed.tools.map((t) => ({
        name: t.name,
        description: t.description,
        inputSchema: t.inputSchema,
      })),
    };
  } catch (error) {
    await client.close().catch(() => undefined);
    const tail = stderrTail().trim().split('\n').slice(-3).join(' | ').slice(0, 300);
    throw new Error(
      `${error instanceof Error ? error.message : String(error)}${tail === '' ? '' : ` (its stderr: ${tail})`}`,
      { cause: error },
    );
  }
}

function mcpTool(
  client: Client,
  server: string,
  remoteHost: string | null,
  t: ListedTool,
  options: {
    readonly callTimeoutMs: number;
    readonly hide: (text: string) => string;
    readonly dropped: () => string | null;
  },
): Tool {
  const { callTimeoutMs, hide, dropped } = options;
  const description = hide((t.description ?? '').replace(/\s+/g, ' ').trim()).slice(0, MAX_DESCRIPTION);
  const where = remoteHost === null ? 'it runs in the sandbox' : `a remote server at ${remoteHost}`;
  return defineTool({
    name: `mcp__${server}__${t.name}`,
    description: `Tool "${t.name}" of the MCP server "${server}" (${where}). ${description}`,
    schema: z.record(z.string(), z.unknown()),
    // Server text: the header values removed from it too.
    inputSchema: {
      ...(JSON.parse(hide(JSON.stringify(t.inputSchema))) as Record<string, unknown>),
      type: 'object',
    },
    async run(input, ctx): Promise<ToolOutput> {
      try {
        const r = await client.callTool({ name: t.name, arguments: input }, undefined, {
          timeout: callTimeoutMs,
          ...(ctx.signal === undefined ? {} : { signal: ctx.signal }),
        });
        const blocks = Array.isArray(r.content) ? (r.content as unknown[]) : [];
        const text = blocks.map(describeBlock).join('\n');
        return {
          content: truncateMiddle(hide(text === '' ? '(no content)' : text), ctx.limits.observationChars),
          isError: r.isError === true,
          mutates: true,
        };
      } catch (error) {
        return {
          content: truncateMiddle(
            hide(
              `The MCP tool ${server}/${t.name} failed: ${dropped() ?? (error instanceof Error ? error.message : String(error))}`,
            ),
            MAX_WARNING_CHARS,
          ),
          isError: true,
          mutates: true,
        };
      }
    },
  });
}

/** An MCP content block as text for the model. */
function describeBlock(b: unknown): string {
  if (typeof b !== 'object' || b === null || !('type' in b)) return '';
  if (b.type === 'text' && 'text' in b && typeof b.text === 'string') return b.text;
  if (b.type === 'resource' && 'resource' in b && typeof b.resource === 'object' && b.resource !== null) {
    const r = b.resource as { uri?: unknown; text?: unknown };
    return typeof r.text === 'string' ? r.text : `[resource ${String(r.uri)}]`;
  }
  return `[${String(b.type)} content]`;
}
