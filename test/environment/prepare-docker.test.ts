import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, type TestContext } from 'node:test';
import type { EnvironmentSettings } from '../../src/config/agent-env.js';
import { hostProbe } from '../../src/environment/host-probe.js';
import { planEnvironment, type EnvironmentPlan } from '../../src/environment/plan.js';
import {
  EnvironmentSetupError,
  prepareEnvironment,
  type PreparedEnvironment,
} from '../../src/environment/prepare.js';
import { registryDeployment } from '../support/egress-env.js';
import {
  dockerTest,
  labelledContainers,
  tempWorkspace,
  testOwner,
} from '../sandbox/docker/docker-test-support.js';
import { DockerSandbox, SetupFailedError } from '../../src/sandbox/docker/docker-sandbox.js';
import { reverse, secretForms } from '../../src/secrets/forms.js';
import { IPC_LEFT_COMMAND, ipcLeakCommand, LEAK_ENCODINGS, leakCommand } from '../support/secret-leaks.js';
import { WarmPool } from '../../src/sandbox/docker/warm-pool.js';
import { LABEL_POOL } from '../../src/sandbox/docker/owner.js';
import { EnvironmentCache } from '../../src/environment/env-cache.js';

/** A tree of the base branch: setup may have its secrets (see setup-trust.ts). */
const BASE = { kind: 'base', ref: 'main' } as const;

const run = promisify(execFile);

const sha16 = (text: string): string => createHash('sha256').update(text).digest('hex').slice(0, 16);

/** A real lockfile of one small package from the npm registry. */
const PACKAGE_JSON = {
  name: 'env-fixture',
  version: '1.0.0',
  scripts: { test: "node -e \"require('is-number'); console.log('ok')\"" },
  devDependencies: { 'is-number': '7.0.0' },
};
const LOCKFILE = {
  name: 'env-fixture',
  version: '1.0.0',
  lockfileVersion: 3,
  requires: true,
  packages: {
    '': { name: 'env-fixture', version: '1.0.0', devDependencies: { 'is-number': '7.0.0' } },
    'node_modules/is-number': {
      version: '7.0.0',
      resolved: 'https://registry.npmjs.org/is-number/-/is-number-7.0.0.tgz',
      integrity:
        'sha512-41Cifkg6e8TylSpdtTpeLVMqvSBEVzTttHvERD741+pnZ8ANv0004MRL43QKPDlK9cGvNp6NZWZUBlbGXYxxng==',
      dev: true,
      license: 'MIT',
      engines: { node: '>=0.12.0' },
    },
  },
};

async function repo(t: TestContext, files: Record<string, string> = {}): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'ia-env-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const all = {
    'package.json': JSON.stringify(PACKAGE_JSON, null, 2),
    'package-lock.json': JSON.stringify(LOCKFILE, null, 2),
    '.gitignore': '',
    ...files,
  };
  for (const [name, text] of Object.entries(all)) {
    await mkdir(join(dir, name, '..'), { recursive: true });
    await writeFile(join(dir, name), text);
  }
  await run('git', ['init', '-q', '-b', 'main', dir]);
  await run('git', ['-C', dir, 'add', '-A']);
  await run('git', ['-C', dir, '-c', 'user.name=t', '-c', 'user.email=t@e', 'commit', '-qm', 'init']);
  return dir;
}

function plan(over: Partial<EnvironmentPlan> & { commands?: string[] } = {}): EnvironmentPlan {
  const { commands, ...rest } = over;
  return {
    image: 'issue-agent/node:22',
    runtimes: [{ language: 'node', version: '22', requested: null, source: 'default' }],
    setup: {
      source: 'detected',
      reason: 'package-lock.json is present',
      commands: (commands ?? ['npm ci --no-audit --no-fund']).map((command) => ({
        command,
        reason: 'test',
      })),
      outputs: ['node_modules'],
      inputs: ['package.json', 'package-lock.json'],
      testEnv: {},
    },
    env: {},
    setupAllowHosts: ['registry.npmjs.org'],
    agentAllowHosts: [],
    secretNames: [],
    cache: true,
    trust: { trusted: true, secrets: true, reason: 'a test plan', setupEnv: {} },
    ...rest,
  };
}

async function settings(
  t: TestContext,
  over: Partial<EnvironmentSettings> = {},
): Promise<EnvironmentSettings> {
  const deployment = await registryDeployment();
  const cacheDir = await mkdtemp(join(tmpdir(), 'ia-env-cache-'));
  t.after(() => rm(cacheDir, { recursive: true, force: true }));
  return {
    setupEnabled: true,
    allowHosts: [],
    allowCidrs: deployment.allowCidrs,
    extraCaPem: deployment.extraCaPem,
    npmRegistry: null,
    pipIndexUrl: null,
    setupSecrets: {},
    grants: null,
    cacheUnpinnedMs: 24 * 3_600_000,
    cacheDir,
    cacheMaxBytes: 1024 ** 3,
    setupTimeoutMs: 5 * 60_000,
    ...over,
  };
}

