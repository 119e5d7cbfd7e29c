import { createHash, randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import type { BaselineCache, StoredBaseline } from '../agent/baseline-cache.js';
import { eventSchemas } from '../events/schema.js';

const stored = z.object({
  run: eventSchemas.test_run.omit({ id: true, ts: true, kind: true, phase: true, reusedFrom: true }),
  conversationId: z.string(),
  ts: z.string(),
});

/**
 * Baselines on the worker's disk, one folder per repository (named by a hash of its key, so one
 * repository's runs never see another's), one file per key, written whole and renamed into place.
 * The folders are the worker's own (0700; no sandbox sees them). A file that does not read back
 * as a baseline is a miss. At most `perRepository` files are kept; the oldest go first.
 */
export class FileBaselineStore implements BaselineCache {
  private readonly dir: string;

  constructor(
    root: string,
    repoKey: string,
    private readonly perRepository = 64,
  ) {
    this.dir = join(root, createHash('sha256').update(repoKey).digest('hex').slice(0, 32));
  }

  private pathOf(key: string): string {
    if (!/^[0-9a-f]{64}$/.test(key)) throw new Error(`not a baseline key: ${key}`);
    return join(this.dir, `${key}.json`);
  }

  async get(key: string): Promise<StoredBaseline | null> {
    let text: string;
    try {
      text = await readFile(this.pathOf(key), 'utf8');
    } catch {
      return null;
    }
    try {
      const parsed = stored.safeParse(JSON.parse(text));
      return parsed.success ? parsed.data : null;
    } catch {
      return null;
    }
  }

  async put(key: string, baseline: StoredBaseline): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const path = this.pathOf(key);
    const temp = `${path}.${randomBytes(6).toString('hex')}.tmp`;
    await writeFile(temp, JSON.stringify(baseline), { mode: 0o600, flag: 'wx' });
    await rename(temp, path);
    await this.prune();
  }

  private async prune(): Promise<void> {
    const names = (await readdir(this.dir)).filter((n) => n.endsWith('.json'));
    if (names.length <= this.perRepository) return;
    const dated = await Promise.all(
      names.map(async (n) => ({ n, at: (await stat(join(this.dir, n)).catch(() => null))?.mtimeMs ?? 0 })),
    );
    dated.sort((a, b) => a.at - b.at);
    for (const { n } of dated.slice(0, dated.length - this.perRepository)) {
      await rm(join(this.dir, n), { force: true });
    }
  }
}
