import { spawn, type ChildProcess, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { accessSync, constants, readFileSync, realpathSync } from 'node:fs';
import { lchown, lstat, readdir, readFile } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SandboxError } from '../sandbox.js';
import { underNice } from '../cpu-priority.js';
import { descendantsOf } from './proc-tree.js';

/**
 * How the local sandbox's shells are confined.
 *
 * `isolated` gives every shell of one launcher the same sandbox: its own PID, network, IPC, UTS and
 * mount namespaces, built once by a sandbox init process, which each shell then enters. Inside:
 *  - the host's file tree, read-only, except `cwd` (the workspace) and `writable`, which stay
 *    read-write at the same paths;
 *  - each `hide` path that exists covered, a folder by an empty read-only tmpfs, a file by /dev/null;
 *  - each `mask` folder replaced by an empty read-only tmpfs in which only `cwd` and `writable`
 *    folders under it appear, at their paths: nothing else in it is seen, neither what is there at
 *    start nor what the host creates there later (other jobs' folders, clones, trajectories);
 *  - fresh, private tmpfs on /tmp, /var/tmp, /dev/shm and /run (so no host socket under /run, e.g.
 *    Docker's or the user's D-Bus, can be reached), and the shell's HOME and TMPDIR as private
 *    folders owned by the sandbox user;
 *  - the POSIX message queues of its own IPC namespace at /dev/mqueue (or /run/mqueue, see
 *    LOCAL_MQUEUE_DIRS);
 *  - its own /proc (no host process is visible) and, where the kernel lets the init mount one, its
 *    own /sys; a network namespace with only `lo`;
 *  - two sides that share those files and that network but no process: the agent's shells (and
 *    every other process of the agent's side) and the harness's each live in a process namespace
 *    of their own below the sandbox's, with a /proc that shows only that side (see ShellRole).
 * The shell runs as an unprivileged user with no capabilities in any namespace that owns those
 * mounts, with no_new_privs set, and (where the kernel allows setting it) under a limit that forbids
 * creating further user namespaces; a user namespace it creates anyway copies the mounts locked
 * (MNT_LOCKED), so no unmount reveals what they cover.
 */
export type Confinement =
  | { readonly kind: 'none' }
  | {
      readonly kind: 'isolated';
      readonly hide: readonly string[];
      /**
       * Host folders whose whole content is out of sight, now and later, except `cwd` and the
       * `writable` folders inside them, which appear at their own paths (see above).
       */
      readonly mask?: readonly string[];
      /** Host folders, besides `cwd`, that stay writable inside (e.g. a cache). Created by the host. */
      readonly writable?: readonly string[];
      /**
       * Size of the workspace, bytes. Set: `cwd` is a private tmpfs of this size inside, filled
       * with the host folder's content at start (before any sandbox process exists); the host
       * folder itself is never written, and the kernel refuses writes past the size (ENOSPC).
       * Unset: `cwd` is the host folder itself, with no quota.
       */
      readonly workspaceBytes?: number;
      /**
       * The host folder of an egress proxy's socket (see environment/egress.ts), bound read-only at
       * LOCAL_EGRESS_MOUNT inside, where the private /run would otherwise cover it: the only way out
       * of the sandbox's network namespace, and only for what the proxy allows.
       */
      readonly egressDir?: string;
    };

/**
 * How the namespaces are made:
 *  - `userns`: unprivileged user namespaces (`unshare`). The init is root only in a user namespace
 *    of its own, which owns the mounts; the shell runs in a user namespace below it, as the host
 *    user (or the sandbox user when the host is root), with no capabilities.
 *  - `root`: the host runs as root; the init is real root in new namespaces (no user namespace is
 *    needed), the shell runs as the sandbox user.
 *  - `sudo`: as `root`, through `sudo -n`, for a host user with passwordless sudo where unprivileged
 *    user namespaces are denied (GitHub's ubuntu-24.04 runners: AppArmor's
 *    `kernel.apparmor_restrict_unprivileged_userns`). The shell runs as the host user.
 */
export type MechanismKind = 'userns' | 'root' | 'sudo';

export interface SandboxUser {
  readonly uid: number;
  readonly gid: number;
}

/** Where an isolated sandbox sees the egress proxy's socket folder (Confinement.egressDir). */
export const LOCAL_EGRESS_MOUNT = '/run/issue-agent-egress';

/**
 * The harness's bash in an isolated sandbox: a copy the sandbox user may execute but not read, on a
 * read-only mount the sandbox's init makes (launcher.sh), so a harness shell is non-dumpable.
 */
export const LOCAL_HARNESS_BASH = '/run/issue-agent-harness/bash';

/**
 * Where an isolated sandbox sees the POSIX message queues of its own IPC namespace: a mqueue file
 * system the init mounts at /dev/mqueue, or at /run/mqueue (in the private /run) on a host without
 * that folder. A queue outlives the process that made it, and only a mount lists it (the setup
 * phase empties it; see secrets/ipc-cleanup.ts).
 */
