/**
 * `npm run bench -- --mirror` (issue 17): the host's side of a job's workspace on a large
 * repository — pristine clone (from GitHub, or from the host's mirror) plus the sandbox's copy — for
 * the first and the second job of the same repository, and what each job leaves on disk.
 *
 * The repository is generated with `git fast-import`: FILES files in its first commit, then COMMITS
 * commits changing a few files each. It is served by the GitHub simulator over git smart-HTTP on
 * loopback, so "the network" here is as fast as the disk: the saving a mirror brings over a real
 * network is larger than measured here. Medians of ROUNDS rounds (each round: a fresh mirror, a
 * first job, a second job).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { DEFAULT_WORKSPACE_HISTORY } from '../src/config/agent-env.js';
import { historyCacheDir } from '../src/github/history-cache.js';
import { HostGit } from '../src/github/host-git.js';
import { IMAGES } from '../src/sandbox/docker/choose-image.js';
import { DockerSandbox } from '../src/sandbox/docker/docker-sandbox.js';
import { WarmPool } from '../src/sandbox/docker/warm-pool.js';
import { installationToken } from '../test/github-sim/helpers.js';
import { startGitHubSimulator } from '../test/support/github-sim/index.js';

const FILES = 20_000;
const COMMITS = 2_000;
const ROUNDS = 3;

export function generate(dir: string): void {
  execFileSync('git', ['init', '-q', '-b', 'main', dir]);
  const out: string[] = [];
  let mark = 0;
  const blob = (text: string): number => {
    mark += 1;
    out.push(`blob\nmark :${mark}\ndata ${Buffer.byteLength(text)}\n${text}`);
    return mark;
  };
  const content = (i: number, v: number): string =>
    `// file ${i}, version ${v}\n${`export function f${i}(x) { return x * ${i} + ${v}; }\n`.repeat(12)}`;
  const first = Array.from({ length: FILES }, (_, i) => [i, blob(content(i, 0))] as const);
  out.push(
    `commit refs/heads/main\ncommitter Gen <gen@example.invalid> 1700000000 +0000\ndata 7\ninitial\n${first
      .map(([i, m]) => `M 100644 :${m} src/d${i % 200}/f${i}.js`)
      .join('\n')}\n`,
  );
  for (let c = 1; c <= COMMITS; c++) {
    const changes = [0, 1, 2].map((k) => (c * 7919 + k * 104729) % FILES);
    const marks = changes.map((i) => [i, blob(content(i, c))] as const);
    out.push(
      `commit refs/heads/main\ncommitter Gen <gen@example.invalid> ${1700000000 + c} +0000\ndata ${`change ${c}`.length}\nchange ${c}\n${marks
        .map(([i, m]) => `M 100644 :${m} src/d${i % 200}/f${i}.js`)
        .join('\n')}\n`,
    );
  }
  const r = spawnSync('git', ['-C', dir, 'fast-import', '--quiet'], { input: out.join('\n') });
  if (r.status !== 0) throw new Error(`fast-import failed: ${r.stderr.toString()}`);
  execFileSync('git', ['-C', dir, 'checkout', '-q', 'main']);
  execFileSync('git', ['-C', dir, 'gc', '-q']);
}

/** `n` commits on `main` of the bare repository, each changing one file (plumbing: no work tree). */
function pushCommits(bare: string, n: number, round: number, index: string): void {
  const env = { ...process.env, GIT_DIR: bare, GIT_INDEX_FILE: index };
  const git = (args: string[], input?: string): string =>
    execFileSync('git', args, { env, ...(input === undefined ? {} : { input }) })
      .toString()
      .trim();
  for (let k = 0; k < n; k++) {
    const i = (round * 31 + k * 977) % FILES;
    git(['read-tree', 'refs/heads/main']);
    const blob = git(['hash-object', '-w', '--stdin'], `// file ${i}, pushed in round ${round}, ${k}\n`);
    git(['update-index', '--cacheinfo', `100644,${blob},src/d${i % 200}/f${i}.js`]);
    const tree = git(['write-tree']);
    const commit = git(
      [
        '-c',
        'user.name=Gen',
        '-c',
        'user.email=gen@example.invalid',
        'commit-tree',
        tree,
        '-p',
        'refs/heads/main',
      ],
      `upstream ${round}.${k}\n`,
    );
    git(['update-ref', 'refs/heads/main', commit]);
  }
}

const median = (v: readonly number[]): number =>
  [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)] ?? NaN;
const du = (path: string): number => Number(execFileSync('du', ['-sb', path]).toString().split('\t')[0]);
const mib = (b: number): string => `${(b / 1024 ** 2).toFixed(1)} MiB`;

/**
 * `BENCH_GIT_MBITS`: the simulated network's rate for git (megabits per second); unset, loopback.
 * `BENCH_HISTORY`: the workspace's history (commits, or `full`); default the deployment default.
 */
