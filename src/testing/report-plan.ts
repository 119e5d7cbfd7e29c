/**
 * What the harness asks a test runner for, beside its normal console output: a machine-readable
 * report and a bound on a hung test, without changing what the repository's tests do (docs/testing.md
 * has the table). Pure: run-tests.ts gives it the command, the package.json and what the sandbox's
 * node supports, and runs what it returns.
 *
 * - pytest (any command, through the environment): the harness's plugin (report-helpers.ts) via
 *   PYTEST_ADDOPTS and PYTHONPATH; it writes a JSON line per event and ends a test that runs past
 *   the bound, printing its stack.
 * - node:test (a command that runs it): a reporter of the harness's next to the console's spec
 *   reporter, through NODE_OPTIONS; `--test-timeout` and `--test-force-exit` through a `node`
 *   wrapper first on PATH, since node takes neither from NODE_OPTIONS. Not when the command picks
 *   its own reporters (node would refuse the mixed lists).
 * - jest and vitest (only when the command is `npm test` or `npm run <script>` whose script is the
 *   runner alone, or the runner itself: the arguments go to it and to nothing else): jest's
 *   `--json --outputFile` (and `--forceExit`, so open handles after the tests do not hold the run),
 *   vitest's `json` reporter beside its default one.
 * - node-tap and ava print TAP or their own lines; mocha's spec reporter, unittest, go test and
 *   cargo test are read from their console output (cargo's JSON output is unstable-only; go's
 *   `-json` replaces the output the agent reads).
 *
 * The report folder is made fresh for each run (report-dir in run-tests.ts); a report is only read
 * from there.
 */
import {
  guessRunnerFromScript,
  readScripts,
  runnerFromCommandText,
  type RunnerKind,
} from './detect-test-command.js';
import { PYTEST_PLUGIN_MODULE } from './report-helpers.js';

export type ReportKind = 'pytest' | 'node-test' | 'jest' | 'vitest';

export interface PlanInput {
  readonly command: string;
  /** The runner detection guessed, if any (the command's own text decides otherwise). */
  readonly runner?: RunnerKind | undefined;
  /** The workspace's package.json, when the command runs an npm script. */
  readonly packageJson: string | null;
  /** The run's report folder in the sandbox (a path the harness made; no untrusted text). */
  readonly dir: string;
  /** A test still running after this long is stopped, where the runner can do it. */
  readonly perTestMs: number;
  /** Which of node's test flags the sandbox's node accepts. */
  readonly nodeFlags: 'timeout+force-exit' | 'timeout' | 'none';
}

export interface ReportPlan {
  readonly runner: RunnerKind;
  /** Shell lines run in the test's subshell before the command (harness text only). */
  readonly setup: string;
  readonly command: string;
  /** Report files to read back, by kind. */
  readonly reports: readonly { readonly kind: ReportKind; readonly file: string }[];
  /** What was asked of the runner, for the run's sources. */
  readonly asked: readonly string[];
}

/**
 * `npm test`, `npm run <script>`, optionally after variable assignments and with plain arguments
 * after `--` (the agent's `run_tests` filter): npm passes those, and ours after them, to the script.
 */
const NPM_SCRIPT_RE =
  /^(?:[A-Z_][A-Z0-9_]*=[\w./:-]*\s+)*npm (?:test|t|run(?:-script)? ([\w:.-]+))(\s+--(?:\s+[\w@./:=,+%-]+)*)?$/;
/** No shell operator, substitution, quote or escape: the script is one command whose arguments we may extend. */
const PLAIN_RE = /^[\w@./:=,+%-]+(?: +[\w@./:=,+%-]+)*$/;

/** The runner a command line invokes directly, with its position, or null. */
function directRunner(text: string): RunnerKind | null {
  const words = text.trim().split(/ +/);
  let i = 0;
  while (i < words.length && /^[A-Z_][A-Z0-9_]*=/.test(words[i] ?? '')) i++;
  if (words[i] === 'cross-env') {
    i++;
    while (i < words.length && /^[A-Z_][A-Z0-9_]*=/.test(words[i] ?? '')) i++;
  }
  if (words[i] === 'npx') i++;
  const bin = words[i];
  if (bin === 'jest') return 'jest';
  if (bin === 'vitest')
    return words.slice(i + 1).some((w) => w === 'watch' || w === '--watch' || w === 'dev') ? null : 'vitest';
  return null;
}

