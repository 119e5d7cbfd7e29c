import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import type { AgentEnv } from '../config/agent-env.js';
import { summarize, terminalReport, writeReport } from '../eval/report.js';
import { EvalConfigError, runEval, type EvalProgress } from '../eval/run-eval.js';
import { buildTasksFromRepo, FromRepoError, type Skipped } from '../eval/from-repo.js';
import { readTasks, TaskFileError, type EvalTask } from '../eval/tasks.js';
import { listenForInterrupts } from './interrupts.js';
import { SetupError } from '../execution/provision.js';
import { chooseSandbox, sandboxKind, UsageError } from './workspace.js';

export const EVAL_USAGE = `  issue-agent eval <tasks.jsonl> [--concurrency N] [--sandbox docker|local] [--out DIR]
                   [--attempts K] [--model oracle] [--setup on|off] [--repos-dir DIR] [--json]
  issue-agent eval --from-repo owner/name [--since DATE] [--limit N] [--test-command CMD]
                   [--build-only] [and the options above]   (GITHUB_TOKEN, GITHUB_API_URL)`;

/**
 * `issue-agent eval`: runs a task set (SWE-bench instances, see eval/tasks.ts) and reports. Exit 0
 * when every task was graded, 1 when the harness failed some task, 130 when interrupted (run it
 * again with the same --out to finish). Ctrl-C once stops starting tasks and cancels the running
 * ones; twice exits at once (their event logs resume on the next run).
 */
export async function evalCommand(args: readonly string[], env: AgentEnv): Promise<number> {
  const { values, positionals, fromRepo, concurrency, attempts, model, setup } = parseEvalArgs(args, env);
  const kind = sandboxKind(values.sandbox);
  const sandbox = await chooseSandbox(kind, env);
  // Grading must not be reachable from the agent's sandbox, nor the answers from either.
  if (!sandbox.backend.isolated) throw new UsageError('eval runs in a sandbox: --sandbox docker or local');
  const source = fromRepo === null ? null : fromRepoSource(fromRepo, values);
  let tasks: EvalTask[] = [];
  if (positionals[0] !== undefined) {
    try {
      tasks = await readTasks(positionals[0]);
    } catch (error) {
      if (error instanceof TaskFileError) throw new UsageError(error.message);
      throw error;
    }
  }
  const out = resolve(
    values.out ?? resolve(env.runsDir, fromRepo === null ? 'eval' : `eval-${fromRepo.replace('/', '__')}`),
  );
  const json = values.json === true;
  // Ctrl-C cancels the running tasks (their setups too); a second one removes what they started
  // at once and exits 130 (see listenForInterrupts).
  const interrupts = listenForInterrupts({
    removeOwned: async () => {
      await sandbox.backend.removeOwned?.();
    },
    onFirst: () => {
      process.stderr.write(
        '\ninterrupted: cancelling the running tasks (Ctrl-C again to remove what they started at once and exit)\n',
      );
    },
    write: (line) => {
      process.stderr.write(`interrupted: ${line}\n`);
    },
  });
  const logger = pino({ level: env.logLevel, base: { eval: out } }, pino.destination(2));
  let tasksFile = positionals[0] === undefined ? '' : resolve(positionals[0]);
  let skipped: readonly Skipped[] | null = null;
  if (source !== null) {
    process.stderr.write(
      `eval: building tasks from the closed issues of ${source.repo}${source.since === null ? '' : ` since ${source.since.toISOString()}`} (at most ${source.limit}), in the ${kind} sandbox\n`,
    );
    let built;
    try {
      built = await buildTasksFromRepo({
        ...source,
        out,
        sandbox,
        env,
        setup,
        hide: [],
        concurrency,
        logger,
        signal: interrupts.signal,
        onProgress: (line) => {
          process.stderr.write(`  ${line}\n`);
        },
      });
    } catch (error) {
      interrupts.dispose();
      if (error instanceof FromRepoError) throw new SetupError(error.message);
      throw error;
    }
    if (interrupts.signal.aborted) {
      interrupts.dispose();
      process.stderr.write('interrupted while building the tasks: run the same command again to go on\n');
      return 130;
    }
    tasks = [...built.tasks];
    tasksFile = built.file;
    skipped = built.skipped;
    process.stderr.write(
      `eval: ${built.tasks.length} task(s) built, ${built.skipped.length} closed issue(s) skipped; task set in ${built.file}\n`,
    );
    if (values['build-only'] === true || tasks.length === 0) {
      interrupts.dispose();
      if (json)
        console.log(JSON.stringify({ repo: source.repo, tasks: tasks.length, file: built.file, skipped }));
      return tasks.length === 0 && values['build-only'] !== true ? 1 : 0;
    }
  }
  const progress = new ProgressLine(process.stderr.isTTY);
  process.stderr.write(
    `eval: ${tasks.length} task(s)${attempts > 1 ? ` × ${attempts} attempts` : ''}, ${concurrency} at a time, ${kind} sandbox, model ${model === 'oracle' ? 'oracle' : env.model}; results in ${out}\n`,
  );
  let run;
  try {
    run = await runEval({
      tasks,
      out,
      concurrency,
      attempts,
      sandbox,
      setup,
      env,
      model,
      reposDir: values['repos-dir'] === undefined ? null : resolve(values['repos-dir']),
      // A `repo` with no local copy is fetched from GitHub (or GITHUB_SERVER_URL), with the token if set.
      remote: {
        serverUrl: (process.env.GITHUB_SERVER_URL ?? 'https://github.com').replace(/\/+$/, ''),
        token: (process.env.GITHUB_TOKEN ?? process.env.GH_TOKEN ?? '').trim() || null,
      },
      tasksFile,
      signal: interrupts.signal,
      logger,
      onProgress: (p) => {
        progress.update(p);
      },
    });
  } catch (error) {
    if (error instanceof EvalConfigError) throw new UsageError(error.message);
    throw error;
  } finally {
    interrupts.dispose();
    progress.end();
  }
  const summary = summarize(run, {
    total: tasks.length,
    attempts,
    model: model === 'oracle' ? 'oracle' : env.model,
    sandbox: kind,
    ...(source === null || skipped === null ? {} : { source: { repo: source.repo, skipped } }),
  });
  await writeReport(out, run.results, summary);
  if (json) console.log(JSON.stringify(summary));
  else console.log(terminalReport(run.results, summary));
  if (run.interrupted.length > 0) return 130;
  return run.results.some((r) => r.grade === null || r.grade.status === 'error') ? 1 : 0;
}

