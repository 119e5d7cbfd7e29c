import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { z } from 'zod';
import type { McpConfig, McpServerConfig } from '../../config/mcp-config.js';
import type { Sandbox } from '../../sandbox/sandbox.js';
import { defineTool, truncateMiddle, type Tool, type ToolOutput } from '../tools/tool.js';
import { SandboxStdioTransport } from './sandbox-transport.js';

/**
 * The job's MCP servers. A stdio server runs inside the job's sandbox (Sandbox.openProcess: the same
 * user, limits and network as every command of the agent, never the host); the host speaks MCP to
 * it with the official SDK's client. Its tools are given to the model as `mcp__<server>__<tool>`
 * with their schemas, only those on the server's `tools:` allowlist when it has one. A server that
 * cannot start, answer or list its tools in time is a warning and the run goes on without it.
 */

const START_TIMEOUT_MS = 30_000;
const CALL_TIMEOUT_MS = 120_000;
/** Characters of a server's tool description given to the model (it is the repository's text). */
const MAX_DESCRIPTION = 1000;
const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

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

export async function startMcpServers(
  sandbox: Sandbox,
  config: McpConfig,
  options: { readonly startTimeoutMs?: number; readonly callTimeoutMs?: number } = {},
): Promise<McpStart> {
  const tools: Tool[] = [];
  const warnings: string[] = [];
  const servers: { name: string; tools: string[]; held: string[] }[] = [];
  const clients: Client[] = [];
  for (const [name, server] of Object.entries(config.mcpServers)) {
    try {
      const started = await startOne(sandbox, name, server, options.startTimeoutMs ?? START_TIMEOUT_MS);
      clients.push(started.client);
      const allowed = server.tools === undefined ? null : new Set(server.tools);
      const given: string[] = [];
      const held: string[] = [];
      for (const t of started.tools) {
        const full = `mcp__${name}__${t.name}`;
        if ((allowed !== null && !allowed.has(t.name)) || !TOOL_NAME.test(full)) {
          held.push(t.name);
          continue;
        }
        given.push(t.name);
        tools.push(mcpTool(started.client, name, t, options.callTimeoutMs ?? CALL_TIMEOUT_MS));
      }
      servers.push({ name, tools: given, held });
    } catch (error) {
      warnings.push(
        `The MCP server "${name}" is not available: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
  }
  return {
    tools,
    warnings,
    servers,
    close: async () => {
      await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
    },
  };
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
  timeoutMs: number,
): Promise<{ readonly client: Client; readonly tools: readonly ListedTool[] }> {
  if (!('command' in server)) {
    throw new Error(
      'remote MCP servers (url) are not supported yet; run the server over stdio in the sandbox',
    );
  }
  if (sandbox.openProcess === undefined) {
    throw new Error(`the ${sandbox.kind} sandbox cannot run an MCP server (it needs the Docker sandbox)`);
  }
  const process = await sandbox.openProcess([server.command, ...server.args], { env: server.env });
  const client = new Client({ name: 'issue-agent', version: '1' });
  const transport = new SandboxStdioTransport(process);
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
      tools: listed.tools.map((t) => ({
        name: t.name,
        description: t.description,
        inputSchema: t.inputSchema,
      })),
    };
  } catch (error) {
    await client.close().catch(() => undefined);
    const tail = process.stderrTail().trim().split('\n').slice(-3).join(' | ').slice(0, 300);
    throw new Error(
      `${error instanceof Error ? error.message : String(error)}${tail === '' ? '' : ` (its stderr: ${tail})`}`,
      { cause: error },
    );
  }
}

function mcpTool(client: Client, server: string, t: ListedTool, callTimeoutMs: number): Tool {
  const description = (t.description ?? '').replace(/\s+/g, ' ').trim().slice(0, MAX_DESCRIPTION);
  return defineTool({
    name: `mcp__${server}__${t.name}`,
    description: `Tool "${t.name}" of the repository's MCP server "${server}" (it runs in the sandbox). ${description}`,
    schema: z.record(z.string(), z.unknown()),
    inputSchema: { ...t.inputSchema, type: 'object' },
    async run(input, ctx): Promise<ToolOutput> {
      try {
        const r = await client.callTool({ name: t.name, arguments: input }, undefined, {
          timeout: callTimeoutMs,
          ...(ctx.signal === undefined ? {} : { signal: ctx.signal }),
        });
        const blocks = Array.isArray(r.content) ? (r.content as unknown[]) : [];
        const text = blocks.map(describeBlock).join('\n');
        return {
          content: truncateMiddle(text === '' ? '(no content)' : text, ctx.limits.observationChars),
          isError: r.isError === true,
          mutates: true,
        };
      } catch (error) {
        return {
          content: `The MCP tool ${server}/${t.name} failed: ${error instanceof Error ? error.message : String(error)}`,
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