async function prepare(
  t: TestContext,
  workspace: string,
  p: EnvironmentPlan,
  s: EnvironmentSettings,
  repoKey = 'test:one',
): Promise<PreparedEnvironment> {
  const env = await prepareEnvironment({
    workspace,
    probe: hostProbe(workspace),
    jobId: `env-${Math.random().toString(36).slice(2, 8)}`,
    repoKey,
    plan: p,
    settings: s,
    mayStoreCache: true,
    scrub: (text) => text,
  });
  t.after(async () => {
    await env.sandbox.close();
    await env.close();
  });
  return env;
}

const sh = async (env: PreparedEnvironment, command: string): Promise<string> =>
  (await env.sandbox.exec(command, { timeoutMs: 60_000 })).output;

dockerTest(
  'environment: npm ci runs through the egress proxy with no network interface; the agent phase reaches nothing',
  async (_docker, t) => {
    const workspace = await repo(t);
    const env = await prepare(
      t,
      workspace,
      plan({
        commands: [
          'npm ci --no-audit --no-fund',
          // Egress attempts from setup: a host off the allowlist, a private address, a name that
          // resolves to loopback, raw TCP and DNS to an outside resolver. Each must fail.
          [
            'ls /sys/class/net > setup-interfaces.txt',
            'curl -sS -m 10 https://example.com/ -o /dev/null; echo "offlist=$?" >> egress.txt',
            'curl -sS -m 10 https://10.1.2.3/ -o /dev/null; echo "private=$?" >> egress.txt',
            'curl -fsS -m 10 http://169.254.169.254/latest/meta-data/ -o /dev/null; echo "metadata=$?" >> egress.txt',
            'curl -sS -m 10 --noproxy "*" https://registry.npmjs.org/ -o /dev/null; echo "direct=$?" >> egress.txt',
            '(exec 3<>/dev/tcp/1.1.1.1/443) 2>/dev/null; echo "rawtcp=$?" >> egress.txt',
            `python3 -c "import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3); s.sendto(b'x', ('8.8.8.8', 53)); s.recv(10)" 2>/dev/null; echo "dns=$?" >> egress.txt`,
            'getent hosts example.com >/dev/null; echo "resolve=$?" >> egress.txt',
          ].join('; '),
        ],
      }),
      await settings(t),
    );
    const rec = env.record;
    assert.equal(rec.setup.commands[0]?.exitCode, 0, rec.setup.commands[0]?.output);
    const egress = rec.egress.setup;
    assert.ok(egress !== null);
    const allowed = egress.requests.filter((r) => r.allowed);
    assert.ok(
      allowed.some((r) => r.host === 'registry.npmjs.org' && r.bytesDown > 0),
      'npm reached the registry',
    );
    const deniedHosts = egress.denied.map((d) => d.host).sort();
    assert.deepEqual(deniedHosts, ['10.1.2.3', '169.254.169.254', 'example.com']);
    const results = await sh(env, 'cat egress.txt setup-interfaces.txt');
    for (const what of ['offlist', 'private', 'metadata', 'direct', 'rawtcp', 'dns', 'resolve']) {
      assert.match(results, new RegExp(`^${what}=[1-9]\\d*$`, 'm'), `${what} must fail:\n${results}`);
    }
    assert.match(results, /^lo$/m);
    assert.doesNotMatch(results, /eth|ens/);
    // The agent phase: the dependency is there, the tests run, and nothing leaves.
    assert.match(await sh(env, 'npm test 2>&1'), /^ok$/m);
    const agent = await sh(
      env,
      [
        'ls /sys/class/net',
        'env | grep -ic proxy; true',
        'ls -A /run/issue-agent-egress',
        'curl -sS -m 5 --proxy http://127.0.0.1:3128 https://registry.npmjs.org/ -o /dev/null; echo "viaforwarder=$?"',
        `python3 -c "import socket; s=socket.socket(socket.AF_UNIX); s.connect('/run/issue-agent-egress/proxy.sock')" 2>/dev/null; echo "socket=$?"`,
        'git status --porcelain',
      ].join('; '),
    );
    assert.match(agent, /^lo\n0\n/, agent);
    assert.match(agent, /viaforwarder=[1-9]/);
    assert.match(agent, /socket=[1-9]/);
    assert.doesNotMatch(agent, /node_modules/, 'setup outputs are not part of the change');
  },
  { timeout: 180_000, attack: true },
);

