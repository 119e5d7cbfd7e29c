import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { renderPullRequest } from '../../src/publish/pr-body.js';
import { Redactor } from '../../src/publish/redact.js';
import { EventLog, makeBase } from './event-log.js';

/**
 * The PR of a change that changes how tests run (an `.npmrc` preloading a script, and
 * package.json's `scripts.test`): the final run took those files from the base commit, the issue's
 * test still fails there, and the verification section says so, naming each file and why.
 */
test('a change that changes how tests run: the verification section names the files the final run took from the base (golden)', () => {
  const log = new EventLog();
  log.testRun('baseline', {
    passed: 2,
    failed: 1,
    passedNames: ['sum adds', 'range includes ends'],
    failedNames: ['average rounds'],
  });
  log.step({
    text: 'Applying the change.',
    tool: 'bash',
    input: { command: 'git apply fix.patch' },
    output: '',
    exitCode: 0,
  });
  log.checkpoint(3, 'diff --git a/.npmrc b/.npmrc\nnew file mode 100644\n--- /dev/null\n+++ b/.npmrc\n');
  log.step({ tool: 'finish', input: { summary: 'Fixed: all tests pass.' }, output: 'ok' });
  log.add({
    kind: 'test_run',
    phase: 'final',
    command: 'npm test',
    exitCode: 1,
    killed: null,
    durationMs: 4100,
    summary: {
      runner: 'node',
      passed: 2,
      failed: 1,
      skipped: 0,
      passedNames: ['sum adds', 'range includes ends'],
      failedNames: ['average rounds'],
    },
    output: 'test output',
    outputBytes: 11,
    sandbox: 'fresh',
    runnerConfig: {
      files: [
        { path: '.npmrc', why: 'package manager settings, which can preload code into every test process' },
        { path: 'package.json', why: 'fields scripts.test' },
      ],
      total: 2,
    },
  });
  log.add({
    kind: 'outcome',
    outcome: 'unverified',
    reason:
      "no test that failed before passes now and no new test passes, so no test demonstrates the fix (2 passed, 1 failed); the change changes how tests run (.npmrc, package.json), so the tests ran with the base commit's versions of those files",
    summary: 'Fixed: all tests pass.',
    diffStat: ' .npmrc | 1 +\n package.json | 2 +-',
  });
  const body = renderPullRequest({
    base: makeBase(),
    events: log.events,
    issue: { number: 7, title: 'Average rounds wrong' },
    trajectoryLink: 'https://agent.example/runs/job-7/trajectory.json',
    redactor: new Redactor([]),
  }).body;
  assert.ok(
    body.includes(
      "⚠️ **This change changes how tests run:** `.npmrc` (package manager settings, which can preload code into every test process), `package.json` (fields scripts.test). The final run used the base commit's versions of these files",
    ),
    body,
  );
  const golden = join(import.meta.dirname, 'fixtures', 'pr-body-runner-config.golden.md');
  if (process.env.UPDATE_GOLDEN === '1') writeFileSync(golden, body);
  assert.equal(body, readFileSync(golden, 'utf8'), 'run with UPDATE_GOLDEN=1 to accept a deliberate change');
});
