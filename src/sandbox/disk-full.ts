/** Output that may mean a filesystem is full; whether it is, `df` decides (see fullMount). */
export const DISK_FULL =
  /No space left on device|ENOSPC|Disk quota exceeded|EDQUOT|Wrote only \d+ of \d+ bytes/i;

/**
 * The first mount in `df -P -B1` output with less than 64 KiB (or a thousandth of its size) left,
 * or null. df reads the kernel's counters (statfs): a command cannot fake them.
 */
export function fullMount(dfOutput: string): string | null {
  for (const line of dfOutput.split('\n').slice(1)) {
    const cols = line.trim().split(/\s+/);
    const size = Number(cols[1]);
    const avail = Number(cols[3]);
    const mount = cols[5];
    if (mount === undefined || !Number.isFinite(size) || !Number.isFinite(avail)) continue;
    if (avail < Math.max(64 * 1024, size / 1000)) return mount;
  }
  return null;
}