export async function mirrorBench(): Promise<void> {
  const mbits = Number(process.env.BENCH_GIT_MBITS ?? '0');
  const historyText = process.env.BENCH_HISTORY ?? String(DEFAULT_WORKSPACE_HISTORY);
  const history = historyText === 'full' ? null : Number(historyText);
  const scratch = mkdtempSync(join(tmpdir(), 'ia-mirror-bench-'));
  const sim = await startGitHubSimulator(mbits > 0 ? { gitBytesPerSecond: (mbits * 1e6) / 8 } : {});
  const docker = new Docker();
  try {
    const src = join(scratch, 'src');
    let t = performance.now();
    generate(src);
    process.stderr.write(`mirror bench: generated in ${Math.round(performance.now() - t)} ms\n`);
    await sim.createRepo({ owner: 'big', name: 'repo', sourceDir: src });
    const url = `${sim.url}/big/repo.git`;
    const { token } = await installationToken(sim);
    const host = new HostGit(process.env.PATH ?? '/usr/bin:/bin', (x) => x);
    const tree = du(src) - du(join(src, '.git'));
    const historyBytes = du(join(src, '.git'));
    const source = { url, branch: 'main', token: () => Promise.resolve(token) };
    const rows: Record<string, number[]> = {};
    const add = (k: string, v: number): void => {
      (rows[k] ??= []).push(v);
    };
    const limits = { workspaceBytes: 512 * 1024 ** 2 };
    const pool = new WarmPool({ images: { [IMAGES.base]: 1 }, docker, limits });
    for (let round = 0; round < ROUNDS; round++) {
      const work = join(scratch, `round-${round}`);
      const job = async (name: string, way: 'before' | 'mirror'): Promise<void> => {
        const pristine = join(work, 'pristine', name);
        const workspace = join(work, 'jobs', name, 'workspace');
        const bytesBefore = sim.gitBytesServed;
        // A container the pool is still preparing (from the last job) would share the machine.
        await pool.drain();
        t = performance.now();
        const mirror = join(work, 'mirrors', 'm.git');
        if (way === 'mirror') await host.pristineFromMirror(mirror, pristine, source);
        else await host.clonePristine(pristine, url, token, 'main');
        const cloned = performance.now() - t;
        const head = (await host.revParse(pristine, 'HEAD')).trim();
        // Before: a full clone checked out on the host, copied into the container. Now: a `.git`
        // with `history` commits, checked out by the sandbox user on the container's tmpfs.
        if (way === 'before') await host.copyForSandbox(pristine, workspace, head, url);
        else await host.historyForSandbox(pristine, workspace, head, url, history, historyCacheDir(mirror));
        const hostDisk = du(pristine) + du(workspace);
        const hostPart = performance.now() - t;
        const sandbox = await DockerSandbox.create({
          docker,
          workspace,
          checkout: way === 'mirror',
          jobId: `mirror-bench-${round}`,
          image: IMAGES.base,
          limits,
        });
        const ready = performance.now() - t;
        try {
          const r = await sandbox.exec('du -sb . | cut -f1', { timeoutMs: 60_000 });
          add(
            `${name}: disk, the sandbox's workspace (tree + .git, container tmpfs)`,
            Number(r.output.trim()),
          );
        } finally {
          await sandbox.close();
        }
        if (way === 'mirror') {
          // The same workspace into a warm pool's container (started before the job, as a warm
          // worker keeps them): the job waits for the host's part and the copy and checkout only.
          // Named as the repository, the first job leaves a container prepared with its checkout
          // (waited for: a worker's next job comes later than this bench's), which the second
          // job's switch to its own `.git` reuses.
          await pool.start();
          await pool.drain();
          const w0 = performance.now();
          const warm = await pool.acquire({
            workspace,
            checkout: true,
            jobId: `mirror-bench-warm-${round}`,
            image: IMAGES.base,
            repository: `bench-round-${round}`,
          });
          add(`${name}: workspace ready, warm pool container`, hostPart + (performance.now() - w0));
          await warm.close();
        }
        add(`${name}: transferred from GitHub`, sim.gitBytesServed - bytesBefore);
        add(`${name}: pristine clone`, cloned);
        add(`${name}: workspace ready in the container`, ready);
        add(`${name}: disk on the host (pristine clone + the workspace copy; du)`, hostDisk);
      };
      await job('before (no mirror, host checkout)', 'before');
      await job('first job (mirror made)', 'mirror');
      await job('second job (mirror fetched)', 'mirror');
      // A busy repository's next job: the base moved on by a few commits since the last one.
      pushCommits(sim.bareRepoPath('big', 'repo'), 3, round, join(scratch, 'push-index'));
      await job('next job (3 new commits upstream)', 'mirror');
      rmSync(work, { recursive: true, force: true });
      process.stderr.write(`mirror bench: round ${round + 1} done\n`);
    }
    console.log(
      `\nLarge repository: ${FILES.toLocaleString('en')} files, ${COMMITS.toLocaleString('en')} commits, checked-out tree ${mib(tree)}, history (.git after gc) ${mib(historyBytes)}; git at ${mbits > 0 ? `${mbits} Mbit/s` : 'loopback speed'}; workspace history ${historyText}; ${ROUNDS} rounds, medians:\n`,
    );
    console.log('| measure | median |\n| --- | --- |');
    for (const [k, v] of Object.entries(rows)) {
      const m = median(v);
      const bytes = k.includes('disk') || k.includes('transferred');
      console.log(`| ${k} | ${bytes ? mib(m) : `${(m / 1000).toFixed(2)} s`} |`);
    }
    const ready = (name: string): number => median(rows[`${name}: workspace ready in the container`] ?? []);
    const warm = (name: string): number =>
      median(rows[`${name}: workspace ready, warm pool container`] ?? []);
    for (const later of ['second job (mirror fetched)', 'next job (3 new commits upstream)']) {
      const first = 'first job (mirror made)';
      console.log(
        `| ${later} / first job (workspace ready) | ${(ready(later) / ready(first)).toFixed(2)}× |`,
      );
      console.log(
        `| ${later} / first job (workspace ready, warm pool container) | ${(warm(later) / warm(first)).toFixed(2)}× |`,
      );
    }
    const disk = median(
      rows["second job (mirror fetched): disk, the sandbox's workspace (tree + .git, container tmpfs)"] ?? [],
    );
    console.log(`| the sandbox's workspace / checked-out tree | ${(disk / tree).toFixed(2)}× |`);
    await pool.close();
  } finally {
    await sim.close();
    rmSync(scratch, { recursive: true, force: true });
  }
}
