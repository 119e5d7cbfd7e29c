/**
 * `npm run demo`: the whole GitHub App pipeline on this machine. Starts (or reuses) Redis, the GitHub
 * simulator with a sample repository (node-calc: average() rounds wrong, one test fails) and an
 * issue, the App (Probot server + intake) and one worker as separate processes; labels the issue
 * with a signed webhook, waits for the pull request and prints its URL, the progress comment and
 * where the trajectory is. The model is the model simulator's oracle unless ANTHROPIC_API_KEY is set
 * (then Claude does the work). Everything it started is stopped and removed at the end; the
 * trajectory is copied out first.
 *
 * `--compose`: the same flow against compose.yaml instead of processes of this checkout: the
 * production image (App and a worker, Docker sandboxes), Redis and PostgreSQL as containers on the
 * host network, built offline by scripts/build-images.sh and scripts/build-app-image.sh. The run is
 * then in PostgreSQL: the demo prints its steps from the run server's API.
 */
import { cpSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { makeFixtureRepo } from '../test/support/fixture-repo.js';
import { startGitHubSimulator } from '../test/support/github-sim/index.js';
import { oracle, startModelSimulator } from '../src/model-sim/index.js';
import { composeMissing, startComposeStack } from '../test/support/compose.js';
import { startPipeline } from '../test/support/pipeline.js';
import { haveRedis, startRedis } from '../test/support/redis-server.js';
import { describeTimeline, jobTimeline } from '../test/support/timeline.js';

const cleanups: (() => Promise<void> | void)[] = [];
const stopAll = async (): Promise<void> => {
  for (const stop of cleanups.reverse()) await stop();
};
process.once('SIGINT', () => {
  void stopAll().then(() => process.exit(130));
});

async function reachable(url: string): Promise<boolean> {
  const c = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  c.on('error', () => undefined);
  try {
    await c.connect();
    await c.ping();
    return true;
  } catch {
    return false;
  } finally {
    c.disconnect();
  }
}

async function main(): Promise<number> {
  if (process.argv.includes('--compose')) return composeDemo();
  const sandbox = process.argv.includes('--docker') ? 'docker' : 'local';
  let redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  if (await reachable(redisUrl)) {
    console.log(`redis: reusing ${redisUrl} (the demo's keys get their own prefix)`);
  } else if (haveRedis()) {
    const redis = await startRedis();
    cleanups.push(() => redis.stop());
    redisUrl = redis.url;
    console.log(`redis: started a private redis-server at ${redisUrl}`);
  } else {
    console.error(
      'redis: none reachable and redis-server is not installed (apt-get install -y redis-server)',
    );
    return 2;
  }

  const { sim, modelUrl, modelKey } = await simulators();

  const pipeline = await startPipeline({ sim, modelUrl, modelKey, redisUrl, sandbox });
  cleanups.push(() => pipeline.stop());
  console.log(`app: Probot server at ${pipeline.appUrl}, one worker (sandbox: ${sandbox})`);

  const issue = sim.createIssue('octo-org', 'calc', {
    title: 'average() rounds 1.666 down to 1.66',
    body: 'average([1, 2, 2]) returns 1.66; it should round to the nearest hundredth: 1.67.',
    author: 'maintainer',
  });
  console.log(`\nissue #${issue.number}: ${issue.title}`);
  const labelled = Date.now();
  const delivery = await sim.label('octo-org', 'calc', issue.number, 'agent', 'maintainer');
  console.log(`labelled "agent" → webhook answered ${delivery.status} in ${delivery.ms.toFixed(1)} ms`);

  const deadline = Date.now() + 15 * 60_000;
  let last = '';
  for (;;) {
    const progress = sim.comments('octo-org', 'calc', issue.number).find((c) => c.user === sim.app.botLogin);
    // The state line of the progress comment: the first one after the marker and the heading.
    const line =
      (progress?.body ?? '')
        .split('\n')
        .filter((l) => l.trim() !== '' && !l.startsWith('<!--') && l !== '**Issue Agent**')[0] ?? '';
    if (line !== '' && line !== last) {
      console.log(`  progress: ${line.replace(/\*\*/g, '')}`);
      last = line;
    }
    const pr = sim.pulls('octo-org', 'calc')[0];
    if (pr !== undefined || /failed|ended|refused/i.test(progress?.body ?? '')) break;
    if (Date.now() > deadline) {
      console.error('timed out after 15 minutes');
      return 1;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  // The progress comment's final state follows the pull request (one paced write later).
  await sim
    .waitFor(
      () =>
        /Pull request \S+ opened|ended|failed/i.test(
          sim.comments('octo-org', 'calc', issue.number).find((c) => c.user === sim.app.botLogin)?.body ?? '',
        ),
      10_000,
      'the final progress state',
    )
    .catch(() => undefined);
  if (process.env.ISSUE_AGENT_DEMO_LOGS === '1') {
    console.log(pipeline.logs());
    for (const r of sim.requests.filter((q) => q.at >= labelled)) {
      console.log(`  +${String(r.at - labelled).padStart(5)} ms ${r.method} ${r.path} ${r.status}`);
    }
  }
  const pr = sim.pulls('octo-org', 'calc')[0];
  const keep = mkdtempSync(join(tmpdir(), 'issue-agent-demo-'));
  cpSync(join(pipeline.workDir, 'work', 'jobs'), keep, { recursive: true });
  const trajectory = join(keep, readdirSync(keep)[0] ?? '', 'trajectory');
  if (pr === undefined) {
    console.log('\nno pull request; the progress comment says why:\n');
    console.log(sim.comments('octo-org', 'calc', issue.number)[0]?.body ?? '');
    console.log(`\ntrajectory: ${trajectory}`);
    return 1;
  }
  console.log(`\npull request #${pr.number}: ${sim.url.replace(/\/$/, '')}/octo-org/calc/pull/${pr.number}`);
  console.log(
    `  "${pr.title}" · ${pr.draft ? 'draft' : 'ready for review'} · branch ${pr.head.ref} @ ${pr.head.sha.slice(0, 12)}`,
  );
  console.log(`\n--- PR body (first lines) ---\n${pr.body.split('\n').slice(0, 24).join('\n')}\n...`);
  console.log(`\ntrajectory: ${trajectory}\n  read it with: npx tsx src/cli/main.ts replay ${trajectory}`);
  console.log(
    `\n${describeTimeline(jobTimeline({ labelled, requests: sim.requests, owner: 'octo-org', repo: 'calc', trajectoryDir: trajectory }))}`,
  );
  const jobId = readdirSync(keep)[0] ?? '';
  console.log(
    `\nrun view: ${pipeline.appUrl}/runs/${jobId} (sign in with the admin token ${pipeline.adminToken})`,
  );
  if (process.argv.includes('--keep')) {
    console.log('  --keep: everything stays up until Ctrl-C');
    await new Promise<void>((resolve) => {
      process.once('SIGINT', () => {
        resolve();
      });
    });
  } else {
    console.log('  (npm run demo -- --keep leaves the App up to open it in a browser)');
  }
  return 0;
}

/** The sample repository and issue in the simulator, and the model (oracle unless ANTHROPIC_API_KEY). */
async function simulators(): Promise<{
  sim: Awaited<ReturnType<typeof startGitHubSimulator>>;
  modelUrl: string;
  modelKey: string;
}> {
  const fixture = makeFixtureRepo('node-calc');
  cleanups.push(() => {
    fixture.cleanup();
  });
  const sim = await startGitHubSimulator();
  cleanups.push(() => sim.close());
  await sim.createRepo({ owner: 'octo-org', name: 'calc', sourceDir: fixture.dir });
  sim.addUser({ login: 'maintainer' });
  sim.setPermission('octo-org', 'calc', 'maintainer', 'maintain');
  console.log(`github: simulator at ${sim.url} with octo-org/calc`);
  const realKey = process.env.ANTHROPIC_API_KEY;
  if (realKey !== undefined && realKey !== '') {
    console.log('model: Claude via the Anthropic API');
    return {
      sim,
      modelUrl: process.env.ANTHROPIC_BASE_URL ?? 'https://api.anthropic.com',
      modelKey: realKey,
    };
  }
  const modelKey = 'sk-ant-demo-key-not-a-real-one';
  const model = await startModelSimulator({ policy: oracle(fixture.patch), apiKey: modelKey });
  cleanups.push(() => model.close());
  console.log(`model: simulator (oracle policy) at ${model.url}; set ANTHROPIC_API_KEY to use Claude`);
  return { sim, modelUrl: model.url, modelKey };
}

async function composeDemo(): Promise<number> {
  const missing = await composeMissing();
  if (missing !== null) {
    console.error(`compose: ${missing}`);
    return 2;
  }
  const { sim, modelUrl, modelKey } = await simulators();
  console.log('compose: starting the App, a worker, Redis and PostgreSQL (compose.yaml)…');
  const stack = await startComposeStack({ sim, modelUrl, modelKey });
  cleanups.push(() => stack.stop());
  console.log(`compose: project ${stack.project} up; the App at ${stack.appUrl}`);
  const issue = sim.createIssue('octo-org', 'calc', {
    title: 'average() rounds 1.666 down to 1.66',
    body: 'average([1, 2, 2]) returns 1.66; it should round to the nearest hundredth: 1.67.',
    author: 'maintainer',
  });
  console.log(`\nissue #${issue.number}: ${issue.title}`);
  const delivery = await sim.label('octo-org', 'calc', issue.number, 'agent', 'maintainer');
  console.log(`labelled "agent" → webhook answered ${delivery.status} in ${delivery.ms.toFixed(1)} ms`);
  const headers = { authorization: `Bearer ${stack.adminToken}` };
  const deadline = Date.now() + 10 * 60_000;
  for (;;) {
    const pr = sim.pulls('octo-org', 'calc')[0];
    const progress =
      sim.comments('octo-org', 'calc', issue.number).find((c) => c.user === sim.app.botLogin)?.body ?? '';
    if (pr !== undefined) {
      console.log(
        `\npull request #${pr.number}: "${pr.title}" · branch ${pr.head.ref} @ ${pr.head.sha.slice(0, 12)}`,
      );
      break;
    }
    if (/failed|ended|refused/i.test(progress) || Date.now() > deadline) {
      console.log(`\nno pull request; the progress comment says:\n${progress}`);
      console.log(await stack.logs());
      return 1;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  // The run as the run server reads it from PostgreSQL (the App has no job folder).
  const list = (await (await fetch(`${stack.appUrl}/api/runs`, { headers })).json()) as {
    runs: { id: string; outcome: string | null; steps: number; state: string }[];
  };
  const run = list.runs[0];
  if (run === undefined) {
    console.log('the run server lists no run');
    return 1;
  }
  console.log(
    `run ${run.id}: ${run.state}, outcome ${run.outcome ?? '-'}, ${run.steps} steps (from PostgreSQL)`,
  );
  console.log(`run view: ${stack.appUrl}/runs/${run.id} (sign in with the admin token ${stack.adminToken})`);
  if (process.argv.includes('--keep')) {
    console.log('  --keep: everything stays up until Ctrl-C');
    await new Promise<void>((resolve) => {
      process.once('SIGINT', () => {
        resolve();
      });
    });
  }
  return 0;
}

let code = 1;
try {
  code = await main();
} catch (error) {
  console.error(error instanceof Error ? (error.stack ?? error.message) : String(error));
} finally {
  await stopAll();
}
process.exit(code);
