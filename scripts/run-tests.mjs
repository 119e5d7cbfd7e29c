// Runs every test file, each in a process of its own (node's test runner, TypeScript through
// scripts/ts-hooks.mjs), a few at a time, longest first, and prints each file's report whole when it
// ends, then the totals and the ten slowest files. Extra arguments filter by path substring.
//
// Why not `node --test a b c …`: that runs files in the order given with no idea of their length, its
// reports of concurrent files interleave line by line, and it names no file's time. Here the order
// comes from scripts/test-durations.json (seconds per file in a CI run on the 2-core reference
// machine; refresh it with `npm run test:unit -- --record <path>` and copy it in; a file not listed
// counts as a short one), so the long files start first and the short ones fill in around them.
//
// Heavy files (an estimate of HEAVY_SECONDS or more: whole jobs with a worker, sandboxes, containers)
// run at most ISSUE_AGENT_TEST_HEAVY at once (default 2), on at most ISSUE_AGENT_TEST_CONCURRENCY lanes
// (default 3): the third lane runs the short files beside two long ones, so they are off the critical
// path without a third job competing for two cores (a job's timeouts are sized for two at once).
// ISSUE_AGENT_TEST_FILE_TIMEOUT_S stops a file that hangs (default 1200 s) and counts it as failed, so a
// stuck file cannot eat CI's whole budget.
//
// `--built` (what `npm test` passes, right after its checks built dist/): the programs the tests start
// (the App, workers, the CLI, the Action) run compiled from dist/ instead of from source
// (test/support/entry.ts). Without it, a run tests today's source without a build.
import { Buffer } from 'node:buffer';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { clearTimeout, setTimeout } from 'node:timers';

/** TypeScript for the test processes (scripts/ts-hooks.mjs: what tsx does, about 1 s of CPU less per file). */
const TS_HOOKS = pathToFileURL(join(import.meta.dirname, 'ts-hooks.mjs')).href;

function walk(dir) {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return name === 'fixtures' ? [] : walk(p);
    return p.endsWith('.test.ts') ? [p] : [];
  });
}

const args = process.argv.slice(2);
let recordPath;
const filters = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--record') recordPath = args[++i];
  else if (args[i] === '--built') process.env.ISSUE_AGENT_TEST_FROM_DIST = '1';
  else filters.push(args[i]);
}

const DURATIONS = 'scripts/test-durations.json';
const known = existsSync(DURATIONS) ? JSON.parse(readFileSync(DURATIONS, 'utf8')) : {};
const estimate = (f) => (typeof known[f] === 'number' ? known[f] : 5);
const files = walk('test')
  .filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)))
  .sort()
  .sort((a, b) => estimate(b) - estimate(a));
if (files.length === 0) {
  console.error('no test files matched');
  process.exit(1);
}

function positiveInt(name, fallback) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) {
    console.error(`${name} must be a whole number of at least 1, not ${JSON.stringify(raw)}`);
    process.exit(2);
  }
  return n;
}
const concurrency = positiveInt('ISSUE_AGENT_TEST_CONCURRENCY', 3);
const heavyLimit = positiveInt('ISSUE_AGENT_TEST_HEAVY', 2);
// Where the two heavy lanes' share (their files' time / 2) meets a third of the whole (all files'
// time / 3) in scripts/test-durations.json: a lower bound leaves the third lane idle at the end, a
// higher one puts three jobs at once more often. Revisit it when the durations are refreshed.
const HEAVY_SECONDS = 50;
const isHeavy = (f) => estimate(f) >= HEAVY_SECONDS;
const fileTimeoutMs = positiveInt('ISSUE_AGENT_TEST_FILE_TIMEOUT_S', 1200) * 1000;

// The attack suite (test/security) tallies every attack it tries here; the total is printed last.
const tally = mkdtempSync(join(tmpdir(), 'ia-attacks-'));
const attackLog = join(tally, 'attacks.jsonl');

const COUNTS = ['tests', 'suites', 'pass', 'fail', 'cancelled', 'skipped', 'todo'];
const totals = Object.fromEntries(COUNTS.map((k) => [k, 0]));
const results = [];
const running = new Set();

