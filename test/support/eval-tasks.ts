import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

/**
 * A task set in SWE-bench format over small repositories built here: Python (pytest) and JavaScript
 * (node:test), each with a bug, its gold patch, and a test patch that adds the FAIL_TO_PASS tests
 * beside PASS_TO_PASS tests that a careless fix breaks. The patches are made with git from the
 * files below, so they are what `git diff` writes.
 */

export interface TaskSpec {
  readonly id: string;
  readonly problem: string;
  /** The repository at the base commit (source and its existing tests). */
  readonly base: Readonly<Record<string, string>>;
  /** Source files as the gold fix leaves them. */
  readonly fix: Readonly<Record<string, string>>;
  /** Test files as the test patch leaves them. */
  readonly tests: Readonly<Record<string, string>>;
  readonly f2p: readonly string[];
  readonly p2p: readonly string[];
  /** The task's `test_command`, where grading's default for the ids does not fit. */
  readonly testCommand?: string;
}

const PYTEST_INI = '[pytest]\ntestpaths = tests\n';
const PACKAGE_JSON = (name: string): string =>
  `${JSON.stringify({ name, version: '1.0.0', private: true, scripts: { test: 'node --test' } }, null, 2)}\n`;
const nodeTest = (module: string, body: string): string =>
  `const test = require('node:test');\nconst assert = require('node:assert/strict');\nconst m = require('../${module}');\n\n${body}`;

