/**
 * Runs the GitHub simulator as a process:
 *   node --import tsx test/support/github-sim/main.ts --port <p> [--webhook-target <url>]
 *        [--repo owner/name=<dir>]... [--token-ttl <seconds>]
 * Prints `listening on <url>` once it accepts requests (`--port 0` picks a free port), then one
 * `key: value` line each for the app id, the installation id, the private key file (mode 0600, in a
 * temp dir removed at exit) and the webhook secret; exits 0 after closing on SIGINT or SIGTERM.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { startGitHubSimulator } from './server.js';
import type { GitHubSimulatorOptions } from './types.js';

const USAGE =
  'usage: main.ts --port <port> [--webhook-target <url>] [--repo owner/name=<dir>]... [--token-ttl <seconds>]';

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      port: { type: 'string', default: '0' },
      'webhook-target': { type: 'string' },
      repo: { type: 'string', multiple: true, default: [] },
      'token-ttl': { type: 'string' },
    },
    strict: true,
  });
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new Error(`--port: not a port: ${values.port}`);
  const repos = values.repo.map((spec) => {
    const match = /^([\w.-]+)\/([\w.-]+)=(.+)$/.exec(spec);
    if (match === null) throw new Error(`--repo: expected owner/name=<dir>, got ${spec}`);
    const [, owner = '', name = '', dir = ''] = match;
    return { owner, name, sourceDir: resolve(dir) };
  });
  const options: GitHubSimulatorOptions = { port };
  if (values['webhook-target'] !== undefined) options.webhookTarget = values['webhook-target'];
  if (values['token-ttl'] !== undefined) {
    const ttl = Number(values['token-ttl']);
    if (!Number.isInteger(ttl) || ttl <= 0)
      throw new Error(`--token-ttl: not a positive integer: ${values['token-ttl']}`);
    options.tokenTtlSeconds = ttl;
  }

  const simulator = await startGitHubSimulator(options);
  const keyDir = await mkdtemp(join(tmpdir(), 'github-sim-key-'));
  const keyFile = join(keyDir, `${simulator.app.slug}.private-key.pem`);
  try {
    await writeFile(keyFile, simulator.app.privateKeyPem, { mode: 0o600 });
    for (const repo of repos) await simulator.createRepo(repo);
  } catch (error) {
    await simulator.close();
    await rm(keyDir, { recursive: true, force: true });
    throw error;
  }

  const stop = (): void => {
    Promise.all([simulator.close(), rm(keyDir, { recursive: true, force: true })]).then(
      () => process.exit(0),
      (error: unknown) => {
        console.error(error);
        process.exit(1);
      },
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  console.log(`listening on ${simulator.url}`);
  console.log(`app id: ${simulator.app.id}`);
  console.log(`installation id: ${simulator.installationId}`);
  console.log(`private key: ${keyFile}`);
  console.log(`webhook secret: ${simulator.app.webhookSecret}`);
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  console.error(USAGE);
  process.exit(2);
});
