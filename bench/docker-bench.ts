import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import { runOneOff } from '../src/sandbox/docker/container-exec.js';
import { DockerSandbox } from '../src/sandbox/docker/docker-sandbox.js';
import { WarmPool } from '../src/sandbox/docker/warm-pool.js';

const execFileAsync = promisify(execFile);

export interface DockerBenchOptions {
  readonly image?: string;
  /** Commands measured per method. Default 50. */
  readonly commands?: number;
  /** Sandbox starts measured per method. Default 8. */
  readonly starts?: number;
  readonly docker?: Docker;
}

export type DockerBenchResult = {
  /** Median ms of `true` through the persistent shell. */
  shellCommandMs: number;
  /** Median ms of `true` as one `docker exec` (API) per command, same container. */
  execPerCommandMs: number;
  /** execPerCommandMs / shellCommandMs (target ≥ 20). */
  shellVsExecRatio: number;
  /** Median ms of `docker exec CONTAINER true` through the CLI, for reference. */
  cliExecPerCommandMs: number;
  /** Median ms: create + start + shell ready, hardened. */
  coldReadyMs: number;
  /** Median ms of `docker run --rm IMAGE true` (CLI). */
  plainRunMs: number;
  /** coldReadyMs / plainRunMs (target ≤ 1.2). */
  coldVsPlainRatio: number;
  /** Median ms of a warm-pool acquire (shell ready). */
  warmAcquireMs: number;
  /** warmAcquireMs / coldReadyMs (target ≤ 0.1). */
  warmVsColdRatio: number;
};

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[mid] ?? 0) : ((s[mid - 1] ?? 0) + (s[mid] ?? 0)) / 2;
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

/** Measures the Docker sandbox in one run (see issue 3, Performance). Needs the engine and images. */
export async function runDockerBench(options: DockerBenchOptions = {}): Promise<DockerBenchResult> {
  const docker = options.docker ?? new Docker();
  const image = options.image ?? 'issue-agent/base:latest';
  const n = options.commands ?? 50;
  const starts = options.starts ?? 8;
  const scratch = await mkdtemp(join(tmpdir(), 'ia-docker-bench-'));
  const workspace = async (): Promise<string> => mkdtemp(join(scratch, 'ws-'));
  try {
    // Per-command overhead, same container.
    const sandbox = await DockerSandbox.create({
      docker,
      workspace: await workspace(),
      jobId: 'bench',
      image,
    });
    const shell: number[] = [];
    const exec: number[] = [];
    const cli: number[] = [];
    try {
      const container = docker.getContainer(sandbox.containerId);
      for (let i = 0; i < 3; i++) await sandbox.exec('true', { timeoutMs: 10_000 });
      for (let i = 0; i < n; i++) {
        shell.push(await timed(() => sandbox.exec('true', { timeoutMs: 10_000 })));
        exec.push(await timed(() => runOneOff(docker, container, ['true'], { user: sandbox.user })));
        if (i < Math.min(n, 20))
          cli.push(await timed(() => execFileAsync('docker', ['exec', sandbox.containerId, 'true'])));
      }
    } finally {
      await sandbox.close();
    }

    // Ready: cold hardened sandbox vs plain docker run vs warm pool.
    const cold: number[] = [];
    const plain: number[] = [];
    const warm: number[] = [];
    await execFileAsync('docker', ['run', '--rm', '--network', 'none', image, 'true']);
    for (let i = 0; i < starts; i++) {
      const ws = await workspace();
      let s: DockerSandbox | null = null;
      cold.push(
        await timed(async () => {
          s = await DockerSandbox.create({
            docker,
            workspace: ws,
            jobId: `bench-cold-${i}`,
            image,
          });
        }),
      );
      await (s as DockerSandbox | null)?.close();
      plain.push(
        await timed(() => execFileAsync('docker', ['run', '--rm', '--network', 'none', image, 'true'])),
      );
    }
    const pool = new WarmPool({ docker, images: { [image]: 2 } });
    try {
      await pool.start();
      for (let i = 0; i < starts; i++) {
        await pool.drain();
        const ws = await workspace();
        let s: DockerSandbox | null = null;
        warm.push(
          await timed(async () => {
            s = await pool.acquire({ workspace: ws, jobId: `bench-warm-${i}`, image });
          }),
        );
        await (s as DockerSandbox | null)?.close();
      }
    } finally {
      await pool.close();
    }

    const shellCommandMs = median(shell);
    const execPerCommandMs = median(exec);
    const coldReadyMs = median(cold);
    const plainRunMs = median(plain);
    const warmAcquireMs = median(warm);
    return {
      shellCommandMs,
      execPerCommandMs,
      shellVsExecRatio: execPerCommandMs / shellCommandMs,
      cliExecPerCommandMs: median(cli),
      coldReadyMs,
      plainRunMs,
      coldVsPlainRatio: coldReadyMs / plainRunMs,
      warmAcquireMs,
      warmVsColdRatio: warmAcquireMs / coldReadyMs,
    };
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}