export const SPECS: readonly TaskSpec[] = [
  {
    id: 'py-median',
    problem:
      'median() is wrong for lists of even length\n\nmedian([1, 2, 3, 4]) returns 3; it should be 2.5.',
    base: {
      'pytest.ini': PYTEST_INI,
      'stats.py': 'def median(xs):\n    s = sorted(xs)\n    return s[len(s) // 2]\n',
      'tests/test_stats.py':
        'from stats import median\n\n\ndef test_odd():\n    assert median([3, 1, 2]) == 2\n',
    },
    fix: {
      'stats.py':
        'def median(xs):\n    s = sorted(xs)\n    n = len(s)\n    if n % 2 == 1:\n        return s[n // 2]\n    return (s[n // 2 - 1] + s[n // 2]) / 2\n',
    },
    tests: {
      'tests/test_stats.py':
        'from stats import median\n\n\ndef test_odd():\n    assert median([3, 1, 2]) == 2\n\n\ndef test_even():\n    assert median([4, 1, 3, 2]) == 2.5\n',
    },
    f2p: ['tests/test_stats.py::test_even'],
    p2p: ['tests/test_stats.py::test_odd'],
  },
  {
    id: 'py-clamp',
    problem: 'clamp() ignores the upper bound\n\nclamp(15, 0, 10) returns 15 instead of 10.',
    base: {
      'pytest.ini': PYTEST_INI,
      'numbers_util.py': 'def clamp(x, lo, hi):\n    if x < lo:\n        return lo\n    return x\n',
      'tests/test_clamp.py':
        'from numbers_util import clamp\n\n\ndef test_low():\n    assert clamp(-5, 0, 10) == 0\n\n\ndef test_inside():\n    assert clamp(5, 0, 10) == 5\n',
    },
    fix: {
      'numbers_util.py':
        'def clamp(x, lo, hi):\n    if x < lo:\n        return lo\n    if x > hi:\n        return hi\n    return x\n',
    },
    tests: {
      'tests/test_clamp.py':
        'from numbers_util import clamp\n\n\ndef test_low():\n    assert clamp(-5, 0, 10) == 0\n\n\ndef test_inside():\n    assert clamp(5, 0, 10) == 5\n\n\ndef test_high():\n    assert clamp(15, 0, 10) == 10\n',
    },
    f2p: ['tests/test_clamp.py::test_high'],
    p2p: ['tests/test_clamp.py::test_low', 'tests/test_clamp.py::test_inside'],
  },
  {
    id: 'py-words',
    problem: 'count_words() counts "The" and "the" as different words',
    base: {
      'pytest.ini': PYTEST_INI,
      'words.py':
        'import re\n\n\ndef count_words(text):\n    counts = {}\n    for w in re.findall(r"[A-Za-z\']+", text):\n        counts[w] = counts.get(w, 0) + 1\n    return counts\n',
      'tests/test_words.py':
        'from words import count_words\n\n\ndef test_punctuation():\n    assert count_words("a, b. a!") == {"a": 2, "b": 1}\n',
    },
    fix: {
      'words.py':
        'import re\n\n\ndef count_words(text):\n    counts = {}\n    for w in re.findall(r"[A-Za-z\']+", text.lower()):\n        counts[w] = counts.get(w, 0) + 1\n    return counts\n',
    },
    tests: {
      'tests/test_words.py':
        'from words import count_words\n\n\ndef test_punctuation():\n    assert count_words("a, b. a!") == {"a": 2, "b": 1}\n\n\ndef test_case():\n    assert count_words("The the") == {"the": 2}\n',
    },
    f2p: ['tests/test_words.py::test_case'],
    p2p: ['tests/test_words.py::test_punctuation'],
  },
  {
    id: 'py-chunks',
    problem:
      'chunks() drops the last partial chunk\n\nchunks([1, 2, 3], 2) gives [[1, 2]]; expected [[1, 2], [3]].',
    base: {
      'pytest.ini': PYTEST_INI,
      'chunking.py': 'def chunks(xs, n):\n    return [xs[i : i + n] for i in range(0, len(xs) - n + 1, n)]\n',
      'tests/test_chunks.py':
        'from chunking import chunks\n\n\ndef test_exact():\n    assert chunks([1, 2, 3, 4], 2) == [[1, 2], [3, 4]]\n\n\ndef test_empty():\n    assert chunks([], 3) == []\n',
    },
    fix: { 'chunking.py': 'def chunks(xs, n):\n    return [xs[i : i + n] for i in range(0, len(xs), n)]\n' },
    tests: {
      'tests/test_chunks.py':
        'from chunking import chunks\n\n\ndef test_exact():\n    assert chunks([1, 2, 3, 4], 2) == [[1, 2], [3, 4]]\n\n\ndef test_empty():\n    assert chunks([], 3) == []\n\n\ndef test_partial():\n    assert chunks([1, 2, 3], 2) == [[1, 2], [3]]\n',
    },
    f2p: ['tests/test_chunks.py::test_partial'],
    p2p: ['tests/test_chunks.py::test_exact', 'tests/test_chunks.py::test_empty'],
  },
  {
    id: 'js-range',
    problem: 'range(a, b) includes b\n\nrange(0, 3) returns [0, 1, 2, 3]; the end should be excluded.',
    base: {
      'package.json': PACKAGE_JSON('range'),
      'range.js':
        'function range(a, b) {\n  const out = [];\n  for (let i = a; i <= b; i++) out.push(i);\n  return out;\n}\nmodule.exports = { range };\n',
      'test/range.test.js': nodeTest(
        'range',
        "test('empty when equal bounds are reversed', () => {\n  assert.deepEqual(m.range(3, 1), []);\n});\n",
      ),
    },
    fix: {
      'range.js':
        'function range(a, b) {\n  const out = [];\n  for (let i = a; i < b; i++) out.push(i);\n  return out;\n}\nmodule.exports = { range };\n',
    },
    tests: {
      'test/range.test.js': nodeTest(
        'range',
        "test('empty when equal bounds are reversed', () => {\n  assert.deepEqual(m.range(3, 1), []);\n});\n\ntest('excludes the end', () => {\n  assert.deepEqual(m.range(0, 3), [0, 1, 2]);\n});\n",
      ),
    },
    f2p: ['test/range.test.js::excludes the end'],
    p2p: ['test/range.test.js::empty when equal bounds are reversed'],
  },
  {
    id: 'js-capitalize',
    problem: "capitalize('') throws a TypeError",
    base: {
      'package.json': PACKAGE_JSON('capitalize'),
      'capitalize.js':
        'function capitalize(s) {\n  return s[0].toUpperCase() + s.slice(1);\n}\nmodule.exports = { capitalize };\n',
      'test/capitalize.test.js': nodeTest(
        'capitalize',
        "test('capitalizes the first letter', () => {\n  assert.equal(m.capitalize('hello'), 'Hello');\n});\n",
      ),
    },
    fix: {
      'capitalize.js':
        "function capitalize(s) {\n  if (s === '') return s;\n  return s[0].toUpperCase() + s.slice(1);\n}\nmodule.exports = { capitalize };\n",
    },
    tests: {
      'test/capitalize.test.js': nodeTest(
        'capitalize',
        "test('capitalizes the first letter', () => {\n  assert.equal(m.capitalize('hello'), 'Hello');\n});\n\ntest('empty string', () => {\n  assert.equal(m.capitalize(''), '');\n});\n",
      ),
    },
    f2p: ['test/capitalize.test.js::empty string'],
    p2p: ['test/capitalize.test.js::capitalizes the first letter'],
  },
  {
    id: 'js-duration',
    problem: "parseDuration('1h30m') returns 30; hours are ignored\n\nExpected minutes: 90.",
    base: {
      'package.json': PACKAGE_JSON('duration'),
      'duration.js':
        'function parseDuration(text) {\n  const m = /(\\d+)m/.exec(text);\n  return m ? Number(m[1]) : 0;\n}\nmodule.exports = { parseDuration };\n',
      'test/duration.test.js': nodeTest(
        'duration',
        "test('minutes only', () => {\n  assert.equal(m.parseDuration('45m'), 45);\n});\n",
      ),
    },
    fix: {
      'duration.js':
        'function parseDuration(text) {\n  const h = /(\\d+)h/.exec(text);\n  const m = /(\\d+)m/.exec(text);\n  return (h ? Number(h[1]) * 60 : 0) + (m ? Number(m[1]) : 0);\n}\nmodule.exports = { parseDuration };\n',
    },
    tests: {
      'test/duration.test.js': nodeTest(
        'duration',
        "test('minutes only', () => {\n  assert.equal(m.parseDuration('45m'), 45);\n});\n\ntest('hours and minutes', () => {\n  assert.equal(m.parseDuration('1h30m'), 90);\n});\n",
      ),
    },
    f2p: ['test/duration.test.js::hours and minutes'],
    p2p: ['test/duration.test.js::minutes only'],
  },
  {
    id: 'js-unique',
    problem:
      'unique() does not keep the order of first occurrence\n\nunique([3, 1, 3, 2]) should be [3, 1, 2].',
    base: {
      'package.json': PACKAGE_JSON('unique'),
      'unique.js':
        'function unique(xs) {\n  return [...new Set(xs)].sort((a, b) => a - b);\n}\nmodule.exports = { unique };\n',
      'test/unique.test.js': nodeTest(
        'unique',
        "test('removes duplicates', () => {\n  assert.equal(m.unique([1, 1, 2]).length, 2);\n});\n",
      ),
    },
    fix: {
      'unique.js': 'function unique(xs) {\n  return [...new Set(xs)];\n}\nmodule.exports = { unique };\n',
    },
    tests: {
      'test/unique.test.js': nodeTest(
        'unique',
        "test('removes duplicates', () => {\n  assert.equal(m.unique([1, 1, 2]).length, 2);\n});\n\ntest('keeps first-occurrence order', () => {\n  assert.deepEqual(m.unique([3, 1, 3, 2]), [3, 1, 2]);\n});\n",
      ),
    },
    f2p: ['test/unique.test.js::keeps first-occurrence order'],
    p2p: ['test/unique.test.js::removes duplicates'],
  },
];