dockerTest(
  'environment: a setup secret is visible to setup and nowhere afterwards',
  async (_docker, t) => {
    const canary = `canary-${Math.random().toString(36).slice(2)}-secret`;
    const workspace = await repo(t);
    const s = await settings(t, { setupSecrets: { NPM_TOKEN: canary, OTHER: 'not-requested-value' } });
    const env = await prepare(
      t,
      workspace,
      plan({
        secretNames: ['NPM_TOKEN', 'MISSING'],
        commands: [
          // Setup sees it, and tries to make it outlive setup in every way but a file.
          `test "$(printf %s "$NPM_TOKEN" | sha256sum | cut -c1-16)" = ${sha16(canary)} && echo seen > seen.txt; test -z "$OTHER"; (sleep 600 &); nohup sh -c 'sleep 600' >/dev/null 2>&1 & echo "export LEAK=$NPM_TOKEN" >> /dev/null; echo "set-by-setup" > /tmp/marker`,
        ],
      }),
      s,
    );
    assert.equal(env.record.setup.commands[0]?.exitCode, 0, env.record.setup.commands[0]?.output);
    assert.deepEqual(env.record.setup.secrets, ['NPM_TOKEN']);
    assert.match(env.record.setup.reason, /not provided by this deployment: MISSING/);
    const out = await sh(
      env,
      `cat seen.txt; env; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'; ps -eo pid,args; grep -rl -- ${canary} /workspace /home/agent /tmp 2>/dev/null; echo done`,
    );
    assert.match(out, /^seen$/m);
    assert.match(out, /done/);
    assert.ok(!out.includes(canary), 'the canary is nowhere in the agent phase');
    assert.doesNotMatch(out, /sleep 600/, 'no process of setup survives');
    assert.ok(!JSON.stringify(env.record).includes(canary), 'nor in the record');
  },
  { timeout: 180_000, attack: true },
);

dockerTest(
  'environment: setup that writes a setup secret into a file fails, and says so without the value',
  async (_docker, t) => {
    const canary = `canary-${Math.random().toString(36).slice(2)}-secret`;
    const workspace = await repo(t);
    const s = await settings(t, { setupSecrets: { NPM_TOKEN: canary } });
    await assert.rejects(
      prepare(
        t,
        workspace,
        plan({
          secretNames: ['NPM_TOKEN'],
          commands: [
            // A copy, and a file named by the reversed value: the message names the file, never the value.
            `echo "$NPM_TOKEN" > .npmrc-copy; python3 -c 'import os; open("/tmp/" + os.environ["NPM_TOKEN"][::-1], "w")'`,
          ],
        }),
        s,
      ),
      (error: unknown) => {
        assert.ok(error instanceof EnvironmentSetupError);
        assert.match(error.message, /setup secret/);
        assert.match(error.message, /\/workspace\/\.npmrc-copy/);
        assert.match(error.message, /\/tmp\/\[a setup secret\] \(its name\)/);
        assert.ok(!error.message.includes(canary));
        assert.ok(!error.message.includes(reverse(canary)));
        assert.equal(error.transient, false);
        return true;
      },
    );
  },
  { timeout: 120_000, attack: true },
);

/** A sandbox with a setup phase that runs `command` with the canary in $LEAK_TOKEN (no network). */
async function sandboxWithSetup(
  t: TestContext,
  canary: string,
  command: string,
  owner = testOwner('leak'),
): Promise<DockerSandbox> {
  const workspace = await tempWorkspace(t, 'ia-leak-');
  await writeFile(join(workspace, 'README.md'), 'a repository\n');
  const sandbox = await DockerSandbox.create({
    workspace,
    jobId: `leak-${Math.random().toString(36).slice(2, 8)}`,
    image: 'issue-agent/base',
    owner,
    setup: {
      commands: [command],
      env: { LEAK_TOKEN: canary },
      secretValues: [canary],
      timeoutMs: 60_000,
      outputs: [],
    },
  });
  t.after(() => sandbox.close());
  return sandbox;
}

