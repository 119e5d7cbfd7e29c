import Docker from 'dockerode';
import { prepareEnvironment } from '../../environment/prepare.js';
import {
  provisioned,
  type BackendRequest,
  type ProvisionedSandbox,
  type SandboxBackend,
} from '../backend.js';
import { DockerSandbox } from './docker-sandbox.js';

/**
 * The hardened container: the plan's image and runtime, its setup through the egress proxy (or a
 * cached environment, or a warm container), then a container with no network for the agent. This
 * module loads dockerode: the table in ../backends.ts imports it only when Docker is chosen.
 */
export const dockerBackend: SandboxBackend = {
  kind: 'docker',
  isolated: true,
  hostDiskSealed: true,
  checksOutInside: true,
  needsHostSupport: false,
  async provision(request: BackendRequest): Promise<ProvisionedSandbox> {
    const plan = await request.plan();
    const prepared = await prepareEnvironment({
      workspace: request.workspace,
      checkout: request.checkout,
      probe: request.probe,
      jobId: request.jobId,
      repoKey: request.repoKey,
      plan,
      settings: request.settings,
      limits: request.limits,
      // Only a tree whose setup ran as its maintainers committed it may serve other jobs.
      mayStoreCache: request.mayStoreCache && plan.trust.secrets,
      pool: request.pool,
      poolRepository: request.poolRepository,
      lazyAgentShell: request.lazyAgentShell,
      signal: request.signal,
      scrub: request.scrub,
      logger: request.logger,
    });
    return provisioned(prepared);
  },
  async removeOwned(): Promise<void> {
    await DockerSandbox.removeOwned(new Docker());
  },
};
