/**
 * `npm run bench -- --throughput` (issue 13): jobs per minute through the whole App with 8 worker
 * processes (concurrency 1 each) sharing this machine's cores, the run store on files (one host)
 * against PostgreSQL. The model answers at once (bash `true`, one file written, finish); the repositories' test command is
 * `true`; the sandbox is the plain child process, so what is left is the pipeline itself: webhook,
 * intake, queue, clone, event log and job record, verification, push, pull request, progress
 * comments. Store runs alternate (file, PostgreSQL, file, PostgreSQL, …) and the medians are
 * compared. Worker memory is sampled from /proc while the jobs run (workers run under tsx here,
 * which adds its compiler to each process: the production image's compiled workers are smaller).
 */
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { reply, startModelSimulator, type MessagesRequest } from '../src/model-sim/index.js';
import { startGitHubSimulator } from '../test/support/github-sim/index.js';
import { startPipeline } from '../test/support/pipeline.js';
import { startPostgres } from '../test/support/postgres-server.js';
import { startRedis } from '../test/support/redis-server.js';

const KEY = 'sk-ant-throughput-bench-0000';
const WORKERS = 8;
const REPOS = 4;

function arg(name: string, fallback: number): number {
  const at = process.argv.indexOf(name);
  const value = at === -1 ? NaN : Number(process.argv[at + 1]);
  return Number.isFinite(value) && value > 0 ? value : fallback;
}

/** bash `true`, then one new file, then finish: three answered calls per job, no thinking time. */
function instantPolicy(request: MessagesRequest): ReturnType<typeof reply> {
  const turns = request.messages.filter((m) => m.role === 'assistant').length;
  if (turns === 0) return reply().tool('bash', { command: 'true' });
  if (turns === 1) {
    const first = request.messages[0];
    const text = typeof first?.content === 'string' ? first.content : JSON.stringify(first?.content ?? '');
    const n = /Change (\d+)/.exec(text)?.[1] ?? '0';
    return reply().tool('editor', {
      command: 'create',
      path: `changes/${n}.txt`,
      file_text: `change ${n}\n`,
    });
  }
  return reply().tool('finish', { summary: 'Wrote the change.' });
}

function sourceRepo(dir: string): void {
  mkdirSync(join(dir, '.github'), { recursive: true });
  writeFileSync(join(dir, 'README.md'), '# bench\n');
  writeFileSync(join(dir, '.github', 'issue-agent.yml'), "testCommand: 'true'\ntriage: off\n");
  const git = (...args: string[]): void => {
    execFileSync('git', ['-c', 'user.name=b', '-c', 'user.email=b@e', ...args], { cwd: dir });
  };
  git('init', '-q', '-b', 'main');
  git('add', '-A');
  git('commit', '-qm', 'base');
}

function rssKiB(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m === null ? 0 : Number(m[1]);
  } catch {
    return 0;
  }
}

/** CPU seconds a process and its waited-for children (git, tar, the tests) used so far. */
function cpuSeconds(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat
      .slice(stat.lastIndexOf(')') + 2)
      .split(' ')
      .map(Number);
    // utime, stime, cutime, cstime: fields 14–17, so 11–14 after the command name.
    return ((f[11] ?? 0) + (f[12] ?? 0) + (f[13] ?? 0) + (f[14] ?? 0)) / 100;
  } catch {
    return 0;
  }
}

interface Run {
  readonly jobsPerMinute: number;
  /** CPU seconds per job of the workers (with their git and test children) and of the App. */
  readonly workerCpuPerJob: number;
  readonly appCpuPerJob: number;
  readonly seconds: number;
  /** Per worker process: RSS when idle (before the first label), and the highest seen. */
  readonly idleRssMiB: number;
  readonly peakRssMiB: number;
}

