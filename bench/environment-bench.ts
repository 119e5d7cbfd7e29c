/**
 * `npm run bench -- --environment` (issue 12): how long a job waits for its environment, and what
 * the egress proxy costs an install.
 *
 * - Ready time: `prepareEnvironment` from its call to its resolution (the sandbox as the agent gets
 *   it) for a repository of 309 npm packages as a first job (setup runs `npm ci` through the proxy
 *   and the result is stored; a fresh cache directory per run), the same repository again (a cache
 *   hit: setup skipped, the entry unpacked) and a repository with no lockfile (no setup). npm's own
 *   cache is cold in every run: the container's HOME is a fresh tmpfs. The kinds run in turn, round
 *   by round, so drift of the machine hits each alike. Where the time goes comes from the engine's
 *   own events (container create and start, every exec from its creation to its end).
 * - Proxy overhead: the same `npm ci` on the host, directly and through the egress proxy (the
 *   proxy on a unix socket, socat from a loopback port to it, as inside the sandbox), npm's cache a
 *   new empty directory each run, the two in turn (A B, then B A).
 *
 * Prints Markdown tables: medians and ratios from one run (numbers on shared machines are noisy).
 */
import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { open } from 'node:fs/promises';
import { chmod, cp, mkdtemp, readdir, rename, rm, stat } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { EnvironmentSettings } from '../src/config/agent-env.js';
import { hostProbe } from '../src/environment/host-probe.js';
import { planEnvironment, type EnvironmentPlan } from '../src/environment/plan.js';
import { prepareEnvironment, type PreparedEnvironment } from '../src/environment/prepare.js';
import type { EnvironmentRecord } from '../src/events/schema.js';
import { LABEL_JOB } from '../src/sandbox/docker/owner.js';
import { WarmPool } from '../src/sandbox/docker/warm-pool.js';
import { startEgressProxy, type EgressLogEntry } from '../src/sandbox/egress/egress-proxy.js';
import { registryDeployment } from '../test/support/egress-env.js';

const run = promisify(execFile);

const FIXTURES = fileURLToPath(new URL('./fixtures/', import.meta.url));

export interface EnvironmentBenchOptions {
  /** Counted first jobs (setup runs). Default 5. */
  readonly firstJobs?: number;
  /** Counted cache hits and no-dependency jobs, each. Default 9. */
  readonly fastJobs?: number;
  /** Counted pairs of host `npm ci` (direct, through the proxy). Default 7. */
  readonly proxyPairs?: number;
}

function median(values: readonly number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length === 0
    ? NaN
    : s.length % 2 === 1
      ? (s[mid] ?? NaN)
      : ((s[mid - 1] ?? NaN) + (s[mid] ?? NaN)) / 2;
}

const sec = (msValue: number): string => `${(msValue / 1000).toFixed(2)} s`;
const msText = (msValue: number): string => `${Math.round(msValue)} ms`;
const ratio = (x: number): string => `${x.toFixed(2)}×`;
const range = (xs: readonly number[], f: (x: number) => string): string =>
  `${f(Math.min(...xs))} – ${f(Math.max(...xs))}`;

/** A git repository (as a job's host copy is) holding a fixture's files. */
async function fixtureRepo(fixture: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `ia-bench-env-${fixture}-`));
  await cp(join(FIXTURES, fixture), dir, { recursive: true });
  await run('git', ['init', '-q', '-b', 'main', dir]);
  await run('git', ['-C', dir, 'add', '-A']);
  await run('git', ['-C', dir, '-c', 'user.name=b', '-c', 'user.email=b@e', 'commit', '-qm', 'fixture']);
  return dir;
}

// ---------------------------------------------------------------------------------------------
// Where the time goes: the engine's events for one job's container.

interface EngineEvent {
  readonly Action: string;
  readonly timeNano: number;
  readonly Actor?: { readonly Attributes?: Record<string, string> };
}

interface Phases {
  /** Call → the container's create event: image inspect, input hashes, cache lookup, proxy start. */
  readonly beforeContainer: number;
  /** create → start events. */
  readonly createStart: number;
  /** Exec time (creation to end) per step of the setup phase. */
  readonly execs: Readonly<Record<string, number>>;
  /**
   * The end of the last setup-phase exec → resolved: the two shells start (adopt) and, when no
   * setup command runs, the files arrive through the harness shell (`place`, measured apart).
   */
  readonly shells: number;
  /** Of `shells`: the harness shell placing the files (no setup command), from the sandbox. */
  readonly place: number | null;
  /** What no step above covers: the host's side between execs. */
  readonly gaps: number;
}