export const LOCAL_MQUEUE_DIRS = ['/dev/mqueue', '/run/mqueue'];

/** The unprivileged user a root host runs the shell as, unless told otherwise: nobody/nogroup. */
export const DEFAULT_SANDBOX_USER: SandboxUser = { uid: 65534, gid: 65534 };

export interface LaunchOptions {
  /** The workspace: the shell starts here, and it is writable inside. */
  readonly cwd: string;
  /** The shell's whole environment (nothing else of the host's is passed). */
  readonly env: Readonly<Record<string, string>>;
  readonly confinement: Confinement;
  /**
   * Mechanisms to try, in order. The default is `root`, `userns` for a root host and `userns`,
   * `sudo` otherwise: the first one that works here is used.
   */
  readonly mechanisms?: readonly MechanismKind[];
  /** Whom the shell runs as when the host is root. */
  readonly sandboxUser?: SandboxUser;
  /**
   * Keep an isolated sandbox after its last shell ended, until close(): a shell started after a
   * kill then finds the sandbox's /tmp, HOME and running processes as they were (e.g. the state
   * file a session restores its exports from). Only for a caller that always calls close(); by
   * default the sandbox ends with its last shell, so nothing in it can outlive a caller that forgets.
   */
  readonly keepAlive?: boolean;
}

export interface LaunchedShell {
  readonly child: ChildProcessWithoutNullStreams;
  /** How the shell is confined, for logs ('none' for an unconfined shell). */
  readonly mechanism: string;
  /** The host pid of the bash the session talks to (kills and memory readings go by it). */
  hostPid(): Promise<number>;
  /** The pid the shell knows itself by (`$$`), in its own PID namespace when isolated. */
  namespacePid(): Promise<number>;
  /** Settles once the host-side process started (rejects when it could not be). */
  readonly started: Promise<void>;
  /** Ends the shell and everything it started. */
  kill(): void;
}

function startedOf(child: ChildProcess, what: string): Promise<void> {
  const started = new Promise<void>((resolve, reject) => {
    child.once('spawn', () => {
      resolve();
    });
    child.once('error', (error) => {
      reject(new SandboxError('start_failed', `could not start ${what}: ${error.message}`, { cause: error }));
    });
  });
  started.catch(() => undefined);
  return started;
}

/** PATH for the host-side tools and the sandbox's setup (never the sandbox's own PATH). */
const SYSTEM_PATH = '/usr/sbin:/usr/bin:/sbin:/bin';
const START_TIMEOUT_MS = 15_000;
const READY = 'ia-sandbox-ready';

/**
 * The sandbox's shell program: launcher.sh beside this module (in src/, in the build's dist/src/ and
 * in the Action's dist-action/, each copying it next to the code that reads it), read once at start.
 * Its three stages (the init that builds the view, the layer that makes the two holders, and each
 * holder) are started with its text through `bash -c`, never by path: inside the sandbox the package's
 * folder may be masked, hidden or covered. What the host tells it travels as arguments.
 */
const LAUNCHER = readLauncher();

