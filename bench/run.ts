/**
 * `npm run bench`: harness overhead per step (local sandbox, no model latency), against spawning a
 * fresh shell per command; event persist latency; resume time at 100 and 1,000 events. Prints a
 * Markdown table; medians and ratios from one run (numbers on shared machines are noisy).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newBaseState } from '../src/agent/new-run.js';
import { runAgent } from '../src/agent/run-agent.js';
import { buildMessages } from '../src/agent/conversation.js';
import { DEFAULT_LIMITS } from '../src/config/agent-env.js';
import { FileEventStore } from '../src/events/file-event-store.js';
import { reduceState } from '../src/events/reduce-state.js';
import type { Model, ModelResponse } from '../src/model/model.js';
import { DEFAULT_PRICES } from '../src/model/pricing.js';
import { LocalSandbox } from '../src/sandbox/local/local-sandbox.js';
import { createSandbox, type SandboxKind } from '../src/sandbox/create-sandbox.js';
import { makeFixtureRepo } from '../test/support/fixture-repo.js';

function quantile(xs: readonly number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? NaN;
}

const ms = (x: number): string => `${x.toFixed(3)} ms`;

/** A model with no latency that runs `true` for `steps` turns, then finishes: only harness cost remains. */
function instantModel(steps: number, stamps: number[]): Model {
  let turn = 0;
  return {
    name: 'bench-instant',
    complete(): Promise<ModelResponse> {
      stamps.push(performance.now());
      turn += 1;
      const id = `toolu_${turn}`;
      const content: ModelResponse['content'] =
        turn > steps
          ? [{ type: 'tool_use', id, name: 'finish', input: { summary: 'bench' } }]
          : [{ type: 'tool_use', id, name: 'bash', input: { command: 'true' } }];
      return Promise.resolve({
        model: 'bench-instant',
        requestId: null,
        content,
        stopReason: 'tool_use',
        usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0 },
        attempts: 1,
      });
    },
  };
}

async function harnessOverhead(
  steps: number,
  kind: SandboxKind = 'local',
): Promise<{ median: number; p95: number }> {
  const repo = makeFixtureRepo('node-calc');
  const dir = mkdtempSync(join(tmpdir(), 'ia-bench-'));
  const sandbox = await createSandbox({
    kind,
    workspace: repo.dir,
    path: process.env.PATH ?? '/usr/bin:/bin',
    jobId: 'bench',
  });
  try {
    const limits = { ...DEFAULT_LIMITS, maxSteps: steps + 10 };
    const base = await newBaseState({
      task: { title: 'bench', body: 'bench', instructions: [], source: 'bench' },
      sandbox,
      model: 'bench-instant',
      limits,
      testCommand: 'true',
    });
    const store = FileEventStore.create(join(dir, 'run'), base);
    const stamps: number[] = [];
    await runAgent({
      store,
      sandbox,
      model: instantModel(steps, stamps),
      prices: DEFAULT_PRICES,
      stuck: { repeatWarn: 1e9, repeatStop: 1e9, alternateWarn: 1e9, alternateStop: 1e9 },
    });
    // Time between consecutive model calls = one full step of harness work (tool, events, checkpoint, prompt).
    const gaps = stamps.slice(2, steps).map((t, i) => t - (stamps[i + 1] ?? t));
    return { median: quantile(gaps, 0.5), p95: quantile(gaps, 0.95) };
  } finally {
    await sandbox.close();
    repo.cleanup();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function freshShellPerCommand(n: number): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await new Promise<void>((resolve) => {
      spawn('bash', ['-c', 'true'], { stdio: 'ignore' }).once('close', () => {
        resolve();
      });
    });
    times.push(performance.now() - t);
  }
  return quantile(times, 0.5);
}

async function persistentShellPerCommand(n: number): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'ia-bench-'));
  const sandbox = await LocalSandbox.create({ workspace: dir, path: process.env.PATH ?? '/usr/bin:/bin' });
  const times: number[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const t = performance.now();
      await sandbox.exec('true', { timeoutMs: 10_000 });
      times.push(performance.now() - t);
    }
  } finally {
    await sandbox.close();
    rmSync(dir, { recursive: true, force: true });
  }
  return quantile(times, 0.5);
}

function sampleObservation(i: number): Parameters<FileEventStore['appendSync']>[0] {
  return {
    kind: 'observation',
    toolUseId: `toolu_${i}`,
    tool: 'bash',
    isError: false,
    content: 'x'.repeat(2000),
    exitCode: 0,
    killed: null,
    durationMs: 3,
  };
}

