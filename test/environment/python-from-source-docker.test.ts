import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import type { EnvironmentSettings } from '../../src/config/agent-env.js';
import { EnvironmentSetupError } from '../../src/environment/errors.js';
import { hostProbe } from '../../src/environment/host-probe.js';
import { planEnvironment } from '../../src/environment/plan.js';
import { prepareEnvironment, type PreparedEnvironment } from '../../src/environment/prepare.js';
import { SOURCE_PATH_FILE } from '../../src/environment/python-from-source.js';
import { renderEnvironment } from '../../src/publish/environment.js';
import {
  durationsProject,
  HATCHLING_PYPROJECT,
  IN_TREE_BACKEND,
  IN_TREE_BACKEND_PYPROJECT,
} from '../support/from-source-projects.js';
import { buildWheels, startPackageIndex, type PackageIndex } from '../support/pypi-index.js';
import { dockerTest } from '../sandbox/docker/docker-test-support.js';

/**
 * A Python project whose build backend (hatchling) the deployment's package index does not have:
 * the index serves the project's dependencies (plurals, frozenclock) and nothing else. Its editable
 * install fails, setup runs it from source instead, and the tests run, with the record saying so.
 * Any other failure of the install, or a project that does not import from source, still fails
 * setup (the job's `setup_failed`).
 */

/** One index for the file: building the wheels costs a container run. */
let shared: Promise<{ index: PackageIndex; wheels: string }> | null = null;
function packageIndex(): Promise<PackageIndex> {
  shared ??= (async () => {
    const wheels = await buildWheels(['plurals', 'frozenclock']);
    return { index: await startPackageIndex(wheels), wheels };
  })();
  return shared.then((s) => s.index);
}
after(async () => {
  if (shared === null) return;
  const { index, wheels } = await shared;
  await index.close();
  await rm(join(wheels, '..'), { recursive: true, force: true });
});

function settings(index: PackageIndex, cacheDir: string | null): EnvironmentSettings {
  return {
    setupEnabled: true,
    allowHosts: [],
    allowCidrs: ['127.0.0.1/32'],
    extraCaPem: null,
    npmRegistry: null,
    pipIndexUrl: index.url,
    setupSecrets: {},
    grants: null,
    cacheUnpinnedMs: 24 * 3_600_000,
    cacheDir,
    cacheMaxBytes: 1024 ** 3,
    setupTimeoutMs: 5 * 60_000,
  };
}

async function prepare(
  dir: string,
  index: PackageIndex,
  cacheDir: string | null = null,
): Promise<PreparedEnvironment> {
  const probe = hostProbe(dir);
  const plan = await planEnvironment(probe, {}, { kind: 'base', ref: 'main' });
  return prepareEnvironment({
    workspace: dir,
    probe,
    jobId: `from-source-${Math.random().toString(36).slice(2, 8)}`,
    repoKey: `test:from-source:${dir}`,
    plan,
    settings: settings(index, cacheDir),
    mayStoreCache: true,
    scrub: (text) => text,
  });
}

const INSTALL = ".venv/bin/pip install -e '.[test]'";
const IMPORT = ".venv/bin/python -I -c 'import durations'";

