import type Docker from 'dockerode';
import { LABEL_JOB, LABEL_OWNER, LABEL_POOL, LABEL_SANDBOX } from './owner.js';
import { generatedFilesEnv } from '../generated-files.js';
import { DEFAULT_SANDBOX_NICE, cpuSharesForNice } from '../cpu-priority.js';

/** Resource limits of a sandbox container. Every field documents its default. */
export interface SandboxLimits {
  /**
   * Memory limit in bytes; swap is disabled (MemorySwap = Memory). It covers the processes AND
   * what is stored in the tmpfs mounts (workspace, /tmp, home). Default 4 GiB.
   */
  readonly memoryBytes?: number;
  /** CPUs (fractional allowed). Default 2. */
  readonly cpus?: number;
  /**
   * CPU weight against the container's cgroup siblings when the CPU is short (HostConfig.CpuShares;
   * the engine's default is 1024). Default: the weight of nice DEFAULT_SANDBOX_NICE, 110, so a
   * worker in a container beside its sandboxes goes first (see cpu-priority.ts).
   */
  readonly cpuShares?: number;
  /** Max processes and threads in the container. Default 512. */
  readonly pids?: number;
  /** Size of the tmpfs at /tmp. Default 1 GiB (counts against the memory limit when used). */
  readonly tmpBytes?: number;
  /** Size of the tmpfs HOME. Default 512 MiB. */
  readonly homeBytes?: number;
  /**
   * Size of the workspace, a tmpfs at /workspace. The kernel refuses writes past it (ENOSPC), and
   * the sandbox then ends with `disk_limit`. Default 2 GiB.
   */
  readonly workspaceBytes?: number;
}

export const DEFAULT_LIMITS: Required<SandboxLimits> = {
  memoryBytes: 4 * 1024 ** 3,
  cpus: 2,
  cpuShares: cpuSharesForNice(DEFAULT_SANDBOX_NICE),
  pids: 512,
  tmpBytes: 1024 ** 3,
  homeBytes: 512 * 1024 ** 2,
  workspaceBytes: 2 * 1024 ** 3,
};

/** Where the workspace appears inside the container. */
export const CONTAINER_WORKDIR = '/workspace';
export const CONTAINER_HOME = '/home/agent';
/** Where the host's egress socket directory appears in the container (a read-only bind mount). */
export const EGRESS_MOUNT = '/run/issue-agent-egress';

/**
 * The whole environment of the container: nothing is copied from the host process, so no token,
 * key or other secret of the worker can reach a command. Image ENV (e.g. npm or pip settings)
 * still applies underneath. Nothing here changes how a project's tests behave (no NO_COLOR or
 * FORCE_COLOR: suites that test colour detection must see what their CI sees); the test-output
 * parser strips colour codes instead.
 */
export function sandboxEnv(extra: Readonly<Record<string, string>> = {}): string[] {
  const env: Record<string, string> = {
    PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    HOME: CONTAINER_HOME,
    USER: 'agent',
    TMPDIR: '/tmp',
    LANG: 'C.UTF-8',
    TERM: 'dumb',
    PAGER: 'cat',
    GIT_PAGER: 'cat',
    GIT_TERMINAL_PROMPT: '0',
    CI: 'true',
    PYTHONUNBUFFERED: '1',
    ...generatedFilesEnv('/tmp'),
    ...extra,
  };
  return Object.entries(env).map(([k, v]) => `${k}=${v}`);
}

export interface ContainerSpecInput {
  readonly name: string;
  readonly image: string;
  /** `uid:gid` of the container's processes; never 0. */
  readonly uid: number;
  readonly gid: number;
  readonly limits: Required<SandboxLimits>;
  readonly labels: {
    readonly job: string;
    readonly owner: string;
    readonly pool?: string | undefined;
  };
  readonly env?: Readonly<Record<string, string>> | undefined;
  /**
   * The host directory of the egress proxy's socket, mounted read-only at EGRESS_MOUNT: the one
   * host path a sandbox may see. It holds nothing but the socket, and no host process opens a file
   * in it by a name the sandbox could change (the mount is read-only to the sandbox).
   */
  readonly egressDir?: string | undefined;
  /**
   * A cached environment (a tar file of the environment cache) mounted read-only at RESTORE_MOUNT
   * so that setup extracts it in place instead of streaming it through the engine. Only ever the
   * entry of this repository and these inputs (see environment/env-cache.ts); entries are written
   * once and renamed into place, never changed, so what is mounted is what was looked up.
   */
  readonly restoreFile?: string | undefined;
  /**
   * A host folder mounted read-only at RESTORE_MOUNT's folder, empty at creation: a warm pool's
   * container gets the entry of the job it is handed to placed in it then (see warm-pool.ts). Not
   * with `restoreFile`.
   */
  readonly restoreDir?: string | undefined;
  /** The deployment's extra CA certificates (see ca-file.ts), mounted read-only at CA_MOUNT. */
  readonly caFile?: string | undefined;
  /** The hosts table (ca-file.ts hostsMountFile), mounted read-only at /etc/hosts. */
  readonly hostsFile: string;
}

/** The folder of RESTORE_MOUNT, and the name of the entry in it. */
export const RESTORE_DIR = '/run/issue-agent-env';
export const RESTORE_NAME = 'entry.tar';
/**
 * Host folders (in the worker's TMPDIR) of a warm pool: each container's own, holding the folder
 * mounted at RESTORE_DIR; and an acquire's staging folder for the entry (warm-pool.ts, reap.ts).
 */