function stepOf(cmd: string): string | null {
  // Processes that outlive the setup phase's steps: the persistent shells (adopt) and the
  // forwarder (running until the sweep); their time is in the steps around them.
  if (cmd.includes('umask 0022; exec -a') || cmd.startsWith('socat ')) return null;
  if (cmd.includes('ia-copy-in')) return 'copy the repository in';
  if (cmd.includes('tar -x -f - -C /workspace')) return 'unpack the cached environment';
  if (cmd.includes('/run/issue-agent-ca/')) return 'install the CA bundle';
  if (cmd.includes('import os, signal')) return 'list processes, sweep';
  if (cmd.includes('ia-exclude')) return 'exclude outputs from snapshots';
  if (cmd.includes('/proc/net/tcp')) return 'start the egress forwarder';
  if (cmd.includes('IA_PATHS')) return 'pack node_modules for the cache';
  if (cmd.startsWith('/bin/bash -c ')) return 'setup commands (npm ci)';
  return 'other execs';
}

async function phasesOf(jobId: string, t0: number, t1: number, place: number | null): Promise<Phases | null> {
  const { stdout } = await run('docker', [
    'events',
    '--since',
    (t0 / 1000 - 1).toFixed(3),
    '--until',
    (t1 / 1000 + 1).toFixed(3),
    '--filter',
    `label=${LABEL_JOB}=${jobId}`,
    '--format',
    '{{json .}}',
  ]);
  const events = stdout
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as EngineEvent)
    .map((e) => ({ ...e, ms: e.timeNano / 1e6 }))
    .filter((e) => e.ms <= t1 + 5);
  const create = events.find((e) => e.Action === 'create');
  const start = events.find((e) => e.Action === 'start');
  if (create === undefined || start === undefined) return null;
  const execs = new Map<string, { cmd: string; created: number; died: number | null }>();
  for (const e of events) {
    const id = e.Actor?.Attributes?.execID;
    if (id === undefined) continue;
    if (e.Action.startsWith('exec_create: ')) {
      execs.set(id, { cmd: e.Action.slice('exec_create: '.length), created: e.ms, died: null });
    } else if (e.Action === 'exec_die') {
      const x = execs.get(id);
      if (x !== undefined) x.died = e.ms;
    }
  }
  const byStep: Record<string, number> = {};
  let lastSetupEnd = start.ms;
  for (const x of execs.values()) {
    const step = stepOf(x.cmd);
    if (step === null || x.died === null) continue;
    byStep[step] = (byStep[step] ?? 0) + (x.died - x.created);
    lastSetupEnd = Math.max(lastSetupEnd, x.died);
  }
  const beforeContainer = create.ms - t0;
  const createStart = start.ms - create.ms;
  const shells = t1 - lastSetupEnd;
  const inExecs = Object.values(byStep).reduce((a, b) => a + b, 0);
  return {
    beforeContainer,
    createStart,
    execs: byStep,
    shells,
    place,
    gaps: t1 - t0 - beforeContainer - createStart - inExecs - shells,
  };
}

// ---------------------------------------------------------------------------------------------
// Ready time.

interface ReadySample {
  readonly ms: number;
  readonly record: EnvironmentRecord;
  readonly phases: Phases | null;
}

