import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { git } from '../github-sim/helpers.js';
import type { GitHubSim } from './github-sim/index.js';

/**
 * A small Python repository with a history, in the GitHub simulator, for `eval --from-repo` and
 * `@agent evaluate`: three merged pull requests that changed tests and closed issues (a merge, a
 * squash merge with a new test file, a merge naming one issue by URL and a second by number), one issue closed as not
 * planned without a pull request, one fixed by a pull request that changed no tests.
 */

export const CALC = `def add(a, b):
    return a + b


def sub(a, b):
    return b - a


def div(a, b):
    return a / b
`;

export const TESTS = `from calc import add, div, sub


def test_add():
    assert add(2, 3) == 5


def test_div():
    assert div(6, 3) == 2
`;

export interface HistoryRepo {
  readonly sub: number;
  readonly subPull: number;
  readonly mul: number;
  readonly mulPull: number;
  readonly zero: number;
  /** A second issue the same pull request closes. */
  readonly crash: number;
  readonly zeroPull: number;
  readonly wontfix: number;
  readonly typo: number;
  readonly typoPull: number;
}

/** Builds the repository `owner/name` in `sim`, using `root` (a temp folder) for the work trees. */
export async function buildHistoryRepo(
  sim: GitHubSim,
  owner: string,
  name: string,
  root: string,
  /** More files in the first commit (so in every base commit). */
  extra: Readonly<Record<string, string>> = {},
): Promise<HistoryRepo> {
  const src = join(root, `src-${name}`);
  const write = (path: string, text: string): void => {
    mkdirSync(dirname(join(src, path)), { recursive: true });
    writeFileSync(join(src, path), text);
  };
  write('calc.py', CALC);
  write('tests/test_calc.py', TESTS);
  write('pytest.ini', '[pytest]\npythonpath = .\n');
  write('README.md', '# calc\n\nA calclator.\n');
  for (const [path, text] of Object.entries(extra)) write(path, text);
  await git(src, ['init', '-q', '-b', 'main']);
  await git(src, ['add', '-A']);
  await git(src, ['commit', '-q', '-m', 'calc']);
  await sim.createRepo({ owner, name, sourceDir: src });
  const bare = sim.bareRepoPath(owner, name);
  const work = join(root, `work-${name}`);
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
    const pull = await sim.openPull(owner, name, {
      head: branch,
      base: 'main',
      title,
      body,
      author: 'bob',
    });
    return pull.number;
  };

  const sub = sim.createIssue(owner, name, {
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
  await sim.mergePull(owner, name, subPull, { by: 'carol' });

  const mul = sim.createIssue(owner, name, {
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
    `This closes ${owner}/${name}#${mul}.`,
  );
  await sim.mergePull(owner, name, mulPull, { by: 'carol', method: 'squash' });

  const crash = sim.createIssue(owner, name, {
    title: 'calc crashes on a zero divisor',
    body: 'A ZeroDivisionError escapes.',
    author: 'erin',
  }).number;
  const zero = sim.createIssue(owner, name, {
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
    `Resolves ${sim.url}/${owner}/${name}/issues/${zero}, fixes #${crash}`,
  );
  await sim.mergePull(owner, name, zeroPull, { by: 'carol' });

  const wontfix = sim.createIssue(owner, name, {
    title: 'Support complex numbers',
    body: 'Please.',
    author: 'erin',
  }).number;
  sim.closeIssue(owner, name, wontfix, { by: 'carol', reason: 'not_planned' });

  const typo = sim.createIssue(owner, name, {
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
  await sim.mergePull(owner, name, typoPull, { by: 'carol' });
  for (const n of [sub, mul, zero, crash, typo])
    assert.equal(sim.issue(owner, name, n).state, 'closed', `#${n}`);

  return { sub, subPull, mul, mulPull, zero, crash, zeroPull, wontfix, typo, typoPull };
}
