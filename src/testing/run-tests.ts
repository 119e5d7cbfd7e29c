/**
 * Runs a test command and reads what it did: the one way every test run goes (the agent's
 * `run_tests`, the harness's baseline, final and without_fix runs, eval grading).
 *
 * 1. A report folder, made fresh for this run with a random name under the sandbox's TMPDIR (never
 *    in the workspace, so nothing the runners write there becomes part of the change, and never a
 *    folder that existed before: `mkdir` fails on one that does, and the run then asks for no
 *    report), holding the harness's helpers (report-helpers.ts).
 * 2. The command, with what report-plan.ts asks of the runner, bounded by `timeoutMs` and the
 *    memory limit; a hang or a blow-up is a result with `killed` set, never an exception.
 * 3. The reports read back through the harness shell, then the folder removed.
 * 4. The facts: the report's and the console output's, merged (mergeFacts). A test the output
 *    shows failing is failing whatever the report says; a test only the output names is added;
 *    the list is complete only when the run ended on its own and its reader accounted for every
 *    test.
 */
import { randomBytes } from 'node:crypto';
import { readFile, rm } from 'node:fs/promises';
import type { ExecOptions, ExecResult, KillReason, Sandbox } from '../sandbox/sandbox.js';
import { shellQuote } from '../sandbox/shell-session.js';
import type { RunnerKind } from './detect-test-command.js';
import { readJestReport } from './jest-json.js';
import { readNodeTestReport, NODE_TEST_REPORTER } from './node-test-report.js';
import { countsOf, readTestOutput, summarize, type TestSummary } from './parse-test-output.js';
import { readPytestReport } from './pytest.js';
import { NODE_WRAPPER, PYTEST_PLUGIN, PYTEST_PLUGIN_MODULE } from './report-helpers.js';
import { planReport, type ReportPlan } from './report-plan.js';
import { NAME_SEPARATOR, isFailing, nameOf, worse, type TestFact } from './test-run.js';

export interface RunTestsOptions {
  /** `harness`: the harness's own shell, which the agent's commands never touch; `agent`: its shell. */
  readonly via: 'agent' | 'harness';
  readonly timeoutMs: number;
  readonly memoryLimitBytes?: number | undefined;
  readonly signal?: AbortSignal | undefined;
  /** The runner detection guessed for the repository's test command. */
  readonly runner?: RunnerKind | undefined;
  /** A test still running after this long is stopped, where the runner can (bounds.ts). */
  readonly perTestMs: number;
  /** False: run the command as it is and read only its output. Default true. */
  readonly reports?: boolean | undefined;
}

export interface TestRunResult {
  readonly command: string;
  readonly exitCode: number | null;
  readonly killed: KillReason | null;
  readonly durationMs: number;
  readonly summary: TestSummary;
  readonly output: string;
  readonly outputBytes: number;
  /** A host file with the complete output when `output` was cut (the caller owns it; agent runs only). */
  readonly fullOutputPath?: string | undefined;
  /** See the test_run event's `ownModules`: harness runs whose output names a missing submodule. */
  readonly ownModules?: readonly string[] | undefined;
}

/** `No module named 'A.B'`: a submodule of a package that imported (its own, or a dependency's). */
const MISSING_SUBMODULE = /No module named '[A-Za-z_]\w*\./;
/**
 * Lists the workspace's Python files one and two levels down, at the root and under src/: constant
 * text, run by the harness's shell in the workspace (names only, no file is read).
 */
const LIST_PYTHON = (workdir: string): string =>
  `(cd -- ${shellQuote(workdir)} && for p in *.py */*.py src/*.py src/*/*.py; do [ -f "$p" ] && printf '%s\\n' "$p"; done); true`;
const MAX_OWN_MODULES = 200;

/** The top-level module names of `LIST_PYTHON`'s paths (`pkg/a.py` → `pkg`, `src/m.py` → `m`). */
export function ownModulesOf(listing: string): string[] {
  const names = new Set<string>();
  for (const line of listing.split('\n')) {
    const path = line.trim();
    // A package named `src` (`from src.app import x`) is one too.
    if (path === 'src/__init__.py') names.add('src');
    const parts = path.split('/');
    if (parts[0] === 'src' && parts.length > 1) parts.shift();
    const first = parts[0] ?? '';
    const name = parts.length === 1 ? first.replace(/\.py$/, '') : first;
    if (/^[A-Za-z_]\w*$/.test(name) && name !== '__init__') names.add(name);
  }
  return [...names].sort().slice(0, MAX_OWN_MODULES);
}

