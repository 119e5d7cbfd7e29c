/**
 * Whether a changed path is part of the tests: test folders, test files by the names the common
 * runners collect, and the data tests compare against (snapshots, golden files, fixtures). Used to
 * build a task's test patch from a pull request (eval, SWE-bench's split of a fix into its test
 * patch and the rest) and to run a change's tests without its fix (the verdict's check that the
 * tests proving a change fail without it).
 *
 * Erring towards "test" is the safe side for the verdict: a test file taken for code would be run
 * at the base's version in the `without_fix` run, so an edited expectation could pass as proof,
 * while code taken for a test only withholds the badge. final-verification.ts also sends every
 * changed file that holds a proving test through that run, whatever its name.
 */
export function isTestPath(path: string): boolean {
  const parts = path.split('/');
  const file = parts.at(-1) ?? '';
  if (parts.slice(0, -1).some((d) => TEST_DIR.test(d))) return true;
  return TEST_FILE.test(file) || CLASS_TEST_FILE.test(file);
}

/**
 * Folders of tests and of their data. `testing` and `e2e` as SWE-bench has them; `__snapshots__`
 * (jest, vitest), `__fixtures__`, `__mocks__`, `fixtures`, `testdata` (go) and `golden` hold what
 * tests compare against.
 */
const TEST_DIR =
  /^(?:tests?|__tests__|testing|specs?|e2e|__snapshots__|__fixtures__|__mocks__|fixtures?|testdata|test[-_]data|golden)$/i;

/**
 * Test files by name, whatever their folder:
 * - Python: pytest's `test_*.py`, `*_test.py`, `conftest.py`, and `test.py` / `tests.py`;
 * - JavaScript and TypeScript: jest's and vitest's `*.test.*` / `*.spec.*`; node:test's defaults
 *   `test.*`, `test-*.*`, `*-test.*`, `*_test.*` (`.js`, `.cjs`, `.mjs`, and the TypeScript forms);
 * - `*_test.*` in any language (go, ruby's minitest, elixir, C), rspec's `*_spec.rb`;
 * - snapshots (`*.snap`) and golden files (`*.golden`) wherever they are.
 */
const TEST_FILE =
  /^(?:test_.*\.py|conftest\.py|tests?\.(?:py|[cm]?[jt]sx?)|test-.*\.[cm]?[jt]sx?|.*-test\.[cm]?[jt]sx?|.*_test\.[a-z0-9]+|.*_spec\.rb|.*\.(?:test|spec)\.[cm]?[jt]sx?|.*\.snap|.*\.golden)$/i;

/** JUnit-style class names (`CalcTest.java`, `CalcTests.cs`, `CalcSpec.scala`, `CalcIT.java`), case as written. */
const CLASS_TEST_FILE = /^[A-Z][A-Za-z0-9]*(?:Test|Tests|Spec|IT)\.(?:java|kt|scala|groovy|cs)$/;