/**
 * A careless fix of py-median that makes the new test pass and breaks the old one (odd lengths):
 * given as the gold patch, the task must be graded unresolved with test_odd named.
 */
const CARELESS_MEDIAN =
  'def median(xs):\n    s = sorted(xs)\n    n = len(s)\n    return (s[n // 2 - 1] + s[n // 2]) / 2\n';

export interface TaskSet {
  readonly dir: string;
  readonly file: string;
  readonly tasks: readonly Record<string, unknown>[];
  cleanup(): void;
}

function git(dir: string, ...args: string[]): string {
  return execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@e', ...args], {
    cwd: dir,
    encoding: 'utf8',
  });
}

function write(dir: string, files: Readonly<Record<string, string>>): void {
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
}

/** The diff the files would make against HEAD, without changing the repository. */
function diffOf(dir: string, files: Readonly<Record<string, string>>): string {
  write(dir, files);
  git(dir, 'add', '-A');
  const patch = git(dir, 'diff', '--cached', 'HEAD');
  git(dir, 'reset', '-q', '--hard', 'HEAD');
  return patch;
}

/**
 * Builds the repositories and `tasks.jsonl` (relative `repo_path`s). `wrongGold` adds
 * `py-median-careless`, whose gold patch is the careless fix.
 */
