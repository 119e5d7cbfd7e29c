/**
 * Whether a changed path is part of the tests (SWE-bench's split of a fix into its test patch and
 * the rest: test folders and test files). Used to build a task's test patch from a pull request
 * (eval) and to run a change's tests without its fix (the verdict's check that new tests fail
 * without the change).
 */
export function isTestPath(path: string): boolean {
  const parts = path.split('/');
  const file = parts.at(-1) ?? '';
  if (parts.slice(0, -1).some((d) => /^(?:tests?|__tests__|testing|specs?|e2e)$/i.test(d))) return true;
  return /^(?:test_.*\.py|.*_test\.(?:py|go)|tests?\.py|conftest\.py|.*\.(?:test|spec)\.[cm]?[jt]sx?)$/i.test(
    file,
  );
}
