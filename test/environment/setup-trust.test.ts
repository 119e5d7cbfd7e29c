import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { planEnvironment, type EnvironmentPlan } from '../../src/environment/plan.js';
import {
  isSetupInput,
  setupSecretsOf,
  untrustedSetupNote,
  type TreeOrigin,
} from '../../src/environment/setup-trust.js';
import { memoryProbe } from '../support/memory-probe.js';

const LOCK = JSON.stringify({ name: 'lib', lockfileVersion: 3, packages: {} });
const npmLib = (
  scripts: Record<string, string> = {},
  deps: Record<string, string> = {},
): Record<string, string> => ({
  'package.json': JSON.stringify({
    name: 'lib',
    scripts: { test: 'node --test', ...scripts },
    dependencies: deps,
  }),
  'package-lock.json': LOCK,
  'src/index.js': 'module.exports = 1;\n',
});

const changed = (...paths: string[]): TreeOrigin => ({ kind: 'changed', ref: 'main', paths });

async function planOf(
  files: Record<string, string>,
  origin: TreeOrigin,
  config: Parameters<typeof planEnvironment>[1] = { setupSecrets: ['NPM_TOKEN'] },
): Promise<EnvironmentPlan> {
  return planEnvironment(memoryProbe(files), config, origin);
}

