import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { recordedRun } from '../../src/agent/run-test-command.js';
import type { EventOf } from '../../src/events/schema.js';
import { LocalSandbox } from '../../src/sandbox/local/local-sandbox.js';
import { ownModulesOf, runTests } from '../../src/testing/run-tests.js';
import { environmentProblem, verdict } from '../../src/testing/verdict.js';

type TestRun = EventOf<'test_run'>;

test('own module names: top-level packages and modules, at the root and under src/', () => {
  assert.deepEqual(
    ownModulesOf(
      ['calc.py', 'pkg/__init__.py', 'pkg/a.py', 'src/core/x.py', 'src/tool.py', 'tests/test_a.py', ''].join(
        '\n',
      ),
    ),
    ['calc', 'core', 'pkg', 'tests', 'tool'],
  );
  // Names Python could not import are no module's.
  assert.deepEqual(ownModulesOf('my-scripts/run.py\n1x.py\nsetup.py\n'), ['setup']);
  // A package named `src` is one; `__init__` never is.
  assert.deepEqual(ownModulesOf('src/__init__.py\nsrc/app.py\n'), ['app', 'src']);
});

test("a base test importing the submodule the fix adds: the repository's failure, not the environment's", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ia-own-modules-'));
  t.after(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  mkdirSync(join(dir, 'pkg'));
  mkdirSync(join(dir, 'tests'));
  writeFileSync(join(dir, 'pkg', '__init__.py'), '');
  writeFileSync(join(dir, 'pkg', 'api.py'), 'def a():\n    return 1\n');
  writeFileSync(
    join(dir, 'tests', 'test_api.py'),
    'from pkg.api import a\n\n\ndef test_a():\n    assert a() == 1\n',
  );
  writeFileSync(
    join(dir, 'tests', 'test_mod.py'),
    'from pkg.newmod import f\n\n\ndef test_f():\n    assert f() == 2\n',
  );
  const sandbox = await LocalSandbox.create({ workspace: dir, path: process.env.PATH ?? '/usr/bin:/bin' });
  t.after(() => sandbox.close());
  const command = 'python3 -m pytest -rA -p no:cacheprovider tests';
  const ran = async (phase: TestRun['phase']): Promise<TestRun> => ({
    id: 1,
    ts: '2026-12-06T00:00:00.000Z',
    kind: 'test_run',
    phase,
    ...recordedRun(
      await runTests(sandbox, command, { via: 'harness', timeoutMs: 120_000, perTestMs: 60_000 }),
      (s) => s,
    ),
  });
  const before = await ran('baseline');
  assert.notEqual(before.exitCode, 0, before.output);
  assert.match(before.output, /No module named 'pkg\.newmod'/);
  assert.deepEqual(before.ownModules, ['pkg', 'tests']);
  assert.equal(environmentProblem(before), null, 'pkg is the repository’s');
  // Without the listing, nothing in the output says pkg is the repository's: read as the environment.
  assert.notEqual(environmentProblem({ ...before, ownModules: undefined }), null);

  writeFileSync(join(dir, 'pkg', 'newmod.py'), 'def f():\n    return 2\n');
  const after = await ran('final');
  assert.equal(after.exitCode, 0, after.output);
  assert.equal(after.ownModules, undefined, 'a run that passes lists nothing');
  const v = verdict(before, after);
  assert.equal(v.outcome, 'resolved', v.reason);
  assert.equal(v.cause, undefined);
});
