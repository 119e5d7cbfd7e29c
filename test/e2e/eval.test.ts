import assert from 'node:assert/strict';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { FileEventStore } from '../../src/events/file-event-store.js';
import { reduceState, totalTokens } from '../../src/events/reduce-state.js';
import type { EventOf } from '../../src/events/schema.js';
import type { EvalSummary } from '../../src/eval/report.js';
import { testTime, type TaskResult } from '../../src/eval/run-eval.js';
import { cliEnv, runCli, startCli } from '../support/cli.js';
import { buildTaskSet } from '../support/eval-tasks.js';
import { startGitHubSimulator } from '../support/github-sim/index.js';
import { dockerTest } from '../sandbox/docker/docker-test-support.js';

const env = cliEnv({});

function readResults(out: string): TaskResult[] {
  return readFileSync(join(out, 'results.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as TaskResult);
}

/** Must-show 4: every number of the report is what the per-task event logs say. */
function assertAgreesWithLogs(out: string): void {
  const results = readResults(out);
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as EvalSummary;
  let tokens = 0;
  let usd = 0;
  let steps = 0;
  for (const r of results) {
    const events = FileEventStore.open(r.trajectory).events;
    const state = reduceState(events);
    assert.equal(r.tokens, totalTokens(state.usage), r.instance_id);
    assert.deepEqual(r.usage, state.usage, r.instance_id);
    assert.equal(r.usd, state.usd, r.instance_id);
    assert.equal(r.steps, state.steps, r.instance_id);
    assert.equal(r.agentMs, state.elapsedMs, r.instance_id);
    assert.equal(r.outcome, state.outcome?.outcome, r.instance_id);
    assert.ok(r.wallMs >= r.testMs && r.wallMs > 0, r.instance_id);
    // Test time: the log's test runs (the agent's run_tests included) and grading's.
    assert.ok(Math.abs(r.testMs - testTime(events) - (r.grade?.testMs ?? 0)) < 1e-6, r.instance_id);
    tokens += r.tokens;
    usd += r.usd;
    steps += r.steps;
  }
  assert.equal(summary.tokens, tokens);
  assert.ok(Math.abs(summary.usd - usd) < 1e-9);
  assert.equal(summary.steps, steps);
  const resolved = results.filter((r) => r.resolved).length;
  assert.equal(summary.resolved, resolved);
  assert.equal(summary.resolvedPercent, Math.round((1000 * resolved) / summary.tasks) / 10);
}

dockerTest(
  'eval with the oracle in Docker: 8 Python and JavaScript tasks resolved; a careless gold patch graded unresolved with the broken test named; the report agrees with the event logs',
  async (_docker, t) => {
    const built = buildTaskSet({ wrongGold: true });
    t.after(() => {
      built.cleanup();
    });
    // The careless task is of py-median's repository at its base commit, as two SWE-bench tasks of
    // one commit are: the eval runs that baseline once.
    const of = built.tasks.find((x) => x.instance_id === 'py-median');
    assert.ok(of);
    const set = {
      ...built,
      tasks: built.tasks.map((x) =>
        x.instance_id === 'py-median-careless'
          ? { ...x, repo_path: of.repo_path, base_commit: of.base_commit }
          : x,
      ),
    };
    writeFileSync(set.file, set.tasks.map((x) => `${JSON.stringify(x)}\n`).join(''));
    const out = join(set.dir, 'out');
    const r = await runCli(
      ['eval', set.file, '--model', 'oracle', '--sandbox', 'docker', '--concurrency', '2', '--out', out],
      env,
    );
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    const results = readResults(out);
    assert.equal(results.length, 9);
    for (const x of results.filter((x) => x.instance_id !== 'py-median-careless')) {
      assert.equal(x.resolved, true, `${x.instance_id}: ${JSON.stringify(x.grade)}`);
      assert.equal(x.grade?.tests.FAIL_TO_PASS.failure.length, 0);
    }
    const careless = results.find((x) => x.instance_id === 'py-median-careless');
    assert.ok(careless?.grade);
    // Its baseline is py-median's, run once (the tasks' base tree, environment and command are one).
    const baselineOf = (x: TaskResult): EventOf<'test_run'> | undefined =>
      FileEventStore.open(x.trajectory).events.find(
        (e): e is EventOf<'test_run'> => e.kind === 'test_run' && e.phase === 'baseline',
      );
    const median = results.find((x) => x.instance_id === 'py-median');
    assert.ok(median);
    assert.equal(baselineOf(median)?.reusedFrom, undefined);
    assert.equal(
      baselineOf(careless)?.reusedFrom?.conversationId,
      FileEventStore.open(median.trajectory).base.conversationId,
    );
    assert.equal(careless.resolved, false);
    assert.deepEqual(careless.grade.tests.FAIL_TO_PASS.success, ['tests/test_stats.py::test_even']);
    assert.deepEqual(careless.grade.failing, [{ id: 'tests/test_stats.py::test_odd', status: 'failed' }]);
    // The terminal report and the Markdown name it too, as a harness bug of the oracle run.
    assert.match(
      r.stdout,
      /py-median-careless: 1 listed test\(s\) did not pass: tests\/test_stats\.py::test_odd \(failed\)/,
    );
    assert.match(readFileSync(join(out, 'summary.md'), 'utf8'), /## Harness bugs[\s\S]*py-median-careless/);
    assert.match(r.stdout, /resolved: 8\/9 \(88\.9%\)/);
    // SWE-bench's predictions file, for its own harness.
    const predictions = readFileSync(join(out, 'predictions.jsonl'), 'utf8').trim().split('\n');
    assert.equal(predictions.length, 9);
    assert.match(predictions[0] ?? '', /"model_patch":"diff --git/);
    // The agent never saw the test patch: its log has none of the new tests' names.
    const log = JSON.stringify(FileEventStore.open(results[0]?.trajectory ?? '').events);
    assert.doesNotMatch(log, /test_even/);
    assertAgreesWithLogs(out);
  },
  { timeout: 900_000 },
);

test('eval interrupted (SIGINT) and run again: graded tasks are not redone, the rest finish; the report agrees with the logs', async (t) => {
  // Three tasks, one at a time: the first finishes, the interrupt cancels the second mid-run (started
  // over by the second run) and the third never starts.
  const set = buildTaskSet({ only: ['py-clamp', 'js-range', 'py-words'] });
  t.after(() => {
    set.cleanup();
  });
  const out = join(set.dir, 'out');
  const args = [
    'eval',
    set.file,
    '--model',
    'oracle',
    '--sandbox',
    'local',
    '--concurrency',
    '1',
    '--out',
    out,
  ];
  const first = startCli(args, env);
  const firstResult = join(out, 'tasks', 'py-clamp', 'result.json');
  const deadline = Date.now() + 120_000;
  while (!existsSync(firstResult) && Date.now() < deadline) await delay(50);
  assert.ok(existsSync(firstResult), 'the first task finished');
  first.kill('SIGINT');
  const interrupted = await first.result;
  assert.equal(interrupted.code, 130, interrupted.stderr);
  assert.match(interrupted.stderr, /interrupted: cancelling the running tasks/);
  const partial = readResults(out);
  assert.ok(
    partial.length >= 1 && partial.length < 3,
    `${partial.length} tasks finished before the interrupt`,
  );
  const finishedBefore = new Map(
    partial.map((r) => [r.instance_id, statSync(join(out, 'tasks', r.instance_id, 'result.json')).mtimeMs]),
  );

  const second = await runCli(args, env);
  assert.equal(second.code, 0, `${second.stdout}\n${second.stderr}`);
  const results = readResults(out);
  assert.deepEqual(
    results.map((r) => r.instance_id),
    ['py-clamp', 'py-words', 'js-range'],
  );
  assert.ok(results.every((r) => r.resolved));
  for (const [id, mtime] of finishedBefore) {
    assert.equal(statSync(join(out, 'tasks', id, 'result.json')).mtimeMs, mtime, `${id} was not redone`);
    assert.match(second.stderr, new RegExp(`${id}: resolved \\(earlier run\\)`));
    const events = FileEventStore.open(join(out, 'tasks', id, 'trajectory')).events;
    assert.equal(events.filter((e) => e.kind === 'run_resumed').length, 0);
  }
  assertAgreesWithLogs(out);
});

test('eval --attempts 2: each task twice, each attempt its own trajectory and grade; resolved by any attempt and per attempt; one prediction per task', async (t) => {
  const set = buildTaskSet({ only: ['py-clamp', 'js-range'] });
  t.after(() => {
    set.cleanup();
  });
  const out = join(set.dir, 'out');
  const r = await runCli(
    ['eval', set.file, '--model', 'oracle', '--sandbox', 'local', '--attempts', '2', '--out', out, '--json'],
    env,
  );
  assert.equal(r.code, 0, r.stderr);
  const results = readResults(out);
  assert.deepEqual(
    results.map((x) => [x.instance_id, x.attempt, x.resolved]),
    [
      ['py-clamp', 1, true],
      ['py-clamp', 2, true],
      ['js-range', 1, true],
      ['js-range', 2, true],
    ],
  );
  // Separate runs: two trajectories per task, each with its own conversation.
  const [first, second] = results;
  assert.ok(first && second);
  assert.notEqual(first.trajectory, second.trajectory);
  assert.equal(second.trajectory, join(out, 'tasks', 'py-clamp.attempt-2', 'trajectory'));
  assert.notEqual(
    FileEventStore.open(first.trajectory).base.conversationId,
    FileEventStore.open(second.trajectory).base.conversationId,
  );
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as EvalSummary;
  assert.equal(summary.attempts, 2);
  assert.equal(summary.tasks, 2);
  assert.equal(summary.completed, 4);
  assert.equal(summary.resolved, 2);
  assert.equal(summary.resolvedAttempts, 4);
  assert.equal(summary.attemptResolvedPercent, 100);
  assert.match(readFileSync(join(out, 'summary.md'), 'utf8'), /\| py-clamp \(2\) \| yes \|/);
  assert.equal(readFileSync(join(out, 'predictions.jsonl'), 'utf8').trim().split('\n').length, 2);
  assert.equal(
    summary.tokens,
    results.reduce((n, x) => n + x.tokens, 0),
  );
});

test('eval: a harness failure is tried once more in the same run (the task resolves); failing twice is an error of the task, not recorded, and the next run tries it again', async (t) => {
  const set = buildTaskSet({ only: ['js-range'] });
  const sim = await startGitHubSimulator();
  t.after(async () => {
    await sim.close();
    set.cleanup();
  });
  await sim.createRepo({
    owner: 'fixtures',
    name: 'js-range',
    sourceDir: join(set.dir, 'repos', 'js-range'),
  });
  // As SWE-bench ships it (no local copy): the eval fetches the repository, and the fetch fails.
  const file = join(set.dir, 'swe.jsonl');
  writeFileSync(
    file,
    set.tasks.map((task) => `${JSON.stringify({ ...task, repo_path: undefined })}\n`).join(''),
  );
  const out = join(set.dir, 'out');
  const args = ['eval', file, '--model', 'oracle', '--sandbox', 'local', '--out', out];
  const fetchEnv = cliEnv({ GITHUB_SERVER_URL: sim.url });
  const fault = { path: /^\/fixtures\/js-range\.git\/info\/refs$/, kind: 'status', status: 500 } as const;

  sim.injectFault({ ...fault, times: 2 });
  const failed = await runCli(args, fetchEnv);
  // A task the harness could not run fails the eval's exit code.
  assert.equal(failed.code, 1, failed.stderr);
  assert.match(failed.stderr, /the harness failed; trying the task again/);
  assert.match(failed.stdout, /js-range .*the harness failed: cannot fetch/);
  assert.equal(existsSync(join(out, 'tasks', 'js-range', 'result.json')), false);

  sim.injectFault({ ...fault, times: 1 });
  const retried = await runCli(args, fetchEnv);
  assert.equal(retried.code, 0, `${retried.stdout}\n${retried.stderr}`);
  assert.match(retried.stderr, /the harness failed; trying the task again/);
  const [result] = readResults(out);
  assert.equal(result?.resolved, true, JSON.stringify(result));
  assert.equal(sim.requests.filter((r) => r.status === 500).length, 3);
});