function readLauncher(): string {
  const url = new URL('./launcher.sh', import.meta.url);
  try {
    return readFileSync(url, 'utf8');
  } catch (error) {
    throw new Error(
      `the local sandbox's launcher ${fileURLToPath(url)} could not be read (a build that did not copy it?): ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    );
  }
}

/** Finds an executable on the system PATH (the host side never runs a tool found elsewhere). */
function systemTool(name: string): string | null {
  for (const dir of SYSTEM_PATH.split(':')) {
    const p = join(dir, name);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // Not here.
    }
  }
  return null;
}

function hostUser(): SandboxUser {
  return { uid: process.getuid?.() ?? -1, gid: process.getgid?.() ?? -1 };
}

function defaultMechanisms(): readonly MechanismKind[] {
  return hostUser().uid === 0 ? ['root', 'userns'] : ['userns', 'sudo'];
}

function sandboxUserFor(options: { readonly sandboxUser?: SandboxUser | undefined }): SandboxUser {
  const host = hostUser();
  if (host.uid !== 0) return host;
  const user = options.sandboxUser ?? DEFAULT_SANDBOX_USER;
  if (user.uid === 0 || user.gid === 0)
    throw new SandboxError('start_failed', 'the sandbox user must not be root (uid and gid other than 0)');
  return user;
}

/** Argv that switches a root host to the sandbox user before it makes unprivileged namespaces. */
function asSandboxUser(user: SandboxUser): string[] {
  if (hostUser().uid !== 0) return [];
  return [need('setpriv'), `--reuid=${user.uid}`, `--regid=${user.gid}`, '--clear-groups', '--'];
}

/**
 * `argv` under the sandboxes' lower CPU priority (cpu-priority.ts): `nice` execs the program in its
 * place (the same pid), and everything the sandbox starts inherits the value; nothing inside can
 * raise it again (no capabilities). A host without `nice` runs the sandbox at the worker's priority.
 */
function lowered(argv: readonly string[]): string[] {
  const nice = systemTool('nice');
  return nice === null ? [...argv] : underNice(nice, argv);
}

function need(tool: string): string {
  const p = systemTool(tool);
  if (p === null) throw new MechanismUnavailable(`${tool} is not installed`);
  return p;
}

class MechanismUnavailable extends Error {}

function describeMechanism(kind: MechanismKind, user: SandboxUser, layer: boolean): string {
  const how = {
    userns: 'unprivileged user namespaces',
    root: 'namespaces made as root',
    sudo: 'namespaces made as root through sudo -n',
  }[kind];
  const nested = layer
    ? 'nested user namespaces forbidden'
    : 'nested user namespaces left to the kernel, mounts locked in them';
  return `${kind} (${how}; shell uid ${user.uid}, no capabilities; ${nested})`;
}

/** Fields of a line of /proc/<pid>/status, or null once the process is gone. */
async function nsPids(pid: number): Promise<number[] | null> {
  try {
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    const line = status.split('\n').find((l) => l.startsWith('NSpid:'));
    return line === undefined ? null : line.slice(6).trim().split(/\s+/).map(Number);
  } catch {
    return null;
  }
}

let ownDepth: Promise<number> | undefined;
function ownPidNamespaceDepth(): Promise<number> {
  ownDepth ??= nsPids(process.pid).then((p) => p?.length ?? 1);
  return ownDepth;
}

/**
 * The first process below `root` that lives `levels` PID namespaces deeper than this one (or
 * more): the sandbox's init below the host-side launcher (1), or a shell below the host-side
 * `nsenter` (2: a shell lives in its side's holder's namespace, below the sandbox's). Waits for it
 * to appear (bounded). Reads only /proc/<pid>/stat and
 * status, which are world-readable, so this also works below a root-owned `sudo`.
 */
async function topInNamespace(
  root: ChildProcess,
  deadline: number,
  levels: number,
): Promise<{ host: number; inner: number }> {
  const depth = (await ownPidNamespaceDepth()) + levels - 1;
  for (;;) {
    if (root.pid === undefined || root.exitCode !== null || root.signalCode !== null)
      throw new Error('the sandboxed process ended before it was found');
    const below = [root.pid, ...(await descendantsOf(root.pid))];
    for (const pid of below) {
      const ids = await nsPids(pid);
      if (ids === null || ids.length <= depth) continue;
      const parents = await parentOf(pid);
      const parentIds = parents === null ? null : await nsPids(parents);
      if (parentIds !== null && parentIds.length > depth) continue;
      return { host: pid, inner: ids[ids.length - 1] ?? pid };
    }
    if (Date.now() > deadline) throw new Error('the sandboxed process did not appear');
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * A holder's pid in the sandbox's own namespace (where the shells' `nsenter` names it): the process
 * below the init that is pid 1 of a namespace one level below the init's and runs the holder of
 * `role` (its argv says which, and the host reads it: /proc/<pid>/cmdline is world-readable).
 */
async function holderOf(initHostPid: number, role: ShellRole, deadline: number): Promise<number> {
  const initIds = await nsPids(initHostPid);
  if (initIds === null) throw new Error('the sandbox ended while starting');
  for (;;) {
    for (const pid of await descendantsOf(initHostPid)) {
      const ids = await nsPids(pid);
      if (ids?.length !== initIds.length + 1 || ids[ids.length - 1] !== 1) continue;
      const argv = await readFile(`/proc/${pid}/cmdline`, 'latin1').catch(() => '');
      const inSandbox = ids[ids.length - 2];
      if (argv.split('\0').includes(`ia-holder-${role}`) && inSandbox !== undefined) return inSandbox;
    }
    if (Date.now() > deadline) throw new Error(`the ${role}'s holder did not appear`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function parentOf(pid: number): Promise<number | null> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return null;
  }
}

function killPid(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // Gone, or not ours to signal (a root-owned process under sudo): it ends with its child.
  }
}

/** Whether `child` exits within `ms` (at once when it has already). */
function exitedWithin(child: ChildProcess, ms: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      resolve(false);
    }, ms);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/** Kills the tree below `pid`, then `pid`, until a scan finds nothing left (bounded). */
