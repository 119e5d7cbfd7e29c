import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { WorkspaceProbe } from '../../src/testing/detect-test-command.js';
import {
  detectRuntime,
  OFFERED,
  resolveVersion,
  type DetectRuntimeOptions,
  type RuntimeChoice,
  type RuntimeVersion,
} from '../../src/environment/runtime.js';
import { chooseImageKind, imageReference } from '../../src/sandbox/docker/choose-image.js';

/** A probe over an in-memory tree: keys are file paths; their parent dirs exist implicitly. */
function memoryProbe(files: Record<string, string>): WorkspaceProbe {
  const dirs = new Map<string, Set<string>>([['.', new Set()]]);
  for (const file of Object.keys(files)) {
    const parts = file.split('/');
    for (let i = 0; i < parts.length; i++) {
      const parent = i === 0 ? '.' : parts.slice(0, i).join('/');
      let set = dirs.get(parent);
      if (set === undefined) {
        set = new Set();
        dirs.set(parent, set);
      }
      set.add(parts[i] ?? '');
    }
  }
  return {
    exists: (p) => Promise.resolve(p in files || dirs.has(p)),
    readText: (p) => Promise.resolve(files[p] ?? null),
    listDir: (p) => Promise.resolve(dirs.has(p) ? [...(dirs.get(p) ?? [])] : null),
  };
}

async function detect(files: Record<string, string>, options?: DetectRuntimeOptions): Promise<RuntimeChoice> {
  return detectRuntime(memoryProbe(files), options);
}

function runtime(choice: RuntimeChoice, language: 'node' | 'python'): RuntimeVersion {
  const r = choice.runtimes.find((x) => x.language === language);
  assert.ok(r, `no ${language} runtime in ${JSON.stringify(choice)}`);
  return r;
}

const pkg = (fields: Record<string, unknown> = {}): string => JSON.stringify({ name: 'x', ...fields });

const workflow = (nodeVersion: string): string =>
  [
    'name: ci',
    'on: push',
    'jobs:',
    '  test:',
    '    runs-on: ubuntu-latest',
    '    strategy:',
    '      matrix:',
    `        node: ${nodeVersion}`,
    '    steps:',
    '      - uses: actions/setup-node@v4',
    '        with:',
    '          node-version: ${{ matrix.node }}',
    '',
  ].join('\n');

