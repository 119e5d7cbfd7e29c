import { prepareLocalEnvironment } from '../../environment/prepare-local.js';
import {
  provisioned,
  type BackendRequest,
  type ProvisionedSandbox,
  type SandboxBackend,
} from '../backend.js';
import { DEFAULT_LIMITS } from '../docker/container-spec.js';
import { LocalSandbox } from './local-sandbox.js';

/**
 * The isolated local sandbox: a shell in namespaces on this host (no network, no host processes,
 * the request's host paths hidden, a workspace quota like a container's), its setup phase inside
 * the same namespaces through the egress proxy (see environment/prepare-local.ts).
 */
export const localBackend: SandboxBackend = {
  kind: 'local',
  isolated: true,
  hostDiskSealed: false,
  checksOutInside: false,
  needsHostSupport: true,
  async provision(request: BackendRequest): Promise<ProvisionedSandbox> {
    const prepared = await prepareLocalEnvironment({
      workspace: request.workspace,
      plan: await request.plan(),
      settings: request.settings,
      path: request.path,
      isolate: {
        hide: request.hide,
        mask: request.mask,
        workspaceBytes: request.limits.workspaceBytes ?? DEFAULT_LIMITS.workspaceBytes,
      },
      lazyAgentShell: request.lazyAgentShell,
      signal: request.signal,
      scrub: request.scrub,
      logger: request.logger,
    });
    return provisioned(prepared);
  },
};

/**
 * A plain child process of the caller, in the workspace: it can read everything the caller can,
 * the network included. Only for trusted work; it has no setup phase and reads no plan.
 */
export const unconfinedBackend: SandboxBackend = {
  kind: 'unconfined',
  isolated: false,
  hostDiskSealed: false,
  checksOutInside: false,
  needsHostSupport: false,
  async provision(request: BackendRequest): Promise<ProvisionedSandbox> {
    const sandbox = await LocalSandbox.create({ workspace: request.workspace, path: request.path });
    return { sandbox, environment: null, close: () => sandbox.close() };
  },
};
