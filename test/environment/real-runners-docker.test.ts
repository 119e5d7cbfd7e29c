import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { TestContext } from 'node:test';
import { runTestCommand, type TestRunResult } from '../../src/agent/run-test-command.js';
import type { RunnerKind } from '../../src/testing/parse-test-output.js';
import { DEFAULT_LIMITS } from '../../src/config/agent-env.js';
import { hostProbe } from '../../src/environment/host-probe.js';
import type { EnvironmentPlan } from '../../src/environment/plan.js';
import { prepareEnvironment, type PreparedEnvironment } from '../../src/environment/prepare.js';
import { registryDeployment } from '../support/egress-env.js';
import { dockerTest } from '../sandbox/docker/docker-test-support.js';

/**
 * The test-output parser against what jest, vitest and mocha really print, end to end: each project
 * in test/fixtures/runner-projects is installed by `npm ci` through the egress proxy in a Docker
 * sandbox, and its tests run the way the harness runs a baseline or final run (runTestCommand through
 * the harness shell, in the sandbox's environment: CI=true, TERM=dumb, output piped). The expected
 * counts and names were written by reading the runners' output, not taken from the parser.
 *
 * Every project has the same three files: `math` (a pass, a nested describe, a failing test, a skip, a
 * todo or pending test, a parametrised test), `strings` (quotes, `›` and non-ASCII in names, a failing
 * test, a test at the top of the file) and `parse` (passes entirely; brackets, `<>`, `$`, `%`, `:` and a
 * backslash in names).
 */

const run = promisify(execFile);

const PROJECTS = fileURLToPath(new URL('../fixtures/runner-projects/', import.meta.url));
const ESC = String.fromCharCode(27);

interface Expected {
  /** What `npm test` exits with: npm passes on the runner's status (mocha's is its failure count). */
  readonly exitCode: number;
  /** passed, failed, skipped (skipped includes todo and pending). */
  readonly counts: readonly [number, number, number];
  readonly failed: readonly string[];
  readonly passed: readonly string[];
}

interface RunnerCase {
  readonly runner: RunnerKind;
  /** The project's default output: `npm test` as its package.json says. */
  readonly plain: Expected;
  /** A reporter that names every test, where the default one does not (`npm test -- <args>`). */
  readonly verbose?: { readonly args: string; readonly expected: Expected };
}

// Ids as docs/testing.md documents them: `file::describe > test` where the runner says the file (the
// harness asks jest and vitest for their JSON report, which names every test with its file, whatever
// the console shows), the title path alone where it does not (mocha's spec reporter).
const titles = {
  math: {
    failing: ['math > divides with rounding'],
    passing: ['math > adds', 'math > nested > deeper > multiplies'],
    each: ['math > add(1, 1) = 2', 'math > add(2, 3) = 5'],
  },
  strings: {
    failing: ['strings "quoted" › arrow > trims › whitespace'],
    passing: [
      `strings "quoted" › arrow > handles 'single' and "double" quotes`,
      'strings "quoted" › arrow > unicode ünïcödé ✓ 日本語 🚀',
      'top level passes',
    ],
  },
  parse: [
    'parse > with [brackets] & (parens) > keeps <angle> tags, $dollars and 100% of it',
    'parse > with [brackets] & (parens) > reads a:colon and a back\\slash',
    'parse > ends with (parens)',
  ],
};

/** Every test of the three files, with ids in `dir/<file>.test.js::…`. */
function fileIds(dir: string): { failed: string[]; passed: string[] } {
  const id = (file: string, names: readonly string[]): string[] =>
    names.map((n) => `${dir}/${file}.test.js::${n}`);
  return {
    failed: [...id('math', titles.math.failing), ...id('strings', titles.strings.failing)],
    passed: [
      ...id('math', [...titles.math.passing, ...titles.math.each]),
      ...id('strings', titles.strings.passing),
      ...id('parse', titles.parse),
    ],
  };
}

const jestIds = fileIds('__tests__');
const vitestIds = fileIds('test');