async function killTree(pid: number): Promise<void> {
  for (let i = 0; i < 5; i++) {
    const pids = await descendantsOf(pid);
    for (const p of pids) killPid(p);
    if (pids.length === 0) break;
  }
  killPid(pid);
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

function envArgs(env: Readonly<Record<string, string>>): string[] {
  return Object.entries(env).map(([k, v]) => {
    if (!ENV_NAME.test(k)) throw new SandboxError('start_failed', `invalid environment variable name ${k}`);
    if (v.includes('\0')) throw new SandboxError('start_failed', `the value of ${k} contains a NUL byte`);
    return `${k}=${v}`;
  });
}

function canonical(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}

/**
 * Gives the sandbox user the workspace tree: every entry, without following links (lchown; a link
 * is never descended into). Only ever called before any process of the sandbox exists, so nothing
 * can swap an entry for a link while the walk runs. Asynchronous, a folder's entries at a time: a
 * large repository is tens of thousands of calls, which on the worker's event loop held up every
 * other job (and, before they had their own thread, its lock renewals).
 */
async function chownTree(dir: string, user: SandboxUser): Promise<void> {
  await lchown(dir, user.uid, user.gid);
  const entries = await readdir(dir, { withFileTypes: true });
  await Promise.all(
    entries.map((entry) => {
      const p = join(dir, entry.name);
      return entry.isDirectory() ? chownTree(p, user) : lchown(p, user.uid, user.gid);
    }),
  );
}

/** Workspaces that a live sandbox has been given: never walked again while it lives. */
const handedOver = new Map<string, number>();
/** The hand-over of a workspace under way: a second sandbox of it waits for it before starting. */
const handingOver = new Map<string, Promise<void>>();

interface Init {
  readonly kind: MechanismKind;
  readonly child: ChildProcessWithoutNullStreams;
  readonly initHostPid: number;
  /** The agent's holder's pid in the sandbox's own namespace (see holderOf). */
  readonly holderPid: number;
  /** The harness's holder's pid in the sandbox's own namespace (see holderOf). */
  readonly harnessHolderPid: number;
  readonly layer: boolean;
  readonly user: SandboxUser;
  readonly mechanism: string;
}

/**
 * The directives of the setup script for one confinement. Hidden paths are taken as the host sees
 * them (a symbolic link is never mounted over: that would cover its target).
 */
function directives(cwd: string, env: Readonly<Record<string, string>>, confinement: Confinement): string[] {
  if (confinement.kind !== 'isolated') return [];
  for (const p of [cwd, ...(confinement.writable ?? []), ...confinement.hide, ...(confinement.mask ?? [])])
    if (!isAbsolute(p)) throw new SandboxError('start_failed', `not an absolute path: ${p}`);
  const writable = [cwd, ...(confinement.writable ?? [])].map(canonical);
  // The folder above a hidden path is resolved (a link on the way must not send the mount
  // elsewhere), the path itself is not: the setup skips it when it is a link.
  const hide = confinement.hide.map((p) => join(canonical(dirname(p)), basename(p)));
  // HOME and TMPDIR are made private where they are absolute paths; a relative one names nothing
  // the sandbox could share with the host anyway.
  const priv = [env.HOME, env.TMPDIR].filter((p): p is string => p !== undefined && isAbsolute(p));
  const quota = confinement.workspaceBytes;
  if (quota !== undefined && (!Number.isInteger(quota) || quota <= 0))
    throw new SandboxError('start_failed', `not a workspace size: ${String(quota)}`);
  const egress = confinement.egressDir;
  if (egress !== undefined && !isAbsolute(egress))
    throw new SandboxError('start_failed', `not an absolute path: ${egress}`);
  return [
    ...(quota === undefined ? [] : [`Q/${String(quota)}`]),
    ...(egress === undefined ? [] : [`E${canonical(egress)}`]),
    ...writable.map((p) => `W${p}`),
    ...hide.map((p) => `H${p}`),
    ...(confinement.mask ?? []).map((p) => `M${canonical(p)}`),
    ...[...new Set(priv)].map((p) => `P${p}`),
  ];
}

function initArgv(kind: MechanismKind, user: SandboxUser, dirs: readonly string[]): string[] {
  const bash = need('bash');
  need('nsenter');
  need('setpriv');
  const unshare = need('unshare');
  const common = [
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
  const script = [bash, '--noprofile', '--norc', '-c', LAUNCHER, 'ia-setup', 'setup'];
  const ids = [String(user.uid), String(user.gid)];
  // The holders' ready word and the paths the setup makes (see launcher.sh's setup stage).
  const fixed = [READY, LOCAL_EGRESS_MOUNT, LOCAL_HARNESS_BASH];
  if (kind === 'userns') {
    return [
      ...asSandboxUser(user),
      unshare,
      '--user',
      '--map-root-user',
      ...common,
      ...script,
      // Inside its user namespace the init sees the sandbox user as root.
      '0',
      '0',
      'userns',
      ...ids,
      ...fixed,
      ...dirs,
    ];
  }
  const privileged = [unshare, ...common, ...script, ...ids, 'privileged', ...ids, ...fixed, ...dirs];
  if (kind === 'root') {
    if (hostUser().uid !== 0) throw new MechanismUnavailable('the host does not run as root');
    return privileged;
  }
  return [need('sudo'), '-n', '--', ...privileged];
}

/**
 * Whose shell a launch is: the agent's (and every other process of the agent's side: setup, the
 * forwarder, MCP servers), or the harness's. Each side lives in the process, mount (with its own
 * /proc) and, where there are, user namespaces of its own holder (launcher.sh's layer), so neither sees a
 * process of the other: no process of the agent can name one of the harness's to trace it, signal
 * it or open its /proc entries. The harness's side holds nothing but harness shells and what their
 * commands start, which each shell sweeps after every command (ShellSessionOptions.sweep).
 */
export type ShellRole = 'agent' | 'harness';

function enterArgv(
  init: Init,
  cwd: string,
  env: Readonly<Record<string, string>>,
  bashArgs: readonly string[] = [],
  role: ShellRole = 'agent',
): string[] {
  const nsenter = need('nsenter');
  const setpriv = need('setpriv');
  const bash = role === 'harness' ? LOCAL_HARNESS_BASH : need('bash');
  const shell = [need('env'), '-i', ...envArgs(env), bash, '--noprofile', '--norc', ...bashArgs];
  const into = (target: number, namespaces: readonly string[]) => [
    nsenter,
    `--target=${target}`,
    ...namespaces,
    '--preserve-credentials',
    `--wd=${cwd}`,
    '--',
  ];
  // The init's namespaces (with its user namespace when it has one of its own), then the holder's
  // user (where it has one, see launcher.sh's layer), mount and process namespaces.
  const first = into(init.initHostPid, [
    ...(init.kind === 'userns' ? ['--user'] : []),
    '--mount',
    '--pid',
    '--net',
    '--ipc',
    '--uts',
  ]);
  const holder = into(role === 'agent' ? init.holderPid : init.harnessHolderPid, [
    ...(init.layer ? ['--user'] : []),
    '--mount',
    '--pid',
  ]);
  if (init.kind === 'userns') {
    return [
      ...asSandboxUser(init.user),
      ...first,
      // Root of the init's user namespace until here: drop every capability before entering the
      // holder's namespaces, where the sandbox user is not root.
      setpriv,
      '--inh-caps=-all',
      '--bounding-set=-all',
      '--no-new-privs',
      '--',
      ...holder,
      ...shell,
    ];
  }
  const toUser = [
    setpriv,
    `--reuid=${init.user.uid}`,
    `--regid=${init.user.gid}`,
    '--clear-groups',
    '--inh-caps=-all',
    '--bounding-set=-all',
    '--no-new-privs',
    '--',
  ];
  // Without a user namespace of the holder's, its mount and process namespaces are entered as root.
  const privileged = init.layer
    ? [...first, ...toUser, ...holder, ...shell]
    : [...first, ...holder, ...toUser, ...shell];
  return init.kind === 'sudo' ? [need('sudo'), '-n', '--', ...privileged] : privileged;
}

/** Starts the sandbox's init with one mechanism and waits until its holder reports. */
async function startInit(kind: MechanismKind, user: SandboxUser, dirs: readonly string[]): Promise<Init> {
  const argv = lowered(initArgv(kind, user, dirs));
  const [cmd, ...args] = argv;
  if (cmd === undefined) throw new MechanismUnavailable('nothing to run');
  // A new session: nothing in the sandbox has the host's terminal (no TIOCSTI into it). Started in
  // `/`: the init's working folder is taken before the masks and hidden paths are mounted, and is
  // none of the host process's folders.
  const child = spawn(cmd, args, {
    cwd: '/',
    env: { PATH: SYSTEM_PATH },
    stdio: ['pipe', 'pipe', 'pipe'],
    detached: true,
  });
  child.on('error', () => undefined);
  child.stdin.on('error', () => undefined);
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    if (stderr.length < 4096) stderr += chunk.toString('utf8');
  });
  const deadline = Date.now() + START_TIMEOUT_MS;
  const ready = await new Promise<{ layer: boolean }>((resolve, reject) => {
    const seen = new Set<string>();
    let out = '';
    const timer = setTimeout(() => {
      reject(new Error(`no answer within ${START_TIMEOUT_MS} ms`));
    }, START_TIMEOUT_MS);
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString('utf8');
      for (const m of out.matchAll(new RegExp(`${READY} (agent|harness) ([01])\\n`, 'g'))) {
        if (m[1] !== undefined) seen.add(m[1]);
        if (seen.size === 2) {
          clearTimeout(timer);
          resolve({ layer: m[2] === '1' });
        }
      }
    });
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      // Let the last of stderr arrive before reporting it.
      setImmediate(() => {
        reject(new Error(stderr.trim() !== '' ? lastLines(stderr) : `it exited with code ${String(code)}`));
      });
    });
  }).catch(async (error: unknown) => {
    child.stdin.end();
    if (child.pid !== undefined) await killTree(child.pid);
    throw error;
  });
  child.stdout.resume();
  let init: { host: number; inner: number };
  let holder: number;
  let harnessHolder: number;
  try {
    init = await topInNamespace(child, deadline, 1);
    holder = await holderOf(init.host, 'agent', deadline);
    harnessHolder = await holderOf(init.host, 'harness', deadline);
  } catch (error) {
    child.stdin.end();
    if (child.pid !== undefined) await killTree(child.pid);
    throw error;
  }
  return {
    kind,
    child,
    initHostPid: init.host,
    holderPid: holder,
    harnessHolderPid: harnessHolder,
    layer: ready.layer,
    user,
    mechanism: describeMechanism(kind, user, ready.layer),
  };
}

