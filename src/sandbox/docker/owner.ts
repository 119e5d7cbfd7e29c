import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';

/** Labels every container of ours carries; the reaper and the tests select on them. */
export const LABEL_SANDBOX = 'issue-agent.sandbox';
export const LABEL_JOB = 'issue-agent.job';
export const LABEL_OWNER = 'issue-agent.owner';
export const LABEL_POOL = 'issue-agent.pool';

/**
 * Identifies a worker process across PID reuse: `host:pid:starttime` (starttime from
 * /proc/PID/stat, in clock ticks since boot; `0` where /proc is not available).
 */
export function ownerId(pid: number = process.pid): string {
  return `${hostname()}:${pid}:${processStartTime(pid) ?? 0}`;
}

/** Whether the worker process that owns a container is still running (on this host). */
export function ownerState(owner: string): 'alive' | 'gone' | 'unknown' {
  const parts = owner.split(':');
  const start = parts.pop();
  const pidText = parts.pop();
  const host = parts.join(':');
  if (host !== hostname() || pidText === undefined || start === undefined) return 'unknown';
  const pid = Number(pidText);
  if (!Number.isInteger(pid) || pid <= 0) return 'gone';
  const actual = processStartTime(pid);
  if (actual === null) return 'gone';
  return start === '0' || String(actual) === start ? 'alive' : 'gone';
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
