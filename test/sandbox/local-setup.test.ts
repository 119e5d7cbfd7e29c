import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, it, test, type TestContext } from 'node:test';
import type { EnvironmentSettings } from '../../src/config/agent-env.js';
import type { EnvironmentPlan } from '../../src/environment/plan.js';
import {
  EnvironmentSetupError,
  prepareLocalEnvironment,
  type PreparedLocalEnvironment,
  localTestEnv,
} from '../../src/environment/prepare-local.js';
import { isolationSupport } from '../../src/sandbox/local/launch.js';
import { LocalSandbox, LocalSetupFailedError } from '../../src/sandbox/local/local-sandbox.js';
import { reverse, secretForms } from '../../src/secrets/forms.js';
import {
  IPC_LEFT_COMMAND,
  ipcLeakCommand,
  KEYRING_LEFT_COMMAND,
  keyringLeakCommand,
  LEAK_ENCODINGS,
  leakCommand,
} from '../support/secret-leaks.js';
import { registryDeployment } from '../support/egress-env.js';
import { makeFixtureRepo } from '../support/fixture-repo.js';
import { buildWheels, startPackageIndex } from '../support/pypi-index.js';
import { durationsProject, HATCHLING_PYPROJECT } from '../support/from-source-projects.js';
import { hostProbe } from '../../src/environment/host-probe.js';
import { planEnvironment } from '../../src/environment/plan.js';

/** A tree of the base branch: setup may have its secrets (see setup-trust.ts). */
const BASE = { kind: 'base', ref: 'main' } as const;

/**
 * The setup phase of the isolated local sandbox (the Action's default), end to end: npm ci of a
 * one-package lockfile through the egress proxy from a sandbox whose only interface is `lo`; a host
 * off the allowlist refused and logged; a canary setup secret that setup sees and nothing after it
 * does (the agent's shell, any process's environment, any file it can read); a process setup left
 * running is gone before the agent's shell starts.
 */

const run = promisify(execFile);
const REPO = fileURLToPath(new URL('../..', import.meta.url));
// Not under /tmp, which the sandbox makes private (the workspace is bound in anyway; this keeps the
// fixtures where a person debugging a failure finds them).
const ARTIFACTS = join(REPO, 'test-artifacts', 'local-setup');
const CANARY = 'ia-canary-7f3c9a1e5b2d4068';
const SANDBOX_PATH = process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin';
const support = await isolationSupport();
const skip =
  !support.ok && process.env.ISSUE_AGENT_REQUIRE_DOCKER !== '1'
    ? `no isolation here: ${support.reason}`
    : false;

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

