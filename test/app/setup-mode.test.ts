import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { entryArgs } from '../support/entry.js';
import { freePort } from '../support/redis-server.js';

const ROOT = join(import.meta.dirname, '..', '..');

test('without credentials, the App starts Probot’s setup page, which registers the App from app.yml', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ia-setup-'));
  t.after(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  copyFileSync(join(ROOT, 'app.yml'), join(dir, 'app.yml'));
  const port = await freePort();
  const child = spawn(process.execPath, entryArgs('src/app/main.ts'), {
    cwd: dir,
    env: {
      PATH: process.env.PATH,
      HOME: dir,
      PORT: String(port),
      HOST: '127.0.0.1',
      NODE_ENV: 'development',
      LOG_LEVEL: 'warn',
    },
    stdio: 'ignore',
  });
  t.after(() => child.kill('SIGKILL'));
  let page = '';
  for (let i = 0; i < 200; i++) {
    try {
      const r = await fetch(`http://127.0.0.1:${port}/probot`);
      page = await r.text();
      if (r.ok) break;
    } catch {
      // not listening yet
    }
    await delay(100);
  }
  assert.match(page, /Register GitHub App/i);
  // The manifest posted to GitHub is app.yml's: the permissions and events we ask for.
  assert.match(page, /issue_comment/);
  assert.match(page, /pull_requests/);
});