const CASES: Record<'jest' | 'vitest' | 'mocha', RunnerCase> = {
  jest: {
    runner: 'jest',
    // Tests: 2 failed, 1 skipped, 1 todo, 10 passed. Without --verbose jest's console names no passing
    // test; its JSON report, which the harness asks for beside it, names them all.
    plain: { exitCode: 1, counts: [10, 2, 2], ...jestIds },
    verbose: { args: '--verbose', expected: { exitCode: 1, counts: [10, 2, 2], ...jestIds } },
  },
  vitest: {
    runner: 'vitest',
    // Tests 2 failed | 10 passed | 1 skipped | 1 todo; its JSON report names every test.
    plain: { exitCode: 1, counts: [10, 2, 2], ...vitestIds },
    verbose: { args: '--reporter=verbose', expected: { exitCode: 1, counts: [10, 2, 2], ...vitestIds } },
  },
  mocha: {
    runner: 'mocha',
    // 8 passing, 2 pending (a skip and a test without a body), 2 failing. No test.each in mocha.
    plain: {
      exitCode: 2,
      counts: [8, 2, 2],
      failed: [...titles.math.failing, ...titles.strings.failing],
      passed: [...titles.math.passing, ...titles.strings.passing, ...titles.parse],
    },
  },
};

function sorted(names: readonly string[]): string[] {
  return [...names].sort();
}

/** The project as a fresh git repository, as the worker's clone would be. */
async function projectRepo(t: TestContext, name: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `ia-runner-${name}-`));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await cp(join(PROJECTS, name), dir, { recursive: true });
  await writeFile(join(dir, '.gitignore'), 'node_modules/\n');
  await run('git', ['init', '-q', '-b', 'main', dir]);
  await run('git', ['-C', dir, 'add', '-A']);
  await run('git', ['-C', dir, '-c', 'user.name=t', '-c', 'user.email=t@e', 'commit', '-qm', 'init']);
  return dir;
}

/** What the planner gives a repository with a package-lock.json, on the default image. */
function npmPlan(): EnvironmentPlan {
  return {
    image: 'issue-agent/node:22',
    runtimes: [{ language: 'node', version: '22', requested: null, source: 'default' }],
    setup: {
      source: 'detected',
      reason: 'package-lock.json is present',
      commands: [{ command: 'npm ci --no-audit --no-fund', reason: 'install the locked dependencies' }],
      outputs: ['node_modules'],
      inputs: ['package.json', 'package-lock.json'],
      testEnv: {},
    },
    env: {},
    setupAllowHosts: ['registry.npmjs.org'],
    agentAllowHosts: [],
    secretNames: [],
    // Every run installs through the proxy: that is what the test checks.
    cache: false,
    trust: { trusted: true, secrets: true, reason: 'a test plan', setupEnv: {} },
  };
}

async function prepare(t: TestContext, workspace: string): Promise<PreparedEnvironment> {
  const deployment = await registryDeployment();
  const cacheDir = await mkdtemp(join(tmpdir(), 'ia-runner-cache-'));
  t.after(() => rm(cacheDir, { recursive: true, force: true }));
  const env = await prepareEnvironment({
    workspace,
    probe: hostProbe(workspace),
    jobId: `runner-${Math.random().toString(36).slice(2, 8)}`,
    repoKey: 'test:real-runners',
    plan: npmPlan(),
    settings: {
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
      cacheMaxBytes: 1024 ** 3,
      setupTimeoutMs: 3 * 60_000,
    },
    mayStoreCache: false,
    scrub: (text) => text,
  });
  t.after(async () => {
    await env.sandbox.close();
    await env.close();
  });
  return env;
}

