/**
 * The real run server on its own, over a work folder of trajectories, without Redis or the App: what
 * the run-view benchmark and the rendering tests need. Signed in with the admin token.
 */
import { startAgentServer } from '../../src/server/server.js';
import { ADMIN_TOKEN, serverOptions } from '../server/helpers.js';

export { ADMIN_TOKEN };

export interface StandaloneServer {
  readonly url: string;
  close(): Promise<void>;
}

export async function startStandaloneServer(
  workDir: string,
  webAssetsDir: string,
): Promise<StandaloneServer> {
  const running = await startAgentServer(
    serverOptions(workDir, {
      github: {
        apiUrl: 'http://127.0.0.1:9',
        webUrl: 'http://127.0.0.1:9',
        // Configured, so the sign-in screen offers GitHub (the flow itself is tested in test/server).
        clientId: 'Iv1.standalone0000',
        clientSecret: 'standalone-client-secret',
      },
      webAssetsDir,
      pollMs: 200,
    }),
  );
  return { url: running.url, close: () => running.close() };
}