dockerTest(
  'environment: a setup secret left reversed, in hex, base64 or base32, in the workspace, HOME, /tmp or /dev/shm, as a name, a link target, an extended attribute, a queue or an unreadable file: each copy alone is found',
  async (docker, t) => {
    const canary = `canary-${Math.random().toString(36).slice(2)}-secret`;
    const places = ['/workspace', '$HOME', '/tmp', '/dev/shm'];
    const command = leakCommand('LEAK_TOKEN', places, {
      name: '/tmp',
      folder: '$HOME',
      link: '/workspace/leak-link',
      literal: '/dev/shm/leak-literal',
      hidden: '/tmp/leak-hidden',
      locked: '$HOME/leak-locked',
      xattr: '/tmp/leak-xattr',
      mqueue: true,
    });
    const owner = testOwner('leak');
    let holders: readonly string[] = [];
    await assert.rejects(sandboxWithSetup(t, canary, command, owner), (error: unknown) => {
      assert.ok(error instanceof SetupFailedError, String(error));
      assert.equal(error.results[0]?.exitCode, 0, error.results[0]?.output);
      holders = error.holders;
      return true;
    });
    // Each copy is a file of its own: the scan names each, so each alone is found.
    const expected = [
      ...places.flatMap((p) =>
        Object.keys(LEAK_ENCODINGS).map((f) => `${p.replace('$HOME', '/home/agent')}/${f}`),
      ),
      '/dev/shm/leak-literal',
      '/tmp/leak-xattr (an extended attribute)',
      '/tmp/[a setup secret] (its name)',
      '/home/agent/[a setup secret] (its name)',
      '/dev/mqueue/[a setup secret] (its name)',
      '/workspace/leak-link -> /nowhere/',
      '/tmp/leak-hidden (not readable by the sandbox user)',
      '/home/agent/leak-locked (not readable by the sandbox user)',
    ];
    for (const place of expected) {
      assert.ok(
        holders.some((h) => h === place || h.startsWith(place.endsWith('/') ? place : `${place} `)),
        `${place} is named:\n${holders.join('\n')}`,
      );
    }
    assert.equal(holders.length, expected.length, holders.join('\n'));
    for (const h of holders) {
      for (const form of secretForms(canary)) assert.ok(!h.includes(form), `no value in ${h}`);
    }
    assert.deepEqual(await labelledContainers(docker, owner), [], 'the container is gone');
  },
  { timeout: 120_000, attack: true },
);

dockerTest(
  'environment: System V shared memory, message queues and semaphores, and POSIX message queues setup made (holding the secret) do not reach the agent phase',
  async (_docker, t) => {
    const canary = `canary-${Math.random().toString(36).slice(2)}-secret`;
    const sandbox = await sandboxWithSetup(t, canary, ipcLeakCommand('LEAK_TOKEN'));
    assert.match(sandbox.setupReport?.results[0]?.output ?? '', /ipc-made/);
    const left = (await sandbox.exec(IPC_LEFT_COMMAND, { timeoutMs: 30_000 })).output;
    assert.doesNotMatch(left, /^(shm|msg|sem|mqueue): /m, left);
    assert.match(left, /^shmget-by-key: -1$/m, left);
    assert.match(left, /^mq_open-by-name: -1$/m, left);
  },
  { timeout: 120_000, attack: true },
);

dockerTest(
  'environment: a failing setup command ends setup with its output and a permanent failure',
  async (_docker, t) => {
    const workspace = await repo(t);
    await assert.rejects(
      prepare(
        t,
        workspace,
        plan({ commands: ['echo "preparing"; echo "no such thing" >&2; exit 3', 'echo never'] }),
        await settings(t),
      ),
      (error: unknown) => {
        assert.ok(error instanceof EnvironmentSetupError);
        assert.match(error.message, /exited with 3/);
        assert.equal(error.transient, false);
        const commands = error.record.setup.commands;
        assert.equal(commands[0]?.exitCode, 3);
        assert.match(commands.map((c) => c.output).join(''), /no such thing/);
        assert.equal(commands[1]?.exitCode, null, 'later commands do not run');
        return true;
      },
    );
  },
  { timeout: 120_000 },
);

/**
 * The default repository's environment stored by a first job, in a cache folder kept for the file:
 * the three cache tests that start from it (a second job's hit, a hit over committed node_modules,
 * an entry evicted under a hit) share that first job and its install instead of each making its
 * own. The eviction test removes the entry, so it is the last to use it. Made by whichever test
 * asks first.
 */
let storedDefault: Promise<{ s: EnvironmentSettings; first: PreparedEnvironment }> | undefined;
let storedDefaultDir: string | undefined;
// Registered here, not in a test: an `after` called inside a test runs when that test ends.
after(async () => {
  if (storedDefaultDir !== undefined) await rm(storedDefaultDir, { recursive: true, force: true });
});
function defaultStored(t: TestContext): Promise<{ s: EnvironmentSettings; first: PreparedEnvironment }> {
  storedDefault ??= (async () => {
    const cacheDir = await mkdtemp(join(tmpdir(), 'ia-env-cache-'));
    storedDefaultDir = cacheDir;
    const s = await settings(t, { cacheDir });
    return { s, first: await prepare(t, await repo(t), plan(), s) };
  })();
  return storedDefault;
}

