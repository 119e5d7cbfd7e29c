import { readdir, readFile } from 'node:fs/promises';

/** Parent pid of every process visible in /proc (Linux). Processes that vanish mid-scan are skipped. */
async function parentMap(): Promise<Map<number, number[]>> {
  const children = new Map<number, number[]>();
  const entries = await readdir('/proc');
  await Promise.all(
    entries.map(async (name) => {
      const pid = Number(name);
      if (!Number.isInteger(pid) || pid <= 0) return;
      let stat: string;
      try {
        stat = await readFile(`/proc/${pid}/stat`, 'utf8');
      } catch {
        return;
      }
      // The command name is in parentheses and may itself contain spaces or parentheses.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const ppid = Number(fields[1]);
      const list = children.get(ppid);
      if (list === undefined) children.set(ppid, [pid]);
      else list.push(pid);
    }),
  );
  return children;
}

/** The direct children of `pid`. */
export async function childrenOf(pid: number): Promise<number[]> {
  return (await parentMap()).get(pid) ?? [];
}

/** Every descendant of `root` (not root itself), found by walking parent links in /proc. */
export async function descendantsOf(root: number): Promise<number[]> {
  const children = await parentMap();
  const out: number[] = [];
  const stack = [...(children.get(root) ?? [])];
  while (stack.length > 0) {
    const pid = stack.pop();
    if (pid === undefined) break;
    out.push(pid);
    stack.push(...(children.get(pid) ?? []));
  }
  return out;
}

/**
 * SIGKILLs the whole tree below `root`. Repeats the scan because a process may fork between the scan
 * and the kill; stops when a scan finds nothing (bounded, so a fork storm cannot pin us here).
 */
export async function killDescendants(root: number, rounds = 5): Promise<void> {
  for (let i = 0; i < rounds; i++) {
    const pids = await descendantsOf(root);
    if (pids.length === 0) return;
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
  }
}

/** Sum of resident memory of the tree below `root`, in bytes. */
export async function descendantsRss(root: number): Promise<number> {
  const pids = await descendantsOf(root);
  let total = 0;
  await Promise.all(
    pids.map(async (pid) => {
      try {
        const statm = await readFile(`/proc/${pid}/statm`, 'utf8');
        total += Number(statm.split(' ')[1]) * 4096;
      } catch {
        // Exited meanwhile.
      }
    }),
  );
  return total;
}
