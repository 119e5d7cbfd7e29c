/**
 * `npm run demo`: the agent core end to end on a sample repository. Copies the node-calc fixture (a
 * real bug, failing tests) into a temp checkout, starts the model simulator with the oracle policy
 * (or uses the real model when ANTHROPIC_API_KEY is set), runs `issue-agent resolve`, prints the
 * outcome, the diff and the trajectory location, and cleans up everything but the trajectory.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { oracle, startModelSimulator, type ModelSimulator } from '../src/model-sim/index.js';
import { gitOutput, makeFixtureRepo } from '../test/support/fixture-repo.js';

const repo = makeFixtureRepo('node-calc');
const realKey = process.env.ANTHROPIC_API_KEY;
let sim: ModelSimulator | null = null;
const env: NodeJS.ProcessEnv = { ...process.env };
if (realKey === undefined || realKey === '') {
  sim = await startModelSimulator({ policy: oracle(repo.patch), apiKey: 'sk-demo' });
  env.ANTHROPIC_API_KEY = 'sk-demo';
  env.ANTHROPIC_BASE_URL = sim.url;
  console.log(`model: simulator (oracle policy) at ${sim.url}; set ANTHROPIC_API_KEY to use Claude`);
} else {
  console.log('model: Claude via the Anthropic API');
}
const out = join(mkdtempSync(join(tmpdir(), 'issue-agent-demo-')), 'trajectory');
console.log(`repository: ${repo.dir} (node-calc: average() rounds wrong, one test fails)\n`);
const task =
  'average() returns 1.66 for [1, 2, 2] instead of 1.67: it truncates instead of rounding to the nearest hundredth. Fix it.';
const code = await new Promise<number | null>((resolve) => {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'src/cli/main.ts', 'resolve', repo.dir, '--task', task, '--out', out],
    { env, stdio: 'inherit' },
  );
  child.once('close', resolve);
});
console.log('\nthe change left in the working tree:\n');
console.log(gitOutput(repo.dir, 'diff', '--stat'));
console.log(gitOutput(repo.dir, 'status', '--short'));
console.log(`read the trajectory: npx tsx src/cli/main.ts replay ${out}`);
await sim?.close();
repo.cleanup();
process.exit(code ?? 1);
