import { execFile } from 'node:child_process';
import {
  accessSync,
  chmodSync,
  chownSync,
  constants,
  mkdirSync,
  mkdtempSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import Docker from 'dockerode';
import { setTimeout as delay } from 'node:timers/promises';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import type { GitHubSim } from './github-sim/index.js';
import { ROOT } from './pipeline.js';
import { freePort } from './redis-server.js';

const execFileAsync = promisify(execFile);

/** The images compose.yaml runs here: no registry, so Redis and PostgreSQL are ours (deploy/). */
export const COMPOSE_IMAGES = {
  app: 'issue-agent/app:latest',
  redis: 'issue-agent/redis:latest',
  postgres: 'issue-agent/postgres:latest',
} as const;

/** The production image's service user (Dockerfile): the state folder is given to it. */
const SERVICE_UID = 10001;

export interface ComposeStackOptions {
  readonly sim: GitHubSim;
  readonly modelUrl: string;
  readonly modelKey: string;
  readonly workers?: number;
}

export interface ComposeStack {
  readonly appUrl: string;
  readonly adminToken: string;
  readonly project: string;
  /** The host folder mounted at the same path in the workers (their work folder is under it). */
  readonly stateDir: string;
  /** `docker-compose logs` of every service. */
  logs(): Promise<string>;
  /**
   * How many `worker ready` lines the worker containers logged, read from the engine: a
   * `docker-compose` run costs about a CPU-second (Python), too much for a poll.
   */
  workersReady(): Promise<number>;
  /** `docker-compose` with the stack's project, file and settings. */
  compose(args: readonly string[]): Promise<string>;
  stop(): Promise<void>;
}

/** Why compose.yaml cannot run here (no docker-compose, an image not built), or null. */
export async function composeMissing(): Promise<string | null> {
  // Found on the PATH, not run: a `docker-compose` run costs about a CPU-second (Python).
  const onPath = (process.env.PATH ?? '').split(delimiter).some((dir) => {
    try {
      accessSync(join(dir, 'docker-compose'), constants.X_OK);
      return dir !== '';
    } catch {
      return false;
    }
  });
  if (!onPath) return 'docker-compose is not installed (apt-get install -y docker-compose)';
  for (const image of Object.values(COMPOSE_IMAGES)) {
    try {
      await execFileAsync('docker', ['image', 'inspect', image]);
    } catch {
      return `image ${image} is missing; run scripts/build-app-image.sh`;
    }
  }
  return null;
}

/**
 * compose.yaml as an operator runs it (`docker-compose up -d --scale worker=N`), with the
 * production image and the Debian-built Redis and PostgreSQL, pointed at the GitHub and model
 * simulators on loopback (every service uses the host network). Its settings file, ports, state
 * folder and project name are private to this stack; `stop` takes everything down, volumes too.
 */
export async function startComposeStack(options: ComposeStackOptions): Promise<ComposeStack> {
  const project = `iacompose${randomBytes(4).toString('hex')}`;
  const stateDir = mkdtempSync(join(tmpdir(), 'ia-compose-state-'));
  // The settings hold the App's key: beside the state folder, never in it (workers mount that).
  const secretsDir = mkdtempSync(join(tmpdir(), 'ia-compose-env-'));
  chmodSync(secretsDir, 0o700);
  mkdirSync(join(stateDir, 'work'));
  mkdirSync(join(stateDir, 'env-cache'));
  mkdirSync(join(stateDir, 'tmp'));
  for (const dir of ['', 'work', 'env-cache', 'tmp']) {
    const path = join(stateDir, dir);
    if (process.getuid?.() === 0) chownSync(path, SERVICE_UID, SERVICE_UID);
    // Without root the service user cannot be given the folder: anyone may write, but only the
    // owner of a file may remove or rename it (sticky), as in /tmp.
    else chmodSync(path, 0o1777);
  }
  const [appPort, redisPort, postgresPort] = [await freePort(), await freePort(), await freePort()];
  const adminToken = randomBytes(24).toString('hex');
  const envFile = join(secretsDir, 'issue-agent.env');
  const settings: Record<string, string> = {
    APP_ID: String(options.sim.app.id),
    // One line, as .env files hold it; the App reads \n back.
    PRIVATE_KEY: options.sim.app.privateKeyPem.replace(/\n/g, '\\n'),
    WEBHOOK_SECRET: options.sim.app.webhookSecret,
    ISSUE_AGENT_GITHUB_API_URL: options.sim.url,
    ANTHROPIC_API_KEY: options.modelKey,
    ANTHROPIC_BASE_URL: options.modelUrl,
    HOST: '127.0.0.1',
    PORT: String(appPort),
    ISSUE_AGENT_PUBLIC_URL: `http://127.0.0.1:${appPort}`,
    ISSUE_AGENT_ADMIN_TOKEN: adminToken,
    ISSUE_AGENT_PROGRESS_INTERVAL_MS: '0',
    ISSUE_AGENT_LOG_LEVEL: 'info',
  };
  writeFileSync(
    envFile,
    Object.entries(settings)
      .map(([k, v]) => `${k}=${v}\n`)
      .join(''),
    { mode: 0o600 },
  );
  const socket = process.env.DOCKER_HOST?.replace(/^unix:\/\//, '') ?? '/var/run/docker.sock';
  const composeEnv: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    ISSUE_AGENT_ENV_FILE: envFile,
    ISSUE_AGENT_IMAGE: COMPOSE_IMAGES.app,
    ISSUE_AGENT_REDIS_IMAGE: COMPOSE_IMAGES.redis,
    ISSUE_AGENT_POSTGRES_IMAGE: COMPOSE_IMAGES.postgres,
    ISSUE_AGENT_REDIS_PASSWORD: randomBytes(16).toString('hex'),
    ISSUE_AGENT_POSTGRES_PASSWORD: randomBytes(16).toString('hex'),
    ISSUE_AGENT_REDIS_PORT: String(redisPort),
    ISSUE_AGENT_POSTGRES_PORT: String(postgresPort),
    ISSUE_AGENT_STATE_DIR: stateDir,
    // The first health check comes one interval after the start: a short-lived stack waits less.
    ISSUE_AGENT_HEALTHCHECK_INTERVAL: '2s',
    ISSUE_AGENT_DOCKER_SOCKET: socket,
    ISSUE_AGENT_DOCKER_GID: String(statSync(socket).gid),
  };
  const compose = async (args: readonly string[]): Promise<string> => {
    const { stdout } = await execFileAsync(
      'docker-compose',
      ['--project-name', project, '--file', join(ROOT, 'compose.yaml'), '--no-ansi', ...args],
      { env: composeEnv, maxBuffer: 64 * 1024 * 1024 },
    );
    return stdout;
  };
  const logs = (): Promise<string> =>
    compose(['logs', '--no-color']).catch((error: unknown) => `(no logs: ${String(error)})`);
  const engine = new Docker();
  const workersReady = async (): Promise<number> => {
    const workers = await engine.listContainers({
      all: true,
      filters: { label: [`com.docker.compose.project=${project}`, 'com.docker.compose.service=worker'] },
    });
    let ready = 0;
    for (const w of workers) {
      const raw = await engine.getContainer(w.Id).logs({ stdout: true, stderr: true, follow: false });
      ready += demuxed(raw)
        .split('\n')
        .filter((l) => l.includes('worker ready')).length;
    }
    return ready;
  };
  const stop = async (): Promise<void> => {
    await compose(['down', '--volumes', '--timeout', '10']).catch(() => undefined);
    if (process.env.ISSUE_AGENT_KEEP_TEST_DIRS !== '1') {
      rmSync(stateDir, { recursive: true, force: true });
      rmSync(secretsDir, { recursive: true, force: true });
    }
  };
  try {
    await compose(['up', '--detach', '--scale', `worker=${options.workers ?? 1}`]);
    const appUrl = `http://127.0.0.1:${appPort}`;
    const deadline = Date.now() + 120_000;
    for (;;) {
      const health = await fetch(`${appUrl}/healthz`)
        .then((r) => r.json() as Promise<{ redis?: string }>)
        .catch(() => null);
      const workersUp = await workersReady();
      if (health?.redis === 'up' && workersUp >= (options.workers ?? 1)) break;
      if (Date.now() > deadline) throw new Error(`compose stack did not come up:\n${await logs()}`);
      await delay(500);
    }
    options.sim.setWebhookTarget(`${appUrl}/api/github/webhooks`);
    return { appUrl, adminToken, project, stateDir, logs, workersReady, compose, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** The text of a non-TTY container's log: frames of an 8-byte header (stream, size) and their bytes. */
function demuxed(raw: Buffer): string {
  const parts: Buffer[] = [];
  for (let at = 0; at + 8 <= raw.length;) {
    const size = raw.readUInt32BE(at + 4);
    parts.push(raw.subarray(at + 8, at + 8 + size));
    at += 8 + size;
  }
  return Buffer.concat(parts).toString('utf8');
}