describe('whether setup may have the setup secrets', () => {
  test('a commit of the base branch, and the CLI on its own checkout: trusted, commands as planned', async () => {
    for (const origin of [{ kind: 'base', ref: 'main' }, { kind: 'own-checkout' }] as const) {
      const plan = await planOf(npmLib({ postinstall: 'node x.js' }), origin);
      assert.equal(plan.trust.trusted, true, origin.kind);
      assert.equal(plan.trust.commands, undefined);
      assert.deepEqual(plan.trust.setupEnv, {});
      assert.deepEqual(
        plan.setup.commands.map((c) => c.command),
        ['npm ci --no-audit --no-fund'],
      );
    }
  });

  test('a pull request that changes a manifest, lockfile or package-manager setting, at any depth: not trusted, scripts off', async () => {
    for (const path of [
      'package.json',
      'package-lock.json',
      '.npmrc',
      'packages/a/package.json',
      'packages/a/.npmrc',
      '.yarn/releases/yarn-4.cjs',
      '.yarnrc.yml',
      '.pnpmfile.cjs',
      'requirements-dev.txt',
      '.env.yarn',
      'requirements/test.txt',
      'setup.py',
      'pyproject.toml',
      'tox.ini',
      '.nvmrc',
      '.github/issue-agent.yml',
    ]) {
      const plan = await planOf(npmLib(), changed('src/index.js', path));
      assert.equal(plan.trust.trusted, false, path);
      assert.match(plan.trust.reason, new RegExp(path.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')), path);
      assert.deepEqual(
        plan.trust.commands?.map((c) => c.command),
        ['npm ci --ignore-scripts --no-audit --no-fund'],
      );
      assert.equal(plan.trust.setupEnv.npm_config_ignore_scripts, 'true');
      // The cache is keyed on the planned commands: an untrusted round still finds the base's entry.
      assert.deepEqual(
        plan.setup.commands.map((c) => c.command),
        ['npm ci --no-audit --no-fund'],
      );
    }
  });

  test('only code files changed, and setup runs nothing of the repository: install scripts as committed, but no secret', async () => {
    const plan = await planOf(npmLib(), changed('src/index.js', 'test/index.test.js', 'README.md'), {
      setupSecrets: ['NPM_TOKEN'],
    });
    assert.equal(plan.trust.trusted, true, plan.trust.reason);
    assert.equal(plan.trust.commands, undefined, 'setup runs as planned');
    assert.match(plan.trust.reason, /3 file\(s\)/);
    // The agent's files are in the tree, and the tools setup runs read the working folder: a
    // `logging.py` at the root is imported by `python3 -m venv` before the standard library's.
    assert.equal(plan.trust.secrets, false);
    assert.match(plan.trust.reason, /files the agent wrote are in the workspace/);
    const granted = setupSecretsOf(plan, { NPM_TOKEN: 'npm_value_1234567890' });
    assert.deepEqual(granted.values, {});
    assert.deepEqual(granted.withheld, ['NPM_TOKEN']);
    assert.match(untrustedSetupNote(granted.record), /without the setup secrets \(NPM_TOKEN\)/);
    // A Python plan the same: a root module beside requirements.txt gets no secret either.
    const python = await planOf(
      { 'requirements.txt': 'requests==2.31.0\n', 'logging.py': 'import os\n' },
      changed('logging.py'),
      { setupSecrets: ['PIP_TOKEN'] },
    );
    assert.equal(python.trust.secrets, false, python.trust.reason);
    // The base branch's own tree, and a round whose tree is the base's: the secrets as committed.
    assert.equal((await planOf(npmLib(), { kind: 'base', ref: 'main' })).trust.secrets, true);
    assert.equal((await planOf(npmLib(), changed())).trust.secrets, true);
  });

  test("only code files changed, but setup runs the repository's own code: not trusted", async () => {
    const cases: [string, Record<string, string>, RegExp][] = [
      ['a prepare script', npmLib({ prepare: 'node build.js' }), /install lifecycle scripts \(prepare\)/],
      ['a postinstall', npmLib({ postinstall: 'node x.js' }), /postinstall/],
      ['a local package', npmLib({}, { helper: 'file:./helper' }), /depends on a package of the repository/],
      [
        "a workspace package's install script",
        {
          'package.json': JSON.stringify({ name: 'mono', workspaces: ['packages/*'] }),
          'package-lock.json': LOCK,
          'packages/a/package.json': JSON.stringify({ name: 'a', scripts: { install: 'node-gyp rebuild' } }),
        },
        /packages\/a\/package\.json has install lifecycle scripts \(install\)/,
      ],
      [
        'a Python project installed itself',
        { 'pyproject.toml': '[project]\nname = "p"\nversion = "1"\n', 'p/__init__.py': '' },
        /installs the Python project itself/,
      ],
      [
        'a requirements file naming the repository',
        {
          'requirements.txt': 'requests==2.31.0\n-e .\n',
          'setup.py': 'from setuptools import setup\nsetup()\n',
        },
        /installs|runs its build/,
      ],
      // Workspace packages the plan cannot list are installed all the same, scripts and all.
      ...[['packages/**'], ['{packages,tools}/*'], ['pkgs/a b/*']].map(
        (patterns): [string, Record<string, string>, RegExp] => [
          `npm workspaces ${patterns.join(', ')}`,
          {
            'package.json': JSON.stringify({ name: 'mono', workspaces: patterns }),
            'package-lock.json': LOCK,
            'packages/a/package.json': JSON.stringify({
              name: 'a',
              scripts: { postinstall: 'node build.js' },
            }),
          },
          /lifecycle scripts of workspace packages this did not read/,
        ],
      ),
      [
        'pnpm workspaces components/**',
        {
          'package.json': JSON.stringify({ name: 'mono', packageManager: 'pnpm@9.12.0' }),
          'pnpm-lock.yaml': "lockfileVersion: '9.0'\n",
          'pnpm-workspace.yaml': "packages:\n  - 'components/**'\n",
          'components/ui/button/package.json': JSON.stringify({
            name: 'b',
            scripts: { prepare: 'node gen.js' },
          }),
        },
        /did not read \(components\/\*\*\)/,
      ],
      [
        'more workspace packages than are read',
        {
          'package.json': JSON.stringify({ name: 'mono', workspaces: ['packages/*'] }),
          'package-lock.json': LOCK,
          ...Object.fromEntries(
            Array.from({ length: 201 }, (_, i) => [
              `packages/p${String(i).padStart(3, '0')}/package.json`,
              JSON.stringify({
                name: `p${i}`,
                ...(i === 200 ? { scripts: { postinstall: 'node x.js' } } : {}),
              }),
            ]),
          ),
        },
        /did not read \(more than 200 packages\)/,
      ],
      [
        'a requirements file pulled in by -r, whatever its name, naming a package of the repository',
        { 'requirements.txt': 'requests==2.31.0\n-r reqs/local.txt\n', 'reqs/local.txt': './tools/plugin\n' },
        /reqs\/local\.txt installs a package from the repository/,
      ],
      [
        'a requirements file two -r deep, its path relative to the file naming it',
        {
          'requirements.txt': '-r reqs/base.txt\n',
          'reqs/base.txt': 'requests==2.31.0\n-r more/extra.txt\n',
          'reqs/more/extra.txt': '-e ./tools/plugin\n',
        },
        /reqs\/more\/extra\.txt installs a package from the repository/,
      ],
    ];
    for (const [what, files, reason] of cases) {
      const plan = await planOf(files, changed('src/index.js'));
      assert.equal(plan.trust.trusted, false, what);
      assert.match(plan.trust.reason, reason, what);
      // The same tree on the base branch is trusted: the rule is about who wrote the code.
      assert.equal((await planOf(files, { kind: 'base', ref: 'main' })).trust.trusted, true, what);
    }
  });

  test('a configured setup: may run any file, so any change makes it untrusted', async () => {
    const files = { ...npmLib(), 'scripts/bootstrap.sh': 'npm ci\n' };
    const config = { setupSecrets: ['NPM_TOKEN'], setup: ['bash scripts/bootstrap.sh', 'npm ci'] };
    const plan = await planOf(files, changed('src/index.js'), config);
    assert.equal(plan.trust.trusted, false);
    assert.match(plan.trust.reason, /`setup:` in \.github\/issue-agent\.yml runs commands/);
    // The commands it does not know run as they are, with the variables; `npm ci` gets the flag.
    assert.deepEqual(
      plan.trust.commands?.map((c) => c.command),
      ['bash scripts/bootstrap.sh', 'npm ci --ignore-scripts'],
    );
    assert.equal(plan.trust.setupEnv.npm_config_ignore_scripts, 'true');
    assert.equal(plan.trust.setupEnv.YARN_ENABLE_SCRIPTS, 'false');
    assert.equal((await planOf(files, changed(), config)).trust.trusted, true, 'no change at all');
  });

  test('a base branch that could not be read: never trusted', async () => {
    const plan = await planOf(npmLib(), { kind: 'unknown', why: 'the branch is gone' });
    assert.equal(plan.trust.trusted, false);
    assert.match(plan.trust.reason, /the branch is gone/);
  });

  test('install scripts off, per package manager: pnpm and yarn classic flags, berry and classic variables', async () => {
    const pkg = (pm: string): string => JSON.stringify({ name: 'x', packageManager: pm });
    const pnpm = await planOf(
      { 'package.json': pkg('pnpm@9.12.0'), 'pnpm-lock.yaml': "lockfileVersion: '9.0'\n" },
      changed('package.json'),
    );
    assert.deepEqual(
      pnpm.trust.commands?.map((c) => c.command),
      [
        'npm install --global --prefix .issue-agent-tools --ignore-scripts --no-audit --no-fund --loglevel=error pnpm@9.12.0',
        '.issue-agent-tools/bin/pnpm install --ignore-scripts --frozen-lockfile',
      ],
    );
    const classic = await planOf(
      { 'package.json': pkg('yarn@1.22.22'), 'yarn.lock': '# yarn lockfile v1\n' },
      changed('yarn.lock'),
    );
    assert.match(
      classic.trust.commands?.[1]?.command ?? '',
      /yarn install --ignore-scripts --frozen-lockfile$/,
    );
    assert.equal(classic.trust.setupEnv.YARN_IGNORE_SCRIPTS, 'true');
    // Yarn berry refuses to start with YARN_IGNORE_SCRIPTS set: it gets enableScripts only.
    const berry = await planOf(
      {
        'package.json': pkg('yarn@4.5.0'),
        'yarn.lock': '__metadata:\n  version: 8\n',
        '.yarnrc.yml': 'nodeLinker: node-modules\n',
      },
      changed('yarn.lock'),
    );
    assert.equal(berry.trust.setupEnv.YARN_ENABLE_SCRIPTS, 'false');
    assert.equal(berry.trust.setupEnv.YARN_IGNORE_SCRIPTS, undefined);
  });

  test('what the setup gets and what its record says', async () => {
    const provided = { NPM_TOKEN: 'npm_value_1234567890', OTHER: 'other_value_123456' };
    const trusted = await planOf(
      npmLib(),
      { kind: 'base', ref: 'main' },
      { setupSecrets: ['NPM_TOKEN', 'GONE'] },
    );
    const t = setupSecretsOf(trusted, provided);
    assert.deepEqual(t.values, { NPM_TOKEN: 'npm_value_1234567890' });
    assert.deepEqual(t.missing, ['GONE']);
    assert.equal(untrustedSetupNote(t.record), '');

    const untrusted = await planOf(npmLib(), changed('package.json'), { setupSecrets: ['NPM_TOKEN'] });
    const u = setupSecretsOf(untrusted, provided);
    assert.deepEqual(u.values, {});
    assert.deepEqual(u.withheld, ['NPM_TOKEN']);
    assert.deepEqual(u.record, {
      trusted: false,
      reason: untrusted.trust.reason,
      withheld: ['NPM_TOKEN'],
      scriptsOff: true,
    });
    assert.match(
      untrustedSetupNote(u.record),
      /^ \(setup ran without the setup secrets \(NPM_TOKEN\) and with install scripts off: the workspace changes what setup runs/,
    );
  });

  test('setup inputs by name: not every file is one', () => {
    assert.equal(isSetupInput('src/package.json.ts'), false);
    assert.equal(isSetupInput('docs/setup.md'), false);
    assert.equal(isSetupInput('lib/requirements.py'), false);
    assert.equal(isSetupInput('ci/deps.txt', ['ci/deps.txt']), true, 'an input the plan names');
  });
});