const REPORT_DIR_RE = /^\/[\w./-]+\/issue-agent-report-[0-9a-f]{32}$/;
/** Stands for the report folder while the plan is drafted (a plan that needs none makes none). */
const PLACEHOLDER_DIR = '/issue-agent-report-placeholder';
/** A command that runs an npm script, whose runner its package.json says. */
const NPM_COMMAND_RE = /(?:^|\s)npm\s+(?:test|t|run|run-script)\b/;
/** What the sandbox's node accepts, asked once per sandbox. */
const nodeFlagsOf = new WeakMap<Sandbox, 'timeout+force-exit' | 'timeout' | 'none'>();

export async function runTests(
  sandbox: Sandbox,
  command: string,
  options: RunTestsOptions,
): Promise<TestRunResult> {
  const structured = options.reports !== false;
  const prepared = structured ? await prepare(sandbox, command, options) : null;
  let first = await runOnce(sandbox, command, options, prepared);
  // A Python that does not see PYTHONPATH (`python -I`, a tox environment passing PYTEST_ADDOPTS
  // alone) cannot load the plugin, and pytest then refuses to start: once more without it.
  if (prepared !== null && pluginMissing(first)) {
    const plain = { ...prepared, plan: { ...prepared.plan, setup: '', reports: [], asked: [] } };
    await discard(first.exec);
    first = await runOnce(sandbox, command, options, plain);
  }
  return withOwnModules(sandbox, options, first.result);
}

/** A harness run whose output names a missing submodule gets the workspace's own module names. */
async function withOwnModules(
  sandbox: Sandbox,
  options: RunTestsOptions,
  result: TestRunResult,
): Promise<TestRunResult> {
  if (options.via !== 'harness' || result.exitCode === 0 || !MISSING_SUBMODULE.test(result.output))
    return result;
  const listed = await sandbox
    .harnessExec(LIST_PYTHON(sandbox.workdir), { timeoutMs: 10_000 })
    .catch(() => null);
  if (listed === null || listed.exitCode !== 0) return result;
  return { ...result, ownModules: ownModulesOf(listed.output) };
}

/**
 * The shell a run's commands go through, its report folder's too: the folder is private to the
 * user that makes it (umask 077), and where the harness is another user (Docker) a folder the
 * harness made is one the agent's run could not write its report to, while a folder the agent's
 * user could write to during a harness run is one it could forge that run's report in.
 */
function shellOf(
  sandbox: Sandbox,
  via: RunTestsOptions['via'],
): (command: string, options: ExecOptions) => Promise<ExecResult> {
  return via === 'harness' ? sandbox.harnessExec.bind(sandbox) : sandbox.exec.bind(sandbox);
}

interface Prepared {
  readonly dir: string;
  readonly plan: ReportPlan;
}

interface RunOnce {
  readonly exec: ExecResult;
  readonly result: TestRunResult;
  readonly reportsRead: number;
}

/**
 * The plan, and the report folder when the plan needs one. At most two harness commands: the
 * package.json when the command runs an npm script (its runner decides the plan), then the folder
 * and the helpers the plan uses. A plan that asks nothing (mocha, go, cargo, …) makes no folder.
 */
