import { PassThrough, type Readable } from 'node:stream';
import type Docker from 'dockerode';
import { SandboxCancelledError, SandboxError } from '../sandbox.js';

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
  /**
   * Piped to the command's stdin, which is closed when it ends. The command must print one byte
   * first (e.g. `printf R; exec tar -x`): input is sent only once that byte arrived, because the
   * engine may not have attached the process's stdin yet when the exec starts, and input (or its
   * end) sent before that is lost. The byte is not part of the returned stdout.
   */
  readonly input?: Readable | undefined;
  /**
   * Aborting drops the exec at once and throws SandboxCancelledError; its process is left to the
   * container's removal, as on timeout.
   */
  readonly signal?: AbortSignal | undefined;
}

/**
 * Runs one helper command in a running container through the exec API and collects its output.
 * Used for the out-of-band operations (copying the repository in, killing a command's process tree,
 * reading the cgroup's counters), never for the agent's commands, which go through the persistent
 * shell.
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
  const cancel = (): void => {
    abort.abort();
  };
  const cancelled = (): boolean => options.signal?.aborted === true;
  if (cancelled()) cancel();
  options.signal?.addEventListener('abort', cancel, { once: true });
  try {
    const exec = await container.exec({
      Cmd: [...cmd],
      AttachStdin: options.input !== undefined,
      AttachStdout: true,
      AttachStderr: true,
      Tty: false,
      ...(options.user === undefined ? {} : { User: options.user }),
    });
    const input = options.input;
    const stream = await exec.start({
      hijack: true,
      stdin: input !== undefined,
      abortSignal: abort.signal,
    });
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    const out = new PassThrough();
    const err = new PassThrough();
    let waitingForReady = input !== undefined;
    out.on('data', (c: Buffer) => {
      if (waitingForReady && input !== undefined && c.length > 0) {
        waitingForReady = false;
        // Ending the write side half-closes the hijacked connection: the engine closes the
        // command's stdin and keeps sending its output.
        input.pipe(stream);
        input.once('error', () => stream.end());
        c = c.subarray(1);
      }
      stdout.push(c);
    });
    err.on('data', (c: Buffer) => stderr.push(c));
    docker.modem.demuxStream(stream, out, err);
    await new Promise<void>((resolve, reject) => {
      const onAbort = (): void => {
        stream.destroy();
        reject(
          cancelled()
            ? new SandboxCancelledError(options.signal?.reason)
            : new SandboxError('shell_died', `helper exec ${cmd[0] ?? ''} timed out after ${timeoutMs} ms`),
        );
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
  } catch (error) {
    // The engine's answer to an aborted request (create, start, inspect) says nothing more.
    if (cancelled()) throw new SandboxCancelledError(options.signal?.reason);
    throw error;
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', cancel);
  }
}
