// Regenerates test/agent/testing/fixtures/real-runners/: creates small jest, vitest and mocha projects in
// a temporary directory outside the repository, installs the runners from the registry, runs them the
// way a repository's `npm test` would (CI=true, TERM=dumb, output piped; once more with FORCE_COLOR=1)
// and writes what they print (stdout and stderr interleaved, as `2>&1` gives them).
//
//   node scripts/capture-runner-output.mjs            # latest versions
//   JEST_VERSION=30.2.0 node scripts/capture-runner-output.mjs
//
// Only two things are normalised, so the fixtures stay stable between captures: the temporary
// directory (→ /tmp/runner-project) and timings (every "<number>ms" / "<number> s" → a fixed value,
// keeping the unit and the runner's layout; vitest's "Start at hh:mm:ss" → 00:00:00). Jest runs test
// files in parallel workers, so the order of its file blocks may change from one capture to the next.
import { spawnSync } from 'node:child_process';
import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..');
const outDir = join(repo, 'test/agent/testing/fixtures/real-runners');
const PLACEHOLDER = '/tmp/runner-project';

// ---------------------------------------------------------------------------------------------------
// The projects. Each has passing tests, a failing test, a skipped test, nested describe blocks, names
// with quotes, `›` and non-ASCII characters, and test files that fail to load. FIXED=1 makes the
// failing test pass: the "fixed" captures are the final run after a fix, to compare names with.

const failingAssertion = `process.env.FIXED === '1' ? 4 : 3`;

const jestFiles = {
  '__tests__/math.test.js': `describe('math', () => {
  test('adds', () => {
    expect(1 + 1).toBe(2);
  });
  describe('nested', () => {
    describe('deeper', () => {
      test('multiplies', () => {
        expect(2 * 3).toBe(6);
      });
    });
  });
  test('divides with rounding', () => {
    expect(Math.round(7 / 2)).toBe(${failingAssertion});
  });
  test.skip('skipped for now', () => {});
  test.todo('write more tests');
  test.each([
    [1, 1, 2],
    [2, 3, 5],
  ])('add(%i, %i) = %i', (a, b, sum) => {
    expect(a + b).toBe(sum);
  });
});
`,
  '__tests__/strings.test.js': `describe('strings "quoted" › arrow', () => {
  test(\`handles 'single' and "double" quotes\`, () => {
    expect('a'.toUpperCase()).toBe('A');
  });
  test('unicode ünïcödé ✓ 日本語 🚀', () => {
    expect('é'.length).toBe(1);
  });
  test('trims › whitespace', () => {
    expect(' x '.trim()).toBe(process.env.FIXED === '1' ? 'x' : 'x ');
  });
});

test('top level passes', () => {
  expect(true).toBe(true);
});
`,
  '__tests__/missing-module.test.js': `const helper = require('./does-not-exist');

test('never runs', () => {
  expect(helper).toBeDefined();
});
`,
  '__tests__/syntax-error.test.js': `test('never runs either', () => {
  expect(1).toBe(1);
`,
};

const vitestFiles = {
  'test/math.test.js': `import { describe, expect, test } from 'vitest';

describe('math', () => {
  test('adds', () => {
    expect(1 + 1).toBe(2);
  });
  describe('nested', () => {
    describe('deeper', () => {
      test('multiplies', () => {
        expect(2 * 3).toBe(6);
      });
    });
  });
  test('divides with rounding', () => {
    expect(Math.round(7 / 2)).toBe(${failingAssertion});
  });
  test.skip('skipped for now', () => {});
  test.todo('write more tests');
  test.each([
    [1, 1, 2],
    [2, 3, 5],
  ])('add(%i, %i) = %i', (a, b, sum) => {
    expect(a + b).toBe(sum);
  });
});
`,
  'test/strings.test.js': `import { describe, expect, test } from 'vitest';

describe('strings "quoted" › arrow', () => {
  test(\`handles 'single' and "double" quotes\`, () => {
    expect('a'.toUpperCase()).toBe('A');
  });
  test('unicode ünïcödé ✓ 日本語 🚀', () => {
    expect('é'.length).toBe(1);
  });
  test('trims › whitespace', () => {
    expect(' x '.trim()).toBe(process.env.FIXED === '1' ? 'x' : 'x ');
  });
});

test('top level passes', () => {
  expect(true).toBe(true);
});
`,
  'test/missing-module.test.js': `import { describe, expect, test } from 'vitest';
import helper from './does-not-exist.js';

test('never runs', () => {
  expect(helper).toBeDefined();
});
`,
  'test/syntax-error.test.js': `import { expect, test } from 'vitest';

test('never runs either', () => {
  expect(1).toBe(1);
`,
};

