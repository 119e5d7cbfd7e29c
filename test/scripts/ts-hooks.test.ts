import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { TS_HOOKS } from '../support/entry.js';

/**
 * scripts/ts-hooks.mjs keeps each compiled file in `$TMPDIR/issue-agent-ts-<uid>` and runs what it
 * finds there: a cache folder that others may write to is not read (its code would run as this user).
 */
test('ts-hooks: TypeScript runs with its own line numbers; the cache is read only from a folder no one else may write to', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ia-ts-hooks-'));
  try {
    const tmp = join(dir, 'tmp');
    const src = join(dir, 'src');
    for (const d of [tmp, src]) mkdirSync(d);
    writeFileSync(join(src, 'helper.ts'), 'export const word: string = "fresh";\n');
    writeFileSync(
      join(src, 'main.ts'),
      [
        "import { word } from './helper.js';",
        'interface Shape { readonly n: number }',
        'const s: Shape = { n: 1 };',
        'console.log(word, s.n, new Error("x").stack?.split("\\n")[1]?.trim());',
        '',
      ].join('\n'),
    );
    const run = () =>
      spawnSync(process.execPath, ['--import', TS_HOOKS, join(src, 'main.ts')], {
        env: { PATH: process.env.PATH, TMPDIR: tmp },
        encoding: 'utf8',
      });
    const first = run();
    assert.equal(first.status, 0, first.stderr);
    assert.match(first.stdout, /^fresh 1 at .*main\.ts:4:/m, 'the .ts file, its own line');

    const uid = process.getuid?.() ?? -1;
    const cache = join(tmp, `issue-agent-ts-${uid}`);
    const poison = () => {
      const files = readdirSync(cache);
      assert.ok(files.length >= 2, 'both files were cached');
      for (const f of files) writeFileSync(join(cache, f), 'console.log("poisoned");\n');
    };
    poison();
    // Its own folder: what is cached is what runs (so the check below is a real one).
    assert.match(run().stdout, /poisoned/);
    // Writable by others: nothing cached is read; every file is compiled anew.
    chmodSync(cache, 0o777);
    const shared = run();
    assert.equal(shared.status, 0, shared.stderr);
    assert.doesNotMatch(shared.stdout, /poisoned/);
    assert.match(shared.stdout, /^fresh 1 /m);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
