import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { hideAround } from '../../src/sandbox/local/host-view.js';
import { appLocalIsolation } from '../../src/worker/local-isolation.js';

test('hideAround: siblings on the way to the kept folders, whole roots that hold none, never `/`; links hidden where they lead', () => {
  const base = realpathSync(mkdtempSync(join(tmpdir(), 'ia-host-view-')));
  try {
    const home = join(base, 'home');
    const app = join(base, 'srv', 'app');
    const work = join(app, 'var', 'work');
    const tools = join(app, 'tools', 'bin');
    const secrets = join(base, 'secrets', '..data');
    for (const d of [join(home, '.ssh'), work, tools, join(app, 'node_modules'), secrets])
      mkdirSync(d, { recursive: true });
    writeFileSync(join(app, 'var', 'dump.rdb'), 'x');
    writeFileSync(join(app, 'tools', 'README'), 'x');
    writeFileSync(join(secrets, 'key.pem'), 'x');
    writeFileSync(join(secrets, 'env'), 'PRIVATE_KEY=x\n');
    // A key file that is a link into a secrets volume, a .env that points elsewhere, a link to a
    // system folder and one to the work folder's parent.
    symlinkSync(join(secrets, 'key.pem'), join(base, 'key.pem'));
    symlinkSync(join(secrets, 'env'), join(app, '.env'));
    symlinkSync('/usr/bin', join(app, 'bin'));
    symlinkSync(join(app, 'var'), join(app, 'var-link'));
    // HOME given through a link.
    symlinkSync(home, join(base, 'home-link'));
    const hidden = hideAround({
      roots: [join(base, 'home-link'), app, '/', null],
      keep: [work, tools],
      extra: [join(base, 'key.pem'), join(app, 'var'), join(base, 'missing')],
    });
    assert.deepEqual(
      hidden,
      [
        home,
        join(secrets, 'env'),
        join(app, 'node_modules'),
        join(app, 'tools', 'README'),
        join(app, 'var', 'dump.rdb'),
        join(secrets, 'key.pem'),
      ].sort(),
    );
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
});

test('the App’s local sandbox masks the work folder and hides its home, working folder, key file and env cache, but not its PATH', () => {
  const base = realpathSync(mkdtempSync(join(tmpdir(), 'ia-app-local-')));
  try {
    const cwd = join(base, 'app');
    const work = join(cwd, 'work');
    const cache = join(base, 'env-cache');
    const home = join(base, 'home');
    const nvm = join(home, '.nvm', 'versions', 'node', 'v24', 'bin');
    for (const d of [work, cache, nvm, join(home, '.ssh')]) mkdirSync(d, { recursive: true });
    writeFileSync(join(cwd, '.env'), 'PRIVATE_KEY=x\n');
    writeFileSync(join(base, 'key.pem'), 'x');
    const view = appLocalIsolation(
      { workDir: work, privateKeyPath: join(base, 'key.pem') },
      { sandboxPath: `${nvm}:/usr/bin:/bin`, environment: { cacheDir: cache } },
      { home, cwd },
    );
    assert.deepEqual(view.mask, [work]);
    assert.deepEqual(view.hide, [join(home, '.ssh'), join(cwd, '.env'), join(base, 'key.pem'), cache].sort());
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
});
