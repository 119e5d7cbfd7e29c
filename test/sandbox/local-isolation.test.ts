import assert from 'node:assert/strict';
import { attackTest } from '../security/support.js';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:http';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { isolationSupport, LOCAL_HARNESS_BASH, type MechanismKind } from '../../src/sandbox/local/launch.js';
import { descendantsOf } from '../../src/sandbox/local/proc-tree.js';
import { FORGED_NPM, probeCommand, reachCommand, typeInto } from '../security/harness-attacks.js';
import { canIsolate, LocalSandbox, localShellHost } from '../../src/sandbox/local/local-sandbox.js';
import { ShellSession } from '../../src/sandbox/shell-session.js';
import { hostArtifacts } from '../support/host-artifacts.js';

/**
 * The isolated local sandbox (the Action's default) against a hostile shell: it must not reach the
 * host process holding the token and the model key, the network, or the paths it was meant not to
 * see — and must not be able to undo any of that (unmount, nested user namespaces, sudo).
 *
 * Every mechanism that works on this host is attacked the same way. On a root host the "host user
 * with passwordless sudo where unprivileged user namespaces are denied" case of GitHub's
 * ubuntu-24.04 runners is emulated: a seccomp filter refuses CLONE_NEWUSER to the host side, which
 * runs as a user with passwordless sudo (and, for the refusal, as one without).
 */

const REPO = fileURLToPath(new URL('../..', import.meta.url));
// Not under /tmp: the sandbox has a private /tmp, which would hide the fixtures without any mount.
const ARTIFACTS = join(REPO, 'test-artifacts', 'isolation');
/** A checkout under /tmp (say) puts the fixtures where the sandbox sees a private, empty folder. */
const PRIVATE_FIXTURES = /^\/(tmp|var\/tmp|run|dev\/shm)(\/|$)/.test(ARTIFACTS);
const CANARY = 'ghs_canaryCANARYcanary0123456789';
const SECRET = 'c2VjcmV0';
const SANDBOX_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
const opts = { timeoutMs: 20_000 };
const isRoot = process.getuid?.() === 0;
const support = await isolationSupport();
// CI (ISSUE_AGENT_REQUIRE_DOCKER=1) must have a way to isolate; elsewhere a host without one skips.
const skip =
  !support.ok && process.env.ISSUE_AGENT_REQUIRE_DOCKER !== '1'
    ? `no isolation here: ${support.reason}`
    : false;

interface Fixture {
  readonly root: string;
  readonly workspace: string;
  readonly secretDir: string;
  readonly secretFile: string;
  /** A world-writable host folder: the read-only view must keep the sandbox out of it. */
  readonly open: string;
  readonly home: string;
  readonly tmp: string;
  readonly hide: readonly string[];
}

function fixture(): Fixture {
  mkdirSync(ARTIFACTS, { recursive: true });
  const root = mkdtempSync(join(ARTIFACTS, 'run-'));
  chmodSync(root, 0o755);
  const f = {
    root,
    workspace: join(root, 'workspace'),
    secretDir: join(root, 'origin'),
    secretFile: join(root, 'set_env_1'),
    open: join(root, 'open'),
    home: join(root, 'home'),
    tmp: join(root, 'tmp'),
  };
  for (const d of [f.workspace, f.secretDir, f.open, f.home, f.tmp]) mkdirSync(d);
  chmodSync(f.open, 0o1777);
  writeFileSync(join(f.secretDir, 'config'), `extraheader = AUTHORIZATION: basic ${SECRET}\n`);
  writeFileSync(f.secretFile, 'NODE_OPTIONS=--require=/x\n');
  writeFileSync(join(f.workspace, 'a.txt'), 'hello\n');
  return { ...f, hide: [f.secretDir, f.secretFile] };
}

/** One attack: a command run in the sandbox and what its output must (not) show. */
interface Attack {
  readonly command: string;
  readonly check: (output: string) => void;
}

