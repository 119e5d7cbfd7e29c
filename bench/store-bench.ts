/**
 * `npm run bench -- --store` (issue 13): the run store on PostgreSQL against the file store, on the
 * same machine. Append latency (p50, p99 of 500 appends, each durable when it returns: fdatasync for
 * files, commit under synchronous_commit for PostgreSQL) and resume time (open a run and read all its
 * events, median of 7) at 100 and 1,000 events. PostgreSQL is a private server started here with
 * its default settings, on loopback TCP.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_LIMITS } from '../src/config/agent-env.js';
import type { EventStore } from '../src/events/event-store.js';
import { FileEventStore } from '../src/events/file-event-store.js';
import { PgRunStore } from '../src/events/pg-event-store.js';
import { SCHEMA_VERSION, type BaseState, type NewEvent } from '../src/events/schema.js';
import { startPostgres } from '../test/support/postgres-server.js';

const APPENDS = 500;
const OPENS = 7;

const base = (id: string): BaseState => ({
  schemaVersion: SCHEMA_VERSION,
  conversationId: id,
  createdAt: new Date().toISOString(),
  task: { title: 'bench', body: 'bench', instructions: [], source: 'bench' },
  workspace: { path: '/w', baseCommit: 'a'.repeat(40), baseTree: 'b'.repeat(40) },
  model: 'm',
  sandbox: 'local',
  testCommand: 'true',
  testCommandSource: null,
  limits: DEFAULT_LIMITS,
});

/** A step's two events: the model's answer and the command's output (about 1 KiB). */
function step(i: number): NewEvent[] {
  return [
    {
      kind: 'model_response',
      model: 'm',
      requestId: null,
      content: [
        { type: 'text', text: 'Looking at the failing test.' },
        {
          type: 'tool_use',
          id: `toolu_${i}`,
          name: 'bash',
          input: { command: `grep -rn average src/ # ${i}` },
        },
      ],
      stopReason: 'tool_use',
      usage: { inputTokens: 1200, outputTokens: 40, cacheReadTokens: 0, cacheWriteTokens: 0 },
      usd: 0.001,
      latencyMs: 900,
      attempts: 1,
      promptTokensEstimate: 1200,
    },
    {
      kind: 'observation',
      toolUseId: `toolu_${i}`,
      tool: 'bash',
      isError: false,
      content: `src/calc.js:${i}: export function average(xs) { return sum(xs) / xs.length; }\n`.repeat(10),
      exitCode: 0,
      killed: null,
      durationMs: 12,
    },
  ];
}

function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? NaN;
}

async function appendTimes(store: EventStore): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; times.length < APPENDS; i++) {
    for (const e of step(i)) {
      const t = performance.now();
      await store.append(e);
      times.push(performance.now() - t);
    }
  }
  return times;
}

async function fill(store: EventStore, events: number): Promise<void> {
  for (let i = 0; store.events.length < events; i++) for (const e of step(i)) await store.append(e);
}

async function medianOf(f: () => Promise<unknown>): Promise<number> {
  const times: number[] = [];
  for (let r = 0; r < OPENS; r++) {
    const t = performance.now();
    await f();
    times.push(performance.now() - t);
  }
  return quantile(times, 0.5);
}

export async function storeBench(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'ia-store-bench-'));
  const server = await startPostgres();
  const pg = await PgRunStore.connect(server.url);
  try {
    const fileAppends = await appendTimes(FileEventStore.create(join(dir, 'append'), base('append')));
    const pgAppends = await appendTimes(await pg.create('append', base('append')));
    const resume: Record<string, { file: number; pg: number }> = {};
    for (const n of [100, 1000]) {
      const folder = join(dir, `resume-${n}`);
      await fill(FileEventStore.create(folder, base(`resume-${n}`)), n);
      await fill(await pg.create(`resume-${n}`, base(`resume-${n}`)), n);
      resume[n] = {
        file: await medianOf(() => Promise.resolve(FileEventStore.open(folder))),
        pg: await medianOf(() => pg.open(`resume-${n}`)),
      };
    }
    const ms = (x: number | undefined): string => `${(x ?? NaN).toFixed(2)} ms`;
    console.log('\nRun store, file vs PostgreSQL (same machine):\n');
    console.log('| measure | file store | PostgreSQL | target (PostgreSQL) |\n| --- | --- | --- | --- |');
    console.log(
      `| append p50 | ${ms(quantile(fileAppends, 0.5))} | ${ms(quantile(pgAppends, 0.5))} | ≤ 1 ms |`,
    );
    console.log(`| append p99 | ${ms(quantile(fileAppends, 0.99))} | ${ms(quantile(pgAppends, 0.99))} | |`);
    console.log(
      `| resume, 100 events (open, read all) | ${ms(resume[100]?.file)} | ${ms(resume[100]?.pg)} | |`,
    );
    console.log(`| resume, 1,000 events | ${ms(resume[1000]?.file)} | ${ms(resume[1000]?.pg)} | ≤ 50 ms |`);
  } finally {
    await pg.close();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
