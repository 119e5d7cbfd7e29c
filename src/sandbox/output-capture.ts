import { closeSync, constants, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';

export interface CaptureLimits {
  /** Bytes kept from the start of the output. */
  readonly headBytes: number;
  /** Bytes kept from the end of the output. */
  readonly tailBytes: number;
  /**
   * Host directory for the spill file that receives the output once it passes head + tail. It must
   * be one no sandbox process can write (the file is created there by name).
   */
  readonly spillDir: string;
  /**
   * Bytes the spill file keeps at most (default DEFAULT_SPILL_LIMIT). Past it the output is still
   * counted, and read so the command is never blocked, but dropped: a command printing forever
   * costs the host no disk beyond this.
   */
  readonly spillLimitBytes?: number;
}

/** Bytes of one command's output kept on the host at most. */
export const DEFAULT_SPILL_LIMIT = 64 * 1024 * 1024;

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
  private spilled = 0;

  constructor(private readonly limits: CaptureLimits) {}

  push(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.total += chunk.length;
    if (this.spillFd !== null) this.spill(chunk);
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
      const dropped = this.total - this.spilled;
      if (dropped > 0)
        writeSync(
          this.spillFd,
          `\n[... ${dropped} more bytes of output were dropped: only the first ${this.spilled} are kept ...]\n`,
        );
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
    // O_EXCL | O_NOFOLLOW: a fresh file, never one (or a link) someone put there first.
    this.spillFd = openSync(
      this.spillPath,
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
      0o600,
    );
    for (const b of this.head) this.spill(b);
    for (const b of this.tail) this.spill(b);
  }

  private spill(chunk: Buffer): void {
    if (this.spillFd === null) return;
    const room = (this.limits.spillLimitBytes ?? DEFAULT_SPILL_LIMIT) - this.spilled;
    if (room <= 0) return;
    const part = chunk.length <= room ? chunk : chunk.subarray(0, room);
    writeSync(this.spillFd, part);
    this.spilled += part.length;
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
