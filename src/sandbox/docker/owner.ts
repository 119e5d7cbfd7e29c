import { readFileSync, readlinkSync } from 'node:fs';
import { hostname } from 'node:os';

/** Labels every container of ours carries; the reaper and the tests select on them. */
export const LABEL_SANDBOX = 'issue-agent.sandbox';
export const LABEL_JOB = 'issue-agent.job';
export const LABEL_OWNER = 'issue-agent.owner';
export const LABEL_POOL = 'issue-agent.pool';

/**
 * Identifies a worker process across PID reuse and PID namespaces: `host/pidns:pid:starttime`
 * (pidns: the inode of the process's PID namespace; starttime from /proc/PID/stat, in clock ticks
 * since boot, `0` where /proc is not available). A PID means something only in its namespace: two
 * workers in containers on one host (compose.yaml, host network, so one hostname) both run as PID 7,
 * and the host's PID 7 is another process again. Without the namespace, one worker starting up would
 * take another's live sandboxes for orphans and remove them.
 */
export function ownerId(pid: number = process.pid): string {
  return `${hostname()}/${pidNamespace() ?? 'unknown'}:${pid}:${processStartTime(pid) ?? 0}`;
}

/**
 * Whether the worker process that owns a container is still running. `unknown` for one on another
 * host or in another PID namespace (a worker in another container): its liveness cannot be seen
 * from here, so only an age limit collects its containers (reap.ts).
 */
export function ownerState(owner: string): 'alive' | 'gone' | 'unknown' {
  const parts = owner.split(':');
  const start = parts.pop();
  const pidText = parts.pop();
  const place = parts.join(':');
  const ns = pidNamespace();
  if (ns === null || place !== `${hostname()}/${ns}` || pidText === undefined || start === undefined)
    return 'unknown';
  const pid = Number(pidText);
  if (!Number.isInteger(pid) || pid <= 0) return 'gone';
  const actual = processStartTime(pid);
  if (actual === null) return 'gone';
  return start === '0' || String(actual) === start ? 'alive' : 'gone';
}

/** The inode number of this process's PID namespace (`pid:[4026531836]`), null without /proc. */
function pidNamespace(): string | null {
  try {
    return /^pid:\[(\d+)\]$/.exec(readlinkSync('/proc/self/ns/pid'))?.[1] ?? null;
  } catch {
    return null;
  }
}

function processStartTime(pid: number): number | null {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  // comm (field 2) may contain spaces and parentheses: the fields after it start past the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const start = Number(fields[19]);
  return Number.isFinite(start) ? start : null;
}
