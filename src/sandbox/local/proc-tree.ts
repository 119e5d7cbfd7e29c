import { access, readdir, readFile } from 'node:fs/promises';

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

/**
 * The children of `pid` from the kernel's own lists (`/proc/PID/task/TID/children`, one per thread),
 * or null where the kernel keeps none (built without CONFIG_PROC_CHILDREN). A process that is gone
 * has none.
 */
async function listedChildren(pid: number): Promise<number[] | null> {
  let tasks: string[];
  try {
    tasks = await readdir(`/proc/${pid}/task`);
  } catch {
    return [];
  }
  const out: number[] = [];
  for (const tid of tasks) {
    let text: string;
    try {
      text = await readFile(`/proc/${pid}/task/${tid}/children`, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') return null;
      // The thread ended meanwhile, or the kernel has no such file.
      try {
        await access(`/proc/${pid}/task/${tid}`);
      } catch {
        continue;
      }
      return null;
    }
    for (const word of text.split(' ')) {
      const child = Number(word);
      if (Number.isInteger(child) && child > 0) out.push(child);
    }
  }
  return out;
}

/** Whether this kernel lists children (null until first asked). */
let kernelListsChildren: boolean | null = null;

/**
 * Every descendant of `root` (not root itself). From the kernel's children lists, reading only the
 * tree itself (a few files, where a scan of /proc reads one per process of the host: the memory
 * watchdog asks five times a second); by walking parent links of every process in /proc where the
 * kernel keeps no such list.
 */
export async function descendantsOf(root: number): Promise<number[]> {
  if (kernelListsChildren !== false) {
    const out: number[] = [];
    const stack = [root];
    // A pid reused while the walk runs must not make it go round.
    const seen = new Set<number>();
    let listed = true;
    while (stack.length > 0 && listed) {
      const pid = stack.pop();
      if (pid === undefined) break;
      if (seen.has(pid)) continue;
      seen.add(pid);
      const children = await listedChildren(pid);
      if (children === null) listed = false;
      else {
        out.push(...children);
        stack.push(...children);
      }
    }
    if (listed) {
      kernelListsChildren = true;
      return [...new Set(out)];
    }
    kernelListsChildren = false;
  }
  return scannedDescendants(root);
}

/** descendantsOf by a scan of every process in /proc (what a kernel without children lists gets). */
export async function scannedDescendants(root: number): Promise<number[]> {
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
