import { randomBytes } from 'node:crypto';
import { createWriteStream, fstat } from 'node:fs';
import { chmod, link, lstat, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import type { Logger } from 'pino';
import { SandboxError } from '../sandbox.js';
import {
  DEFAULT_LIMITS,
  ENTRY_STAGING_FOLDER,
  POOL_ENTRY_FOLDER,
  RESTORE_NAME,
  containerSpec,
  type SandboxLimits,
} from './container-spec.js';
import {
  DockerSandbox,
  REFRESH_INDEX_SCRIPT,
  containerName,
  packWorkspace,
  type WorkspaceArchive,
} from './docker-sandbox.js';
import { AGENT_GID, AGENT_UID } from './agent-user.js';
import { hostsMountFile } from './ca-file.js';
import { errorMessage } from './docker-shell.js';
import { ownerId } from './owner.js';

export interface WarmPoolOptions {
  /** Images to keep warm containers of, and how many of each. */
  readonly images: Readonly<Record<string, number>>;
  readonly docker?: Docker | undefined;
  readonly limits?: SandboxLimits | undefined;
  readonly env?: Readonly<Record<string, string>> | undefined;
  readonly captureBytes?: number | undefined;
  readonly owner?: string | undefined;
  readonly logger?: Logger | undefined;
  /**
   * How many repositories keep a prepared container: one started like the others, with the
   * workspace of the repository's last job already checked out in it (0: none). Default 2.
   */
  readonly repositories?: number | undefined;
  /** Wait after a prepared checkout before its index is refreshed (ms; default 1100, see prepare()). */
  readonly refreshAfterMs?: number | undefined;
}

export interface AcquireOptions {
  /** The job's copy of the repository on the host, copied into the container's workspace. */
  readonly workspace: string;
  /** The workspace holds only `.git`: check out in the container (DockerSandboxOptions.checkout). */
  readonly checkout?: boolean | undefined;
  readonly jobId: string;
  readonly image: string;
  /**
   * Names the repository the workspace is of, unique per installation (never shared across
   * installations). With `checkout`, the job may get the repository's prepared container, and the
   * pool prepares the next one from this job's `.git`.
   */
  readonly repository?: string | undefined;
  /** The job's variables (DockerSandbox.useEnvironment): a new container would get them at creation. */
  readonly env?: Readonly<Record<string, string>> | undefined;
  /** A cached environment to unpack into the workspace (see EntryToRestore). */
  readonly restore?: EntryToRestore | undefined;
  /** Workspace paths kept out of git snapshots (the environment's outputs). */
  readonly exclude?: readonly string[] | undefined;
}

/** An environment cache entry (a tar file written once, never changed) for the job's container. */
export interface EntryToRestore {
  /** The entry's file: linked into the container's entry folder (null, or on another file system: copied from the stream). */
  readonly path: string | null;
  /** The entry, opened at its lookup (an eviction since cannot take it away). */
  readonly stream: () => Readable;
  /** The repository holds one of the entry's paths: unpack the entry after its files (the entry wins), not beside them. */
  readonly afterCopy: boolean;
}

interface PreparedContainer extends WarmContainer {
  readonly image: string;
}

interface WarmContainer {
  /** Started, with its shells attached and ready, and an empty workspace. */
  readonly sandbox: DockerSandbox;
  /**
   * The host folder mounted read-only at RESTORE_DIR, empty until the container is handed to a job
   * with a cached environment: the entry is placed in it then. Only the host writes it (a 0700
   * folder of its own holds it), and it goes with the container.
   */
  readonly entryDir: string;
}

/**
 * Keeps N started, hardened containers per image (network `none`), so a job gets a sandbox without a
 * cold start. A warm container's workspace is an empty tmpfs; acquire() copies the job's repository
 * into it, as a cold start does.
 *
 * Pool containers carry the sandbox labels (and issue-agent.pool=<image>), so a worker that dies
 * leaves nothing the reaper does not collect. Setup that needs a network cannot use the pool.
 *
 * A job that names its repository (AcquireOptions.repository) also gets, or leaves, a prepared
 * container: see prepare(). Its key is the caller's, so the caller makes it unique per installation.
 */
export class WarmPool {
  private readonly docker: Docker;
  private readonly limits: Required<SandboxLimits>;
  private readonly owner: string;
  private readonly ready = new Map<string, WarmContainer[]>();
  private readonly filling = new Map<string, number>();
  private readonly inflight = new Set<Promise<void>>();
  /** Repository → its prepared container; the first key is the least recently used. */
  private readonly prepared = new Map<string, PreparedContainer>();
  private readonly preparing = new Set<string>();
  private readonly repositories: number;
  private closed = false;

  constructor(private readonly options: WarmPoolOptions) {
    this.docker = options.docker ?? new Docker();
    this.limits = { ...DEFAULT_LIMITS, ...options.limits };
    this.owner = options.owner ?? ownerId();
    this.repositories = options.repositories ?? 2;
  }

  /** Fills the pool and resolves when every image has its N containers ready. */
  async start(): Promise<void> {
    for (const image of Object.keys(this.options.images)) this.refill(image);
    await this.drain();
  }

  /** Whether the pool keeps containers of `image`. */
  serves(image: string): boolean {
    return Object.hasOwn(this.options.images, image);
  }

  /** Number of ready containers of an image. */
  size(image: string): number {
    return this.ready.get(image)?.length ?? 0;
  }

  /**
   * A sandbox for the job: the repository's prepared container switched to the job's `.git` when
   * there is one of `image`, else a warm container of `image` (a cold one when none is ready); the
   * pool refills, and prepares the repository's next container, in the background.
   */
  async acquire(options: AcquireOptions): Promise<DockerSandbox> {
    if (this.closed) throw new SandboxError('closed', 'the warm pool is closed');
    const repository =
      options.checkout === true && this.repositories > 0 && options.repository !== undefined
        ? options.repository
        : null;
    // Packed once: for this job's container and for the repository's next prepared one.
    const packed = repository === null ? null : await packWorkspace(options.workspace);
    const staged = options.restore === undefined ? null : await stageEntry(options.restore);
    let sandbox: DockerSandbox;
    try {
      // The next prepared container is made after this job's is ready, not competing with it.
      sandbox =
        repository !== null && packed !== null
          ? ((await this.fromPrepared(repository, packed, options, staged)) ??
            (await this.fromWarm(options, packed, staged)))
          : await this.fromWarm(options, packed, staged);
    } finally {
      if (staged !== null) await rm(staged.dir, { recursive: true, force: true });
    }
    try {
      await sandbox.useEnvironment(options.env ?? {});
    } catch (error) {
      await sandbox.close();
      throw error;
    }
    if (repository !== null && packed !== null) this.prepare(repository, options.image, packed);
    return sandbox;
  }

  /** A warm container (a new one when none is ready) with the workspace copied in. */
  private async fromWarm(
    options: AcquireOptions,
    packed: WorkspaceArchive | null,
    staged: StagedEntry | null,
  ): Promise<DockerSandbox> {
    const warm = this.ready.get(options.image)?.shift();
    if (options.image in this.options.images) this.refill(options.image);
    let entry = warm ?? (await this.createWarm(options.image));
    const source = packed ?? options.workspace;
    const place = async (into: WarmContainer): Promise<void> => {
      if (staged !== null) await link(staged.file, join(into.entryDir, RESTORE_NAME));
      await into.sandbox.copyIn(source, {
        checkout: options.checkout === true,
        exclude: options.exclude,
        ...(options.restore === undefined ? {} : { restore: { afterCopy: options.restore.afterCopy } }),
      });
    };
    try {
      try {
        await place(entry);
      } catch (error) {
        // A waiting container may be gone (another host's worker reaped it by age, an operator
        // removed it): the job gets a fresh one instead of the failure.
        if (warm === undefined || (await this.running(entry))) throw error;
        this.options.logger?.warn(
          { container: entry.sandbox.containerId },
          'warm pool: a waiting container was gone; making another',
        );
        await entry.sandbox.close();
        entry = await this.createWarm(options.image);
        await place(entry);
      }
    } catch (error) {
      await entry.sandbox.close();
      if (error instanceof SandboxError) throw error;
      throw new SandboxError(
        'start_failed',
        `warm pool: could not copy the workspace in: ${errorMessage(error)}`,
        {
          cause: error,
        },
      );
    }
    return this.handOver(entry.sandbox, options.jobId);
  }

  private handOver(sandbox: DockerSandbox, jobId: string): DockerSandbox {
    sandbox.handOver(jobId, this.options.logger);
    // Pool containers are created before the job is known; the name says which job holds one.
    void this.docker
      .getContainer(sandbox.containerId)
      .rename({ name: containerName(jobId) })
      .catch(() => undefined);
    return sandbox;
  }

  /** The container id of the repository's prepared container, if one is ready (tests, benches). */
  preparedFor(repository: string): string | null {
    return this.prepared.get(repository)?.sandbox.containerId ?? null;
  }

  /**
   * The repository's prepared container switched to the job's `.git` (only the files that differ
   * from its checkout are written), or null when there is none of the image, or the switch failed
   * (the container is removed; the job gets a warm one instead).
   */
  private async fromPrepared(
    repository: string,
    packed: WorkspaceArchive,
    options: AcquireOptions,
    staged: StagedEntry | null,
  ): Promise<DockerSandbox | null> {
    const entry = this.prepared.get(repository);
    if (entry === undefined || entry.image !== options.image) return null;
    // Taken out first: a container is handed to one job, and never comes back.
    this.prepared.delete(repository);
    try {
      if (staged !== null) await link(staged.file, join(entry.entryDir, RESTORE_NAME));
      await entry.sandbox.copyIn(packed, {
        checkout: true,
        switchCheckout: true,
        exclude: options.exclude,
        ...(options.restore === undefined ? {} : { restore: { afterCopy: true } }),
      });
    } catch (error) {
      this.options.logger?.warn(
        { err: error, container: entry.sandbox.containerId },
        'warm pool: a prepared container could not be switched; using another',
      );
      await entry.sandbox.close();
      return null;
    }
    this.options.logger?.info({ repository }, 'warm pool: prepared container');
    return this.handOver(entry.sandbox, options.jobId);
  }

  /**
   * Prepares the repository's next container in the background: started like a warm one, the
   * job's `.git` copied in and checked out by the sandbox user, then, once the checkout is older
   * than the file system's timestamps can tell apart, its index refreshed, so a later switch only
   * compares stat data instead of reading every file again. It replaces the repository's previous
   * one; past `repositories`, the least recently prepared repository's goes. No command of a job
   * ever runs in it before it is handed to one, and a handed-out container never comes back.
   */
  private prepare(repository: string, image: string, packed: WorkspaceArchive): void {
    if (this.closed || this.preparing.has(repository)) return;
    this.preparing.add(repository);
    const p = (async () => {
      const entry = await this.createWarm(image);
      try {
        await entry.sandbox.copyIn(packed, { checkout: true });
        await new Promise((resolve) => setTimeout(resolve, this.options.refreshAfterMs ?? 1100));
        const r = await entry.sandbox.harnessExec(REFRESH_INDEX_SCRIPT, { timeoutMs: 5 * 60_000 });
        if (r.exitCode !== 0) throw new Error(`refreshing the index failed: ${r.output.slice(0, 300)}`);
      } catch (error) {
        await entry.sandbox.close();
        throw error;
      }
      if (this.closed) {
        await entry.sandbox.close();
        return;
      }
      const old = this.prepared.get(repository);
      this.prepared.delete(repository);
      this.prepared.set(repository, { ...entry, image });
      const gone: PreparedContainer[] = old === undefined ? [] : [old];
      while (this.prepared.size > this.repositories) {
        const [first] = this.prepared;
        if (first === undefined) break;
        this.prepared.delete(first[0]);
        gone.push(first[1]);
      }
      await Promise.all(gone.map((g) => g.sandbox.close()));
    })()
      .catch((error: unknown) => {
        this.options.logger?.warn({ err: error, image }, 'warm pool could not prepare a container');
      })
      .finally(() => {
        this.preparing.delete(repository);
        this.inflight.delete(p);
      });
    this.inflight.add(p);
  }

  /** Whether the entry's container still exists and runs. */
  private async running(entry: WarmContainer): Promise<boolean> {
    try {
      return (await this.docker.getContainer(entry.sandbox.containerId).inspect()).State.Running;
    } catch {
      return false;
    }
  }

  /** Waits for background refills to settle (tests, shutdown). */
  async drain(): Promise<void> {
    while (this.inflight.size > 0) await Promise.allSettled([...this.inflight]);
  }

  /** Removes every warm container. */
  async close(): Promise<void> {
    this.closed = true;
    await this.drain();
    const all = [...this.ready.values()].flat();
    all.push(...this.prepared.values());
    this.ready.clear();
    this.prepared.clear();
    await Promise.all(
      all.map(async (w) => {
        await w.sandbox.close();
      }),
    );
  }

  private refill(image: string): void {
    if (this.closed) return;
    const want = this.options.images[image] ?? 0;
    const have = this.size(image) + (this.filling.get(image) ?? 0);
    for (let i = have; i < want; i++) {
      this.filling.set(image, (this.filling.get(image) ?? 0) + 1);
      const p = this.createWarm(image)
        .then(async (w) => {
          if (this.closed) {
            await w.sandbox.close();
            return;
          }
          const list = this.ready.get(image) ?? [];
          list.push(w);
          this.ready.set(image, list);
        })
        .catch((error: unknown) => {
          this.options.logger?.warn({ err: error, image }, 'warm pool could not start a container');
        })
        .finally(() => {
          this.filling.set(image, (this.filling.get(image) ?? 1) - 1);
          this.inflight.delete(p);
        });
      this.inflight.add(p);
    }
  }

  private async createWarm(image: string): Promise<WarmContainer> {
    const own = await mkdtemp(join(tmpdir(), POOL_ENTRY_FOLDER));
    const entryDir = join(own, 'entry');
    const cleanUp = (): Promise<void> => rm(own, { recursive: true, force: true });
    try {
      // 0755: the sandbox user reads the entry through the mount; the 0700 folder above keeps
      // the host's other users out.
      await mkdir(entryDir, { mode: 0o755 });
      await chmod(entryDir, 0o755);
    } catch (error) {
      await cleanUp();
      throw new SandboxError('start_failed', `warm pool: ${errorMessage(error)}`, { cause: error });
    }
    let container: Docker.Container | null = null;
    try {
      container = await this.docker.createContainer(
        containerSpec({
          name: `issue-agent-pool-${randomBytes(6).toString('hex')}`,
          image,
          uid: AGENT_UID,
          gid: AGENT_GID,
          limits: this.limits,
          labels: { job: 'pool', owner: this.owner, pool: image },
          hostsFile: await hostsMountFile(),
          env: this.options.env,
          restoreDir: entryDir,
        }),
      );
      await container.start();
    } catch (error) {
      await container?.remove({ force: true, v: true }).catch(() => undefined);
      await cleanUp();
      throw new SandboxError('start_failed', `warm pool: ${errorMessage(error)}`, { cause: error });
    }
    // adopt() removes the container when it fails.
    const sandbox = await DockerSandbox.adopt({
      docker: this.docker,
      container,
      image,
      jobId: 'pool',
      limits: this.limits,
      captureBytes: this.options.captureBytes,
      logger: this.options.logger,
      afterClose: cleanUp,
    });
    return { sandbox, entryDir };
  }
}

interface StagedEntry {
  /** A 0700 folder of this acquire's own, removed when the job has its container. */
  readonly dir: string;
  readonly file: string;
}

/**
 * The entry as a file the job's container can get by a hard link (its entry folder is on the same
 * file system): a link to the cache's file when it is readable by the sandbox user and on the same
 * file system, else a copy of the stream opened at the lookup. The cache never changes an entry's
 * file (a new entry is a new file renamed into place), so a link holds what was looked up.
 */
/** Whether `path` is the file `stream` reads (same device and inode); false when it cannot tell. */
async function sameFile(path: string, stream: Readable): Promise<boolean> {
  const fd = (stream as Readable & { fd?: unknown }).fd;
  if (typeof fd !== 'number') return false;
  try {
    const [a, b] = await Promise.all([lstat(path), promisify(fstat)(fd)]);
    return a.isFile() && a.dev === b.dev && a.ino === b.ino;
  } catch {
    return false;
  }
}

async function stageEntry(entry: EntryToRestore): Promise<StagedEntry> {
  const dir = await mkdtemp(join(tmpdir(), ENTRY_STAGING_FOLDER));
  const file = join(dir, RESTORE_NAME);
  try {
    let linked = false;
    if (entry.path !== null) {
      linked = await link(entry.path, file).then(
        () => true,
        () => false,
      );
      // The file linked must be the one opened at the lookup: an eviction and a new store of the
      // same key in between would have put another file at the path.
      if (linked && !(await sameFile(file, entry.stream()))) {
        await rm(file, { force: true });
        linked = false;
      }
    }
    if (!linked) {
      await pipeline(entry.stream(), createWriteStream(file, { flags: 'wx', mode: 0o644 }));
      await chmod(file, 0o644);
    }
    return { dir, file };
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw new SandboxError(
      'start_failed',
      `warm pool: could not stage the cached environment: ${errorMessage(error)}`,
      {
        cause: error,
      },
    );
  }
}
