import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { SandboxProcess } from '../../sandbox/sandbox.js';

/** Bytes of one message from a server; past it the server is dropped (a runaway or hostile one). */
const MAX_MESSAGE_BYTES = 4 * 1024 * 1024;

/**
 * MCP's stdio transport over a process inside the sandbox (Sandbox.openProcess): newline-delimited
 * JSON-RPC on its stdin and stdout, as the SDK's StdioClientTransport speaks to a local child, but the
 * server never runs on the host. Everything it sends is parsed as data by the SDK's schemas.
 */
export class SandboxStdioTransport implements Transport {
  onclose?: (() => void) | undefined;
  onerror?: ((error: Error) => void) | undefined;
  onmessage?: ((message: JSONRPCMessage) => void) | undefined;
  private readonly buffer = new ReadBuffer({ maxBufferSize: MAX_MESSAGE_BYTES });
  private closed = false;

  constructor(private readonly process: SandboxProcess) {}

  start(): Promise<void> {
    this.process.stdout.on('data', (chunk: Buffer) => {
      try {
        this.buffer.append(chunk);
        for (;;) {
          const message = this.buffer.readMessage();
          if (message === null) break;
          this.onmessage?.(message);
        }
      } catch (error) {
        this.onerror?.(error instanceof Error ? error : new Error(String(error)));
      }
    });
    void this.process.closed.then(() => {
      this.finish();
    });
    return Promise.resolve();
  }

  send(message: JSONRPCMessage): Promise<void> {
    if (this.closed) return Promise.reject(new Error('the MCP server has exited'));
    return new Promise((resolve) => {
      if (this.process.stdin.write(serializeMessage(message))) resolve();
      else this.process.stdin.once('drain', resolve);
    });
  }

  close(): Promise<void> {
    this.process.close();
    this.finish();
    return Promise.resolve();
  }

  private finish(): void {
    if (this.closed) return;
    this.closed = true;
    this.buffer.clear();
    this.onclose?.();
  }
}