async function once(store: 'file' | 'postgres', jobs: number): Promise<Run> {
  // Whatever was started is stopped, also when a later start fails.
  const stops: (() => Promise<void> | void)[] = [];
  try {
    const redis = await startRedis();
    stops.push(() => redis.stop());
    const pg = store === 'postgres' ? await startPostgres() : null;
    if (pg !== null) stops.push(() => pg.stop());
    const sim = await startGitHubSimulator();
    stops.push(() => sim.close());
    const model = await startModelSimulator({ policy: instantPolicy, apiKey: KEY });
    stops.push(() => model.close());
    const src = mkdtempSync(join(tmpdir(), 'ia-throughput-src-'));
    stops.push(() => {
      rmSync(src, { recursive: true, force: true });
    });
    sourceRepo(src);
    for (let r = 0; r < REPOS; r++) await sim.createRepo({ owner: 'bench', name: `r${r}`, sourceDir: src });
    sim.addUser({ login: 'maintainer' });
    for (let r = 0; r < REPOS; r++) sim.setPermission('bench', `r${r}`, 'maintainer', 'maintain');
    const pipeline = await startPipeline({
      sim,
      modelUrl: model.url,
      modelKey: KEY,
      redisUrl: redis.url,
      workers: WORKERS,
      env: {
        ISSUE_AGENT_WORKER_CONCURRENCY: '1',
        ...(pg === null ? {} : { ISSUE_AGENT_STORE_URL: pg.url }),
      },
    });
    stops.push(() => pipeline.stop());
    const pids = pipeline.workers.map((w) => w.child.pid);
    const idle = pids.map(rssKiB);
    const cpuBefore = pids.reduce<number>((a, pid) => a + cpuSeconds(pid), 0);
    const appCpuBefore = cpuSeconds(pipeline.app.child.pid);
    const peak = [...idle];
    const sampler = setInterval(() => {
      pids.forEach((pid, i) => {
        peak[i] = Math.max(peak[i] ?? 0, rssKiB(pid));
      });
    }, 100);
    stops.push(() => {
      clearInterval(sampler);
    });
    const started = performance.now();
    for (let i = 0; i < jobs; i++) {
      const repo = `r${i % REPOS}`;
      const n = sim.createIssue('bench', repo, {
        title: `Change ${i}`,
        body: 'Apply the change.',
        author: 'maintainer',
      }).number;
      await sim.label('bench', repo, n, 'agent', 'maintainer');
    }
    const pulls = (): number =>
      Array.from({ length: REPOS }, (_, r) => sim.pulls('bench', `r${r}`).length).reduce((a, b) => a + b, 0);
    await sim.waitFor(
      () => pulls() >= jobs,
      30 * 60_000,
      () => `${jobs} pull requests (${pulls()} so far)`,
    );
    const seconds = (performance.now() - started) / 1000;
    const workerCpu = pids.reduce<number>((a, pid) => a + cpuSeconds(pid), 0) - cpuBefore;
    const appCpu = cpuSeconds(pipeline.app.child.pid) - appCpuBefore;
    const mib = (k: number[]): number => k.reduce((a, b) => a + b, 0) / k.length / 1024;
    return {
      jobsPerMinute: (jobs / seconds) * 60,
      workerCpuPerJob: workerCpu / jobs,
      appCpuPerJob: appCpu / jobs,
      seconds,
      idleRssMiB: mib(idle),
      peakRssMiB: mib(peak),
    };
  } finally {
    for (const stop of stops.reverse()) await stop();
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[mid] ?? NaN) : ((s[mid - 1] ?? NaN) + (s[mid] ?? NaN)) / 2;
}

export async function throughputBench(): Promise<void> {
  const jobs = arg('--jobs', 48);
  const rounds = arg('--rounds', 3);
  const runs: Record<'file' | 'postgres', Run[]> = { file: [], postgres: [] };
  for (let round = 1; round <= rounds; round++) {
    for (const store of ['file', 'postgres'] as const) {
      const r = await once(store, jobs);
      runs[store].push(r);
      process.stderr.write(
        `throughput bench: round ${round}, ${store}: ${jobs} jobs in ${r.seconds.toFixed(1)} s, ${r.jobsPerMinute.toFixed(1)} jobs/min\n`,
      );
    }
  }
  const perMin = (s: 'file' | 'postgres'): number => median(runs[s].map((r) => r.jobsPerMinute));
  console.log(
    `\nThroughput: ${jobs} jobs, ${WORKERS} worker processes (concurrency 1 each) on this machine, zero-latency model, \`true\` tests, unconfined sandbox; median of ${rounds}:\n`,
  );
  console.log(
    '| store | jobs/min | each run | worker CPU per job | App CPU per job | worker RSS idle | worker RSS peak |\n| --- | --- | --- | --- | --- | --- | --- |',
  );
  for (const s of ['file', 'postgres'] as const) {
    console.log(
      `| ${s} | ${perMin(s).toFixed(1)} | ${runs[s].map((r) => r.jobsPerMinute.toFixed(1)).join(', ')} | ${median(runs[s].map((r) => r.workerCpuPerJob)).toFixed(2)} s | ${median(runs[s].map((r) => r.appCpuPerJob)).toFixed(2)} s | ${median(runs[s].map((r) => r.idleRssMiB)).toFixed(0)} MiB | ${median(runs[s].map((r) => r.peakRssMiB)).toFixed(0)} MiB |`,
    );
  }
  console.log(
    `\nPostgreSQL / file store: ${(perMin('postgres') / perMin('file')).toFixed(2)}× (target ≥ 0.8×)`,
  );
}