function lastLines(text: string): string {
  return text.trim().split('\n').slice(-3).join(' / ');
}

const probes = new Map<string, Promise<{ ok: true; mechanism: string } | { ok: false; reason: string }>>();

/**
 * Whether one mechanism works here: a whole sandbox is started, a shell entered, asked its uid and
 * ended. The same code paths as a real start, so a probe that passes is not an approximation.
 * Asked once per process per mechanism and sandbox user.
 */
function probe(
  kind: MechanismKind,
  user: SandboxUser,
): Promise<{ ok: true; mechanism: string } | { ok: false; reason: string }> {
  const key = `${kind}:${user.uid}:${user.gid}`;
  let p = probes.get(key);
  if (p === undefined) {
    p = runProbe(kind, user).then(
      (mechanism) => ({ ok: true as const, mechanism }),
      (error: unknown) => ({
        ok: false as const,
        reason: error instanceof Error ? error.message : String(error),
      }),
    );
    probes.set(key, p);
  }
  return p;
}

async function runProbe(kind: MechanismKind, user: SandboxUser): Promise<string> {
  if (kind === 'root' && hostUser().uid !== 0)
    throw new MechanismUnavailable('the host does not run as root');
  if (kind === 'sudo' && hostUser().uid === 0)
    throw new MechanismUnavailable('the host already runs as root');
  const init = await startInit(kind, user, []);
  try {
    // Both kinds of shell, each asked its uid and its process namespace, which must differ.
    const namespaces = new Set<string>();
    for (const role of ['agent', 'harness'] as const) {
      const argv = enterArgv(init, '/', { PATH: SYSTEM_PATH }, [], role);
      const [cmd, ...args] = argv;
      if (cmd === undefined) throw new Error('nothing to run');
      const child = spawn(cmd, args, {
        env: { PATH: SYSTEM_PATH },
        stdio: ['pipe', 'pipe', 'pipe'],
        detached: true,
      });
      child.on('error', () => undefined);
      child.stdin.on('error', () => undefined);
      let out = '';
      let err = '';
      child.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
      child.stderr.on('data', (c: Buffer) => (err += c.toString('utf8')));
      child.stdin.end('echo "ia-probe $(id -u) $(readlink /proc/self/ns/pid)"; exit 0\n');
      const code = await new Promise<number | null>((resolve) => {
        const timer = setTimeout(() => {
          if (child.pid !== undefined) void killTree(child.pid);
          resolve(null);
        }, START_TIMEOUT_MS);
        child.once('exit', (c) => {
          clearTimeout(timer);
          resolve(c);
        });
      });
      const m = /ia-probe (\d+) (\S+)/.exec(out);
      if (code !== 0 || m === null)
        throw new Error(
          `${role === 'agent' ? 'a shell' : "the harness's shell"} could not enter the sandbox: ${lastLines(err) || `exit code ${String(code)}`}`,
        );
      if (Number(m[1]) !== user.uid) throw new Error(`the shell ran as uid ${m[1] ?? '?'}, not ${user.uid}`);
      namespaces.add(m[2] ?? '');
      if (role === 'harness' && namespaces.size !== 2)
        throw new Error("the harness's shell is in the agent's process namespace");
    }
    return init.mechanism;
  } finally {
    await endInit(init);
  }
}

