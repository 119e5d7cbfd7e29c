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
import { HostGit } from '../src/github/host-git.js';
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

const median = (v: readonly number[]): number =>
  [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)] ?? NaN;
const du = (path: string): number => Number(execFileSync('du', ['-sb', path]).toString().split('\t')[0]);
const mib = (b: number): string => `${(b / 1024 ** 2).toFixed(1)} MiB`;

export async function mirrorBench(): Promise<void> {
  const scratch = mkdtempSync(join(tmpdir(), 'ia-mirror-bench-'));
  const sim = await startGitHubSimulator();
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
    const history = du(join(src, '.git'));
    const source = { url, branch: 'main', token: () => Promise.resolve(token) };
    const rows: Record<string, number[]> = {};
    const add = (k: string, v: number): void => {
      (rows[k] ??= []).push(v);
    };
    for (let round = 0; round < ROUNDS; round++) {
      const work = join(scratch, `round-${round}`);
      const job = async (name: string, mirror: boolean): Promise<void> => {
        const pristine = join(work, 'pristine', name);
        const workspace = join(work, 'jobs', name, 'workspace');
        t = performance.now();
        if (mirror) await host.pristineFromMirror(join(work, 'mirrors', 'm.git'), pristine, source);
        else await host.clonePristine(pristine, url, token, 'main');
        const cloned = performance.now() - t;
        const head = (await host.revParse(pristine, 'HEAD')).trim();
        await host.copyForSandbox(pristine, workspace, head, url);
        const ready = performance.now() - t;
        add(`${name}: pristine clone`, cloned);
        add(`${name}: pristine + sandbox copy (workspace ready on the host)`, ready);
        add(`${name}: disk, pristine clone (du, hardlinks counted once per job folder)`, du(pristine));
        add(`${name}: disk, sandbox copy`, du(workspace));
      };
      await job('no mirror (before)', false);
      await job('first job (mirror made)', true);
      await job('second job (mirror fetched)', true);
      rmSync(work, { recursive: true, force: true });
      process.stderr.write(`mirror bench: round ${round + 1} done\n`);
    }
    console.log(
      `\nLarge repository: ${FILES.toLocaleString('en')} files, ${COMMITS.toLocaleString('en')} commits, checked-out tree ${mib(tree)}, history (.git after gc) ${mib(history)}; ${ROUNDS} rounds, medians:\n`,
    );
    console.log('| measure | median |\n| --- | --- |');
    for (const [k, v] of Object.entries(rows)) {
      const m = median(v);
      console.log(`| ${k} | ${k.includes('disk') ? mib(m) : `${(m / 1000).toFixed(2)} s`} |`);
    }
    const first = median(
      rows['first job (mirror made): pristine + sandbox copy (workspace ready on the host)'] ?? [],
    );
    const second = median(
      rows['second job (mirror fetched): pristine + sandbox copy (workspace ready on the host)'] ?? [],
    );
    console.log(`| second job / first job (ready on the host) | ${(second / first).toFixed(2)}× |`);
  } finally {
    await sim.close();
    rmSync(scratch, { recursive: true, force: true });
  }
}
