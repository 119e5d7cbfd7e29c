import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * A Server-Sent Events response: the headers that keep proxies from buffering it, `: ping` comments
 * every 15 s so idle connections stay open, and a close hook.
 */
export class SseStream {
  private readonly ping: NodeJS.Timeout;
  private closedFlag = false;
  private readonly closeListeners: (() => void)[] = [];

  constructor(
    req: IncomingMessage,
    private readonly res: ServerResponse,
    headers: Readonly<Record<string, string>> = {},
    pingMs = 15_000,
  ) {
    res.writeHead(200, {
      ...headers,
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    res.write('retry: 2000\n\n');
    this.ping = setInterval(() => {
      this.comment('ping');
    }, pingMs);
    const onClose = (): void => {
      this.close();
    };
    req.once('close', onClose);
    res.once('close', onClose);
  }

  get closed(): boolean {
    return this.closedFlag;
  }

  onClose(listener: () => void): void {
    if (this.closedFlag) listener();
    else this.closeListeners.push(listener);
  }

  /** One message; `data` is JSON-encoded (one line, so no `data:` splitting is needed). */
  send(event: string, data: unknown, id?: number): void {
    if (this.closedFlag) return;
    const lines = [
      ...(id === undefined ? [] : [`id: ${id}`]),
      `event: ${event}`,
      `data: ${JSON.stringify(data)}`,
    ];
    this.res.write(`${lines.join('\n')}\n\n`);
  }

  comment(text: string): void {
    if (!this.closedFlag) this.res.write(`: ${text}\n\n`);
  }

  close(): void {
    if (this.closedFlag) return;
    this.closedFlag = true;
    clearInterval(this.ping);
    if (!this.res.writableEnded) this.res.end();
    for (const l of this.closeListeners.splice(0)) l();
  }
}
