import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import type { AgentEnv } from '../config/agent-env.js';
import { summarize, terminalReport, writeReport } from '../eval/report.js';
import { EvalConfigError, runEval, type EvalProgress } from '../eval/run-eval.js';
import { readTasks, TaskFileError } from '../eval/tasks.js';
import { sandboxKind, UsageError } from './workspace.js';

export const EVAL_USAGE = `  issue-agent eval <tasks.jsonl> [--concurrency N] [--sandbox docker|local] [--out DIR]
                   [--model oracle] [--setup on|off] [--repos-dir DIR] [--json]`;

/**
 * `issue-agent eval`: runs a task set (SWE-bench instances, see eval/tasks.ts) and reports. Exit 0
 * when every task was graded, 1 when the harness failed some task, 130 when interrupted (run it
 * again with the same --out to finish). Ctrl-C once stops starting tasks and cancels the running
 * ones; twice exits at once (their event logs resume on the next run).
 */
export async function evalCommand(args: readonly string[], env: AgentEnv): Promise<number> {
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
      },
    });
  } catch (error) {
    throw new UsageError(error instanceof Error ? (error.message.split('\n')[0] ?? '') : 'bad arguments');
  }
  const { values, positionals } = parsed;
  if (positionals.length !== 1 || positionals[0] === undefined) {
    throw new UsageError('eval takes exactly one <tasks.jsonl>');
  }
  const concurrency = Number(values.concurrency ?? '1');
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 64) {
    throw new UsageError(`--concurrency must be an integer from 1 to 64, got "${values.concurrency ?? ''}"`);
  }
  if (values.attempts !== undefined && values.attempts !== '1') {
    throw new UsageError('--attempts above 1 is not supported yet: each task gets one attempt');
  }
  if (values.model !== undefined && values.model !== 'oracle') {
    throw new UsageError('--model takes `oracle`; the model otherwise comes from ISSUE_AGENT_MODEL');
  }
  const model = values.model === 'oracle' ? 'oracle' : 'configured';
  if (model === 'configured' && env.anthropicApiKey === null) {
    throw new UsageError('ANTHROPIC_API_KEY is not set (or use --model oracle to check the harness)');
  }
  const kind = sandboxKind(values.sandbox);
  if (kind === 'unconfined') throw new UsageError('eval runs in a sandbox: --sandbox docker or local');
  const setup = values.setup === undefined || values.setup === 'on';
  if (values.setup !== undefined && !['on', 'off'].includes(values.setup)) {
    throw new UsageError(`--setup must be on or off, got "${values.setup}"`);
  }
  let tasks;
  try {
    tasks = await readTasks(positionals[0]);
  } catch (error) {
    if (error instanceof TaskFileError) throw new UsageError(error.message);
    throw error;
  }
  const out = resolve(values.out ?? resolve(env.runsDir, 'eval'));
  const json = values.json === true;
  const controller = new AbortController();
  let interrupts = 0;
  const onSigint = (): void => {
    interrupts += 1;
    if (interrupts > 1) process.exit(130);
    process.stderr.write('\ninterrupted: cancelling the running tasks (Ctrl-C again to exit now)\n');
    controller.abort('interrupted');
  };
  process.on('SIGINT', onSigint);
  const logger = pino({ level: env.logLevel, base: { eval: out } }, pino.destination(2));
  const progress = new ProgressLine(process.stderr.isTTY);
  process.stderr.write(
    `eval: ${tasks.length} task(s), ${concurrency} at a time, ${kind} sandbox, model ${model === 'oracle' ? 'oracle' : env.model}; results in ${out}\n`,
  );
  let run;
  try {
    run = await runEval({
      tasks,
      out,
      concurrency,
      kind,
      setup,
      env,
      model,
      reposDir: values['repos-dir'] === undefined ? null : resolve(values['repos-dir']),
      tasksFile: resolve(positionals[0]),
      signal: controller.signal,
      logger,
      onProgress: (p) => {
        progress.update(p);
      },
    });
  } catch (error) {
    if (error instanceof EvalConfigError) throw new UsageError(error.message);
    throw error;
  } finally {
    process.off('SIGINT', onSigint);
    progress.end();
  }
  const summary = summarize(run, {
    total: tasks.length,
    model: model === 'oracle' ? 'oracle' : env.model,
    sandbox: kind,
  });
  await writeReport(out, run.results, summary);
  if (json) console.log(JSON.stringify(summary));
  else console.log(terminalReport(run.results, summary));
  if (run.interrupted.length > 0) return 130;
  return run.results.some((r) => r.grade === null || r.grade.status === 'error') ? 1 : 0;
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