async function prepare(
  sandbox: Sandbox,
  command: string,
  options: RunTestsOptions,
): Promise<Prepared | null> {
  const eof = `IA_EOF_${randomBytes(8).toString('hex')}`;
  const run = async (script: string): Promise<string | null> => {
    const r = await shellOf(sandbox, options.via)(
      `(cd ${shellQuote(sandbox.workdir)} || exit 3
${script}
)`,
      {
        timeoutMs: 30_000,
        signal: options.signal,
      },
    );
    return r.exitCode === 0 && !r.truncated ? r.output : null;
  };
  let packageJson: string | null = null;
  if (NPM_COMMAND_RE.test(command)) {
    // The manifest, read as data (never run); its scripts decide the runner.
    // Shell builtins only: a process started in a sandbox costs tens of milliseconds under load.
    const out = await run(`if [ -f package.json ]; then printf '%s' "$(<package.json)"; fi`);
    if (out === null) return null;
    packageJson = out === '' ? null : out;
  }
  const planWith = (dir: string): ReportPlan =>
    planReport({
      command,
      runner: options.runner,
      packageJson,
      dir,
      perTestMs: options.perTestMs,
      nodeFlags: nodeFlagsOf.get(sandbox) ?? 'none',
    });
  const draft = planWith(PLACEHOLDER_DIR);
  const nodeUnknown = draft.runner === 'node-test' && !nodeFlagsOf.has(sandbox);
  if (draft.setup === '' && draft.reports.length === 0 && draft.command === command && !nodeUnknown)
    return null;

  const name = `issue-agent-report-${randomBytes(16).toString('hex')}`;
  const needs = (text: string): boolean => draft.setup.includes(text) || draft.command.includes(text);
  // Written with builtins (read from a here-document, printf), not `cat`: see the manifest's read.
  const file = (path: string, text: string): string[] => [
    `IFS= read -r -d '' t <<'${eof}'`,
    text.trimEnd(),
    eof,
    `printf '%s\\n' "$t" > "$d/${path}" || exit 3`,
  ];
  const script = [
    'umask 077',
    `d="\${TMPDIR:-/tmp}/${name}"`,
    // A folder that exists already was not made for this run: no report is read from it.
    'mkdir "$d" "$d/py" "$d/bin" || exit 3',
    ...(needs(PYTEST_PLUGIN_MODULE) ? file(`py/${PYTEST_PLUGIN_MODULE}.py`, PYTEST_PLUGIN) : []),
    ...(needs('node-test-reporter.mjs') ? file('node-test-reporter.mjs', NODE_TEST_REPORTER) : []),
    ...(draft.runner === 'node-test'
      ? [...file('bin/node', NODE_WRAPPER), 'chmod 700 "$d/bin/node" || exit 3']
      : []),
    'printf "dir=%s\\n" "$d"',
    ...(draft.runner === 'node-test' && !nodeFlagsOf.has(sandbox)
      ? [
          'if command -v node >/dev/null 2>&1; then',
          '  if node --test-timeout=1 --test-force-exit -e 0 >/dev/null 2>&1; then echo "nodeflags=timeout+force-exit"',
          '  elif node --test-timeout=1 -e 0 >/dev/null 2>&1; then echo "nodeflags=timeout"; else echo "nodeflags=none"; fi',
          'fi',
        ]
      : []),
  ].join('\n');
  const out = await run(script);
  if (out === null) return null;
  const dir = /^dir=(.*)$/m.exec(out)?.[1]?.trim() ?? '';
  if (!REPORT_DIR_RE.test(dir) || !dir.endsWith(name)) return null;
  const flags = /^nodeflags=(timeout\+force-exit|timeout|none)$/m.exec(out)?.[1];
  if (flags === 'timeout+force-exit' || flags === 'timeout' || flags === 'none')
    nodeFlagsOf.set(sandbox, flags);
  return { dir, plan: planWith(dir) };
}

async function runOnce(
  sandbox: Sandbox,
  command: string,
  options: RunTestsOptions,
  prepared: Prepared | null,
): Promise<RunOnce> {
  const exec = shellOf(sandbox, options.via);
  const plan = prepared?.plan ?? null;
  const body = plan === null ? command : `${plan.setup === '' ? '' : `${plan.setup}\n`}${plan.command}`;
  const r = await exec(`(cd ${shellQuote(sandbox.workdir)} || exit 126\n${body}\n)`, {
    timeoutMs: options.timeoutMs,
    memoryLimitBytes: options.memoryLimitBytes,
    signal: options.signal,
  });
  const output = await fullOutput(r);
  const reports = prepared === null ? [] : await readReports(sandbox, options.via, prepared, options.signal);
  const facts = readFacts(output, r, reports, options.runner ?? plan?.runner, sandbox.workdir);
  if (options.via === 'harness' && r.fullOutputPath !== undefined)
    await rm(r.fullOutputPath, { force: true });
  return {
    exec: r,
    reportsRead: reports.length,
    result: {
      command,
      exitCode: r.exitCode,
      killed: r.killed,
      durationMs: r.durationMs,
      summary: facts,
      output: r.output,
      outputBytes: r.outputBytes,
      fullOutputPath: options.via === 'harness' ? undefined : r.fullOutputPath,
    },
  };
}

/** The complete output: the capture keeps head and tail; the facts in the middle are in the full file. */
async function fullOutput(r: ExecResult): Promise<string> {
  if (!r.truncated || r.fullOutputPath === undefined) return r.output;
  try {
    return await readFile(r.fullOutputPath, 'utf8');
  } catch {
    return r.output;
  }
}

/** A run whose result is not returned: its full output file goes too (harness runs' is gone already). */
async function discard(r: ExecResult): Promise<void> {
  if (r.fullOutputPath !== undefined) await rm(r.fullOutputPath, { force: true });
}

interface ReadReport {
  readonly kind: ReportPlan['reports'][number]['kind'];
  readonly text: string;
}

/**
 * Each report the plan asked for that the run wrote, then the folder removed: one harness command
 * a report, the last one removing the folder (none when there is no report to read).
 */
