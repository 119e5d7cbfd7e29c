// Two recordings of real test runners, both run by hand (never in CI), both checked in:
//
//   node scripts/capture-runner-output.mjs                        # test/testing/fixtures/real-runners
//   node --import tsx scripts/capture-runner-output.mjs --corpus  # test/fixtures/runner-output
//
// --corpus records every runner the harness reads (jest, vitest, mocha, node:test on node 20/22/24,
// node-tap, ava, pytest, unittest, go test, cargo test) at the versions in CORPUS_RUNNERS, each on
// the same small suites, run the way the harness runs them (report-plan.ts: the report it asks for,
// the bounds it sets), and writes per case the console output, the report file and what was run.
// See the corpus section at the end of this file, and test/testing/corpus.test.ts.
//
// Without --corpus: regenerates test/testing/fixtures/real-runners/: creates small jest, vitest and mocha projects in
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
const outDir = join(repo, 'test/testing/fixtures/real-runners');
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

const corpusMode = process.argv.includes('--corpus');
const root = corpusMode ? '' : realpathSync(mkdtempSync(join(tmpdir(), 'runner-capture-')));
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
if (!corpusMode)
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

What the console fallback (src/testing/parse-test-output.ts) names, and why (ids: docs/testing.md):
- jest: \`file::describe > test\`, from the \`--verbose\` tree and the \`● describe › test\` failure headers
  under each file's header. Without \`--verbose\` jest prints no name for a test that passed, only
  \`PASS <file>\`: the file is then one passed fact (the counts still come from \`Tests:\`), and a failing
  file's passing tests stay unnamed. The harness asks jest for its JSON report beside this output, which
  names them all.
- vitest: its own \`file > describe > test\`, as \`file::describe > test\`. The default reporter prints a
  passed file as one line (one passed fact for the file) and a failing file as a tree; vitest 5 prints
  the describe lines of that tree, vitest 4 does not, so vitest 4's passing tests below a describe stay
  unnamed (failing ones are named by the \`FAIL file > … > test\` details).
- mocha: \`describe > test\`, rebuilt from the spec reporter's indentation (it prints no file).
- A file that fails to load is one \`crashed-file\` fact named by its path (jest, vitest); mocha stops
  before running anything, and the file is named from the error's require stack.

| Fixture | Project | Node | Command | Exit |
| --- | --- | --- | --- | --- |
${rows.join('\n')}
`;
    writeFileSync(join(outDir, 'README.md'), readme);
  } finally {
    if (process.env.KEEP_CAPTURE_DIR === undefined) rmSync(root, { recursive: true, force: true });
    else console.error(`kept ${root}`);
  }

// ===================================================================================================
// The corpus (--corpus): test/fixtures/runner-output/<case>/{output.txt, report.*, case.json}.
//
// Every runner gets the same scenarios, each a few files of the same tests in the runner's own API:
//   main   math (a pass, a nested suite, a failing test, a skipped test), names (titles with `#`,
//          `\`, quotes and unicode) and, where one broken file does not stop the whole run, load (a
//          file that throws while loading);
//   hang   a test that waits forever on a socket, beside math;
//   crash  a test that ends the process (exit code 3), beside math;
//   spin   (node-tap) a test that never yields, beside math: node-tap's own file timeout kills it.
// FIXED=1 fixes everything (the failing test passes, the file loads, nothing hangs or crashes): the
// `-fixed` cases are the final run after a fix. Runs are bounded as the harness bounds them (a 3 s
// bound per test where the harness sets one) and killed after KILL_S seconds otherwise.
//
// Node runners run in the sandbox images (issue-agent/node:<major>, --network none) with the runner
// installed from the registry on the host and mounted read-only; pytest 7 and unittest in
// issue-agent/python (Debian's python3-pytest); pytest 9 with this machine's python (pyenv), go
// (Debian's golang-go) and cargo on the host. Paths are normalised to /w (the project) and /r (the
// report folder), timings as in the captures above.

import { cargoFiles, goFiles, jsFiles, pytestFiles, unittestFiles } from './runner-suites.mjs';

const KILL_S = 20;
const PER_TEST_MS = 3000;

