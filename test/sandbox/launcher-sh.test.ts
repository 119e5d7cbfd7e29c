import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { after, describe, it } from 'node:test';
import ts from 'typescript';
import { childrenOf, descendantsOf } from '../../src/sandbox/local/proc-tree.js';
import { hostArtifacts } from '../support/host-artifacts.js';

/**
 * The local sandbox's launcher (src/sandbox/local/launcher.sh) on its own, started as launch.ts
 * starts it (`bash -c <its text> <name> <stage> …`): what it refuses before it touches anything,
 * the holder stage as a plain process, and the whole setup in fresh namespaces (as root: the
 * `root` mechanism's way, and the `userns` one's), looked at from the host. Then the shipped forms:
 * the build's dist/ and the Action's dist-action/ carry the same file, beside the code that reads it.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SCRIPT = join(ROOT, 'src', 'sandbox', 'local', 'launcher.sh');
const TEXT = readFileSync(SCRIPT, 'utf8');
const SYSTEM_PATH = '/usr/sbin:/usr/bin:/sbin:/bin';
const READY = 'ia-test-ready';
const EGRESS_MOUNT = '/run/ia-test-egress';
const HARNESS_BASH = '/run/ia-test-harness/bash';
const NOBODY = 65534;
const isRoot = process.getuid?.() === 0;
// CI (ISSUE_AGENT_REQUIRE_DOCKER=1) runs as root; elsewhere the namespace tests skip without it.
const needsRoot = isRoot
  ? false
  : process.env.ISSUE_AGENT_REQUIRE_DOCKER === '1'
    ? false
    : 'the setup stage mounts: it runs here as root does (the `root` mechanism)';

const temps: string[] = [];
after(() => {
  for (const t of temps) rmSync(t, { recursive: true, force: true });
});

function temp(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  temps.push(dir);
  return dir;
}

/** `bash -c <launcher> <name> <args…>`, as launch.ts runs it. */
function bashArgv(name: string, args: readonly string[]): string[] {
  return ['bash', '--noprofile', '--norc', '-c', TEXT, name, ...args];
}

