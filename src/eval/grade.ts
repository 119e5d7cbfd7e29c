import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { AgentEnv } from '../config/agent-env.js';
import type { Sandbox } from '../sandbox/sandbox.js';
import { shellQuote } from '../sandbox/shell-session.js';
import { provision, type SandboxChoice } from '../execution/provision.js';
import { checkoutAt, patchPaths, type Checkout } from './checkout.js';
import type { EvalTask } from './tasks.js';
import { baseRunnerConfig } from './grade-runner-config.js';
import { runnerConfigNote, type RunnerConfigTouch } from '../testing/runner-config.js';
import { firstBounds } from '../testing/bounds.js';
import type { RunnerKind } from '../testing/detect-test-command.js';
import { runTests } from '../testing/run-tests.js';
import { worse, type TestFact, type TestStatus } from '../testing/test-run.js';

/**
 * Grading as SWE-bench does it, by the harness and never by the agent: a fresh checkout at the base
 * commit, the model's patch applied, the test files of the test patch put back to the base and the
 * test patch applied, then the listed tests run in a new sandbox of the same kind (the environment
 * prepared as for the agent; the environment cache makes that cheap). Resolved when every
 * FAIL_TO_PASS test and every PASS_TO_PASS test passes. The agent never sees the test patch.
 */

export interface TestsStatus {
  readonly success: readonly string[];
  readonly failure: readonly string[];
}

export interface Grade {
  /** `error`: the harness could not grade (the test patch did not apply, the sandbox failed). */
  readonly status: 'resolved' | 'unresolved' | 'error';
  readonly patchExists: boolean;
  readonly patchApplied: boolean;
  readonly reason: string | null;
  readonly tests: { readonly FAIL_TO_PASS: TestsStatus; readonly PASS_TO_PASS: TestsStatus };
  /** Listed tests that did not pass, with what they did ("absent" when the run did not report them). */
  readonly failing: readonly { readonly id: string; readonly status: TestStatus | 'absent' }[];
  /** The end of the test runs' output (what to read when a listed test is absent). */
  readonly outputTail: string;
  /** Time spent running the tests (inside the sandbox), and grading in all. */
  readonly testMs: number;
  readonly gradeMs: number;
  /**
   * The patch's files that decide how tests run, which grading took from the base commit instead
   * (grade-runner-config.ts); absent when the patch touches none.
   */
  readonly runnerConfig?: readonly RunnerConfigTouch[];
}

const TEST_TIMEOUT_MS = 15 * 60_000;
const JS = /\.(?:[cm]?js|[cm]?ts|jsx|tsx)$/;

/**
 * How to run some tests. Every run is read by the test-results engine (src/testing/run-tests.ts), as
 * the agent's verdict reads its runs: a report asked of the runner, the console output beside it,
 * and test ids in one scheme (`file::name`, pytest's node ids; docs/testing.md).
 */
export interface TestCommand {
  readonly command: string;
  /** The runner, when the command is one of ours (the engine otherwise guesses it from the command). */
  readonly runner?: RunnerKind | undefined;
}

/** The test results of a run: facts by id (testing/test-run.ts), merged over its commands. */
export type TestResults = ReadonlyMap<string, TestFact>;

/** The commands that run the listed tests. */
export function testCommands(task: EvalTask): TestCommand[] {
  if (task.test_command !== undefined) return [{ command: task.test_command }];
  const ids = [...task.FAIL_TO_PASS, ...task.PASS_TO_PASS];
  const files = [...new Set(ids.map((id) => (id.includes('::') ? id.slice(0, id.indexOf('::')) : null)))];
  const commands = files.includes(null) ? null : commandsForFiles(files as string[]);
  if (commands !== null) return commands;
  const named = files.filter((f): f is string => f !== null);
  if (named.length > 0 && named.every((f) => f.endsWith('.py'))) return pytestCommand([]);
  throw new Error(
    'no default way to run these tests (pytest node ids or JavaScript `file::name` ids); give the task a test_command',
  );
}

/**
 * The default commands for whole test files, or null when there is none: pytest for Python files,
 * node's test runner (one run per file) for JavaScript and TypeScript ones. Mixed languages have none.
 */
