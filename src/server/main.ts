import { existsSync } from 'node:fs';
import { pino } from 'pino';
import { readServerEnv } from '../config/app-env.js';
import { openQueues, redisClient } from '../queue/queues.js';
import { serverOptionsFromEnv, startAgentServer } from './server.js';

/**
 * `npm run server`: the run server on its own (the App serves it too, on its port). Reads the same
 * settings as the App; without the App's credentials it shows runs but cannot start them.
 */
async function main(): Promise<void> {
  if (existsSync('.env')) process.loadEnvFile('.env');
  const env = readServerEnv();
  const logger = pino({ level: env.logLevel, base: { service: 'issue-agent-server' } });
  const settings = {
    redisUrl: env.redisUrl,
    prefix: env.queuePrefix,
    jobAttempts: env.app?.jobAttempts ?? 3,
    retryBackoffMs: env.app?.retryBackoffMs ?? 10_000,
  };
  const queues = openQueues(settings);
  const redis = redisClient(env.redisUrl, 'issue-agent-server');
  redis.on('error', (error) => {
    logger.warn({ err: error.message }, 'redis');
  });
  const app = env.app;
  const { serverSecrets, ...fromEnv } = serverOptionsFromEnv(env);
  const secrets = [...serverSecrets, ...(app === null ? [] : [app.privateKey, app.webhookSecret])];
  const running = await startAgentServer({
    port: env.port,
    host: env.host,
    ...fromEnv,
    app: app === null ? null : { appId: app.appId, privateKey: app.privateKey, apiUrl: env.githubApiUrl },
    queues,
    redis,
    settings,
    secrets,
    logger,
  });
  logger.info(
    {
      url: running.url,
      publicUrl: env.publicUrl,
      canStartRuns: app !== null,
      githubSignIn: env.githubClientId !== null,
    },
    'issue-agent run server listening',
  );
  const stop = async (signal: string): Promise<void> => {
    logger.info({ signal }, 'shutting down');
    await running.close();
    await queues.close();
    redis.disconnect();
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
}

main().catch((error: unknown) => {
  process.stderr.write(`issue-agent server: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