function runFile(file) {
  return new Promise((resolve) => {
    const started = Date.now();
    // Its own process group, so a file that hangs is stopped with everything it started.
    // Through bash for its `times`: the CPU the file's whole process tree used (every descendant that
    // was waited for, which is all of a test's own processes; containers run under the engine and are
    // not counted), printed on fd 3 so it never mixes with the report.
    const child = spawn(
      'bash',
      [
        '-c',
        '"$@"; s=$?; times >&3; exit $s',
        'test-file',
        process.execPath,
        '--import',
        TS_HOOKS,
        '--test-reporter=spec',
        file,
      ],
      {
        env: { ...process.env, ISSUE_AGENT_ATTACK_LOG: attackLog },
        stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
        detached: true,
      },
    );
    running.add(child);
    const chunks = [];
    child.stdout.on('data', (c) => chunks.push(c));
    child.stderr.on('data', (c) => chunks.push(c));
    const timesOut = [];
    child.stdio[3].on('data', (c) => timesOut.push(c));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child);
    }, fileTimeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      running.delete(child);
      resolve({
        file,
        code,
        signal,
        timedOut,
        seconds: (Date.now() - started) / 1000,
        cpu: childrenCpu(Buffer.concat(timesOut).toString('utf8')),
        output: Buffer.concat(chunks).toString('utf8'),
      });
    });
  });
}

/** bash's `times`: the shell's own user/system line, then its children's; their sum in seconds. */
function childrenCpu(text) {
  const lines = text.trim().split('\n');
  const m = (lines[1] ?? '').match(/^(\d+)m([\d.]+)s (\d+)m([\d.]+)s$/);
  if (m === null) return undefined;
  return Number(m[1]) * 60 + Number(m[2]) + Number(m[3]) * 60 + Number(m[4]);
}

function killGroup(child) {
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    for (const child of running) killGroup(child);
    rmSync(tally, { recursive: true, force: true });
    process.exit(130);
  });
}

await imagesBuilt();

/**
 * `.ci/run` builds the sandbox and App images while npm installs and the checks run, and names the
 * file the build writes its exit status to: wait for it (no test may start without the images), and
 * stop with the build's log if it failed.
 */
async function imagesBuilt() {
  const status = process.env.ISSUE_AGENT_IMAGES_STATUS;
  if (status === undefined || status === '') return;
  const since = Date.now();
  let said = false;
  while (!existsSync(status)) {
    if (!said) console.log(`waiting for the images to build (${status})`);
    said = true;
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
  if (said) console.log(`the images were ready after ${((Date.now() - since) / 1000).toFixed(0)} s more`);
  const code = readFileSync(status, 'utf8').trim();
  if (code === '0') return;
  const logFile = join(status, '..', 'log');
  console.error(`the image build failed (exit ${code}):`);
  console.error(existsSync(logFile) ? readFileSync(logFile, 'utf8') : `(no log at ${logFile})`);
  process.exit(1);
}

const started = Date.now();
const pending = [...files];
let heavyRunning = 0;
let done = 0;
/** The longest pending file this lane may start now: a heavy one only while a heavy slot is free. */
function take() {
  const i = pending.findIndex((f) => !isHeavy(f) || heavyRunning < heavyLimit);
  return i === -1 ? undefined : pending.splice(i, 1)[0];
}
let wake = () => {};
async function lane() {
  for (;;) {
    const file = take();
    if (file === undefined) {
      if (pending.length === 0) return;
      // Only heavy files are left and their slots are taken: wait for one to end.
      await new Promise((resolve) => {
        const previous = wake;
        wake = () => {
          previous();
          resolve();
        };
      });
      continue;
    }
    const heavy = isHeavy(file);
    if (heavy) heavyRunning++;
    const r = await runFile(file);
    if (heavy) heavyRunning--;
    const woken = wake;
    wake = () => {};
    woken();
    done++;
    const counts = {};
    for (const k of COUNTS) {
      const m = r.output.match(new RegExp(`^ℹ ${k} (\\d+)$`, 'm'));
      counts[k] = m ? Number(m[1]) : 0;
      totals[k] += counts[k];
    }
    // A file that exits non-zero, is stopped, or never printed its summary has failed, whatever its
    // counts say (a crash at load time prints no test at all).
    const ok = r.code === 0 && !r.timedOut && /^ℹ tests \d+$/m.test(r.output);
    results.push({ ...r, ok, counts });
    const why = r.timedOut
      ? ` (stopped after ${fileTimeoutMs / 1000} s)`
      : ok
        ? ''
        : ` (exit ${r.code ?? r.signal})`;
    process.stdout.write(
      `\n━━ ${ok ? '✔' : '✖'} ${file} · ${r.seconds.toFixed(1)} s (CPU ${r.cpu?.toFixed(1) ?? '?'} s) · ${done}/${files.length}${why}\n`,
    );
    process.stdout.write(r.output.endsWith('\n') || r.output === '' ? r.output : `${r.output}\n`);
  }
}
await Promise.all(Array.from({ length: Math.min(concurrency, files.length) }, () => lane()));
const wall = (Date.now() - started) / 1000;

let attacks = [];
try {
  attacks = readFileSync(attackLog, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l));
} catch {
  attacks = [];
}
rmSync(tally, { recursive: true, force: true });

