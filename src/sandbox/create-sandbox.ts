import type { Sandbox } from './sandbox.js';
import { DEFAULT_LIMITS } from './docker/container-spec.js';
import { LocalSandbox } from './local/local-sandbox.js';

export type SandboxKind = 'local' | 'docker';

export interface CreateSandboxOptions {
  readonly kind: SandboxKind;
  readonly workspace: string;
  /** PATH for a local sandbox. */
  readonly path: string;
  /** A label for the job (container labels, logs). */
  readonly jobId: string;
  /** For `local`: run in namespaces with these host paths hidden (see LocalSandboxOptions.isolate). */
  readonly isolate?: { readonly hide: readonly string[] };
  /** For `docker`: sizes beside the defaults (workspace tmpfs, memory). */
  readonly limits?: { readonly workspaceBytes?: number; readonly memoryBytes?: number };
}

/**
 * A bare sandbox of one of the two implementations, with no environment and no setup phase: for the
 * benchmarks and the tests that measure a sandbox itself. The entry points never call this: they
 * choose a backend from the table in backends.ts, which provisions a ready sandbox. Docker is
 * loaded only when asked for.
 */
export async function createSandbox(options: CreateSandboxOptions): Promise<Sandbox> {
  if (options.kind === 'local')
    return LocalSandbox.create({
      workspace: options.workspace,
      path: options.path,
      // An isolated sandbox gets the same workspace quota as a container.
      ...(options.isolate === undefined
        ? {}
        : {
            isolate: {
              ...options.isolate,
              workspaceBytes: options.limits?.workspaceBytes ?? DEFAULT_LIMITS.workspaceBytes,
            },
          }),
    });
  const { DockerSandbox } = await import('./docker/docker-sandbox.js');
  return DockerSandbox.create({
    workspace: options.workspace,
    jobId: options.jobId,
    ...(options.limits === undefined ? {} : { limits: options.limits }),
  });
}