export function planReport(input: PlanInput): ReportPlan {
  const command = input.command.trim();
  const npm = NPM_SCRIPT_RE.exec(command);
  const scripts = input.packageJson === null ? new Map<string, string>() : readScripts(input.packageJson);
  const scriptName = npm === null ? null : (npm[1] ?? 'test');
  const script = scriptName === null ? undefined : scripts.get(scriptName);
  const fromText =
    scriptName !== null ? guessRunnerFromScript(scripts, scriptName) : runnerFromCommandText(command);
  const runner: RunnerKind = fromText !== 'unknown' ? fromText : (input.runner ?? 'unknown');
  const dir = input.dir;
  const setup: string[] = [];
  const reports: { kind: ReportKind; file: string }[] = [];
  const asked: string[] = [];
  let run = command;

  if (runner === 'pytest' || runner === 'unknown' || runner === 'make') {
    setup.push(
      `export ISSUE_AGENT_PYTEST_REPORT="${dir}/pytest.jsonl" ISSUE_AGENT_TEST_BOUND_S=${Math.max(1, Math.round(input.perTestMs / 1000))}`,
      `export PYTHONPATH="${dir}/py\${PYTHONPATH:+:$PYTHONPATH}"`,
      `export PYTEST_ADDOPTS="-p ${PYTEST_PLUGIN_MODULE}\${PYTEST_ADDOPTS:+ $PYTEST_ADDOPTS}"`,
    );
    reports.push({ kind: 'pytest', file: 'pytest.jsonl' });
    asked.push('pytest: the harness plugin report');
  }

  if (runner === 'node-test') {
    const own = /--test-reporter/.test(script ?? command);
    if (!own) {
      setup.push(
        `export ISSUE_AGENT_NODE_TEST_REPORT="${dir}/node-test.jsonl"`,
        `export NODE_OPTIONS="\${NODE_OPTIONS:+$NODE_OPTIONS }--test-reporter=spec --test-reporter-destination=stdout --test-reporter=${dir}/node-test-reporter.mjs --test-reporter-destination=${dir}/node-test.out"`,
      );
      // The reporter writes node-test.jsonl itself; its stream (node-test.out) stays empty. Not
      // /dev/null: node 24 syncs the destination when the run ends, which /dev/null refuses.
      reports.push({ kind: 'node-test', file: 'node-test.jsonl' });
      asked.push('node:test: the harness reporter beside spec');
    }
    if (input.nodeFlags !== 'none') {
      const flags = [`--test-timeout=${Math.max(1000, Math.round(input.perTestMs))}`];
      if (input.nodeFlags === 'timeout+force-exit') flags.push('--test-force-exit');
      setup.push(
        `export ISSUE_AGENT_NODE="$(command -v node)" ISSUE_AGENT_NODE_FLAGS="${flags.join(' ')}"`,
        `[ -n "$ISSUE_AGENT_NODE" ] && export PATH="${dir}/bin:$PATH"`,
      );
      asked.push(`node:test: ${flags.join(' ')}`);
    }
  }

  // jest and vitest take the report as arguments: only where they go to the runner alone.
  const direct =
    npm === null
      ? directRunner(command)
      : script !== undefined && PLAIN_RE.test(script.trim())
        ? directRunner(script)
        : null;
  const plain = npm !== null || PLAIN_RE.test(command);
  if (plain && direct !== null && (direct === runner || runner === 'unknown')) {
    const sep = npm === null || npm[2] !== undefined ? '' : ' --';
    if (direct === 'jest') {
      run = `${command}${sep} --json --outputFile="${dir}/jest.json" --forceExit`;
      reports.push({ kind: 'jest', file: 'jest.json' });
      asked.push('jest: --json --outputFile --forceExit');
    } else {
      // A command that names its reporters keeps them (they replace the configured ones); one that
      // does not keeps vitest's default reporter beside the report.
      const own = /--reporter\b/.test(`${script ?? ''} ${command}`) ? '' : ' --reporter=default';
      run = `${command}${sep}${own} --reporter=json --outputFile.json="${dir}/vitest.json"`;
      reports.push({ kind: 'vitest', file: 'vitest.json' });
      asked.push('vitest: the json reporter beside the default one');
    }
  }
  return {
    runner: runner === 'unknown' && direct !== null ? direct : runner,
    setup: setup.join('\n'),
    command: run,
    reports,
    asked,
  };
}