async function prepareOnce(
  label: string,
  workspace: string,
  plan: EnvironmentPlan,
  settings: EnvironmentSettings,
  repoKey: string,
  inspect?: (env: PreparedEnvironment) => Promise<void>,
  pool?: WarmPool,
): Promise<ReadySample> {
  const jobId = `bench-env-${label}-${Math.random().toString(36).slice(2, 8)}`;
  const t0 = Date.now();
  const env = await prepareEnvironment({
    workspace,
    probe: hostProbe(workspace),
    jobId,
    repoKey,
    plan,
    settings,
    mayStoreCache: true,
    scrub: (text) => text,
    ...(pool === undefined ? {} : { pool }),
  });
  const t1 = Date.now();
  process.stderr.write(`environment bench: ${label} ready in ${t1 - t0} ms\n`);
  try {
    // The sandbox is usable: the agent's first command runs.
    const r = await env.sandbox.exec('test -d .git && echo ready', { timeoutMs: 30_000 });
    if (!r.output.includes('ready')) throw new Error(`the sandbox is not usable: ${r.output}`);
    await inspect?.(env);
  } finally {
    await env.sandbox.close();
    await env.close();
  }
  const phases = await phasesOf(jobId, t0, t1, env.sandbox.setupReport?.placeMs ?? null).catch(
    (error: unknown) => {
      process.stderr.write(`environment bench: no engine events: ${String(error)}\n`);
      return null;
    },
  );
  process.stderr.write(`environment bench: ${label} done after ${Date.now() - t0} ms\n`);
  return { ms: t1 - t0, record: env.record, phases };
}

/** Where EnvironmentCache keeps an entry (its layout, repeated here to check and replace entries). */
function entryPath(cacheDir: string, repoKey: string, key: string): string {
  const dir = createHash('sha256').update(repoKey).digest('hex').slice(0, 32);
  return join(cacheDir, dir, `${key}.tar`);
}

/**
 * Packs the sandbox's node_modules as the setup phase does (`tar -c` as the sandbox user, in the
 * workspace), through the docker CLI straight into a file. Returns its size.
 */
async function packInto(env: PreparedEnvironment, path: string): Promise<number> {
  const file = await open(path, 'w', 0o600);
  try {
    const code = await new Promise<number | null>((resolve, reject) => {
      const child = spawn(
        'docker',
        [
          'exec',
          '-u',
          env.sandbox.user,
          '-w',
          '/workspace',
          env.sandbox.containerId,
          'tar',
          '-c',
          '-f',
          '-',
          '--',
          'node_modules',
        ],
        { stdio: ['ignore', file.fd, 'ignore'] },
      );
      child.once('error', reject);
      child.once('close', resolve);
    });
    if (code !== 0) throw new Error(`docker exec tar exited with ${String(code)}`);
  } finally {
    await file.close();
  }
  return (await stat(path)).size;
}

async function fileCount(env: PreparedEnvironment): Promise<number> {
  const r = await env.sandbox.exec('find node_modules | wc -l', { timeoutMs: 60_000 });
  return Number.parseInt(r.output.trim(), 10);
}

function expectSetup(sample: ReadySample, cache: string, ran: boolean): void {
  const setup = sample.record.setup;
  if (setup.cache.status !== cache) {
    throw new Error(`expected cache status ${cache}, got ${setup.cache.status}`);
  }
  const c = setup.commands[0];
  if (ran && c?.exitCode !== 0) throw new Error(`setup failed: ${c?.output ?? 'no command'}`);
  if (!ran && (c?.attempts ?? 0) !== 0) throw new Error('setup ran on a cache hit');
}

/** A first job's cache entry as stored, against the same tree packed in full. */
interface StoredEntry {
  readonly storedBytes: number;
  readonly fullBytes: number;
}

interface ReadyResult {
  readonly first: ReadySample[];
  readonly hit: ReadySample[];
  readonly noDeps: ReadySample[];
  /** (b) and (c) again, each job given a container of a warm pool (ISSUE_AGENT_WARM_POOL). */
  readonly hitPool: ReadySample[];
  readonly noDepsPool: ReadySample[];
  readonly stored: StoredEntry[];
  readonly entryBytes: number;
  readonly files: number;
  readonly npmPlan: EnvironmentPlan;
}

