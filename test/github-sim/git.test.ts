import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { startGitHubSimulator, type GitHubSim } from '../support/github-sim/index.js';
import {
  CREDENTIAL_HELPER,
  git,
  gitResult,
  installationOctokit,
  installationToken,
  makeSourceRepo,
  tempDir,
  type TempDir,
} from './helpers.js';

let sim: GitHubSim;
let source: TempDir;
let work: TempDir;
let token: string;

before(async () => {
  sim = await startGitHubSimulator();
  source = await makeSourceRepo({ 'README.md': '# demo\n', 'src/a.js': 'export const a = 1;\n' });
  work = tempDir('github-sim-git-');
  await sim.createRepo({ owner: 'octo', name: 'private-demo', sourceDir: source.dir, private: true });
  await sim.createRepo({ owner: 'octo', name: 'public-demo', sourceDir: source.dir, defaultBranch: 'trunk' });
  token = (await installationToken(sim)).token;
});

after(async () => {
  await sim.close();
  source.cleanup();
  work.cleanup();
});

void test('cloning a private repository needs the token, supplied by a credential helper', async () => {
  const url = `${sim.url}/octo/private-demo.git`;
  const denied = await gitResult(work.dir, ['clone', '-q', url, 'denied']);
  assert.notEqual(denied.code, 0);
  assert.match(denied.stderr, /could not read Username|Authentication failed|terminal prompts disabled/);
  const challenged = sim.requests.filter(
    (r) => r.path === '/octo/private-demo.git/info/refs' && r.status === 401,
  );
  assert.ok(challenged.length > 0, 'the first request was answered 401');

  const wrong = await gitResult(work.dir, [...CREDENTIAL_HELPER, 'clone', '-q', url, 'wrong'], {
    SIM_TOKEN: 'ghs_wrong',
  });
  assert.notEqual(wrong.code, 0);

  await git(work.dir, [...CREDENTIAL_HELPER, 'clone', '-q', url, 'clone'], { SIM_TOKEN: token });
  const log = await git(join(work.dir, 'clone'), ['log', '--format=%s']);
  assert.equal(log.trim(), 'initial');
  assert.ok(
    !sim.requests.some(
      (r) => r.path.includes(token) || Object.keys(r.query).some((k) => r.query[k] === token),
    ),
  );
});

void test('a public repository clones anonymously; its default branch is the one asked for', async () => {
  await git(work.dir, ['clone', '-q', `${sim.url}/octo/public-demo`, 'public']);
  const branch = await git(join(work.dir, 'public'), ['rev-parse', '--abbrev-ref', 'HEAD']);
  assert.equal(branch.trim(), 'trunk');
});

void test('pushing needs the token; a push is recorded and moves the pull request head', async () => {
  const url = `${sim.url}/octo/private-demo.git`;
  const dir = join(work.dir, 'pusher');
  await git(work.dir, [...CREDENTIAL_HELPER, 'clone', '-q', url, 'pusher'], { SIM_TOKEN: token });
  await git(dir, ['checkout', '-q', '-b', 'issue-agent/fix-1']);
  writeFileSync(join(dir, 'src/a.js'), 'export const a = 2;\n');
  await git(dir, ['commit', '-q', '-am', 'fix: a is 2']);

  const anonymous = await gitResult(dir, ['push', '-q', 'origin', 'issue-agent/fix-1']);
  assert.notEqual(anonymous.code, 0);
  assert.equal(sim.pushes.length, 0);

  // The token as an http.extraHeader, as actions/checkout configures it.
  const basic = Buffer.from(`x-access-token:${token}`).toString('base64');
  await git(dir, ['push', '-q', 'origin', 'issue-agent/fix-1'], {
    GIT_CONFIG_COUNT: '1',
    GIT_CONFIG_KEY_0: 'http.extraHeader',
    GIT_CONFIG_VALUE_0: `Authorization: Basic ${basic}`,
  });
  assert.deepEqual(sim.pushes, [
    { owner: 'octo', repo: 'private-demo', user: sim.app.botLogin, refs: ['refs/heads/issue-agent/fix-1'] },
  ]);
  const pushedSha = (await git(dir, ['rev-parse', 'HEAD'])).trim();
  const bareLog = await git(sim.bareRepoPath('octo', 'private-demo'), [
    'log',
    '--format=%H %s',
    'issue-agent/fix-1',
    '-1',
  ]);
  assert.equal(bareLog.trim(), `${pushedSha} fix: a is 2`);

  const octokit = installationOctokit(sim);
  const { data: pull } = await octokit.rest.pulls.create({
    owner: 'octo',
    repo: 'private-demo',
    head: 'issue-agent/fix-1',
    base: 'main',
    title: 'Fix a',
  });
  assert.equal(pull.head.sha, pushedSha);

  writeFileSync(join(dir, 'src/a.js'), 'export const a = 3;\n');
  await git(dir, ['commit', '-q', '-am', 'fix: a is 3']);
  await git(dir, [...CREDENTIAL_HELPER, 'push', '-q', 'origin', 'issue-agent/fix-1'], { SIM_TOKEN: token });
  const newSha = (await git(dir, ['rev-parse', 'HEAD'])).trim();
  assert.equal(sim.pushes.length, 2);
  assert.equal(sim.pulls('octo', 'private-demo')[0]?.head.sha, newSha);
  const { data: reread } = await octokit.rest.pulls.get({
    owner: 'octo',
    repo: 'private-demo',
    pull_number: pull.number,
  });
  assert.equal(reread.head.sha, newSha);
  assert.equal(reread.commits, 2);
});

void test('an expired token cannot push', async () => {
  const shortLived = await startGitHubSimulator();
  try {
    await shortLived.createRepo({ owner: 'octo', name: 'demo', sourceDir: source.dir, private: true });
    const { token: expiring, expiresAt } = await installationToken(shortLived);
    const dir = join(work.dir, 'expiring');
    await git(
      work.dir,
      [...CREDENTIAL_HELPER, 'clone', '-q', `${shortLived.url}/octo/demo.git`, 'expiring'],
      { SIM_TOKEN: expiring },
    );
    await git(dir, ['commit', '-q', '--allow-empty', '-m', 'late']);
    shortLived.advanceClock(Date.parse(expiresAt) - Date.now());
    const late = await gitResult(dir, [...CREDENTIAL_HELPER, 'push', '-q', 'origin', 'HEAD:late'], {
      SIM_TOKEN: expiring,
    });
    assert.notEqual(late.code, 0);
    assert.deepEqual(shortLived.pushes, []);
  } finally {
    await shortLived.close();
  }
});