/** Ends a sandbox: its init's input closes and, where the host may signal it, the init is killed. */
async function endInit(init: Init): Promise<void> {
  const exited = new Promise<void>((resolve) => {
    if (init.child.exitCode !== null || init.child.signalCode !== null) resolve();
    else
      init.child.once('exit', () => {
        resolve();
      });
  });
  init.child.stdin.end();
  killPid(init.initHostPid);
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([exited, new Promise((r) => (timer = setTimeout(r, 5_000)))]);
  clearTimeout(timer);
}

/**
 * Whether the isolated local sandbox can run here, and how (the first mechanism of the order that
 * works), or why not.
 */
export async function isolationSupport(
  options: { readonly mechanisms?: readonly MechanismKind[]; readonly sandboxUser?: SandboxUser } = {},
): Promise<{ ok: true; mechanism: string } | { ok: false; reason: string }> {
  const user = sandboxUserFor(options);
  const reasons: string[] = [];
  for (const kind of options.mechanisms ?? defaultMechanisms()) {
    const r = await probe(kind, user);
    if (r.ok) return r;
    reasons.push(`${kind}: ${r.reason}`);
  }
  return { ok: false, reason: unavailableMessage(reasons) };
}

function unavailableMessage(reasons: readonly string[]): string {
  return (
    'the isolated local sandbox cannot run on this host. It needs unprivileged user namespaces ' +
    '(unshare), or root, or passwordless sudo (sudo -n), with util-linux (unshare, nsenter, setpriv). ' +
    `Tried: ${reasons.join('; ')}`
  );
}

