import { deserializeMessage, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { SandboxProcess } from '../../sandbox/sandbox.js';

/** Bytes of one message from a server; past it the server is dropped (a runaway or hostile one): its
 * process is closed, so pending calls fail at once rather than at their timeout. */
const MAX_MESSAGE_BYTES = 4 * 1024 * 1024;

/**
 * Newline-delimited lines from a byte stream, held as the list of chunks since the last newline. Cost is
 * linear in the bytes read: the SDK's ReadBuffer concatenates its whole buffer with every chunk, so one long
 * line costs the square of its length in copies, and a server sending megabytes swells the worker's memory
 * with garbage. A line longer than `maxBytes` is never held: its bytes are dropped up to its newline, and
 * the caller hears of it once.
 */
export class LineReader {
  private chunks: Buffer[] = [];
  private held = 0;
  private skipping = false;

  constructor(private readonly maxBytes: number) {}

  /** Bytes held now (at most maxBytes). */
  get heldBytes(): number {
    return this.held;
  }

  /** Feeds a chunk; calls `line` for each complete line and `overflow` when a line passes the cap. */
  push(chunk: Buffer, line: (text: string) => void, overflow: () => void): void {
    let start = 0;
    while (start < chunk.length) {
      const newline = chunk.indexOf(0x0a, start);
      const end = newline === -1 ? chunk.length : newline;
      if (!this.skipping) {
        if (this.held + (end - start) > this.maxBytes) {
          this.clear();
          this.skipping = true;
          overflow();
        } else if (end > start) {
          this.chunks.push(chunk.subarray(start, end));
          this.held += end - start;
        }
      }
      if (newline === -1) return;
      if (this.skipping) this.skipping = false;
      else {
        const text = Buffer.concat(this.chunks, this.held).toString('utf8').replace(/\r$/, '');
        this.clear();
        line(text);
      }
      start = newline + 1;
    }
  }

  clear(): void {
    this.chunks = [];
    this.held = 0;
  }
}

/**
 * MCP's stdio transport over a process inside the sandbox (Sandbox.openProcess): newline-delimited
 * JSON-RPC on its stdin and stdout, as the SDK's StdioClientTransport speaks to a local child, but the
 * server never runs on the host. Everything it sends is parsed as data by the SDK's schemas.
 */
export class SandboxStdioTransport implements Transport {
  onclose?: (() => void) | undefined;
  onerror?: ((error: Error) => void) | undefined;
  onmessage?: ((message: JSONRPCMessage) => void) | undefined;
  private readonly buffer = new LineReader(MAX_MESSAGE_BYTES);
  private closed = false;
  /** Why the transport dropped its server, or null. */
  droppedFor: string | null = null;

  constructor(private readonly process: SandboxProcess) {}

  start(): Promise<void> {
    this.process.stdout.on('data', (chunk: Buffer) => {
      if (this.closed) return;
      this.buffer.push(
        chunk,
        (line) => {
          try {
            this.onmessage?.(deserializeMessage(line));
          } catch (error) {
            this.onerror?.(error instanceof Error ? error : new Error(String(error)));
          }
        },
        () => {
          this.droppedFor = `it sent a message longer than ${MAX_MESSAGE_BYTES} bytes, so it was stopped`;
          this.onerror?.(new Error(this.droppedFor));
          void this.close();
        },
      );
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
