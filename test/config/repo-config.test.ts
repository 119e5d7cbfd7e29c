import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseRepoConfig, RepoConfigError } from '../../src/config/repo-config.js';

const defaults = { label: 'agent', handle: '@agent' };

/** The RepoConfigError that parsing `raw` throws (fails the test if it parses). */
function problems(raw: unknown): readonly string[] {
  try {
    parseRepoConfig(raw, defaults);
  } catch (error) {
    assert.ok(error instanceof RepoConfigError, String(error));
    return error.problems;
  }
  assert.fail(`${JSON.stringify(raw)} parsed`);
}

test('the default policy blocks .github/** and gitlinks', () => {
  const { policy } = parseRepoConfig(null, defaults);
  assert.equal(policy.allowWorkflowChanges, false);
  assert.equal(policy.allowGithubChanges, false);
  assert.equal(policy.allowGitlinks, false);
  assert.ok(Object.isFrozen(policy));
});

test('both can be allowed by a repository', () => {
  const { policy } = parseRepoConfig(
    { policy: { allowGithubChanges: true, allowGitlinks: true, blockedPaths: ['*.pem'] } },
    defaults,
  );
  assert.equal(policy.allowGithubChanges, true);
  assert.equal(policy.allowGitlinks, true);
  assert.deepEqual(policy.blockedPaths, ['*.pem']);
});

test('a misspelt key under policy: is an error that names the key and where it is', () => {
  const found = problems({ policy: { allowGitlink: true, blockedPath: ['secrets/'] } });
  assert.equal(found.length, 1, found.join('\n'));
  assert.match(found[0] ?? '', /^policy: /);
  assert.match(found[0] ?? '', /"allowGitlink"/);
  assert.match(found[0] ?? '', /"blockedPath"/);
  assert.throws(
    () => parseRepoConfig({ policy: { maxChangedLine: 10 } }, defaults),
    /policy: .*maxChangedLine/,
  );
});

test('unknown keys are errors at every level of the file', () => {
  assert.match(problems({ lable: 'x' })[0] ?? '', /lable/);
  assert.match(problems({ budgets: { maxStep: 3 } })[0] ?? '', /^budgets: .*maxStep/);
});
