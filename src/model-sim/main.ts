/**
 * Runs the model simulator as a process:
 *   node --import tsx test/support/model-sim/main.ts --port <p> --policy oracle --fix <patch> [--api-key K]
 * Prints exactly `listening on <url>` once it accepts requests (`--port 0` picks a free port), and
 * exits 0 after closing on SIGINT or SIGTERM.
 */
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { oracle } from './policies/oracle.js';
import { startModelSimulator, type ModelSimulatorOptions } from './server.js';

const USAGE = 'usage: main.ts --port <port> --policy oracle --fix <patch-file> [--api-key <key>]';

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      port: { type: 'string', default: '0' },
      policy: { type: 'string', default: 'oracle' },
      fix: { type: 'string' },
      'api-key': { type: 'string' },
    },
    strict: true,
  });
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new Error(`--port: not a port: ${values.port}`);
  if (values.policy !== 'oracle') throw new Error(`--policy: unknown policy ${values.policy}; known: oracle`);
  if (values.fix === undefined) throw new Error('--fix <patch-file> is required by the oracle policy');

  const options: ModelSimulatorOptions = { policy: oracle(await readFile(values.fix, 'utf8')), port };
  if (values['api-key'] !== undefined) options.apiKey = values['api-key'];
  const simulator = await startModelSimulator(options);

  const stop = (): void => {
    simulator.close().then(
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
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  console.error(USAGE);
  process.exit(2);
});