describe('detectRuntime', () => {
  test('a package.json with nothing asked: Node 22 (the default, = node:latest), the node:22 image', async () => {
    const choice = await detect({ 'package.json': pkg() });
    assert.deepEqual(choice, {
      runtimes: [{ language: 'node', requested: null, version: '22', source: 'default' }],
      imageKind: 'node',
      reason: 'package.json',
      fromCode: false,
      image: 'issue-agent/node:22',
    });
  });

  test('no project files and no versions: no runtime, the base image', async () => {
    assert.deepEqual(await detect({ 'README.md': '# hi', 'main.c': '' }), {
      runtimes: [],
      imageKind: 'base',
      reason: 'no project files and no Python or JavaScript code',
      fromCode: false,
      image: 'issue-agent/base:latest',
    });
    // A root that cannot be listed is an empty repository, not an error.
    const empty: WorkspaceProbe = {
      exists: () => Promise.resolve(false),
      readText: () => Promise.resolve(null),
      listDir: () => Promise.resolve(null),
    };
    assert.equal((await detectRuntime(empty)).image, 'issue-agent/base:latest');
  });

  test('node sources in order: configured, .nvmrc, .node-version, .tool-versions, volta, engines, workflows', async () => {
    const files: Record<string, string> = {
      '.nvmrc': 'v20.11.0\n',
      '.node-version': '22.1.0',
      '.tool-versions': 'python 3.11.4\nnodejs 24.0.0 20.0.0\n',
      'package.json': pkg({ volta: { node: '20.10.0' }, engines: { node: '>=22 <24' } }),
      '.github/workflows/ci.yml': workflow('[24]'),
    };
    const expected: [string, string, string][] = [
      ['configured', '24', '24'],
      ['.nvmrc', 'v20.11.0', '20'],
      ['.node-version', '22.1.0', '22'],
      ['.tool-versions nodejs', '24.0.0', '24'],
      ['package.json volta.node', '20.10.0', '20'],
      ['package.json engines.node', '>=22 <24', '22'],
      ['.github/workflows/ci.yml node-version', '24', '24'],
      ['default', '', '22'],
    ];
    const configured: { node?: number } = { node: 24 };
    for (const [source, requested, version] of expected) {
      const choice = await detect(files, { configured });
      const node = runtime(choice, 'node');
      assert.deepEqual(
        { source: node.source, requested: node.requested ?? '', version: node.version },
        { source, requested, version },
        `step ${source}`,
      );
      assert.equal(choice.image, `issue-agent/node:${version}`);
      // Drop the source just seen, so the next one answers.
      if (source === 'configured') delete configured.node;
      else if (source === '.nvmrc') delete files['.nvmrc'];
      else if (source === '.node-version') delete files['.node-version'];
      else if (source === '.tool-versions nodejs') files['.tool-versions'] = 'python 3.11.4\n';
      else if (source === 'package.json volta.node')
        files['package.json'] = pkg({ engines: { node: '>=22 <24' } });
      else if (source === 'package.json engines.node') files['package.json'] = pkg();
      else if (source.startsWith('.github')) delete files['.github/workflows/ci.yml'];
    }
  });

  test('python sources in order: configured, .python-version, .tool-versions, requires-python, poetry, workflows', async () => {
    const pyproject = (project: string, poetry: string): string =>
      `[project]\nname = "x"\n${project}\n\n[tool.poetry.dependencies]\n${poetry}\nrequests = "^2"\n`;
    const files: Record<string, string> = {
      '.python-version': '3.11.4\n3.10.2\n',
      '.tool-versions': 'nodejs 22.0.0\npython 3.12.1\n',
      'pyproject.toml': pyproject('requires-python = ">=3.9"', 'python = "^3.10"'),
      '.github/workflows/test.yaml': [
        'jobs:',
        '  t:',
        '    strategy:',
        '      matrix:',
        "        python-version: ['3.10', '3.11', '3.12']",
        '    steps:',
        '      - uses: actions/setup-python@v5',
        '        with:',
        '          python-version: ${{ matrix.python-version }}',
      ].join('\n'),
    };
    const configured: { python?: string } = { python: '3.11' };
    const expected: [string, string, string | undefined][] = [
      ['configured', '3.11', undefined],
      ['.python-version', '3.11.4', undefined],
      [
        '.tool-versions python',
        '3.12.1',
        'requested 3.12.1, which this deployment does not offer; using 3.11',
      ],
      ['pyproject.toml requires-python', '>=3.9', undefined],
      ['pyproject.toml tool.poetry.dependencies.python', '^3.10', undefined],
      // Strings stay strings: YAML's 3.10 is not the number 3.1.
      ['.github/workflows/test.yaml python-version', '3.10, 3.11, 3.12', undefined],
      ['default', '', undefined],
    ];
    for (const [source, requested, note] of expected) {
      const choice = await detect(files, { configured });
      const python = runtime(choice, 'python');
      assert.equal(python.source, source);
      assert.equal(python.requested ?? '', requested, source);
      assert.equal(python.version, '3.11');
      if (note === undefined) assert.equal(python.note, undefined, source);
      else assert.ok(python.note?.startsWith(note), `${source}: ${String(python.note)}`);
      assert.equal(choice.image, 'issue-agent/python:3.11');
      if (source === 'configured') delete configured.python;
      else if (source === '.python-version') delete files['.python-version'];
      else if (source === '.tool-versions python') files['.tool-versions'] = 'nodejs 22.0.0\n';
      else if (source === 'pyproject.toml requires-python')
        files['pyproject.toml'] = pyproject('', 'python = "^3.10"');
      else if (source.startsWith('pyproject.toml tool.poetry')) files['pyproject.toml'] = pyproject('', '');
      else if (source.startsWith('.github')) delete files['.github/workflows/test.yaml'];
    }
  });

  test('a version this deployment does not offer maps to the nearest offered, with a note', async () => {
    const old = runtime(await detect({ 'package.json': pkg(), '.nvmrc': '18' }), 'node');
    assert.deepEqual(old, {
      language: 'node',
      requested: '18',
      version: '20',
      source: '.nvmrc',
      note: 'requested 18, which this deployment does not offer; using 20, the oldest offered',
    });
    const future = runtime(await detect({ 'package.json': pkg({ engines: { node: '>=26' } }) }), 'node');
    assert.equal(future.version, '24');
    assert.equal(
      future.note,
      'requested >=26, which this deployment does not offer; using 24, the newest offered',
    );
    const odd = runtime(await detect({ 'package.json': pkg(), '.node-version': '21.7.1' }), 'node');
    assert.equal(odd.version, '22');
    assert.match(odd.note ?? '', /using 22, the nearest offered/);
    assert.equal(
      runtime(await detect({ 'pyproject.toml': 'requires-python = ">=3.12"' }), 'python').version,
      '3.11',
    );
  });

  test('workflows: the lowest matrix entry that is offered; matrix include, env and reusable-workflow inputs', async () => {
    const node = async (wf: string): Promise<RuntimeVersion> =>
      runtime(await detect({ 'package.json': pkg(), '.github/workflows/ci.yml': wf }), 'node');
    assert.equal((await node(workflow('[18, 20, 22]'))).version, '20');
    assert.equal((await node(workflow('[18, 20, 22]'))).note, undefined);
    assert.equal((await node(workflow('[22.x, 24.x]'))).version, '22');
    const allOld = await node(workflow('[14, 16, 18]'));
    assert.equal(allOld.version, '20');
    assert.match(allOld.note ?? '', /requested 18, which this deployment does not offer/);
    assert.equal(
      (
        await node(
          [
            'jobs:',
            '  t:',
            '    strategy:',
            '      matrix:',
            '        os: [ubuntu-latest]',
            '        include:',
            '          - node: 24',
            '    steps:',
            '      - uses: actions/setup-node@v4',
            '        with: { node-version: "${{ matrix.node }}" }',
          ].join('\n'),
        )
      ).version,
      '24',
    );
    const env = await node(
      [
        'env:',
        '  NODE_VERSION: lts/iron',
        'jobs:',
        '  t:',
        '    steps:',
        '      - uses: actions/setup-node@v4',
        '        with:',
        '          node-version: ${{ env.NODE_VERSION }}',
      ].join('\n'),
    );
    assert.deepEqual([env.version, env.requested], ['20', 'lts/iron']);
    const reusable = await node(
      [
        'jobs:',
        '  call:',
        '    uses: ./.github/workflows/reusable.yml',
        '    with:',
        '      node-version: 22',
      ].join('\n'),
    );
    assert.equal(reusable.version, '22');
    assert.equal(reusable.source, '.github/workflows/ci.yml node-version');
  });

  test('a workflow alone does not make a language apply; version files and configuration do', async () => {
    const wf = { '.github/workflows/ci.yml': workflow('[20]') };
    assert.deepEqual((await detect({ ...wf, Makefile: '' })).runtimes, []);
    const nvmrcOnly = await detect({ '.nvmrc': '20' });
    assert.deepEqual(
      [nvmrcOnly.imageKind, nvmrcOnly.image, nvmrcOnly.runtimes.length, nvmrcOnly.reason],
      ['node', 'issue-agent/node:20', 1, 'node: .nvmrc asks for node'],
    );
    const configuredPython = await detect({ Makefile: '' }, { configured: { python: '3.11' } });
    assert.equal(configuredPython.image, 'issue-agent/python:3.11');
    // Project files decide the image; both runtimes are still listed.
    const both = await detect({ 'package.json': pkg(), 'requirements.txt': '', '.python-version': '3.11' });
    assert.deepEqual(
      both.runtimes.map((r) => `${r.language}@${r.version}`),
      ['node@22', 'python@3.11'],
    );
    assert.equal(both.image, 'issue-agent/node:22');
  });

  test('no project files: the code decides, the language is listed at its default, the reason says why', async () => {
    const python = await detect({
      'calc.py': 'def add(a, b):\n    return a + b\n',
      'tests/test_calc.py': 'def test_add():\n    assert True\n',
    });
    assert.deepEqual(python, {
      runtimes: [{ language: 'python', requested: null, version: '3.11', source: 'default' }],
      imageKind: 'python',
      reason:
        'python: tests/test_calc.py has module-level test functions (pytest-style tests; no Python project files)',
      fromCode: true,
      image: 'issue-agent/python:3.11',
    });
    // A version file still picks the version.
    const pinned = await detect({ 'calc.py': '', '.python-version': '3.11' });
    assert.deepEqual(
      [pinned.image, runtime(pinned, 'python').source],
      ['issue-agent/python:3.11', '.python-version'],
    );

    const node = await detect({ 'test/calc.test.js': "require('node:test');\n", '.nvmrc': '20' });
    assert.deepEqual(
      [node.imageKind, node.image, node.fromCode, node.reason],
      ['node', 'issue-agent/node:20', true, 'node: test/calc.test.js imports node:test (no package.json)'],
    );
  });

  test('a configured image wins and is returned as given', async () => {
    const files = { 'package.json': pkg(), '.nvmrc': '24' };
    assert.equal((await detect(files)).image, 'issue-agent/node:24');
    assert.equal((await detect(files, { image: 'example.com/custom:1' })).image, 'example.com/custom:1');
    // A bare name is an image reference (Docker Hub's `node`), not an image kind.
    assert.equal((await detect(files, { image: 'node' })).image, 'node');
    // The runtimes are still detected: the record says what the repository asked for.
    assert.equal(runtime(await detect(files, { image: 'node' }), 'node').version, '24');
  });

  test('malformed files are skipped without throwing; the note names them', async () => {
    const choice = await detect({
      'package.json': '{ "engines": { "node": ',
      '.nvmrc': 'banana\n',
      '.node-version': '',
      '.tool-versions': 'nodejs\n\u0000\u0001 garbage',
      'pyproject.toml': '[project\nrequires-python = >=3.9',
      '.python-version': 'miniconda3-latest',
      '.github/workflows/ci.yml': 'jobs: [: {\n  - node-version: 20',
      '.github/workflows/other.yml':
        'jobs:\n  t:\n    steps: 7\n    strategy: { matrix: "${{ fromJSON(x) }}" }',
    });
    assert.deepEqual(
      choice.runtimes.map((r) => [r.language, r.version, r.source]),
      [
        ['node', '22', 'default'],
        ['python', '3.11', 'default'],
      ],
    );
    assert.equal(runtime(choice, 'node').note, 'ignored .nvmrc (banana): not a version');
    assert.equal(
      runtime(choice, 'python').note,
      'ignored .python-version (miniconda3-latest): not a version',
    );
    // A skipped source is mentioned even when a later one answers.
    const later = runtime(
      await detect({ 'package.json': pkg({ engines: { node: '^20' } }), '.nvmrc': 'system' }),
      'node',
    );
    assert.deepEqual([later.version, later.source], ['20', 'package.json engines.node']);
    assert.equal(later.note, 'ignored .nvmrc (system): not a version');
    // Non-string fields and configured nonsense.
    const odd = await detect(
      { 'package.json': pkg({ volta: { node: 20 }, engines: ['node'] }) },
      { configured: { node: 'newest please' } },
    );
    assert.deepEqual([runtime(odd, 'node').version, runtime(odd, 'node').source], ['22', 'default']);
    assert.match(runtime(odd, 'node').note ?? '', /ignored configured \(newest please\)/);
  });

  test('a deployment may offer other versions', async () => {
    const choice = await detect(
      { 'package.json': pkg({ engines: { node: '>=20' } }) },
      { offered: { node: ['22', '26'], python: ['3.11'] } },
    );
    assert.equal(runtime(choice, 'node').version, '26');
    assert.equal(choice.image, 'issue-agent/node:26');
  });
});

