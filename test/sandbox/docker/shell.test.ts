import assert from 'node:assert/strict';
import { DockerSandbox } from '../../../src/sandbox/docker/docker-sandbox.js';
import { dockerTest, tempWorkspace, testOwner } from './docker-test-support.js';

dockerTest('persistent shell: cwd and env persist between commands', async (docker, t) => {
  const workspace = await tempWorkspace(t);
  const sandbox = await DockerSandbox.create({
    docker,
    workspace,
    jobId: 'shell-persist',
    image: 'issue-agent/base:latest',
    owner: testOwner('shell'),
  });
  t.after(() => sandbox.close());

  assert.equal(sandbox.kind, 'docker');
  assert.equal(sandbox.workdir, '/workspace');
  const first = await sandbox.exec(
    'mkdir -p sub/dir && cd sub/dir && export GREETING=hello && X=unexported',
    {
      timeoutMs: 10_000,
    },
  );
  assert.equal(first.exitCode, 0, first.output);
  assert.equal(first.cwd, '/workspace/sub/dir');
  const second = await sandbox.exec('pwd; echo "$GREETING"; echo $$', { timeoutMs: 10_000 });
  assert.equal(second.exitCode, 0);
  const [pwd, greeting, pid1] = second.output.trim().split('\n');
  assert.equal(pwd, '/workspace/sub/dir');
  assert.equal(greeting, 'hello');
  const third = await sandbox.exec('echo $$; false', { timeoutMs: 10_000 });
  assert.equal(third.exitCode, 1);
  assert.equal(third.output.trim(), pid1, 'the same bash runs every command');
  // A failing command is data, and stderr is part of the output.
  const failing = await sandbox.exec('echo out; echo err >&2; exit 3', { timeoutMs: 10_000 });
  assert.equal(failing.exitCode, 3);
  assert.match(failing.output, /out\nerr/);
  assert.equal(failing.shellRestarted, true);
  const after = await sandbox.exec('pwd; echo "$GREETING"', { timeoutMs: 10_000 });
  assert.deepEqual(after.output.trim().split('\n'), ['/workspace/sub/dir', 'hello']);
});

dockerTest(
  'persistent shell: a timeout kills the command and its children inside the container; the shell goes on',
  async (docker, t) => {
    const workspace = await tempWorkspace(t);
    const sandbox = await DockerSandbox.create({
      docker,
      workspace,
      jobId: 'shell-timeout',
      image: 'issue-agent/base:latest',
      owner: testOwner('shell'),
    });
    t.after(() => sandbox.close());

    await sandbox.exec('cd /tmp && export KEEP=yes', { timeoutMs: 10_000 });
    // A child, a grandchild in a subshell and a pipeline, all sleeping far past the deadline.
    const started = performance.now();
    const r = await sandbox.exec('sleep 301 & (sleep 302; echo never) & bash -c "sleep 303 | cat"', {
      timeoutMs: 1500,
    });
    const elapsed = performance.now() - started;
    assert.equal(r.killed, 'timeout');
    assert.equal(r.exitCode, null);
    assert.ok(elapsed < 8000, `the kill took ${elapsed} ms`);
    assert.doesNotMatch(r.output, /^never$/m, 'the subshell was killed before its echo');

    const ps = await sandbox.exec('ps -e -o args=', { timeoutMs: 10_000 });
    assert.equal(ps.exitCode, 0);
    // (Lines before the ps list are bash reporting its killed jobs.)
    assert.doesNotMatch(ps.output, /^(sleep 30[123]|bash -c "sleep|cat$)/m, `left over:\n${ps.output}`);
    const next = await sandbox.exec('pwd; echo "$KEEP"; echo ok', { timeoutMs: 10_000 });
    assert.deepEqual(next.output.trim().split('\n'), ['/tmp', 'yes', 'ok']);
    assert.equal(next.shellRestarted, false);

    // Cancelling through the signal works the same way.
    const abort = new AbortController();
    const pending = sandbox.exec('sleep 304', { timeoutMs: 60_000, signal: abort.signal });
    setTimeout(() => {
      abort.abort();
    }, 200);
    const cancelled = await pending;
    assert.equal(cancelled.killed, 'cancelled');
    assert.equal((await sandbox.exec('echo still-here', { timeoutMs: 10_000 })).output, 'still-here\n');
  },
);

dockerTest(
  'persistent shell: a builtin busy loop is ended by replacing the shell with the same cwd and env',
  async (docker, t) => {
    const workspace = await tempWorkspace(t);
    const sandbox = await DockerSandbox.create({
      docker,
      workspace,
      jobId: 'shell-busy',
      image: 'issue-agent/base:latest',
      owner: testOwner('shell'),
    });
    t.after(() => sandbox.close());
    await sandbox.exec('cd /tmp && export KEEP=busy', { timeoutMs: 10_000 });
    const r = await sandbox.exec('while :; do :; done', { timeoutMs: 1000 });
    assert.equal(r.killed, 'timeout');
    const next = await sandbox.exec('pwd; echo "$KEEP"', { timeoutMs: 10_000 });
    assert.deepEqual(next.output.trim().split('\n'), ['/tmp', 'busy']);
    // Two shells: the agent's (replaced, not duplicated) and the harness's. The replaced one is
    // killed as the new one starts, and on a loaded machine it can take a moment to be gone.
    let shells = '';
    for (let i = 0; i < 40; i++) {
      shells = (
        await sandbox.exec('ps -e -o stat=,args= | grep -v "^Z" | grep -c " [i]a-shell"', {
          timeoutMs: 10_000,
        })
      ).output.trim();
      if (shells === '2') break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(shells, '2');
  },
);

dockerTest(
  'persistent shell: the environment sets nothing that changes colour detection',
  async (docker, t) => {
    const workspace = await tempWorkspace(t);
    const sandbox = await DockerSandbox.create({
      docker,
      workspace,
      jobId: 'shell-env',
      image: 'issue-agent/base:latest',
      owner: testOwner('shell'),
    });
    t.after(() => sandbox.close());
    const r = await sandbox.exec('env', { timeoutMs: 10_000 });
    assert.match(r.output, /^HOME=/m);
    assert.doesNotMatch(r.output, /^(NO_COLOR|FORCE_COLOR|CLICOLOR|CLICOLOR_FORCE)=/m);
  },
);

dockerTest(
  "lazy agent shell: only the harness's shell runs until the agent's first command starts its own",
  async (docker, t) => {
    const workspace = await tempWorkspace(t);
    const sandbox = await DockerSandbox.create({
      docker,
      workspace,
      jobId: 'shell-lazy',
      image: 'issue-agent/base:latest',
      owner: testOwner('shell'),
      lazyAgentShell: true,
    });
    t.after(() => sandbox.close());
    const shells = async (): Promise<number> =>
      Number(
        (
          await sandbox.harnessExec(
            // The harness's shell runs the image's unreadable copy of bash (agent-user.ts).
            'n=0; for f in /proc/[0-9]*/comm; do case "$(cat "$f" 2>/dev/null)" in bash | harness-bash) n=$((n+1)) ;; esac; done; echo $n',
            { timeoutMs: 10_000 },
          )
        ).output.trim(),
      );
    assert.equal(await shells(), 1, "the harness's shell alone");
    const first = await sandbox.exec('export X=1; cd /tmp', { timeoutMs: 10_000 });
    assert.equal(first.exitCode, 0, first.output);
    assert.equal(await shells(), 2);
    assert.equal((await sandbox.exec('echo "$X $PWD"', { timeoutMs: 10_000 })).output, '1 /tmp\n');
  },
);