async function repo(t: TestContext): Promise<string> {
  await mkdir(ARTIFACTS, { recursive: true });
  const dir = await mkdtemp(join(ARTIFACTS, 'ws-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'package.json'), JSON.stringify(PACKAGE_JSON, null, 2));
  await writeFile(join(dir, 'package-lock.json'), JSON.stringify(LOCKFILE, null, 2));
  await writeFile(join(dir, '.gitignore'), '');
  await run('git', ['init', '-q', '-b', 'main', dir]);
  await run('git', ['-C', dir, 'add', '-A']);
  await run('git', ['-C', dir, '-c', 'user.name=t', '-c', 'user.email=t@e', 'commit', '-qm', 'init']);
  return dir;
}

function plan(commands: readonly string[], over: Partial<EnvironmentPlan> = {}): EnvironmentPlan {
  return {
    image: 'issue-agent/node:22',
    runtimes: [{ language: 'node', version: '22', requested: '22', source: 'configured' }],
    setup: {
      source: 'configured',
      reason: 'test',
      commands: commands.map((command) => ({ command, reason: 'test' })),
      outputs: ['node_modules'],
      inputs: ['package.json', 'package-lock.json'],
      testEnv: {},
    },
    env: {},
    setupAllowHosts: ['registry.npmjs.org'],
    agentAllowHosts: [],
    secretNames: ['CANARY_TOKEN'],
    cache: true,
    trust: { trusted: true, secrets: true, reason: 'a test plan', setupEnv: {} },
    ...over,
  };
}

async function settings(over: Partial<EnvironmentSettings> = {}): Promise<EnvironmentSettings> {
  const deployment = await registryDeployment();
  return {
    setupEnabled: true,
    allowHosts: [],
    allowCidrs: deployment.allowCidrs,
    extraCaPem: deployment.extraCaPem,
    npmRegistry: null,
    pipIndexUrl: null,
    setupSecrets: { CANARY_TOKEN: CANARY },
    grants: null,
    cacheUnpinnedMs: 24 * 3_600_000,
    cacheDir: null,
    cacheMaxBytes: 0,
    setupTimeoutMs: 5 * 60_000,
    ...over,
  };
}

async function prepare(
  t: TestContext,
  workspace: string,
  p: EnvironmentPlan,
  s: EnvironmentSettings,
): Promise<PreparedLocalEnvironment> {
  const env = await prepareLocalEnvironment({
    workspace,
    plan: p,
    settings: s,
    path: SANDBOX_PATH,
    isolate: { hide: [], workspaceBytes: 256 * 1024 * 1024 },
    scrub: (text) => text.split(CANARY).join('***'),
  });
  t.after(async () => {
    await env.sandbox.close();
    await env.close();
  });
  return env;
}

const sh = async (env: PreparedLocalEnvironment, command: string): Promise<string> =>
  (await env.sandbox.exec(command, { timeoutMs: 60_000 })).output;

describe('the isolated local sandbox: setup phase', { skip }, () => {
  it('a Python project with no config: a virtualenv of the runner’s Python, its packages from the deployment’s index through the proxy, pytest runs in it', async (t) => {
    // The runner's Python here is the host's (/usr/bin/python3: the sandbox hides HOME, and a pyenv in
    // it), with venv and pytest (.ci/run installs both). The wheels are built in the Python image.
    try {
      await run('docker', ['info'], { timeout: 15_000 });
    } catch (error) {
      if (process.env.ISSUE_AGENT_REQUIRE_DOCKER === '1') throw error;
      t.skip('no Docker engine to build the wheels');
      return;
    }
    const wheels = await buildWheels(['plurals', 'frozenclock']);
    t.after(() => rm(join(wheels, '..'), { recursive: true, force: true }));
    const index = await startPackageIndex(wheels);
    t.after(() => index.close());
    const fixture = makeFixtureRepo('python-durations');
    t.after(() => {
      fixture.cleanup();
    });
    const plan = await planEnvironment(hostProbe(fixture.dir), {}, BASE);
    const env = await prepare(
      t,
      fixture.dir,
      plan,
      await settings({ allowCidrs: ['127.0.0.1/32'], extraCaPem: null, pipIndexUrl: index.url }),
    );
    const rec = env.record;
    assert.deepEqual(
      rec.setup.commands.map((c) => [c.command, c.exitCode]),
      [
        ['python3 -m venv --system-site-packages .venv', 0],
        ['.venv/bin/pip install -r requirements.txt -r requirements-dev.txt', 0],
      ],
      rec.setup.commands.map((c) => c.output).join('\n'),
    );
    assert.match(
      rec.setup.commands[1]?.output ?? '',
      /Successfully installed frozenclock-0\.4\.0 plurals-1\.2\.0/,
    );
    const python = rec.runtimes.find((r) => r.language === 'python');
    assert.match(python?.note ?? '', /runner's Python .*actions\/setup-python/);
    const port = Number(new URL(index.url).port);
    const egress = rec.egress.setup;
    assert.ok(egress !== null && egress.requests.length > 0);
    for (const r of egress.requests) {
      assert.deepEqual([r.host, r.port, r.allowed], ['127.0.0.1', port, true], JSON.stringify(r));
    }
    assert.equal(index.requests.filter((p) => p.startsWith('/files/')).length, 2);
    // The harness's test command for this project, in the agent phase: the venv's packages are there,
    // the one bug fails, and the index is out of reach now.
    const out = await sh(env, 'python3 -m pytest -rA 2>&1 | tail -12');
    assert.match(out, /FAILED tests\/test_ago\.py::test_one_hour/, out);
    assert.match(out, /1 failed, 6 passed/, out);
    const reach = await sh(
      env,
      `python3 -c "import urllib.request as u; u.urlopen('${index.url}', timeout=3)" >/dev/null 2>&1; echo "exit:$?"`,
    );
    assert.match(reach, /exit:1/);
    assert.equal(await sh(env, 'git status --porcelain'), '');
  });

  it('a Python project whose build backend the index lacks runs from source in the local sandbox, and the record says so', async (t) => {
    try {
      await run('docker', ['info'], { timeout: 15_000 });
    } catch (error) {
      if (process.env.ISSUE_AGENT_REQUIRE_DOCKER === '1') throw error;
      t.skip('no Docker engine to build the wheels');
      return;
    }
    const wheels = await buildWheels(['plurals', 'frozenclock']);
    t.after(() => rm(join(wheels, '..'), { recursive: true, force: true }));
    const index = await startPackageIndex(wheels);
    t.after(() => index.close());
    const project = durationsProject(HATCHLING_PYPROJECT);
    t.after(() => {
      project.cleanup();
    });
    const plan = await planEnvironment(hostProbe(project.dir), {}, BASE);
    const env = await prepare(
      t,
      project.dir,
      plan,
      await settings({ allowCidrs: ['127.0.0.1/32'], extraCaPem: null, pipIndexUrl: index.url }),
    );
    const setup = env.record.setup;
    assert.deepEqual(
      setup.commands.map((c) => c.exitCode),
      [0, 1, 0, 0, 0],
      setup.commands.map((c) => `$ ${c.command}\n${c.output}`).join('\n'),
    );
    assert.match(setup.commands[1]?.output ?? '', /No matching distribution found for hatchling/);
    assert.deepEqual(setup.fromSource, {
      missing: 'hatchling',
      isBackend: true,
      importRoot: 'src',
      packages: ['durations'],
    });
    assert.match(setup.reason, /installed from source: the build backend hatchling could not be fetched/);
    // The path file names the host folder the workspace is here.
    const where = await sh(env, "(cd / && python3 -c 'import durations; print(durations.__file__)')");
    assert.equal(where.trim(), join(project.dir, 'src', 'durations', '__init__.py'));
    const out = await sh(env, 'python3 -m pytest -rA 2>&1 | tail -12');
    assert.match(out, /FAILED tests\/test_ago\.py::test_one_hour/, out);
    assert.match(out, /1 failed, 6 passed/, out);
  });

  it('npm ci through the egress proxy; off-list refused and logged; the canary and a daemon end with setup', async (t) => {
    const workspace = await repo(t);
    const env = await prepare(
      t,
      workspace,
      plan([
        'npm ci --no-audit --no-fund',
        [
          // What setup sees: only lo, and the canary.
          'ls /sys/class/net > "$TMPDIR/setup-interfaces.txt"',
          'tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " " >> "$TMPDIR/setup-interfaces.txt"',
          '[ "$CANARY_TOKEN" = ' + CANARY + ' ] && echo canary-seen > "$TMPDIR/setup-canary.txt"',
          // Off the allowlist, and straight past the proxy: both fail.
          'curl -sS -m 10 https://example.com/ -o /dev/null; echo "offlist=$?" >> "$TMPDIR/egress.txt"',
          'curl -sS -m 10 --noproxy "*" https://registry.npmjs.org/ -o /dev/null; echo "direct=$?" >> "$TMPDIR/egress.txt"',
          // A daemon with the canary in its environment, detached from setup every way it can be.
          '(setsid sleep 4242 </dev/null >/dev/null 2>&1 &)',
          '{ nohup node -e "setInterval(() => {}, 1000)" --ia-daemon </dev/null >/dev/null 2>&1 & }',
          'sleep 0.5',
          `ps -eo args= | grep -cE '[s]leep 4242|[i]a-daemon' > "$TMPDIR/daemons-alive.txt"`,
        ].join('; '),
      ]),
      await settings(),
    );
    const rec = env.record;
    assert.equal(rec.setup.commands[0]?.exitCode, 0, rec.setup.commands[0]?.output);
    assert.equal(rec.setup.commands[1]?.exitCode, 0, rec.setup.commands[1]?.output);
    assert.deepEqual(rec.setup.secrets, ['CANARY_TOKEN']);
    assert.equal(rec.setup.cache.status, 'disabled');
    const node = rec.runtimes.find((r) => r.language === 'node');
    assert.match(node?.note ?? '', /runner's Node v\d+.*actions\/setup-node/);

    const egress = rec.egress.setup;
    assert.ok(egress !== null);
    assert.ok(
      egress.requests.some((r) => r.allowed && r.host === 'registry.npmjs.org' && r.bytesDown > 0),
      `npm reached the registry through the proxy: ${JSON.stringify(egress.requests)}`,
    );
    assert.deepEqual(
      egress.denied.map((d) => d.host),
      ['example.com'],
    );

    // Setup saw lo only, and the canary; its other ways out failed.
    const seen = await sh(
      env,
      'cat "$TMPDIR/setup-interfaces.txt" "$TMPDIR/setup-canary.txt" "$TMPDIR/egress.txt"',
    );
    assert.match(seen, /^lo\nlo\ncanary-seen\n/, seen);
    assert.match(seen, /^offlist=[1-9]\d*$/m, seen);
    assert.match(seen, /^direct=[1-9]\d*$/m, seen);
    assert.equal((await sh(env, 'cat "$TMPDIR/daemons-alive.txt"')).trim(), '2', 'both daemons ran in setup');

    // The agent phase: the dependency is installed, only lo, no proxy, no canary anywhere.
    assert.match(await sh(env, 'npm test 2>&1'), /^ok$/m);
    const agent = await sh(
      env,
      [
        'ls /sys/class/net',
        'tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " "',
        'echo "proxyvars=$(env | grep -ic proxy)"',
        'curl -sS -m 5 --proxy http://127.0.0.1:3128 https://registry.npmjs.org/ -o /dev/null 2>/dev/null; echo "viaforwarder=$?"',
        `echo "env=$(env | grep -c ${CANARY})"`,
        `echo "environ=$(cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c ${CANARY})"`,
        `echo "files=$(grep -rlsF ${CANARY} . "$HOME" "$TMPDIR" /tmp /var/tmp /dev/shm /run | wc -l)"`,
        // Running processes (not zombies) other than the init, the holder and these shells.
        `echo "daemons=$(ps -eo stat=,args= | grep -v '^Z' | grep -cE '[s]leep 4242|[i]a-daemon|[i]a-forwarder|[n]ode -e')"`,
        'git status --porcelain',
      ].join('; '),
    );
    assert.match(agent, /^lo\nlo\n/, agent);
    assert.match(agent, /^proxyvars=0$/m, agent);
    assert.match(agent, /^viaforwarder=[1-9]\d*$/m, agent);
    assert.match(agent, /^env=0$/m, agent);
    assert.match(agent, /^environ=0$/m, agent);
    assert.match(agent, /^files=0$/m, agent);
    assert.match(agent, /^daemons=0$/m, agent);
    // node_modules is a setup output: excluded from the harness's snapshots.
    assert.doesNotMatch(agent, /node_modules/);
  });

  it('a setup secret written to a file fails setup, and the record names neither the secret nor its value', async (t) => {
    const workspace = await repo(t);
    await assert.rejects(
      prepare(
        t,
        workspace,
        plan([
          // A copy, and a file named by the reversed value: the message names both, never the value.
          `echo "token=$CANARY_TOKEN" > leaked.txt; python3 -c 'import os; open(os.environ["TMPDIR"] + "/" + os.environ["CANARY_TOKEN"][::-1], "w")'`,
        ]),
        await settings(),
      ),
      (error: unknown) => {
        assert.ok(error instanceof EnvironmentSetupError, String(error));
        assert.match(error.message, /leaked\.txt/);
        assert.match(error.message, /\/\[a setup secret\] \(its name\)/);
        assert.match(error.message, /setup secret must not outlive setup/);
        assert.doesNotMatch(JSON.stringify(error.record), new RegExp(CANARY));
        assert.ok(!error.message.includes(reverse(CANARY)));
        return true;
      },
    );
  });

  it('a setup secret left reversed, in hex, base64 or base32, in the workspace, HOME, TMPDIR, /tmp, /var/tmp or /dev/shm, as a name, a link target, an extended attribute, a queue or an unreadable file: each copy alone is found', async (t) => {
    const workspace = await repo(t);
    const places = ['$PWD', '$HOME', '$TMPDIR', '/tmp', '/var/tmp', '/dev/shm'];
    const command = leakCommand('CANARY_TOKEN', places, {
      name: '/tmp',
      folder: '$HOME',
      link: '$PWD/leak-link',
      literal: '/dev/shm/leak-literal',
      hidden: '$TMPDIR/leak-hidden',
      locked: '$HOME/leak-locked',
      xattr: '/tmp/leak-xattr',
      mqueue: true,
    });
    let holders: readonly string[] = [];
    let output = '';
    await assert.rejects(
      LocalSandbox.create({
        workspace,
        path: SANDBOX_PATH,
        isolate: { hide: [], workspaceBytes: 64 * 1024 * 1024 },
        setup: {
          commands: [`echo "places: $PWD $HOME $TMPDIR"; ${command}`],
          env: { CANARY_TOKEN: CANARY },
          secretValues: [CANARY],
          timeoutMs: 60_000,
          outputs: [],
        },
      }),
      (error: unknown) => {
        assert.ok(error instanceof LocalSetupFailedError, String(error));
        output = error.results[0]?.output ?? '';
        assert.equal(error.results[0]?.exitCode, 0, output);
        holders = error.holders;
        return true;
      },
    );
    const [pwd, home, tmp] = /^places: (\S+) (\S+) (\S+)$/m.exec(output)?.slice(1) ?? [];
    assert.ok(pwd !== undefined && home !== undefined && tmp !== undefined, output);
    const expand = (p: string): string =>
      p.replace('$PWD', pwd).replace('$HOME', home).replace('$TMPDIR', tmp);
    // Each copy is a file of its own: the scan names each, so each alone is found.
    const expected = [
      ...places.flatMap((p) => Object.keys(LEAK_ENCODINGS).map((f) => `${expand(p)}/${f}`)),
      '/dev/shm/leak-literal',
      '/tmp/leak-xattr (an extended attribute)',
      '/tmp/[a setup secret] (its name)',
      `${home}/[a setup secret] (its name)`,
      `${pwd}/leak-link -> /nowhere/`,
      `${tmp}/leak-hidden (not readable by the sandbox user)`,
      `${home}/leak-locked (not readable by the sandbox user)`,
    ];
    for (const place of expected) {
      assert.ok(
        holders.some((h) => h === place || h.startsWith(place.endsWith('/') ? place : `${place} `)),
        `${place} is named:\n${holders.join('\n')}`,
      );
    }
    assert.ok(
      holders.some((h) => /^\/(dev|run)\/mqueue\/\[a setup secret\] \(its name\)$/.test(h)),
      `the queue is named:\n${holders.join('\n')}`,
    );
    assert.equal(holders.length, expected.length + 1, holders.join('\n'));
    for (const h of holders) {
      for (const form of secretForms(CANARY)) assert.ok(!h.includes(form), `no value in ${h}`);
    }
  });

  it('System V shared memory, message queues and semaphores, and POSIX message queues setup made (holding the secret) do not reach the agent phase', async (t) => {
    const workspace = await repo(t);
    const sandbox = await LocalSandbox.create({
      workspace,
      path: SANDBOX_PATH,
      isolate: { hide: [], workspaceBytes: 64 * 1024 * 1024 },
      setup: {
        commands: [ipcLeakCommand('CANARY_TOKEN')],
        env: { CANARY_TOKEN: CANARY },
        secretValues: [CANARY],
        timeoutMs: 60_000,
        outputs: [],
      },
    });
    t.after(() => sandbox.close());
    assert.match(sandbox.setupReport?.results[0]?.output ?? '', /ipc-made/);
    const left = (await sandbox.exec(IPC_LEFT_COMMAND, { timeoutMs: 30_000 })).output;
    assert.doesNotMatch(left, /^(shm|msg|sem|mqueue): /m, left);
    assert.match(left, /^shmget-by-key: -1$/m, left);
    assert.match(left, /^mq_open-by-name: -1$/m, left);
  });

  it("keys setup put in the kernel's keyrings (user and session, holding the secret) cannot be read in the agent phase", async (t) => {
    const workspace = await repo(t);
    const sandbox = await LocalSandbox.create({
      workspace,
      path: SANDBOX_PATH,
      isolate: { hide: [], workspaceBytes: 64 * 1024 * 1024 },
      setup: {
        commands: [keyringLeakCommand('CANARY_TOKEN')],
        env: { CANARY_TOKEN: CANARY },
        secretValues: [CANARY],
        timeoutMs: 60_000,
        outputs: [],
      },
    });
    t.after(() => sandbox.close());
    assert.match(sandbox.setupReport?.results[0]?.output ?? '', /keys-made/);
    const left = (await sandbox.exec(KEYRING_LEFT_COMMAND, { timeoutMs: 30_000 })).output;
    assert.match(left, /keyring-checked/, left);
    assert.doesNotMatch(left, /readable:/, left);
    assert.ok(!left.includes(CANARY));
  });

  it('on a tree that is not trusted: no setup secret, install scripts off, and a failure says why', async (t) => {
    const workspace = await repo(t);
    const reason = 'the workspace changes what setup runs against the base branch `main` (package.json)';
    const command = 'echo "token=${CANARY_TOKEN:-none} scripts=$npm_config_ignore_scripts"; exit 5';
    const untrusted = plan([command], {
      trust: {
        trusted: false,
        secrets: false,
        reason,
        commands: [{ command, reason: 'test' }],
        setupEnv: { npm_config_ignore_scripts: 'true' },
      },
    });
    await assert.rejects(prepare(t, workspace, untrusted, await settings()), (error: unknown) => {
      assert.ok(error instanceof EnvironmentSetupError, String(error));
      assert.equal(
        error.message,
        `the setup command \`${command}\` exited with 5 (setup ran without the setup secrets (CANARY_TOKEN) and with install scripts off: ${reason})`,
      );
      assert.equal(error.record.setup.commands[0]?.output.trim(), 'token=none scripts=true');
      assert.deepEqual(error.record.setup.secrets, []);
      assert.deepEqual(error.record.setup.trust, {
        trusted: false,
        reason,
        withheld: ['CANARY_TOKEN'],
        scriptsOff: true,
      });
      return true;
    });
  });

  it('a failing command fails setup with its output; a setup that is off runs nothing', async (t) => {
    const workspace = await repo(t);
    await assert.rejects(
      prepare(t, workspace, plan(['echo "$CANARY_TOKEN broke"; exit 3']), await settings()),
      (error: unknown) => {
        assert.ok(error instanceof EnvironmentSetupError, String(error));
        assert.match(error.message, /exited with 3/);
        const cmd = error.record.setup.commands[0];
        assert.equal(cmd?.exitCode, 3);
        assert.equal(cmd.output.trim(), '*** broke');
        assert.equal(error.transient, false);
        return true;
      },
    );
    const off = await prepare(
      t,
      workspace,
      plan(['echo ran > ran.txt']),
      await settings({ setupEnabled: false }),
    );
    assert.equal(off.record.setup.commands[0]?.exitCode, null);
    assert.match(off.record.setup.reason, /ISSUE_AGENT_SETUP=off/);
    assert.equal(off.record.egress.setup, null);
    assert.match(await sh(off, 'ls ran.txt 2>&1; ls /sys/class/net'), /No such file[\s\S]*^lo$/m);
  });
});

test('the plan’s test variables, written for the images, are moved to the local sandbox’s workspace and PATH', () => {
  const env = localTestEnv(
    {
      VIRTUAL_ENV: '/workspace/.venv',
      PATH: '/workspace/.venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      OTHER: 'kept',
    },
    '/home/runner/work/_temp/ws',
    '/opt/hostedtoolcache/node/22/x64/bin:/usr/bin:/bin',
  );
  assert.deepEqual(env, {
    VIRTUAL_ENV: '/home/runner/work/_temp/ws/.venv',
    PATH: '/home/runner/work/_temp/ws/.venv/bin:/opt/hostedtoolcache/node/22/x64/bin:/usr/bin:/bin',
    OTHER: 'kept',
  });
});