function attacks(f: Fixture, port: number, socket: string, expectedUid: number): Record<string, Attack> {
  const noSecret = (output: string): void => {
    assert.ok(!output.includes(SECRET), output);
    assert.match(output, /end\n$/);
  };
  return {
    unmount: {
      command: `umount ${f.secretDir}; umount -l ${f.secretDir}; umount ${f.secretFile}; cat ${f.secretDir}/config ${f.secretFile}; echo end`,
      check: (output) => {
        noSecret(output);
        assert.ok(!output.includes('NODE_OPTIONS'), output);
      },
    },
    nestedNamespace: {
      // Root in a user namespace of its own: what a bare `unshare` sandbox could be undone with.
      command:
        `unshare -U -m -r sh -c 'umount ${f.secretDir}; umount -l ${f.secretDir}; cat ${f.secretDir}/config; ` +
        `mount --bind ${f.root} /mnt && cat /mnt/origin/config' 2>&1; echo end`,
      check: noSecret,
    },
    hostProcesses: {
      // Unmounting the namespace's /proc would show the host's, where a process holding the token
      // (its environment, its command line) could be read.
      command: `umount /proc 2>/dev/null; umount -l /proc 2>/dev/null; cat /proc/$PPID/environ; cat /proc/1/environ; grep -ao 'ghs_[A-Za-z0-9]*' /proc/*/environ /proc/*/cmdline; echo end`,
      check: (output) => {
        assert.ok(!output.includes(CANARY), output);
        assert.match(output, /end\n$/);
      },
    },
    processes: {
      command: `umount -l /proc 2>/dev/null; echo "ppid=$PPID"; ls /proc | grep -c '^[0-9]'`,
      check: (output) => {
        const [ppid, count] = output.trim().split('\n');
        assert.equal(ppid, 'ppid=0', 'the parent is outside the PID namespace');
        assert.ok(Number(count) < 10, `only the sandbox's own processes: ${output}`);
      },
    },
    interfaces: {
      command: `tail -n +3 /proc/net/dev | cut -d: -f1; ls /sys/class/net; (ip -o link 2>/dev/null | cut -d: -f2); echo end`,
      check: (output) => {
        const names = output.split(/\s+/).filter((w) => w !== '' && w !== 'end');
        assert.ok(names.length > 0 && names.every((n) => n === 'lo'), output);
      },
    },
    hostLoopback: {
      // TCP to a listener on the host's loopback, and a unix socket in the host's /tmp (as Docker's
      // or a user's D-Bus socket would be in /run): a socket is reached through the file system,
      // whatever the network namespace.
      command:
        `(exec 3<>/dev/tcp/127.0.0.1/${port}) 2>/dev/null && echo connected || echo refused; ` +
        `python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])' ${socket} 2>/dev/null && echo connected || echo refused`,
      check: (output) => {
        assert.equal(output, 'refused\nrefused\n');
      },
    },
    identity: {
      command: `id -u; grep -E '^(CapInh|CapPrm|CapEff|CapAmb|NoNewPrivs):' /proc/self/status | tr -d '\\t'`,
      check: (output) => {
        const [uid, ...rest] = output.trim().split('\n');
        assert.equal(Number(uid), expectedUid);
        assert.notEqual(uid, '0');
        assert.deepEqual(rest.sort(), [
          'CapAmb:0000000000000000',
          'CapEff:0000000000000000',
          'CapInh:0000000000000000',
          'CapPrm:0000000000000000',
          'NoNewPrivs:1',
        ]);
      },
    },
    sudo: {
      command: `sudo -n id -u 2>/dev/null || echo refused; su -c id 2>/dev/null </dev/null || echo refused`,
      check: (output) => {
        assert.equal(output, 'refused\nrefused\n');
      },
    },
    workspace: {
      command: `cat a.txt; echo y > b.txt && cat b.txt; (touch ${f.open}/planted) 2>/dev/null || echo ro-host; (touch /usr/planted) 2>/dev/null || echo ro-usr`,
      check: (output) => {
        assert.equal(output, 'hello\ny\nro-host\nro-usr\n');
      },
    },
    hidden: {
      // A hidden file is /dev/null: what is written there goes nowhere. (Where the fixtures are
      // under /tmp, the sandbox's private /tmp has no such paths at all: the same answers.)
      command:
        `echo "entries=$(ls -A ${f.secretDir} 2>/dev/null | wc -l)"; (echo x > ${f.secretDir}/planted) 2>/dev/null || echo no-write; ` +
        `(echo x > ${f.secretFile}) 2>/dev/null; echo "size=$( (wc -c < ${f.secretFile}) 2>/dev/null || echo 0)"`,
      check: (output) => {
        // Fixtures in a private area: the file is one the sandbox made in its own /tmp.
        if (PRIVATE_FIXTURES) assert.match(output, /^entries=0\nno-write\nsize=\d+\n$/);
        else assert.equal(output, 'entries=0\nno-write\nsize=0\n');
      },
    },
    privateAreas: {
      command: `echo h > "$HOME/x" && echo t > "$TMPDIR/y" && echo z > /tmp/z && cat "$HOME/x" "$TMPDIR/y" /tmp/z; ls -A /tmp | grep -c '^ia-host-marker' || true`,
      check: (output) => {
        assert.equal(output, 'h\nt\nz\n0\n');
      },
    },
    initIsOutOfReach: {
      command: `kill -9 1 2>/dev/null; kill -STOP 1 2>/dev/null; echo alive`,
      check: (output) => {
        assert.equal(output, 'alive\n');
      },
    },
  };
}

/** After the attacks: nothing the sandbox did reached the host. */
function hostUntouched(f: Fixture): void {
  assert.equal(
    readFileSync(join(f.secretDir, 'config'), 'utf8'),
    `extraheader = AUTHORIZATION: basic ${SECRET}\n`,
  );
  assert.deepEqual(readdirSync(f.secretDir), ['config']);
  assert.equal(readFileSync(f.secretFile, 'utf8'), 'NODE_OPTIONS=--require=/x\n');
  assert.deepEqual(readdirSync(f.open), []);
  assert.equal(existsSync('/usr/planted'), false);
  assert.equal(readFileSync(join(f.workspace, 'b.txt'), 'utf8'), 'y\n');
}