const mochaFiles = {
  'test/math.spec.js': `const assert = require('node:assert');

describe('math', () => {
  it('adds', () => {
    assert.strictEqual(1 + 1, 2);
  });
  describe('nested', () => {
    describe('deeper', () => {
      it('multiplies', () => {
        assert.strictEqual(2 * 3, 6);
      });
    });
  });
  it('divides with rounding', () => {
    assert.strictEqual(Math.round(7 / 2), ${failingAssertion});
  });
  it.skip('skipped for now', () => {});
  it('write more tests');
});
`,
  'test/strings.spec.js': `const assert = require('node:assert');

describe('strings "quoted" › arrow', () => {
  it(\`handles 'single' and "double" quotes\`, () => {
    assert.strictEqual('a'.toUpperCase(), 'A');
  });
  it('unicode ünïcödé ✓ 日本語 🚀', () => {
    assert.strictEqual('é'.length, 1);
  });
  it('trims › whitespace', () => {
    assert.strictEqual(' x '.trim(), process.env.FIXED === '1' ? 'x' : 'x ');
  });
});

it('top level passes', () => {
  assert.ok(true);
});
`,
};

// Mocha stops before running anything when a spec file fails to load, so that case is its own project.
const mochaBrokenFiles = {
  'test/ok.spec.js': `const assert = require('node:assert');

describe('ok', () => {
  it('passes', () => {
    assert.ok(true);
  });
});
`,
  'test/missing-module.spec.js': `const helper = require('./does-not-exist');

it('never runs', () => {
  require('node:assert').ok(helper);
});
`,
};

/**
 * `spec` is what `npm install --save-dev` gets (overridable by <NAME>_VERSION, e.g. VITEST4_VERSION);
 * `node` is the least node major the runner needs: when this node is older, a node of that major is
 * installed from the registry's node-<platform>-<arch> package and put first on the runner's PATH.
 */
const projects = [
  { name: 'jest', runner: 'jest', spec: 'jest@latest', files: jestFiles, type: 'commonjs' },
  { name: 'vitest', runner: 'vitest', spec: 'vitest@latest', files: vitestFiles, type: 'module', node: 22 },
  { name: 'vitest4', runner: 'vitest', spec: 'vitest@4', files: vitestFiles, type: 'module' },
  { name: 'mocha', runner: 'mocha', spec: 'mocha@latest', files: mochaFiles, type: 'commonjs' },
  { name: 'mocha-broken', runner: 'mocha', files: mochaBrokenFiles, type: 'commonjs', sharesWith: 'mocha' },
];

/**
 * Fixture name → project and command. `color` adds FORCE_COLOR=1, `noColor` NO_COLOR=1 (vitest colours
 * its output whenever CI is set, so its "-plain" captures have colour codes too); `fixed` sets FIXED=1.
 */