function runStage(
  args: readonly string[],
  options: { path?: string; prefix?: readonly string[] } = {},
): { status: number | null; stdout: string; stderr: string } {
  const [cmd, ...rest] = [...(options.prefix ?? []), ...bashArgv('ia-test', args)];
  const r = spawnSync(cmd ?? 'bash', rest, {
    encoding: 'utf8',
    env: { PATH: options.path ?? SYSTEM_PATH },
    timeout: 20_000,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** The setup stage's arguments before its directives, as launch.ts gives them for `root`. */
const PRIVILEGED = [
  String(NOBODY),
  String(NOBODY),
  'privileged',
  String(NOBODY),
  String(NOBODY),
  READY,
  EGRESS_MOUNT,
  HARNESS_BASH,
];

describe('launcher.sh: the file', () => {
  it('is valid bash, and shellcheck finds nothing in it', (t) => {
    const syntax = spawnSync('bash', ['-n', SCRIPT], { encoding: 'utf8' });
    assert.equal(syntax.status, 0, syntax.stderr);
    const lint = spawnSync('shellcheck', [SCRIPT], { encoding: 'utf8' });
    if (lint.error !== undefined) {
      // `npm run lint` (lint:sh) runs shellcheck on every .sh and fails without it.
      t.skip('shellcheck is not installed here');
      return;
    }
    assert.equal(lint.status, 0, lint.stdout);
  });
});

describe('launcher.sh: refusals before anything is touched', () => {
  // Every tool that changes something is a stand-in that records its call and fails: a refusal
  // must come before any of them runs.
  const fake = temp('ia-launcher-fake-');
  const calls = join(fake, 'calls');
  for (const tool of ['mount', 'umount', 'unshare', 'setpriv', 'chown', 'cp', 'mkdir', 'ip']) {
    writeFileSync(join(fake, tool), `#!/bin/sh\necho "${tool} $*" >>'${calls}'\nexit 1\n`, { mode: 0o755 });
  }
  const path = `${fake}:${SYSTEM_PATH}`;
  const refused = (args: readonly string[], reason: RegExp): void => {
    rmSync(calls, { force: true });
    const r = runStage(args, { path });
    assert.equal(r.status, 97, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, /^ia-sandbox: /);
    assert.match(r.stderr, reason);
    assert.equal(r.stdout, '');
    assert.ok(!existsSync(calls), `nothing may run before the refusal: ${readFileOr(calls)}`);
  };
  const withArg = (i: number, value: string): string[] => PRIVILEGED.map((a, j) => (j === i ? value : a));

  it('an unknown or missing stage', () => {
    refused([], /unknown stage '' \(setup, layer or holder\)/);
    refused(['init'], /unknown stage 'init'/);
  });

  it('the setup stage: missing arguments, and each argument that is not what it must be', () => {
    refused(['setup'], /usage: setup </);
    refused(['setup', ...PRIVILEGED.slice(0, 7)], /usage: setup </);
    refused(['setup', ...withArg(0, 'x')], /the owner uid is not a number: x/);
    refused(['setup', ...withArg(1, '-1')], /the owner gid is not a number: -1/);
    refused(['setup', ...withArg(2, 'root')], /unknown mode: root/);
    refused(['setup', ...withArg(3, '0 0')], /the uid is not a number: 0 0/);
    refused(['setup', ...withArg(4, '')], /the gid is not a number: $/m);
    refused(['setup', ...withArg(5, 'ready word')], /the ready word is not a plain word/);
    refused(['setup', ...withArg(5, 'ready\n')], /the ready word is not a plain word/);
    refused(
      ['setup', ...withArg(6, '/etc/egress')],
      /the egress mount is not a path under \/run: \/etc\/egress/,
    );
    refused(['setup', ...withArg(6, '/run/')], /the egress mount is not a path under \/run/);
    refused(['setup', ...withArg(7, '/run/../etc/bash')], /the harness's bash is not a plain path/);
    refused(['setup', ...withArg(7, '/run/h//bash')], /the harness's bash is not a plain path/);
    refused(['setup', ...withArg(7, '/run/bash')], /the harness's bash needs a folder of its own/);
  });

  it('the setup stage: unknown directives and workspace sizes that are not a number of bytes', () => {
    refused(['setup', ...PRIVILEGED, 'Wrelative/path'], /unknown directive: Wrelative\/path/);
    refused(['setup', ...PRIVILEGED, 'X/tmp'], /unknown directive: X\/tmp/);
    refused(['setup', ...PRIVILEGED, '/tmp'], /unknown directive: \/tmp/);
    // A size is put into mount options: nothing but digits may reach them.
    refused(['setup', ...PRIVILEGED, 'Q/1m,uid=0'], /not a workspace size: 1m,uid=0/);
    refused(['setup', ...PRIVILEGED, 'Q/0'], /not a workspace size: 0/);
    refused(['setup', ...PRIVILEGED, 'Q/'], /not a workspace size: $/m);
    refused(['setup', ...PRIVILEGED, 'W/ws', 'Q/-5'], /not a workspace size: -5/);
  });

  it('the layer and holder stages', () => {
    refused(['layer', '1', '2', READY], /usage: layer </);
    refused(['layer', 'a', '2', READY, '1'], /the uid is not a number: a/);
    refused(['layer', '1', '2', READY, '2'], /the layer flag is not 0 or 1: 2/);
    refused(['layer', '1', '2', '$(id)', '1'], /the ready word is not a plain word/);
    refused(['holder', 'agent', '1'], /usage: holder </);
    refused(['holder', 'host', '1', READY], /unknown side: host/);
    refused(['holder', 'agent', 'yes', READY], /the layer flag is not 0 or 1: yes/);
  });

  it('what launch.ts sends passes the checks: the setup goes on to its first mount', () => {
    rmSync(calls, { force: true });
    const r = runStage(['setup', ...PRIVILEGED, 'Q/1048576', 'E/run/x', 'W/ws', 'H/h', 'M/m', 'P/p'], {
      path,
    });
    assert.equal(r.status, 97, r.stderr);
    assert.match(r.stderr, /^ia-sandbox: could not make the mounts private\n$/);
    assert.equal(readFileOr(calls), 'mount --make-rprivate /\n');
  });
});

function readFileOr(path: string): string {
  return existsSync(path) ? readFileSync(path, 'utf8') : '';
}

/** A process's standard output up to its end, and whether it is still running then. */
function outputUntilClosed(child: ChildProcessWithoutNullStreams): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => {
      reject(new Error(`no end of output within 15 s: ${out}`));
    }, 15_000);
    child.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
    child.stdout.once('close', () => {
      clearTimeout(timer);
      resolve(out);
    });
  });
}

describe('launcher.sh: the holder stage on its own', () => {
  const asNobody = isRoot
    ? ['setpriv', `--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', '--']
    : [];
  const uid = isRoot ? NOBODY : (process.getuid?.() ?? -1);

  it('checks its folders, reports the ready word, its side and flag, then holds with no output of the caller', async () => {
    const ws = temp('ia-launcher-ws-');
    if (isRoot) chownSync(ws, NOBODY, NOBODY);
    // As launch.ts starts it (its text, as the sandbox user), and from the file by hand.
    const forms: [string, string[]][] = [
      ['text', [...asNobody, ...bashArgv('ia-holder-agent', ['holder', 'agent', '1', READY, ws])]],
      ['file', ['bash', '--noprofile', '--norc', SCRIPT, 'holder', 'harness', '0', READY, ws]],
    ];
    for (const [form, argv] of forms) {
      const [cmd, ...args] = argv;
      const child = spawn(cmd ?? 'bash', args, {
        env: { PATH: SYSTEM_PATH },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      try {
        // Its output ends (it let go of the caller's descriptors) while it keeps running.
        const out = await outputUntilClosed(child);
        assert.equal(out, form === 'text' ? `${READY} agent 1\n` : `${READY} harness 0\n`, form);
        assert.equal(child.exitCode, null, `${form}: the holder keeps running`);
        // Its input is not what it waits on: closing it ends nothing.
        child.stdin.end();
        await new Promise((r) => setTimeout(r, 300));
        assert.equal(child.exitCode, null, `${form}: the holder ignores its input`);
      } finally {
        child.kill('SIGKILL');
      }
    }
  });

  it('refuses a folder that is missing or that the sandbox user cannot write', () => {
    const missing = join(temp('ia-launcher-gone-'), 'gone');
    const r1 = runStage(['holder', 'agent', '1', READY, missing], { prefix: asNobody });
    assert.equal(r1.status, 97);
    assert.equal(r1.stdout, '');
    assert.equal(
      r1.stderr,
      `ia-sandbox: ${missing} is not a writable folder for the sandbox user (uid ${uid})\n`,
    );
    if (!isRoot) return;
    const rootOwned = temp('ia-launcher-ro-');
    chmodSync(rootOwned, 0o755);
    const r2 = runStage(['holder', 'harness', '1', READY, rootOwned], { prefix: asNobody });
    assert.equal(r2.status, 97);
    assert.equal(
      r2.stderr,
      `ia-sandbox: ${rootOwned} is not a writable folder for the sandbox user (uid ${NOBODY})\n`,
    );
  });
});

interface Fixture {
  readonly root: string;
  readonly workspace: string;
  readonly secretFile: string;
  readonly secretDir: string;
  readonly mask: string;
  /** A writable folder inside the mask: the only thing of the mask that shows. */
  readonly cache: string;
  readonly egress: string;
  readonly home: string;
}

function fixture(): Fixture {
  const root = hostArtifacts('launcher-sh');
  temps.push(root);
  const f = {
    root,
    workspace: join(root, 'workspace'),
    secretFile: join(root, 'secret-file'),
    secretDir: join(root, 'secret-dir'),
    mask: join(root, 'mask'),
    cache: join(root, 'mask', 'cache'),
    egress: join(root, 'egress'),
    // Under the private /tmp: made there, owned by the sandbox user.
    home: `/tmp/ia-launcher-home-${process.pid}/home`,
  };
  for (const d of [f.workspace, f.secretDir, f.mask, f.cache, f.egress]) mkdirSync(d, { recursive: true });
  writeFileSync(f.secretFile, 'token=secret\n');
  writeFileSync(join(f.secretDir, 'config'), 'token=secret\n');
  writeFileSync(join(f.mask, 'other-job'), 'token=secret\n');
  writeFileSync(join(f.egress, 'socket-stand-in'), '');
  writeFileSync(join(f.workspace, 'a.txt'), 'hello\n');
  writeFileSync(join(root, 'host-file'), 'host\n');
  for (const d of [f.workspace, f.cache]) chownSync(d, NOBODY, NOBODY);
  chownSync(join(f.workspace, 'a.txt'), NOBODY, NOBODY);
  return f;
}

function directives(f: Fixture, extra: readonly string[] = []): string[] {
  return [
    ...extra,
    `E${f.egress}`,
    `W${f.workspace}`,
    `W${f.cache}`,
    `H${f.secretFile}`,
    `H${f.secretDir}`,
    `M${f.mask}`,
    `P${f.home}`,
  ];
}

const NAMESPACES = [
  '--mount',
  '--net',
  '--pid',
  '--ipc',
  '--uts',
  '--fork',
  '--mount-proc',
  '--kill-child',
  '--',
];

/** The init's command line as launch.ts builds it for `root` (privileged) or `userns` (as nobody). */
function initArgv(mode: 'privileged' | 'userns', dirs: readonly string[]): string[] {
  if (mode === 'privileged')
    return ['unshare', ...NAMESPACES, ...bashArgv('ia-setup', ['setup', ...PRIVILEGED, ...dirs])];
  const ids = [String(NOBODY), String(NOBODY)];
  return [
    'setpriv',
    `--reuid=${NOBODY}`,
    `--regid=${NOBODY}`,
    '--clear-groups',
    '--',
    'unshare',
    '--user',
    '--map-root-user',
    ...NAMESPACES,
    ...bashArgv('ia-setup', [
      'setup',
      '0',
      '0',
      'userns',
      ...ids,
      READY,
      EGRESS_MOUNT,
      HARNESS_BASH,
      ...dirs,
    ]),
  ];
}

interface Started {
  readonly child: ChildProcessWithoutNullStreams;
  readonly exit: Promise<number | null>;
  /** Resolves with the layer flag once both holders reported; rejects with stderr when the setup ends. */
  readonly ready: Promise<string>;
  stderr(): string;
}

function startInit(mode: 'privileged' | 'userns', dirs: readonly string[]): Started {
  const [cmd, ...args] = initArgv(mode, dirs);
  const child = spawn(cmd ?? 'unshare', args, {
    cwd: '/',
    env: { PATH: SYSTEM_PATH },
    stdio: ['pipe', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  let err = '';
  child.stderr.on('data', (c: Buffer) => (err += c.toString('utf8')));
  const exit = new Promise<number | null>((resolve) => {
    child.once('exit', (code) => {
      resolve(code);
    });
  });
  const ready = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new Error(`not ready within 20 s: ${out} ${err}`));
    }, 20_000);
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString('utf8');
      const agent = new RegExp(`^${READY} agent ([01])$`, 'm').exec(out);
      const harness = new RegExp(`^${READY} harness ([01])$`, 'm').exec(out);
      if (agent !== null && harness !== null) {
        clearTimeout(timer);
        assert.equal(agent[1], harness[1]);
        resolve(agent[1] ?? '');
      }
    });
    void exit.then((code) => {
      clearTimeout(timer);
      setImmediate(() => {
        reject(new Error(`the setup ended (${String(code)}): ${err}`));
      });
    });
  });
  ready.catch(() => undefined);
  return { child, exit, ready, stderr: () => err };
}

function kill(s: Started): void {
  s.child.stdin.end();
  if (s.child.pid !== undefined && s.child.exitCode === null) {
    try {
      process.kill(-s.child.pid, 'SIGKILL');
    } catch {
      // Gone already.
    }
  }
}

/** The init (pid 1 of the sandbox's namespaces): unshare's one child. */
async function initPid(s: Started): Promise<number> {
  const [pid] = await childrenOf(s.child.pid ?? 0);
  if (pid === undefined) throw new Error('no init below unshare');
  return pid;
}

/** A shell script run as host root in the init's mount namespace: its lines `key=value`. */
function lookInside(init: number, script: string): Record<string, string> {
  const r = spawnSync(
    'nsenter',
    [`--target=${init}`, '--mount', '--', 'bash', '--noprofile', '--norc', '-c', script],
    {
      encoding: 'utf8',
      env: { PATH: SYSTEM_PATH },
      timeout: 20_000,
    },
  );
  assert.equal(r.status, 0, r.stderr);
  return Object.fromEntries(
    r.stdout
      .trim()
      .split('\n')
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  );
}

describe('launcher.sh: the setup stage in fresh namespaces', { skip: needsRoot }, () => {
  for (const mode of ['privileged', 'userns'] as const) {
    it(`${mode}: builds the view, reports both holders, and ends 0 when its input closes`, async () => {
      const f = fixture();
      const s = startInit(mode, directives(f));
      try {
        await s.ready;
        const init = await initPid(s);
        const seen = lookInside(
          init,
          [
            `echo "tmp=$(stat -f -c %T /tmp)"`,
            `echo "run=$(stat -f -c %T /run)"`,
            `echo "secretFile=$(wc -c <'${f.secretFile}')"`,
            `echo "secretDir=$(ls -A '${f.secretDir}' | tr '\\n' ' ')"`,
            `echo "mask=$(ls -A '${f.mask}' | tr '\\n' ' ')"`,
            `echo "hostFile=$(touch '${f.root}/host-file' 2>&1 && echo written)"`,
            `echo "workspace=$(touch '${f.workspace}/made-inside' && echo written)"`,
            `echo "cache=$(touch '${f.cache}/made-inside' && echo written)"`,
            `echo "egress=$( { ls '${EGRESS_MOUNT}'; touch '${EGRESS_MOUNT}/x' 2>&1; } | tr '\\n' ' ')"`,
            `echo "harness=$(stat -c %a '${HARNESS_BASH}')"`,
            `echo "home=$(stat -c %u:%a '${f.home}')"`,
          ].join('\n'),
        );
        assert.equal(seen.tmp, 'tmpfs');
        assert.equal(seen.run, 'tmpfs');
        assert.equal(seen.secretFile, '0', 'a hidden file reads as /dev/null');
        assert.equal(seen.secretDir, '', 'a hidden folder is empty');
        assert.equal(seen.mask, 'cache ', 'a masked folder shows only the writable folder in it');
        assert.match(seen.hostFile ?? '', /Read-only file system/);
        assert.equal(seen.workspace, 'written');
        assert.equal(seen.cache, 'written');
        assert.match(seen.egress ?? '', /^socket-stand-in .*Read-only file system/);
        assert.equal(seen.harness, '111', "the harness's bash: run, not read");
        assert.equal(seen.home, `${NOBODY}:700`, 'HOME: made in the private /tmp, for the sandbox user only');
        // The workspace is the host folder itself (no size given); the host's /tmp is untouched.
        assert.ok(existsSync(join(f.workspace, 'made-inside')));
        assert.ok(!existsSync(dirname(f.home)));
        s.child.stdin.end();
        assert.equal(await s.exit, 0, s.stderr());
        assert.ok(!existsSync(`/proc/${init}`), 'the init is gone');
      } finally {
        kill(s);
      }
    });
  }

  it('ends with 97 as soon as its holders are gone', async () => {
    const f = fixture();
    const s = startInit('privileged', directives(f));
    try {
      await s.ready;
      const init = await initPid(s);
      const holders: number[] = [];
      for (const pid of await descendantsOf(init)) {
        const argv = readFileOr(`/proc/${pid}/cmdline`).split('\0');
        if (argv.includes('ia-holder-agent') && argv[0] === 'bash') holders.push(pid);
      }
      assert.equal(holders.length, 1, 'one agent holder');
      process.kill(holders[0] ?? 0, 'SIGKILL');
      const code = await Promise.race([s.exit, new Promise((r) => setTimeout(r, 10_000, 'still running'))]);
      assert.equal(code, 97, s.stderr());
    } finally {
      kill(s);
    }
  });

  it('a workspace with a size: a private tmpfs filled from the host folder, which stays as it was', async () => {
    const f = fixture();
    const s = startInit('privileged', directives(f, ['Q/8388608']));
    try {
      await s.ready;
      const seen = lookInside(
        await initPid(s),
        [
          `echo "fs=$(stat -f -c %T '${f.workspace}')"`,
          `echo "a=$(cat '${f.workspace}/a.txt')"`,
          `echo "owner=$(stat -c %u '${f.workspace}/a.txt')"`,
          `echo "made=$(touch '${f.workspace}/made-inside' && echo written)"`,
          `echo "full=$(head -c 9000000 /dev/zero 2>&1 >'${f.workspace}/big' || true)"`,
        ].join('\n'),
      );
      assert.equal(seen.fs, 'tmpfs');
      assert.equal(seen.a, 'hello');
      assert.equal(seen.owner, String(NOBODY));
      assert.equal(seen.made, 'written');
      assert.match(seen.full ?? '', /No space left on device/);
      assert.ok(!existsSync(join(f.workspace, 'made-inside')), 'the host folder is never written');
    } finally {
      kill(s);
    }
  });

  it('refuses what it cannot make: a workspace over its size, a writable path that is no folder', async () => {
    const f = fixture();
    writeFileSync(join(f.workspace, 'big'), Buffer.alloc(2 * 1024 * 1024));
    const tooSmall = startInit('privileged', directives(f, ['Q/1048576']));
    const notFolder = startInit('privileged', [...directives(f), `W${f.secretFile}`]);
    try {
      await assert.rejects(
        tooSmall.ready,
        /ia-sandbox: the workspace does not fit its size limit \(1048576 bytes\)/,
      );
      assert.equal(await tooSmall.exit, 97);
      await assert.rejects(notFolder.ready, new RegExp(`ia-sandbox: ${f.secretFile} is not a folder`));
      assert.equal(await notFolder.exit, 97);
    } finally {
      kill(tooSmall);
      kill(notFolder);
    }
  });
});

describe('launcher.sh: the shipped forms carry the same file beside the code that reads it', () => {
  it("the Action's bundle: dist-action/launcher.sh, read from beside index.mjs", () => {
    const shipped = join(ROOT, 'dist-action', 'launcher.sh');
    assert.ok(existsSync(shipped), 'dist-action/launcher.sh (npm run build:action)');
    assert.ok(
      readFileSync(shipped).equals(readFileSync(SCRIPT)),
      'dist-action/launcher.sh is src/sandbox/local/launcher.sh',
    );
    const bundle = readFileSync(join(ROOT, 'dist-action', 'index.mjs'), 'utf8');
    assert.ok(bundle.includes('new URL("./launcher.sh", import.meta.url)'));
  });

  /** Where tsc puts launch.js for the build (tsconfig.build.json), relative to the checkout. */
  function compiledLaunch(): string {
    const parsed = ts.getParsedCommandLineOfConfigFile(
      join(ROOT, 'tsconfig.build.json'),
      {},
      {
        ...ts.sys,
        onUnRecoverableConfigFileDiagnostic: (d) => {
          throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
        },
      },
    );
    assert.ok(parsed !== undefined);
    const out = ts
      .getOutputFileNames(parsed, join(ROOT, 'src', 'sandbox', 'local', 'launch.ts'), false)
      .find((p) => p.endsWith('.js'));
    assert.ok(out !== undefined);
    return relative(ROOT, out);
  }

  it("the build: `npm run build` copies it next to tsc's launch.js", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
    };
    assert.match(pkg.scripts.build ?? '', /^tsc -p tsconfig\.build\.json && npm run build:assets( |$)/);
    // The copy step, run in a project of its own where tsc has made the folder.
    const project = temp('ia-launcher-build-');
    writeFileSync(
      join(project, 'package.json'),
      JSON.stringify({ name: 'copy', private: true, scripts: pkg.scripts }),
    );
    mkdirSync(join(project, 'src', 'sandbox', 'local'), { recursive: true });
    copyFileSync(SCRIPT, join(project, 'src', 'sandbox', 'local', 'launcher.sh'));
    const launchJs = compiledLaunch();
    mkdirSync(join(project, dirname(launchJs)), { recursive: true });
    const r = spawnSync('npm', ['run', '--silent', 'build:assets'], { cwd: project, encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const copied = join(project, dirname(launchJs), 'launcher.sh');
    assert.ok(readFileSync(copied).equals(readFileSync(SCRIPT)));
  });

  it('a built dist/ holds the same file, and its compiled module loads it', (t) => {
    const launchJs = join(ROOT, compiledLaunch());
    if (!existsSync(launchJs)) {
      t.skip('no build here (npm test builds before the tests run)');
      return;
    }
    const copy = join(dirname(launchJs), 'launcher.sh');
    assert.ok(
      existsSync(copy) && readFileSync(copy).equals(readFileSync(SCRIPT)),
      `${relative(ROOT, copy)} is not src/sandbox/local/launcher.sh: dist/ is older than src/ (npm run build)`,
    );
    const r = spawnSync(
      process.execPath,
      ['--input-type=module', '-e', `await import(${JSON.stringify(pathToFileURL(launchJs).href)});`],
      { encoding: 'utf8' },
    );
    assert.equal(r.status, 0, r.stderr);
  });
});