async function readyTimes(firstJobs: number, fastJobs: number): Promise<ReadyResult> {
  const deployment = await registryDeployment();
  const npmRepo = await fixtureRepo('npm-jest');
  const noDepsRepo = await fixtureRepo('no-deps');
  const scratch = await mkdtemp(join(tmpdir(), 'ia-bench-env-cache-'));
  let pool: WarmPool | undefined;
  const settings = (cacheDir: string): EnvironmentSettings => ({
    setupEnabled: true,
    allowHosts: [],
    allowCidrs: deployment.allowCidrs,
    extraCaPem: deployment.extraCaPem,
    npmRegistry: null,
    pipIndexUrl: null,
    setupSecrets: {},
    grants: null,
    cacheUnpinnedMs: 24 * 3_600_000,
    cacheDir,
    cacheMaxBytes: 2 * 1024 ** 3,
    setupTimeoutMs: 10 * 60_000,
  });
  const repoKey = 'bench:npm';
  /** Compares the entry the job stored with its node_modules packed in full (see the docs). */
  const checkEntry =
    (cacheDir: string, into: StoredEntry[], replace: boolean) =>
    async (env: PreparedEnvironment): Promise<void> => {
      const key = env.record.setup.cache.key;
      if (key === null) throw new Error('no cache key');
      const path = entryPath(cacheDir, repoKey, key);
      const storedBytes = (await stat(path)).size;
      const full = `${path}.full`;
      const fullBytes = await packInto(env, full);
      into.push({ storedBytes, fullBytes });
      // Mode 0644 as the cache writes its entries: a hit mounts the file read-only for the sandbox user.
      if (replace) {
        await chmod(full, 0o644);
        await rename(full, path);
      } else await rm(full, { force: true });
    };
  try {
    const npmPlan = await planEnvironment(hostProbe(npmRepo), {}, { kind: 'own-checkout' });
    const noDepsPlan = await planEnvironment(hostProbe(noDepsRepo), {}, { kind: 'own-checkout' });
    if (npmPlan.setup.commands.length === 0) throw new Error('the npm fixture planned no setup');
    if (noDepsPlan.setup.commands.length !== 0) throw new Error('the no-dependency fixture planned setup');
    const stored: StoredEntry[] = [];
    // Warm-up, not counted: stores the entry the cache hits use, and warms the image and page cache.
    // The entry is replaced by the complete archive of the same tree: the setup phase's own pack can
    // end early (see the docs), and a hit on a cut archive fails or restores part of node_modules.
    const shared = join(scratch, 'shared');
    let files = 0;
    const warm = await prepareOnce('warm', npmRepo, npmPlan, settings(shared), repoKey, async (env) => {
      files = await fileCount(env);
      await checkEntry(shared, stored, true)(env);
    });
    expectSetup(warm, 'stored', true);
    const complete = async (env: PreparedEnvironment): Promise<void> => {
      const n = await fileCount(env);
      if (n !== files) throw new Error(`a cache hit restored ${n} of ${files} paths of node_modules`);
    };
    expectSetup(
      await prepareOnce('warm', npmRepo, npmPlan, settings(shared), repoKey, complete),
      'hit',
      false,
    );
    await prepareOnce('warm', noDepsRepo, noDepsPlan, settings(shared), 'bench:none');
    const entryBytes = await sizeOfTree(shared);

    const first: ReadySample[] = [];
    const hit: ReadySample[] = [];
    const noDeps: ReadySample[] = [];
    const hitPool: ReadySample[] = [];
    const noDepsPool: ReadySample[] = [];
    // One waiting container of each image, refilled between jobs as a worker's pool is.
    pool = new WarmPool({ images: { [npmPlan.image]: 1, [noDepsPlan.image]: 1 } });
    await pool.start();
    const fromPool = async (s: ReadySample): Promise<ReadySample> => {
      if (s.phases !== null) throw new Error('a job meant for the warm pool got a container of its own');
      await pool?.drain();
      return s;
    };
    for (let round = 0; round < Math.max(firstJobs, fastJobs); round++) {
      if (round < firstJobs) {
        const fresh = join(scratch, `first-${round}`);
        const s = await prepareOnce(
          'first',
          npmRepo,
          npmPlan,
          settings(fresh),
          repoKey,
          checkEntry(fresh, stored, false),
        );
        expectSetup(s, 'stored', true);
        first.push(s);
        await rm(fresh, { recursive: true, force: true });
      }
      if (round < fastJobs) {
        const h = await prepareOnce('hit', npmRepo, npmPlan, settings(shared), repoKey, complete);
        expectSetup(h, 'hit', false);
        if (h.phases !== null && h.phases.execs['unpack the cached environment'] !== undefined) {
          throw new Error('the cache hit unpacked through an exec: the entry was not mounted');
        }
        hit.push(h);
        noDeps.push(await prepareOnce('none', noDepsRepo, noDepsPlan, settings(shared), 'bench:none'));
        const hp = await fromPool(
          await prepareOnce('hit-pool', npmRepo, npmPlan, settings(shared), repoKey, complete, pool),
        );
        expectSetup(hp, 'hit', false);
        hitPool.push(hp);
        noDepsPool.push(
          await fromPool(
            await prepareOnce(
              'none-pool',
              noDepsRepo,
              noDepsPlan,
              settings(shared),
              'bench:none',
              undefined,
              pool,
            ),
          ),
        );
      }
      process.stderr.write(`environment bench: round ${round + 1} done\n`);
    }
    return { first, hit, noDeps, hitPool, noDepsPool, stored, entryBytes, files, npmPlan };
  } finally {
    await pool?.close();
    await rm(scratch, { recursive: true, force: true });
    await rm(npmRepo, { recursive: true, force: true });
    await rm(noDepsRepo, { recursive: true, force: true });
  }
}

