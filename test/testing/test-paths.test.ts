import assert from 'node:assert/strict';
import { test } from 'node:test';
import { withoutFixPaths } from '../../src/agent/final-verification.js';
import { isTestPath } from '../../src/testing/test-paths.js';

void test('test files by the names the common runners collect, and the data tests compare against', () => {
  for (const p of [
    // node:test's default patterns
    'calc_test.js',
    'calc-test.mjs',
    'test-calc.cjs',
    'test.js',
    'src/lib/parse_test.ts',
    // jest, vitest: snapshots and mocks
    'src/__snapshots__/view.test.tsx.snap',
    'src/view.snap',
    'src/__mocks__/fs.js',
    'src/__fixtures__/input.json',
    // go: testdata and golden files
    'pkg/render/testdata/page.golden',
    'pkg/render/page.golden',
    'pkg/render/render_test.go',
    // fixtures anywhere
    'fixtures/data.json',
    'src/fixture/one.txt',
    'test-data/a.csv',
    // ruby, JUnit-style classes
    'lib/calc_spec.rb',
    'test_helper_test.rb',
    'src/main/java/org/CalcTest.java',
    'src/CalcTests.cs',
    'src/CalcIT.java',
    'CalcSpec.scala',
  ]) {
    assert.equal(isTestPath(p), true, p);
  }
  for (const p of [
    'src/Latest.java',
    'src/Contest.java',
    'src/contest.js',
    'src/latest.js',
    'src/protest.js',
    'attestation.py',
    'src/testament/index.js',
    'README.md',
    'docs/testing.md',
    'snapshot.js',
  ]) {
    assert.equal(isTestPath(p), false, p);
  }
});

void test("without_fix takes the change's test files, and every changed file holding a proving test; runner configuration stays the base's", () => {
  const changed = ['src/calc.js', 'checks/average.js', 'test/calc.test.js', 'jest.config.js', 'README.md'];
  assert.deepEqual(withoutFixPaths(changed, new Set(), new Set()), ['test/calc.test.js']);
  assert.deepEqual(withoutFixPaths(changed, new Set(['checks/average.js', 'not/changed.js']), new Set()), [
    'checks/average.js',
    'test/calc.test.js',
  ]);
  assert.deepEqual(withoutFixPaths(changed, new Set(['checks/average.js']), new Set(['test/calc.test.js'])), [
    'checks/average.js',
  ]);
  assert.deepEqual(withoutFixPaths([], new Set(['a.js']), new Set()), []);
});
