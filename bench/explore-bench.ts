/**
 * `npm run bench -- --explore` (issue 14): what the `delegate` sub-agent saves the main context. A
 * 100-step scripted run on a repository of 20 source files (about 3 KB each): in one variant the
 * main loop reads all 20 files itself (steps 1–20) and then works 79 more steps; in the other, step
 * 1 delegates the reading to the explorer, which returns a summary, and the main loop works the same
 * 98 steps after it. Input tokens are the model simulator's count of every request (main loop and
 * explorer), all prompt tokens (uncached + cache writes + cache reads) and uncached ones apart.
 * The context budget is large enough that neither variant condenses.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newBaseState } from '../src/agent/new-run.js';
import { runAgent } from '../src/agent/run-agent.js';
import { DEFAULT_LIMITS } from '../src/config/agent-env.js';
import { FileEventStore } from '../src/events/file-event-store.js';
import { AnthropicModel } from '../src/model/anthropic-model.js';
import { DEFAULT_PRICES } from '../src/model/pricing.js';
import { LocalSandbox } from '../src/sandbox/local/local-sandbox.js';
import { reply, startModelSimulator, type Policy } from '../src/model-sim/index.js';
import type { MessagesRequest } from '../src/model-sim/types.js';

const FILES = 20;
const STEPS = 100;
const KEY = 'sk-ant-explore-bench';

function repository(dir: string): void {
  mkdirSync(join(dir, 'src'), { recursive: true });
  for (let i = 0; i < FILES; i++) {
    const body = Array.from(
      { length: 60 },
      (_, l) => `export function f${i}_${l}(input) { return input.map((x) => x * ${l} + ${i}); }`,
    ).join('\n');
    writeFileSync(join(dir, 'src', `module${i}.js`), `// module ${i}\n${body}\n`);
  }
  execFileSync('git', ['init', '-q'], { cwd: dir });
  execFileSync('git', ['add', '-A'], { cwd: dir });
  execFileSync('git', ['-c', 'user.name=b', '-c', 'user.email=b@e', 'commit', '-qm', 'init'], { cwd: dir });
}

const isExplorer = (r: MessagesRequest): boolean => JSON.stringify(r.system).includes('exploration helper');
const view = (i: number): ReturnType<typeof reply> =>
  reply().tool('editor', { command: 'view', path: `src/module${i}.js` });
const work = (n: number): ReturnType<typeof reply> => reply().tool('bash', { command: `echo step ${n}` });

function policy(delegated: boolean): Policy {
  const main: ReturnType<typeof reply>[] = [];
  const explorer: ReturnType<typeof reply>[] = [];
  if (delegated) {
    main.push(
      reply().tool('delegate', { question: 'Read every module under src/ and summarise what each exports.' }),
    );
    for (let i = 0; i < FILES; i++) explorer.push(view(i));
    explorer.push(
      reply().text(
        Array.from(
          { length: FILES },
          (_, i) => `src/module${i}.js: f${i}_0…f${i}_59, each maps input by x * l + ${i}.`,
        ).join('\n'),
      ),
    );
  } else {
    for (let i = 0; i < FILES; i++) main.push(view(i));
  }
  while (main.length < STEPS - 1) main.push(work(main.length + 1));
  main.push(reply().tool('finish', { summary: 'done' }));
  let m = 0;
  let x = 0;
  return (request) =>
    (isExplorer(request) ? explorer[x++] : main[m++]) ?? { status: 500, message: 'ran out' };
}

async function variant(delegated: boolean): Promise<{ prompt: number; uncached: number; requests: number }> {
  const root = mkdtempSync(join(tmpdir(), 'ia-explore-bench-'));
  const dir = join(root, 'repo');
  repository(dir);
  const sim = await startModelSimulator({ policy: policy(delegated), apiKey: KEY });
  const sandbox = await LocalSandbox.create({ workspace: dir, path: process.env.PATH ?? '/usr/bin:/bin' });
  try {
    const model = new AnthropicModel({
      apiKey: KEY,
      model: 'claude-sonnet-4-6',
      baseURL: sim.url,
      maxAttempts: 2,
    });
    const limits = {
      ...DEFAULT_LIMITS,
      maxSteps: STEPS + 5,
      contextTokens: 1_000_000,
      maxTokens: 100_000_000,
      maxUsd: 1000,
    };
    const base = await newBaseState({
      task: { title: 'Bench', body: 'Explore, then work.', instructions: [], source: 'bench' },
      sandbox,
      model: model.name,
      limits,
    });
    const store = FileEventStore.create(join(root, 'run'), base);
    await runAgent({ store, sandbox, model, prices: DEFAULT_PRICES });
    let prompt = 0;
    let uncached = 0;
    for (const e of store.events) {
      if (e.kind !== 'model_response') continue;
      prompt += e.usage.inputTokens + e.usage.cacheReadTokens + e.usage.cacheWriteTokens;
      uncached += e.usage.inputTokens;
    }
    return { prompt, uncached, requests: sim.requests.length };
  } finally {
    await sandbox.close();
    await sim.close();
    rmSync(root, { recursive: true, force: true });
  }
}

export async function exploreBench(): Promise<void> {
  const inMain = await variant(false);
  const delegated = await variant(true);
  const fmt = (n: number): string => n.toLocaleString('en');
  console.log(`\nExploration of ${FILES} files in a ${STEPS}-step run (input tokens over every request):\n`);
  console.log(
    '| | main loop reads the files | delegated to the explorer | ratio |\n| --- | --- | --- | --- |',
  );
  console.log(`| model requests | ${inMain.requests} | ${delegated.requests} | |`);
  console.log(
    `| prompt tokens (uncached + cache writes + cache reads) | ${fmt(inMain.prompt)} | ${fmt(delegated.prompt)} | **${(delegated.prompt / inMain.prompt).toFixed(2)}×** |`,
  );
  console.log(
    `| uncached input tokens | ${fmt(inMain.uncached)} | ${fmt(delegated.uncached)} | ${(delegated.uncached / inMain.uncached).toFixed(2)}× |`,
  );
}