const cases = [
  { fixture: 'jest-default-plain', project: 'jest', args: ['jest'] },
  { fixture: 'jest-default-color', project: 'jest', args: ['jest'], color: true },
  { fixture: 'jest-default-fixed', project: 'jest', args: ['jest'], fixed: true },
  { fixture: 'jest-verbose-plain', project: 'jest', args: ['jest', '--verbose'] },
  { fixture: 'jest-verbose-color', project: 'jest', args: ['jest', '--verbose'], color: true },
  { fixture: 'jest-verbose-fixed', project: 'jest', args: ['jest', '--verbose'], fixed: true },
  { fixture: 'vitest-plain', project: 'vitest', args: ['vitest', 'run'] },
  { fixture: 'vitest-color', project: 'vitest', args: ['vitest', 'run'], color: true },
  { fixture: 'vitest-nocolor', project: 'vitest', args: ['vitest', 'run'], noColor: true },
  { fixture: 'vitest-fixed', project: 'vitest', args: ['vitest', 'run'], fixed: true },
  { fixture: 'vitest-verbose-plain', project: 'vitest', args: ['vitest', 'run', '--reporter=verbose'] },
  {
    fixture: 'vitest-verbose-color',
    project: 'vitest',
    args: ['vitest', 'run', '--reporter=verbose'],
    color: true,
  },
  { fixture: 'vitest4-plain', project: 'vitest4', args: ['vitest', 'run'] },
  { fixture: 'vitest4-color', project: 'vitest4', args: ['vitest', 'run'], color: true },
  { fixture: 'vitest4-nocolor', project: 'vitest4', args: ['vitest', 'run'], noColor: true },
  { fixture: 'vitest4-verbose-plain', project: 'vitest4', args: ['vitest', 'run', '--reporter=verbose'] },
  { fixture: 'mocha-plain', project: 'mocha', args: ['mocha'] },
  { fixture: 'mocha-color', project: 'mocha', args: ['mocha'], color: true },
  { fixture: 'mocha-fixed', project: 'mocha', args: ['mocha'], fixed: true },
  { fixture: 'mocha-load-error-plain', project: 'mocha-broken', args: ['mocha'] },
  { fixture: 'mocha-load-error-color', project: 'mocha-broken', args: ['mocha'], color: true },
];

// ---------------------------------------------------------------------------------------------------

