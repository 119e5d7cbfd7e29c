import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { hideAround } from '../../src/sandbox/local/host-view.js';
import { appLocalIsolation } from '../../src/worker/local-isolation.js';

test('hideAround: siblings on the way to the kept folder, whole roots that do not hold it, never `/`, never a link', () => {
  const base = mkdtempSync(join(tmpdir(), 'ia-host-view-'));
  try {
    const home = join(base, 'home');
    const app = join(base, 'srv', 'app');
    const work = join(app, 'var', 'work');
    mkdirSync(join(home, '.ssh'), { recursive: true });
    mkdirSync(work, { recursive: true });
    mkdirSync(join(app, 'node_modules'));
    writeFileSync(join(app, '.env'), 'PRIVATE_KEY=x\n');
    writeFileSync(join(app, 'var', 'dump.rdb'), 'x');
    writeFileSync(join(base, 'key.pem'), 'x');
    symlinkSync(join(base, 'key.pem'), join(app, 'key-link'));
    const hidden = hideAround({
      roots: [home, app, '/', null],
      keep: work,
      extra: [join(base, 'key.pem'), join(app, 'var'), join(base, 'missing')],
    });
    assert.deepEqual(
      hidden,
      [
        home,
        join(app, '.env'),
        join(app, 'node_modules'),
        join(app, 'var', 'dump.rdb'),
        join(base, 'key.pem'),
      ].sort(),
    );
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
});

test('the App’s local sandbox masks the work folder and hides its home, working folder, key file and env cache', () => {
  const base = mkdtempSync(join(tmpdir(), 'ia-app-local-'));
  try {
    const cwd = join(base, 'app');
    const work = join(cwd, 'work');
    const cache = join(base, 'env-cache');
    const home = join(base, 'home');
    for (const d of [work, cache, home]) mkdirSync(d, { recursive: true });
    writeFileSync(join(cwd, '.env'), 'PRIVATE_KEY=x\n');
    writeFileSync(join(base, 'key.pem'), 'x');
    const view = appLocalIsolation(
      { workDir: work, privateKeyPath: join(base, 'key.pem') },
      { environment: { cacheDir: cache } },
      { home, cwd },
    );
    assert.deepEqual(view.mask, [work]);
    assert.deepEqual(view.hide, [home, join(cwd, '.env'), join(base, 'key.pem'), cache].sort());
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
});
