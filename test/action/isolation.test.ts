import assert from 'node:assert/strict';
import { attackTest } from '../security/support.js';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { fileCommandPaths, runnerHidePaths } from '../../src/action/isolation.js';
import { isolationSupport } from '../../src/sandbox/local/launch.js';
import { localShellHost } from '../../src/sandbox/local/local-sandbox.js';
import { ShellSession } from '../../src/sandbox/shell-session.js';

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
      layout: null,
      checkout: join(home, 'work/calc/calc'),
      path: '/usr/bin:/bin',
      extra: [
        ...fileCommandPaths({ GITHUB_ENV: join(home, 'work/_temp/_runner_file_commands/set_env_1') }),
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

  it('jobs outside home (a `work-dir` input elsewhere): the whole home, and the named paths', () => {
    const hidden = runnerHidePaths({
      home,
      jobsDir: '/srv/jobs',
      layout: null,
      checkout: null,
      path: '/usr/bin:/bin',
      extra: [join(home, '.docker'), '/srv/keys'],
    });
    assert.deepEqual(hidden, [home, join(home, '.docker')].filter((p) => existsSync(p)).sort());
  });
});

/**
 * The hide list on a runner-shaped home, applied by the isolated local sandbox: a prompt-injected
 * agent in the job's workspace finds the runner's credentials, the workflow's checkout (with the
 * token actions/checkout persisted), the file commands and the job's pristine clone covered, and
 * cannot undo that; its workspace stays writable. The home lives outside /tmp, as a runner's does
 * (the sandbox's /tmp is private anyway).
 */
const support = await isolationSupport();
describe(
  'a runner-shaped home in the isolated sandbox',
  { skip: support.ok ? false : support.reason },
  () => {
    const TOKEN = 'ghs_persistedCHECKOUTtoken0123456789';
    let home: string;
    let ws: string;
    let host: ReturnType<typeof localShellHost>;
    let session: ShellSession;

    before(async () => {
      const artifacts = join(fileURLToPath(new URL('../..', import.meta.url)), 'test-artifacts', 'isolation');
      mkdirSync(artifacts, { recursive: true });
      home = mkdtempSync(join(artifacts, 'runner-'));
      chmodSync(home, 0o755);
      const jobs = join(home, 'work/_temp/issue-agent/jobs');
      ws = join(jobs, 'job-1/workspace');
      for (const d of ['runners/2.330.0', 'work/_temp/_runner_file_commands', 'work/calc/calc/.git'])
        mkdirSync(join(home, d), { recursive: true });
      mkdirSync(ws, { recursive: true });
      mkdirSync(join(jobs, 'job-1/pristine/.git'), { recursive: true });
      writeFileSync(join(home, 'runners/2.330.0/.credentials'), `{"token":"${TOKEN}"}`);
      writeFileSync(
        join(home, 'work/calc/calc/.git/config'),
        `extraheader = AUTHORIZATION: basic ${TOKEN}\n`,
      );
      writeFileSync(join(jobs, 'job-1/pristine/.git/config'), `[http]\n\textraheader = ${TOKEN}\n`);
      const setEnv = join(home, 'work/_temp/_runner_file_commands/set_env_1');
      writeFileSync(setEnv, '');
      writeFileSync(join(ws, 'a.txt'), 'hello\n');
      const hide = [
        join(jobs, 'job-1/pristine'),
        ...runnerHidePaths({
          home,
          jobsDir: jobs,
          layout: null,
          checkout: join(home, 'work/calc/calc'),
          path: '/usr/bin:/bin',
          extra: fileCommandPaths({ GITHUB_ENV: setEnv }),
        }),
      ];
      host = localShellHost(ws, { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', HOME: '/tmp/home' }, { hide });
      session = new ShellSession(host, {
        workdir: ws,
        stateFile: '/dev/null',
        capture: { headBytes: 65536, tailBytes: 65536, spillDir: home },
      });
      await session.start();
    });

    after(async () => {
      session.close();
      await host.close();
      rmSync(home, { recursive: true, force: true });
    });

    attackTest('finds no token anywhere under the home, even after trying to unmount', async () => {
      const r = await session.exec(
        `for m in $(grep -o ' ${home}[^ ]*' /proc/self/mountinfo); do umount -l "$m" 2>/dev/null; done; ` +
          `unshare -U -m -r sh -c 'umount -R ${home}/work 2>/dev/null; grep -ra ghs_ ${home}' 2>/dev/null; grep -ra ghs_ ${home}; echo end`,
        { timeoutMs: 20_000 },
      );
      assert.ok(!r.output.includes(TOKEN), r.output);
      assert.match(r.output, /end\n$/);
    });

    attackTest('cannot leave a file command for a later step; its workspace is writable', async () => {
      const setEnv = join(home, 'work/_temp/_runner_file_commands/set_env_1');
      const r = await session.exec(
        `(echo 'NODE_OPTIONS=--require=/x' >> ${setEnv}) 2>/dev/null || echo refused; (touch ${home}/work/_temp/_runner_file_commands/set_env_2) 2>/dev/null || echo refused; echo y > b.txt && cat a.txt b.txt`,
        { timeoutMs: 20_000 },
      );
      assert.equal(r.output, 'refused\nrefused\nhello\ny\n');
      assert.equal(readFileSync(setEnv, 'utf8'), '');
      assert.equal(readFileSync(join(ws, 'b.txt'), 'utf8'), 'y\n');
    });
  },
);