async function sizeOfTree(dir: string): Promise<number> {
  let total = 0;
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) total += (await stat(join(entry.parentPath, entry.name))).size;
  }
  return total;
}

// ---------------------------------------------------------------------------------------------
// Proxy overhead: host npm ci, direct and through the egress proxy.

/** The host's environment without any proxy setting of its own. */
function npmEnv(): NodeJS.ProcessEnv {
  const proxyVar = /^(https?_proxy|no_proxy|all_proxy|npm_config_(https_)?proxy|npm_config_cache)$/i;
  return Object.fromEntries([
    ...Object.entries(process.env).filter(([k]) => !proxyVar.test(k)),
    ['npm_config_update_notifier', 'false'],
  ]);
}

async function npmCi(dir: string, proxyUrl: string | null): Promise<number> {
  const cache = await mkdtemp(join(tmpdir(), 'ia-bench-npm-cache-'));
  const args = ['ci', '--no-audit', '--no-fund', '--loglevel=error', '--cache', cache];
  if (proxyUrl !== null) args.push('--proxy', proxyUrl, '--https-proxy', proxyUrl);
  try {
    await rm(join(dir, 'node_modules'), { recursive: true, force: true });
    const t = performance.now();
    const out: Buffer[] = [];
    const code = await new Promise<number | null>((resolve, reject) => {
      const child = spawn('npm', args, { cwd: dir, env: npmEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
      child.stdout.on('data', (c: Buffer) => out.push(c));
      child.stderr.on('data', (c: Buffer) => out.push(c));
      child.once('error', reject);
      child.once('close', resolve);
    });
    const elapsed = performance.now() - t;
    if (code !== 0) throw new Error(`npm ci exited with ${String(code)}: ${Buffer.concat(out).toString()}`);
    return elapsed;
  } finally {
    await rm(cache, { recursive: true, force: true });
  }
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) =>
    server.close(() => {
      resolve();
    }),
  );
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

async function waitForPort(port: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => {
        resolve(false);
      });
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`nothing listens on 127.0.0.1:${port}`);
}

interface ProxyResult {
  readonly direct: number[];
  readonly proxied: number[];
  /** proxied / direct, pair by pair. */
  readonly pairRatios: number[];
  readonly requestsPerRun: number;
  readonly bytesDownPerRun: number;
  readonly refused: number;
  /** CPU of this process (the proxy, in it) per proxied run. */
  readonly proxyCpuMsPerRun: number;
  readonly npmVersion: string;
}