dockerTest(
  'environment: a project whose build backend the index lacks runs from source; its tests run in both shells and the record says so',
  async (_docker, t) => {
    const index = await packageIndex();
    const project = durationsProject(HATCHLING_PYPROJECT);
    t.after(() => {
      project.cleanup();
    });
    const cacheDir = await mkdtemp(join(tmpdir(), 'ia-env-cache-'));
    t.after(() => rm(cacheDir, { recursive: true, force: true }));

    const env = await prepare(project.dir, index, cacheDir);
    t.after(async () => {
      await env.sandbox.close();
      await env.close();
    });
    const setup = env.record.setup;
    const outputs = setup.commands.map((c) => `$ ${c.command}\n${c.output}`).join('\n');
    assert.deepEqual(
      setup.commands.map((c) => [c.command, c.exitCode]),
      [
        ['python3 -m venv --system-site-packages .venv', 0],
        [INSTALL, 1],
        [".venv/bin/pip install 'plurals>=1.0' 'frozenclock==0.4.0'", 0],
        [
          `.venv/bin/python -c 'import os, sysconfig; open(os.path.join(sysconfig.get_path("purelib"), "${SOURCE_PATH_FILE}"), "w").write(os.path.abspath("src") + "\\n")'`,
          0,
        ],
        [IMPORT, 0],
      ],
      outputs,
    );
    assert.match(setup.commands[1]?.output ?? '', /No matching distribution found for hatchling/);
    // pip asked the index for the backend, which it does not have, then for the dependencies.
    for (const p of ['/simple/hatchling/', '/simple/plurals/', '/simple/frozenclock/'])
      assert.ok(index.requests.includes(p), p);
    assert.deepEqual(setup.fromSource, {
      missing: 'hatchling',
      isBackend: true,
      importRoot: 'src',
      packages: ['durations'],
    });
    assert.match(
      setup.reason,
      /; installed from source: the build backend hatchling could not be fetched; tests run with src on the virtualenv's import path/,
    );
    // Never kept: the next job tries the install again.
    assert.equal(setup.cache.status, 'not-stored');
    assert.match(setup.cache.note ?? '', /runs from source/);
    const pr = renderEnvironment(env.record);
    assert.match(pr, /installed from source: the build backend hatchling could not be fetched/);
    assert.match(
      pr,
      /\| `\.venv\/bin\/python -I -c 'import durations'` \| checks that the project runs from source/,
    );

    // The harness's test command for it, in the agent's shell and in the harness's: the project
    // imports from src, its dependencies are there, and only the bug fails.
    for (const [who, exec] of [
      ['agent', (c: string) => env.sandbox.exec(c, { timeoutMs: 120_000 })],
      ['harness', (c: string) => env.sandbox.harnessExec(c, { timeoutMs: 120_000 })],
    ] as const) {
      const out = (await exec('python3 -m pytest -rA 2>&1 | tail -12')).output;
      assert.match(out, /FAILED tests\/test_ago\.py::test_one_hour/, `${who}: ${out}`);
      assert.match(out, /1 failed, 6 passed/, `${who}: ${out}`);
    }
    // From anywhere, as an editable install would have it; and nothing of it reaches the change.
    const where = await env.sandbox.exec(
      `(cd / && python3 -c 'import durations; print(durations.__file__)')`,
      {
        timeoutMs: 30_000,
      },
    );
    assert.equal(where.output.trim(), '/workspace/src/durations/__init__.py');
    assert.equal((await env.sandbox.exec('git status --porcelain', { timeoutMs: 30_000 })).output, '');
  },
  { timeout: 300_000 },
);

dockerTest(
  'environment: any other failure of the install stays a setup failure (a dependency the index lacks, with a backend that works)',
  async (_docker, t) => {
    const index = await packageIndex();
    const project = durationsProject(IN_TREE_BACKEND_PYPROJECT, { '_backend/inplace.py': IN_TREE_BACKEND });
    t.after(() => {
      project.cleanup();
    });
    const error = await prepare(project.dir, index).then(
      () => assert.fail('setup should have failed'),
      (e: unknown) => e,
    );
    assert.ok(error instanceof EnvironmentSetupError, String(error));
    assert.equal(error.message, 'the setup command `.venv/bin/pip install -e .` exited with 1');
    assert.equal(error.transient, false);
    const setup = error.record.setup;
    assert.deepEqual(
      setup.commands.map((c) => [c.command, c.exitCode]),
      [
        ['python3 -m venv --system-site-packages .venv', 0],
        ['.venv/bin/pip install -e .', 1],
      ],
    );
    // The same words as a missing backend, but about a dependency: no fallback was tried.
    assert.match(setup.commands[1]?.output ?? '', /No matching distribution found for notonindex/);
    assert.equal(setup.fromSource, undefined);
    assert.doesNotMatch(setup.reason, /from source/);
  },
  { timeout: 300_000 },
);

dockerTest(
  'environment: a project that does not import from source fails setup with both failures',
  async (_docker, t) => {
    const index = await packageIndex();
    const project = durationsProject(HATCHLING_PYPROJECT, {
      'src/durations/__init__.py': 'import notinstalled\n',
    });
    t.after(() => {
      project.cleanup();
    });
    const error = await prepare(project.dir, index).then(
      () => assert.fail('setup should have failed'),
      (e: unknown) => e,
    );
    assert.ok(error instanceof EnvironmentSetupError, String(error));
    assert.equal(
      error.message,
      `the setup command \`${INSTALL}\` exited with 1 (the build backend hatchling could not be fetched: running the project from source instead), and \`${IMPORT}\`, run in its place, exited with 1`,
    );
    const setup = error.record.setup;
    assert.deepEqual(
      setup.commands.map((c) => c.exitCode),
      [0, 1, 0, 0, 1],
    );
    assert.match(setup.commands[4]?.output ?? '', /No module named 'notinstalled'/);
    assert.equal(setup.fromSource, undefined);
    assert.match(
      setup.reason,
      /the build backend hatchling could not be fetched, and running the project from source failed too/,
    );
  },
  { timeout: 300_000 },
);
