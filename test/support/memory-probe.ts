import type { WorkspaceProbe } from '../../src/testing/detect-test-command.js';

export interface CountingProbe extends WorkspaceProbe {
  /** Every call made, as `listDir .`, `exists a/b`, `readText c`. */
  readonly calls: string[];
}

/**
 * A probe over an in-memory tree: keys are file paths; their parent dirs exist implicitly. It keeps
 * the calls made, so a test can bound what detection asked.
 */
export function memoryProbe(files: Readonly<Record<string, string>>): CountingProbe {
  const dirs = new Map<string, Set<string>>([['.', new Set()]]);
  for (const file of Object.keys(files)) {
    const parts = file.split('/');
    for (let i = 0; i < parts.length; i++) {
      const parent = i === 0 ? '.' : parts.slice(0, i).join('/');
      let set = dirs.get(parent);
      if (set === undefined) {
        set = new Set();
        dirs.set(parent, set);
      }
      set.add(parts[i] ?? '');
    }
  }
  const calls: string[] = [];
  return {
    calls,
    exists: (p) => {
      calls.push(`exists ${p}`);
      return Promise.resolve(p in files || dirs.has(p));
    },
    readText: (p) => {
      calls.push(`readText ${p}`);
      return Promise.resolve(files[p] ?? null);
    },
    listDir: (p) => {
      calls.push(`listDir ${p}`);
      return Promise.resolve(dirs.has(p) ? [...(dirs.get(p) ?? [])] : null);
    },
  };
}