dockerTest(
  'environment cache: a second job skips setup; its edits never reach the next job; a new lockfile or another repository misses',
  async (_docker, t) => {
    const { s, first } = await defaultStored(t);
    assert.equal(first.record.setup.cache.status, 'stored');
    const second = await prepare(t, await repo(t), plan(), s);
    assert.equal(second.record.setup.cache.status, 'hit');
    assert.equal(second.record.setup.commands[0]?.attempts, 0, 'setup did not run');
    assert.equal(second.record.egress.setup, null, 'and reached nothing');
    assert.match(await sh(second, 'npm test 2>&1'), /^ok$/m);
    // The restored node_modules is the agent's to use, not part of its change.
    assert.equal(
      await sh(second, 'git status --porcelain; grep -v "^#" .git/info/exclude'),
      '/node_modules\n',
    );
    // The job damages its dependencies; the next job still gets the entry as stored.
    await sh(
      second,
      'echo "module.exports = () => { throw new Error(\'poisoned\') }" > node_modules/is-number/index.js',
    );
    // The entry itself is in the sandbox (read-only): a job can read it, never change it.
    assert.match(
      await sh(
        second,
        'f=/run/issue-agent-env/entry.tar; test -r $f && echo readable; { echo x >> $f; } 2>/dev/null || echo "append:refused"; rm -f $f 2>/dev/null || echo "rm:refused"; test -f $f && echo still-there',
      ),
      /^readable\nappend:refused\nrm:refused\nstill-there$/m,
    );
    const third = await prepare(t, await repo(t), plan(), s);
    assert.equal(third.record.setup.cache.status, 'hit');
    assert.doesNotMatch(await sh(third, 'cat node_modules/is-number/index.js'), /poisoned/);
    // A changed lockfile is a new key.
    const changed = await repo(t, {
      'package-lock.json': JSON.stringify({ ...LOCKFILE, name: 'env-fixture-2' }, null, 2),
    });
    const fourth = await prepare(t, changed, plan(), s);
    assert.equal(fourth.record.setup.cache.status, 'stored');
    assert.notEqual(fourth.record.setup.cache.key, first.record.setup.cache.key);
    // Another repository with the very same files never gets the entry.
    const other = await prepare(t, await repo(t), plan(), s, 'test:two');
    assert.equal(other.record.setup.cache.status, 'stored');
    assert.notEqual(other.record.setup.cache.key, first.record.setup.cache.key);
  },
  { timeout: 300_000 },
);

dockerTest(
  'environment cache: on a hit, the entry wins over a node_modules the repository commits (the two are not unpacked side by side then)',
  async (_docker, t) => {
    // The entry the default repository's first job stored: committed files are not part of the
    // key (only the lockfile and package.json are), so the same entry is this repository's too.
    const { s, first } = await defaultStored(t);
    const committed = {
      'node_modules/is-number/package.json': '{"name":"is-number","version":"0.0.0-committed"}',
      'node_modules/is-number/index.js': "module.exports = () => 'committed';",
    };
    assert.equal(first.record.setup.cache.status, 'stored');
    for (let i = 0; i < 3; i += 1) {
      const hit = await prepare(t, await repo(t, committed), plan(), s);
      assert.equal(hit.record.setup.cache.status, 'hit');
      assert.match(await sh(hit, 'node -p "require(\'is-number/package.json\').version"'), /^7\.0\.0$/m);
      await hit.sandbox.close();
    }
  },
  { timeout: 300_000 },
);

dockerTest(
  'environment cache: an entry evicted between the lookup and the container’s start is restored from the stream opened at the lookup',
  async (_docker, t) => {
    const { s, first } = await defaultStored(t);
    assert.equal(first.record.setup.cache.status, 'stored');
    // Another job's store evicts the entry right after this job looked it up: the file is gone when
    // the engine mounts it, and the stream opened at the lookup still reads it.
    const open = Object.getOwnPropertyDescriptor(EnvironmentCache.prototype, 'open');
    assert.ok(open !== undefined && typeof open.value === 'function');
    const original = open.value as EnvironmentCache['open'];
    let evicted = '';
    EnvironmentCache.prototype.open = async function (this: EnvironmentCache, ...args) {
      const found = await original.apply(this, args);
      if (found?.path != null) {
        await rm(found.path);
        evicted = found.path;
      }
      return found;
    };
    t.after(() => {
      EnvironmentCache.prototype.open = original;
    });
    const second = await prepare(t, await repo(t), plan(), s);
    assert.notEqual(evicted, '', 'the entry was mounted for, then removed');
    assert.equal(second.record.setup.cache.status, 'hit');
    assert.equal(second.record.setup.commands[0]?.attempts, 0, 'setup did not run');
    assert.match(await sh(second, 'npm test 2>&1'), /^ok$/m);
    assert.equal(await sh(second, 'git status --porcelain'), '');
  },
  { timeout: 300_000 },
);