async function persistAndResume(): Promise<{ p50: number; p95: number; resume: Record<number, number> }> {
  const repo = makeFixtureRepo('node-calc');
  const sandbox = await LocalSandbox.create({
    workspace: repo.dir,
    path: process.env.PATH ?? '/usr/bin:/bin',
  });
  const base = await newBaseState({
    task: { title: 'bench', body: 'bench', instructions: [], source: 'bench' },
    sandbox,
    model: 'm',
    limits: DEFAULT_LIMITS,
    testCommand: 'true',
  });
  await sandbox.close();
  repo.cleanup();
  const dir = mkdtempSync(join(tmpdir(), 'ia-bench-'));
  try {
    const store = FileEventStore.create(join(dir, 'persist'), base);
    const times: number[] = [];
    for (let i = 0; i < 500; i++) {
      const t = performance.now();
      store.appendSync(sampleObservation(i));
      times.push(performance.now() - t);
    }
    const resume: Record<number, number> = {};
    for (const n of [100, 1000]) {
      const runDir = join(dir, `resume-${n}`);
      const s = FileEventStore.create(runDir, base);
      for (let i = 0; i < n / 2; i++) {
        s.appendSync({
          kind: 'model_response',
          model: 'm',
          requestId: null,
          content: [
            { type: 'text', text: 'Looking.' },
            { type: 'tool_use', id: `toolu_${i}`, name: 'bash', input: { command: 'ls' } },
          ],
          stopReason: 'tool_use',
          usage: { inputTokens: 100, outputTokens: 10, cacheReadTokens: 0, cacheWriteTokens: 0 },
          usd: 0,
          latencyMs: 1,
          attempts: 1,
          promptTokensEstimate: 100,
        });
        s.appendSync(sampleObservation(i));
      }
      const runs: number[] = [];
      for (let r = 0; r < 7; r++) {
        const t = performance.now();
        const opened = FileEventStore.open(runDir);
        reduceState(opened.events);
        buildMessages(opened.base, opened.events);
        runs.push(performance.now() - t);
      }
      resume[n] = quantile(runs, 0.5);
    }
    return { p50: quantile(times, 0.5), p95: quantile(times, 0.95), resume };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const overhead = await harnessOverhead(100);
  const fresh = await freshShellPerCommand(100);
  const persistent = await persistentShellPerCommand(300);
  const persist = await persistAndResume();
  const rows: [string, string, string][] = [
    ['harness overhead per step, local sandbox, `true` (median)', ms(overhead.median), '≤ 5 ms'],
    ['harness overhead per step (p95)', ms(overhead.p95), ''],
    ['persistent shell: one command round trip (median)', ms(persistent), ''],
    ['fresh `bash -c` per command (median)', ms(fresh), ''],
    ['fresh shell / persistent shell', `${(fresh / persistent).toFixed(1)}×`, ''],
    ['event persist p50 (temp + fdatasync + rename)', ms(persist.p50), '≤ 0.2 ms'],
    ['event persist p95', ms(persist.p95), ''],
    ['resume at 100 events (open + reduce + rebuild prompt)', ms(persist.resume[100] ?? NaN), '≤ 10 ms'],
    ['resume at 1,000 events', ms(persist.resume[1000] ?? NaN), ''],
  ];
  console.log('| measure | result | target |\n| --- | --- | --- |');
  for (const [a, b, c] of rows) console.log(`| ${a} | ${b} | ${c} |`);
  if (process.argv.includes('--docker')) {
    const { runDockerBench } = await import('./docker-bench.js');
    const d = await runDockerBench();
    const dockerStep = await harnessOverhead(100, 'docker');
    console.log('\nDocker:\n');
    console.log('| measure | result |\n| --- | --- |');
    for (const [k, v] of Object.entries<number>(d)) console.log(`| ${k} | ${v.toFixed(3)} |`);
    console.log(
      `| harness overhead per step, Docker sandbox, \`true\` (median, target ≤ 10 ms) | ${dockerStep.median.toFixed(3)} |`,
    );
    console.log(`| harness overhead per step, Docker sandbox (p95) | ${dockerStep.p95.toFixed(3)} |`);
  }
  if (process.argv.includes('--editor')) {
    const { editorBench } = await import('./editor-bench.js');
    console.log('\nEditor tool, file I/O inside the sandbox (300-line file, 200 calls each):\n');
    console.log(
      '| operation | local median | local p95 | Docker median | Docker p95 |\n| --- | --- | --- | --- | --- |',
    );
    const local = await editorBench('local');
    const docker = await editorBench('docker');
    for (const op of Object.keys(local)) {
      const l = local[op];
      const d = docker[op];
      console.log(
        `| ${op} | ${ms(l?.median ?? NaN)} | ${ms(l?.p95 ?? NaN)} | ${ms(d?.median ?? NaN)} | ${ms(d?.p95 ?? NaN)} |`,
      );
    }
  }
  if (process.argv.includes('--webhooks')) await (await import('./webhook-ack.js')).webhookBench();
  if (process.argv.includes('--run-view')) await (await import('./run-view.js')).runViewBench();
  if (process.argv.includes('--pipeline')) await (await import('./pipeline-bench.js')).pipelineBench();
  if (process.argv.includes('--best-of')) await (await import('./best-of-bench.js')).bestOfBench();
  if (process.argv.includes('--mirror')) await (await import('./mirror-bench.js')).mirrorBench();
  if (process.argv.includes('--explore')) await (await import('./explore-bench.js')).exploreBench();
  if (process.argv.includes('--eval')) (await import('./eval-bench.js')).evalBench();
  if (process.argv.includes('--container-start'))
    await (await import('./container-start-bench.js')).containerStartBench();
  if (process.argv.includes('--machine-scaling'))
    await (await import('./machine-scaling-bench.js')).machineScalingBench();
  if (process.argv.includes('--redact')) (await import('./redact-bench.js')).redactBench();
  if (process.argv.includes('--store')) await (await import('./store-bench.js')).storeBench();
  if (process.argv.includes('--throughput')) await (await import('./throughput-bench.js')).throughputBench();
  if (process.argv.includes('--test-reports'))
    await (await import('./test-reports-bench.js')).testReportsBench();
  if (process.argv.includes('--tokens')) await (await import('./tokens-bench.js')).tokensBench();
  if (process.argv.includes('--environment'))
    await (await import('./environment-bench.js')).environmentBench();
}

await main();