export const POOL_ENTRY_FOLDER = 'issue-agent-pool-entry-';
export const ENTRY_STAGING_FOLDER = 'issue-agent-entry-';
/** Where a cached environment's tar file is mounted (read-only) when one is restored. */
export const RESTORE_MOUNT = `${RESTORE_DIR}/${RESTORE_NAME}`;
/** Where the deployment's extra CA certificates are mounted (read-only) when it has some. */
export const CA_MOUNT = '/run/issue-agent-ca/extra.pem';

/** The hardened create options of a sandbox container. */
export function containerSpec(input: ContainerSpecInput): Docker.ContainerCreateOptions {
  if (input.uid === 0) throw new Error('a sandbox container never runs as root');
  const { limits } = input;
  const labels: Record<string, string> = {
    [LABEL_SANDBOX]: '1',
    [LABEL_JOB]: input.labels.job,
    [LABEL_OWNER]: input.labels.owner,
  };
  if (input.labels.pool !== undefined) labels[LABEL_POOL] = input.labels.pool;
  return {
    name: input.name,
    Image: input.image,
    User: `${input.uid}:${input.gid}`,
    WorkingDir: CONTAINER_WORKDIR,
    // The main process only keeps the container alive; the shell is an exec. The engine's init
    // (HostConfig.Init) is PID 1 and reaps orphans whatever the image's entrypoint is.
    Entrypoint: ['sleep'],
    Cmd: ['infinity'],
    Env: sandboxEnv(input.env),
    Labels: labels,
    // Networking disabled as well as NetworkMode none: the container still gets a network namespace
    // of its own holding only loopback (the OCI default runc creates; checked by the escape tests),
    // but the engine sets up no libnetwork sandbox for it, so no `libnetwork-setkey` hook re-executes
    // dockerd for every container start: about half a container's CPU and start time (benchmarks.md).
    // The engine then writes no /etc/hosts or /etc/resolv.conf: the hosts table is mounted (hostsFile),
    // and a resolver with no server fails at once (the network is none either way).
    NetworkDisabled: true,
    Tty: false,
    OpenStdin: false,
    AttachStdin: false,
    AttachStdout: false,
    AttachStderr: false,
    StopTimeout: 1,
    HostConfig: {
      Init: true,
      // No network interface but loopback, in every phase: setup reaches out through the egress
      // proxy's socket (egressDir), never through an interface.
      NetworkMode: 'none',
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges:true'],
      Privileged: false,
      ReadonlyRootfs: true,
      IpcMode: 'private',
      // No host path but the egress socket's directory, a cached environment's tar file (or the
      // folder a warm container gets it in) and the deployment's CA certificates, all read-only: the workspace is a tmpfs the repository is copied into (see
      // DockerSandbox.copyIn), so no host process ever has a name for a file the agent can change,
      // and its size is a limit the kernel enforces. Every writable place is a sized tmpfs, so a
      // job cannot use the host's disk.
      Mounts: [
        ...(input.egressDir === undefined
          ? []
          : [{ Type: 'bind' as const, Source: input.egressDir, Target: EGRESS_MOUNT, ReadOnly: true }]),
        ...(input.restoreFile === undefined
          ? []
          : [{ Type: 'bind' as const, Source: input.restoreFile, Target: RESTORE_MOUNT, ReadOnly: true }]),
        ...(input.restoreDir === undefined || input.restoreFile !== undefined
          ? []
          : [{ Type: 'bind' as const, Source: input.restoreDir, Target: RESTORE_DIR, ReadOnly: true }]),
        ...(input.caFile === undefined
          ? []
          : [{ Type: 'bind' as const, Source: input.caFile, Target: CA_MOUNT, ReadOnly: true }]),
        { Type: 'bind' as const, Source: input.hostsFile, Target: '/etc/hosts', ReadOnly: true },
      ],
      Tmpfs: {
        // Group-writable: the harness's user (agent-user.ts) is in the agent's group, and writes
        // the workspace (file operations, checkpoints, its test runs) and HOME (its test runs).
        // The engine copies the image's folder (its mode too) into a tmpfs: the base image's
        // folders have the same modes.
        [CONTAINER_WORKDIR]: `rw,nosuid,nodev,exec,size=${limits.workspaceBytes},uid=${input.uid},gid=${input.gid},mode=0775`,
        '/tmp': `rw,nosuid,nodev,size=${limits.tmpBytes},mode=1777`,
        [CONTAINER_HOME]: `rw,nosuid,nodev,size=${limits.homeBytes},uid=${input.uid},gid=${input.gid},mode=0770`,
      },
      Memory: limits.memoryBytes,
      MemorySwap: limits.memoryBytes,
      NanoCpus: Math.round(limits.cpus * 1e9),
      CpuShares: limits.cpuShares,
      PidsLimit: limits.pids,
      // When the host runs short of memory, the sandbox goes first.
      OomScoreAdj: 500,
      Ulimits: [{ Name: 'nofile', Soft: 8192, Hard: 8192 }],
      LogConfig: { Type: 'none', Config: {} },
      RestartPolicy: { Name: 'no', MaximumRetryCount: 0 },
      AutoRemove: false,
    },
  };
}
