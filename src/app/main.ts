import { startTracing } from '../telemetry/sdk.js';
import { inSpan, remoteParent } from '../telemetry/tracing.js';
import { existsSync } from 'node:fs';
import { Worker } from 'bullmq';
import { pino } from 'pino';
import { Probot, Server, run } from 'probot';
import { hasAppCredentials, readAppEnv } from '../config/app-env.js';
import { Redactor } from '../publish/redact.js';
import { createAgentServer, serverOptionsFromEnv } from '../server/server.js';
import { INTAKE_QUEUE, connectionOptions, openQueues, redisClient } from '../queue/queues.js';
import { awaitsAnswer } from './question.js';
import { issueKey } from '../queue/ids.js';
import { issueAgentApp, probotWithBodyLimit } from './app.js';
import { ConfigCache, processTrigger, type Octokit } from './intake.js';
import { triggerSchema, type Trigger } from '../queue/trigger.js';

/**
 * `npm start`: the App the Probot way. Without APP_ID and a private key, Probot's setup page
 * registers a new App from app.yml and writes the credentials to .env; with them, the webhook server
 * and the intake processor run in this process (fix jobs run in workers/, a separate process).
 */
async function main(): Promise<void> {
  if (existsSync('.env')) process.loadEnvFile('.env');
  if (!hasAppCredentials()) {
    await run(() => undefined);
    return;
  }
  const env = readAppEnv();
  const logger = pino({ level: env.logLevel, base: { service: 'issue-agent-app' } });
  const tracing = await startTracing('issue-agent-app');
  if (tracing !== null) logger.info('OpenTelemetry traces go to the OTLP endpoint');
  const settings = {
    redisUrl: env.redisUrl,
    prefix: env.queuePrefix,
    jobAttempts: env.jobAttempts,
    retryBackoffMs: env.retryBackoffMs,
  };
  const queues = openQueues(settings);
  const redis = redisClient(env.redisUrl, 'issue-agent-app');
  let probot: Probot | null = null;
  const server = new Server({
    // Bodies on the webhook route are bounded before Probot buffers them to check the signature.
    Probot: probotWithBodyLimit(
      Probot.defaults({
        appId: env.appId,
        privateKey: env.privateKey,
        secret: env.webhookSecret,
        baseUrl: env.githubApiUrl,
        log: logger.child({ name: 'probot' }),
      }),
      { path: env.webhookPath, maxBytes: env.webhookMaxBytes, logger: logger.child({ name: 'webhooks' }) },
    ),
    host: env.host,
    port: env.port,
    webhookPath: env.webhookPath,
    log: logger.child({ name: 'server' }),
  });
  await server.load(
    issueAgentApp({
      appId: env.appId,
      intake: queues.intake,
      logger,
      awaitsAnswer: (repoId, issue) => awaitsAnswer(redis, env.queuePrefix, issueKey(repoId, issue)),
      onProbot: (p) => {
        probot = p;
      },
    }),
  );
  const octokit = async (installationId: number): Promise<Octokit> => {
    if (probot === null) throw new Error('the Probot app is not loaded');
    return probot.auth(installationId);
  };
  let botId: number | null = null;
  const { serverSecrets, ...fromEnv } = serverOptionsFromEnv(env);
  const secrets = [env.privateKey, env.webhookSecret, ...serverSecrets];
  const redactor = new Redactor(secrets);
  // The run server (API, streams, sign-in, metrics, bull-board, browser client) on the same port.
  const runServer = createAgentServer({
    ...fromEnv,
    app: { appId: env.appId, privateKey: env.privateKey, apiUrl: env.githubApiUrl },
    queues,
    redis,
    settings,
    secrets,
    logger: logger.child({ name: 'run-server' }),
  });
  server.addHandler(runServer.handler);
  const configCache = new ConfigCache(env.configCacheMs);
  const intakeWorker = new Worker<Trigger>(
    INTAKE_QUEUE,
    async (job) =>
      inSpan(
        'intake',
        {
          'github.delivery': job.data.deliveryId,
          'github.repository': `${job.data.repo.owner}/${job.data.repo.name}`,
          'issue_agent.intake_attempt': job.attemptsMade + 1,
        },
        () =>
          processTrigger(
            triggerSchema.parse(job.data),
            {
              octokit,
              botUserId: async () => {
                if (botId !== null) return botId;
                if (probot === null) throw new Error('the Probot app is not loaded');
                const appOctokit = await probot.auth();
                const { data: app } = await appOctokit.rest.apps.getAuthenticated();
                const installation = await octokit(job.data.installationId);
                const { data: user } = await installation.rest.users.getByUsername({
                  username: `${app?.slug ?? ''}[bot]`,
                });
                botId = user.id;
                return botId;
              },
              fixQueue: queues.fix,
              redis,
              settings,
              defaults: { label: env.defaultLabel, handle: env.defaultHandle },
              redactor,
              logger,
              configCache,
            },
            job.attemptsMade,
          ),
        remoteParent(job.data.trace),
      ),
    {
      connection: connectionOptions(env.redisUrl, 'issue-agent-intake-worker'),
      prefix: env.queuePrefix,
      concurrency: env.intakeConcurrency,
    },
  );
  intakeWorker.on('failed', (job, error) => {
    logger.error({ job: job?.id, err: error }, 'intake failed');
  });
  intakeWorker.on('error', (error) => {
    logger.error({ err: error }, 'intake worker error');
  });
  await server.start();
  runServer.start();
  logger.info(
    { port: server.port, host: server.host, webhookPath: env.webhookPath },
    'issue-agent App listening',
  );
  const stop = async (signal: string): Promise<void> => {
    logger.info({ signal }, 'shutting down');
    runServer.close();
    await server.stop();
    await intakeWorker.close();
    await queues.close();
    redis.disconnect();
    await tracing?.shutdown();
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
}

main().catch((error: unknown) => {
  console.error(`issue-agent app: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = 1;
});
