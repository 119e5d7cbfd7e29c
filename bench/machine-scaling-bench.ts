/**
 * `npm run bench -- --machine-scaling`: how much a second core buys on this machine, by kind of work.
 * Each workload runs alone, then as two copies at once; scaling = 2 × (time alone) / (time of the
 * pair), so 2.0 is a perfect second core and 1.0 none. Rounds alternate alone and paired; medians.
 *
 * The eval's concurrency ratio is bounded by this: its work is mostly starting processes (runc,
 * shims, shells, git, test runners), and on a machine where process start-up does not scale, no
 * scheduling in the harness makes two tasks finish in much less than twice the time of one.
 */
import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';

interface Workload {
  readonly name: string;
  readonly script: string;
}

const WORKLOADS: readonly Workload[] = [
  {
    name: 'arithmetic loop in one process (node)',
    script: `node -e 'let s=0; for (let i=0;i<4e8;i++) s+=i'`,
  },
  {
    name: 'touching fresh memory in one process (node, 1 GiB in 64 MiB buffers)',
    script: `node -e 'for (let i=0;i<16;i++) Buffer.alloc(64<<20).fill(1)'`,
  },
  { name: 'starting `/bin/true` 300 times (fork + exec)', script: 'for i in $(seq 300); do /bin/true; done' },
  { name: 'starting `node -e 0` 10 times', script: 'for i in $(seq 10); do node -e 0; done' },
  { name: 'starting `python3 -c pass` 10 times', script: 'for i in $(seq 10); do python3 -c pass; done' },
];

/** Only where an engine answers: a sandbox-like container (no network) run and removed, 5 times. */
const DOCKER_WORKLOAD: Workload = {
  name: 'running `true` in a new container 5 times (`docker run --rm --network none`)',
  script: 'for i in $(seq 5); do docker run --rm --network none issue-agent/base:latest true; done',
};

function timeScripts(script: string, copies: number): Promise<number> {
  const started = performance.now();
  return Promise.all(
    Array.from(
      { length: copies },
      () =>
        new Promise<void>((resolve, reject) => {
          const child = spawn('bash', ['-c', script], { stdio: 'ignore' });
          child.once('error', reject);
          child.once('close', (code) => {
            if (code === 0) resolve();
            else reject(new Error(`workload exited ${String(code)}: ${script}`));
          });
        }),
    ),
  ).then(() => performance.now() - started);
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? (s[m] ?? NaN) : ((s[m - 1] ?? NaN) + (s[m] ?? NaN)) / 2;
}

export async function machineScalingBench(rounds = 3): Promise<void> {
  console.log('| work | alone | two at once | scaling (2.0 = perfect) |');
  console.log('| --- | --- | --- | --- |');
  const docker = await timeScripts('docker image inspect issue-agent/base:latest', 1).then(
    () => true,
    () => false,
  );
  for (const w of docker ? [...WORKLOADS, DOCKER_WORKLOAD] : WORKLOADS) {
    const alone: number[] = [];
    const pair: number[] = [];
    for (let r = 0; r < rounds; r++) {
      alone.push(await timeScripts(w.script, 1));
      pair.push(await timeScripts(w.script, 2));
    }
    const a = median(alone);
    const p = median(pair);
    console.log(
      `| ${w.name} | ${(a / 1000).toFixed(2)} s | ${(p / 1000).toFixed(2)} s | ${((2 * a) / p).toFixed(2)} |`,
    );
  }
}