/**
 * Launches the shells of one sandbox. With `isolated`, the first launch makes the sandbox (a root
 * host first hands the workspace to the sandbox user, while no sandbox process exists yet); later
 * launches enter the same one, so every shell shares its /tmp, HOME and processes, and a pid a
 * shell reports names one process. The sandbox ends when its last shell ends: everything in it is
 * killed with its init, so no process outlives the shells. A shell launched after that gets a new,
 * empty sandbox (the workspace, a host folder, is what carries over).
 */
export class ShellLauncher {
  private init: Init | null = null;
  private starting: Promise<Init> | null = null;
  private readonly live = new Map<Init, number>();
  /**
   * Every host-side process that entered the sandbox and has not exited. `nsenter` forks into the
   * PID namespace and waits for its child; when that child is stopped (SIGSTOP from anything in the
   * sandbox, or the setup sweep's stop-then-kill), nsenter stops itself too and, stopped, never
   * reaps its child or exits. So a process left here is SIGKILLed (which works on a stopped
   * process) when its shell is killed and when the launcher closes, never waited for.
   */
  private readonly entered = new Set<ChildProcess>();
  private handed = false;

  constructor(private readonly options: LaunchOptions) {}

  /** How shells are confined; null for an isolated launcher until its sandbox started. */
  get mechanism(): string | null {
    if (this.options.confinement.kind === 'none') return 'none';
    return this.init?.mechanism ?? null;
  }

  /** A shell of `role` (see ShellRole); an unconfined launcher has one kind of shell only. */
  async launch(role: ShellRole = 'agent'): Promise<LaunchedShell> {
    if (this.options.confinement.kind === 'none') return this.launchUnconfined();
    const init = await this.sandbox();
    return this.enter(init, this.options.env, [], role);
  }

  /**
   * Starts the isolated sandbox now, without a shell (a setup phase runs before any shell exists).
   * Only for a `keepAlive` launcher, whose sandbox outlives its processes until close().
   */
  async startSandbox(): Promise<void> {
    this.needKeepAlive('a sandbox started before its shells');
    await this.sandbox();
  }

  /**
   * One process in the sandbox, entered as the shells are (same user, namespaces, no capabilities)
   * but with its own environment and `bash --noprofile --norc <bashArgs…>`: a setup command, the
   * egress forwarder, the sweep. Its environment travels on the command line of the host's
   * launcher (env -i): never put a secret there; send it on the process's standard input instead.
   */
  async oneOff(env: Readonly<Record<string, string>>, bashArgs: readonly string[]): Promise<LaunchedShell> {
    this.needKeepAlive('a one-off process');
    const init = await this.sandbox();
    return this.enter(init, env, bashArgs);
  }

  /**
   * The holder's pid as the agent's side (a one-off, a setup sweep) sees it: pid 1 of its process
   * namespace, which must outlive every sweep (and which a signal from inside cannot end anyway).
   */
  get holderPid(): number | null {
    return this.init === null ? null : 1;
  }

  private needKeepAlive(what: string): void {
    if (this.options.confinement.kind !== 'isolated' || this.options.keepAlive !== true)
      throw new SandboxError('start_failed', `${what} needs an isolated sandbox kept alive until close()`);
  }

