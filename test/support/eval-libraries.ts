import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { writeTaskSet, type TaskSet, type TaskSpec } from './eval-tasks.js';

/**
 * The eval-libraries task set: small libraries of ours in test/fixtures/eval-libraries, one per real
 * test runner from the npm registry (jest, vitest, mocha, node-tap, ava), node:test, pytest and
 * unittest. Each folder holds the repository at the base commit (`base/`, lockfile included where the
 * library has one), the files as the gold fix leaves them (`fix/`), the test files as the test patch
 * leaves them (`tests/`) and `task.json` (the problem, the listed tests, the test command where
 * grading's default does not fit). The README there has the table. The repositories and patches are
 * made by writeTaskSet (eval-tasks.ts), as for the other eval task set.
 */

export const LIBRARIES_DIR = join(import.meta.dirname, '..', 'fixtures', 'eval-libraries');

/**
 * The libraries, in the order of the task file: the slowest first (node-tap's install and its hanging
 * baseline, then ava's and jest's installs), so that the quick ones fill the other slots as it runs.
 */
export const LIBRARIES = [
  'shell-words',
  'kebab-case',
  'glob-match',
  'qs-lite',
  'dotenv-lite',
  'ini-parse',
  'lru-map',
  'roman-numerals',
] as const;

export type LibraryName = (typeof LIBRARIES)[number];

/** The library whose `careless/` gold patch breaks PASS_TO_PASS tests. */
export const CARELESS_OF: LibraryName = 'qs-lite';

interface TaskFile {
  readonly problem_statement: string;
  readonly test_command?: string;
  readonly FAIL_TO_PASS: readonly string[];
  readonly PASS_TO_PASS: readonly string[];
}

/** Every file under `dir`, by its path relative to `dir` (`/`-separated). */
function readTree(dir: string): Record<string, string> {
  const files: Record<string, string> = {};
  const walk = (at: string): void => {
    for (const entry of readdirSync(at, { withFileTypes: true })) {
      const path = join(at, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.isFile()) files[relative(dir, path).split('\\').join('/')] = readFileSync(path, 'utf8');
    }
  };
  walk(dir);
  return files;
}

export function librarySpec(name: LibraryName, variant: 'fix' | 'careless' = 'fix'): TaskSpec {
  const dir = join(LIBRARIES_DIR, name);
  const task = JSON.parse(readFileSync(join(dir, 'task.json'), 'utf8')) as TaskFile;
  if (variant === 'careless' && !existsSync(join(dir, 'careless'))) {
    throw new Error(`${name} has no careless fix`);
  }
  return {
    id: variant === 'fix' ? name : `${name}-careless`,
    problem: task.problem_statement,
    base: readTree(join(dir, 'base')),
    fix: readTree(join(dir, variant)),
    tests: readTree(join(dir, 'tests')),
    f2p: task.FAIL_TO_PASS,
    p2p: task.PASS_TO_PASS,
    ...(task.test_command === undefined ? {} : { testCommand: task.test_command }),
  };
}

/**
 * The libraries' repositories and `tasks.jsonl`; `careless` adds `<CARELESS_OF>-careless`, whose
 * gold patch is the careless fix. Where its library is in the set too, the careless task is of that
 * library's repository at the same base commit (the base is the same files), as two SWE-bench tasks
 * of one repository are: the environment cache then holds one setup for both.
 */
export function buildLibraryTaskSet(
  options: { readonly only?: readonly LibraryName[]; readonly careless?: boolean } = {},
): TaskSet {
  const specs = LIBRARIES.filter((n) => options.only === undefined || options.only.includes(n)).map((n) =>
    librarySpec(n),
  );
  if (options.careless === true) specs.push(librarySpec(CARELESS_OF, 'careless'));
  const set = writeTaskSet(specs, 'ia-evallibs-');
  const of = set.tasks.find((t) => t.instance_id === CARELESS_OF);
  if (of === undefined) return set;
  const tasks = set.tasks.map((t) =>
    t.instance_id === `${CARELESS_OF}-careless`
      ? { ...t, repo_path: of.repo_path, base_commit: of.base_commit }
      : t,
  );
  writeFileSync(set.file, tasks.map((t) => `${JSON.stringify(t)}\n`).join(''));
  return { ...set, tasks };
}
