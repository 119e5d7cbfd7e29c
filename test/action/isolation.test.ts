import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileCommandPaths, runnerHidePaths } from '../../src/action/isolation.js';

describe('what the namespaced sandbox hides on a runner', () => {
  const home = mkdtempSync(join(tmpdir(), 'ia-home-'));
  after(() => {
    rmSync(home, { recursive: true, force: true });
  });

  it("every entry of the runner's home off the path to the jobs, each sibling on it, never the path itself", () => {
    // /home/runner as a hosted runner has it.
    for (const d of [
      'actions-runner/cached',
      'work/_temp/_runner_file_commands',
      'work/_temp/issue-agent/jobs',
      'work/_temp/other-action',
      'work/calc/calc/.git',
      '.docker',
    ])
      mkdirSync(join(home, d), { recursive: true });
    writeFileSync(join(home, '.credentials'), '{}');
    writeFileSync(join(home, 'work/_temp/_runner_file_commands/set_env_1'), '');
    symlinkSync('/usr', join(home, 'usr-link'));
    const jobs = join(home, 'work/_temp/issue-agent/jobs');
    const hidden = runnerHidePaths({
      home,
      jobsDir: jobs,
      extra: [
        ...fileCommandPaths({ GITHUB_ENV: join(home, 'work/_temp/_runner_file_commands/set_env_1') }),
        join(home, 'work/calc/calc'),
        join(home, 'work'), // on the way to the jobs: never hidden
        '/nonexistent/x',
      ],
    });
    assert.deepEqual(
      hidden.map((p) => p.slice(home.length)),
      [
        '/.credentials',
        '/.docker',
        '/actions-runner',
        '/work/_temp/_runner_file_commands',
        '/work/_temp/_runner_file_commands/set_env_1',
        '/work/_temp/other-action',
        '/work/calc',
        '/work/calc/calc',
      ],
    );
  });

  it('jobs outside home: only the named paths', () => {
    const hidden = runnerHidePaths({ home, jobsDir: '/srv/jobs', extra: [join(home, '.docker')] });
    assert.deepEqual(hidden, [join(home, '.docker')]);
  });
});
