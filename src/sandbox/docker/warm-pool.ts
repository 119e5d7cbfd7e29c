import { randomBytes } from 'node:crypto';
import Docker from 'dockerode';
import type { Logger } from 'pino';
import { SandboxError } from '../sandbox.js';
import { DEFAULT_LIMITS, containerSpec, type SandboxLimits } from './container-spec.js';
import { DockerSandbox, containerName } from './docker-sandbox.js';
import { AGENT_GID, AGENT_UID } from './agent-user.js';
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
}

export interface AcquireOptions {
  /** The job's copy of the repository on the host, copied into the container's workspace. */
  readonly workspace: string;
  /** The workspace holds only `.git`: check out in the container (DockerSandboxOptions.checkout). */
  readonly checkout?: boolean | undefined;
  readonly jobId: string;
  readonly image: string;
}

interface WarmContainer {
  /** Started, with its shells attached and ready, and an empty workspace. */
  readonly sandbox: DockerSandbox;
}

/**
 * Keeps N started, hardened containers per image (network `none`), so a job gets a sandbox without a
 * cold start. A warm container's workspace is an empty tmpfs; acquire() copies the job's repository
 * into it, as a cold start does.
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
  private closed = false;

  constructor(private readonly options: WarmPoolOptions) {
    this.docker = options.docker ?? new Docker();
    this.limits = { ...DEFAULT_LIMITS, ...options.limits };
    this.owner = options.owner ?? ownerId();
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
   * A sandbox for the job from a warm container of `image` (a cold one when none is ready); the pool
   * refills in the background.
   */
  async acquire(options: AcquireOptions): Promise<DockerSandbox> {
    if (this.closed) throw new SandboxError('closed', 'the warm pool is closed');
    const warm = this.ready.get(options.image)?.shift();
    if (options.image in this.options.images) this.refill(options.image);
    let entry = warm ?? (await this.createWarm(options.image));
    try {
      try {
        await entry.sandbox.copyIn(options.workspace, { checkout: options.checkout === true });
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
        await entry.sandbox.copyIn(options.workspace, { checkout: options.checkout === true });
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
    entry.sandbox.handOver(options.jobId, this.options.logger);
    // Pool containers are created before the job is known; the name says which job holds one.
    void this.docker
      .getContainer(entry.sandbox.containerId)
      .rename({ name: containerName(options.jobId) })
      .catch(() => undefined);
    return entry.sandbox;
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
    this.ready.clear();
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
          env: this.options.env,
        }),
      );
      await container.start();
    } catch (error) {
      await container?.remove({ force: true, v: true }).catch(() => undefined);
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
    });
    return { sandbox };
  }
}
