import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileCommandPaths, runnerHidePaths } from '../../src/action/isolation.js';
import {
  detectRunnerLayout,
  RunnerLayoutError,
  type RunnerLayout,
  type RunnerProcess,
} from '../../src/action/runner-layout.js';
import { pristineRoot } from '../../src/github/pristine-clone.js';
import { isInside } from '../../src/sandbox/local/host-view.js';

/**
 * Where a runner keeps its files, found from its variables and processes over fake runner trees,
 * and what the isolated sandbox hides there. The sandbox applying such a list to a runner under
 * /opt is test/security/self-hosted-runner.test.ts.
 */
const base = realpathSync(mkdtempSync(join(tmpdir(), 'ia-layout-')));
after(() => {
  rmSync(base, { recursive: true, force: true });
});

function write(dir: string, files: Readonly<Record<string, string>>): void {
  for (const [name, content] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, name)), { recursive: true });
    writeFileSync(join(dir, name), content);
  }
}

/** A runner as config.sh and run.sh leave it: registration, programs, logs. */
function installRunner(root: string, workFolder: string): void {
  write(root, {
    '.runner': `\uFEFF${JSON.stringify({ agentId: 7, agentName: 'build-1', poolId: 1, workFolder })}`,
    '.credentials': '{"scheme":"OAuth","data":{"clientId":"x"}}',
    '.credentials_rsaparams': '{"d":"secret"}',
    '.env': 'LANG=C.UTF-8\n',
    '.path': '/usr/bin:/bin\n',
    'config.sh': '#!/bin/bash\n',
    'run.sh': '#!/bin/bash\n',
    'bin/Runner.Worker': '',
    'bin/Runner.Listener': '',
    'externals/node24/bin/node': '',
    '_diag/Worker_20260101-000000-utc.log': 'job details\n',
  });
}

/** A work folder during a job of acme/calc: its temp (step script, file commands), checkout, actions. */
function fillWork(work: string): void {
  write(work, {
    '_temp/0c6f4e2a.sh': 'curl -H "Authorization: token s3cr3t" …\n',
    '_temp/_runner_file_commands/set_output_1': '',
    '_temp/_github_workflow/event.json': '{}',
    'calc/calc/.git/config': 'extraheader = AUTHORIZATION: basic x\n',
    '_actions/actions/checkout/v4/action.yml': 'name: checkout\n',
  });
}

function caseDir(): string {
  return mkdtempSync(join(base, 'case-'));
}

function runnerEnv(work: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    GITHUB_ACTIONS: 'true',
    RUNNER_ENVIRONMENT: 'self-hosted',
    RUNNER_TEMP: join(work, '_temp'),
    RUNNER_WORKSPACE: join(work, 'calc'),
    GITHUB_WORKSPACE: join(work, 'calc', 'calc'),
    GITHUB_OUTPUT: join(work, '_temp/_runner_file_commands/set_output_1'),
    ...extra,
  };
}

const asRunner = (root: string): RunnerProcess => ({
  execPath: join(root, 'externals/node24/bin/node'),
  parentExe: join(root, 'bin/Runner.Worker'),
});
const notRunner: RunnerProcess = { execPath: '/usr/bin/node', parentExe: '/usr/bin/bash' };

/** The Action's hide list for a layout, as run-action.ts builds it. */
function hideFor(layout: RunnerLayout | null, env: NodeJS.ProcessEnv, path = '/usr/bin:/bin'): string[] {
  const jobsDir = join(env.RUNNER_TEMP ?? '/nonexistent', 'issue-agent', 'jobs');
  mkdirSync(join(jobsDir, 'job-1', 'workspace'), { recursive: true });
  mkdirSync(pristineRoot(jobsDir), { recursive: true });
  return runnerHidePaths({
    home: env.HOME ?? null,
    jobsDir,
    layout,
    checkout: env.GITHUB_WORKSPACE ?? null,
    path,
    extra: [pristineRoot(jobsDir), ...fileCommandPaths(env)],
  });
}

function files(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .map((p) => join(dir, p))
    .filter((p) => statSync(p).isFile());
}

const covered = (p: string, hidden: readonly string[]): boolean => hidden.some((h) => isInside(p, h));

