/**
 * `npm run bench -- --pipeline` (issue 17): where the time between a label and its pull request goes,
 * per stage, for the first and the second job of the same repository, on a small repository
 * (node-calc) and on a generated large one (bench/mirror-bench.ts's: 20,000 files, 2,000 commits).
 * The real App and one worker (Docker sandbox) run against the GitHub simulator and a zero-latency
 * model (the oracle policy), with Redis; the progress interval is 0. Stages come from the simulator's
 * request log and the job's trajectory (test/support/timeline.ts). One run each: read the stages,
 * not the last digit.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeFixtureRepo } from '../test/support/fixture-repo.js';
import { startGitHubSimulator } from '../test/support/github-sim/index.js';
import { oracle, startModelSimulator } from '../src/model-sim/index.js';
import { startPipeline } from '../test/support/pipeline.js';
import { startRedis } from '../test/support/redis-server.js';
import { jobTimeline, type JobTimeline } from '../test/support/timeline.js';
import { generate } from './mirror-bench.js';

const KEY = 'sk-ant-pipeline-bench-0000';

async function twoJobs(name: string, sourceDir: string, patch: string): Promise<JobTimeline[]> {
  const redis = await startRedis();
  const sim = await startGitHubSimulator();
  const model = await startModelSimulator({ policy: oracle(patch), apiKey: KEY });
  const repo = await sim.createRepo({ owner: 'bench', name, sourceDir });
  sim.addUser({ login: 'maintainer' });
  sim.setPermission('bench', name, 'maintainer', 'maintain');
  const pipeline = await startPipeline({
    sim,
    modelUrl: model.url,
    modelKey: KEY,
    redisUrl: redis.url,
    sandbox: 'docker',
    // `BENCH_WARM_POOL`: the worker's ISSUE_AGENT_WARM_POOL (warm containers, and a prepared one per
    // repository for its next job), e.g. `issue-agent/node:22=1,issue-agent/base:latest=1`.
    // `BENCH_VERIFY_FRESH=off`: the verdict's final run in the agent's container (ISSUE_AGENT_VERIFY_FRESH).
    env: {
      ...(process.env.BENCH_WARM_POOL === undefined
        ? {}
        : { ISSUE_AGENT_WARM_POOL: process.env.BENCH_WARM_POOL }),
      ...(process.env.BENCH_VERIFY_FRESH === undefined
        ? {}
        : { ISSUE_AGENT_VERIFY_FRESH: process.env.BENCH_VERIFY_FRESH }),
    },
  });
  try {
    const out: JobTimeline[] = [];
    for (const round of [1, 2]) {
      const n = sim.createIssue('bench', name, {
        title: `Change ${round}`,
        body: 'Apply the change.',
        author: 'maintainer',
      }).number;
      const labelled = Date.now();
      await sim.label('bench', name, n, 'agent', 'maintainer');
      const progress = (): string =>
        sim.comments('bench', name, n).find((c) => c.user === sim.app.botLogin)?.body ?? '';
      await sim.waitFor(
        () => /Pull request \S+ opened|Finished without|failed/.test(progress()),
        600_000,
        `job ${round} of ${name}`,
      );
      const jobs = join(pipeline.workDir, 'work', 'jobs');
      const job = readdirSync(jobs).find((j) => j.startsWith(`r${repo.id}-i${n}-`));
      if (job === undefined) throw new Error(`no job folder for ${name} #${n}: ${progress()}`);
      out.push(
        jobTimeline({
          labelled,
          requests: sim.requests,
          owner: 'bench',
          repo: name,
          trajectoryDir: join(jobs, job, 'trajectory'),
        }),
      );
      const last = out.at(-1);
      process.stderr.write(
        `pipeline bench: ${name} job ${round} done${last?.prCreated == null ? `, no pull request:\n${progress()}` : ''}\n`,
      );
    }
    return out;
  } finally {
    // `BENCH_PIPELINE_LOGS=<folder>`: every process's log kept there, to read a stage's steps.
    const keep = process.env.BENCH_PIPELINE_LOGS;
    if (keep !== undefined) writeFileSync(join(keep, `${name}.log`), pipeline.logs());
    await pipeline.stop();
    await model.close();
    await sim.close();
    await redis.stop();
  }
}

function rows(label: string, t: JobTimeline): string {
  const s = (a: number | null, b: number | null): string =>
    a === null || b === null ? '–' : `${((b - a) / 1000).toFixed(2)} s`;
  // "Agent" is its steps only: from its first event to the verdict's start (the fresh container,
  // the change applied there and the final run are the pipeline's, and counted in the last column).
  const agentEnd = t.verdictStart ?? t.lastEvent;
  return `| ${label} | ${s(t.labelled, t.commentCreated)} | ${s(t.commentCreated, t.baseState)} | ${s(t.baselineStart, t.agentStart)} | ${s(t.agentStart, agentEnd)} | ${s(t.verdictStart, t.finalRunStart)} | ${s(t.finalRunStart, t.lastEvent)} | ${s(t.lastEvent, t.prCreated)} | **${s(t.labelled, t.prCreated)}** | ${t.prCreated === null || t.agentStart === null || agentEnd === null ? '–' : `${((t.prCreated - t.labelled - (agentEnd - t.agentStart)) / 1000).toFixed(2)} s`} |`;
}

export async function pipelineBench(): Promise<void> {
  const scratch = mkdtempSync(join(tmpdir(), 'ia-pipeline-bench-'));
  try {
    const small = makeFixtureRepo('node-calc');
    const smallRuns = await twoJobs('calc', small.dir, small.patch);
    small.cleanup();
    const large = join(scratch, 'large');
    generate(large);
    // The change: one line of one file, as a patch the oracle applies.
    const file = join(large, 'src', 'd0', 'f0.js');
    execFileSync('sed', ['-i', '1s/.*/\\/\\/ file 0, changed/', file]);
    const patch = execFileSync('git', ['-C', large, 'diff'], { encoding: 'utf8' });
    execFileSync('git', ['-C', large, 'checkout', '-q', '--', '.']);
    const largeRuns = await twoJobs('large', large, patch);
    console.log(
      '\nLabel → pull request, per stage (Docker sandbox, zero-latency model, progress interval 0):\n',
    );
    console.log(
      '| job | label → queued comment (intake) | → base state (queue, clone, workspace, sandbox) | baseline | agent | verdict sandbox | final run | last event → PR | label → PR | label → PR minus agent |',
    );
    console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
    for (const [name, runs] of [
      ['small (node-calc)', smallRuns],
      ['large (20,000 files, 2,000 commits)', largeRuns],
    ] as const) {
      runs.forEach((t, i) => {
        console.log(rows(`${name}, job ${i + 1}`, t));
      });
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}