/** Host processes whose command line contains `needle`. */
function hostProcesses(needle: string): number[] {
  const found: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readFileSync(`/proc/${name}/cmdline`, 'utf8').replace(/\0/g, ' ').includes(needle))
        found.push(Number(name));
    } catch {
      // Gone.
    }
  }
  return found;
}

async function eventually(check: () => boolean, ms = 5_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (check()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return check();
}

/**
 * A TCP listener on the host's loopback, a unix socket in the host's /tmp, and a host process
 * holding a secret in its environment and on its command line.
 */
function hostBait(): {
  port: () => number;
  socket: string;
  canaryPid: () => number;
  start: () => Promise<void>;
  stop: () => void;
} {
  const server = createServer((_req, res) => res.end('reached'));
  const unix = createNetServer((c) => c.end('reached'));
  const socket = `/tmp/ia-host-marker-${process.pid}.sock`;
  let canary: ReturnType<typeof spawn> | null = null;
  return {
    port: () => (server.address() as AddressInfo).port,
    socket,
    canaryPid: () => canary?.pid ?? 0,
    start: async () => {
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      rmSync(socket, { force: true });
      await new Promise<void>((r) => unix.listen(socket, r));
      chmodSync(socket, 0o777);
      canary = spawn('sh', ['-c', 'sleep 300; :', CANARY], {
        env: { PATH: '/usr/bin:/bin', GITHUB_TOKEN: CANARY },
        detached: true,
        stdio: 'ignore',
      });
    },
    stop: () => {
      if (canary?.pid !== undefined) process.kill(-canary.pid, 'SIGKILL');
      server.close();
      unix.close();
      rmSync(socket, { force: true });
    },
  };
}

const mechanisms: MechanismKind[] = ['root', 'userns', 'sudo'];
for (const mechanism of mechanisms) {
  const works = await isolationSupport({ mechanisms: [mechanism] });
  describe(`isolated shell: ${mechanism}`, { skip: works.ok ? false : works.reason }, () => {
    let f: Fixture;
    let host: ReturnType<typeof localShellHost>;
    let session: ShellSession;
    const bait = hostBait();

    before(async () => {
      f = fixture();
      await bait.start();
      host = localShellHost(
        f.workspace,
        { PATH: SANDBOX_PATH, HOME: f.home, TMPDIR: f.tmp, LANG: 'C.UTF-8' },
        { hide: f.hide },
        { mechanisms: [mechanism] },
      );
      session = new ShellSession(host, {
        workdir: f.workspace,
        stateFile: join(f.tmp, 'state.sh'),
        capture: { headBytes: 64 * 1024, tailBytes: 64 * 1024, spillDir: f.root },
      });
      await session.start();
    });

    after(async () => {
      session.close();
      await host.close();
      bait.stop();
      rmSync(f.root, { recursive: true, force: true });
    });

    it('says how it is confined', () => {
      assert.match(host.mechanism ?? '', new RegExp(`^${mechanism} \\(`));
    });

    attackTest('withstands every attack, and the host is untouched', async () => {
      const expectedUid = isRoot ? 65534 : (process.getuid?.() ?? -1);
      for (const [name, attack] of Object.entries(attacks(f, bait.port(), bait.socket, expectedUid))) {
        const r = await session.exec(attack.command, opts);
        try {
          attack.check(r.output);
        } catch (error) {
          assert.fail(`${name}: ${error instanceof Error ? error.message : String(error)}`);
        }
      }
      hostUntouched(f);
      // HOME and TMPDIR were private tmpfs over the host folders of those names.
      assert.deepEqual(readdirSync(f.home), []);
      assert.deepEqual(readdirSync(f.tmp), []);
    });

    attackTest('cannot create a user namespace where the mechanism forbids them', async () => {
      const r = await session.exec('unshare -U true 2>/dev/null && echo created || echo refused', opts);
      if ((host.mechanism ?? '').includes('nested user namespaces forbidden'))
        assert.equal(r.output, 'refused\n');
    });

    attackTest(
      "cannot reach a harness shell's processes, nor type into it, nor leave it a process",
      async () => {
        const harness = new ShellSession(host.harness, {
          workdir: f.workspace,
          stateFile: '/dev/null',
          capture: { headBytes: 64 * 1024, tailBytes: 64 * 1024, spillDir: f.root },
          sweep: true,
        });
        try {
          await harness.start();
          const tag = Math.random().toString(36).slice(2, 10);
          const probe = harness.exec(probeCommand(tag), { timeoutMs: 30_000 });
          const reach = await session.exec(reachCommand(tag), opts);
          const probed = await probe;
          assert.equal(probed.exitCode, 0, probed.output);
          assert.match(reach.output, /^probes 0 targets 0$/m, 'the harness is out of sight');
          assert.doesNotMatch(reach.output, /reached/, reach.output);
          const typed = await session.exec(typeInto(FORGED_NPM), opts);
          assert.equal(typed.exitCode, 0, typed.output);
          const typedIn = await harness.exec('declare -F; alias', opts);
          assert.doesNotMatch(typedIn.output, /npm/, typedIn.output);
          // A harness command's own leftovers have exited when it reports back: nothing of it can
          // meddle with the next one. (A zombie, `Z`, runs nothing and holds nothing; the
          // namespace's init reaps it when it gets round to it.)
          await harness.exec('(setsid sleep 300 >/dev/null 2>&1 &); sleep 300 &', opts);
          const after = await harness.exec('ps -e -o stat=,comm=', opts);
          assert.doesNotMatch(after.output, /^[^Z]\S*\s+sleep$/m, after.output);
        } finally {
          harness.close();
        }
      },
    );

    it('kills a timed-out command inside and nothing on the host; memory is read by host pid', async () => {
      const r = await session.exec('sleep 300', { timeoutMs: 500 });
      assert.equal(r.killed, 'timeout');
      assert.ok(process.kill(bait.canaryPid(), 0), 'the host process lives');
      const m = await session.exec('head -c 400000000 /dev/zero | tail > /dev/null; echo survived', {
        timeoutMs: 20_000,
        memoryLimitBytes: 64 * 1024 * 1024,
      });
      assert.equal(m.killed, 'memory', m.output);
      const next = await session.exec('echo still here', opts);
      assert.equal(next.output, 'still here\n');
    });

    it('ends everything in the sandbox when the last shell goes, a detached daemon too', async () => {
      const tag = `${4000 + Math.floor(Math.random() * 999)}.${process.pid}`;
      await session.exec(`(setsid sleep ${tag} >/dev/null 2>&1 &); echo started`, opts);
      assert.ok(await eventually(() => hostProcesses(`sleep ${tag}`).length === 1), 'the daemon runs');
      session.close();
      assert.ok(await eventually(() => hostProcesses(`sleep ${tag}`).length === 0), 'the daemon was killed');
      // A new shell gets a new sandbox on the same workspace.
      session = new ShellSession(host, {
        workdir: f.workspace,
        stateFile: join(f.tmp, 'state.sh'),
        capture: { headBytes: 64 * 1024, tailBytes: 64 * 1024, spillDir: f.root },
      });
      await session.start();
      assert.equal(
        (await session.exec('cat b.txt; [ -e /tmp/z ] && echo kept || echo fresh', opts)).output,
        'y\nfresh\n',
      );
    });
  });
}

/** The LocalSandbox the Action uses, with the host's default choice of mechanism. */
describe('LocalSandbox with isolate', { skip }, () => {
  let f: Fixture;
  let sandbox: LocalSandbox;
  const bait = hostBait();

  before(async () => {
    f = fixture();
    await bait.start();
    sandbox = await LocalSandbox.create({
      workspace: f.workspace,
      path: SANDBOX_PATH,
      isolate: { hide: f.hide },
    });
  });

  after(async () => {
    await sandbox.close();
    bait.stop();
    rmSync(f.root, { recursive: true, force: true });
  });

  attackTest('withstands every attack', async () => {
    const expectedUid = isRoot ? 65534 : (process.getuid?.() ?? -1);
    for (const [name, attack] of Object.entries(attacks(f, bait.port(), bait.socket, expectedUid))) {
      const r = await sandbox.exec(attack.command, opts);
      try {
        attack.check(r.output);
      } catch (error) {
        assert.fail(`${name}: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
    hostUntouched(f);
  });

  it('keeps exported variables and the directory between commands', async () => {
    await sandbox.exec('export FOO=bar; mkdir -p sub && cd sub', opts);
    assert.equal((await sandbox.exec('echo "$FOO $(basename "$PWD")"', opts)).output, 'bar sub\n');
  });
});

describe('LocalSandbox with isolate and a lazy agent shell', { skip }, () => {
  it("runs only the harness's shell until the agent's first command starts its own, which keeps state as before", async (t) => {
    const f = fixture();
    const sandbox = await LocalSandbox.create({
      workspace: f.workspace,
      path: SANDBOX_PATH,
      isolate: { hide: f.hide },
      lazyAgentShell: true,
    });
    t.after(async () => {
      await sandbox.close();
      rmSync(f.root, { recursive: true, force: true });
    });
    // Counted on the host: the agent's side and the harness's see none of each other's processes.
    // An agent's shell is a plain `bash --noprofile --norc` below this process (the harness's runs
    // its unreadable copy, LOCAL_HARNESS_BASH).
    const shells = async (): Promise<number> => {
      let n = 0;
      for (const pid of await descendantsOf(process.pid)) {
        const argv = (() => {
          try {
            return readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0');
          } catch {
            return [];
          }
        })();
        if (
          argv.length === 4 &&
          argv[1] === '--noprofile' &&
          argv[2] === '--norc' &&
          argv[0] !== LOCAL_HARNESS_BASH
        )
          n += 1;
      }
      return n;
    };
    await sandbox.harnessExec('true', opts);
    assert.equal(await shells(), 0, "no agent's shell before its first command");
    await sandbox.exec('export FOO=bar; mkdir -p sub && cd sub', opts);
    assert.equal(await shells(), 1, "the agent's shell started with its first command");
    assert.equal((await sandbox.exec('echo "$FOO $(basename "$PWD")"', opts)).output, 'bar sub\n');
  });
});

/** A host that keeps its sandbox between shells, until it is closed. */
describe('isolated shell with keepAlive', { skip }, () => {
  it('a shell replaced after a kill keeps its exports; close() ends everything', async () => {
    const f = fixture();
    const host = localShellHost(
      f.workspace,
      { PATH: SANDBOX_PATH, HOME: '/tmp/ia-home', TMPDIR: '/tmp/ia-tmp' },
      { hide: f.hide },
      { keepAlive: true },
    );
    const session = new ShellSession(host, {
      workdir: f.workspace,
      stateFile: '/tmp/ia-tmp/state.sh',
      capture: { headBytes: 64 * 1024, tailBytes: 64 * 1024, spillDir: f.root },
    });
    try {
      await session.start();
      const tag = `${6000 + Math.floor(Math.random() * 999)}.${process.pid}`;
      await session.exec(`export FOO=bar; (setsid sleep ${tag} >/dev/null 2>&1 &)`, opts);
      // A builtin loop: only replacing the shell ends it.
      const r = await session.exec('while :; do :; done', { timeoutMs: 500 });
      assert.equal(r.killed, 'timeout');
      assert.equal((await session.exec('echo "$FOO"', opts)).output, 'bar\n');
      session.close();
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(hostProcesses(`sleep ${tag}`).length, 1, 'the sandbox outlives its shells');
      await host.close();
      assert.ok(await eventually(() => hostProcesses(`sleep ${tag}`).length === 0), 'close() ended it');
    } finally {
      session.close();
      await host.close();
      rmSync(f.root, { recursive: true, force: true });
    }
  });
});

/** This process's children in state T (stopped), by host pid. */
function stoppedChildren(): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(ppid) === process.pid && state === 'T') out.push(Number(name));
    } catch {
      // gone
    }
  }
  return out;
}

describe('a shell that stops itself', { skip }, () => {
  // nsenter, on the host, stops itself when the process it entered the sandbox with stops, and,
  // stopped, never exits: a host process the sandbox could leave behind forever (a worker or the
  // Action that never finishes). The launcher kills it with the shell and at close.
  attackTest(
    'SIGSTOP of its own shell leaves no stopped host process, and close() returns',
    { timeout: 30_000 },
    async () => {
      const f = fixture();
      const host = localShellHost(
        f.workspace,
        { PATH: SANDBOX_PATH, HOME: '/tmp/ia-home', TMPDIR: '/tmp/ia-tmp' },
        { hide: f.hide },
        { keepAlive: true },
      );
      const session = new ShellSession(host, {
        workdir: f.workspace,
        stateFile: '/tmp/ia-tmp/state.sh',
        capture: { headBytes: 64 * 1024, tailBytes: 64 * 1024, spillDir: f.root },
      });
      try {
        await session.start();
        const r = await session.exec('kill -STOP $$', { timeoutMs: 1000 });
        assert.equal(r.killed, 'timeout');
        assert.ok(
          await eventually(() => stoppedChildren().length === 0),
          `stopped: ${stoppedChildren().join(', ')}`,
        );
        assert.equal(
          (await session.exec('echo alive', opts)).output,
          'alive\n',
          'a new shell took its place',
        );
        // Stopped again, and the sandbox closed under it.
        void session.exec('kill -STOP $$', { timeoutMs: 60_000 });
        assert.ok(await eventually(() => stoppedChildren().length > 0), 'the shell stopped itself');
        session.close();
        await host.close();
        assert.ok(
          await eventually(() => stoppedChildren().length === 0),
          `stopped: ${stoppedChildren().join(', ')}`,
        );
      } finally {
        session.close();
        await host.close();
        // Were one left, this file's process could never exit: end it so the failure is reported.
        for (const pid of stoppedChildren()) process.kill(pid, 'SIGKILL');
        rmSync(f.root, { recursive: true, force: true });
      }
    },
  );
});

/**
 * A masked folder (a worker's jobs folder): the job's workspace inside it is there, nothing else —
 * not the other jobs' folders, clones and trajectories there at start, nor one the host creates
 * while the sandbox runs — and nothing can be written there or unmasked.
 */
for (const mechanism of mechanisms) {
  const works = await isolationSupport({ mechanisms: [mechanism] });
  for (const sized of [false, true]) {
    describe(
      `masked jobs folder: ${mechanism}${sized ? ', sized workspace' : ''}`,
      { skip: works.ok ? false : works.reason },
      () => {
        attackTest('shows only the job’s workspace, now and later; no write, no unmount', async () => {
          mkdirSync(ARTIFACTS, { recursive: true });
          // Outside /tmp even in a CI clone there: the sandbox's private /tmp would hide it anyway.
          const root = hostArtifacts('isolation-mask');
          const jobs = join(root, 'jobs');
          const workspace = join(jobs, 'job-a', 'workspace');
          mkdirSync(workspace, { recursive: true });
          mkdirSync(join(jobs, 'job-a', 'trajectory'));
          mkdirSync(join(jobs, 'job-b', 'workspace'), { recursive: true });
          mkdirSync(join(jobs, '.pristine', 'r1'), { recursive: true });
          writeFileSync(join(workspace, 'a.txt'), 'hello\n');
          writeFileSync(join(jobs, 'job-a', 'trajectory', 'events.jsonl'), `${CANARY}\n`);
          writeFileSync(join(jobs, 'job-b', 'workspace', 'secret.txt'), `${CANARY}\n`);
          writeFileSync(join(jobs, '.pristine', 'r1', 'config'), `${CANARY}\n`);
          if (isRoot) execFileSync('chmod', ['-R', 'a+rwX', root]);
          const home = join(root, 'home');
          const tmp = join(root, 'tmp');
          mkdirSync(home);
          mkdirSync(tmp);
          const host = localShellHost(
            workspace,
            { PATH: SANDBOX_PATH, HOME: home, TMPDIR: tmp, LANG: 'C.UTF-8' },
            { hide: [], mask: [jobs] },
            { mechanisms: [mechanism], ...(sized ? { workspaceBytes: 16 * 1024 * 1024 } : {}) },
          );
          const session = new ShellSession(host, {
            workdir: workspace,
            stateFile: join(tmp, 'state.sh'),
            capture: { headBytes: 64 * 1024, tailBytes: 64 * 1024, spillDir: root },
          });
          try {
            await session.start();
            const first = await session.exec(
              `ls -A ${jobs}; echo --; ls -A ${jobs}/job-a; echo --; cat a.txt; echo changed > a.txt && echo wrote; echo end`,
              opts,
            );
            assert.equal(first.output, 'job-a\n--\nworkspace\n--\nhello\nwrote\nend\n');
            // The host starts another job meanwhile: its folder is not seen either.
            mkdirSync(join(jobs, 'job-c', 'workspace'), { recursive: true });
            writeFileSync(join(jobs, 'job-c', 'workspace', 'secret.txt'), `${CANARY}\n`);
            const later = await session.exec(
              [
                `ls -A ${jobs}`,
                `cat ${jobs}/job-c/workspace/secret.txt ${jobs}/job-b/workspace/secret.txt ${jobs}/.pristine/r1/config ${jobs}/job-a/trajectory/events.jsonl 2>&1`,
                `(touch ${jobs}/planted) 2>/dev/null || echo ro-mask; (touch ${jobs}/job-a/planted) 2>/dev/null || echo ro-job`,
                `ls -A ${jobs} ${jobs}/job-a | grep -c planted`,
                `umount ${jobs} 2>&1; umount -l ${jobs} 2>&1; ls -A ${jobs}`,
                `unshare -U -m -r sh -c 'umount -l ${jobs}; ls -A ${jobs}; cat ${jobs}/job-c/workspace/secret.txt' 2>&1`,
                'echo end',
              ].join('; '),
              opts,
            );
            assert.ok(!later.output.includes(CANARY), later.output);
            assert.doesNotMatch(later.output, /^job-[bc]$|^\.pristine$/m, later.output);
            assert.match(later.output, /end\n$/);
            // Refused inside the sandbox (a write to the mask would never reach the host anyway).
            assert.match(later.output, /^ro-mask\nro-job\n0\n/m, later.output);
            assert.ok(!existsSync(join(jobs, 'planted')) && !existsSync(join(jobs, 'job-a', 'planted')));
          } finally {
            session.close();
            await host.close();
            rmSync(root, { recursive: true, force: true });
          }
        });
      },
    );
  }
}

/** Where isolation cannot run, the sandbox refuses rather than run without it. */
describe('isolation unavailable', () => {
  it(
    'refuses to start',
    { skip: support.ok ? 'isolation works here (see the emulated case below)' : false },
    async () => {
      assert.equal(await canIsolate(), false);
      await assert.rejects(
        LocalSandbox.create({ workspace: REPO, path: SANDBOX_PATH, isolate: { hide: [] } }),
        { code: 'start_failed' },
      );
    },
  );
});

// ---------------------------------------------------------------------------------------------
// Emulated ubuntu-24.04 runner: unprivileged user namespaces denied, the host user has sudo.

/**
 * Installs a seccomp filter that refuses unshare/clone with CLONE_NEWUSER (EPERM) and clone3
 * (ENOSYS, so that libc falls back to clone, whose flags a filter can read), then runs the rest of
 * its arguments. Installed by root without no_new_privs, so sudo still works below it: the same
 * shape as AppArmor's restriction, which refuses user namespaces to unprivileged processes only
 * (the sudo mechanism makes none as root; where it tries one as the user, it is refused too).
 */
const DENY_USERNS = String.raw`
import ctypes, os, platform, struct, sys
arch, nr = {
    'x86_64': (0xC000003E, {'unshare': 272, 'clone': 56, 'clone3': 435}),
    'aarch64': (0xC00000B7, {'unshare': 97, 'clone': 220, 'clone3': 435}),
}[platform.machine()]
def s(code, k, jt=0, jf=0): return struct.pack('HBBI', code, jt, jf, k)
LD, JEQ, JSET, RET = 0x20, 0x15, 0x45, 0x06
ALLOW, ERRNO = 0x7FFF0000, 0x00050000
prog = b''.join([
    s(LD, 4), s(JEQ, arch, 0, 7),
    s(LD, 0), s(JEQ, nr['clone3'], 7, 0), s(JEQ, nr['unshare'], 1, 0), s(JEQ, nr['clone'], 0, 3),
    s(LD, 16), s(JSET, 0x10000000, 2, 0),
    s(RET, ALLOW), s(RET, ALLOW), s(RET, ERRNO | 1), s(RET, ERRNO | 38),
])
class Prog(ctypes.Structure):
    _fields_ = [('len', ctypes.c_ushort), ('filter', ctypes.c_char_p)]
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(22, 2, ctypes.byref(Prog(len(prog) // 8, prog)), 0, 0) != 0:
    sys.exit('seccomp: errno %d' % ctypes.get_errno())
os.execvp(sys.argv[1], sys.argv[1:])
`;

/** The host side, run as another user: creates a LocalSandbox, runs the attacks, reports JSON. */
const DRIVER = `
import { LocalSandbox, localShellHost } from ${JSON.stringify(join(REPO, 'src/sandbox/local/local-sandbox.ts'))};
import { isolationSupport } from ${JSON.stringify(join(REPO, 'src/sandbox/local/launch.ts'))};
const cfg = JSON.parse(process.argv[1]);
const out = { uid: process.getuid(), userns: await isolationSupport({ mechanisms: ['userns'] }), support: await isolationSupport() };
const failure = (e) => ({ code: e.code ?? null, message: e.message });
try {
  const host = localShellHost(cfg.workspace, { PATH: cfg.path }, { hide: [] });
  await host.spawn();
  out.direct = { mechanism: host.mechanism };
  await host.close();
} catch (e) { out.direct = failure(e); }
try {
  const sandbox = await LocalSandbox.create({ workspace: cfg.workspace, path: cfg.path, isolate: { hide: cfg.hide } });
  out.results = {};
  for (const [name, command] of Object.entries(cfg.commands)) out.results[name] = (await sandbox.exec(command, { timeoutMs: 20000 })).output;
  out.timeout = (await sandbox.exec('sleep 300', { timeoutMs: 500 })).killed;
  out.after = (await sandbox.exec('echo still here', { timeoutMs: 20000 })).output;
  await sandbox.exec('(setsid sleep ' + cfg.tag + ' >/dev/null 2>&1 &)', { timeoutMs: 20000 });
  await sandbox.close();
} catch (e) { out.sandbox = failure(e); }
process.stdout.write(JSON.stringify(out));
`;

interface DriverReport {
  readonly uid: number;
  readonly userns: { ok: boolean; reason?: string; mechanism?: string };
  readonly support: { ok: boolean; reason?: string; mechanism?: string };
  readonly direct: { mechanism?: string; code?: string; message?: string };
  readonly sandbox?: { code: string | null; message: string };
  readonly results?: Record<string, string>;
  readonly timeout?: string | null;
  readonly after?: string;
}

const SUDO_USER = 'ia-sudo-test';
const emulation = !isRoot
  ? 'needs root to create the users and install the filter (CI runs the real case: see the sudo suite above)'
  : spawnSync('python3', ['-c', 'import ctypes']).status !== 0
    ? 'python3 (for the seccomp filter) is missing'
    : spawnSync('sudo', ['-V'], { stdio: 'ignore' }).status !== 0
      ? 'sudo is not installed'
      : false;

function ensureSudoUser(): { uid: number; gid: number } {
  if (spawnSync('id', ['-u', SUDO_USER]).status !== 0)
    execFileSync('useradd', [
      '--system',
      '--user-group',
      '--no-create-home',
      '--shell',
      '/bin/bash',
      SUDO_USER,
    ]);
  writeFileSync(`/etc/sudoers.d/${SUDO_USER}`, `${SUDO_USER} ALL=(ALL) NOPASSWD: ALL\n`, { mode: 0o440 });
  const id = (flag: string): number =>
    Number(execFileSync('id', [flag, SUDO_USER], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}

function runDriver(uid: number, gid: number, cfg: object, env: Record<string, string>): DriverReport {
  const r = spawnSync(
    'python3',
    [
      '-c',
      DENY_USERNS,
      'setpriv',
      `--reuid=${uid}`,
      `--regid=${gid}`,
      '--clear-groups',
      '--',
      process.execPath,
      '--import',
      'tsx',
      '--input-type=module',
      '-e',
      DRIVER,
      JSON.stringify(cfg),
    ],
    { cwd: REPO, env: { PATH: SANDBOX_PATH, HOME: '/tmp', ...env }, encoding: 'utf8', timeout: 120_000 },
  );
  if (r.status !== 0) throw new Error(`driver failed (${String(r.status)}): ${r.stderr}`);
  return JSON.parse(r.stdout) as DriverReport;
}

describe(
  'user namespaces denied, passwordless sudo (emulated ubuntu-24.04 runner)',
  { skip: emulation },
  () => {
    let f: Fixture;
    let uid: number;
    let report: DriverReport;
    const bait = hostBait();
    const tag = `${5000 + Math.floor(Math.random() * 999)}.${process.pid}`;

    before(async () => {
      const user = ensureSudoUser();
      uid = user.uid;
      f = fixture();
      await bait.start();
      // The host user owns its checkout, as on a runner.
      for (const p of [f.workspace, join(f.workspace, 'a.txt')]) chownSync(p, user.uid, user.gid);
      const cmds = attacks(f, bait.port(), bait.socket, uid);
      report = runDriver(
        user.uid,
        user.gid,
        {
          workspace: f.workspace,
          path: SANDBOX_PATH,
          hide: f.hide,
          tag,
          commands: Object.fromEntries(Object.entries(cmds).map(([k, a]) => [k, a.command])),
        },
        // The host process holds the token, as the Action's node process does.
        { GITHUB_TOKEN: CANARY },
      );
    });

    after(() => {
      bait.stop();
      rmSync(f.root, { recursive: true, force: true });
      rmSync(`/etc/sudoers.d/${SUDO_USER}`, { force: true });
      spawnSync('userdel', [SUDO_USER]);
    });

    it('runs the host side as that user, with unprivileged user namespaces refused', () => {
      assert.equal(report.uid, uid);
      assert.equal(report.userns.ok, false, JSON.stringify(report.userns));
    });

    it('picks sudo and says so', () => {
      assert.equal(report.support.ok, true, report.support.reason);
      assert.match(report.support.mechanism ?? '', /^sudo \(.*shell uid \d+/);
      assert.match(report.direct.mechanism ?? '', /^sudo \(/, JSON.stringify(report.direct));
    });

    attackTest('withstands every attack with the same guarantees', () => {
      assert.equal(report.sandbox, undefined, JSON.stringify(report.sandbox));
      const results = report.results ?? {};
      for (const [name, attack] of Object.entries(attacks(f, bait.port(), bait.socket, uid))) {
        try {
          attack.check(results[name] ?? '');
        } catch (error) {
          assert.fail(`${name}: ${error instanceof Error ? error.message : String(error)}`);
        }
      }
      hostUntouched(f);
    });

    it('kills a timed-out command through the host pid, and everything at close', async () => {
      assert.equal(report.timeout, 'timeout');
      assert.equal(report.after, 'still here\n');
      assert.ok(await eventually(() => hostProcesses(`sleep ${tag}`).length === 0), 'the daemon was killed');
    });
  },
);

describe('user namespaces denied and no sudo', { skip: emulation }, () => {
  it('fails to start with start_failed, saying what is missing', () => {
    const f = fixture();
    try {
      chownSync(f.workspace, 65534, 65534);
      const report = runDriver(
        65534,
        65534,
        { workspace: f.workspace, path: SANDBOX_PATH, hide: [], tag: '0', commands: {} },
        {},
      );
      assert.equal(report.support.ok, false);
      assert.match(report.support.reason ?? '', /userns: .*; sudo: /);
      assert.equal(report.direct.code, 'start_failed');
      assert.match(
        report.direct.message ?? '',
        /cannot run on this host.*unprivileged user namespaces.*sudo -n/,
      );
      assert.equal(report.sandbox?.code, 'start_failed');
    } finally {
      rmSync(f.root, { recursive: true, force: true });
    }
  });
});

/**
 * Every host mount, not only the root's, is made read-only in the sandbox: a mount of its own
 * (here a world-writable tmpfs the test mounts, so only as root, under /mnt: outside the areas the
 * sandbox replaces, wherever the checkout is) gets no file from inside, and the sandbox starts
 * although the host's mount table lists paths it no longer reaches as mount points.
 */
const OWN_MOUNT_PARENT = '/mnt';
it(
  'a host folder that is a mount of its own is read-only inside too',
  {
    skip:
      skip !== false
        ? skip
        : process.getuid?.() !== 0
          ? 'mounting a test folder needs root'
          : !existsSync(OWN_MOUNT_PARENT)
            ? `no ${OWN_MOUNT_PARENT} to mount a test folder in`
            : false,
  },
  async () => {
    const f = fixture();
    const mnt = mkdtempSync(join(OWN_MOUNT_PARENT, 'ia-own-mount-'));
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'mode=1777,size=1m', 'ia-test-own-mount', mnt]);
    try {
      const sandbox = await LocalSandbox.create({
        workspace: f.workspace,
        path: SANDBOX_PATH,
        isolate: { hide: [] },
      });
      try {
        const r = await sandbox.exec(`(touch ${mnt}/planted) 2>/dev/null || echo ro-mount; cat a.txt`, {
          timeoutMs: 10_000,
        });
        assert.equal(r.output, 'ro-mount\nhello\n');
      } finally {
        await sandbox.close();
      }
      assert.deepEqual(readdirSync(mnt), []);
    } finally {
      execFileSync('umount', [mnt]);
      rmSync(mnt, { recursive: true, force: true });
      rmSync(f.root, { recursive: true, force: true });
    }
  },
);