const CORPUS_RUNNERS = [
  { runner: 'jest', spec: 'jest@29', label: 'jest29', color: false },
  { runner: 'jest', spec: 'jest@30', label: 'jest30', color: true, fixedStops: true },
  { runner: 'vitest', spec: 'vitest@2', label: 'vitest2', color: false },
  { runner: 'vitest', spec: 'vitest@3', label: 'vitest3', color: false },
  { runner: 'vitest', spec: 'vitest@4', label: 'vitest4', color: true },
  { runner: 'mocha', spec: 'mocha@10', label: 'mocha10', color: false },
  { runner: 'mocha', spec: 'mocha@11', label: 'mocha11', color: true },
  { runner: 'tap', spec: 'tap@18', label: 'tap18', color: false },
  { runner: 'tap', spec: 'tap@21', label: 'tap21', color: false },
  { runner: 'ava', spec: 'ava@6', label: 'ava6', color: false },
];

/** Cases: scenario files, variants. */
function corpusCases() {
  const cases = [];
  const jsScenarios = (runner) => ({
    // mocha stops everything when one file fails to load: its load case is apart.
    main: runner === 'mocha' ? ['math', 'names'] : ['math', 'names', 'load'],
    hang: ['hang', 'math'],
    crash: ['crash', 'math'],
    ...(runner === 'mocha' ? { load: ['load', 'math'] } : {}),
    ...(runner === 'tap' ? { spin: ['spin', 'math'] } : {}),
  });
  for (const r of CORPUS_RUNNERS) {
    const scenarios = jsScenarios(r.runner);
    for (const [scenario, files] of Object.entries(scenarios)) {
      cases.push({ ...r, kind: 'npm', scenario, files, variant: 'base' });
      if (scenario === 'main') cases.push({ ...r, kind: 'npm', scenario, files, variant: 'fixed' });
      if (scenario === 'main' && r.color)
        cases.push({ ...r, kind: 'npm', scenario, files, variant: 'color' });
      if (scenario !== 'main' && r.fixedStops)
        cases.push({ ...r, kind: 'npm', scenario, files, variant: 'fixed' });
    }
  }
  for (const node of [20, 22, 24]) {
    for (const reporter of ['default', 'tap']) {
      const base = { runner: 'node-test', label: `node${node}-${reporter}`, node, reporter, kind: 'node' };
      cases.push({ ...base, scenario: 'main', files: ['math', 'names', 'load'], variant: 'base' });
      cases.push({ ...base, scenario: 'main', files: ['math', 'names', 'load'], variant: 'fixed' });
      cases.push({ ...base, scenario: 'hang', files: ['hang', 'math'], variant: 'base' });
      cases.push({ ...base, scenario: 'crash', files: ['crash', 'math'], variant: 'base' });
      if (node === 22 && reporter === 'default') {
        cases.push({ ...base, scenario: 'hang', files: ['hang', 'math'], variant: 'fixed' });
        cases.push({ ...base, scenario: 'crash', files: ['crash', 'math'], variant: 'fixed' });
      }
    }
  }
  for (const where of ['pytest7', 'pytest9']) {
    const base = { runner: 'pytest', label: where, kind: where };
    cases.push({ ...base, scenario: 'main', files: ['math', 'names'], variant: 'base' });
    cases.push({ ...base, scenario: 'main', files: ['math', 'names'], variant: 'color' });
    cases.push({ ...base, scenario: 'main', files: ['math', 'names'], variant: 'fixed' });
    // pytest stops the session when a module cannot be collected.
    cases.push({ ...base, scenario: 'load', files: ['load', 'math'], variant: 'base' });
    cases.push({ ...base, scenario: 'hang', files: ['hang', 'math'], variant: 'base' });
    cases.push({ ...base, scenario: 'crash', files: ['crash', 'math'], variant: 'base' });
    if (where === 'pytest9') {
      cases.push({ ...base, scenario: 'hang', files: ['hang', 'math'], variant: 'fixed' });
      cases.push({ ...base, scenario: 'crash', files: ['crash', 'math'], variant: 'fixed' });
    }
  }
  const ut = { runner: 'unittest', label: 'unittest', kind: 'unittest' };
  cases.push({ ...ut, scenario: 'main', files: ['math', 'names', 'load'], variant: 'base' });
  cases.push({ ...ut, scenario: 'main', files: ['math', 'names', 'load'], variant: 'fixed' });
  cases.push({ ...ut, scenario: 'hang', files: ['hang', 'math'], variant: 'base' });
  cases.push({ ...ut, scenario: 'crash', files: ['crash', 'math'], variant: 'base' });
  const go = { runner: 'go', label: 'go', kind: 'go' };
  cases.push({ ...go, scenario: 'main', files: ['math', 'load'], variant: 'base' });
  cases.push({ ...go, scenario: 'main', files: ['math'], variant: 'fixed' });
  cases.push({ ...go, scenario: 'hang', files: ['hang', 'math'], variant: 'base' });
  cases.push({ ...go, scenario: 'crash', files: ['crash', 'math'], variant: 'base' });
  const cargo = { runner: 'cargo', label: 'cargo', kind: 'cargo' };
  cases.push({ ...cargo, scenario: 'main', variant: 'base' });
  cases.push({ ...cargo, scenario: 'main', variant: 'fixed' });
  cases.push({ ...cargo, scenario: 'hang', variant: 'base' });
  cases.push({ ...cargo, scenario: 'crash', variant: 'base' });
  return cases.map((c) => ({
    ...c,
    name: `${c.label}-${c.scenario}${c.variant === 'base' ? '' : `-${c.variant}`}`,
  }));
}

