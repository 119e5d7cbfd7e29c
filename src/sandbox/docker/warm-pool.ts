import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readdir, realpath, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import type { Logger } from 'pino';
import { SandboxError } from '../sandbox.js';
import { DEFAULT_LIMITS, containerSpec, type SandboxLimits } from './container-spec.js';
import { DockerSandbox, containerName } from './docker-sandbox.js';
import { errorMessage } from './docker-shell.js';
import { ownerId } from './owner.js';
import { openToGroup, prepareWorkspaceOwnership, type ContainerIdentity } from './workspace-ownership.js';

export interface WarmPoolOptions {
  /** Images to keep warm containers of, and how many of each. */
  readonly images: Readonly<Record<string, number>>;
  readonly docker?: Docker | undefined;
  readonly limits?: SandboxLimits | undefined;
  /**
   * Where the pool keeps the host directories its containers bind at /workspace. Put it on the
   * filesystem of the job workspaces so handing one over is a rename. Default: a new temp dir.
   */
  readonly root?: string | undefined;
  readonly env?: Readonly<Record<string, string>> | undefined;
  readonly captureBytes?: number | undefined;
  readonly owner?: string | undefined;
  readonly logger?: Logger | undefined;
}

export interface AcquireOptions {
  readonly workspace: string;
  readonly jobId: string;
  readonly image: string;
}

interface WarmContainer {
  /** Started, with its shell attached and ready. */
  readonly sandbox: DockerSandbox;
  readonly slot: string;
}

/**
 * Keeps N started, hardened containers per image (network `none`), so a job gets a sandbox without a
 * cold start. A bind mount is fixed when a container is created, so each warm container binds its
 * own empty slot directory; acquire() moves the job workspace's entries into the slot (a rename on
 * the same filesystem), and close() of the sandbox moves them back, so the caller's workspace path
 * holds the result afterwards. While the sandbox lives, sandbox.hostWorkspace is the slot.
 *
 * Pool containers carry the sandbox labels (and issue-agent.pool=<image>), so a worker that dies
 * leaves nothing the reaper does not collect. Setup that needs a network cannot use the pool.
 */
export class WarmPool {
  private readonly docker: Docker;
  private readonly limits: Required<SandboxLimits>;
  private readonly owner: string;
  private readonly ready = new Map<string, WarmContainer[]>();
  private readonly filling = new Map<string, number>();
  private readonly inflight = new Set<Promise<void>>();
  private root: string | null = null;
  private identity: ContainerIdentity | null = null;
  private closed = false;

  constructor(private readonly options: WarmPoolOptions) {
    this.docker = options.docker ?? new Docker();
    this.limits = { ...DEFAULT_LIMITS, ...options.limits };
    this.owner = options.owner ?? ownerId();
  }

  /** Fills the pool and resolves when every image has its N containers ready. */
  async start(): Promise<void> {
    await this.ensureRoot();
    for (const image of Object.keys(this.options.images)) this.refill(image);
    await this.drain();
  }

  /** Number of ready containers of an image. */
  size(image: string): number {
    return this.ready.get(image)?.length ?? 0;
  }

  /**
   * A sandbox for the job from a warm container of `image` (a cold one when none is ready); the pool
   * refills in the background. The job workspace moves into the container's slot until close().
   */
  async acquire(options: AcquireOptions): Promise<DockerSandbox> {
    if (this.closed) throw new SandboxError('closed', 'the warm pool is closed');
    const warm = this.ready.get(options.image)?.shift();
    if (options.image in this.options.images) this.refill(options.image);
    const entry = warm ?? (await this.createWarm(options.image));
    const workspace = await realpath(options.workspace);
    const giveBack = async (): Promise<void> => {
      await moveEntries(entry.slot, workspace);
      await rm(entry.slot, { recursive: true, force: true });
    };
    try {
      await moveEntries(workspace, entry.slot);
      const identity = await this.ensureIdentity();
      if (identity.sharedGroup) await openToGroup(entry.slot, identity.gid);
    } catch (error) {
      await entry.sandbox.close();
      await giveBack();
      throw new SandboxError(
        'start_failed',
        `warm pool: could not hand over the workspace: ${errorMessage(error)}`,
        {
          cause: error,
        },
      );
    }
    entry.sandbox.handOver(options.jobId, giveBack, this.options.logger);
    // Pool containers are created before the job is known; the name says which job holds one.
    void this.docker
      .getContainer(entry.sandbox.containerId)
      .rename({ name: containerName(options.jobId) })
      .catch(() => undefined);
    return entry.sandbox;
  }

  /** Waits for background refills to settle (tests, shutdown). */
  async drain(): Promise<void> {
    while (this.inflight.size > 0) await Promise.allSettled([...this.inflight]);
  }

  /** Removes every warm container and the slot directories. */
  async close(): Promise<void> {
    this.closed = true;
    await this.drain();
    const all = [...this.ready.values()].flat();
    this.ready.clear();
    await Promise.all(
      all.map(async (w) => {
        await w.sandbox.close();
        await rm(w.slot, { recursive: true, force: true });
      }),
    );
    if (this.root !== null && this.options.root === undefined)
      await rm(this.root, { recursive: true, force: true });
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
            await rm(w.slot, { recursive: true, force: true });
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
    const root = await this.ensureRoot();
    const slot = await mkdtemp(join(root, 'slot-'));
    const identity = await this.ensureIdentity();
    let container: Docker.Container | null = null;
    try {
      container = await this.docker.createContainer(
        containerSpec({
          name: `issue-agent-pool-${randomBytes(6).toString('hex')}`,
          image,
          uid: identity.uid,
          gid: identity.gid,
          hostWorkspace: slot,
          network: 'none',
          limits: this.limits,
          labels: { job: 'pool', owner: this.owner, pool: image },
          env: this.options.env,
        }),
      );
      await container.start();
    } catch (error) {
      await container?.remove({ force: true, v: true }).catch(() => undefined);
      await rm(slot, { recursive: true, force: true });
      throw new SandboxError('start_failed', `warm pool: ${errorMessage(error)}`, { cause: error });
    }
    try {
      const sandbox = await DockerSandbox.adopt({
        docker: this.docker,
        container,
        image,
        jobId: 'pool',
        hostWorkspace: slot,
        identity,
        limits: this.limits,
        network: 'none',
        captureBytes: this.options.captureBytes,
        logger: this.options.logger,
      });
      return { sandbox, slot };
    } catch (error) {
      // adopt() removed the container.
      await rm(slot, { recursive: true, force: true });
      throw error;
    }
  }

  private async ensureRoot(): Promise<string> {
    if (this.root === null) {
      if (this.options.root !== undefined) {
        await mkdir(this.options.root, { recursive: true });
        this.root = await realpath(this.options.root);
      } else {
        this.root = await mkdtemp(join(tmpdir(), 'issue-agent-pool-'));
      }
    }
    return this.root;
  }

  private async ensureIdentity(): Promise<ContainerIdentity> {
    this.identity ??= await prepareWorkspaceOwnership(await this.ensureRoot());
    return this.identity;
  }
}

/** Moves every entry of `from` into `to` (renames; a copy would lose the point of the pool). */
async function moveEntries(from: string, to: string): Promise<void> {
  for (const name of await readdir(from)) await rename(join(from, name), join(to, name));
}