/** The command's arguments, checked: every usage error before anything runs. */
function parseEvalArgs(args: readonly string[], env: AgentEnv) {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...args],
      allowPositionals: true,
      strict: true,
      options: {
        concurrency: { type: 'string' },
        sandbox: { type: 'string' },
        out: { type: 'string' },
        model: { type: 'string' },
        setup: { type: 'string' },
        attempts: { type: 'string' },
        'repos-dir': { type: 'string' },
        json: { type: 'boolean' },
        'from-repo': { type: 'string' },
        since: { type: 'string' },
        limit: { type: 'string' },
        'test-command': { type: 'string' },
        'build-only': { type: 'boolean' },
      },
    });
  } catch (error) {
    throw new UsageError(error instanceof Error ? (error.message.split('\n')[0] ?? '') : 'bad arguments');
  }
  const { values, positionals } = parsed;
  const fromRepo = values['from-repo'] ?? null;
  if (fromRepo === null) {
    if (positionals.length !== 1 || positionals[0] === undefined) {
      throw new UsageError('eval takes exactly one <tasks.jsonl>, or --from-repo owner/name');
    }
    for (const flag of ['since', 'limit', 'test-command', 'build-only'] as const) {
      if (values[flag] !== undefined) throw new UsageError(`--${flag} goes with --from-repo`);
    }
  } else {
    if (positionals.length > 0)
      throw new UsageError('--from-repo builds the task set: give no <tasks.jsonl>');
    if (!/^[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+$/.test(fromRepo)) {
      throw new UsageError(`--from-repo takes owner/name, got "${fromRepo}"`);
    }
  }
  const concurrency = Number(values.concurrency ?? '1');
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 64) {
    throw new UsageError(`--concurrency must be an integer from 1 to 64, got "${values.concurrency ?? ''}"`);
  }
  const attempts = Number(values.attempts ?? '1');
  if (!Number.isInteger(attempts) || attempts < 1 || attempts > 10) {
    throw new UsageError(`--attempts must be an integer from 1 to 10, got "${values.attempts ?? ''}"`);
  }
  if (values.model !== undefined && values.model !== 'oracle') {
    throw new UsageError('--model takes `oracle`; the model otherwise comes from ISSUE_AGENT_MODEL');
  }
  const model: 'oracle' | 'configured' = values.model === 'oracle' ? 'oracle' : 'configured';
  if (model === 'configured' && env.anthropicApiKey === null && values['build-only'] !== true) {
    throw new UsageError('ANTHROPIC_API_KEY is not set (or use --model oracle to check the harness)');
  }
  const setup = values.setup === undefined || values.setup === 'on';
  if (values.setup !== undefined && !['on', 'off'].includes(values.setup)) {
    throw new UsageError(`--setup must be on or off, got "${values.setup}"`);
  }
  return { values, positionals, fromRepo, concurrency, attempts, model, setup };
}