function sh(cmd, args, options = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, ...options });
  if (r.error !== undefined) throw r.error;
  return r;
}

function writeTree(dir, files) {
  for (const [file, content] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    writeFileSync(join(dir, file), content);
  }
}

async function captureCorpus() {
  const { planReport } = await import('../src/testing/report-plan.ts');
  const { PYTEST_PLUGIN, PYTEST_PLUGIN_MODULE, NODE_WRAPPER } =
    await import('../src/testing/report-helpers.ts');
  const { NODE_TEST_REPORTER } = await import('../src/testing/node-test-report.ts');
  const outRoot = join(repo, 'test/fixtures/runner-output');
  const work = realpathSync(mkdtempSync(join(tmpdir(), 'runner-corpus-')));
  const only = process.env.CORPUS_ONLY === undefined ? null : new RegExp(process.env.CORPUS_ONLY);
  const installed = new Map();
  const versions = {};

  const install = (spec) => {
    const known = installed.get(spec);
    if (known !== undefined) return known;
    const dir = join(work, 'pkgs', spec.replace(/[@/]/g, '-'));
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'package.json'), '{"private":true}\n');
    console.error(`installing ${spec}`);
    const r = sh('npm', ['install', '--no-audit', '--no-fund', '--save-dev', spec], { cwd: dir });
    if (r.status !== 0) throw new Error(`npm install ${spec} failed:\n${r.stdout}\n${r.stderr}`);
    const name = spec.slice(0, spec.lastIndexOf('@'));
    versions[spec] = JSON.parse(
      readFileSync(join(dir, 'node_modules', name, 'package.json'), 'utf8'),
    ).version;
    installed.set(spec, dir);
    return dir;
  };

  const reportFiles = (r) => {
    writeTree(r, {
      [`py/${PYTEST_PLUGIN_MODULE}.py`]: PYTEST_PLUGIN,
      'node-test-reporter.mjs': NODE_TEST_REPORTER,
      'bin/node': NODE_WRAPPER,
    });
    sh('chmod', ['-R', 'a+rwX', r]);
    sh('chmod', ['755', join(r, 'bin/node')]);
  };

  const rows = [];
  if (only === null) rmSync(outRoot, { recursive: true, force: true });
  for (const c of corpusCases()) {
    if (only !== null && !only.test(c.name)) continue;
    rmSync(join(outRoot, c.name), { recursive: true, force: true });
    const caseDir = join(work, c.name);
    const w = join(caseDir, 'w');
    const r = join(caseDir, 'r');
    mkdirSync(w, { recursive: true });
    mkdirSync(r, { recursive: true });
    reportFiles(r);
    let command;
    let runner = c.runner;
    let runIn; // { image } or 'host'
    const env = { CI: 'true', TERM: 'dumb' };
    if (c.variant === 'fixed') env.FIXED = '1';
    if (c.variant === 'color') env.FORCE_COLOR = '1';
    let version;
    if (c.kind === 'npm' || c.kind === 'node') {
      const files = c.kind === 'node' ? jsFiles('node-test') : jsFiles(c.runner);
      const dir = c.runner === 'vitest' || c.runner === 'jest' || c.runner === 'node-test' ? 'test' : 'test';
      const tree = {};
      const ext = c.runner === 'vitest' ? '.test.mjs' : c.runner === 'mocha' ? '.spec.js' : '.test.js';
      for (const f of c.files) tree[`${dir}/${f}${ext}`] = files[f];
      const script =
        c.kind === 'node'
          ? c.reporter === 'tap'
            ? 'node --test --test-reporter=tap'
            : 'node --test'
          : { jest: 'jest', vitest: 'vitest run', mocha: 'mocha', tap: 'tap', ava: 'ava' }[c.runner];
      tree['package.json'] =
        `${JSON.stringify({ name: 'corpus', version: '1.0.0', private: true, scripts: { test: script } }, null, 2)}\n`;
      writeTree(w, tree);
      if (c.kind === 'npm') {
        const pkgs = install(c.spec);
        // The runner, as installed: a copy of the tree (docker cannot mount into a mount).
        sh('cp', ['-a', join(pkgs, 'node_modules'), join(w, 'node_modules')]);
        version = versions[c.spec];
      }
      command = 'npm test';
      runIn = { image: `issue-agent/node:${c.kind === 'node' ? c.node : 22}` };
    } else if (c.kind === 'pytest7' || c.kind === 'pytest9') {
      const files = pytestFiles();
      const tree = {};
      for (const f of c.files) tree[`tests/test_${f}.py`] = files[f];
      if (c.variant === 'color') tree['pytest.ini'] = '[pytest]\naddopts = --color=yes\n';
      writeTree(w, tree);
      command = 'python3 -m pytest -rA';
      runIn = c.kind === 'pytest7' ? { image: 'issue-agent/python:latest' } : 'host';
      version =
        c.kind === 'pytest7'
          ? '7.2.1 (Debian python3-pytest)'
          : sh('python3', ['-m', 'pytest', '--version']).stdout.trim();
    } else if (c.kind === 'unittest') {
      const files = unittestFiles();
      const tree = {};
      for (const f of c.files) tree[`tests/test_${f}.py`] = files[f];
      writeTree(w, tree);
      command = 'python3 -m unittest discover -v -s tests';
      runIn = { image: 'issue-agent/python:latest' };
      version = 'Python 3.11 (Debian)';
    } else if (c.kind === 'go') {
      const files = goFiles();
      const tree = { 'go.mod': files['go.mod'] };
      for (const f of c.files) tree[f === 'load' ? 'broken/broken.go' : `${f}_test.go`] = files[f];
      writeTree(w, tree);
      command = 'go test ./... -v';
      runIn = 'host';
      env.GOCACHE = join(work, 'gocache');
      env.GOFLAGS = '-mod=mod';
      env.GOPATH = join(work, 'gopath');
      version = sh('go', ['version']).stdout.trim();
    } else {
      writeTree(w, cargoFiles(c.scenario));
      command = 'cargo test';
      runIn = 'host';
      env.CARGO_TARGET_DIR = join(work, `cargo-${c.scenario}`);
      version = sh('cargo', ['--version']).stdout.trim();
    }
    const rDir = runIn === 'host' ? r : '/r';
    const wDir = runIn === 'host' ? w : '/w';
    const plan = planReport({
      command,
      runner,
      packageJson: existsSyncSafe(join(w, 'package.json'))
        ? readFileSync(join(w, 'package.json'), 'utf8')
        : null,
      dir: rDir,
      perTestMs: PER_TEST_MS,
      nodeFlags: 'timeout+force-exit',
    });
    const script = `cd ${wDir} || exit 126\n${plan.setup}\n${plan.command}`;
    // node-tap starts slowly (a TypeScript loader and plugins per file): it gets longer, and its
    // spin case longer still, to reach node-tap's own 30 s file timeout on a busy machine.
    const killAfter = c.runner === 'tap' ? (c.scenario === 'spin' ? 8 : 4) * KILL_S : KILL_S;
    const inner = `timeout -s KILL ${killAfter} bash -c ${shq(script)} 2>&1`;
    sh('chmod', ['-R', 'a+rwX', caseDir]);
    let res;
    if (runIn === 'host') {
      // This shell's colour and runner settings would leak into the run: only the case's own.
      const leaking = new Set(['FORCE_COLOR', 'NO_COLOR', 'NODE_OPTIONS', 'PYTEST_ADDOPTS', 'PYTHONPATH']);
      const hostEnv = {
        ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !leaking.has(k))),
        ...env,
      };
      res = sh('bash', ['-c', inner], { env: hostEnv });
    } else {
      const args = [
        'run',
        '--rm',
        '--network',
        'none',
        '--memory',
        '2g',
        '-v',
        `${w}:/w`,
        '-v',
        `${r}:/r`,
        '-w',
        '/w',
      ];
      for (const [k, v] of Object.entries(env)) args.push('-e', `${k}=${v}`);
      args.push(runIn.image, 'bash', '-c', inner);
      res = sh('docker', args);
    }
    const killed = res.status === 137;
    const norm = (text) =>
      normalise(text.replaceAll(w, '/w').replaceAll(r, '/r').replaceAll(work, '/tmp/corpus'), '\u0000')
        // node's TAP and YAML durations
        .replace(/duration_ms: \d+(?:\.\d+)?/g, 'duration_ms: 1')
        .replace(/# time=\d+(?:\.\d+)?ms/g, '# time=1ms');
    const outDir = join(outRoot, c.name);
    mkdirSync(outDir, { recursive: true });
    writeFileSync(join(outDir, 'output.txt'), norm(res.stdout));
    const reports = [];
    for (const rep of plan.reports) {
      const path = join(r, rep.file);
      if (existsSyncSafe(path)) {
        writeFileSync(join(outDir, `report.${rep.file}`), norm(readFileSync(path, 'utf8')));
        reports.push({ kind: rep.kind, file: `report.${rep.file}` });
      }
    }
    const meta = {
      runner,
      version: version ?? `node ${c.node}`,
      ...(c.kind === 'node'
        ? { node: runIn.image, reporter: c.reporter }
        : runIn === 'host'
          ? { where: 'host' }
          : { image: runIn.image }),
      scenario: c.scenario,
      variant: c.variant,
      command: plan.command.replaceAll(rDir, '/r'),
      env,
      exitCode: killed ? null : res.status,
      killed: killed ? 'timeout' : null,
      root: '/w',
      reports,
    };
    delete meta.env.GOCACHE;
    delete meta.env.GOPATH;
    delete meta.env.CARGO_TARGET_DIR;
    writeFileSync(join(outDir, 'case.json'), `${JSON.stringify(meta, null, 2)}\n`);
    rows.push(
      `| \`${c.name}\` | ${meta.version} | \`${command}\` | ${killed ? 'killed' : res.status} | ${reports.map((x) => x.kind).join(', ') || '—'} |`,
    );
    console.error(
      `${c.name}: ${killed ? 'killed' : `exit ${res.status}`}${reports.length > 0 ? `, ${reports.map((x) => x.kind).join('+')} report` : ''}`,
    );
  }
  if (only === null) {
    writeFileSync(
      join(outRoot, 'README.md'),
      `# Recorded output of real test runners

Recorded by \`node --import tsx scripts/capture-runner-output.mjs --corpus\` (by hand, never in CI; the
script says what each scenario is). Each folder is one run: \`output.txt\` (stdout and stderr
interleaved), the report the harness asked the runner for (\`report.*\`, see src/testing/report-plan.ts)
and \`case.json\` (the runner and version, the command as the harness runs it, the exit code). Paths are
normalised to \`/w\` (the project) and \`/r\` (the report folder), timings to a fixed value.
\`test/testing/corpus.test.ts\` reads every case with the engine; \`expected.json\`, where there is one,
was written by hand from the output.

pytest 8 is not here: this machine has no PyPI, and Debian bookworm packages pytest 7; pytest 9 is the
one installed on the machine that recorded the corpus.

| Case | Version | Command | Exit | Report |
| --- | --- | --- | --- | --- |
${rows.join('\n')}
`,
    );
  }
  if (process.env.KEEP_CAPTURE_DIR === undefined) rmSync(work, { recursive: true, force: true });
  else console.error(`kept ${work}`);
}

function existsSyncSafe(path) {
  try {
    readFileSync(path);
    return true;
  } catch {
    return false;
  }
}

function shq(text) {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

if (corpusMode) await captureCorpus();
