import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import {
  findRunnerConfig,
  mergePackageJson,
  type RunnerConfigChange,
  type RunnerConfigSource,
  type TreeEntry,
} from '../../src/testing/runner-config.js';

/**
 * Which of a change's files decide how its tests run (src/testing/runner-config.ts), decided from
 * the base's and the change's trees held in memory. The same decision runs over git in the sandbox
 * for the verdict and for eval grading (test/agent/runner-config.test.ts, test/e2e, test/eval).
 */

type Files = Readonly<Record<string, string>>;

const blob = (text: string): string => createHash('sha1').update(text).digest('hex');

function globRe(glob: string): RegExp {
  const body = glob
    .split('**/')
    .map((part) => part.replace(/[.+^${}()|[\]\\]/g, '\\$&').replaceAll('*', '[^/]*'))
    .join('(?:.*/)?');
  return new RegExp(`^${body}$`);
}

/** A source over two file maps (`null` in `change`: deleted; absent: as in the base). */
function memory(
  base: Files,
  change: Readonly<Record<string, string | null>>,
  tooLarge = new Set<string>(),
): RunnerConfigSource {
  const entry = (path: string, text: string): TreeEntry => ({ path, mode: '100644', blob: blob(text) });
  const texts = new Map<string, string>();
  for (const t of [...Object.values(base), ...Object.values(change)]) if (t !== null) texts.set(blob(t), t);
  return {
    changes: () =>
      Promise.resolve(
        Object.entries(change)
          .filter(([p, t]) => base[p] !== t)
          .map(([path, t]) => ({
            path,
            base: base[path] === undefined ? null : entry(path, base[path]),
            change: t === null ? null : entry(path, t),
          })),
      ),
    listBase: (globs) =>
      Promise.resolve(
        Object.entries(base)
          .filter(([p]) => globs.some((g) => globRe(g).test(p)))
          .map(([p, t]) => entry(p, t)),
      ),
    findBase: (paths) =>
      Promise.resolve(
        paths.flatMap((p) => (base[p] === undefined ? [] : [{ ...entry(p, base[p]), mode: '' }])),
      ),
    readBlobs: (ids) =>
      Promise.resolve(
        new Map(
          ids.flatMap((id) => {
            const t = texts.get(id);
            return t === undefined || tooLarge.has(t) ? [] : [[id, t] as const];
          }),
        ),
      ),
  };
}

async function decide(
  base: Files,
  change: Readonly<Record<string, string | null>>,
  testCommand: string | null = 'npm test',
): Promise<RunnerConfigChange> {
  return findRunnerConfig(memory(base, change), testCommand);
}

const paths = (c: RunnerConfigChange): string[] => c.touched.map((t) => t.path);

const PKG = JSON.stringify({
  name: 'lib',
  version: '1.0.0',
  main: 'index.js',
  scripts: { test: 'node --test', build: 'tsc', start: 'node index.js' },
  devDependencies: { jest: '30.0.0' },
});
const pkg = (patch: Record<string, unknown>): string =>
  JSON.stringify({ ...(JSON.parse(PKG) as object), ...patch });

describe('runner configuration by name and folder', () => {
  it('package manager settings, test runner configs, conftests at any depth, start-up hooks, dependencies', async () => {
    const c = await decide(
      { 'index.js': 'x', 'package.json': PKG },
      {
        '.npmrc': 'node-options=--require ./f.cjs\n',
        'f.cjs': 'forge',
        'jest.config.js': 'module.exports = {}',
        'packages/a/vitest.config.ts': 'export default {}',
        'vite.config.mjs': 'export default {}',
        '.mocharc.yml': 'require: f.cjs',
        'ava.config.js': 'export default {}',
        '.taprc': 'node-arg: [--require, f.cjs]',
        'babel.config.js': 'module.exports = {}',
        'tsconfig.test.json': '{}',
        'src/deep/conftest.py': 'import pytest',
        'sitecustomize.py': 'import os',
        'lib/site.pth': 'import forge',
        'node_modules/chai/index.js': 'forge',
        'index.js': 'fixed',
      },
    );
    assert.deepEqual(paths(c), [
      '.mocharc.yml',
      '.npmrc',
      '.taprc',
      'ava.config.js',
      'babel.config.js',
      'jest.config.js',
      'lib/site.pth',
      'node_modules/chai/index.js',
      'packages/a/vitest.config.ts',
      'sitecustomize.py',
      'src/deep/conftest.py',
      'tsconfig.test.json',
      'vite.config.mjs',
    ]);
    // Added files are removed for the proof; none of the code is touched.
    assert.ok(c.entries.every((e) => 'remove' in e));
  });

  it('a deleted or edited base file comes back as the base had it', async () => {
    const c = await decide(
      { 'conftest.py': 'base', 'pytest.ini': '[pytest]\n' },
      { 'conftest.py': 'forged', 'pytest.ini': null },
    );
    assert.deepEqual(c.entries, [
      { path: 'conftest.py', mode: '100644', blob: blob('base') },
      { path: 'pytest.ini', mode: '100644', blob: blob('[pytest]\n') },
    ]);
  });

  it('a new module at the root that stands in for the runner (`python -m pytest` puts the root first on sys.path)', async () => {
    const c = await decide(
      { 'inventory/__init__.py': '' },
      { '_pytest/config/__init__.py': 'forge', 'pluggy.py': 'forge', 'inventory/_pytest.py': 'fine' },
      'python3 -m pytest -rA',
    );
    assert.deepEqual(paths(c), ['_pytest/config/__init__.py', 'pluggy.py']);
  });

  it('a package.json added in a folder (its module type and resolution change), whatever it holds', async () => {
    const c = await decide({ 'package.json': PKG }, { 'test/package.json': '{"name": "tests"}' });
    assert.deepEqual(c.entries, [{ path: 'test/package.json', remove: true }]);
  });

  it('a Makefile counts when the tests run through make, and not otherwise', async () => {
    const change = { Makefile: 'test:\n\ttrue\n' };
    assert.deepEqual(paths(await decide({ Makefile: 'test:\n\tpytest\n' }, change, 'make test')), [
      'Makefile',
    ]);
    assert.deepEqual(
      paths(await decide({ Makefile: 'test:\n\tpytest\n' }, change, 'python3 -m pytest -rA')),
      [],
    );
  });
});