export function buildTaskSet(
  options: { readonly only?: readonly string[]; readonly wrongGold?: boolean } = {},
): TaskSet {
  const specs = SPECS.filter((s) => options.only === undefined || options.only.includes(s.id));
  const median = SPECS[0];
  const careless: TaskSpec[] =
    options.wrongGold === true && median !== undefined
      ? [{ ...median, id: 'py-median-careless', fix: { 'stats.py': CARELESS_MEDIAN } }]
      : [];
  return writeTaskSet([...specs, ...careless], 'ia-evalset-');
}

/**
 * A repository per spec under `<dir>/repos/<id>` (the base commit, then the fix and its tests as a
 * later commit, as in a real history) and `tasks.jsonl` in SWE-bench's format, with the gold patch
 * and the test patch as `git diff` writes them.
 */
export function writeTaskSet(specs: readonly TaskSpec[], prefix: string): TaskSet {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const tasks: Record<string, unknown>[] = [];
  for (const spec of specs) {
    const repo = join(dir, 'repos', spec.id);
    mkdirSync(repo, { recursive: true });
    git(repo, 'init', '-q', '-b', 'main');
    write(repo, spec.base);
    git(repo, 'add', '-A');
    git(repo, 'commit', '-qm', 'base');
    const base = git(repo, 'rev-parse', 'HEAD').trim();
    tasks.push({
      instance_id: spec.id,
      repo: `fixtures/${spec.id}`,
      repo_path: join('repos', spec.id),
      base_commit: base,
      problem_statement: spec.problem,
      patch: diffOf(repo, spec.fix),
      test_patch: diffOf(repo, spec.tests),
      // As SWE-bench's datasets store them: JSON in a string.
      FAIL_TO_PASS: JSON.stringify(spec.f2p),
      PASS_TO_PASS: JSON.stringify(spec.p2p),
      ...(spec.testCommand === undefined ? {} : { test_command: spec.testCommand }),
      created_at: '2026-12-01T00:00:00Z',
      version: '1.0',
    });
    // As in a real repository, the fix and its tests are later history on the branch.
    write(repo, { ...spec.fix, ...spec.tests });
    git(repo, 'add', '-A');
    git(repo, 'commit', '-qm', `fix ${spec.id}`);
  }
  const file = join(dir, 'tasks.jsonl');
  writeFileSync(file, tasks.map((t) => `${JSON.stringify(t)}\n`).join(''));
  return {
    dir,
    file,
    tasks,
    cleanup: () => {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