describe('resolveVersion (engines ranges, aliases, PEP 440)', () => {
  const node = (request: string): string | null =>
    resolveVersion('node', request, OFFERED.node)?.version ?? null;
  const python = (request: string): string | null =>
    resolveVersion('python', request, OFFERED.python)?.version ?? null;

  test('npm ranges pick the highest offered major that satisfies them', () => {
    const cases: [string, string | null][] = [
      ['>=18', '24'],
      ['>= 20.5.0', '24'],
      ['^18', '20'],
      ['^20.11.1', '20'],
      ['18.x', '20'],
      ['20.x', '20'],
      ['>=18 <21', '20'],
      ['>=18.0.0 <23', '22'],
      ['18 || 20', '20'],
      ['20.x || 22.x', '22'],
      ['~18.2', '20'],
      ['~22.4.1', '22'],
      ['16 - 22', '22'],
      ['<=22', '22'],
      ['>20 <24', '22'],
      ['=22.3.0', '22'],
      ['v24.1.0', '24'],
      ['*', '24'],
      ['x', '24'],
    ];
    for (const [request, expected] of cases) assert.equal(node(request), expected, request);
  });

  test('nvm and setup-node aliases and codenames', () => {
    const cases: [string, string][] = [
      ['lts/*', '24'],
      ['lts', '24'],
      ['lts/-1', '22'],
      ['node', '24'],
      ['latest', '24'],
      ['lts/hydrogen', '20'], // 18, not offered
      ['hydrogen', '20'],
      ['lts/iron', '20'],
      ['lts/Jod', '22'],
      ['krypton', '24'],
    ];
    for (const [request, expected] of cases) assert.equal(node(request), expected, request);
  });

  test('PEP 440 and Poetry specifiers for Python', () => {
    const cases: [string, string][] = [
      ['>=3.9', '3.11'],
      ['>=3.8, <3.12', '3.11'],
      ['~=3.10', '3.11'],
      ['==3.11.*', '3.11'],
      ['^3.10', '3.11'],
      ['3.x', '3.11'],
      ['3.13.0rc1', '3.11'],
      ['pypy3.10', '3.11'],
    ];
    for (const [request, expected] of cases) assert.equal(python(request), expected, request);
    assert.equal(resolveVersion('python', '>=3.9,<3.11', OFFERED.python)?.distance, 1);
    assert.equal(resolveVersion('python', '>=3.9,!=3.11.*', OFFERED.python)?.distance, 1);
  });

  test('what is not a version, or can never be satisfied, resolves to null', () => {
    for (const request of ['banana', 'system', '', '   ', '>=22 <20', '20abc', 'ref:v1.0', '>>20', '^']) {
      assert.equal(node(request), null, JSON.stringify(request));
    }
    for (const request of ['miniconda3-latest', 'system', '>=3.12,<3.10']) {
      assert.equal(python(request), null, request);
    }
  });
});

test('choose-image: its existing exports keep working; imageReference over a choice', () => {
  assert.equal(chooseImageKind(['package.json', 'pyproject.toml']), 'node');
  assert.equal(imageReference({ imageKind: 'node', runtimes: [] }), 'issue-agent/node:latest');
  assert.equal(
    imageReference({ imageKind: 'python', runtimes: [{ language: 'python', version: '3.11' }] }),
    'issue-agent/python:3.11',
  );
  assert.equal(imageReference({ imageKind: 'base', runtimes: [] }, '  '), 'issue-agent/base:latest');
});
