import assert from 'node:assert/strict';
import { test } from 'node:test';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BuiltTask, Skipped } from '../../src/eval/from-repo.js';
import type { EvalSummary } from '../../src/eval/report.js';
import type { TaskResult } from '../../src/eval/run-eval.js';
import { startGitHubSimulator } from '../support/github-sim/index.js';
import { buildHistoryRepo } from '../support/history-repo.js';
import { cliEnv, runCli } from '../support/cli.js';
import { dockerTest } from '../sandbox/docker/docker-test-support.js';

function jsonl<T>(file: string): T[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as T);
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    const s = statSync(p);
    return s.isDirectory() ? filesUnder(p) : s.isFile() ? [p] : [];
  });
}

dockerTest(
  'eval --from-repo against the GitHub simulator: three closed issues fixed by merged pull requests with tests become tasks (FAIL_TO_PASS found by running them), one closed without a pull request and one fixed without tests are skipped with reasons; the oracle resolves all three',
  async (_docker, t) => {
    const sim = await startGitHubSimulator();
    const root = mkdtempSync(join(tmpdir(), 'ia-from-repo-'));
    t.after(async () => {
      await sim.close();
      rmSync(root, { recursive: true, force: true });
    });
    const { sub, subPull, mul, zero, crash, wontfix, typo, typoPull } = await buildHistoryRepo(
      sim,
      'octo',
      'calc',
      root,
    );
    const token = sim.actionsToken('octo', 'calc');
    const out = join(root, 'out');
    const env = cliEnv({ GITHUB_TOKEN: token, GITHUB_API_URL: sim.url });
    const r = await runCli(
      [
        'eval',
        '--from-repo',
        'octo/calc',
        '--model',
        'oracle',
        '--sandbox',
        'docker',
        '--concurrency',
        '2',
        '--out',
        out,
      ],
      env,
    );
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stderr, /3 task\(s\) built, 2 closed issue\(s\) skipped/);

    const tasks = jsonl<BuiltTask>(join(out, 'from-repo', 'tasks.jsonl'));
    const byIssue = new Map(tasks.flatMap((x) => x.issue_numbers.map((n) => [n, x] as const)));
    assert.deepEqual([...byIssue.keys()].sort(), [sub, mul, zero, crash].sort());
    assert.equal(tasks.length, 3);
    // One task per pull request: the one that closes two issues has both as its problem.
    const zeroTask = byIssue.get(zero);
    assert.ok(zeroTask);
    assert.deepEqual([...zeroTask.issue_numbers].sort(), [zero, crash].sort());
    assert.match(
      zeroTask.problem_statement,
      /div by zero raises[\s\S]*calc crashes on a zero divisor|calc crashes on a zero divisor[\s\S]*div by zero raises/,
    );
    const subTask = byIssue.get(sub);
    assert.ok(subTask);
    assert.equal(subTask.instance_id, `octo__calc-${subPull}`);
    assert.equal(subTask.pull_number, subPull);
    assert.equal(
      subTask.problem_statement,
      'sub(5, 3) returns -2\nIt should be 2: the arguments are swapped.\n',
    );
    assert.deepEqual(subTask.FAIL_TO_PASS, ['tests/test_calc.py::test_sub']);
    assert.deepEqual(subTask.PASS_TO_PASS, ['tests/test_calc.py::test_add', 'tests/test_calc.py::test_div']);
    // The split: tests in the test patch, the fix in the gold patch.
    assert.match(subTask.test_patch, /tests\/test_calc\.py/);
    assert.doesNotMatch(subTask.test_patch, /^diff --git a\/calc\.py/m);
    assert.match(subTask.patch ?? '', /^diff --git a\/calc\.py b\/calc\.py/);
    assert.doesNotMatch(subTask.patch ?? '', /tests\//);
    assert.deepEqual(byIssue.get(mul)?.FAIL_TO_PASS, [
      'tests/test_mul.py::test_mul',
      'tests/test_mul.py::test_mul_zero',
    ]);
    assert.deepEqual(byIssue.get(mul)?.PASS_TO_PASS, []);
    assert.deepEqual(byIssue.get(zero)?.FAIL_TO_PASS, ['tests/test_calc.py::test_div_zero']);
    assert.deepEqual(byIssue.get(zero)?.PASS_TO_PASS, [
      'tests/test_calc.py::test_add',
      'tests/test_calc.py::test_div',
      'tests/test_calc.py::test_sub',
    ]);

    const skipped = jsonl<Skipped>(join(out, 'from-repo', 'skipped.jsonl'));
    assert.deepEqual(
      skipped.map((s) => [s.issue, s.pull, s.code]).sort(),
      [
        [typo, typoPull, 'no_test_changes'],
        [wontfix, null, 'no_pull_request'],
      ].sort(),
    );
    for (const s of skipped) assert.ok(s.reason.length > 20, s.reason);

    const results = jsonl<TaskResult>(join(out, 'results.jsonl'));
    assert.equal(results.length, 3);
    for (const x of results) assert.equal(x.resolved, true, `${x.instance_id}: ${JSON.stringify(x.grade)}`);
    const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as EvalSummary;
    assert.equal(summary.resolvedPercent, 100);
    assert.equal(summary.source?.repo, 'octo/calc');
    const md = readFileSync(join(out, 'summary.md'), 'utf8');
    assert.match(md, new RegExp(`#${wontfix}: closed without a merged pull request`));
    assert.match(
      md,
      new RegExp(`#${typo} \\(pull request #${typoPull}\\): pull request #${typoPull} changed no tests`),
    );

    // The token was used by the CLI's own client and git, and written nowhere.
    for (const file of filesUnder(out)) {
      assert.ok(!readFileSync(file).includes(token), `the token is in ${file}`);
    }
    assert.ok(!r.stdout.includes(token) && !r.stderr.includes(token));

    // A second build runs no test again: every decision comes from the first one's records.
    const records = join(out, 'from-repo', 'candidates');
    const stamps = (): string[] =>
      readdirSync(records)
        .filter((f) => f.endsWith('.json'))
        .map((f) => `${f}@${statSync(join(records, f)).mtimeMs}`)
        .sort();
    const first = stamps();
    assert.equal(first.length, 3);
    const again = await runCli(
      ['eval', '--from-repo', 'octo/calc', '--sandbox', 'docker', '--out', out, '--build-only', '--json'],
      env,
    );
    assert.equal(again.code, 0, again.stderr);
    assert.deepEqual(stamps(), first);
    const summaryAgain = JSON.parse(again.stdout.trim().split('\n').at(-1) ?? '{}') as { tasks: number };
    assert.equal(summaryAgain.tasks, 3);

    // A task as SWE-bench ships it (`repo` only, no local copy): the eval fetches the repository
    // from the server itself, anonymously for a public one. One task is enough for the fetch (the
    // three above are of the same repository, and a repository is fetched once per eval).
    const swe = join(root, 'swe.jsonl');
    writeFileSync(
      swe,
      [subTask]
        .map((task) => {
          const drop = new Set(['repo_path', 'issue_number', 'issue_numbers', 'pull_number', 'created_at']);
          return JSON.stringify(Object.fromEntries(Object.entries(task).filter(([k]) => !drop.has(k))));
        })
        .join('\n'),
    );
    const out2 = join(root, 'out-swe');
    const fetched = await runCli(
      ['eval', swe, '--model', 'oracle', '--sandbox', 'docker', '--out', out2],
      cliEnv({ GITHUB_SERVER_URL: sim.url }),
    );
    assert.equal(fetched.code, 0, `${fetched.stdout}\n${fetched.stderr}`);
    const refetched = jsonl<TaskResult>(join(out2, 'results.jsonl'));
    assert.deepEqual(
      refetched.map((x) => [x.instance_id, x.resolved]),
      [[subTask.instance_id, true]],
    );
    assert.ok(existsSync(join(out2, 'repos', 'octo__calc.git', 'HEAD')));
  },
  { timeout: 600_000 },
);