function refusal(pattern: RegExp): (e: unknown) => boolean {
  return (e) => {
    assert.ok(e instanceof RunnerLayoutError, String(e));
    assert.match(e.message, /^the isolated local sandbox \(`sandbox: local`\)/);
    assert.match(e.message, /set the action's `sandbox: docker` input/);
    assert.doesNotMatch(e.message, /\n/);
    assert.match(e.message, pattern);
    return true;
  };
}

describe("finding a self-hosted runner's files", () => {
  it('the standard layout under /opt: root, `_work`, its `_temp` and `_tool`, all agreeing', () => {
    const t = caseDir();
    const root = join(t, 'opt/actions-runner');
    installRunner(root, '_work');
    fillWork(join(root, '_work'));
    write(join(root, '_work'), { '_tool/node/24.1.0/x64/bin/node': '' });
    write(t, { 'home/svc/.ssh/id_ed25519': 'key' });
    const env = runnerEnv(join(root, '_work'), {
      RUNNER_TOOL_CACHE: join(root, '_work/_tool'),
      HOME: join(t, 'home/svc'),
    });
    const layout = detectRunnerLayout(env, asRunner(root));
    assert.ok(layout !== null);
    assert.deepEqual(
      {
        hosted: layout.hosted,
        root: layout.root,
        work: layout.work,
        temp: layout.temp,
        tool: layout.toolCache,
      },
      {
        hosted: false,
        root,
        work: join(root, '_work'),
        temp: join(root, '_work/_temp'),
        tool: join(root, '_work/_tool'),
      },
    );
    assert.match(
      layout.evidence.join('\n'),
      /named by the action's node .* and its parent process .* and the work folder/,
    );
    assert.match(layout.evidence.join('\n'), /`\.runner` says so/);

    const toolBin = join(root, '_work/_tool/node/24.1.0/x64/bin');
    const hidden = hideFor(layout, env, `${toolBin}:/usr/bin:/bin`);
    assert.deepEqual(
      hidden.map((p) => relative(root, p)),
      [
        '.credentials',
        '.credentials_rsaparams',
        '.env',
        '.path',
        '.runner',
        '_diag',
        '_work/_actions',
        '_work/_temp/0c6f4e2a.sh',
        '_work/_temp/_github_workflow',
        '_work/_temp/_runner_file_commands',
        '_work/_temp/_runner_file_commands/set_output_1',
        '_work/_temp/issue-agent/pristine',
        '_work/calc',
        '_work/calc/calc',
        'bin',
        'config.sh',
        'externals',
        'run.sh',
        relative(root, join(t, 'home/svc')),
      ].sort(),
    );
    // Each of the runner's files is covered; the tool cache and the jobs folder are not.
    for (const f of files(root)) {
      const open =
        isInside(f, join(root, '_work/_tool')) || isInside(f, join(root, '_work/_temp/issue-agent/jobs'));
      assert.equal(covered(f, hidden), !open, f);
    }
  });

  it('a work folder outside the root (`config.sh --work`), as `.runner` says', () => {
    const t = caseDir();
    const root = join(t, 'srv/runner');
    const work = join(t, 'data/work');
    installRunner(root, work);
    fillWork(work);
    const env = runnerEnv(work);
    const layout = detectRunnerLayout(env, asRunner(root));
    assert.equal(layout?.root, root);
    assert.equal(layout.work, work);
    const hidden = hideFor(layout, env);
    assert.ok(hidden.includes(root), 'the root holds nothing the sandbox needs: hidden whole');
    for (const f of [...files(root), ...files(work)]) {
      if (!isInside(f, join(work, '_temp/issue-agent/jobs'))) assert.ok(covered(f, hidden), f);
    }
  });

  it('a work folder other than the one `.runner` names is refused', () => {
    const t = caseDir();
    const root = join(t, 'srv/runner');
    installRunner(root, '_work');
    fillWork(join(t, 'elsewhere'));
    assert.throws(
      () => detectRunnerLayout(runnerEnv(join(t, 'elsewhere')), asRunner(root)),
      refusal(/`\.runner` names the work folder .*_work, RUNNER_TEMP says .*elsewhere/),
    );
  });

  it('a tool cache elsewhere stays visible with the PATH folders in it; PATH folders in the runner do not', () => {
    const t = caseDir();
    const root = join(t, 'opt/actions-runner');
    installRunner(root, '_work');
    fillWork(join(root, '_work'));
    const cache = join(t, 'opt/hostedtoolcache');
    write(cache, { 'Python/3.12.1/x64/bin/python3': '' });
    // An earlier step put folders of the runner on PATH (GITHUB_PATH): the root, a folder in RUNNER_TEMP.
    write(root, { '_work/_temp/tools/bin/helper': '' });
    const env = runnerEnv(join(root, '_work'), { RUNNER_TOOL_CACHE: cache });
    const layout = detectRunnerLayout(env, asRunner(root));
    assert.equal(layout?.toolCache, cache);
    const path = [
      join(cache, 'Python/3.12.1/x64/bin'),
      root,
      join(root, '_work/_temp/tools/bin'),
      '/usr/bin',
    ].join(':');
    const hidden = hideFor(layout, env, path);
    assert.ok(!covered(join(cache, 'Python/3.12.1/x64/bin/python3'), hidden));
    assert.ok(covered(join(root, '.credentials'), hidden), 'the root on PATH is not kept');
    assert.ok(covered(join(root, '_work/_temp/tools/bin/helper'), hidden), 'nor a folder in RUNNER_TEMP');
  });

  it('a tool cache or a jobs folder that holds the runner is refused', () => {
    const t = caseDir();
    const root = join(t, 'opt/actions-runner');
    installRunner(root, '_work');
    fillWork(join(root, '_work'));
    assert.throws(
      () =>
        detectRunnerLayout(
          runnerEnv(join(root, '_work'), { RUNNER_TOOL_CACHE: join(t, 'opt') }),
          asRunner(root),
        ),
      refusal(/RUNNER_TOOL_CACHE .* holds the runner's files/),
    );
    const env = runnerEnv(join(root, '_work'));
    const layout = detectRunnerLayout(env, asRunner(root));
    assert.throws(
      () =>
        runnerHidePaths({
          home: null,
          jobsDir: join(t, 'opt'),
          layout,
          checkout: null,
          path: '/usr/bin',
          extra: [],
        }),
      refusal(/the jobs folder \(the `work-dir` input\) .* stays visible/),
    );
  });

  it('a runner area the sandbox would not cover (a system folder) is refused', () => {
    const t = caseDir();
    fillWork(join(t, '_work'));
    const layout: RunnerLayout = {
      hosted: false,
      root: '/usr',
      work: join(t, '_work'),
      temp: join(t, '_work/_temp'),
      toolCache: null,
      evidence: [],
    };
    assert.throws(() => hideFor(layout, runnerEnv(join(t, '_work'))), refusal(/could not cover \/usr\b/));
  });
});

describe("finding a GitHub-hosted runner's files", () => {
  /** ubuntu-24.04: the runner unpacked per version under the home folder, the tool cache in /opt. */
  function hostedTree(): { home: string; env: NodeJS.ProcessEnv; proc: RunnerProcess } {
    const t = caseDir();
    const home = join(t, 'home/runner');
    const runner = join(home, 'actions-runner/cached');
    write(runner, {
      '.credentials': '{}',
      '.runner': '{}',
      '2.330.0/bin/Runner.Worker': '',
      '2.330.0/externals/node24/bin/node': '',
      '2.330.0/_diag/Worker_1.log': 'job details\n',
    });
    fillWork(join(home, 'work'));
    write(t, { 'opt/hostedtoolcache/node/24.1.0/x64/bin/node': '' });
    return {
      home,
      env: {
        ...runnerEnv(join(home, 'work')),
        RUNNER_ENVIRONMENT: 'github-hosted',
        RUNNER_TOOL_CACHE: join(t, 'opt/hostedtoolcache'),
        HOME: home,
      },
      proc: {
        execPath: join(runner, '2.330.0/externals/node24/bin/node'),
        parentExe: join(runner, '2.330.0/bin/Runner.Worker'),
      },
    };
  }

  it('everything in the home folder: accepted, the home hidden except the way to the jobs', () => {
    const { home, env, proc } = hostedTree();
    const layout = detectRunnerLayout(env, proc);
    assert.ok(layout !== null);
    assert.equal(layout.hosted, true);
    assert.equal(layout.root, null);
    assert.equal(layout.work, join(home, 'work'));
    const hidden = hideFor(layout, env);
    assert.ok(hidden.includes(join(home, 'actions-runner')));
    for (const f of files(home)) {
      if (!isInside(f, join(home, 'work/_temp/issue-agent/jobs'))) assert.ok(covered(f, hidden), f);
    }
  });

  it('the same tree on a runner that says it is self-hosted: refused (no registered runner folder)', () => {
    const { env, proc } = hostedTree();
    assert.throws(
      () => detectRunnerLayout({ ...env, RUNNER_ENVIRONMENT: 'self-hosted' }, proc),
      refusal(
        /runs from .*cached\/2\.330\.0, which holds no `bin\/Runner\.Worker` with `\.runner` or `config\.sh`/,
      ),
    );
  });

  it('a hosted runner whose work folder is not in its home: refused', () => {
    const { env, proc } = hostedTree();
    assert.throws(
      () => detectRunnerLayout({ ...env, HOME: '/root' }, proc),
      refusal(/is not in the home folder \/root, where a GitHub-hosted runner keeps it/),
    );
  });
});

describe('layouts that cannot be established are refused', () => {
  it('RUNNER_TEMP set but no runner folder anywhere', () => {
    const t = caseDir();
    fillWork(join(t, 'ci/_work'));
    assert.throws(
      () => detectRunnerLayout(runnerEnv(join(t, 'ci/_work')), notRunner),
      refusal(/no runner folder was found .*\/usr\/bin\/node.*\/usr\/bin\/bash/),
    );
  });

  it('a process path shaped like a runner in a folder that holds no runner', () => {
    const t = caseDir();
    fillWork(join(t, 'ci/_work'));
    write(t, { 'ci/bin/Runner.Worker': '' });
    assert.throws(
      () =>
        detectRunnerLayout(runnerEnv(join(t, 'ci/_work')), {
          execPath: '/usr/bin/node',
          parentExe: join(t, 'ci/bin/Runner.Worker'),
        }),
      refusal(/its parent process .* runs from .*ci, which holds no/),
    );
  });

  it('two runners named by the node and the parent process', () => {
    const t = caseDir();
    installRunner(join(t, 'a'), '_work');
    installRunner(join(t, 'b'), '_work');
    fillWork(join(t, 'a/_work'));
    assert.throws(
      () =>
        detectRunnerLayout(runnerEnv(join(t, 'a/_work')), {
          execPath: join(t, 'a/externals/node24/bin/node'),
          parentExe: join(t, 'b/bin.2.330.0/Runner.Worker'),
        }),
      refusal(
        /named differently by the action's node .* and the work folder.*\/a\) and by its parent process .*\/b\)/,
      ),
    );
  });

  it('a runner found, and a process of another runner-shaped folder', () => {
    const t = caseDir();
    const root = join(t, 'actions-runner');
    installRunner(root, '_work');
    fillWork(join(root, '_work'));
    write(t, { 'copy/bin/Runner.Worker': '' });
    assert.throws(
      () =>
        detectRunnerLayout(runnerEnv(join(root, '_work')), {
          execPath: join(root, 'externals/node24/bin/node'),
          parentExe: join(t, 'copy/bin/Runner.Worker'),
        }),
      refusal(/its parent process .* runs from .*\/copy, which is not the runner folder .*actions-runner/),
    );
  });

  it('RUNNER_TEMP not a `_temp` folder, RUNNER_WORKSPACE in another folder, RUNNER_TEMP missing', () => {
    const t = caseDir();
    const root = join(t, 'actions-runner');
    installRunner(root, '_work');
    fillWork(join(root, '_work'));
    const env = runnerEnv(join(root, '_work'));
    assert.throws(
      () => detectRunnerLayout({ ...env, RUNNER_TEMP: join(t, 'runner-temp') }, asRunner(root)),
      refusal(/RUNNER_TEMP \(.*runner-temp\) is not the `_temp` folder/),
    );
    assert.throws(
      () => detectRunnerLayout({ ...env, RUNNER_WORKSPACE: join(t, 'other/calc') }, asRunner(root)),
      refusal(/RUNNER_WORKSPACE .* is not in the work folder/),
    );
    assert.throws(
      () => detectRunnerLayout({ ...env, RUNNER_TEMP: undefined }, asRunner(root)),
      refusal(/RUNNER_TEMP is not set/),
    );
  });

  it('outside any runner (the action started by hand): no layout, nothing refused', () => {
    assert.equal(detectRunnerLayout({ HOME: '/home/me' }, notRunner), null);
  });

  it('after a self-update (bin and externals linked to versioned folders) the runner is found', () => {
    const t = caseDir();
    const root = join(t, 'actions-runner');
    installRunner(root, '_work');
    fillWork(join(root, '_work'));
    const layout = detectRunnerLayout(runnerEnv(join(root, '_work')), {
      execPath: join(root, 'externals.2.330.0/node20/bin/node'),
      parentExe: join(root, 'bin.2.330.0/Runner.Worker'),
    });
    assert.equal(layout?.root, root);
  });
});
