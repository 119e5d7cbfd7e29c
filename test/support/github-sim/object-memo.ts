/**
 * What git said about objects that cannot change, remembered per bare repository so that the
 * simulator asks again only about something new. A commit, a tree, a blob and anything computed from
 * full shas alone (a diff between two commits, the messages of `base..head`, a merge's tree) is the
 * same answer for ever: objects are never pruned here (`gc.auto` is 0 and nothing runs `git gc`).
 *
 * Invariants the callers keep: a key is built from full 40-hex shas (and paths), never from a name
 * that can move (a branch, `HEAD`, `sha^` is fine, `main^` is not); only answers git gave are kept,
 * never a failure (the object may arrive with the next push); nothing read inside a push's quarantine
 * (objects git may still reject) is kept. Each table is bounded: the least recently used entry goes
 * first, so a long test file cannot grow it without limit.
 */

/** A full object name: the only kind of name a memo key is built from. */
export const FULL_SHA = /^[0-9a-f]{40}$/;

/** A map that forgets its least recently used entry past `limit` entries. */
export class BoundedMemo<V> {
  private readonly entries = new Map<string, V>();

  constructor(private readonly limit: number) {}

  get(key: string): V | undefined {
    const value = this.entries.get(key);
    if (value === undefined) return undefined;
    // Re-inserted so that Map's insertion order is the order of use.
    this.entries.delete(key);
    this.entries.set(key, value);
    return value;
  }

  has(key: string): boolean {
    return this.entries.has(key);
  }

  set(key: string, value: V): V {
    this.entries.delete(key);
    this.entries.set(key, value);
    if (this.entries.size > this.limit) {
      const oldest = this.entries.keys().next();
      if (oldest.done !== true) this.entries.delete(oldest.value);
    }
    return value;
  }

  get size(): number {
    return this.entries.size;
  }
}

const tables = new Set<{ forget(root: string): void }>();

/**
 * One kind of answer (a commit read, a diff's stats, …), a BoundedMemo of it per bare repository.
 * Tables are made once, at module load, beside the function whose answers they keep.
 */
export class MemoTable<V> {
  private readonly repos = new Map<string, BoundedMemo<V>>();

  constructor(private readonly limit: number) {
    tables.add(this);
  }

  /** The memo of the bare repository at `bareDir`, made on first use. */
  of(bareDir: string): BoundedMemo<V> {
    let memo = this.repos.get(bareDir);
    if (memo === undefined) {
      memo = new BoundedMemo<V>(this.limit);
      this.repos.set(bareDir, memo);
    }
    return memo;
  }

  forget(root: string): void {
    for (const dir of [...this.repos.keys()])
      if (dir === root || dir.startsWith(`${root}/`)) this.repos.delete(dir);
  }
}

/** Drops every table's memos of the repositories under `root` (a simulator's directory, at close). */
export function forgetRepos(root: string): void {
  for (const table of tables) table.forget(root);
}

/** Blobs larger than this are read again each time rather than held. */
export const BLOB_LIMIT = 1024 * 1024;