test('eval --from-repo: a candidate the harness fails on (its base commit has an invalid config) is skipped with the reason and not recorded; the build goes on', async (t) => {
  const sim = await startGitHubSimulator();
  const root = mkdtempSync(join(tmpdir(), 'ia-from-repo-broken-'));
  t.after(async () => {
    await sim.close();
    rmSync(root, { recursive: true, force: true });
  });
  const h = await buildHistoryRepo(sim, 'octo', 'broken', root, {
    '.github/issue-agent.yml': 'setup: [unclosed\n',
  });
  const out = join(root, 'out');
  const r = await runCli(
    ['eval', '--from-repo', 'octo/broken', '--sandbox', 'local', '--out', out, '--build-only', '--json'],
    cliEnv({ GITHUB_TOKEN: sim.actionsToken('octo', 'broken'), GITHUB_API_URL: sim.url }),
  );
  assert.equal(r.code, 0, r.stderr);
  const skipped = jsonl<Skipped>(join(out, 'from-repo', 'skipped.jsonl'));
  // The pull request that closes two issues is one candidate, named by either (the newest closed).
  assert.deepEqual(
    skipped.map((s) => [s.issue === h.crash ? h.zero : s.issue, s.code]).sort(),
    [
      [h.sub, 'harness_error'],
      [h.mul, 'harness_error'],
      [h.zero, 'harness_error'],
      [h.wontfix, 'no_pull_request'],
      [h.typo, 'no_test_changes'],
    ].sort(),
  );
  for (const s of skipped.filter((x) => x.code === 'harness_error')) {
    assert.match(s.reason, /issue-agent\.yml is not valid YAML/);
  }
  // Not recorded: the next build tries them again.
  assert.deepEqual(
    readdirSync(join(out, 'from-repo', 'candidates')).filter((f) => f.endsWith('.json')),
    [],
  );
});
