import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { BuiltTask, Skipped } from '../../src/eval/from-repo.js';
import type { EvalSummary } from '../../src/eval/report.js';
import type { TaskResult } from '../../src/eval/run-eval.js';
import { startGitHubSimulator } from '../support/github-sim/index.js';
import { git } from '../github-sim/helpers.js';
import { cliEnv, runCli } from '../support/cli.js';
import { dockerTest } from '../sandbox/docker/docker-test-support.js';

const CALC = `def add(a, b):
    return a + b


def sub(a, b):
    return b - a


def div(a, b):
    return a / b
`;

const TESTS = `from calc import add, div, sub


def test_add():
    assert add(2, 3) == 5


def test_div():
    assert div(6, 3) == 2
`;

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
    const src = join(root, 'src');
    const write = (path: string, text: string): void => {
      mkdirSync(dirname(join(src, path)), { recursive: true });
      writeFileSync(join(src, path), text);
    };
    write('calc.py', CALC);
    write('tests/test_calc.py', TESTS);
    write('pytest.ini', '[pytest]\npythonpath = .\n');
    write('README.md', '# calc\n\nA calclator.\n');
    await git(src, ['init', '-q', '-b', 'main']);
    await git(src, ['add', '-A']);
    await git(src, ['commit', '-q', '-m', 'calc']);
    await sim.createRepo({ owner: 'octo', name: 'calc', sourceDir: src });
    const bare = sim.bareRepoPath('octo', 'calc');
    const work = join(root, 'work');
    await git(root, ['-c', 'protocol.file.allow=always', 'clone', '-q', bare, work]);

    /** A branch off the current main with `files` changed, pushed, opened as a pull request. */
    const pullRequest = async (
      branch: string,
      files: Record<string, string>,
      title: string,
      body: string,
    ): Promise<number> => {
      await git(work, ['-c', 'protocol.file.allow=always', 'fetch', '-q', 'origin']);
      await git(work, ['checkout', '-q', '-B', branch, 'origin/main']);
      for (const [path, text] of Object.entries(files)) {
        mkdirSync(dirname(join(work, path)), { recursive: true });
        writeFileSync(join(work, path), text);
      }
      await git(work, ['add', '-A']);
      await git(work, ['commit', '-q', '-m', title]);
      await git(work, ['-c', 'protocol.file.allow=always', 'push', '-q', 'origin', branch]);
      const pull = await sim.openPull('octo', 'calc', {
        head: branch,
        base: 'main',
        title,
        body,
        author: 'bob',
      });
      return pull.number;
    };

    const sub = sim.createIssue('octo', 'calc', {
      title: 'sub(5, 3) returns -2',
      body: 'It should be 2: the arguments are swapped.',
      author: 'alice',
    }).number;
    const subPull = await pullRequest(
      'fix-sub',
      {
        'calc.py': CALC.replace('return b - a', 'return a - b'),
        'tests/test_calc.py': `${TESTS}\n\ndef test_sub():\n    assert sub(5, 3) == 2\n`,
      },
      'Fix sub',
      `Fixes #${sub}`,
    );
    await sim.mergePull('octo', 'calc', subPull, { by: 'carol' });

    const mul = sim.createIssue('octo', 'calc', {
      title: 'Add mul',
      body: 'calc has no multiplication.',
      author: 'alice',
    }).number;
    const fixedSub = CALC.replace('return b - a', 'return a - b');
    const mulPull = await pullRequest(
      'add-mul',
      {
        'calc.py': `${fixedSub}\n\ndef mul(a, b):\n    return a * b\n`,
        'tests/test_mul.py':
          'from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n\n\ndef test_mul_zero():\n    assert mul(0, 3) == 0\n',
      },
      'Add mul',
      `This closes octo/calc#${mul}.`,
    );
    await sim.mergePull('octo', 'calc', mulPull, { by: 'carol', method: 'squash' });

    const zero = sim.createIssue('octo', 'calc', {
      title: 'div by zero raises ZeroDivisionError',
      body: 'It should raise ValueError("division by zero").',
      author: 'dave',
    }).number;
    const withMul = `${fixedSub}\n\ndef mul(a, b):\n    return a * b\n`;
    const zeroPull = await pullRequest(
      'div-zero',
      {
        'calc.py': withMul.replace(
          '    return a / b',
          '    if b == 0:\n        raise ValueError("division by zero")\n    return a / b',
        ),
        'tests/test_calc.py': `${TESTS}\n\ndef test_sub():\n    assert sub(5, 3) == 2\n\n\ndef test_div_zero():\n    import pytest\n\n    with pytest.raises(ValueError):\n        div(1, 0)\n`,
      },
      'ValueError on division by zero',
      `Resolves ${sim.url}/octo/calc/issues/${zero}`,
    );
    await sim.mergePull('octo', 'calc', zeroPull, { by: 'carol' });

    const wontfix = sim.createIssue('octo', 'calc', {
      title: 'Support complex numbers',
      body: 'Please.',
      author: 'erin',
    }).number;
    sim.closeIssue('octo', 'calc', wontfix, { by: 'carol', reason: 'not_planned' });

    const typo = sim.createIssue('octo', 'calc', {
      title: 'Typo in the README',
      body: '"calclator"',
      author: 'erin',
    }).number;
    const typoPull = await pullRequest(
      'readme',
      { 'README.md': '# calc\n\nA calculator.\n' },
      'README: calculator',
      `fixes #${typo}`,
    );
    await sim.mergePull('octo', 'calc', typoPull, { by: 'carol' });
    for (const n of [sub, mul, zero, typo])
      assert.equal(sim.issue('octo', 'calc', n).state, 'closed', `#${n}`);

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
    const byIssue = new Map(tasks.map((x) => [x.issue_number, x]));
    assert.deepEqual([...byIssue.keys()].sort(), [sub, mul, zero].sort());
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
  },
);
