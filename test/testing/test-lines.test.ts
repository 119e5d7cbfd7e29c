import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { NODE_TEST_REPORTER, readNodeTestReport } from '../../src/testing/node-test-report.js';
import { readPytestReport } from '../../src/testing/pytest.js';
import { PYTEST_PLUGIN, PYTEST_PLUGIN_MODULE } from '../../src/testing/report-helpers.js';

/**
 * The line of each test's definition, from the harness's own reporters run for real (node:test on
 * this Node, pytest from the host's Python): what the check run's annotations are placed on.
 */
const work = mkdtempSync(join(tmpdir(), 'ia-test-lines-'));
after(() => {
  rmSync(work, { recursive: true, force: true });
});

void test('node:test: the reporter gives each test its line, nested ones included', () => {
  const dir = mkdtempSync(join(work, 'node-'));
  writeFileSync(
    join(dir, 'calc.test.mjs'),
    [
      "import { describe, it, test } from 'node:test';",
      "test('adds', () => {});",
      '',
      "describe('average', () => {",
      "  it('rounds', () => {",
      "    throw new Error('no');",
      '  });',
      '});',
      '',
    ].join('\n'),
  );
  writeFileSync(join(dir, 'reporter.mjs'), NODE_TEST_REPORTER);
  const report = join(dir, 'report.jsonl');
  spawnSync(process.execPath, ['--test', '--test-reporter=./reporter.mjs', 'calc.test.mjs'], {
    cwd: dir,
    env: { ...process.env, ISSUE_AGENT_NODE_TEST_REPORT: report, NODE_OPTIONS: '' },
  });
  const facts = readNodeTestReport(readFileSync(report, 'utf8'), dir, null, false).facts.values();
  assert.deepEqual(
    facts.map((f) => [f.id, f.status, f.line]),
    [
      ['calc.test.mjs::adds', 'passed', 2],
      ['calc.test.mjs::average > rounds', 'failed', 5],
    ],
  );
});

const pytest = spawnSync('python3', ['-m', 'pytest', '--version']).status === 0;

void test(
  'pytest: the plugin gives each collected test its line (classes and parameters included)',
  { skip: pytest ? false : 'no pytest on this host' },
  () => {
    const dir = mkdtempSync(join(work, 'py-'));
    writeFileSync(
      join(dir, 'test_calc.py'),
      [
        'import pytest',
        '',
        '',
        'def test_adds():',
        '    assert 1 + 1 == 2',
        '',
        '',
        'class TestAverage:',
        '    @pytest.mark.parametrize("n", [1, 2])',
        '    def test_rounds(self, n):',
        '        assert n == 1',
        '',
      ].join('\n'),
    );
    writeFileSync(join(dir, `${PYTEST_PLUGIN_MODULE}.py`), PYTEST_PLUGIN);
    const report = join(dir, 'report.jsonl');
    try {
      execFileSync('python3', ['-m', 'pytest', '-p', PYTEST_PLUGIN_MODULE, '-q', '-p', 'no:cacheprovider'], {
        cwd: dir,
        env: { ...process.env, ISSUE_AGENT_PYTEST_REPORT: report, PYTHONPATH: dir },
        stdio: 'ignore',
      });
    } catch {
      // One test fails on purpose: pytest exits 1.
    }
    const facts = readPytestReport(readFileSync(report, 'utf8'), null).facts;
    // A decorated test's definition starts at its first decorator (pytest's item.location).
    assert.deepEqual(
      facts.map((f) => [f.id, f.status, f.line]),
      [
        ['test_calc.py::test_adds', 'passed', 4],
        ['test_calc.py::TestAverage::test_rounds[1]', 'passed', 9],
        ['test_calc.py::TestAverage::test_rounds[2]', 'failed', 9],
      ],
    );
  },
);