/** npm ci succeeded and reached the registry through the proxy, and nothing else. */
function assertInstalledThroughProxy(t: TestContext, env: PreparedEnvironment): void {
  const setup = env.record.setup.commands[0];
  assert.ok(setup !== undefined, 'the plan has one setup command');
  assert.equal(setup.exitCode, 0, setup.output);
  const egress = env.record.egress.setup;
  assert.ok(egress !== null, 'setup ran through the egress proxy');
  t.diagnostic(
    `npm ci: ${setup.durationMs} ms, ${egress.totals.requests} requests, ${egress.totals.bytesDown} bytes down`,
  );
  assert.ok(
    egress.requests.some((r) => r.allowed && r.host === 'registry.npmjs.org' && r.bytesDown > 0),
    'npm fetched from registry.npmjs.org',
  );
  assert.deepEqual(
    [...new Set(egress.requests.map((r) => r.host))],
    ['registry.npmjs.org'],
    'no other host was asked for',
  );
  assert.deepEqual(egress.denied, [], 'nothing was denied');
  assert.equal(egress.totals.denied, 0);
}

function assertSummary(r: TestRunResult, runner: RunnerKind, expected: Expected): void {
  const context = `${r.command}\n--- output ---\n${r.output}`;
  assert.equal(r.killed, null, context);
  assert.equal(r.exitCode, expected.exitCode, context);
  const s = r.summary;
  assert.equal(s.runner, runner, context);
  assert.deepEqual([s.passed, s.failed, s.skipped], expected.counts, context);
  assert.deepEqual(sorted(s.failedNames), sorted(expected.failed), context);
  assert.deepEqual(sorted(s.passedNames), sorted(expected.passed), context);
}

/**
 * Runs one variant of the project's test command as the harness does and checks its summary; a
 * subtest each, so one variant failing still shows the others.
 */
async function checkRun(
  t: TestContext,
  env: PreparedEnvironment,
  label: string,
  command: string,
  runner: RunnerKind,
  expected: Expected,
  via: 'agent' | 'harness' = 'harness',
): Promise<TestRunResult | null> {
  let result: TestRunResult | null = null;
  await t.test(label, async () => {
    result = await runTestCommand(env.sandbox, command, DEFAULT_LIMITS, undefined, via);
    assertSummary(result, runner, expected);
  });
  return result;
}

function runnerTest(name: keyof typeof CASES): void {
  const c = CASES[name];
  dockerTest(
    `real runners: ${name} installed by npm ci through the egress proxy; its output parsed as the harness parses it`,
    async (_docker, t) => {
      const env = await prepare(t, await projectRepo(t, name));
      assertInstalledThroughProxy(t, env);

      const plain = await checkRun(t, env, 'npm test', 'npm test', c.runner, c.plain);
      // The agent's own run_tests, in its shell (another user than the harness's): the report the
      // harness asks for is written and read there too.
      await checkRun(t, env, "npm test in the agent's shell", 'npm test', c.runner, c.plain, 'agent');
      const color = await checkRun(
        t,
        env,
        'FORCE_COLOR=1 npm test',
        'FORCE_COLOR=1 npm test',
        c.runner,
        c.plain,
      );
      // Only the coloured run is checked for colour codes: the plain runs have some too (jest's code
      // frames, mocha's ✔, all of vitest's output under CI=true).
      await t.test('plain and coloured runs give the same names; the coloured one has colour codes', () => {
        assert.ok(plain !== null && color !== null, 'both runs finished');
        assert.ok(color.output.includes(`${ESC}[`), 'FORCE_COLOR=1 output is coloured');
        assert.deepEqual(sorted(color.summary.failedNames), sorted(plain.summary.failedNames));
        assert.deepEqual(sorted(color.summary.passedNames), sorted(plain.summary.passedNames));
      });
      if (c.verbose !== undefined) {
        const { args, expected } = c.verbose;
        await checkRun(t, env, `npm test -- ${args}`, `npm test -- ${args}`, c.runner, expected);
        await checkRun(
          t,
          env,
          `FORCE_COLOR=1 npm test -- ${args}`,
          `FORCE_COLOR=1 npm test -- ${args}`,
          c.runner,
          expected,
        );
      }
    },
    { timeout: 240_000 },
  );
}

runnerTest('jest');
runnerTest('vitest');
runnerTest('mocha');