  /** Ends every shell and the sandbox now. */
  async close(): Promise<void> {
    const init = this.init ?? (await this.starting?.catch(() => null)) ?? null;
    this.init = null;
    if (init !== null) await this.end(init);
    // With the sandbox gone, a host-side process still here is one that can no longer end by itself.
    for (const child of this.entered) {
      if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) killPid(child.pid);
    }
  }

  private launchUnconfined(): LaunchedShell {
    const [cmd = 'bash', ...args] = lowered(['bash', '--noprofile', '--norc']);
    const child = spawn(cmd, args, {
      cwd: this.options.cwd,
      env: { ...this.options.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    child.on('error', () => undefined);
    return {
      child,
      started: startedOf(child, 'bash'),
      mechanism: 'none',
      hostPid: () =>
        child.pid === undefined
          ? Promise.reject(new Error('bash did not start'))
          : Promise.resolve(child.pid),
      namespacePid: () =>
        child.pid === undefined
          ? Promise.reject(new Error('bash did not start'))
          : Promise.resolve(child.pid),
      kill: () => {
        if (child.pid !== undefined) void killTree(child.pid);
        child.kill('SIGKILL');
      },
    };
  }

  private sandbox(): Promise<Init> {
    if (this.init !== null && this.init.child.exitCode === null && this.init.child.signalCode === null)
      return Promise.resolve(this.init);
    this.starting ??= this.start().finally(() => {
      this.starting = null;
    });
    return this.starting;
  }

  private async start(): Promise<Init> {
    const { cwd, env, confinement } = this.options;
    const user = sandboxUserFor(this.options);
    const dirs = directives(cwd, env, confinement);
    // The workspace counts as handed over from here until this sandbox's init is gone.
    const ws = canonical(cwd);
    const holders = handedOver.get(ws) ?? 0;
    handedOver.set(ws, holders + 1);
    let released = false;
    const release = (): void => {
      if (released) return;
      released = true;
      const n = (handedOver.get(ws) ?? 1) - 1;
      if (n <= 0) handedOver.delete(ws);
      else handedOver.set(ws, n);
    };
    try {
      if (!this.handed && holders === 0 && hostUser().uid === 0) {
        const handing = this.handOver(user);
        handingOver.set(ws, handing);
        await handing.finally(() => {
          if (handingOver.get(ws) === handing) handingOver.delete(ws);
        });
      } else {
        await handingOver.get(ws)?.catch(() => undefined);
      }
      this.handed = true;
    } catch (error) {
      release();
      throw error;
    }
    const reasons: string[] = [];
    let usable = false;
    for (const kind of this.options.mechanisms ?? defaultMechanisms()) {
      const p = await probe(kind, user);
      if (!p.ok) {
        reasons.push(`${kind}: ${p.reason}`);
        continue;
      }
      usable = true;
      try {
        const init = await startInit(kind, user, dirs);
        this.init = init;
        init.child.once('exit', () => {
          release();
          if (this.init === init) this.init = null;
        });
        return init;
      } catch (error) {
        reasons.push(`${kind}: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
    release();
    // A host that can run the sandbox but not this one (e.g. a workspace the sandbox user cannot
    // write) is told apart from a host that cannot run any.
    throw new SandboxError(
      'start_failed',
      usable
        ? `the isolated local sandbox could not start: ${reasons.join('; ')}`
        : unavailableMessage(reasons),
    );
  }

  /**
   * A root host gives the workspace (and the other writable folders) to the sandbox user: once per
   * launcher, before its first sandbox exists, and not at all while another live sandbox has the
   * same workspace (it was handed over for that one). The sandbox user owns what it creates later.
   */
  private async handOver(user: SandboxUser): Promise<void> {
    if (this.options.confinement.kind !== 'isolated') return;
    try {
      for (const dir of [this.options.cwd, ...(this.options.confinement.writable ?? [])].map(canonical))
        if ((await lstat(dir)).isDirectory()) await chownTree(dir, user);
    } catch (error) {
      throw new SandboxError(
        'start_failed',
        `could not give the workspace to the sandbox user (uid ${user.uid}): ${error instanceof Error ? error.message : String(error)}`,
        { cause: error },
      );
    }
  }

  private async end(init: Init): Promise<void> {
    await endInit(init);
  }

  private enter(
    init: Init,
    env: Readonly<Record<string, string>> = this.options.env,
    bashArgs: readonly string[] = [],
    role: ShellRole = 'agent',
  ): LaunchedShell {
    const argv = lowered(enterArgv(init, canonical(this.options.cwd), env, bashArgs, role));
    const [cmd, ...args] = argv;
    if (cmd === undefined) throw new SandboxError('start_failed', 'nothing to run');
    const child = spawn(cmd, args, {
      env: { PATH: SYSTEM_PATH },
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true,
    });
    child.on('error', () => undefined);
    this.entered.add(child);
    child.once('exit', () => this.entered.delete(child));
    this.live.set(init, (this.live.get(init) ?? 0) + 1);
    const found = topInNamespace(child, Date.now() + START_TIMEOUT_MS, 2);
    found.catch(() => undefined);
    // A shell counts until it is killed or exits. When the last one of a sandbox goes, the sandbox
    // ends at once (its init killed or its input closed), and with it anything the shells left
    // running, e.g. a daemon that detached from them.
    let counted = true;
    const gone = (): void => {
      if (!counted) return;
      counted = false;
      const n = (this.live.get(init) ?? 1) - 1;
      if (n > 0) {
        this.live.set(init, n);
        return;
      }
      this.live.delete(init);
      if (this.options.keepAlive === true && this.init === init) return;
      if (this.init === init) this.init = null;
      void this.end(init);
    };
    child.once('exit', gone);
    return {
      child,
      started: startedOf(child, 'the sandboxed shell'),
      mechanism: init.mechanism,
      hostPid: async () => (await found).host,
      namespacePid: async () => (await found).inner,
      kill: () => {
        child.stdin.end();
        void found.then(
          async ({ host }) => {
            await killTree(host);
            // The host-side nsenter (and the one it started inside, which entered the side's
            // namespace) reap the shell and exit once it is gone. Killed first, they leave their
            // children to the host's init to reap, and the sandbox's init cannot end until it has
            // (seconds, on some hosts): a moment is given. A stopped one never exits: it is killed.
            if (!(await exitedWithin(child, 250)) && child.pid !== undefined) killPid(child.pid);
          },
          () => {
            if (child.pid !== undefined) killPid(child.pid);
          },
        );
        gone();
      },
    };
  }
}
