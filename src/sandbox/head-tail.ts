/** Keeps the first and last bytes of a stream, with a marker for what was left out. */
export class HeadTail {
  private head: Buffer[] = [];
  private headBytes = 0;
  private tail: Buffer[] = [];
  private tailBytes = 0;
  total = 0;
  constructor(
    private readonly maxHead: number,
    private readonly maxTail: number,
  ) {}
  push(c: Buffer): void {
    this.total += c.length;
    if (this.headBytes < this.maxHead) {
      const take = c.subarray(0, this.maxHead - this.headBytes);
      this.head.push(take);
      this.headBytes += take.length;
      c = c.subarray(take.length);
    }
    if (c.length === 0) return;
    this.tail.push(c);
    this.tailBytes += c.length;
    while (this.tailBytes - (this.tail[0]?.length ?? 0) >= this.maxTail) {
      this.tailBytes -= this.tail.shift()?.length ?? 0;
    }
  }
  text(): string {
    const head = Buffer.concat(this.head).toString('utf8');
    let tail = Buffer.concat(this.tail);
    if (tail.length > this.maxTail) tail = tail.subarray(tail.length - this.maxTail);
    const skipped = this.total - this.headBytes - tail.length;
    return skipped > 0
      ? `${head}\n[… ${skipped} bytes of output omitted …]\n${tail.toString('utf8')}`
      : head + tail.toString('utf8');
  }
}