export function commandsForFiles(files: readonly string[]): TestCommand[] | null {
  if (files.length === 0) return null;
  if (files.every((f) => f.endsWith('.py'))) return pytestCommand(files);
  if (files.every((f) => JS.test(f))) {
    // One run: the engine's node:test reporter says which file each test is in.
    return [{ command: `node --test${files.map((f) => ` ${shellQuote(f)}`).join('')}`, runner: 'node-test' }];
  }
  return null;
}

function pytestCommand(files: readonly string[]): TestCommand[] {
  return [
    {
      command: `python3 -m pytest -rA -p no:cacheprovider${files.map((f) => ` ${shellQuote(f)}`).join('')}`,
      runner: 'pytest',
    },
  ];
}

/**
 * The fact of a listed test: by its id, or, for `file::name` when the run named tests without
 * their files (a `test_command` whose runner does not say them), by the name, but only when
 * `byName` (the listed tests are of one file: otherwise a passing `x` of one file would stand for a
 * failing `x` of another).
 */
export function factOf(results: TestResults, id: string, byName = false): TestFact | null {
  const exact = results.get(id);
  if (exact !== undefined) return exact;
  const i = id.indexOf('::');
  if (byName && i > 0) {
    const bare = results.get(id.slice(i + 2));
    if (bare?.file === null) return bare;
  }
  return null;
}

/** Passed, as SWE-bench counts it: passed, or an expected failure (pytest's xfail). */
export function passed(fact: TestFact | null): boolean {
  return (
    fact !== null && (fact.status === 'passed' || (fact.status === 'skipped' && fact.detail === 'xfail'))
  );
}

/** What one sandboxed test run at a base commit gave. */
export type TestRun =
  | {
      readonly kind: 'ran';
      readonly results: TestResults;
      /** Every command and its output. */
      readonly output: string;
      readonly testMs: number;
      /** The patch's runner configuration, run as the base commit has it (absent: none). */
      readonly runnerConfig?: readonly RunnerConfigTouch[];
    }
  /** The change under test (a model's or a gold patch) does not apply to the base commit. */
  | { readonly kind: 'patch_failed'; readonly output: string }
  /** The harness's own part failed: resetting the test files or applying the test patch. */
  | { readonly kind: 'harness_failed'; readonly stage: 'reset' | 'test_patch'; readonly reason: string };

export interface SandboxPlace {
  readonly sandbox: SandboxChoice;
  readonly env: AgentEnv;
  readonly setup: boolean;
  /** The task's folder (hidden from a local sandbox), and a key naming this run's copy. */
  readonly folder: string;
  readonly key: string;
  /** Host paths the local sandbox must hide too, and the environment cache's key. */
  readonly hide: readonly string[];
  /** Host folders a local sandbox sees nothing of but its workspace (see Confinement.mask). */
  readonly mask?: readonly string[];
  readonly cacheKey: string;
  readonly signal?: AbortSignal | undefined;
}

/** A new sandbox over a fresh checkout at a base commit, its environment prepared, nothing run in it yet. */
export interface TestPlace {
  readonly sandbox: Sandbox;
  close(): Promise<void>;
}

/**
 * Makes the sandbox `runTestsAt` tests in: a checkout of `repo` at `base` (or `checkout`, one this
 * process made at `base` and no sandbox has seen) and a new sandbox of the place's kind over it,
 * with the environment prepared from the base commit (its config, its lockfile), as SWE-bench builds
 * its image before any patch. An eval opens it while the agent still works, so grading does not
 * wait for a container: nothing of the agent's ever reaches it (another container, or another
 * confined copy), and the patches only go in after the agent's sandbox is closed.
 */
export async function openTestPlace(
  options: SandboxPlace & {
    /** The repository the checkout is cloned from (a local path). */
    readonly repo: string;
    readonly base: string;
    readonly checkout?: Checkout | undefined;
  },
): Promise<TestPlace> {
  // Made where the workspace's copy goes: the sandbox uses it as is, with no second copy.
  const checkout = options.checkout ?? (await checkoutAt(options.repo, options.base, options.key));
  try {
    const ws = await provision({
      repo: checkout.dir,
      sandbox: options.sandbox,
      env: options.env,
      trajectory: options.folder,
      runId: options.key,
      setup: options.setup,
      hide: options.hide,
      mask: options.mask ?? [],
      cacheKey: options.cacheKey,
      ownCopy: checkout,
      // Grading runs everything through the harness shell.
      lazyAgentShell: true,
      signal: options.signal,
    });
    return {
      sandbox: ws.sandbox,
      close: async () => {
        try {
          await ws.close();
        } finally {
          await checkout.cleanup();
        }
      },
    };
  } catch (error) {
    await checkout.cleanup();
    throw error;
  }
}

