/**
 * How much less CPU a sandbox gets than the process that runs it, when the two compete.
 *
 * A worker host runs the repositories' tests in its sandboxes; on a small host they take every core,
 * and the worker (the harness, git, the event log, the progress comment, Redis) waits behind them:
 * steps slow down, and before job locks had a thread of their own (worker/lock-keeper.ts) jobs were
 * handed to another worker and ran twice. A weight is not a limit: an idle worker leaves the
 * sandboxes every core; only when both want the CPU does the worker go first.
 *
 * One setting, a `nice` value (ISSUE_AGENT_SANDBOX_NICE, 0–19, default 10; 0 turns it off):
 *  - local sandboxes (isolated or not) run their whole process tree under `nice -n N`;
 *  - Docker containers get the CPU shares the kernel gives a process at that nice value
 *    (HostConfig.CpuShares: 110 of the default 1024 at nice 10; cgroup v2 engines turn it into
 *    cpu.weight). Shares weigh a container against its cgroup siblings: other containers, and the
 *    worker itself when it runs in a container of the same engine (compose.yaml). A worker running
 *    directly on the host competes with the engine's cgroup as a whole, which the shares do not change.
 */
export const DEFAULT_SANDBOX_NICE = 10;

/** The kernel's CPU weight of a task per nice value 0..19 (kernel/sched/core.c, sched_prio_to_weight). */
const NICE_WEIGHTS = [
  1024, 820, 655, 526, 423, 335, 272, 215, 172, 137, 110, 87, 70, 56, 45, 36, 29, 23, 18, 15,
] as const;

/** Docker CPU shares matching a nice value (the engine's default, 1024, is nice 0). */
export function cpuSharesForNice(nice: number): number {
  return NICE_WEIGHTS[Math.min(19, Math.max(0, Math.round(nice)))] ?? 1024;
}

/** Whether `n` is a nice value the setting accepts. */
export function validNice(n: number): boolean {
  return Number.isInteger(n) && n >= 0 && n <= 19;
}

let processNice = DEFAULT_SANDBOX_NICE;

/**
 * The nice value of the local sandboxes this process starts: DEFAULT_SANDBOX_NICE unless the
 * process set its own (the App's workers, from ISSUE_AGENT_SANDBOX_NICE).
 */
export function sandboxNice(): number {
  return processNice;
}

export function setSandboxNice(n: number): void {
  if (!validNice(n)) throw new RangeError(`a sandbox nice value is 0 to 19, got ${n}`);
  processNice = n;
}

/** `argv` run under `nice` (an absolute path to it), or as it is when the priority is not lowered. */
export function underNice(nice: string, argv: readonly string[]): string[] {
  const n = sandboxNice();
  return n === 0 ? [...argv] : [nice, '-n', String(n), ...argv];
}
