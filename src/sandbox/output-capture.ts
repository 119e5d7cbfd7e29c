import { closeSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';

export interface CaptureLimits {
  /** Bytes kept from the start of the output. */
  readonly headBytes: number;
  /** Bytes kept from the end of the output. */
  readonly tailBytes: number;
  /** Directory for the spill file that receives the complete output once it passes head + tail. */
  readonly spillDir: string;
}

export interface CapturedOutput {
  readonly text: string;
  readonly bytes: number;
  readonly truncated: boolean;
  readonly fullOutputPath?: string;
}

/**
 * Collects a command's output in bounded memory. Up to head + tail bytes are kept verbatim; past that
 * the head and a rolling tail stay in memory and every byte goes to a spill file, written
 * synchronously so a fast producer cannot queue unbounded buffers behind a slow disk.
 */
export class OutputCapture {
  private head: Buffer[] = [];
  private headLen = 0;
  private tail: Buffer[] = [];
  private tailLen = 0;
  private total = 0;
  private spillFd: number | null = null;
  private spillPath: string | null = null;

  constructor(private readonly limits: CaptureLimits) {}

  push(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.total += chunk.length;
    if (this.spillFd !== null) writeSync(this.spillFd, chunk);
    let rest = chunk;
    if (this.headLen < this.limits.headBytes) {
      const take = Math.min(this.limits.headBytes - this.headLen, rest.length);
      this.head.push(rest.subarray(0, take));
      this.headLen += take;
      rest = rest.subarray(take);
    }
    if (rest.length === 0) return;
    this.tail.push(rest);
    this.tailLen += rest.length;
    if (this.tailLen > this.limits.tailBytes) {
      if (this.spillFd === null) this.openSpill();
      this.trimTail();
    }
  }

  finish(): CapturedOutput {
    if (this.spillFd !== null) {
      closeSync(this.spillFd);
      this.spillFd = null;
    }
    const head = Buffer.concat(this.head).toString('utf8');
    const tail = Buffer.concat(this.tail).toString('utf8');
    if (this.spillPath === null) return { text: head + tail, bytes: this.total, truncated: false };
    const omitted = this.total - this.headLen - this.tailLen;
    return {
      text: `${head}\n[... ${omitted} bytes omitted ...]\n${tail}`,
      bytes: this.total,
      truncated: true,
      fullOutputPath: this.spillPath,
    };
  }

  /** Writes what is held so far (everything, since nothing was dropped yet) and switches to spilling. */
  private openSpill(): void {
    this.spillPath = join(this.limits.spillDir, `output-${randomBytes(6).toString('hex')}.log`);
    this.spillFd = openSync(this.spillPath, 'w', 0o600);
    for (const b of this.head) writeSync(this.spillFd, b);
    for (const b of this.tail) writeSync(this.spillFd, b);
  }

  private trimTail(): void {
    while (this.tail.length > 0 && this.tailLen - (this.tail[0]?.length ?? 0) >= this.limits.tailBytes) {
      const dropped = this.tail.shift();
      this.tailLen -= dropped?.length ?? 0;
    }
    const excess = this.tailLen - this.limits.tailBytes;
    const first = this.tail[0];
    if (excess > 0 && first !== undefined) {
      this.tail[0] = first.subarray(excess);
      this.tailLen -= excess;
    }
  }
}
