import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { chooseSandbox } from '../../src/cli/workspace.js';
import { readAgentEnv } from '../../src/config/agent-env.js';
import { ReproduceError, reproduceVerdict, type ReproduceOptions } from '../../src/execution/reproduce.js';
import { commitFiles, makeFixtureRepo } from '../support/fixture-repo.js';

/** Thrown by `starting`: the command is known and no sandbox has started. */
class Stop extends Error {}

const SETTINGS = '.github/issue-agent.yml';

/**
 * A node-calc repository whose base commit holds `base` (files) and whose head (branch `head`)
 * changes its settings and its test script to `true`, as a hostile pull request would.
 */
function repo(t: TestContext, base: Readonly<Record<string, string>>): string {
  const fixture = makeFixtureRepo('node-calc');
  t.after(() => {
    fixture.cleanup();
  });
  if (Object.keys(base).length > 0) commitFiles(fixture.dir, base);
  execFileSync('git', ['checkout', '-q', '-b', 'head'], { cwd: fixture.dir });
  commitFiles(fixture.dir, {
    [SETTINGS]: 'testCommand: "true"\n',
    'package.json': `${JSON.stringify({ name: 'node-calc', type: 'module', scripts: { test: 'true' } })}\n`,
  });
  return fixture.dir;
}

/** The command and its source the reproduction would run `dir`'s change with (no sandbox starts). */
async function chosen(
  t: TestContext,
  dir: string,
  o: Pick<ReproduceOptions, 'command' | 'commandSource' | 'baseSettings'>,
): Promise<{ command: string; source: string }> {
  const env = readAgentEnv({});
  const work = mkdtempSync(join(tmpdir(), 'ia-reproduce-command-'));
  t.after(() => {
    rmSync(work, { recursive: true, force: true });
  });
  const seen: { command: string; source: string }[] = [];
  await assert.rejects(
    reproduceVerdict({
      repo: dir,
      base: 'main',
      head: 'head',
      ...o,
      sandbox: await chooseSandbox('unconfined', env),
      env,
      setup: false,
      work,
      cacheKey: 'test',
      starting: (at) => {
        seen.push({ command: at.command, source: at.source });
        throw new Stop();
      },
    }),
    Stop,
  );
  const [first] = seen;
  assert.ok(first);
  return first;
}

test("the CLI: `testCommand` of the base's settings, never the head's", async (t) => {
  const dir = repo(t, { [SETTINGS]: 'testCommand: "node --test"\n' });
  assert.deepEqual(await chosen(t, dir, { command: null, baseSettings: true }), {
    command: 'node --test',
    source: '`testCommand` in .github/issue-agent.yml on the base',
  });
});

test("no settings on the base: the command detected on the base, never the head's settings or script", async (t) => {
  const dir = repo(t, {});
  assert.deepEqual(await chosen(t, dir, { command: null, baseSettings: true }), {
    command: 'npm test',
    source: 'detected on the base: package.json scripts.test',
  });
});

test('the App: its configured command first (read by intake from the default branch), else detection on the base', async (t) => {
  const dir = repo(t, { [SETTINGS]: 'testCommand: "node --test"\n' });
  assert.deepEqual(await chosen(t, dir, { command: 'node --test test/', commandSource: 'the settings' }), {
    command: 'node --test test/',
    source: 'the settings',
  });
  // The App passes no baseSettings: its settings were read at intake; the base's file is not read again.
  assert.equal((await chosen(t, dir, { command: null })).command, 'npm test');
});

test("invalid settings on the base: a typed error before any sandbox, not the head's or a guess", async (t) => {
  const dir = repo(t, { [SETTINGS]: 'testCommand: [1, 2]\n' });
  const env = readAgentEnv({});
  const work = mkdtempSync(join(tmpdir(), 'ia-reproduce-command-'));
  t.after(() => {
    rmSync(work, { recursive: true, force: true });
  });
  await assert.rejects(
    reproduceVerdict({
      repo: dir,
      base: 'main',
      head: 'head',
      command: null,
      baseSettings: true,
      sandbox: await chooseSandbox('unconfined', env),
      env,
      setup: false,
      work,
      cacheKey: 'test',
      starting: () => {
        throw new Error('no command should be chosen');
      },
    }),
    (error: unknown) =>
      error instanceof ReproduceError &&
      error.code === 'invalid_settings' &&
      /testCommand/.test(error.message),
  );
});
