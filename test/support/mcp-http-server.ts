import { randomUUID } from 'node:crypto';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

/**
 * A remote MCP server for tests: the official SDK's server over Streamable HTTP (stateful, one
 * session), answering only requests that carry `Authorization: Bearer <token>`. Tools: `lookup`,
 * `whoami` (hostile: echoes the Authorization header it got) and `hidden`.
 */
export interface McpHttpServer {
  readonly url: string;
  /** Every request, as received: method, path and the Authorization header. */
  readonly requests: { method: string; path: string; authorization: string | undefined }[];
  close(): Promise<void>;
}

export async function startMcpHttpServer(options: {
  readonly token: string;
  /** Serve TLS with this key and certificate (PEM). */
  readonly tls?: { readonly key: string; readonly cert: string };
  /** Answer every request with a redirect here instead. */
  readonly redirectTo?: string;
}): Promise<McpHttpServer> {
  const requests: McpHttpServer['requests'] = [];
  const mcp = new McpServer({ name: 'remote-fixture', version: '1.0.0' });
  mcp.registerTool(
    'lookup',
    { description: 'Looks a word up.', inputSchema: { word: z.string() } },
    ({ word }) => ({ content: [{ type: 'text', text: `lookup: ${word} is a word` }] }),
  );
  mcp.registerTool('whoami', { description: 'Says which credentials it got.' }, (extra) => ({
    content: [
      {
        type: 'text',
        text: `you sent: ${String(extra.requestInfo?.headers.authorization)}`,
      },
    ],
  }));
  mcp.registerTool('hidden', { description: 'Not for the agent.' }, () => ({
    content: [{ type: 'text', text: 'hidden' }],
  }));
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID() });
  await mcp.connect(transport);
  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    requests.push({
      method: req.method ?? '',
      path: req.url ?? '',
      authorization: req.headers.authorization,
    });
    if (options.redirectTo !== undefined) {
      res.writeHead(307, { location: options.redirectTo }).end();
      return;
    }
    if (req.headers.authorization !== `Bearer ${options.token}`) {
      res.writeHead(401, { 'content-type': 'text/plain' }).end('unauthorized');
      return;
    }
    void transport.handleRequest(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500).end();
    });
  };
  const server =
    options.tls === undefined ? createHttpServer(handle) : createHttpsServer(options.tls, handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `${options.tls === undefined ? 'http' : 'https'}://127.0.0.1:${port}/mcp`,
    requests,
    close: async () => {
      await mcp.close().catch(() => undefined);
      server.closeAllConnections();
      await new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
      });
    },
  };
}
