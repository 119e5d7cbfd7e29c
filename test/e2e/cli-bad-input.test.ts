import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { cliEnv, runCli } from '../support/cli.js';
import { gitOutput, makeFixtureRepo, type FixtureRepo } from '../support/fixture-repo.js';

let repo: FixtureRepo;
let scratch: string;
let runs: string;
const env = (): NodeJS.ProcessEnv =>
  cliEnv({
    ANTHROPIC_API_KEY: 'sk-unused',
    ANTHROPIC_BASE_URL: 'http://127.0.0.1:9',
    ISSUE_AGENT_RUNS_DIR: runs,
  });

before(() => {
  repo = makeFixtureRepo('node-calc');
  scratch = mkdtempSync(join(tmpdir(), 'ia-bad-'));
  runs = join(scratch, 'runs');
  mkdirSync(join(scratch, 'plain'));
});
after(() => {
  repo.cleanup();
  rmSync(scratch, { recursive: true, force: true });
});

const cases: { name: string; args: () => string[]; message: RegExp }[] = [
  {
    name: 'missing path',
    args: () => ['resolve', join(scratch, 'nope'), '--task', 'x'],
    message: /does not exist/,
  },
  {
    name: 'not a git repo',
    args: () => ['resolve', join(scratch, 'plain'), '--task', 'x'],
    message: /not a git repository/,
  },
  { name: 'empty task', args: () => ['resolve', repo.dir, '--task', '   '], message: /task is empty/ },
  { name: 'no task', args: () => ['resolve', repo.dir], message: /a task is required/ },
  {
    name: 'unknown flag',
    args: () => ['resolve', repo.dir, '--task', 'x', '--frobnicate'],
    message: /Unknown option '--frobnicate'/,
  },
  {
    name: 'bad number',
    args: () => ['resolve', repo.dir, '--task', 'x', '--max-steps', 'many'],
    message: /--max-steps must be a positive integer/,
  },
  { name: 'unknown command', args: () => ['fix', repo.dir], message: /unknown command "fix"/ },
  { name: 'replay of a non-trajectory', args: () => ['replay', scratch], message: /not a trajectory folder/ },
];

for (const c of cases) {
  test(`bad input (${c.name}): exit 2, one line, nothing modified`, async () => {
    const r = await runCli(c.args(), env());
    assert.equal(r.code, 2, r.stderr);
    const lines = r.stderr.trim().split('\n');
    assert.equal(lines.length, 1, r.stderr);
    assert.match(lines[0] ?? '', /^issue-agent: /);
    assert.match(lines[0] ?? '', c.message);
    assert.equal(gitOutput(repo.dir, 'status', '--porcelain'), '');
    assert.deepEqual(readdirSync(scratch).sort(), ['plain']);
  });
}

test('a missing API key is bad input too', async () => {
  const r = await runCli(['resolve', repo.dir, '--task', 'x'], cliEnv({ ISSUE_AGENT_RUNS_DIR: runs }));
  assert.equal(r.code, 2);
  assert.match(r.stderr, /ANTHROPIC_API_KEY is not set/);
});
