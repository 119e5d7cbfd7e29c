import assert from 'node:assert/strict';
import { chown, mkdir, readdir, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { DockerSandbox } from '../../../src/sandbox/docker/docker-sandbox.js';
import { dockerTest, execFileAsync, tempWorkspace, testOwner } from './docker-test-support.js';

async function initRepo(dir: string, asUser: string[] = []): Promise<(args: string[]) => Promise<string>> {
  const git = async (args: string[]): Promise<string> =>
    (
      await execFileAsync(
        asUser[0] ?? 'git',
        [...asUser.slice(1), ...(asUser.length > 0 ? ['git'] : []), ...args],
        {
          cwd: dir,
          env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, GIT_CONFIG_NOSYSTEM: '1' },
        },
      )
    ).stdout;
  await git(['init', '-q', '-b', 'main']);
  await git(['config', 'user.email', 'host@example.com']);
  await git(['config', 'user.name', 'Host']);
  await writeFile(join(dir, 'README.md'), 'hello\n');
  const st = await stat(dir);
  await chown(join(dir, 'README.md'), st.uid, st.gid);
  await git(['add', '-A']);
  await git(['commit', '-qm', 'initial']);
  return git;
}

const agentWrites = [
  'mkdir -p src/deep/er && echo "export const x = 1;" > src/deep/er/new.ts',
  'echo changed >> README.md',
  'chmod 600 src/deep/er/new.ts',
  'git status --porcelain',
  'ls -ln src/deep/er',
].join(' && ');

dockerTest(
  'ownership: a root host commits and deletes what the container user created',
  async (docker, t) => {
    if (process.getuid?.() !== 0) {
      t.skip('the host process is not root (the non-root case is the next test)');
      return;
    }
    const workspace = await tempWorkspace(t);
    const git = await initRepo(workspace);
    const sandbox = await DockerSandbox.create({
      docker,
      workspace,
      jobId: 'ownership-root',
      image: 'issue-agent/base:latest',
      setupNetwork: 'none',
      owner: testOwner('ownership'),
    });
    t.after(() => sandbox.close());
    assert.equal(sandbox.user, '1000:1000', 'never root in the container');
    const r = await sandbox.exec(agentWrites, { timeoutMs: 20_000 });
    assert.equal(r.exitCode, 0, r.output);
    assert.match(r.output, /M README.md/);
    // The agent can also use git inside the container on the host's repository.
    const inner = await sandbox.exec(
      'git add -A && git -c user.name=a -c user.email=a@b commit -qm agent && git log --oneline | wc -l',
      {
        timeoutMs: 20_000,
      },
    );
    assert.equal(inner.exitCode, 0, inner.output);
    await sandbox.close();

    await writeFile(join(workspace, 'host.txt'), 'host\n');
    await git(['add', '-A']);
    await git(['commit', '-qm', 'host commit']);
    assert.equal((await git(['status', '--porcelain'])).trim(), '');
    await execFileAsync('rm', ['-rf', join(workspace, 'src')]);
    await git(['rm', '-rq', '--cached', 'src']);
    await git(['commit', '-qm', 'remove']);
    await execFileAsync('rm', ['-rf', workspace]);
  },
);

dockerTest(
  'ownership: with a non-root host user the container runs as that user and the host owns every file',
  async (docker, t) => {
    if (process.getuid?.() !== 0) {
      t.skip('needs root to create a workspace owned by another user');
      return;
    }
    const uid = 4242;
    const workspace = await tempWorkspace(t);
    await chown(workspace, uid, uid);
    const asUser = ['setpriv', `--reuid=${uid}`, `--regid=${uid}`, '--clear-groups'];
    const git = await initRepo(workspace, asUser);
    const sandbox = await DockerSandbox.create({
      docker,
      workspace,
      jobId: 'ownership-user',
      image: 'issue-agent/base:latest',
      setupNetwork: 'none',
      owner: testOwner('ownership'),
    });
    t.after(() => sandbox.close());
    assert.equal(sandbox.user, `${uid}:${uid}`);
    const r = await sandbox.exec(`${agentWrites} && mkdir -p node_modules/x && touch node_modules/x/y`, {
      timeoutMs: 20_000,
    });
    assert.equal(r.exitCode, 0, r.output);
    assert.match(r.output, new RegExp(` ${uid} +${uid} `));
    await sandbox.close();

    await git(['add', '-A']);
    await git(['commit', '-qm', 'host commit as the workspace owner']);
    await execFileAsync(asUser[0] ?? 'setpriv', [
      ...asUser.slice(1),
      'rm',
      '-rf',
      join(workspace, 'src'),
      join(workspace, 'node_modules'),
    ]);
    assert.deepEqual((await readdir(workspace)).sort(), ['.git', 'README.md']);
    await mkdir(join(workspace, 'again'));
  },
);
