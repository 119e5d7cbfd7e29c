/**
 * Files that running a project's tests generates (bytecode, runner caches, coverage, dependency
 * trees), which belong in no change. Two halves, both applied by every backend:
 *
 * - the environment every command gets, so the runners that can be told write nothing into the
 *   workspace (no bytecode; pytest's cache under the sandbox's temp folder);
 * - the patterns the harness's checkpoints leave out (workspace-git.ts), for what a runner writes
 *   anyway or a command chose to write. A pattern applies only where the repository tracks no file
 *   it matches: a repository that commits its coverage report keeps it in the change.
 */

export interface GeneratedPattern {
  /** The pattern as a `.gitignore` line. */
  readonly ignore: string;
  /** The same set of paths as a git glob pathspec, to ask whether the repository tracks any. */
  readonly pathspec: string;
}

const anywhereDir = (name: string): GeneratedPattern => ({ ignore: `${name}/`, pathspec: `**/${name}/**` });
const rootDir = (name: string): GeneratedPattern => ({ ignore: `/${name}/`, pathspec: `${name}/**` });
const anywhereFile = (glob: string): GeneratedPattern => ({ ignore: glob, pathspec: `**/${glob}` });
const rootFile = (glob: string): GeneratedPattern => ({ ignore: `/${glob}`, pathspec: glob });

/**
 * Directories named anywhere are names no source tree uses for anything else; coverage and tool
 * output is anchored at the root, where the tools write it (a source folder named `coverage/`
 * deeper down is code).
 */
export const GENERATED_PATTERNS: readonly GeneratedPattern[] = [
  anywhereDir('__pycache__'),
  anywhereFile('*.py[cod]'),
  anywhereDir('.pytest_cache'),
  anywhereDir('.hypothesis'),
  anywhereDir('.mypy_cache'),
  anywhereDir('.ruff_cache'),
  anywhereDir('*.egg-info'),
  rootDir('.tox'),
  rootDir('.nox'),
  rootFile('.coverage'),
  rootFile('.coverage.*'),
  rootFile('coverage.xml'),
  rootDir('htmlcov'),
  rootDir('coverage'),
  rootDir('.nyc_output'),
  rootDir('.tap'),
  anywhereDir('node_modules'),
];

/**
 * The environment every sandbox command gets (both backends; the images set the same), so test
 * runs write no bytecode and pytest keeps its cache out of the workspace. `-o cache_dir` rather
 * than `-p no:cacheprovider`: a repository whose own options use `--lf` keeps working.
 */
export function generatedFilesEnv(tmpDir: string): Record<string, string> {
  // pytest splits PYTEST_ADDOPTS as a shell would (shlex): a folder with spaces stays one word.
  const dir = `${tmpDir}/.pytest_cache`;
  const word = /^[\w./-]+$/.test(dir) ? dir : `'${dir.replaceAll("'", `'"'"'`)}'`;
  return { PYTHONDONTWRITEBYTECODE: '1', PYTEST_ADDOPTS: `-o cache_dir=${word}` };
}

/** What a checkpoint left out: a pattern and how many files matched it. */
export interface LeftOut {
  readonly pattern: string;
  readonly files: number;
}

/**
 * One line for people: "`__pycache__/` (4 files), `.pytest_cache/` (1 file)". Only this module's
 * patterns are named (a record read back from a log names nothing else).
 */
export function describeLeftOut(leftOut: readonly LeftOut[]): string {
  const known = new Set(GENERATED_PATTERNS.map((p) => p.ignore));
  return leftOut
    .filter((l) => known.has(l.pattern) && Number.isSafeInteger(l.files))
    .map((l) => `\`${l.pattern}\` (${String(l.files)} file${l.files === 1 ? '' : 's'})`)
    .join(', ');
}