/** Where `--from-repo` reads: GITHUB_TOKEN (or GH_TOKEN) at GITHUB_API_URL (GitHub's by default). */
function fromRepoSource(
  repo: string,
  values: { since?: string | undefined; limit?: string | undefined; 'test-command'?: string | undefined },
): {
  repo: string;
  apiUrl: string;
  token: string;
  since: Date | null;
  limit: number;
  testCommand: string | null;
} {
  const token = (process.env.GITHUB_TOKEN ?? process.env.GH_TOKEN ?? '').trim();
  if (token === '')
    throw new UsageError('--from-repo reads the repository with GITHUB_TOKEN (or GH_TOKEN): set one');
  let since: Date | null = null;
  if (values.since !== undefined) {
    since = new Date(values.since);
    if (!/^\d{4}-\d{2}-\d{2}/.test(values.since) || Number.isNaN(since.getTime())) {
      throw new UsageError(`--since takes a date (2026-01-31, or an ISO time), got "${values.since}"`);
    }
  }
  const limit = Number(values.limit ?? '20');
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
    throw new UsageError(`--limit must be an integer from 1 to 1000, got "${values.limit ?? ''}"`);
  }
  const testCommand = values['test-command']?.trim() ?? null;
  if (testCommand === '') throw new UsageError('--test-command is empty');
  return {
    repo,
    apiUrl: (process.env.GITHUB_API_URL ?? 'https://api.github.com').replace(/\/+$/, ''),
    token,
    since,
    limit,
    testCommand,
  };
}

/** A progress bar redrawn in place on a terminal; one line per finished task otherwise. */
class ProgressLine {
  private drawn = false;
  constructor(private readonly tty: boolean) {}

  update(p: EvalProgress): void {
    const width = 20;
    const filled = p.total === 0 ? 0 : Math.round((width * p.done) / p.total);
    const bar = `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${p.done}/${p.total} · resolved ${p.resolved} · $${p.usd.toFixed(4)}`;
    if (this.tty) {
      const running = p.running.length > 0 ? ` · running ${p.running.join(', ')}` : '';
      process.stderr.write(`\r\x1b[2K${bar}${running}`.slice(0, 400));
      this.drawn = true;
      return;
    }
    if (p.finished === null) return;
    const r = p.finished.result;
    process.stderr.write(
      `${bar} · ${r.instance_id}: ${r.resolved ? 'resolved' : 'not resolved'}${p.finished.earlier ? ' (earlier run)' : ` (${(r.wallMs / 1000).toFixed(1)} s)`}\n`,
    );
  }

  end(): void {
    if (this.drawn) process.stderr.write('\n');
    this.drawn = false;
  }
}
