import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { AgentEnv } from '../config/agent-env.js';
import type { Sandbox } from '../sandbox/sandbox.js';
import { shellQuote } from '../sandbox/shell-session.js';
import { openWorkspace, type CliSandbox } from '../cli/workspace.js';
import { applyPatch, applyTestPatch, checkoutAt, commitAll } from './checkout.js';
import type { EvalTask } from './tasks.js';
import {
  parsePytest,
  parseTap,
  passed,
  statusOf,
  type TestResults,
  type TestStatus,
} from './test-results.js';

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
}

const TEST_TIMEOUT_MS = 15 * 60_000;
const JS = /\.(?:[cm]?js|[cm]?ts|jsx|tsx)$/;

/** The commands that run the listed tests, each with how its output is read. */
export function testCommands(
  task: EvalTask,
): { command: string; parse: (out: string, into: TestResults) => void }[] {
  const both = (out: string, into: TestResults): void => {
    parsePytest(out, into);
    parseTap(out, null, into);
  };
  if (task.test_command !== undefined) return [{ command: task.test_command, parse: both }];
  const ids = [...task.FAIL_TO_PASS, ...task.PASS_TO_PASS];
  const files = [...new Set(ids.map((id) => (id.includes('::') ? id.slice(0, id.indexOf('::')) : null)))];
  const named = files.filter((f): f is string => f !== null);
  if (named.length > 0 && named.every((f) => f.endsWith('.py'))) {
    const all = files.includes(null) ? [] : named;
    return [
      {
        command: `python3 -m pytest -rA -p no:cacheprovider${all.map((f) => ` ${shellQuote(f)}`).join('')}`,
        parse: both,
      },
    ];
  }
  if (named.length > 0 && named.every((f) => JS.test(f)) && !files.includes(null)) {
    // One run per file: node names a test by its title alone, so the file comes from the command.
    return named.map((f) => ({
      command: `node --test --test-reporter=tap ${shellQuote(f)}`,
      parse: (out: string, into: TestResults) => {
        parseTap(out, f, into);
      },
    }));
  }
  throw new Error(
    'no default way to run these tests (pytest node ids or JavaScript `file::name` ids); give the task a test_command',
  );
}

export async function grade(options: {
  readonly task: EvalTask;
  /** The repository the checkout is cloned from (a local path). */
  readonly repo: string;
  /** The model's patch (the agent's final diff), or null when it produced none. */
  readonly patch: string | null;
  readonly kind: CliSandbox;
  readonly env: AgentEnv;
  readonly setup: boolean;
  /** The task's folder (hidden from a local sandbox), and a key naming this grading's copy. */
  readonly folder: string;
  readonly key: string;
  readonly logger: Logger;
  readonly signal?: AbortSignal | undefined;
}): Promise<Grade> {
  const started = performance.now();
  const { task } = options;
  const empty = { success: [], failure: [] };
  const result = (
    fields: Pick<Grade, 'status' | 'patchApplied' | 'reason'> &
      Partial<Pick<Grade, 'tests' | 'failing' | 'testMs' | 'outputTail'>>,
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
    return result({ status: 'error', patchApplied: false, reason: (error as Error).message });
  }
  const checkout = await checkoutAt(options.repo, task.base_commit);
  try {
    const applied = await applyPatch(checkout.dir, options.patch ?? '');
    if (!applied.ok) {
      return result({
        status: 'unresolved',
        patchApplied: false,
        reason: `the patch does not apply: ${applied.reason}`,
      });
    }
    const tests = await applyTestPatch(checkout.dir, task.base_commit, task.test_patch);
    if (!tests.ok) {
      return result({
        status: 'error',
        patchApplied: true,
        reason: `the test patch does not apply: ${tests.reason}`,
      });
    }
    await commitAll(checkout.dir, 'graded state');
    const ws = await openWorkspace(
      checkout.dir,
      options.kind,
      options.env,
      options.folder,
      options.key,
      options.setup,
    );
    let results: TestResults;
    let testMs = 0;
    let output = '';
    try {
      results = new Map();
      for (const c of commands) {
        const r = await run(ws.sandbox, c.command, options.signal);
        testMs += r.durationMs;
        output += `$ ${c.command}\n${r.output}\n`;
        c.parse(r.output, results);
      }
    } finally {
      await ws.close();
    }
    const split = (ids: readonly string[]): TestsStatus => ({
      success: ids.filter((id) => passed(statusOf(results, id))),
      failure: ids.filter((id) => !passed(statusOf(results, id))),
    });
    const f2p = split(task.FAIL_TO_PASS);
    const p2p = split(task.PASS_TO_PASS);
    const failing = [...f2p.failure, ...p2p.failure].map((id) => ({
      id,
      status: statusOf(results, id) ?? ('absent' as const),
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
              .join(', ')}${failing.length > 5 ? ', …' : ''}`,
      tests: { FAIL_TO_PASS: f2p, PASS_TO_PASS: p2p },
      failing,
      testMs,
    });
  } finally {
    await checkout.cleanup();
  }
}

async function run(
  sandbox: Sandbox,
  command: string,
  signal: AbortSignal | undefined,
): Promise<{ output: string; durationMs: number }> {
  const r = await sandbox.harnessExec(command, { timeoutMs: TEST_TIMEOUT_MS, signal });
  return { output: r.output, durationMs: r.durationMs };
}
