import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { TestContext } from 'node:test';
import { runTestCommand } from '../../src/agent/run-test-command.js';
import { DEFAULT_LIMITS, type EnvironmentSettings } from '../../src/config/agent-env.js';
import { hostProbe } from '../../src/environment/host-probe.js';
import { planEnvironment } from '../../src/environment/plan.js';
import { prepareEnvironment, type PreparedEnvironment } from '../../src/environment/prepare.js';
import { SandboxFiles } from '../../src/sandbox/sandbox-files.js';
import { detectTestCommand } from '../../src/testing/detect-test-command.js';
import { sandboxProbe } from '../../src/testing/sandbox-probe.js';
import { dockerTest } from '../sandbox/docker/docker-test-support.js';

/**
 * A repository with no project file at all, only code and tests: the plan reads the code, picks the
 * image its tests need and says why; in that image the command detection picks runs the tests and
 * the harness names each one (src/testing/detect-project.ts).
 */

const run = promisify(execFile);

async function repo(t: TestContext, files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'ia-unmarked-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  for (const [name, text] of Object.entries(files)) {
    await mkdir(join(dir, name, '..'), { recursive: true });
    await writeFile(join(dir, name), text);
  }
  await run('git', ['init', '-q', '-b', 'main', dir]);
  await run('git', ['-C', dir, 'add', '-A']);
  await run('git', ['-C', dir, '-c', 'user.name=t', '-c', 'user.email=t@e', 'commit', '-qm', 'init']);
  return dir;
}

async function prepare(t: TestContext, workspace: string): Promise<PreparedEnvironment> {
  const plan = await planEnvironment(hostProbe(workspace), {}, { kind: 'own-checkout' });
  const cacheDir = await mkdtemp(join(tmpdir(), 'ia-unmarked-cache-'));
  t.after(() => rm(cacheDir, { recursive: true, force: true }));
  const settings: EnvironmentSettings = {
    setupEnabled: true,
    allowHosts: [],
    allowCidrs: [],
    extraCaPem: null,
    npmRegistry: null,
    pipIndexUrl: null,
    setupSecrets: {},
    grants: null,
    cacheUnpinnedMs: 3_600_000,
    cacheDir,
    cacheMaxBytes: 1024 ** 3,
    setupTimeoutMs: 60_000,
  };
  const env = await prepareEnvironment({
    workspace,
    probe: hostProbe(workspace),
    jobId: `unmarked-${Math.random().toString(36).slice(2, 8)}`,
    repoKey: 'test:unmarked',
    plan,
    settings,
    mayStoreCache: false,
    scrub: (text) => text,
  });
  t.after(async () => {
    await env.sandbox.close();
    await env.close();
  });
  return env;
}

dockerTest(
  'environment: a Python package with pytest-style tests and no project file gets the python image; its tests run with pytest and are named',
  async (_docker, t) => {
    const workspace = await repo(t, {
      'calc.py': 'def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a + b\n',
      'tests/test_calc.py': [
        'from calc import add, sub',
        '',
        '',
        'def test_add():',
        '    assert add(2, 3) == 5',
        '',
        '',
        'def test_sub():',
        '    assert sub(5, 3) == 2',
        '',
      ].join('\n'),
    });
    const env = await prepare(t, workspace);
    const why =
      'python: tests/test_calc.py has module-level test functions (pytest-style tests; no Python project files)';
    assert.equal(env.record.image.startsWith('issue-agent/python:'), true, env.record.image);
    assert.deepEqual(
      env.record.runtimes.map((r) => `${r.language} ${r.version} ${r.source}`),
      ['python 3.11 default'],
    );
    assert.equal(env.record.setup.commands.length, 0);
    assert.ok(
      env.record.setup.reason.endsWith(`; the image follows the code, ${why}`),
      env.record.setup.reason,
    );

    // The command, detected again inside the sandbox as a run does (agent/new-run.ts).
    const detected = await detectTestCommand(sandboxProbe(new SandboxFiles(env.sandbox)));
    assert.deepEqual(detected, {
      command: 'python3 -m pytest -rA',
      runner: 'pytest',
      source: why.slice('python: '.length),
    });
    const r = await runTestCommand(
      env.sandbox,
      detected.command,
      DEFAULT_LIMITS,
      undefined,
      'harness',
      null,
      detected.runner,
    );
    const context = `${r.command}\n--- output ---\n${r.output}`;
    assert.equal(r.summary.runner, 'pytest', context);
    assert.deepEqual(r.summary.passedNames, ['tests/test_calc.py::test_add'], context);
    assert.deepEqual(r.summary.failedNames, ['tests/test_calc.py::test_sub'], context);
    assert.equal(r.summary.complete, true, context);
    assert.ok(
      r.summary.sources?.some((s) => s.includes('report')),
      `the harness plugin's report was read: ${JSON.stringify(r.summary.sources)}`,
    );
  },
  { timeout: 120_000 },
);

dockerTest(
  'environment: JavaScript with node:test tests and no package.json gets the node image; node --test runs them with the harness reporter',
  async (_docker, t) => {
    const workspace = await repo(t, {
      'calc.js': 'exports.add = (a, b) => a + b;\nexports.sub = (a, b) => a + b;\n',
      'tests/calc.js': [
        "const test = require('node:test');",
        "const assert = require('node:assert');",
        "const { add, sub } = require('../calc.js');",
        "test('adds', () => assert.equal(add(2, 3), 5));",
        "test('subtracts', () => assert.equal(sub(5, 3), 2));",
        '',
      ].join('\n'),
    });
    const env = await prepare(t, workspace);
    assert.equal(env.record.image, 'issue-agent/node:22');
    assert.ok(
      env.record.setup.reason.includes('node: tests/calc.js imports node:test (no package.json)'),
      env.record.setup.reason,
    );
    const detected = await detectTestCommand(sandboxProbe(new SandboxFiles(env.sandbox)));
    assert.equal(detected?.command, 'node --test tests/calc.js');
    assert.equal(detected.runner, 'node-test');
    const r = await runTestCommand(
      env.sandbox,
      detected.command,
      DEFAULT_LIMITS,
      undefined,
      'harness',
      null,
      detected.runner,
    );
    const context = `${r.command}\n--- output ---\n${r.output}`;
    assert.equal(r.summary.runner, 'node-test', context);
    assert.deepEqual(r.summary.passedNames, ['tests/calc.js::adds'], context);
    assert.deepEqual(r.summary.failedNames, ['tests/calc.js::subtracts'], context);
    assert.ok(
      r.summary.sources?.some((s) => s.includes('report')),
      `the harness reporter's report was read: ${JSON.stringify(r.summary.sources)}`,
    );
  },
  { timeout: 120_000 },
);