describe('package.json: the runner fields are the base, dependencies and entry points the change', () => {
  it('dependencies, version, exports and a script the tests do not run: not runner configuration', async () => {
    const c = await decide(
      { 'package.json': PKG },
      {
        'package.json': pkg({
          version: '1.0.1',
          exports: { '.': './index.js', './sub': './sub.js' },
          devDependencies: { jest: '30.0.0', c8: '10.0.0' },
          scripts: { test: 'node --test', build: 'tsc -p .', start: 'node index.js' },
        }),
      },
    );
    assert.deepEqual(c, { touched: [], entries: [] });
  });

  it('scripts.test (and pretest), jest, type and a field no tool here knows take the base values', async () => {
    const change = pkg({
      version: '2.0.0',
      scripts: { test: 'node forge.js', pretest: 'node forge.js', build: 'tsc', start: 'node index.js' },
      jest: { setupFiles: ['./forge.js'] },
      type: 'module',
      someTool: { preload: './forge.js' },
    });
    const c = await decide({ 'package.json': PKG }, { 'package.json': change });
    assert.deepEqual(c.touched, [
      { path: 'package.json', why: 'fields scripts.pretest, scripts.test, jest, type, someTool' },
    ]);
    const entry = c.entries[0];
    assert.ok(entry !== undefined && 'content' in entry);
    const merged = JSON.parse(entry.content) as Record<string, unknown>;
    assert.deepEqual(merged, { ...(JSON.parse(PKG) as object), version: '2.0.0' });
  });

  it('a manifest that is not JSON is the base whole; a `__proto__` key stays data', () => {
    assert.deepEqual(mergePackageJson(PKG, '{ not json', ['test']), {
      fields: ['(not a JSON object)'],
      content: null,
    });
    const merged = mergePackageJson(PKG, '{"__proto__": {"polluted": 1}, "scripts": {"test": "x"}}', [
      'test',
    ]);
    assert.ok(merged?.content !== null && merged !== null);
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    assert.match(merged.content, /"test": "node --test"/);
  });

  it('a nested manifest: every script counts', async () => {
    const c = await decide(
      { 'packages/a/package.json': '{"scripts":{"test":"jest"}}' },
      { 'packages/a/package.json': '{"scripts":{"test":"jest","build":"x"}}' },
    );
    assert.deepEqual(paths(c), ['packages/a/package.json']);
  });

  it('a manifest too large to read is the base whole', async () => {
    const big = pkg({ scripts: { test: 'node forge.js' } });
    const c = await findRunnerConfig(
      memory({ 'package.json': PKG }, { 'package.json': big }, new Set([big])),
      'npm test',
    );
    assert.deepEqual(c.entries, [{ path: 'package.json', mode: '100644', blob: blob(PKG) }]);
  });
});

describe('pyproject.toml and setup.cfg: only the tables a build or another tool reads may differ', () => {
  const PYPROJECT =
    '[project]\nname = "inv"\nversion = "1.0"\n\n[tool.pytest.ini_options]\ntestpaths = ["tests"]\n';

  it('a version bump, a dependency and a black setting: not runner configuration', async () => {
    const c = await decide(
      { 'pyproject.toml': PYPROJECT },
      {
        'pyproject.toml': `[project]\nname = "inv"\nversion = "1.1"\ndependencies = ["attrs"]\n\n[tool.black]\nline-length = 100\n\n[tool.pytest.ini_options]\ntestpaths = ["tests"]\n`,
      },
    );
    assert.deepEqual(c.touched, []);
  });

  it('addopts, a top-level dotted key, or a table hidden behind a fake header in a string: the base file', async () => {
    for (const forged of [
      `${PYPROJECT}addopts = "-p forge"\n`,
      `tool.pytest.ini_options.addopts = "-p forge"\n${PYPROJECT}`,
      `[project]\nname = "inv"\nversion = "1.0"\ndescription = """\n[project.urls]\n"""\n[tool.pytest.ini_options]\ntestpaths = ["tests"]\naddopts = "-p forge"\n`,
    ]) {
      const c = await decide({ 'pyproject.toml': PYPROJECT }, { 'pyproject.toml': forged });
      assert.deepEqual(
        c.entries,
        [{ path: 'pyproject.toml', mode: '100644', blob: blob(PYPROJECT) }],
        forged,
      );
    }
  });

  it('setup.cfg: [metadata] may differ, [tool:pytest] may not', async () => {
    const base = '[metadata]\nname = inv\n\n[tool:pytest]\ntestpaths = tests\n';
    assert.deepEqual(
      paths(await decide({ 'setup.cfg': base }, { 'setup.cfg': base.replace('name = inv', 'name = inv2') })),
      [],
    );
    assert.deepEqual(
      paths(await decide({ 'setup.cfg': base }, { 'setup.cfg': `${base}addopts = -p forge\n` })),
      ['setup.cfg'],
    );
  });
});