/**
 * Runs `commands` in a new sandbox made from `repo` at `base` (or `place`, opened for it by
 * openTestPlace), with `patch` applied, then the files the test patch touches put back to the base
 * commit and the test patch applied (SWE-bench's order). The patches are applied inside the sandbox,
 * so nothing in them (a link, a path) is ever followed on the host. The place is closed after.
 */
export async function runTestsAt(
  options: SandboxPlace & {
    /** The repository the checkout is cloned from (a local path). */
    readonly repo: string;
    readonly base: string;
    readonly patch: string | null;
    readonly testPatch: string;
    readonly commands: readonly TestCommand[];
    readonly place?: Promise<TestPlace> | undefined;
  },
): Promise<TestRun> {
  const place = await (options.place ?? openTestPlace(options));
  try {
    const sandbox = place.sandbox;
    const apply = (patch: string): Promise<{ ok: boolean; output: string }> =>
      patch.trim() === ''
        ? Promise.resolve({ ok: true, output: '' })
        : sandbox
            // The harness shell's stdin stays open: the script reads exactly the patch's bytes.
            .harnessExec(
              `head -c ${Buffer.byteLength(patch)} | git -c core.hooksPath=/dev/null apply --whitespace=nowarn -`,
              { timeoutMs: 60_000, stdin: Buffer.from(patch) },
            )
            .then((r) => ({ ok: r.exitCode === 0, output: r.output.trim().slice(0, 1000) }));
    const change = await apply(options.patch ?? '');
    if (!change.ok) return { kind: 'patch_failed', output: change.output };
    // A patch never decides how its own tests run: its runner configuration goes back to the base's.
    const config = await baseRunnerConfig(
      sandbox,
      options.patch,
      options.commands.map((c) => c.command).join('\n'),
    );
    if (!config.ok) return { kind: 'patch_failed', output: config.reason };
    // As SWE-bench before its test patch: the files it touches back to the base commit.
    const reset = patchPaths(options.testPatch)
      .map((path) => shellQuote(path))
      .map(
        (q) =>
          `if git cat-file -e HEAD:${q} 2>/dev/null; then git checkout -q HEAD -- ${q}; else rm -rf -- ${q}; fi`,
      )
      .join('\n');
    if (reset !== '') {
      // In a subshell: `set -e` must not stay in the harness's shell.
      const r = await sandbox.harnessExec(`(\nset -e\n${reset}\n)`, { timeoutMs: 60_000 });
      if (r.exitCode !== 0) {
        return {
          kind: 'harness_failed',
          stage: 'reset',
          reason: `could not reset the test files: ${r.output.trim().slice(0, 500)}`,
        };
      }
    }
    const tests = await apply(options.testPatch);
    if (!tests.ok)
      return {
        kind: 'harness_failed',
        stage: 'test_patch',
        reason: `the test patch does not apply: ${tests.output}`,
      };
    const results = new Map<string, TestFact>();
    let testMs = 0;
    let output = '';
    for (const c of options.commands) {
      const r = await run(sandbox, c, options.signal);
      testMs += r.durationMs;
      output += `$ ${c.command}\n${r.output}\n`;
      for (const fact of r.facts) {
        const prior = results.get(fact.id);
        results.set(
          fact.id,
          prior === undefined || worse(prior.status, fact.status) === fact.status ? fact : prior,
        );
      }
    }
    return { kind: 'ran', results, output, testMs, runnerConfig: config.touched };
  } finally {
    await place.close();
  }
}