async function proxyOverhead(pairs: number): Promise<ProxyResult> {
  const deployment = await registryDeployment();
  const dir = await mkdtemp(join(tmpdir(), 'ia-bench-env-host-'));
  const sockDir = await mkdtemp(join(tmpdir(), 'ia-bench-egress-'));
  const entries: EgressLogEntry[] = [];
  const proxy = await startEgressProxy({
    socketPath: join(sockDir, 'proxy.sock'),
    allowHosts: ['registry.npmjs.org'],
    allowPrivate: deployment.allowCidrs,
    onRequest: (e) => entries.push(e),
  });
  const port = await freePort();
  // The same forwarder the sandbox runs (setup-phase.ts), here on the host's loopback.
  const socat = spawn(
    'socat',
    [`TCP-LISTEN:${port},bind=127.0.0.1,reuseaddr,fork`, `UNIX-CONNECT:${proxy.socketPath}`],
    { stdio: 'ignore' },
  );
  try {
    await waitForPort(port);
    await cp(join(FIXTURES, 'npm-jest'), dir, { recursive: true });
    const proxyUrl = `http://127.0.0.1:${port}`;
    const npmVersion = (await run('npm', ['--version'], { env: npmEnv() })).stdout.trim();
    // Warm-up, not counted (npm's own code into the page cache; a cold cache for the packages all the same).
    await npmCi(dir, null);
    await npmCi(dir, proxyUrl);
    entries.length = 0;
    const direct: number[] = [];
    const proxied: number[] = [];
    const pairRatios: number[] = [];
    let cpuMs = 0;
    for (let i = 0; i < pairs; i++) {
      const viaProxy = async (): Promise<number> => {
        const cpu = process.cpuUsage();
        const t = await npmCi(dir, proxyUrl);
        const used = process.cpuUsage(cpu);
        cpuMs += (used.user + used.system) / 1000;
        return t;
      };
      let d: number;
      let p: number;
      if (i % 2 === 0) {
        d = await npmCi(dir, null);
        p = await viaProxy();
      } else {
        p = await viaProxy();
        d = await npmCi(dir, null);
      }
      direct.push(d);
      proxied.push(p);
      pairRatios.push(p / d);
      process.stderr.write(`environment bench: proxy pair ${i + 1} done\n`);
    }
    const allowed = entries.filter((e) => e.allowed);
    if (allowed.length === 0) throw new Error('no request went through the proxy');
    return {
      direct,
      proxied,
      pairRatios,
      requestsPerRun: allowed.length / pairs,
      bytesDownPerRun: allowed.reduce((n, e) => n + e.bytesDown, 0) / pairs,
      refused: entries.length - allowed.length,
      proxyCpuMsPerRun: cpuMs / pairs,
      npmVersion,
    };
  } finally {
    socat.kill('SIGTERM');
    await proxy.close();
    await rm(sockDir, { recursive: true, force: true });
    await rm(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------

function phaseTable(title: string, samples: readonly ReadySample[]): string[] {
  const phases = samples.flatMap((s) => (s.phases === null ? [] : [s.phases]));
  if (phases.length === 0) return [`(${title}: no engine events)`];
  const steps = [...new Set(phases.flatMap((p) => Object.keys(p.execs)))];
  const rows: [string, number[]][] = [
    [
      'before the container (image inspect, input hashes, cache lookup, proxy)',
      phases.map((p) => p.beforeContainer),
    ],
    ['container create + start', phases.map((p) => p.createStart)],
    ...steps.map((s): [string, number[]] => [`exec: ${s}`, phases.map((p) => p.execs[s] ?? 0)]),
    ['after the last setup exec: shells start, files placed', phases.map((p) => p.shells)],
    ...(phases.some((p) => p.place !== null)
      ? [
          [
            '… of which the harness shell places the files (copy, entry, exclusions)',
            phases.map((p) => p.place ?? 0),
          ] as [string, number[]],
        ]
      : []),
    ['between execs (host side)', phases.map((p) => p.gaps)],
  ];
  return [
    `| ${title}: step | median | range |`,
    '| --- | --- | --- |',
    ...rows.map(([name, xs]) => `| ${name} | ${msText(median(xs))} | ${range(xs, msText)} |`),
  ];
}

/** Runs both measurements and prints them as Markdown. */
export async function environmentBench(options: EnvironmentBenchOptions = {}): Promise<void> {
  const firstJobs = options.firstJobs ?? 5;
  const fastJobs = options.fastJobs ?? 9;
  const pairs = options.proxyPairs ?? 7;
  const ready = await readyTimes(firstJobs, fastJobs);
  const f = ready.first.map((s) => s.ms);
  const h = ready.hit.map((s) => s.ms);
  const n = ready.noDeps.map((s) => s.ms);
  const npmCiInside = ready.first.map((s) => s.record.setup.commands[0]?.durationMs ?? NaN);
  const pairedHitNone = ready.hit.map((s, i) => s.ms / (ready.noDeps[i]?.ms ?? NaN));
  console.log(
    `\nEnvironment ready time (prepareEnvironment called → resolved), ${ready.npmPlan.image}, ` +
      `setup \`${ready.npmPlan.setup.commands.map((c) => c.command).join('; ')}\`, ` +
      `cache entry ${(ready.entryBytes / 1024 ** 2).toFixed(1)} MiB:\n`,
  );
  console.log('| job | runs | median | range | target |\n| --- | --- | --- | --- | --- |');
  console.log(
    `| (a) first job: setup through the proxy, entry stored | ${f.length} | ${sec(median(f))} | ${range(f, sec)} | |`,
  );
  console.log(
    `| … of which \`npm ci\` in the sandbox | ${f.length} | ${sec(median(npmCiInside))} | ${range(npmCiInside, sec)} | |`,
  );
  console.log(
    `| (b) same repository again: cache hit, setup skipped | ${h.length} | ${sec(median(h))} | ${range(h, sec)} | |`,
  );
  console.log(
    `| (c) no dependencies: no lockfile, no setup | ${n.length} | ${sec(median(n))} | ${range(n, sec)} | |`,
  );
  console.log(`| cache hit / no dependencies (medians) | | ${ratio(median(h) / median(n))} | | ≤ 1.5× |`);
  console.log(
    `| cache hit / no dependencies (median of the rounds' ratios) | | ${ratio(median(pairedHitNone))} | ${range(pairedHitNone, ratio)} | |`,
  );
  console.log(`| cache hit / first job (medians) | | ${ratio(median(h) / median(f))} | | ≤ 0.2× |`);
  const hp = ready.hitPool.map((s) => s.ms);
  const np = ready.noDepsPool.map((s) => s.ms);
  console.log(
    `| (d) cache hit, in a warm pool's container (entry linked into its folder) | ${hp.length} | ${sec(median(hp))} | ${range(hp, sec)} | |`,
  );
  console.log(
    `| (e) no dependencies, in a warm pool's container | ${np.length} | ${sec(median(np))} | ${range(np, sec)} | |`,
  );
  console.log(
    `| (d) / (b): a cache hit from the pool / in a new container | | ${ratio(median(hp) / median(h))} | | |`,
  );
  const cut = ready.stored.filter((e) => e.storedBytes < e.fullBytes);
  console.log(
    `| entries stored by the setup phase shorter than node_modules packed in full | ${cut.length} of ${ready.stored.length} | ${cut.map((e) => `${(e.storedBytes / 1024 ** 2).toFixed(1)}/${(e.fullBytes / 1024 ** 2).toFixed(1)} MiB`).join(', ')} | | |`,
  );
  console.log(`| paths in node_modules (every cache hit checked for all of them) | ${ready.files} | | | |`);
  console.log('\nWhere the time goes (engine events; an exec counts from its creation to its end):\n');
  for (const line of phaseTable('(b) cache hit', ready.hit)) console.log(line);
  console.log('');
  for (const line of phaseTable('(c) no dependencies', ready.noDeps)) console.log(line);
  console.log('');
  for (const line of phaseTable('(a) first job', ready.first)) console.log(line);

  const p = await proxyOverhead(pairs);
  console.log(
    `\n\`npm ci\` on the host (npm ${p.npmVersion}, Node ${process.version}), same lockfile, npm cache a new empty directory each run, ${pairs} pairs:\n`,
  );
  console.log('| measure | median | range | target |\n| --- | --- | --- | --- |');
  console.log(`| direct | ${sec(median(p.direct))} | ${range(p.direct, sec)} | |`);
  console.log(
    `| through the egress proxy (socat → unix socket → proxy) | ${sec(median(p.proxied))} | ${range(p.proxied, sec)} | |`,
  );
  console.log(`| proxied / direct (medians) | ${ratio(median(p.proxied) / median(p.direct))} | | ≤ 1.1× |`);
  console.log(
    `| proxied / direct (median of pair ratios) | ${ratio(median(p.pairRatios))} | ${range(p.pairRatios, ratio)} | |`,
  );
  console.log(
    `| proxy: requests per run, refused in all | ${p.requestsPerRun.toFixed(0)}, ${p.refused} | | |`,
  );
  console.log(`| proxy: MiB down per run | ${(p.bytesDownPerRun / 1024 ** 2).toFixed(1)} | | |`);
  console.log(`| proxy: CPU per run (this process) | ${msText(p.proxyCpuMsPerRun)} | | |`);
  console.log(
    `| \`npm ci\` in the sandbox through the proxy (first jobs, npm of the image) / host direct | ${ratio(median(npmCiInside) / median(p.direct))} | | |`,
  );
}
