import type { AppEnv } from '../config/app-env.js';
import { hideAround, pathFolders } from '../sandbox/local/host-view.js';

/**
 * What the App's isolated local sandbox (ISSUE_AGENT_SANDBOX=local) keeps out of sight on the
 * worker's host, beyond what every isolated sandbox does (no host process, no network, a read-only
 * host tree, private /tmp and /run):
 *  - the work folder is masked as a whole: the job sees its own workspace and nothing else there,
 *    not other jobs' workspaces and trajectories (other installations' private code), not the
 *    clones and mirrors, not a job folder created after it started;
 *  - the worker's home and working folder (where `.env` holds the App's private key and webhook
 *    secret) are hidden, except the paths down to the work folder and the sandbox's PATH folders
 *    when they lie inside them;
 *  - the private key file (PRIVATE_KEY_PATH) and the Docker environment cache, wherever they are,
 *    and where they lead when they are symbolic links (see hideAround).
 * The rest of the host's file tree stays readable: Docker is the boundary for repositories whose
 * issues anyone can write, this is for hosts that cannot run it.
 */
export function appLocalIsolation(
  app: Pick<AppEnv, 'workDir' | 'privateKeyPath'>,
  agent: { readonly sandboxPath: string; readonly environment: { readonly cacheDir: string | null } },
  host: { readonly home: string | null; readonly cwd: string },
): { hide: string[]; mask: string[] } {
  return {
    hide: hideAround({
      roots: [host.home, host.cwd],
      // The sandbox's PATH folders stay (a toolchain under the worker's home, e.g. ~/.nvm).
      keep: [app.workDir, ...pathFolders(agent.sandboxPath)],
      extra: [
        ...(app.privateKeyPath === null ? [] : [app.privateKeyPath]),
        ...(agent.environment.cacheDir === null ? [] : [agent.environment.cacheDir]),
      ],
    }),
    mask: [app.workDir],
  };
}