dockerTest(
  'warm pool: a job with nothing to set up, or a cache hit, starts in a warm container with what a new one gets (the entry, the variables, the exclusions); a job with setup never does',
  async (docker, t) => {
    const pool = new WarmPool({ images: { 'issue-agent/node:22': 1 }, docker, owner: testOwner('env-pool') });
    t.after(() => pool.close());
    await pool.start();
    const s = await settings(t);
    const fromPool = async (env: PreparedEnvironment): Promise<boolean> => {
      const info = await docker.getContainer(env.sandbox.containerId).inspect();
      return info.Config.Labels[LABEL_POOL] !== undefined;
    };
    const prepareWith = async (
      p: EnvironmentPlan,
      workspace: string,
      usePool = true,
    ): Promise<PreparedEnvironment> => {
      const env = await prepareEnvironment({
        workspace,
        probe: hostProbe(workspace),
        jobId: `env-${Math.random().toString(36).slice(2, 8)}`,
        repoKey: 'test:pool',
        plan: p,
        settings: s,
        mayStoreCache: true,
        scrub: (text) => text,
        ...(usePool ? { pool } : {}),
      });
      t.after(async () => {
        await env.sandbox.close();
        await env.close();
      });
      return env;
    };
    const none = await prepareWith(plan({ commands: [] }), await repo(t));
    assert.ok(await fromPool(none), 'no setup: a warm container');
    assert.match(await sh(none, 'cat package.json'), /env-fixture/, 'with the repository copied in');
    await pool.drain();
    // A value a shell would expand, split or end early: it must arrive as it is.
    const tricky = `a b '$HOME' "q" \\ $(touch /tmp/expanded) ;\nline2`;
    const withEnv = (p: EnvironmentPlan): EnvironmentPlan => ({
      ...p,
      env: { FIXTURE_VAR: tricky },
      setup: { ...p.setup, testEnv: { PATH: '/workspace/node_modules/.bin:/usr/local/bin:/usr/bin:/bin' } },
    });
    const setup = await prepareWith(withEnv(plan()), await repo(t));
    assert.equal(setup.record.setup.cache.status, 'stored');
    assert.ok(!(await fromPool(setup)), 'setup runs in a container made for it');
    await pool.drain();

    const hit = await prepareWith(withEnv(plan()), await repo(t));
    assert.equal(hit.record.setup.cache.status, 'hit');
    assert.ok(await fromPool(hit), 'a cache hit: a warm container, the entry streamed in');
    assert.equal(hit.record.setup.commands[0]?.attempts, 0, 'setup did not run');
    assert.match(await sh(hit, 'npm test 2>&1'), /^ok$/m);
    assert.equal(await sh(hit, 'git status --porcelain; grep -v "^#" .git/info/exclude'), '/node_modules\n');
    // The entry reached the container through its own read-only folder: readable, never changed.
    assert.match(
      await sh(
        hit,
        'f=/run/issue-agent-env/entry.tar; test -r $f && echo readable; { echo x >> $f; } 2>/dev/null || echo "append:refused"; touch /run/issue-agent-env/new 2>/dev/null || echo "add:refused"',
      ),
      /^readable\nappend:refused\nadd:refused$/m,
    );
    // The same variables as a container made for the job, in the agent's shell, the harness's shell
    // and a process started beside them (an MCP server), and after the agent's shell was replaced.
    const cold = await prepareWith(withEnv(plan()), await repo(t), false);
    assert.ok(!(await fromPool(cold)));
    const printed = 'printf "%s|%s" "$FIXTURE_VAR" "$PATH"';
    const expected = await sh(cold, printed);
    assert.equal(expected, `${tricky}|/workspace/node_modules/.bin:/usr/local/bin:/usr/bin:/bin`);
    assert.equal(await sh(hit, printed), expected);
    assert.equal((await hit.sandbox.harnessExec(printed, { timeoutMs: 10_000 })).output, expected);
    const proc = await hit.sandbox.openProcess(['printenv', 'FIXTURE_VAR'], {});
    const chunks: Buffer[] = [];
    proc.stdout.on('data', (c: Buffer) => chunks.push(c));
    await proc.closed;
    assert.equal(Buffer.concat(chunks).toString('utf8'), `${tricky}\n`);
    await hit.sandbox.exec('exit 3', { timeoutMs: 10_000 });
    assert.equal(await sh(hit, printed), expected, 'a replaced shell has them too');
    assert.equal(await sh(hit, 'ls /tmp/expanded 2>/dev/null; echo end'), 'end\n', 'nothing was expanded');

    // A repository that commits node_modules: the entry still wins.
    await pool.drain();
    const committed = await prepareWith(
      withEnv(plan()),
      await repo(t, {
        'node_modules/is-number/package.json': '{"name":"is-number","version":"0.0.0-committed"}',
        'node_modules/is-number/index.js': "module.exports = () => 'committed';",
      }),
    );
    assert.ok(await fromPool(committed));
    assert.match(await sh(committed, 'node -p "require(\'is-number/package.json\').version"'), /^7\.0\.0$/m);
  },
  { timeout: 300_000 },
);

