import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { canIsolate } from '../../src/sandbox/local/local-sandbox.js';
import { cliEnv, lastJson, runCli } from '../support/cli.js';
import { makeFixtureRepo } from '../support/fixture-repo.js';
import { reply, scripted, startModelSimulator } from '../../src/model-sim/index.js';
import { dockerEngine } from '../sandbox/docker/docker-test-support.js';
import { attack } from './support.js';

const KEY = `sk-ant-cli-canary-${Math.random().toString(36).slice(2)}`;
const engine = dockerEngine();
const isolation = await canIsolate();

/**
 * The CLI hands the sandbox a copy: whatever the agent writes into its `.git` never reaches the
 * user's checkout, and the user's next `git status` runs nothing. Before, the sandbox got the real
 * checkout, and `core.fsmonitor` in its `.git/config` ran on the host.
 */
for (const mode of ['local', 'docker'] as const) {
  const skip =
    mode === 'docker'
      ? 'reason' in engine && !engine.required
        ? engine.reason
        : false
      : isolation
        ? false
        : 'this host allows no namespaces for the isolated sandbox';
  attack(
    `CLI (--sandbox ${mode}): core.fsmonitor and a hook planted in the workspace's .git never run on the host`,
    async (t) => {
      const repo = makeFixtureRepo('node-calc');
      const out = mkdtempSync(join(tmpdir(), 'ia-cli-attack-'));
      const marker = join(out, 'fsmonitor-ran');
      t.after(() => {
        repo.cleanup();
        rmSync(out, { recursive: true, force: true });
      });
      const sim = await startModelSimulator({
        apiKey: KEY,
        policy: scripted([
          reply().tool('bash', {
            command: [
              `git config core.fsmonitor "touch ${marker}"`,
              `git config core.hooksPath .git/hooks`,
              `printf '#!/bin/sh\\ntouch ${marker}\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit`,
              `echo "// agent was here" >> src/calc.js`,
            ].join(' && '),
          }),
          reply().tool('finish', { summary: 'planted' }),
        ]),
      });
      t.after(() => sim.close());
      const configBefore = readFileSync(join(repo.dir, '.git', 'config'), 'utf8');
      const r = await runCli(
        ['resolve', repo.dir, '--task', 'attack', '--out', join(out, 'run'), '--sandbox', mode, '--json'],
        cliEnv({ ANTHROPIC_API_KEY: KEY, ANTHROPIC_BASE_URL: sim.url }),
      );
      assert.notEqual(r.code, 2, r.stderr);
      assert.match(String(lastJson(r.stdout).change), /^applied to /, r.stdout);
      // The change came back as a diff into the working tree; .git is as the user left it.
      assert.match(readFileSync(join(repo.dir, 'src', 'calc.js'), 'utf8'), /agent was here/);
      assert.equal(readFileSync(join(repo.dir, '.git', 'config'), 'utf8'), configBefore);
      assert.equal(existsSync(join(repo.dir, '.git', 'hooks', 'pre-commit')), false);
      // The user's next git commands (with the user's own config, as they would run them).
      execFileSync('git', ['status', '--porcelain'], { cwd: repo.dir });
      execFileSync('git', ['-c', 'user.name=U', '-c', 'user.email=u@x', 'commit', '-qam', 'take it'], {
        cwd: repo.dir,
      });
      assert.equal(existsSync(marker), false, 'an agent-written git config ran on the host');
    },
    { skip, timeout: 180_000 },
  );
}

attack(
  'CLI (default local sandbox): the API key in /proc/$PPID/environ and the network are out of reach',
  async (t) => {
    const repo = makeFixtureRepo('node-calc');
    const out = mkdtempSync(join(tmpdir(), 'ia-cli-attack-'));
    const listener = createServer((s) => {
      s.end('REACHED-THE-HOST\n');
    });
    await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
    const address = listener.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    t.after(() => {
      listener.close();
      repo.cleanup();
      rmSync(out, { recursive: true, force: true });
    });
    const sim = await startModelSimulator({
      apiKey: KEY,
      policy: scripted([
        reply().tool('bash', {
          command:
            "cat /proc/$PPID/environ /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -a ANTHROPIC; " +
            'ps -e -o pid=,args= | head -50; ' +
            `(exec 3<>/dev/tcp/127.0.0.1/${port} && cat <&3) 2>&1 | head -3; ` +
            'ls /sys/class/net',
        }),
        reply().tool('finish', { summary: 'looked around' }),
      ]),
    });
    t.after(() => sim.close());
    const r = await runCli(
      ['resolve', repo.dir, '--task', 'attack', '--out', join(out, 'run'), '--json'],
      cliEnv({ ANTHROPIC_API_KEY: KEY, ANTHROPIC_BASE_URL: sim.url }),
    );
    assert.notEqual(r.code, 2, r.stderr);
    const seen = JSON.stringify(sim.requests.map((q) => q.body));
    assert.ok(seen.includes('sys/class/net') || seen.includes('lo'), 'the command ran');
    assert.ok(!seen.includes(KEY), 'the API key reached the model');
    assert.ok(!seen.includes('REACHED-THE-HOST'), 'the sandbox reached a host listener');
    for (const file of filesUnder(join(out, 'run')))
      assert.ok(!readFileSync(file, 'utf8').includes(KEY), `the API key is in ${file}`);
  },
  { skip: isolation ? false : 'this host allows no namespaces for the isolated sandbox', timeout: 180_000 },
);

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? filesUnder(join(dir, e.name)) : [join(dir, e.name)],
  );
}