export async function grade(
  options: SandboxPlace & {
    readonly task: EvalTask;
    /** The repository the checkout is cloned from (a local path). */
    readonly repo: string;
    /** The model's patch (the agent's final diff), or null when it produced none. */
    readonly patch: string | null;
    readonly logger: Logger;
    /** The sandbox to grade in, opened ahead by openTestPlace; default: opened here. Always closed. */
    readonly place?: Promise<TestPlace> | undefined;
  },
): Promise<Grade> {
  const started = performance.now();
  const { task } = options;
  const empty = { success: [], failure: [] };
  const result = (
    fields: Pick<Grade, 'status' | 'patchApplied' | 'reason'> &
      Partial<Pick<Grade, 'tests' | 'failing' | 'testMs' | 'outputTail' | 'runnerConfig'>>,
  ): Grade => ({
    patchExists: options.patch !== null && options.patch.trim() !== '',
    tests: { FAIL_TO_PASS: empty, PASS_TO_PASS: empty },
    failing: [],
    testMs: 0,
    outputTail: '',
    ...fields,
    gradeMs: performance.now() - started,
  });
  let commands: ReturnType<typeof testCommands>;
  try {
    commands = testCommands(task);
  } catch (error) {
    await options.place?.then((p) => p.close()).catch(() => undefined);
    return result({ status: 'error', patchApplied: false, reason: (error as Error).message });
  }
  const ran = await runTestsAt({
    ...options,
    base: task.base_commit,
    testPatch: task.test_patch,
    commands,
  });
  if (ran.kind === 'patch_failed') {
    return result({
      status: 'unresolved',
      patchApplied: false,
      reason: `the patch does not apply: ${ran.output}`,
    });
  }
  if (ran.kind === 'harness_failed')
    return result({ status: 'error', patchApplied: true, reason: ran.reason });
  const { results, output, testMs } = ran;
  const touched = ran.runnerConfig ?? [];
  const config = touched.length === 0 ? {} : { runnerConfig: touched };
  const configNote = touched.length === 0 ? '' : `; ${runnerConfigNote(touched.map((t) => t.path))}`;
  const listed = [...task.FAIL_TO_PASS, ...task.PASS_TO_PASS];
  const byName =
    new Set(listed.map((id) => (id.includes('::') ? id.slice(0, id.indexOf('::')) : ''))).size <= 1;
  const fact = (id: string): TestFact | null => factOf(results, id, byName);
  const status = (id: string): TestStatus | null => fact(id)?.status ?? null;
  const split = (ids: readonly string[]): TestsStatus => ({
    success: ids.filter((id) => passed(fact(id))),
    failure: ids.filter((id) => !passed(fact(id))),
  });
  const f2p = split(task.FAIL_TO_PASS);
  const p2p = split(task.PASS_TO_PASS);
  const failing = [...f2p.failure, ...p2p.failure].map((id) => ({
    id,
    status: status(id) ?? ('absent' as const),
  }));
  const resolved = failing.length === 0;
  const outputTail = output.slice(-2000);
  const none =
    failing.length === f2p.failure.length + p2p.failure.length + f2p.success.length + p2p.success.length;
  return result({
    status: resolved ? 'resolved' : 'unresolved',
    patchApplied: true,
    outputTail,
    reason: resolved
      ? null
      : none && failing.every((f) => f.status === 'absent')
        ? `the test run reported none of the listed tests; its output ended: ${output.trim().split('\n').slice(-3).join(' | ').slice(0, 400)}`
        : `${failing.length} listed test(s) did not pass: ${failing
            .slice(0, 5)
            .map((f) => `${f.id} (${f.status})`)
            .join(', ')}${failing.length > 5 ? ', …' : ''}${configNote}`,
    tests: { FAIL_TO_PASS: f2p, PASS_TO_PASS: p2p },
    failing,
    testMs,
    ...config,
  });
}

/** One command through the test-results engine, in the harness's shell. */
async function run(
  sandbox: Sandbox,
  command: TestCommand,
  signal: AbortSignal | undefined,
): Promise<{ output: string; durationMs: number; facts: readonly TestFact[] }> {
  const r = await runTests(sandbox, command.command, {
    via: 'harness',
    timeoutMs: TEST_TIMEOUT_MS,
    perTestMs: firstBounds({ testTimeoutMs: TEST_TIMEOUT_MS }).perTestMs,
    signal,
    runner: command.runner,
  });
  return { output: r.output, durationMs: r.durationMs, facts: r.summary.tests ?? [] };
}