/** A real pnpm 9 lockfile of one package (`pnpm install --lockfile-only`). */
const PNPM_LOCK = `lockfileVersion: '9.0'

settings:
  autoInstallPeers: true
  excludeLinksFromLockfile: false

importers:

  .:
    devDependencies:
      is-number:
        specifier: 7.0.0
        version: 7.0.0

packages:

  is-number@7.0.0:
    resolution: {integrity: sha512-41Cifkg6e8TylSpdtTpeLVMqvSBEVzTttHvERD741+pnZ8ANv0004MRL43QKPDlK9cGvNp6NZWZUBlbGXYxxng==}
    engines: {node: '>=0.12.0'}

snapshots:

  is-number@7.0.0: {}
`;

dockerTest(
  'environment: a pnpm project gets pnpm at its lockfile’s major, installed through the proxy, on the PATH of the tests and the agent, and kept by the cache',
  async (_docker, t) => {
    const files = { 'pnpm-lock.yaml': PNPM_LOCK, 'package-lock.json': '' };
    const make = async (): Promise<string> => {
      const dir = await repo(t, files);
      await rm(join(dir, 'package-lock.json'));
      await run('git', ['-C', dir, '-c', 'user.name=t', '-c', 'user.email=t@e', 'commit', '-qam', 'pnpm']);
      return dir;
    };
    const workspace = await make();
    const planned = await planEnvironment(hostProbe(workspace), {}, BASE);
    assert.equal(planned.setup.commands.length, 2, JSON.stringify(planned.setup.commands));
    const s = await settings(t);
    const first = await prepare(t, workspace, planned, s);
    assert.deepEqual(
      first.record.setup.commands.map((c) => c.exitCode),
      [0, 0],
      first.record.setup.commands.map((c) => c.output).join('\n'),
    );
    // The harness's test command for a pnpm project is `pnpm test`.
    const out = await sh(first, 'pnpm --version; pnpm test 2>&1 | tail -1; git status --porcelain');
    assert.match(out, /^9\.\d+\.\d+\nok\n$/, out);
    // A cache hit has pnpm too.
    const hit = await prepare(t, await make(), planned, s);
    assert.equal(hit.record.setup.cache.status, 'hit');
    assert.match(await sh(hit, 'pnpm test 2>&1 | tail -1'), /^ok$/m);
  },
  { timeout: 300_000 },
);

/** A real yarn 1 lockfile of the same package (`yarn install`), resolved from registry.yarnpkg.com. */
const YARN_LOCK = `# THIS IS AN AUTOGENERATED FILE. DO NOT EDIT THIS FILE DIRECTLY.
# yarn lockfile v1


is-number@7.0.0:
  version "7.0.0"
  resolved "https://registry.yarnpkg.com/is-number/-/is-number-7.0.0.tgz#7535345b896734d5f80c4d06c50955527a14f12b"
  integrity sha512-41Cifkg6e8TylSpdtTpeLVMqvSBEVzTttHvERD741+pnZ8ANv0004MRL43QKPDlK9cGvNp6NZWZUBlbGXYxxng==
`;

dockerTest(
  'environment: a yarn 1 project gets yarn classic through the proxy, and `yarn test` runs',
  async (_docker, t) => {
    const workspace = await repo(t, { 'yarn.lock': YARN_LOCK });
    await rm(join(workspace, 'package-lock.json'));
    await run('git', [
      '-C',
      workspace,
      '-c',
      'user.name=t',
      '-c',
      'user.email=t@e',
      'commit',
      '-qam',
      'yarn',
    ]);
    const planned = await planEnvironment(hostProbe(workspace), {}, BASE);
    const env = await prepare(t, workspace, planned, await settings(t));
    assert.deepEqual(
      env.record.setup.commands.map((c) => c.exitCode),
      [0, 0],
      env.record.setup.commands.map((c) => c.output).join('\n'),
    );
    const out = await sh(env, 'yarn --version; yarn test 2>&1 | grep -x ok; git status --porcelain');
    assert.match(out, /^1\.\d+\.\d+\nok\n$/, out);
    const hosts = new Set(env.record.egress.setup?.requests.map((r) => r.host));
    assert.ok(hosts.has('registry.yarnpkg.com'), [...hosts].join(', '));
  },
  { timeout: 300_000 },
);

