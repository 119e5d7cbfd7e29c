/**
 * `npm run bench -- --container-start`: what one sandbox container costs the machine from create to
 * removal (created from containerSpec, started, `true` run as its main process, removed), with
 * networking disabled as the sandbox creates it, and with the engine's network setup for
 * NetworkMode none (NetworkDisabled false) for comparison. The kinds alternate round by round;
 * wall time per container (median) and the whole machine's busy CPU per container (/proc/stat,
 * the engine, shim and runc included: a 2-core machine with nothing else running).
 */
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import Docker from 'dockerode';
import { hostsMountFile } from '../src/sandbox/docker/ca-file.js';
import { containerSpec, DEFAULT_LIMITS } from '../src/sandbox/docker/container-spec.js';

function busyTicks(): number {
  const v = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '')
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  return v.slice(0, 8).reduce((a, b) => a + b, 0) - (v[3] ?? 0) - (v[4] ?? 0);
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? (s[m] ?? NaN) : ((s[m - 1] ?? NaN) + (s[m] ?? NaN)) / 2;
}

export async function containerStartBench(rounds = 4, perRound = 5): Promise<void> {
  const docker = new Docker();
  const hostsFile = await hostsMountFile();
  const kinds = { 'networking disabled (the sandbox)': true, 'NetworkMode none only': false } as const;
  const walls: Record<string, number[]> = {};
  const cpu: Record<string, number> = {};
  for (let round = 0; round < rounds; round++) {
    for (const [name, disabled] of Object.entries(kinds)) {
      const before = busyTicks();
      for (let i = 0; i < perRound; i++) {
        const started = performance.now();
        const spec = containerSpec({
          name: `ia-bench-start-${process.pid}-${round}-${i}-${disabled ? 'd' : 'n'}`,
          image: 'issue-agent/base:latest',
          uid: 1000,
          gid: 1000,
          limits: DEFAULT_LIMITS,
          labels: { job: 'bench', owner: `bench-${process.pid}` },
          hostsFile,
        });
        const c = await docker.createContainer({
          ...spec,
          NetworkDisabled: disabled,
          Entrypoint: ['true'],
          Cmd: [],
        });
        await c.start();
        await c.wait();
        await c.remove({ force: true, v: true });
        (walls[name] ??= []).push(performance.now() - started);
      }
      cpu[name] = (cpu[name] ?? 0) + (busyTicks() - before) / 100;
    }
  }
  console.log('| container | runs | wall per container (median) | machine CPU per container |');
  console.log('| --- | --- | --- | --- |');
  for (const name of Object.keys(kinds)) {
    const n = walls[name]?.length ?? 0;
    console.log(
      `| ${name} | ${n} | ${Math.round(median(walls[name] ?? []))} ms | ${((cpu[name] ?? 0) / n).toFixed(2)} s |`,
    );
  }
}