async function readReports(
  sandbox: Sandbox,
  via: RunTestsOptions['via'],
  prepared: Prepared,
  signal: AbortSignal | undefined,
): Promise<ReadReport[]> {
  const out: ReadReport[] = [];
  const dir = shellQuote(prepared.dir);
  const reports = prepared.plan.reports;
  let removed = false;
  try {
    for (const [i, report] of reports.entries()) {
      const last = i === reports.length - 1;
      const path = shellQuote(`${prepared.dir}/${report.file}`);
      const r = await shellOf(sandbox, via)(
        `if [ -f ${path} ]; then printf '%s' "$(<${path})"; s=$?; else s=3; fi${last ? `; rm -rf ${dir}` : ''}; exit $s`,
        { timeoutMs: 60_000, signal },
      );
      removed = last;
      const text = r.exitCode === 0 ? await fullOutput(r) : null;
      if (r.fullOutputPath !== undefined) await rm(r.fullOutputPath, { force: true });
      if (text !== null) out.push({ kind: report.kind, text });
    }
  } finally {
    if (!removed) await shellOf(sandbox, via)(`rm -rf ${dir}`, { timeoutMs: 60_000 }).catch(() => undefined);
  }
  return out;
}

function pluginMissing(run: RunOnce): boolean {
  return (
    run.reportsRead === 0 &&
    run.result.output.includes(PYTEST_PLUGIN_MODULE) &&
    /Error importing plugin|ImportError|ModuleNotFoundError|No module named/.test(run.result.output)
  );
}

function stoppedBy(r: Pick<ExecResult, 'killed'>, output: string): string | null {
  if (r.killed === 'timeout') return 'timed out';
  if (r.killed === 'memory') return 'out of memory';
  if (r.killed === 'cancelled') return 'cancelled';
  // The plugin's bound ended the process after printing the stack of the test that hung.
  if (/Timeout \(\d+:\d\d:\d\d\)!$/m.test(output)) return 'timed out';
  return null;
}

/** The run's facts: its reports' and its output's, merged. Exported for the corpus tests. */
export function readFacts(
  output: string,
  r: Pick<ExecResult, 'killed' | 'exitCode'>,
  reports: readonly ReadReport[],
  hint: RunnerKind | undefined,
  root: string | null,
): TestSummary {
  const read = readTestOutput(output, { hint, root });
  const stopped = stoppedBy(r, output);
  // Why a test the output left unfinished did not finish: the harness's reason, or the exit code.
  const why =
    stopped ?? (r.exitCode !== null && r.exitCode !== 0 ? `the process exited (code ${r.exitCode})` : null);
  const text =
    why === null
      ? read
      : {
          ...read,
          facts: read.facts.map((f) => (f.detail === 'did not finish' ? { ...f, detail: why } : f)),
        };
  const heapOom = output.includes('JavaScript heap out of memory');
  let reportFacts: TestFact[] | null = null;
  let reportWhole = false;
  const fileMs = new Map<string, number>();
  const hung = new Set<string>(text.hung);
  const sources: string[] = [];
  for (const report of reports) {
    if (report.kind === 'pytest') {
      const p = readPytestReport(report.text, why);
      if (p.facts.length === 0 && !p.finished) continue;
      reportFacts = [...(reportFacts ?? []), ...p.facts];
      reportWhole = p.finished && p.allReported;
      for (const [f, ms] of p.fileMs) fileMs.set(f, ms);
      if (p.running !== null && stopped === 'timed out') hung.add(p.running.split('::')[0] ?? p.running);
      sources.push('report (pytest plugin)');
    } else if (report.kind === 'node-test') {
      const n = readNodeTestReport(report.text, root, why, heapOom);
      reportFacts = [...(reportFacts ?? []), ...n.facts.values()];
      reportWhole = n.ended && !n.facts.overflow;
      for (const [f, ms] of n.fileMs) fileMs.set(f, ms);
      for (const f of n.hung) hung.add(f);
      sources.push('report (node:test reporter)');
    } else {
      const j = readJestReport(report.text, root);
      if (j === null) continue;
      reportFacts = [...(reportFacts ?? []), ...j.facts.values()];
      reportWhole = j.whole;
      for (const [f, ms] of j.fileMs) fileMs.set(f, ms);
      sources.push(`report (${report.kind} json)`);
    }
  }
  if (text.runner !== 'unknown') sources.push(`output (${text.runner})`);
  // A test that the runner's own timeout stopped hung, and so did its file.
  for (const f of [...(reportFacts ?? []), ...text.facts]) {
    if (f.detail === 'timed out' && f.file !== null) hung.add(f.file);
  }
  const finishedOnItsOwn = r.killed === null && r.exitCode !== null;
  // A file that was running when the harness stopped the run, as the output shows it.
  const extra: TestFact[] = [];
  if (r.killed !== null && text.running !== null) {
    hung.add(text.running);
    extra.push({
      id: text.running,
      file: text.running,
      status: 'crashed-file',
      source: 'harness',
      detail: stopped ?? 'did not finish',
    });
  }
  let facts: TestFact[];
  let complete: boolean;
  let counts: {
    passed: number | null;
    failed: number | null;
    skipped: number | null;
    errored: number | null;
  };
  // The file the run was stopped in: one fact for it, the harness's (it says why).
  const withStop = (list: readonly TestFact[]): TestFact[] => {
    const ids = new Set(extra.map((e) => e.id));
    return [...list.filter((f) => !ids.has(f.id)), ...extra];
  };
  if (reportFacts === null) {
    facts = withStop(text.facts);
    complete = finishedOnItsOwn && text.whole;
    counts = text.counts;
    if (extra.length > 0) counts = countsOf(facts);
  } else {
    const merged = mergeFacts(reportFacts, text.facts);
    facts = withStop(merged.facts);
    complete = finishedOnItsOwn && reportWhole && merged.added === 0;
    counts = countsOf(facts);
    // Skips the report does not list (node-tap's, some of pytest's) are the output's to count.
    if (text.counts.skipped !== null && text.counts.skipped > (counts.skipped ?? 0))
      counts = { ...counts, skipped: text.counts.skipped };
  }
  return summarize({
    runner: text.runner !== 'unknown' ? text.runner : (hint ?? 'unknown'),
    facts,
    counts,
    complete,
    sources,
    hung: [...hung],
    fileMs,
  });
}