/** A real yarn 4 lockfile of the same package (`yarn install` with yarn 4.18.1). */
const BERRY_LOCK = `# This file is generated by running "yarn install" inside your project.
# Manual changes might be lost - proceed with caution!

__metadata:
  version: 10
  cacheKey: 10c0

"env-fixture@workspace:.":
  version: 0.0.0-use.local
  resolution: "env-fixture@workspace:."
  dependencies:
    is-number: "npm:7.0.0"
  languageName: unknown
  linkType: soft

"is-number@npm:7.0.0":
  version: 7.0.0
  resolution: "is-number@npm:7.0.0"
  checksum: 10c0/b4686d0d3053146095ccd45346461bc8e53b80aeb7671cc52a4de02dbbf7dc0d1d2a986e2fe4ae206984b4d34ef37e8b795ebc4f4295c978373e6575e295d811
  languageName: node
  linkType: hard
`;

dockerTest(
  'environment: a yarn berry project (Plug’n’Play) gets the yarn of its packageManager through the proxy; `yarn test` runs, the cache keeps it',
  async (_docker, t) => {
    const make = async (): Promise<string> => {
      const workspace = await repo(t, {
        // With its final newline: yarn writes package.json back normalized.
        'package.json': `${JSON.stringify({ ...PACKAGE_JSON, packageManager: 'yarn@4.18.1' }, null, 2)}\n`,
        'yarn.lock': BERRY_LOCK,
      });
      await run('git', ['-C', workspace, 'rm', '-q', 'package-lock.json']);
      await run('git', [
        '-C',
        workspace,
        '-c',
        'user.name=t',
        '-c',
        'user.email=t@e',
        'commit',
        '-qm',
        'berry',
      ]);
      return workspace;
    };
    const workspace = await make();
    const planned = await planEnvironment(hostProbe(workspace), {}, BASE);
    assert.equal(planned.setup.commands.length, 2, JSON.stringify(planned.setup.commands));
    const s = await settings(t);
    const env = await prepare(t, workspace, planned, s);
    assert.deepEqual(
      env.record.setup.commands.map((c) => c.exitCode),
      [0, 0],
      env.record.setup.commands.map((c) => c.output).join('\n'),
    );
    // Plug'n'Play: no node_modules; what yarn made is excluded from the change.
    const out = await sh(
      env,
      'yarn --version; yarn test 2>&1 | grep -x ok; test -e node_modules || echo no-node_modules; git status --porcelain',
    );
    assert.match(out, /^4\.18\.1\nok\nno-node_modules\n$/, out);
    const hosts = new Set(env.record.egress.setup?.requests.map((r) => r.host));
    assert.ok(hosts.has('registry.yarnpkg.com'), [...hosts].join(', '));
    const hit = await prepare(t, await make(), planned, s);
    assert.equal(hit.record.setup.cache.status, 'hit');
    assert.match(await sh(hit, 'yarn test 2>&1 | grep -x ok; git status --porcelain'), /^ok\n$/);
  },
  { timeout: 300_000 },
);

dockerTest(
  'environment: a package.json with dev dependencies and no lockfile gets them installed, writes no lockfile into the change, and its cached environment is reused only within its window',
  async (_docker, t) => {
    const workspace = await repoWithoutLock(t);
    const planned = await planEnvironment(hostProbe(workspace), {}, BASE);
    assert.deepEqual(
      planned.setup.commands.map((c) => c.command),
      ['npm install --no-package-lock --no-audit --no-fund'],
    );
    assert.equal(planned.setup.unpinned, true);
    assert.match(planned.setup.commands[0]?.reason ?? '', /names 1 dependencies and there is no lockfile/);
    const s = await settings(t);
    const env = await prepare(t, workspace, planned, s, 'test:unpinned');
    assert.equal(env.record.setup.commands[0]?.exitCode, 0, env.record.setup.commands[0]?.output);
    assert.equal(env.record.setup.cache.status, 'stored');
    // The tests find their dependency; nothing but the repository's own files is in the change.
    assert.match(await sh(env, 'npm test 2>&1'), /^ok$/m);
    assert.equal((await sh(env, 'git status --porcelain')).trim(), '', 'no lockfile, no node_modules');
    // The same window reuses it; a later window (a setting of a millisecond) runs setup again.
    const again = await prepare(t, await repoWithoutLock(t), planned, s, 'test:unpinned');
    assert.equal(again.record.setup.cache.status, 'hit');
    const later = await prepare(
      t,
      await repoWithoutLock(t),
      planned,
      { ...s, cacheUnpinnedMs: 1 },
      'test:unpinned',
    );
    assert.notEqual(later.record.setup.cache.status, 'hit');
  },
  { timeout: 180_000 },
);

async function repoWithoutLock(t: TestContext): Promise<string> {
  const workspace = await repo(t);
  await rm(join(workspace, 'package-lock.json'));
  await run('git', ['-C', workspace, 'add', '-A']);
  await run('git', [
    '-C',
    workspace,
    '-c',
    'user.name=t',
    '-c',
    'user.email=t@e',
    'commit',
    '-qm',
    'no lock',
  ]);
  return workspace;
}