describe('files the base names', () => {
  it("jest's setup files (package.json and jest.config.js), not the tests its testMatch selects", async () => {
    const base = {
      'package.json': pkg({
        jest: { setupFilesAfterEnv: ['<rootDir>/test/setup.js'], testMatch: ['<rootDir>/test/only.test.js'] },
      }),
      'jest.config.js': "module.exports = { setupFiles: ['./jest/env'], roots: ['./src'] };",
      'test/setup.js': '',
      'test/only.test.js': '',
      'jest/env.ts': '',
      'src/index.js': '',
    };
    const c = await decide(base, {
      'test/setup.js': 'forge',
      'test/only.test.js': 'new test',
      'jest/env.ts': 'forge',
      'src/index.js': 'fix',
    });
    assert.deepEqual(c.touched, [
      { path: 'jest/env.ts', why: 'named by jest.config.js' },
      { path: 'test/setup.js', why: 'named by package.json' },
    ]);
  });

  it("a helper the base's setup file requires, one level down", async () => {
    const c = await decide(
      {
        '.mocharc.json': '{"require": ["test/setup.js"], "spec": ["test/**/*.spec.js"]}',
        'test/setup.js': "require('./matchers');",
        'test/matchers.js': '',
      },
      { 'test/matchers.js': 'forge' },
    );
    assert.deepEqual(c.touched, [{ path: 'test/matchers.js', why: 'named by test/setup.js' }]);
  });

  it("node options in the base's .npmrc and scripts.test, and a runner script the test command names", async () => {
    const c = await decide(
      {
        '.npmrc': 'node-options=--require ./preload.cjs\n',
        'preload.cjs': '',
        'package.json': pkg({
          scripts: { test: 'node scripts/run-tests.mjs && node --import ./test/register.mjs --test' },
        }),
        'scripts/run-tests.mjs': '',
        'test/register.mjs': '',
      },
      { 'preload.cjs': 'forge', 'scripts/run-tests.mjs': 'forge', 'test/register.mjs': 'forge' },
    );
    assert.deepEqual(paths(c), ['preload.cjs', 'scripts/run-tests.mjs', 'test/register.mjs']);
  });

  it('the tests a command names, the code its entry points name and a build script are not runner configuration', async () => {
    const c = await decide(
      {
        'package.json': pkg({
          main: 'lib/index.js',
          scripts: { test: 'node test.js', build: 'node build.js' },
        }),
        'test.js': "require('./lib/index.js')",
        'build.js': '',
        'lib/index.js': '',
      },
      { 'test.js': 'more tests', 'build.js': 'x', 'lib/index.js': 'fix' },
    );
    assert.deepEqual(paths(c), []);
  });

  it("pytest plugins: `-p` in the base's addopts, `pytest_plugins` in a conftest, a module the test command runs", async () => {
    const c = await decide(
      {
        'pytest.ini': '[pytest]\naddopts =\n    -p tests.plugins.timing\n    --strict-markers\n',
        'tests/conftest.py': 'pytest_plugins = [\n    "fixtures.db",\n]\n',
        'tests/plugins/timing.py': '',
        'src/fixtures/db.py': '',
        'tools/runner.py': '',
        'src/inv/core.py': '',
      },
      {
        'tests/plugins/timing.py': 'forge',
        'src/fixtures/db.py': 'forge',
        'tools/runner.py': 'forge',
        'src/inv/core.py': 'fix',
      },
      'python -m tools.runner',
    );
    assert.deepEqual(c.touched, [
      { path: 'src/fixtures/db.py', why: 'named by tests/conftest.py' },
      { path: 'tests/plugins/timing.py', why: 'named by pytest.ini' },
      { path: 'tools/runner.py', why: 'named by the test command' },
    ]);
  });

  it("setup.cfg's build sections name packages, not runner configuration", async () => {
    const c = await decide(
      {
        'setup.cfg': '[options]\npackages = src/inv\n\n[tool:pytest]\ntestpaths = tests\n',
        'src/inv/__init__.py': '',
      },
      { 'src/inv/__init__.py': 'fix' },
      'python3 -m pytest -rA',
    );
    assert.deepEqual(paths(c), []);
  });
});
