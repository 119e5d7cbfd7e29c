import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parse as parseYaml } from 'yaml';
import type { AgentEnv } from '../config/agent-env.js';
import { parseRepoConfig, REPO_CONFIG_PATH, RepoConfigError } from '../config/repo-config.js';
import { hostProbe } from '../environment/host-probe.js';
import { runTestsAt, type TestRun as GradedRun } from '../eval/grade.js';
import type { EventOf } from '../events/schema.js';
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
 *
 * The test command is the base's, found as a fix job finds it: the caller's configured one (the
 * App's repository settings, read from the default branch; the CLI's --test-command), else
 * `testCommand` in the base commit's `.github/issue-agent.yml` when asked (the CLI, which has no
 * settings of its own), else the one detected on the base commit. Never one from the head (a pull
 * request may change its settings and scripts), and never one from the recorded verdict: what the
 * tests are run with decides what "reproduced" means, so the record's command is only compared
 * with this one (publish/reproduction.ts), never used.
 */

export class ReproduceError extends Error {
  override readonly name = 'ReproduceError';
  constructor(
    message: string,
    readonly code: 'no_test_command' | 'tests_did_not_run' | 'invalid_settings',
  ) {
    super(message);
  }
}

export interface ReproduceOptions {
  /** A local clone (bare or not) holding both commits. */
  readonly repo: string;
  readonly base: string;
  readonly head: string;
  /** The configured test command (see the top), or null to find the base's. */
  readonly command: string | null;
  /** Where `command` came from, in words, when it is given (e.g. "given with --test-command"). */
  readonly commandSource?: string;
  /** Read `testCommand` from the base commit's `.github/issue-agent.yml` when `command` is null. */
  readonly baseSettings?: boolean;
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
  readonly starting?: (what: { base: string; head: string; command: string; source: string }) => void;
}

export interface Reproduced {
  /** The merge base of the given base and head, and the head, as full shas. */
  readonly base: string;
  readonly head: string;
  readonly command: string;
  /** Where the command came from, in words. */
  readonly commandSource: string;
  readonly table: string;
}

export async function reproduceVerdict(o: ReproduceOptions): Promise<Reproduced> {
  const git = async (...a: string[]): Promise<string> =>
    (await run('git', ['-C', o.repo, ...a], { maxBuffer: 256 * 1024 * 1024 })).stdout;
  // The change is what the head adds to where it left the base (as a pull request shows it).
  const base = (await git('merge-base', o.base, o.head)).trim();
  const head = (await git('rev-parse', `${o.head}^{commit}`)).trim();
  const patch = await git('diff', '--binary', base, head);
  const found =
    o.command === null
      ? await baseCommand(o.repo, base, o.work, o.baseSettings === true)
      : { command: o.command, source: o.commandSource ?? 'configured' };
  if (found === null) throw new ReproduceError('no test command is known', 'no_test_command');
  const command = found.command;

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
  o.starting?.({ base, head, command, source: found.source });
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
  return {
    base,
    head,
    command,
    commandSource: found.source,
    table: renderVerification(before, after, { maxRows: 500 }),
  };
}

/**
 * The base commit's test command: its settings' `testCommand` (when `settings`), else the one
 * detected in a checkout of it; null when neither is known.
 */
async function baseCommand(
  repo: string,
  base: string,
  work: string,
  settings: boolean,
): Promise<{ command: string; source: string } | null> {
  if (settings) {
    const configured = await baseSettingsCommand(repo, base);
    if (configured !== null)
      return { command: configured, source: `\`testCommand\` in ${REPO_CONFIG_PATH} on the base` };
  }
  const dir = join(work, 'base-probe');
  await run('git', ['clone', '-q', '--no-checkout', repo, dir]);
  await run('git', ['-C', dir, 'checkout', '-q', base]);
  const detected = await detectTestCommand(hostProbe(dir));
  return detected === null
    ? null
    : { command: detected.command, source: `detected on the base: ${detected.source}` };
}

/**
 * `testCommand` in the base commit's `.github/issue-agent.yml`, or null when the file or the key is
 * absent. A file that is not valid settings is an error: the fix job would not have run on it.
 */
async function baseSettingsCommand(repo: string, base: string): Promise<string | null> {
  let text: string;
  try {
    text = (await run('git', ['-C', repo, 'show', `${base}:${REPO_CONFIG_PATH}`], { maxBuffer: 1024 * 1024 }))
      .stdout;
  } catch {
    // Absent on the base (git show fails for a path the tree does not hold).
    return null;
  }
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (error) {
    throw new ReproduceError(
      `${REPO_CONFIG_PATH} on the base is not valid YAML: ${error instanceof Error ? error.message : String(error)}`,
      'invalid_settings',
    );
  }
  try {
    return parseRepoConfig(raw, { label: 'issue-agent', handle: 'agent' }).testCommand ?? null;
  } catch (error) {
    if (!(error instanceof RepoConfigError)) throw error;
    throw new ReproduceError(error.message, 'invalid_settings');
  }
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
