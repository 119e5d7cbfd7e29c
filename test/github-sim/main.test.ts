import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { createAppAuth } from '@octokit/auth-app';
import { Octokit } from '@octokit/rest';
import { makeSourceRepo, quietLog } from './helpers.js';

const main = fileURLToPath(new URL('../support/github-sim/main.ts', import.meta.url));

void test('main.ts prints its coordinates, serves the repos given, and exits 0 on SIGTERM', async (t) => {
  const source = await makeSourceRepo({ 'README.md': '# standalone\n' });
  t.after(() => {
    source.cleanup();
  });
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', main, '--port', '0', '--repo', `octo/standalone=${source.dir}`, '--token-ttl', '600'],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  t.after(() => child.kill('SIGKILL'));
  const exited = once(child, 'exit');

  const lines: string[] = [];
  const reader = createInterface({ input: child.stdout });
  for await (const line of reader) {
    lines.push(line);
    if (lines.length === 5) break;
  }
  const [listening = '', appLine = '', installationLine = '', keyLine = '', secretLine = ''] = lines;
  const url = /^listening on (http:\/\/127\.0\.0\.1:\d+)$/.exec(listening)?.[1];
  assert.ok(url, `unexpected first line: ${listening}`);
  const appId = Number(/^app id: (\d+)$/.exec(appLine)?.[1]);
  const installationId = Number(/^installation id: (\d+)$/.exec(installationLine)?.[1]);
  const keyFile = /^private key: (.+\.pem)$/.exec(keyLine)?.[1] ?? '';
  assert.match(secretLine, /^webhook secret: [0-9a-f]{40}$/);
  assert.equal(statSync(keyFile).mode & 0o777, 0o600);

  const octokit = new Octokit({
    baseUrl: url,
    log: quietLog,
    authStrategy: createAppAuth,
    auth: { appId, privateKey: readFileSync(keyFile, 'utf8'), installationId },
  });
  const { data } = await octokit.rest.repos.get({ owner: 'octo', repo: 'standalone' });
  assert.equal(data.clone_url, `${url}/octo/standalone.git`);

  child.kill('SIGTERM');
  const [code, signal] = (await exited) as [number | null, NodeJS.Signals | null];
  assert.deepEqual({ code, signal }, { code: 0, signal: null });
  assert.equal(existsSync(keyFile), false, 'the key file is removed at exit');
});

void test('main.ts exits 2 with a usage line on bad arguments', async () => {
  const child = spawn(process.execPath, ['--import', 'tsx', main, '--repo', 'not-a-spec'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  assert.equal(code, 2);
  assert.match(stderr, /--repo: expected owner\/name=<dir>/);
  assert.match(stderr, /^usage: /m);
});