const failed = results.filter((r) => !r.ok);

/**
 * The spec reporter's "failing tests" section of one file's report, without stack frames (test
 * names, locations and error messages, which hold the assertion's own message with the output it
 * quotes), at most DIGEST_LINES lines; a file with no such section (a crash at load time, a hang)
 * gives its report's last lines instead.
 */
function failureDigest(output) {
  const DIGEST_LINES = 60;
  const lines = output.split('\n');
  const start = lines.lastIndexOf('✖ failing tests:');
  const picked =
    start === -1
      ? lines.filter((l) => l.trim() !== '').slice(-20)
      : lines.slice(start + 1).filter((l) => l.trim() !== '' && !/^\s+at /.test(l));
  return picked.length > DIGEST_LINES
    ? [
        ...picked.slice(0, DIGEST_LINES),
        `… ${picked.length - DIGEST_LINES} more lines in the file's report above`,
      ]
    : picked;
}
console.log(
  `\n━━ ${files.length} files, ${concurrency} at a time (${heavyLimit} heavy), ${(wall / 60).toFixed(1)} min`,
);
for (const k of COUNTS) console.log(`ℹ ${k} ${totals[k]}`);
const cpuTotal = results.reduce((sum, r) => sum + (r.cpu ?? 0), 0);
console.log(`CPU of the test processes (user + system): ${(cpuTotal / 60).toFixed(1)} min`);
const cpuText = (r) => (r.cpu === undefined ? '      ?' : r.cpu.toFixed(1).padStart(7));
console.log('slowest files (wall, CPU):');
for (const r of [...results].sort((a, b) => b.seconds - a.seconds).slice(0, 10)) {
  console.log(`  ${r.seconds.toFixed(1).padStart(7)} s ${cpuText(r)} s  ${r.file}`);
}
console.log('most CPU:');
for (const r of [...results].sort((a, b) => (b.cpu ?? 0) - (a.cpu ?? 0)).slice(0, 10)) {
  console.log(`  ${cpuText(r)} s  ${r.file}`);
}
if (recordPath) {
  const measured = Object.fromEntries(
    [...results]
      .sort((a, b) => a.file.localeCompare(b.file))
      .map((r) => [r.file, Math.round(r.seconds * 10) / 10]),
  );
  const cpu = Object.fromEntries(
    [...results]
      .sort((a, b) => a.file.localeCompare(b.file))
      .map((r) => [r.file, r.cpu === undefined ? null : Math.round(r.cpu * 10) / 10]),
  );
  writeFileSync(recordPath.replace(/(\.json)?$/, '.cpu.json'), `${JSON.stringify(cpu, null, 2)}\n`);
  writeFileSync(recordPath, `${JSON.stringify(measured, null, 2)}\n`);
  console.log(`durations written to ${recordPath}`);
}
if (attacks.length > 0) {
  const succeeded = attacks.filter((a) => a.succeeded);
  for (const a of succeeded) console.log(`attack succeeded: ${a.name}`);
  console.log(`security: ${attacks.length} attacks tried, ${succeeded.length} succeeded`);
}
if (failed.length > 0) {
  // Each failed file's report was printed when it ended, far above; its failures are repeated here,
  // where a reader of the log's tail (CI keeps only the end) finds why, not just where.
  console.log('why they failed:');
  for (const r of failed) {
    console.log(`  ${r.file}${r.timedOut ? ` (stopped after ${fileTimeoutMs / 1000} s)` : ''}`);
    for (const line of failureDigest(r.output)) console.log(`    ${line}`);
  }
  console.log(`failed files (${failed.length}):`);
  for (const r of failed) console.log(`  ${r.file}`);
}
process.exit(failed.length > 0 || totals.fail > 0 ? 1 : 0);