function run(cmd, args, cwd, env) {
  const r = spawnSync(cmd, args, { cwd, env, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (r.error !== undefined) throw r.error;
  return r;
}

/** The sandbox's environment: CI=true, TERM=dumb, no colour settings inherited from this shell. */
function runnerEnv({ color = false, noColor = false, fixed = false }, nodeBin) {
  const dropped = new Set(['FORCE_COLOR', 'NO_COLOR', 'NODE_OPTIONS', 'COLORTERM', 'FIXED']);
  const env = Object.fromEntries(
    Object.entries(process.env).filter(
      ([key]) => !dropped.has(key) && !key.startsWith('npm_') && !key.startsWith('VITEST'),
    ),
  );
  env.CI = 'true';
  env.TERM = 'dumb';
  if (nodeBin !== undefined) env.PATH = `${nodeBin}:${env.PATH ?? ''}`;
  if (color) env.FORCE_COLOR = '1';
  if (noColor) env.NO_COLOR = '1';
  if (fixed) env.FIXED = '1';
  return env;
}

const COLOR = `${String.fromCharCode(27)}\\[[\\d;]*m`;
const START_RE = new RegExp(`(Start at(?:\\s|${COLOR})+)\\d\\d:\\d\\d:\\d\\d`, 'g');
const TIMING_RE = new RegExp(`(?:(?<![\\w.:])|(?<=${COLOR}))\\d+(\\.\\d+)?((?:${COLOR})*)( ?)(ms|s)\\b`, 'g');

function normalise(text, root) {
  return (
    text
      .replaceAll(root, PLACEHOLDER)
      // "Start at  10:11:12" (vitest)
      .replace(START_RE, '$100:00:00')
      // vitest 5's "Duration 1.2s (transform 44%, import 27%, …)": shares of the time.
      .replace(/^(.*Duration.*?)$/gm, (line) => line.replace(/\d+%/g, '1%'))
      // "(5 ms)", "12ms", "1.234 s", "0.5s" — a fixed value, keeping integer/decimal shape and unit.
      // Also right after a colour code ("\x1b[2m12ms"), whose final "m" would otherwise read as a word.
      // vitest colours the unit apart from the number: "\x1b[32m 7\x1b[2mms".
      .replace(TIMING_RE, (_m, frac, codes, space, unit) => `${frac ? '1.00' : '1'}${codes}${space}${unit}`)
  );
}

const root = realpathSync(mkdtempSync(join(tmpdir(), 'runner-capture-')));
const versions = {};
/** Node major → its bin directory, for runners that need a newer node than this one. */
const nodeBins = new Map();

function nodeBinFor(major) {
  if (major === undefined || Number(process.versions.node.split('.')[0]) >= major) return undefined;
  const cached = nodeBins.get(major);
  if (cached !== undefined) return cached;
  const dir = join(root, `node${major}`);
  mkdirSync(dir, { recursive: true });
  const pkg = `node-${process.platform}-${process.arch}`;
  writeFileSync(join(dir, 'package.json'), '{"private":true}\n');
  console.error(`installing ${pkg}@${major} in ${dir}`);
  const r = run('npm', ['install', '--no-audit', '--no-fund', `${pkg}@${major}`], dir, { ...process.env });
  if (r.status !== 0) throw new Error(`npm install ${pkg} failed:\n${r.stdout}\n${r.stderr}`);
  const bin = join(dir, 'node_modules', pkg, 'bin');
  nodeBins.set(major, bin);
  versions[`node ${major}`] = run(join(bin, 'node'), ['--version'], dir, process.env).stdout.trim();
  return bin;
}
try {
  for (const project of projects) {
    const dir = join(root, project.name);
    mkdirSync(dir, { recursive: true });
    for (const [file, content] of Object.entries(project.files)) {
      mkdirSync(dirname(join(dir, file)), { recursive: true });
      writeFileSync(join(dir, file), content);
    }
    const pkg = {
      name: `capture-${project.name}`,
      version: '1.0.0',
      private: true,
      type: project.type,
      scripts: { test: project.runner === 'vitest' ? 'vitest run' : project.runner },
    };
    writeFileSync(join(dir, 'package.json'), JSON.stringify(pkg, null, 2) + '\n');
    if (project.sharesWith !== undefined) {
      // Same runner, same lockfile: reuse the installed node_modules.
      const other = join(root, project.sharesWith);
      writeFileSync(join(dir, 'package.json'), readFileSync(join(other, 'package.json')));
      writeFileSync(join(dir, 'package-lock.json'), readFileSync(join(other, 'package-lock.json')));
      symlinkSync(join(other, 'node_modules'), join(dir, 'node_modules'));
      continue;
    }
    const override = process.env[`${project.name.toUpperCase()}_VERSION`];
    const spec = override === undefined ? project.spec : `${project.runner}@${override}`;
    console.error(`installing ${spec} in ${dir}`);
    const nodeBin = nodeBinFor(project.node);
    const install = run('npm', ['install', '--save-dev', '--no-audit', '--no-fund', spec], dir, {
      ...process.env,
      ...(nodeBin === undefined ? {} : { PATH: `${nodeBin}:${process.env.PATH ?? ''}` }),
    });
    if (install.status !== 0) throw new Error(`npm install failed:\n${install.stdout}\n${install.stderr}`);
    const installed = JSON.parse(
      readFileSync(join(dir, 'node_modules', project.runner, 'package.json'), 'utf8'),
    );
    versions[project.name] = installed.version;
  }

  mkdirSync(outDir, { recursive: true });
  const rows = [];
  for (const c of cases) {
    const dir = join(root, c.project);
    const project = projects.find((p) => p.name === c.project);
    const nodeBin = nodeBinFor(project?.node);
    // One shell so that stdout and stderr interleave exactly as `2>&1` interleaves them.
    const command = ['npx', ...c.args].join(' ');
    const r = run('sh', ['-c', `${command} 2>&1`], dir, runnerEnv(c, nodeBin));
    writeFileSync(join(outDir, `${c.fixture}.txt`), normalise(r.stdout, root));
    const envText = [
      'CI=true TERM=dumb',
      c.color ? 'FORCE_COLOR=1' : '',
      c.noColor ? 'NO_COLOR=1' : '',
      c.fixed ? 'FIXED=1' : '',
    ]
      .filter((s) => s !== '')
      .join(' ');
    const nodeText = nodeBin === undefined ? process.version : versions[`node ${project?.node}`];
    rows.push(
      `| \`${c.fixture}.txt\` | ${c.project} | ${nodeText} | \`${envText} ${command} 2>&1\` | ${r.status} |`,
    );
    console.error(`${c.fixture}: exit ${r.status}`);
  }

  const readme = `# Real jest, vitest and mocha output

Captured by \`node scripts/capture-runner-output.mjs\`, which writes the projects below into a temporary
directory, installs the runners with \`npm install --save-dev <runner>\` and runs each command with its
output piped, stdout and stderr interleaved. Only the temporary directory (→ \`${PLACEHOLDER}\`) and
timings (→ \`1ms\`, \`1 ms\`, \`1.00 s\`, …; vitest's start time → \`00:00:00\`, its time shares → \`1%\`) are
normalised. Captures still differ a little from one run to the next, as the runners do: the order of
jest's and vitest's file blocks, and whether jest prints a test's duration at all (not under 1 ms).

Versions: jest ${versions.jest}, vitest ${versions.vitest} (project \`vitest\`) and ${versions.vitest4} (project
\`vitest4\`), mocha ${versions.mocha}. Node ${process.version}, except where the table says otherwise: vitest 5
needs node 22 or later (on node 20 it crashes in its reporter, \`Map.groupBy is not a function\`), so the
script installs one from the registry's \`node-${process.platform}-${process.arch}\` package for it.

Projects (their files are in the script):
- **jest**, **vitest**, **vitest4**: \`math\` (pass, nested describe, a failing test, skip, todo, \`test.each\`), \`strings\`
  (names with quotes, \`›\` and non-ASCII, a failing test, a top-level test), a file requiring a missing
  module and a file with a syntax error.
- **mocha**: the same \`math\` and \`strings\` (no todo/each; a pending test without a body instead).
- **mocha-broken**: a passing spec and one requiring a missing module (mocha loads every file first and
  stops on a load error, so this is apart).

\`FIXED=1\` makes the two failing tests pass: the \`*-fixed\` captures are a final run to compare names with.

What the parser (src/agent/testing/parse-test-output.ts) names, and why:
- jest: \`describe › test\`, from the \`--verbose\` tree and the \`● describe › test\` failure headers. Without
  \`--verbose\` jest prints no name for a test that passed, only \`PASS <file>\`: the file's path is then the
  passed name (the counts still come from \`Tests:\`). A failing file's passing tests stay unnamed.
- vitest: its own \`file > describe > test\`. The default reporter prints a passed file as one line (its path
  is the name) and a failing file as a tree; vitest 5 prints the describe lines of that tree, vitest 4 does
  not, so vitest 4's passing tests below a describe stay unnamed (failing ones are named by the
  \`FAIL file > … > test\` details).
- mocha: \`describe › test\`, rebuilt from the spec reporter's indentation.
- A file that fails to load is one failure named by its path (jest, vitest); mocha stops before running
  anything, which is one unnamed failure.

| Fixture | Project | Node | Command | Exit |
| --- | --- | --- | --- | --- |
${rows.join('\n')}
`;
  writeFileSync(join(outDir, 'README.md'), readme);
} finally {
  if (process.env.KEEP_CAPTURE_DIR === undefined) rmSync(root, { recursive: true, force: true });
  else console.error(`kept ${root}`);
}
