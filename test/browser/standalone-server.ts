/**
 * The real run server on its own, over a work folder of trajectories, without Redis or the App: what
 * the run-view benchmark and the rendering tests need. Signed in with the admin token.
 */
import { pino } from 'pino';
import { startAgentServer } from '../../src/server/server.js';

export const ADMIN_TOKEN = 'browser-test-admin-token-0123456789';

export interface StandaloneServer {
  readonly url: string;
  close(): Promise<void>;
}

export async function startStandaloneServer(
  workDir: string,
  webAssetsDir: string,
): Promise<StandaloneServer> {
  const running = await startAgentServer({
    port: 0,
    host: '127.0.0.1',
    workDir,
    publicUrl: null,
    adminToken: ADMIN_TOKEN,
    sessionSecret: null,
    github: {
      apiUrl: 'http://127.0.0.1:9',
      webUrl: 'http://127.0.0.1:9',
      // Configured, so the sign-in screen offers GitHub (the flow itself is tested in test/server).
      clientId: 'Iv1.standalone0000',
      clientSecret: 'standalone-client-secret',
    },
    app: null,
    queues: null,
    redis: null,
    settings: {
      redisUrl: 'redis://127.0.0.1:9',
      prefix: 'browser-test',
      jobAttempts: 1,
      retryBackoffMs: 1000,
    },
    secrets: [ADMIN_TOKEN],
    webAssetsDir,
    logger: pino({ level: 'silent' }),
    pollMs: 200,
  });
  return { url: running.url, close: () => running.close() };
}