/**
 * The report's facts with the output's: the output can only make a test worse (a report the
 * tests themselves could have rewritten never hides a failure the output shows), and adds what
 * the report does not have. An output fact without a file matches a report fact of the same name
 * in one file only; a file-level fact of the output (jest's `PASS file`) stands for the report's
 * tests of that file and adds nothing.
 */
export function mergeFacts(
  report: readonly TestFact[],
  output: readonly TestFact[],
): { facts: TestFact[]; added: number } {
  const byId = new Map<string, TestFact>();
  const byName = new Map<string, string[]>();
  // jest's console joins titles with " › ", its report keeps them apart: a title that holds " › "
  // reads differently in the two, so ids also match with every " › " read as " > ".
  const loose = (id: string): string => id.replaceAll(' › ', NAME_SEPARATOR);
  const byLoose = new Map<string, string[]>();
  const files = new Set<string>();
  for (const f of report) {
    byId.set(f.id, f);
    byLoose.set(loose(f.id), [...(byLoose.get(loose(f.id)) ?? []), f.id]);
    if (f.file !== null) {
      files.add(f.file);
      const name = nameOf(f.id, f.file);
      byName.set(name, [...(byName.get(name) ?? []), f.id]);
    }
  }
  let added = 0;
  const extra: TestFact[] = [];
  for (const o of output) {
    let id: string | null = byId.has(o.id) ? o.id : null;
    if (id === null) {
      const same = byLoose.get(loose(o.id));
      if (same?.length === 1) id = same[0] ?? null;
    }
    if (id === null && o.file === null) {
      const same = byName.get(o.id) ?? [];
      if (same.length === 1) id = same[0] ?? null;
      else if (same.length > 1) {
        // Tests of that name in several files: a failure none of them reports fails them all.
        const failing = same.some((s) => isFailing(byId.get(s)?.status ?? 'passed'));
        if (isFailing(o.status) && !failing) {
          for (const s of same) {
            const prior = byId.get(s);
            if (prior !== undefined) byId.set(s, { ...prior, status: o.status, source: 'output' });
          }
        }
        continue;
      }
    }
    if (id === null && o.file !== null && o.id === o.file && files.has(o.file)) {
      // A whole file in the output, its tests in the report: it adds a failure only.
      if (!isFailing(o.status)) continue;
      const ofFile = report.filter((f) => f.file === o.file);
      if (ofFile.some((f) => isFailing(f.status))) continue;
    }
    if (id === null) {
      extra.push(o);
      if (o.status !== 'skipped') added++;
      continue;
    }
    const prior = byId.get(id);
    if (prior !== undefined && isFailing(o.status) && worse(prior.status, o.status) !== prior.status) {
      byId.set(id, { ...prior, status: o.status, source: 'output' });
    }
  }
  return { facts: [...byId.values(), ...extra], added };
}
