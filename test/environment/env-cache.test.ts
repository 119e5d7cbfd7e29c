import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join, relative } from 'node:path';
import { test } from 'node:test';
import { EnvironmentCache } from '../../src/environment/env-cache.js';

test('environment cache: an entry, given a relative folder, has an absolute path the sandbox user can read; entries stay per repository', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ia-env-cache-unit-'));
  t.after(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const cache = new EnvironmentCache(relative(process.cwd(), dir), 1024 ** 2);
  const key = EnvironmentCache.key('test:one', { lock: 'a' });
  const size = await cache.store('test:one', key, async (sink) => {
    sink.write('entry');
    return Promise.resolve(true);
  });
  assert.equal(size, 5);
  const hit = await cache.open('test:one', key);
  assert.ok(hit !== null);
  hit.stream().destroy();
  assert.ok(hit.path !== null && isAbsolute(hit.path), String(hit.path));
  assert.ok(hit.path.startsWith(dir));
  // Readable by others (the sandbox user, through its read-only mount), under folders only this user may enter.
  assert.equal(statSync(hit.path).mode & 0o777, 0o644);
  assert.equal(statSync(join(hit.path, '..')).mode & 0o777, 0o700);
  assert.equal(await cache.open('test:two', key), null, 'another repository never gets it');
});
