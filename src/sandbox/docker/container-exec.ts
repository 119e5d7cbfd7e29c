import { PassThrough } from 'node:stream';
import type Docker from 'dockerode';
import { SandboxError } from '../sandbox.js';

export interface OneOffResult {
  readonly exitCode: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface OneOffOptions {
  /** User to run as inside the container (`uid:gid`); the container's user when absent. */
  readonly user?: string | undefined;
  /** Bound on the whole exec (create, start, output, inspect). */
  readonly timeoutMs?: number | undefined;
}

/**
 * Runs one short helper command in a running container through the exec API and collects its
 * output. Used for the rare out-of-band operations (killing a command's process tree, reading the
 * cgroup's OOM counter), never for the agent's commands, which go through the persistent shell.
 */
export async function runOneOff(
  docker: Docker,
  container: Docker.Container,
  cmd: readonly string[],
  options: OneOffOptions = {},
): Promise<OneOffResult> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const abort = new AbortController();
  const timer = setTimeout(() => {
    abort.abort();
  }, timeoutMs);
  try {
    const exec = await container.exec({
      Cmd: [...cmd],
      AttachStdin: false,
      AttachStdout: true,
      AttachStderr: true,
      Tty: false,
      ...(options.user === undefined ? {} : { User: options.user }),
    });
    const stream = await exec.start({ hijack: true, stdin: false, abortSignal: abort.signal });
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    const out = new PassThrough();
    const err = new PassThrough();
    out.on('data', (c: Buffer) => stdout.push(c));
    err.on('data', (c: Buffer) => stderr.push(c));
    docker.modem.demuxStream(stream, out, err);
    await new Promise<void>((resolve, reject) => {
      const onAbort = (): void => {
        stream.destroy();
        reject(new SandboxError('shell_died', `helper exec ${cmd[0] ?? ''} timed out after ${timeoutMs} ms`));
      };
      if (abort.signal.aborted) onAbort();
      abort.signal.addEventListener('abort', onAbort, { once: true });
      stream.once('end', resolve);
      stream.once('close', resolve);
      stream.once('error', reject);
    });
    const info = await exec.inspect({ abortSignal: abort.signal });
    return {
      exitCode: info.ExitCode,
      stdout: Buffer.concat(stdout).toString('utf8'),
      stderr: Buffer.concat(stderr).toString('utf8'),
    };
  } finally {
    clearTimeout(timer);
  }
}
