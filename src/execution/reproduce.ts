import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { AgentEnv } from '../config/agent-env.js';
import { hostProbe } from '../environment/host-probe.js';
import { runTestsAt, type TestRun as GradedRun } from '../eval/grade.js';
import type { EventOf } from '../events/schema.js';
import { recordedCommand } from '../publish/reproduction.js';
import { renderVerification } from '../publish/verification.js';
import { detectTestCommand } from '../testing/detect-test-command.js';
import { isFailing } from '../testing/test-run.js';
import type { SandboxChoice } from './provision.js';

const run = promisify(execFile);

type TestRunEvent = EventOf<'test_run'>;

/**
 * The reproduction of a verdict, shared by `issue-agent verify` and the App's `@agent verify`: the
 * base (where the head left it, as a pull request shows the change) and the head are each tested
 * in a new sandbox by the harness that grades evals (a fresh checkout, the change applied inside
 * the sandbox, its runner configuration put back to the base's), read by the same test-results
 * engine and shown with the same per-test table as the pull request and its check run.
 *
 * Only the repository's commits reach a sandbox: the clone is local (fetched by the caller, whose
 * token never leaves its process), and the folder it works in is hidden from a local sandbox.
 */

export class ReproduceError extends Error {
  override readonly name = 'ReproduceError';
  constructor(
    message: string,
    readonly code: 'no_test_command' | 'tests_did_not_run',
  ) {
    super(message);
  }
}

export interface ReproduceOptions {
  /** A local clone (bare or not) holding both commits. */
  readonly repo: string;
  readonly base: string;
  readonly head: string;
  /** The test command asked for, else the recorded table's, else the base's detected one. */
  readonly command: string | null;
  /** The recorded table (a check run's text), or null. */
  readonly recordedText: string | null;
  readonly sandbox: SandboxChoice;
  readonly env: AgentEnv;
  readonly setup: boolean;
  /** A folder of the caller's for the checkouts and sandboxes (hidden from them). */
  readonly work: string;
  /** More host paths a local sandbox must hide, and the ones it sees nothing of but its workspace. */
  readonly hide?: readonly string[];
  readonly mask?: readonly string[];
  /** The environment cache's key (e.g. the repository). */
  readonly cacheKey: string;
  readonly signal?: AbortSignal | undefined;
  /** Told once the commits and the command are known, before any sandbox starts. */
  readonly starting?: (what: { base: string; head: string; command: string }) => void;
}

export interface Reproduced {
  /** The merge base of the given base and head, and the head, as full shas. */
  readonly base: string;
  readonly head: string;
  readonly command: string;
  readonly table: string;
}

export async function reproduceVerdict(o: ReproduceOptions): Promise<Reproduced> {
  const git = async (...a: string[]): Promise<string> =>
    (await run('git', ['-C', o.repo, ...a], { maxBuffer: 256 * 1024 * 1024 })).stdout;
  // The change is what the head adds to where it left the base (as a pull request shows it).
  const base = (await git('merge-base', o.base, o.head)).trim();
  const head = (await git('rev-parse', `${o.head}^{commit}`)).trim();
  const patch = await git('diff', '--binary', base, head);
  const command =
    o.command ??
    (o.recordedText === null ? null : recordedCommand(o.recordedText)) ??
    (await baseCommand(o.repo, base, o.work));
  if (command === null) throw new ReproduceError('no test command is known', 'no_test_command');

  const place = (key: string) => ({
    sandbox: o.sandbox,
    env: o.env,
    setup: o.setup,
    folder: join(o.work, key),
    key: `verify-${Date.now().toString(36)}-${key}`,
    hide: [...(o.hide ?? []), o.work],
    ...(o.mask === undefined ? {} : { mask: o.mask }),
    cacheKey: o.cacheKey,
    signal: o.signal,
  });
  const commands = [{ command }];
  o.starting?.({ base, head, command });
  const before = asEvent(
    'baseline',
    command,
    await runTestsAt({ ...place('base'), repo: o.repo, base, patch: null, testPatch: '', commands }),
  );
  const after = asEvent(
    'final',
    command,
    await runTestsAt({ ...place('head'), repo: o.repo, base, patch, testPatch: '', commands }),
  );
  return { base, head, command, table: renderVerification(before, after, { maxRows: 500 }) };
}

/** The base commit's detected test command, read from a checkout of it. */
async function baseCommand(repo: string, base: string, work: string): Promise<string | null> {
  const dir = join(work, 'base-probe');
  await run('git', ['clone', '-q', '--no-checkout', repo, dir]);
  await run('git', ['-C', dir, 'checkout', '-q', base]);
  return (await detectTestCommand(hostProbe(dir)))?.command ?? null;
}

/** A graded run as the `test_run` event the renderer reads (no exit code: 0 unless a test failed). */
export function asEvent(phase: 'baseline' | 'final', command: string, r: GradedRun): TestRunEvent {
  if (r.kind !== 'ran') {
    const why = r.kind === 'patch_failed' ? `the change does not apply: ${r.output}` : r.reason;
    throw new ReproduceError(
      `could not run the tests on the ${phase === 'baseline' ? 'base' : 'head'}: ${why}`,
      'tests_did_not_run',
    );
  }
  const tests = [...r.results.values()];
  const passed = tests.filter((t) => t.status === 'passed').map((t) => t.id);
  const failed = tests.filter((t) => isFailing(t.status)).map((t) => t.id);
  return {
    id: phase === 'baseline' ? 1 : 2,
    ts: new Date().toISOString(),
    kind: 'test_run',
    phase,
    command,
    exitCode: failed.length > 0 ? 1 : 0,
    killed: null,
    durationMs: r.testMs,
    summary: {
      runner: 'harness',
      passed: passed.length,
      failed: failed.length,
      skipped: tests.filter((t) => t.status === 'skipped').length,
      passedNames: passed.slice(0, 500),
      failedNames: failed.slice(0, 500),
      tests,
      complete: true,
      idScheme: 2,
    },
    output: r.output,
    outputBytes: Buffer.byteLength(r.output),
  };
}
