/**
 * `node --import tsx bench/harness-bench.ts [rounds]`: what keeping the harness out of the agent's
 * reach costs. Per sandbox kind (Docker, the isolated local sandbox): a sandbox made ready (both
 * shells, the repository in) and closed; one harness command (`true`) and one agent command
 * (`true`) through their persistent shells; an editor view (a harness read of a 300-line file);
 * for the local sandbox, the CPU its processes used (its 300 commands included). Medians over `rounds` sandboxes (default 5), 100 commands each. Uses only the Sandbox seam, so the
 * same file runs against an older tree for a before/after comparison.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DockerSandbox } from '../src/sandbox/docker/docker-sandbox.js';
import { LocalSandbox } from '../src/sandbox/local/local-sandbox.js';
import type { Sandbox } from '../src/sandbox/sandbox.js';
import { SandboxFiles } from '../src/sandbox/sandbox-files.js';

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[mid] ?? NaN) : ((s[mid - 1] ?? NaN) + (s[mid] ?? NaN)) / 2;
}

function workspace(): string {
  const ws = mkdtempSync(join(tmpdir(), 'ia-harness-bench-'));
  const lines = Array.from({ length: 300 }, (_, i) => `export const value${i} = ${i};`);
  writeFileSync(join(ws, 'big.js'), `${lines.join('\n')}\n`);
  writeFileSync(join(ws, 'package.json'), '{"name":"bench"}\n');
  execFileSync('git', ['init', '-q'], { cwd: ws });
  return ws;
}

async function open(kind: 'docker' | 'local', ws: string): Promise<Sandbox> {
  if (kind === 'docker')
    return DockerSandbox.create({ workspace: ws, jobId: 'bench-harness', image: 'issue-agent/node:latest' });
  return LocalSandbox.create({
    workspace: ws,
    path: process.env.PATH ?? '/usr/bin:/bin',
    isolate: { hide: [] },
  });
}

/**
 * CPU time (ms) of this process's children that have ended and been waited for: a local sandbox's
 * host-side processes and, through them, everything that ran in it (clock ticks of 10 ms).
 */
function childrenCpuMs(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[13]) + Number(fields[14])) * 10;
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

export async function harnessBench(rounds = 5): Promise<void> {
  console.log(
    '| sandbox | ready + close (ms) | its CPU (ms) | harness `true` (ms) | agent `true` (ms) | editor read (ms) |',
  );
  console.log('| --- | --- | --- | --- | --- | --- |');
  for (const kind of ['docker', 'local'] as const) {
    const ready: number[] = [];
    const cpu: number[] = [];
    const harness: number[] = [];
    const agent: number[] = [];
    const reads: number[] = [];
    for (let r = 0; r < rounds; r++) {
      const ws = workspace();
      const cpuBefore = childrenCpuMs();
      try {
        let sandbox: Sandbox | undefined;
        const opened = await timed(async () => {
          sandbox = await open(kind, ws);
        });
        if (sandbox === undefined) throw new Error('no sandbox');
        const s = sandbox;
        try {
          const files = new SandboxFiles(s);
          for (let i = 0; i < 5; i++) {
            await s.harnessExec('true', { timeoutMs: 10_000 });
            await s.exec('true', { timeoutMs: 10_000 });
            await files.read('big.js');
          }
          for (let i = 0; i < 100; i++) {
            harness.push(await timed(() => s.harnessExec('true', { timeoutMs: 10_000 })));
            agent.push(await timed(() => s.exec('true', { timeoutMs: 10_000 })));
            reads.push(await timed(() => files.read('big.js')));
          }
        } finally {
          ready.push(opened + (await timed(() => s.close())));
        }
      } finally {
        rmSync(ws, { recursive: true, force: true });
      }
      // The last of a local sandbox's host-side processes are waited for just after close().
      await new Promise((resolve) => setTimeout(resolve, 300));
      cpu.push(childrenCpuMs() - cpuBefore);
    }
    const f = (x: number): string => x.toFixed(2);
    // Docker's processes are the engine's children, not ours: their CPU is not counted here.
    const cpuCell = kind === 'local' ? f(median(cpu)) : 'n/a';
    console.log(
      `| ${kind} | ${f(median(ready))} | ${cpuCell} | ${f(median(harness))} | ${f(median(agent))} | ${f(median(reads))} |`,
    );
  }
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) {
  await harnessBench(Number(process.argv[2] ?? 5));
}
